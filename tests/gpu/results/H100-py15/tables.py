"""py15: the README's tables from run.sh's JSON (tar xzf callN-json.tgz -C DIR;
python3 tables.py DIR): per op and size, medians of the per-round Python/C
ratios per pass and over all passes' rounds, and what Python adds per window
of 16 (per pass: the median us/op difference x 16)."""
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


for op in ("send", "write"):
    passes = []
    while load("%s%d" % (op, len(passes) + 1)):
        passes.append(load("%s%d" % (op, len(passes) + 1)))
    np_ = len(passes)
    mixed = op == "send" and passes[0][0].get("mixed_rounds")
    print("## %s, Python/C: medians of the per-round ratios, %d passes" % (op, np_))
    print("| MiB | C us/op by pass | persist by pass | persist, all rounds | group by pass |"
          " group, all rounds | persist adds / window | group adds / window |" + (
              " mixed, mixedr (persist), all |" if mixed else ""))
    print("|---|---|---|---|---|---|---|---|" + ("---|" if mixed else ""))
    for i, r1 in enumerate(passes[0]):
        rows = [p[i] for p in passes]
        pr = [ratios(r, "py_us_rounds") for r in rows]
        gr = [ratios(r, "group_us_rounds") for r in rows]
        add = lambda key: ", ".join("%.2f" % (16 * (st.median(r[key]) - st.median(  # noqa
            r["c_us_rounds"]))) for r in rows)
        fmt = lambda xs: ", ".join("%.3f" % x for x in xs)  # noqa: E731
        line = "| %d | %s | %s | **%.3f** | %s | %.3f | %s us | %s us |" % (
            r1["size"] >> 20, fmt(st.median(r["c_us_rounds"]) for r in rows),
            fmt(st.median(x) for x in pr), st.median(sum(pr, [])),
            fmt(st.median(x) for x in gr), st.median(sum(gr, [])),
            add("py_us_rounds"), add("group_us_rounds"))
        if mixed:
            m = [c / x for r in rows for c, x in zip(r["c_us_rounds"], r["mixed_rounds"])]
            mr = [c / x for r in rows for c, x in zip(r["c_us_rounds"], r["mixedr_rounds"])]
            line += " %.3f, %.3f |" % (st.median(m), st.median(mr))
        print(line)
    print()
for op in ("send", "write"):
    rows = load(op + "4k")
    if not rows:
        continue
    r = rows[0]
    c = st.median(r["c_us_rounds"])
    print("4 KiB %s: C %.3f us/op; Python adds per op (median): persist %+.3f, group %+.3f, "
          "one call per transfer %+.3f us" % (
              op, c, st.median(r["py_us_rounds"]) - c, st.median(r["group_us_rounds"]) - c,
              st.median(r["one_us_rounds"]) - c))
