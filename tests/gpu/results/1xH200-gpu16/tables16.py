import collections,statistics,sys,re
d=collections.defaultdict(list)
op=None
for l in open(sys.argv[1]):
    m=re.match(r"# (\w+) window (\d+) \((\w+), round (\d+)\)", l)
    if m: op,w,side=m.group(1),int(m.group(2)),m.group(3); continue
    if l.startswith('#') or l.startswith('==='): op=None; continue
    f=l.split()
    if op and len(f)>=6 and f[0].isdigit():
        us,cus,x=float(f[2]),float(f[4]),float(f[5])
        xa=float(f[7]) if len(f)>7 else None
        d[(op,w,int(f[0]),side)].append((us,cus,x,xa))
sides=sys.argv[2].split(',')
def sz(n): return f"{n>>10} KiB" if n<(1<<20) else f"{n>>20} MiB"
for op in ['send','write']:
  for w in [1,16]:
    keys=sorted({k[2] for k in d if k[0]==op and k[1]==w})
    if not keys: continue
    print(f"\n**{op}, window {w}** (median of the rounds; rounds in brackets)\n")
    hdr="| size |"+"".join(f" {s}: uccl / copy us | {s}: x copy (rounds) |"+(f" {s}: x copy+ack |" if op=='send' else "") for s in sides)
    print(hdr); print("|"+"---|"*(hdr.count('|')-1))
    means={s:[] for s in sides}
    for size in keys:
        row=f"| {sz(size)} |"
        for s in sides:
            v=d[(op,w,size,s)]
            mx=statistics.median([t[2] for t in v]); means[s].append(mx)
            row+=f" {statistics.median([t[0] for t in v]):.2f} / {statistics.median([t[1] for t in v]):.2f} | {mx:.3f} ({' '.join('%.2f'%t[2] for t in v)}) |"
            if op=='send': row+=f" {statistics.median([t[3] for t in v]):.3f} |"
        print(row)
    print("\nmean x copy: "+", ".join(f"{s} {statistics.mean(means[s]):.3f} ({min(means[s]):.3f}-{max(means[s]):.3f})" for s in sides))
