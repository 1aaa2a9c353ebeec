#!/usr/bin/env python3
"""coll-ab.py DIR: tables from tests/perf/coll-ab-device.sh's results
(DIR/BUILD/rR/coll_OP_shm_npN.json, builds in DIR/builds.txt).

1. Per build: uccl time (median over the rounds) / the faster reference,
   <= 1.00 meets the latency goal. The references do not depend on the
   build, so each is pooled over every job of the session: ob1 = the median
   of all jobs' ob1 column, ucx = the median of round 1's UCX runs.
2. Per build other than base: the median over the rounds of (its uccl time
   / base's uccl time in the same round), and how many rounds it was < 1."""
import json
import os
import statistics
import sys

OPS = ["allgather", "allgatherv", "alltoall", "alltoallv", "bcast", "gather", "scatter"]


def load(d, b, r, op, np_):
    p = os.path.join(d, b, "r%d" % r, "coll_%s_shm_np%d.json" % (op, np_))
    if not os.path.exists(p):
        return None
    with open(p) as f:
        return {x["count"]: x for x in json.load(f)["rows"]}


def name(s):
    return str(s) if s < 1024 else "%dK" % (s // 1024)


def main(d):
    with open(os.path.join(d, "builds.txt")) as f:
        builds = f.read().split(":", 1)[1].split()
    rounds = sorted(int(x[1:]) for x in os.listdir(os.path.join(d, builds[0])) if x[0] == "r")
    data = {}  # (b, op, np) -> [round rows]
    for b in builds:
        for op in OPS:
            for np_ in (2, 4):
                rs = [load(d, b, r, op, np_) for r in rounds]
                if all(x is not None for x in rs):
                    data[(b, op, np_)] = rs
    keys = sorted({(op, np_) for (_, op, np_) in data}, key=lambda k: (k[1], OPS.index(k[0])))
    sizes = None
    out = []
    for b in builds:
        rows = []
        for op, np_ in keys:
            rs = data.get((b, op, np_))
            if rs is None:
                continue
            ks = sorted(k for k in rs[0] if k <= 4096)
            sizes = sizes or ks
            cells, met = [], 0
            for k in ks:
                ob1 = statistics.median(x[k]["mpi_us"] for c in builds
                                        for x in data.get((c, op, np_), []))
                ucx = [data[(c, op, np_)][0][k]["ucx_us"] for c in builds
                       if (c, op, np_) in data and data[(c, op, np_)][0][k]["ucx_us"] > 0]
                ref = min([ob1] + ([statistics.median(ucx)] if ucx else []))
                u = statistics.median(x[k]["uccl_us"] for x in rs)
                cells.append(u / ref)
                met += u / ref <= 1.0
                if k == ks[0]:
                    first = "%.2f / %.2f / %s" % (u, ob1, "%.2f" % statistics.median(ucx) if ucx else "-")
            rows.append("| %s | %d | %s | %s | %d/%d |" % (op, np_, first,
                        " | ".join("%.2f" % c for c in cells), met, len(ks)))
        out.append("### %s: uccl (median of %d rounds) / the faster reference\n" % (b, len(rounds)))
        out.append("| op | np | 8 B: uccl / ob1 / ucx (us) | %s | met |" % " | ".join(map(name, sizes)))
        out.append("|" + "---|" * (len(sizes) + 4))
        out.extend(rows)
        out.append("")
    for b in builds[1:]:
        out.append("### %s / base: median over rounds of the same round's uccl time ratio "
                   "(rounds < 1 of %d)\n" % (b, len(rounds)))
        out.append("| op | np | %s | geomean |" % " | ".join(map(name, sizes)))
        out.append("|" + "---|" * (len(sizes) + 3))
        for op, np_ in keys:
            if (b, op, np_) not in data or ("base", op, np_) not in data:
                continue
            mine, base = data[(b, op, np_)], data[("base", op, np_)]
            cells, logs = [], []
            for k in sizes:
                rat = [m[k]["uccl_us"] / x[k]["uccl_us"] for m, x in zip(mine, base)]
                med = statistics.median(rat)
                logs.append(med)
                cells.append("%.2f (%d)" % (med, sum(q < 1 for q in rat)))
            gm = statistics.geometric_mean(logs)
            out.append("| %s | %d | %s | %.2f |" % (op, np_, " | ".join(cells), gm))
        out.append("")
    print("\n".join(out))


if __name__ == "__main__":
    main(sys.argv[1])
