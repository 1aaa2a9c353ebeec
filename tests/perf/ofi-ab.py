#!/usr/bin/env python3
"""ofi-ab.py JOBS [VARIANT...]: the tables of ofi-device-ab.sh (replaces
ofi18's ofi-pairs-s18.py). JOBS is its jobs.txt: "### VARIANT-ROUND: ..."
headers, then perf_ofi's op rows (op size raw uccl ratio pair q1 q3) of one
or more perf_ofi runs. Per (op, size) and variant (in the order given, else
as found): the median over jobs of each job's median pair ratio (uccl / raw
libfabric in the same job), quartiles, range, jobs >= 0.95, median GB/s;
then for every other variant against the first: the rounds where it beat
the first and the median difference within a round."""
import re
import statistics as st
import sys

jobs, cur = {}, None
for line in open(sys.argv[1]):
    m = re.match(r"### (\S+)-(\d+):", line)
    if m:
        cur = (m.group(1), int(m.group(2)))
        jobs[cur] = {}
        continue
    p = line.split()
    if cur and len(p) == 8 and p[0] in ("write", "read", "send", "sendv") and p[1].isdigit():
        jobs[cur][(p[0], int(p[1]))] = dict(raw=float(p[2]), uccl=float(p[3]), pair=float(p[5]))
variants = sys.argv[2:] or list(dict.fromkeys(v for v, _ in jobs))
keys = sorted({k for j in jobs.values() for k in j})
rounds = sorted({r for _, r in jobs})
print("op size | variant jobs | median [q1-q3] (range) | >=0.95 | raw / uccl GB/s")
for k in keys:
    for v in variants:
        rows = [jobs[(v, r)][k] for r in rounds if k in jobs.get((v, r), {})]
        if not rows:
            continue
        vals = [x["pair"] for x in rows]
        q = st.quantiles(vals, n=4) if len(vals) > 1 else [vals[0]] * 3
        print(f"{k[0]:5s} {k[1]:6d} | {v:6s} {len(vals):2d} | {st.median(vals):.3f} "
              f"[{q[0]:.3f}-{q[2]:.3f}] ({min(vals):.3f}-{max(vals):.3f}) | "
              f"{sum(x >= 0.95 for x in vals):2d} | {st.median(x['raw'] for x in rows):.2f} / "
              f"{st.median(x['uccl'] for x in rows):.2f}")
    for v in variants[1:]:
        d = [jobs[(v, r)][k]["pair"] - jobs[(variants[0], r)][k]["pair"] for r in rounds
             if k in jobs.get((v, r), {}) and k in jobs.get((variants[0], r), {})]
        if d:
            print(f"{k[0]:5s} {k[1]:6d} | {v} > {variants[0]} in {sum(x > 0 for x in d)} of "
                  f"{len(d)} rounds, median difference {st.median(d):+.3f}")
