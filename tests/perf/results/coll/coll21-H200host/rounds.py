#!/usr/bin/env python3
"""rounds.py DIR [BUILD...]: per-round tables from coll-ab-device.sh's
results (AB_UCX=every): each job's uccl time / the faster of the same
job's two references (ob1 in the job, ucx in its own mpirun just before),
<= 1.00 meets the goal; the 8 B column's times in us."""
import json
import os
import sys

OPS = ["allgather", "alltoall", "bcast", "gather", "scatter"]


def load(d, b, r, op, np_):
    with open(os.path.join(d, b, "r%d" % r, "coll_%s_shm_np%d.json" % (op, np_))) as f:
        return {x["count"]: x for x in json.load(f)["rows"]}


def main(d, builds):
    for b in builds:
        rounds = sorted(int(x[1:]) for x in os.listdir(os.path.join(d, b)) if x[0] == "r")
        for r in rounds:
            print("#### %s, round %d: uccl / min(ob1, ucx) of the same job\n" % (b, r))
            sizes = None
            for np_ in (2, 4):
                for op in OPS:
                    rows = load(d, b, r, op, np_)
                    ks = sorted(k for k in rows if k <= 4096)
                    if sizes is None:
                        sizes = ks
                        print("| op | np | 8 B: uccl / ob1 / ucx (us) | %s | met |" % " | ".join(
                            str(k) if k < 1024 else "%dK" % (k // 1024) for k in ks))
                        print("|" + "---|" * (len(ks) + 4))
                    rat = [rows[k]["uccl_us"] / min(rows[k]["mpi_us"], rows[k]["ucx_us"]) for k in ks]
                    x = rows[ks[0]]
                    print("| %s | %d | %.2f / %.2f / %.2f | %s | %d/%d |" % (
                        op, np_, x["uccl_us"], x["mpi_us"], x["ucx_us"],
                        " | ".join("%.2f" % q for q in rat), sum(q <= 1.0 for q in rat), len(ks)))
            print()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:] or ["mine"])
