#!/usr/bin/env python3
"""ofi-pairs-s18.py JOBS: ofi18's device A/B (ofi-device-s18.sh). JOBS is its
jobs.txt: "### VARIANT-PAIR: ..." headers (VARIANT base or new, PAIR a
number), then perf_ofi's op rows (op size raw uccl ... pair-median ...).
Per (op, size): for base and new the median over jobs of each job's median
pair ratio (uccl / raw libfabric in the same job), quartiles, range, jobs
>= 0.95, median GB/s; then the pairs where new beat base and the median
difference within a pair."""
import re
import statistics as st
import sys

jobs, cur = {}, None
for line in open(sys.argv[1]):
    m = re.match(r"### (\S+):", line)
    if m:
        cur = m.group(1)
        jobs[cur] = {}
        continue
    p = line.split()
    if cur and len(p) == 8 and p[0] in ("write", "read", "send") and p[1].isdigit():
        jobs[cur][(p[0], int(p[1]))] = dict(raw=float(p[2]), uccl=float(p[3]), pair=float(p[5]))
keys = sorted({k for j in jobs.values() for k in j})
pairs = sorted({j.split("-", 1)[1] for j in jobs}, key=lambda x: int(x) if x.isdigit() else x)
print("op size | variant jobs | median [q1-q3] (range) | >=0.95 | raw / uccl GB/s")
for k in keys:
    for v in ("base", "new"):
        vals = [jobs[j][k]["pair"] for j in jobs if j.startswith(v + "-") and k in jobs[j]]
        if not vals:
            continue
        q = st.quantiles(vals, n=4) if len(vals) > 1 else [vals[0]] * 3
        raws = [jobs[j][k]["raw"] for j in jobs if j.startswith(v + "-") and k in jobs[j]]
        us = [jobs[j][k]["uccl"] for j in jobs if j.startswith(v + "-") and k in jobs[j]]
        print(f"{k[0]:5s} {k[1]:6d} | {v:4s} {len(vals):2d} | {st.median(vals):.3f} "
              f"[{q[0]:.3f}-{q[2]:.3f}] ({min(vals):.3f}-{max(vals):.3f}) | "
              f"{sum(x >= 0.95 for x in vals):2d} | {st.median(raws):.2f} / {st.median(us):.2f}")
    d = [jobs[f"new-{p}"][k]["pair"] - jobs[f"base-{p}"][k]["pair"] for p in pairs
         if k in jobs.get(f"new-{p}", {}) and k in jobs.get(f"base-{p}", {})]
    if d:
        print(f"{k[0]:5s} {k[1]:6d} | new > base in {sum(x > 0 for x in d)} of {len(d)} pairs, "
              f"median pair difference {st.median(d):+.3f}")
