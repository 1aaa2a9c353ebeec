# Markdown tables of this folder's uccl_perf JSON (runN-json.tgz unpacked in DIR):
#   python3 tables.py DIR SIDE,SIDE OP,OP WINDOW,WINDOW   e.g. DIR off,on write,read,send 16,1
import json,sys,os
d=sys.argv[1]; sides=sys.argv[2].split(','); ops=sys.argv[3].split(','); windows=sys.argv[4].split(',')
def load(op,w,tag):
    p=f"{d}/perf_{op}_w{w}_{tag}.json"
    if not os.path.exists(p): return None
    return {r['size']:r for r in json.load(open(p))['rows']}
def sz(n):
    return f"{n>>20} MiB" if n>=1<<20 else f"{n>>10} KiB"
for w in windows:
  for op in ops:
    R={s:[load(op,w,f"{s}{r}") for r in (1,2)] for s in sides}
    sizes=sorted(set(k for s in sides for x in R[s] if x for k in x))
    if not sizes: continue
    ack = op=='send'
    hdr="| size | " + " | ".join(f"{s}: uccl / copy us | {s}: x copy (rounds)" + (f" | {s}: x copy+ack" if ack else "") for s in sides)+" |"
    print(f"\n**{op}, window {w}** (x copy: the mean over the alternations, then each alternation in brackets; every figure of one alternation is the median of 3 uccl/copy rounds in one job)\n")
    print(hdr); print("|"+"---|"*(1+len(sides)*(3 if ack else 2)))
    for n in sizes:
        cells=[sz(n)]
        for s in sides:
            rows=[x[n] for x in R[s] if x and n in x]
            if not rows: cells+=["-","-"]+(["-"] if ack else []); continue
            u=sum(r['uccl_us'] for r in rows)/len(rows); c=sum(r['copy_us'] for r in rows)/len(rows)
            rs=[r['ratio_copy'] for r in rows]
            cells.append(f"{u:.2f} / {c:.2f}")
            cells.append(f"{sum(rs)/len(rs):.2f} ({' '.join(f'{x:.2f}' for x in rs)})")
            if ack:
                ra=[r['ratio_copy_ack'] for r in rows]
                cells.append(f"{sum(ra)/len(ra):.2f} ({' '.join(f'{x:.2f}' for x in ra)})")
        print("| "+" | ".join(cells)+" |")
