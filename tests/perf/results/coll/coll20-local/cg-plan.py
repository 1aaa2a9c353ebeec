#!/usr/bin/env python3
"""The persistent form's instructions per call from cg-plan.sh's files
(OP.out: the last dump, the plan's timed start + wait + free alone).
  cg-plan.py DIR CALLS [OPS]          one run: a line per op
  cg-plan.py --fit CALLS DIR... [--ops OPS]  several runs of one build
Per run and op: instructions per call (the functions' exclusive costs,
as coll19's cg.py sums them), rounds of progress per call (calls of
uccl_engine_progress_locked from uccl_wait_all: how often the wait went
round while the other rank caught up, which varies from run to run on this
loaded 2-core machine) and flag polls per call (uccl_coll_mapped_advance).
--fit: a least-squares line total = fixed + per_round * rounds over the
runs, and fixed + per_round: a call whose wait needs one round."""
import re, subprocess, sys

CALLERS = ("main", "perf_coll_main", "time_method", "__libc_start_main@@GLIBC_2.34")
OPS = ["bcast", "scatter", "gather", "allgather", "alltoall"]

def annotate(path, *opts):
    return subprocess.run(["callgrind_annotate", "--threshold=100", *opts, path],
                          capture_output=True, text=True).stdout

def total(path):
    t = 0
    for line in annotate(path, "--inclusive=no").splitlines():
        m = re.match(r"\s*([\d,]+) \([ \d.]+%\)\s+(\S+):(\S+)", line)
        if m and "PROGRAM" not in line and m.group(3) not in CALLERS and "(below" not in line \
                and not m.group(2).startswith("???"):
            t += int(m.group(1).replace(",", ""))
    return t

def calls(path, fn, file_part, caller=None):
    """Calls of file_part:fn (from caller, if given), from the caller tree."""
    n, block = 0, []
    for line in annotate(path, "--tree=caller", "--inclusive=no").splitlines():
        if not line.strip():
            block = []
            continue
        if re.search(r"\*\s+\S*" + re.escape(file_part) + ":" + re.escape(fn) + r" \[", line):
            for b in block:
                m = re.search(r"<\s+\S+?:(\S+) \(([\d,]+)x\)", b)
                if m and (caller is None or m.group(1) == caller):
                    n += int(m.group(2).replace(",", ""))
        block.append(line)
    return n

def one(d, op, k):
    f = f"{d}/{op}.out"
    return (total(f) / k, calls(f, "uccl_engine_progress_locked", "engine.c", "uccl_wait_all") / k,
            calls(f, "uccl_coll_mapped_advance", "mapped.c") / k)

if sys.argv[1] == "--fit":
    args = sys.argv[3:]
    ops = OPS
    if "--ops" in args:
        ops = args[args.index("--ops") + 1].split()
        args = args[:args.index("--ops")]
    k = int(sys.argv[2])
    print(f"{'op':10} {'runs':>4} {'total (per run)':>40} {'rounds (per run)':>34} "
          f"{'fixed':>6} {'round':>6} {'1-round':>7}")
    for op in ops:
        r = [one(d, op, k) for d in args]
        xs, ys = [x[1] for x in r], [x[0] for x in r]
        mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
        sxx = sum((x - mx) ** 2 for x in xs)
        b = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx if sxx > 0 else 0
        a = my - b * mx
        print(f"{op:10} {len(r):4} {' '.join(f'{y:.0f}' for y in ys):>40} "
              f"{' '.join(f'{x:.2f}' for x in xs):>34} {a:6.0f} {b:6.0f} {a + b:7.0f}")
else:
    d, k = sys.argv[1], int(sys.argv[2])
    print(f"{'op':10} {'total':>6} {'rounds':>6} {'polls':>6}")
    for op in (sys.argv[3].split() if len(sys.argv) > 3 else OPS):
        t, nr, npoll = one(d, op, k)
        print(f"{op:10} {t:6.0f} {nr:6.2f} {npoll:6.2f}")
