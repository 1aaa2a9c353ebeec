#!/usr/bin/env python3
"""ofi-variants.py JOBS: perf_ofi jobs of several variants side by side
(results/ofi/ofi17-H200host). JOBS is the jobs.txt of ofi-device-s17.sh:
"### NAME: ..." headers (NAME = variant-round), then perf_ofi's op rows.
Per (op, size) and variant: the median over jobs of each job's median pair
ratio (uccl / raw), quartiles, range, jobs >= 0.95, median GB/s; then per
variant against r64, the rounds it was better in and the median difference
of the two jobs of a round."""
import re,sys,statistics as st
jobs={}; cur=None
for line in open(sys.argv[1]):
    m=re.match(r"### (\S+):",line)
    if m: cur=m.group(1); jobs[cur]={}; continue
    p=line.split()
    if cur and len(p)==8 and p[0] in("write","read","send") and p[1].isdigit():
        jobs[cur][(p[0],int(p[1]))]=dict(raw=float(p[2]),uccl=float(p[3]),pair=float(p[5]))
def var(j): return j.rsplit('-',1)[0]
keys=sorted({k for j in jobs.values() for k in j})
vs=sorted({var(j) for j in jobs}, key=lambda v:(v.startswith('small'),v.startswith('phases'),-int(re.sub(r'\D','',v) or 0)))
for k in keys:
    print(k)
    for v in vs:
        vals=[jobs[j][k]['pair'] for j in jobs if var(j)==v and k in jobs[j]]
        if not vals: continue
        q=st.quantiles(vals,n=4) if len(vals)>1 else [vals[0]]*3
        raws=[jobs[j][k]['raw'] for j in jobs if var(j)==v and k in jobs[j]]
        us=[jobs[j][k]['uccl'] for j in jobs if var(j)==v and k in jobs[j]]
        print(f"  {v:10s} n={len(vals):2d} median {st.median(vals):.3f} [{q[0]:.3f}-{q[2]:.3f}] ({min(vals):.3f}-{max(vals):.3f}) >=0.95: {sum(x>=0.95 for x in vals)}  raw {st.median(raws):.2f} uccl {st.median(us):.2f} GB/s")
# per-round pairs vs r64
rounds=sorted({j.rsplit('-',1)[1] for j in jobs if j.startswith('r')})
for k in keys:
    for v in ('r16','r4'):
        d=[]
        for r in rounds:
            a=jobs.get(f"r64-{r}",{}).get(k); b=jobs.get(f"{v}-{r}",{}).get(k)
            if a and b: d.append(b['pair']-a['pair'])
        if d: print(f"{k} {v} vs r64: rounds better {sum(x>0 for x in d)} of {len(d)}, median diff {st.median(d):+.3f}")
