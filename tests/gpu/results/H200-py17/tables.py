"""Tables of py17's call: python3 tables.py DIR (DIR: py17-logs.tgz unpacked).
Per op, size and variant, over every round of every pass (ab-OPn.json):
C's and Python's median us/op, Py/C (the median of the per-round ratios,
each pass's median, min-max), and C/C0, Py/Py0 (the first variant's time
over this one's, per round: > 1 is faster than q64)."""
import glob
import json
import statistics
import sys

med = statistics.median
d = sys.argv[1] if len(sys.argv) > 1 else "."
for op in ("send", "write"):
    files = sorted(glob.glob("%s/ab-%s[0-9].json" % (d, op)))
    if not files:
        continue
    acc = {}
    for f in files:
        for r in json.load(open(f))["rows"]:
            a = acc.setdefault((r["size"], r["variant"]), {"c": [], "p": [], "rat": [],
                                                           "pass": [], "cr": [], "pr": []})
            a["c"] += r["c_us_rounds"]
            a["p"] += r["py_us_rounds"]
            rat = [x / y for x, y in zip(r["c_us_rounds"], r["py_us_rounds"])]
            a["rat"] += rat
            a["pass"].append(med(rat))
    for (size, v), a in acc.items():  # against the first variant, round by round
        ref = acc[(size, "q64")]
        a["cr"] = [x / y for x, y in zip(ref["c"], a["c"])]
        a["pr"] = [x / y for x, y in zip(ref["p"], a["p"])]
    print("# %s: %d passes; Py/C over all rounds (each pass), min-max; C/C0 and Py/Py0: "
          "q64's time / this one's, median of rounds" % (op, len(files)))
    print("%6s %6s %8s %8s %7s %13s %13s %6s %6s" % ("MiB", "var", "C us", "Py us", "Py/C",
                                                     "by pass", "min-max", "C/C0", "Py/Py0"))
    for (size, v), a in sorted(acc.items(), key=lambda kv: (kv[0][0], ["q64", "q4k", "lazy0"].index(kv[0][1]) if kv[0][1] in ("q64", "q4k", "lazy0") else 9)):
        print("%6g %6s %8.3f %8.3f %7.3f %13s %6.3f-%-6.3f %6.3f %6.3f" % (
            size / 2**20, v, med(a["c"]), med(a["p"]), med(a["rat"]),
            "/".join("%.3f" % x for x in a["pass"]), min(a["rat"]), max(a["rat"]),
            med(a["cr"]), med(a["pr"])))
    print()

# The variants did not differ (C/C0 within noise): every round of every
# variant and pass is a sample of Py/C; what Python adds per window (16 ops)
for op in ("send", "write"):
    pool = {}
    for f in sorted(glob.glob("%s/ab-%s[0-9].json" % (d, op))):
        for r in json.load(open(f))["rows"]:
            p = pool.setdefault(r["size"], {"rat": [], "add": [], "c": []})
            p["rat"] += [x / y for x, y in zip(r["c_us_rounds"], r["py_us_rounds"])]
            p["add"] += [(y - x) * 16 for x, y in zip(r["c_us_rounds"], r["py_us_rounds"])]
            p["c"] += r["c_us_rounds"]
    if not pool:
        continue
    print("# %s, pooled: Py/C per round (median, quartiles), rounds below 0.98, Python's "
          "added us per window (median), C's window (us), 1 - added/window" % op)
    print("%6s %4s %7s %13s %6s %9s %9s %9s" % ("MiB", "n", "Py/C", "q25-q75", "<0.98",
                                                "adds us", "C window", "model"))
    for s, p in sorted(pool.items()):
        r = sorted(p["rat"])
        n = len(r)
        add, win = med(p["add"]), med(p["c"]) * 16
        print("%6g %4d %7.3f %6.3f-%-6.3f %6d %9.2f %9.1f %9.3f" % (
            s / 2**20, n, med(r), r[n // 4], r[(3 * n) // 4], sum(x < 0.98 for x in r), add,
            win, 1 - add / win))
    print()
