#!/usr/bin/env python3
"""ofi-callgrind-self.py UCC RAW OPS [CG_OUT]: self instructions per operation
by object (libuccl, libfabric, libc, MPI and the rest) of perf_ofi's uccl loop
(UCC) and raw loop (RAW), each `callgrind_annotate --show-percs=no` of a run
collected with --toggle-collect on that loop (ofi-callgrind-s18.sh); then
every libuccl function of the uccl loop at >= 1 instruction per operation.
With CG_OUT (the uccl loop's callgrind.out): libuccl's instructions split
into those of the progress calls (PER_CALL's functions, per call of
uccl_ofi_progress: the wait loop runs one a poll, as many as timing makes)
and the rest (posts and completions, per operation)."""
import collections
import re
import sys

LINE = re.compile(r"^\s*([\d,]+)\s+(?:(\S*):)?(\S+) \[(\S+)\]\s*$")


def group(obj):
    o = obj.split("/")[-1]
    for prefix, name in (("libuccl", "libuccl"), ("libfabric", "libfabric"), ("libc.so", "libc"),
                         ("libmpi", "MPI"), ("libopen-", "MPI"), ("mca_", "MPI")):
        if o.startswith(prefix):
            return name
    return "other"


def load(path):
    funcs, objs = collections.Counter(), collections.Counter()
    for line in open(path, errors="replace"):
        m = LINE.match(line)
        if not m or m.group(3) == "TOTALS":
            continue
        cost = int(m.group(1).replace(",", ""))
        g = group(m.group(4))
        objs[g] += cost
        if g == "libuccl":
            funcs[m.group(3)] += cost
        elif g == "libc":
            funcs["(libc) " + m.group(3)] += cost
    return funcs, objs


PER_CALL = ("uccl_ofi_progress", "uccl_engine_progress_locked", "uccl_engine_progress_locked.part.0",
            "uccl_ofi_direct_progress", "uccl_rndv_ctrl_flush", "uccl_ofi_conn_ok",
            "uccl_conn_status", "uccl_greq_progress", "uccl_rma_msg_progress", "uccl_msg_gen",
            "uccl_time_ms_coarse", "uccl_time_ms", "uccl_conn_progress_teardown", "uccl_wait_all")
CFN = re.compile(r"^c?fn=\((\d+)\)(?: (\S+))?")


def calls_of(path, func):
    """How many calls of func the callgrind.out at path records."""
    names, total, cur = {}, 0, None
    for line in open(path, errors="replace"):
        m = CFN.match(line)
        if m:
            if m.group(2):
                names[m.group(1)] = m.group(2)
            cur = names.get(m.group(1)) if line.startswith("cfn=") else None
        elif line.startswith("calls=") and cur == func:
            total += int(line.split()[0][6:])
    return total


def main():
    ucc, raw, ops = sys.argv[1], sys.argv[2], int(sys.argv[3])
    uf, uo = load(ucc)
    _, ro = load(raw)
    print(f"  {'per op':12s} {'uccl loop':>10s} {'raw loop':>10s}")
    for g in ("libuccl", "libfabric", "libc", "MPI", "other"):
        print(f"  {g:12s} {uo[g] / ops:10.0f} {ro[g] / ops:10.0f}")
    print(f"  {'all but MPI':12s} {(sum(uo.values()) - uo['MPI']) / ops:10.0f} "
          f"{(sum(ro.values()) - ro['MPI']) / ops:10.0f}")
    for f, c in uf.most_common():
        if c / ops >= 1:
            print(f"    {f:44s} {c / ops:7.1f}")

    if len(sys.argv) > 4:
        calls = calls_of(sys.argv[4], "uccl_ofi_progress")
        per_call = sum(c for f, c in uf.items() if f in PER_CALL)
        rest = sum(c for f, c in uf.items() if not f.startswith("(libc)")) - per_call
        print(f"  progress calls: {calls / ops:.2f}/op, libuccl {per_call / max(calls, 1):.1f} "
              f"instructions a call; libuccl outside them {rest / ops:.1f}/op")


main()
