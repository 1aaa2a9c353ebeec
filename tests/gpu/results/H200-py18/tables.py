"""py18: the summary of run.sh's JSON (python3 tables.py DIR, or tar xzf
py18-logs.tgz -C DIR first). Per op and size, for main and this branch
(both --post pgroup): C's us/op (median of all rounds), the median of the
per-round Python/C bandwidth ratios (C's time / Python's) by pass and over
all rounds, their min-max, and what Python adds per window of 16 (median of
the per-round us/op differences x 16); then mine/main of the adds."""
import json
import os
import statistics as st
import sys

d = sys.argv[1]


def load(name):
    p = os.path.join(d, name + ".json")
    return json.load(open(p))["rows"] if os.path.exists(p) else None


for op in ("send", "write"):
    runs = {"main": [], "mine": []}
    for tree in runs:
        while load("%s-%s%d" % (tree, op, len(runs[tree]) + 1)):
            runs[tree].append(load("%s-%s%d" % (tree, op, len(runs[tree]) + 1)))
    if not runs["main"] or len(runs["main"]) != len(runs["mine"]):
        print("%s: missing runs (main %d, mine %d)" % (op, len(runs["main"]), len(runs["mine"])))
        continue
    n = len(runs["main"][0][0]["c_us_rounds"])
    print("## %s: Python/C (pgroup), %d passes of %d rounds" % (op, len(runs["main"]), n))
    print("| MiB | tree | C us/op | Py/C by pass | **all rounds** | min-max | adds us/window |")
    print("|---|---|---|---|---|---|---|")
    for i, r0 in enumerate(runs["main"][0]):
        adds = {}
        for tree in ("main", "mine"):
            rows = [p[i] for p in runs[tree]]
            per = [[c / p for c, p in zip(r["c_us_rounds"], r["py_us_rounds"])] for r in rows]
            allr = sum(per, [])
            adds[tree] = st.median([16 * (p - c) for r in rows
                                    for c, p in zip(r["c_us_rounds"], r["py_us_rounds"])])
            cs = sum((r["c_us_rounds"] for r in rows), [])
            print("| %g | %s | %.3f | %s | **%.3f** | %.3f-%.3f | %+.2f |" % (
                r0["size"] / 2**20, tree, st.median(cs), ", ".join("%.3f" % st.median(x) for x in per),
                st.median(allr), min(allr), max(allr), adds[tree]))
    print()
