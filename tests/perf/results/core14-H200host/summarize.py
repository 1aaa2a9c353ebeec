#!/usr/bin/env python3
"""Medians over rounds of run*-device.log.txt (tests/perf/core14-device.sh): per side
(main, new) and size, for b_core_msg (us/message), GPU send window 1/16 (us/op and
ratio to the same job's plain copy) and shm send window 16 (us/op, ratio to Open MPI)."""
import glob, re, statistics as st, collections as C

cpu = C.defaultdict(list)    # (bytes, window, side) -> us
gpu = C.defaultdict(list)    # (window, size, side) -> (us, x-copy)
shm = C.defaultdict(list)    # (size, side) -> (us, ratio)
for f in sorted(glob.glob("run*-device.log.txt")):
    sect = None
    for line in open(f):
        m = re.match(r"(main|new) round \d+: bytes (\d+) window (\d+) messages \d+: ([\d.]+) us", line)
        if m:
            cpu[(int(m[2]), int(m[3]), m[1])].append(float(m[4]))
            continue
        m = re.match(r"# gpu send window (\d+) \((main|new),", line)
        if m:
            sect = ("gpu", int(m[1]), m[2]); continue
        m = re.match(r"# shm send window 16 \((main|new),", line)
        if m:
            sect = ("shm", m[1]); continue
        if line.startswith("#") or line.startswith("==="):
            sect = None; continue
        p = line.split()
        if sect and sect[0] == "gpu" and len(p) >= 6 and p[0].isdigit():
            gpu[(sect[1], int(p[0]), sect[2])].append((float(p[2]), float(p[5])))
        elif sect and sect[0] == "shm" and len(p) == 6 and p[0].isdigit():
            shm[(int(p[0]), sect[1])].append((float(p[2]), float(p[5])))

med = st.median
print("## b_core_msg (one process, shm, CPU time per message, us; median of rounds)")
print("| bytes | window | main | new | new/main | rounds |")
print("|---|---|---|---|---|---|")
for (b, w) in sorted({(k[0], k[1]) for k in cpu}):
    a, n = cpu[(b, w, "main")], cpu[(b, w, "new")]
    print(f"| {b} | {w} | {med(a):.3f} | {med(n):.3f} | {med(n)/med(a):.2f} | {len(a)}/{len(n)} |")
for w in sorted({k[0] for k in gpu}):
    print(f"\n## GPU send, window {w}, GPU 0, two processes (median over rounds)")
    print("| size | main us/op | main x-copy | new us/op | new x-copy | rounds |")
    print("|---|---|---|---|---|---|")
    for s in sorted({k[1] for k in gpu if k[0] == w}):
        a, n = gpu[(w, s, "main")], gpu[(w, s, "new")]
        print(f"| {s} | {med(x[0] for x in a):.2f} | {med(x[1] for x in a):.3f} | "
              f"{med(x[0] for x in n):.2f} | {med(x[1] for x in n):.3f} | {len(a)}/{len(n)} |")
print("\n## shm send, window 16, host memory (median over rounds; ratio = Open MPI us / uccl us)")
print("| size | main us/op | main ratio | new us/op | new ratio | rounds |")
print("|---|---|---|---|---|---|")
for s in sorted({k[0] for k in shm}):
    a, n = shm[(s, "main")], shm[(s, "new")]
    print(f"| {s} | {med(x[0] for x in a):.2f} | {med(x[1] for x in a):.2f} | "
          f"{med(x[0] for x in n):.2f} | {med(x[1] for x in n):.2f} | {len(a)}/{len(n)} |")
