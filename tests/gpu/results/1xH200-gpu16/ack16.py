import re,sys,statistics,collections
for fn in sys.argv[1:]:
    d=collections.defaultdict(list); op=None
    for l in open(fn):
        m=re.match(r"# (\w+) window (\d+) \((\w+), round (\d+)\)", l)
        if m: op,w,side=m.group(1),int(m.group(2)),m.group(3); continue
        if l.startswith('#') or l.startswith('==='): op=None; continue
        f=l.split()
        if op=='send' and w==1 and len(f)>=8 and f[0].isdigit():
            d[side].append(float(f[6])-float(f[4]))
    for s,v in d.items(): print(fn, s, "ack adds %.2f us (median %.2f, %d rows)"%(statistics.mean(v),statistics.median(v),len(v)))
