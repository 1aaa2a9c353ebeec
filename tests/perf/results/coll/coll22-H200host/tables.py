#!/usr/bin/env python3
"""coll22's tables: per op and np, each setting's uccl time per size and its
ratio to the better reference (busbw ratio = ref time / uccl time). The
reference of a size: the faster of ob1 (same job as the table) and Open MPI
over UCX (median of the UCX times of this op/np's default tables of the
call: UCX runs from its own mpirun only in those).
Usage: tables.py DIR_WITH_JSON"""
import glob, json, os, re, statistics, sys

d = sys.argv[1]
tabs = {}
for f in sorted(glob.glob(os.path.join(d, "coll_*.json"))):
    m = re.match(r"coll_(\w+?)_np(\d)_(host|uccl)_(.+)\.json", os.path.basename(f))
    op, np_, mem, name = m.groups()
    tabs.setdefault((op, int(np_), mem), {})[name] = json.load(open(f))["rows"]

def k(s):
    return f"{s // 1048576}M" if s >= 1048576 else f"{s // 1024}K"

for (op, np_, mem), t in sorted(tabs.items(), key=lambda x: (x[0][2], -x[0][1], x[0][0])):
    ucx = {}
    for name, rows in t.items():
        for r in rows:
            if r["ucx_us"] > 0:
                ucx.setdefault(r["count"], []).append(r["ucx_us"])
    ucx = {c: statistics.median(v) for c, v in ucx.items()}
    counts = [r["count"] for r in next(iter(t.values()))]
    print(f"\n**{op}, {np_} ranks, --mem {mem}**: uccl time in us (ratio to the better reference; "
          f">= 1.5 meets the goal)\n")
    print("| setting | " + " | ".join(k(c) for c in counts) + " | met |")
    print("|---|" + "---|" * (len(counts) + 1))
    for name in sorted(t, key=lambda n: (re.sub(r"_?\d$", "", n) != "default", n)):
        cells, met = [], 0
        for r in t[name]:
            best = min(r["mpi_us"], ucx.get(r["count"], 1e9))
            x = best / r["uccl_us"]
            met += x >= 1.5
            cells.append(f"{r['uccl_us']:.1f} ({x:.2f})" + ("" if r["algo"] in ("linear",) else f" {r['algo']}")
                         + (f" WRONG {r['wrong']}" if r["wrong"] else ""))
        print(f"| {name} | " + " | ".join(cells) + f" | {met}/{len(cells)} |")
    print("| ref: ob1 (median of tables) | " + " | ".join(
        f"{statistics.median(rr['mpi_us'] for rows in t.values() for rr in rows if rr['count'] == c):.1f}"
        for c in counts) + " | |")
    print("| ref: ucx (median of default tables) | " + " | ".join(
        f"{ucx[c]:.1f}" if c in ucx else "-" for c in counts) + " | |")
