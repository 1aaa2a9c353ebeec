#!/usr/bin/env python3
"""Tables of the 'Which UCCL_TCP_RNDV_MIN' section of coll13-host/README.md from
the JSON files of run-rndv.sh (DIR, default rndv-min/ beside this file): per
layout and op, uccl time and uccl busbw / Open MPI's (pml ob1, btl self,tcp)
busbw from the same job, per threshold; then, where two thresholds run
different code (some message below one and not the other), the time ratio."""
import json, os, sys

here = os.path.dirname(os.path.abspath(__file__))
d = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "rndv-min")
VARS = ("1M", "256K", "128K")
def load(op, np, h, v):
    p = os.path.join(d, f"r_{op}_np{np}_h{h}_{v}.json")
    return {r["count"]: r for r in json.load(open(p))["rows"]} if os.path.exists(p) else None
def sz(c):
    return f"{c >> 20}M" if c >= 1 << 20 else f"{c >> 10}K"
totals = {v: [0, 0] for v in VARS}
for np, h, name in ((4, 1, "4 ranks, one host, tcp"), (2, 1, "2 ranks, one host, tcp"),
                    (4, 2, "4 ranks, two emulated hosts (shm inside, tcp between)")):
    for op in ("allgather", "alltoall"):
        t = {v: load(op, np, h, v) for v in VARS}
        counts = sorted(t["1M"])
        print(f"\n**{op}, {name}**: uccl time in us (uccl busbw / ob1's in the same job)\n")
        print("| UCCL_TCP_RNDV_MIN | " + " | ".join(sz(c) for c in counts) + " | sizes >= 1.0 |")
        print("|---" * (len(counts) + 2) + "|")
        for v in VARS:
            if t[v] is None:
                continue
            cells, met, n = [], 0, 0
            for c in counts:
                r = t[v].get(c)
                if r is None:
                    cells.append("")
                    continue
                x = r["uccl_busbw_gbs"] / r["mpi_busbw_gbs"]
                met += x >= 1.0
                n += 1
                cells.append(f"{r['uccl_us']:.0f} ({x:.2f})")
            totals[v][0] += met
            totals[v][1] += n
            print(f"| {v} | " + " | ".join(cells) + f" | {met}/{n} |")
        print("| ob1 (us), 1M job / 256K job | " +
              " | ".join(f"{t['1M'][c]['mpi_us']:.0f} / {t['256K'][c]['mpi_us']:.0f}"
                         for c in counts) + " | |")
        print("| time 256K / 1M | " +
              " | ".join(f"{t['256K'][c]['uccl_us'] / t['1M'][c]['uccl_us']:.2f}" for c in counts) +
              " | |")
print("\nRows at >= 1.0x ob1, all layouts and ops: " +
      ", ".join(f"{v}: {m}/{n}" for v, (m, n) in totals.items()))
