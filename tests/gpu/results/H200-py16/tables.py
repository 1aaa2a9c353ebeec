"""py16: the README's tables from run.sh's JSON (tar xzf py16-json.tgz -C DIR;
python3 tables.py DIR). Per op and size: main's persist loop and this
branch's pgroup and persist loops, each as the median of its per-round
Python/C ratios (C in the same processes) per pass, then over all rounds of
all passes (bold), the per-round min-max over all passes, and what Python
adds per window of 16 (median us/op Py - C, x 16, all rounds)."""
import json
import os
import statistics as st
import sys

d = sys.argv[1]


def load(name):
    p = os.path.join(d, name + ".json")
    return json.load(open(p))["rows"] if os.path.exists(p) else None


def ratios(row, key):
    return [c / p for c, p in zip(row["c_us_rounds"], row[key])]


def cell(rows, key):
    per = [ratios(r, key) for r in rows]
    allr = sum(per, [])
    adds = [16 * (p - c) for r in rows for c, p in zip(r["c_us_rounds"], r[key])]
    return "%s | **%.3f** | %.3f-%.3f | %+.2f" % (
        ", ".join("%.3f" % st.median(x) for x in per), st.median(allr), min(allr), max(allr),
        st.median(adds))


for op in ("send", "write"):
    main, mine = [], []
    while load("main-%s%d" % (op, len(main) + 1)):
        main.append(load("main-%s%d" % (op, len(main) + 1)))
        mine.append(load("mine-%s%d" % (op, len(mine) + 1)))
    n = len(main)
    print("## %s: Python/C, %d passes of %d rounds" % (op, n, len(main[0][0]["c_us_rounds"])))
    print("| MiB | loop | C us/op by pass | Py/C by pass | all rounds | min-max | "
          "adds us/window |")
    print("|---|---|---|---|---|---|---|")
    for i, r0 in enumerate(main[0]):
        for label, runs, key in (("main persist", main, "py_us_rounds"),
                                 ("py16 pgroup", mine, "py_us_rounds"),
                                 ("py16 persist", mine, "persist_us_rounds")):
            rows = [p[i] for p in runs]
            c = ", ".join("%.3f" % st.median(r["c_us_rounds"]) for r in rows)
            print("| %d | %s | %s | %s |" % (r0["size"] >> 20, label, c, cell(rows, key)))
    print()
for op in ("send", "write"):
    a, b = load("main-%s4k" % op), load("mine-%s4k" % op)
    if not a:
        continue
    ca, cb = st.median(a[0]["c_us_rounds"]), st.median(b[0]["c_us_rounds"])
    print("4 KiB %s: Python adds per op (median us/op Py - C): main persist %+.3f (C %.3f); "
          "py16 pgroup %+.3f, py16 persist %+.3f (C %.3f)" % (
              op, st.median(a[0]["py_us_rounds"]) - ca, ca, st.median(b[0]["py_us_rounds"]) - cb,
              st.median(b[0]["persist_us_rounds"]) - cb, cb))
