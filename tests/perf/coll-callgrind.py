#!/usr/bin/env python3
"""Per-call instructions inside uccl_coll, from coll-callgrind.sh's files: OP.out.2 is
callgrind's dump of the timed calls alone (between the first two
MPI_Barrier calls: the setup and warm-up calls are in OP.out.1).
  coll-callgrind.py DIR CALLS [OPS]
Per op: every function's exclusive instructions per call (>= 0.5), the
total, and how often the flag poll went round (calls of
uccl_coll_mapped_advance per call: 1 = the flags were ready at once; 0
with coll-callgrind.sh's EXCL=uccl_coll_mapped_run, which leaves the run out)."""
import re, subprocess, sys

# outside uccl_coll: callgrind charges them the calls' inclusive cost in a dump
CALLERS = ("main", "perf_coll_main", "time_method", "__libc_start_main@@GLIBC_2.34")

def annotate(path, *opts):
    return subprocess.run(["callgrind_annotate", "--threshold=100", *opts, path],
                          capture_output=True, text=True).stdout

def self_costs(path):
    cost = {}
    for line in annotate(path, "--inclusive=no").splitlines():
        m = re.match(r"\s*([\d,]+) \([ \d.]+%\)\s+(\S+):(\S+)", line)
        if m and "PROGRAM" not in line and m.group(3) not in CALLERS and "(below" not in line \
                and not m.group(2).startswith("???"):
            cost[m.group(3)] = cost.get(m.group(3), 0) + int(m.group(1).replace(",", ""))
    return cost

def calls_to(path, fn):
    n, block = 0, []
    for line in annotate(path, "--tree=caller", "--inclusive=no").splitlines():
        if not line.strip():
            block = []
            continue
        block.append(line)
        if re.search(r"\*\s+\S+:" + re.escape(fn) + r" ", line):
            n += sum(int(m.group(1).replace(",", "")) for b in block
                     for m in [re.search(r"<\s+\S+ \(([\d,]+)x\)", b)] if m)
    return n

d, k = sys.argv[1], int(sys.argv[2])
for op in (sys.argv[3].split() if len(sys.argv) > 3 else ["bcast", "scatter", "gather"]):
    f = f"{d}/{op}.out.2"
    c = self_costs(f)
    adv = calls_to(f, "uccl_coll_mapped_advance")
    tot = sum(c.values()) / k
    print(f"## {op}: {tot:.0f} instructions per call inside uccl_coll ({k} calls); "
          f"uccl_coll_mapped_advance {adv / k:.2f} calls per call")
    for v, fn in sorted(((v / k, fn) for fn, v in c.items()), reverse=True):
        if v >= 0.5:
            print(f"{v:8.1f}  {fn}")
    print()
