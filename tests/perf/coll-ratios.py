#!/usr/bin/env python3
"""coll-ratios.py DIR [DIR_B]: a markdown table of uccl_perf coll latency ratios
from the coll_OP_shm_npN.json files in DIR (tests/perf/coll-perf.sh output):
uccl time / the faster Open MPI reference's time (ob1 in the same job, UCX from
its own mpirun just before), per op, rank count and size; <= 1.00 meets the
latency goal. With DIR_B (same layout, e.g. another UCCL_COLL_MAPPED_DEPTH),
a second table: DIR's uccl time / DIR_B's uccl time."""
import json
import os
import sys

OPS = ["allgather", "allgatherv", "alltoall", "alltoallv", "bcast", "gather", "scatter"]


def load(d, op, np_):
    p = os.path.join(d, "coll_%s_shm_np%d.json" % (op, np_))
    if not os.path.exists(p):
        return None
    with open(p) as f:
        return {r["count"]: r for r in json.load(f)["rows"]}


def fmt(x):
    return "%.2f" % x


def table(d, other=None):
    rows, sizes = [], None
    for np_ in (2, 4):
        for op in OPS:
            a = load(d, op, np_)
            b = load(other, op, np_) if other else None
            if a is None or (other and b is None):
                continue
            ks = sorted(k for k in a if k <= 4096 and (b is None or k in b))
            sizes = sizes or ks
            if other:
                cells = [fmt(a[k]["uccl_us"] / b[k]["uccl_us"]) for k in ks]
                rows.append("| %s | %d | %s |" % (op, np_, " | ".join(cells)))
                continue
            best = [min(x for x in (a[k]["mpi_us"], a[k]["ucx_us"]) if x > 0) for k in ks]
            ratio = [a[k]["uccl_us"] / b_ for k, b_ in zip(ks, best)]
            k0 = ks[0]
            met = sum(r <= 1.0 for r in ratio)
            rows.append("| %s | %d | %.2f / %.2f / %.2f | %s | %d/%d |" % (
                op, np_, a[k0]["uccl_us"], a[k0]["mpi_us"], a[k0]["ucx_us"],
                " | ".join(fmt(r) for r in ratio), met, len(ks)))
    if sizes is None:
        return "(no data)"
    names = [str(s) if s < 1024 else "%dK" % (s // 1024) for s in sizes]
    if other:
        head = "| op | np | " + " | ".join(names) + " |"
    else:
        head = "| op | np | 8 B: uccl / ob1 / ucx (us) | " + " | ".join(names) + " | met (<= 1.0) |"
    sep = "|" + "---|" * (head.count("|") - 1)
    return "\n".join([head, sep] + rows)


if __name__ == "__main__":
    print(table(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else None))
