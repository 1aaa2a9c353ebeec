#!/usr/bin/env python3
"""Tables of coll13-host/README.md from the JSON files of run.sh (DIR, default
this folder): per op and rank count, uccl time and busbw / the better of the
two references, where an 'off' or 'r256' table (run with --ucx-ref off) takes
the UCX busbw of the 'on' table run just before it on the same machine, and
ob1 from its own job."""
import json, os, sys

d = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
def load(op, np, v):
    p = os.path.join(d, f"coll_{op}_tcp_np{np}_rndv_{v}.json")
    return {r["count"]: r for r in json.load(open(p))["rows"]} if os.path.exists(p) else None
def sz(c):
    return f"{c >> 20}M" if c >= 1 << 20 else f"{c >> 10}K"
for np in (4, 2):
    for op in ("allgather", "alltoall"):
        on = load(op, np, "on")
        counts = sorted(on)
        print(f"\n**{op}, {np} ranks, tcp**: uccl time in us (busbw / the better reference's)\n")
        print("| variant | " + " | ".join(sz(c) for c in counts) + " | sizes >= 1.0 |")
        print("|---" * (len(counts) + 2) + "|")
        for v, name in (("off", "off: every message eager (main)"), ("on", "on: RNDV_MIN=1M (default)"),
                        ("r256", "RNDV_MIN=256K")):
            t = load(op, np, v)
            if t is None:
                continue
            cells, met = [], 0
            for c in counts:
                r = t[c]
                best = max(r["mpi_busbw_gbs"], on[c]["ucx_busbw_gbs"])
                x = r["uccl_busbw_gbs"] / best
                met += x >= 1.0
                cells.append(f"{r['uccl_us']:.0f} ({x:.2f})")
            print(f"| {name} | " + " | ".join(cells) + f" | {met}/{len(counts)} |")
        print("| ob1 / ucx (us), 'on' job | " +
              " | ".join(f"{on[c]['mpi_us']:.0f} / {on[c]['ucx_us']:.0f}" for c in counts) + " | |")
