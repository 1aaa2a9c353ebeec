#!/usr/bin/env python3
"""times.py DIR: coll23's per-round times from coll-ab-device.sh's results
(DIR/BUILD/rR/coll_OP_shm_npN.json): for each op, np and size, each
build's uccl time per round (us), its ratio to base's time in the same
round (median over rounds), and the job's own ob1 and ucx times per round
(base's job)."""
import json
import os
import statistics
import sys

OPS = ["allgather", "bcast", "gather", "scatter"]
BUILDS = ["base", "l74", "l38", "l74p"]


def load(d, b, r, op, np_):
    with open(os.path.join(d, b, "r%d" % r, "coll_%s_shm_np%d.json" % (op, np_))) as f:
        return {x["count"]: x for x in json.load(f)["rows"]}


def name(k):
    return str(k) if k < 1024 else "%dK" % (k // 1024)


def main(d):
    rounds = sorted(int(x[1:]) for x in os.listdir(os.path.join(d, "base")) if x[0] == "r")
    print("| op | np | size | %s | ob1 (base's jobs) | ucx (base's jobs) |" % " | ".join(
        "%s us r%s%s" % (b, "/".join(map(str, rounds)), "" if b == "base" else " (/ base)")
        for b in BUILDS))
    print("|" + "---|" * (len(BUILDS) + 5))
    for np_ in (2, 4):
        for op in OPS:
            data = {b: [load(d, b, r, op, np_) for r in rounds] for b in BUILDS}
            for k in sorted(data["base"][0]):
                cells = []
                for b in BUILDS:
                    t = [x[k]["uccl_us"] for x in data[b]]
                    c = " ".join("%.2f" % q for q in t)
                    if b != "base":
                        rel = [q / x[k]["uccl_us"] for q, x in zip(t, data["base"])]
                        c += " (%.2f)" % statistics.median(rel)
                    cells.append(c)
                refs = [" ".join("%.2f" % x[k][f] for x in data["base"]) for f in ("mpi_us", "ucx_us")]
                print("| %s | %d | %s | %s | %s |" % (op, np_, name(k), " | ".join(cells),
                                                      " | ".join(refs)))


if __name__ == "__main__":
    main(sys.argv[1])
