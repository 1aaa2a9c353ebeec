#!/usr/bin/env python3
"""Instructions per operation of perf_ofi's two loops from callgrind trees.

ofi-callgrind-ops.py TREE OPS: TREE is `callgrind_annotate --threshold=100
--inclusive=yes --tree=calling` of one rank of `perf_ofi --sizes 65536`;
OPS the operations each loop ran (warm-up included). Prints raw_run's and
ucc_run's inclusive instructions per operation, MPI_Barrier left out (it
times nothing of either), and the callees of each that cost at least 5 per
operation. libfabric has no symbols: its code counts in the caller's line
(fi_readmsg inside raw_run, ofi_post_rma, ...)."""
import re
import sys

LINE = re.compile(r"^\s*([\d,]+) \([ \d.]+%\)\s+([*>])\s+(\S+)(?: \((\d[\d,]*)x\))?")


def blocks(path):
    """{function: (inclusive, [(callee, inclusive, calls)])}"""
    out, cur = {}, None
    for line in open(path, errors="replace"):
        m = LINE.match(line)
        if not m:
            if not line.strip():
                cur = None
            continue
        cost = int(m.group(1).replace(",", ""))
        name = m.group(3).split(":")[-1]
        if m.group(2) == "*":
            cur = name
            out.setdefault(cur, [0, []])[0] += cost
        elif cur is not None:
            calls = int((m.group(4) or "0").replace(",", ""))
            out[cur][1].append((name, cost, calls))
    return out


def main():
    tree, ops = sys.argv[1], int(sys.argv[2])
    b = blocks(tree)
    for top in ("raw_run", "ucc_run"):
        if top not in b:
            continue
        incl, callees = b[top]
        barrier = sum(c for n, c, _ in callees if "Barrier" in n)
        print(f"{top}: {(incl - barrier) / ops:8.0f} instructions/op (barrier left out)")
        for n, c, calls in sorted(callees, key=lambda x: -x[1]):
            if "Barrier" not in n and c / ops >= 5:
                print(f"  {n:40s} {c / ops:8.0f}/op  {calls / ops:6.3f} calls/op")
    for f in sys.argv[3:]:
        if f in b:
            incl, callees = b[f]
            print(f"{f}: {incl / ops:8.0f}/op")
            for n, c, calls in sorted(callees, key=lambda x: -x[1]):
                if c / ops >= 3:
                    print(f"  {n:40s} {c / ops:8.0f}/op  {calls / ops:6.3f} calls/op")


main()
