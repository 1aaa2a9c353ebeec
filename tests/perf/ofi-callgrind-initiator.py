#!/usr/bin/env python3
"""ofi-callgrind-initiator.py CG_OUT...: what uccl itself runs per one-sided
operation on the initiator, from the uccl loop's callgrind.out of rank 0
(ofi-callgrind-s18.sh's cg.{read,write}.ucc_run.0.out, 4096 operations):
the post (uccl_read / uccl_write inclusive, less the libfabric calls that
ofi_post_rma makes: fi_readmsg / fi_writemsg), uccl_req_free and the
completion (ofi_op_complete), each inclusive of libc (the engine lock).
Deterministic, unlike the wait loop's polls; the libfabric part, shown
apart, moves with timing (a write's fi_writemsg may progress the provider)."""
import re
import subprocess
import sys

N = 4096
HEAD = re.compile(r"^\s*([\d,]+)\s+\*\s+\S*?:(\S+)(?: \[|\s*$)")
CALLEE = re.compile(r"^\s*([\d,]+)\s+>\s.*libfabric")


def costs(path, post):
    tree = subprocess.run(["callgrind_annotate", "--tree=calling", "--inclusive=yes",
                           "--threshold=100", "--show-percs=no", path],
                          capture_output=True, text=True, check=True).stdout
    incl, fab = {}, 0
    for block in tree.split("\n\n"):
        lines = block.strip().split("\n")
        heads = [HEAD.match(x) for x in lines if HEAD.match(x)]
        if not heads:
            continue
        cost, name = int(heads[0].group(1).replace(",", "")), heads[0].group(2)
        if name == "ofi_post_rma":  # split by file (fi_rma.h inlined): libfabric calls of both
            fab += sum(int(m.group(1).replace(",", "")) for m in map(CALLEE.match, lines) if m)
        if name in (post, "uccl_req_free", "ofi_op_complete"):
            incl[name] = max(incl.get(name, 0), cost)
    return (incl[post] - fab) / N, fab / N, incl["uccl_req_free"] / N, incl["ofi_op_complete"] / N


print("run                                   post   (libfabric)   free  complete    sum")
for path in sys.argv[1:]:
    p, f, fr, c = costs(path, "uccl_read" if ".read." in path else "uccl_write")
    print(f"{path[-38:]:38s} {p:6.1f}  ({f:7.1f})  {fr:7.1f}  {c:7.1f}  {p + fr + c:7.1f}")
