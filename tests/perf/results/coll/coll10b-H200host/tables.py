#!/usr/bin/env python3
"""tables.py [DIR]: uccl time / the faster reference per size for the three builds of this
run (run/, nopoll/, base/): ob1 from the same job, UCX from run/'s mpirun (the only UCX one)."""
import json,os,sys
d=sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
def load(sub,op,np_):
    p=os.path.join(d,sub or "run","coll_%s_shm_np%d.json"%(op,np_))
    return [r for r in json.load(open(p))["rows"] if r["count"]<=4096] if os.path.exists(p) else None
print("| op | np | build | 8 B: uccl / ob1 / ucx (us) | 8 | 16 | 32 | 64 | 128 | 256 | 512 | 1K | 2K | 4K | met |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
for np_ in (2,4):
  for op in ("bcast","gather","scatter"):
    ucx=load("",op,np_)
    for name,sub in (("polls (measured tree)",""),("final = nopoll","nopoll"),("main","base")):
        rows=load(sub,op,np_)
        if rows is None: continue
        rat=[r["uccl_us"]/min(r["mpi_us"],u["ucx_us"]) for r,u in zip(rows,ucx)]
        met=sum(x<=1.0 for x in rat)
        print("| %s | %d | %s | %.2f / %.2f / %.2f | %s | %d/10 |"%(op,np_,name,rows[0]["uccl_us"],rows[0]["mpi_us"],ucx[0]["ucx_us"]," | ".join("%.2f"%x for x in rat),met))
