#!/usr/bin/env python3
"""focus-stats.py DIR: np 4 allgather, base (main before coll19) against
mine (main) and nofast (main with coll19's short path off), pooling the
focus rounds (fR) and the table rounds (rR, mine and base only): medians,
the paired same-round ratio (median, geomean, rounds below 1), and a
permutation test of the difference of the medians (two-sided, 4000
shuffles, seed 1)."""
import json
import os
import random
import statistics
import sys


def times(d, b, prefix, k):
    out = []
    for x in sorted(os.listdir(os.path.join(d, b))):
        p = os.path.join(d, b, x, "coll_allgather_shm_np4.json")
        if x.startswith(prefix) and os.path.exists(p):
            with open(p) as f:
                rows = {r["count"]: r for r in json.load(f)["rows"]}
            if k in rows:
                out.append((x, rows[k]["uccl_us"]))
    return out


def perm_p(a, b):
    random.seed(1)
    obs, allv, c = abs(statistics.median(a) - statistics.median(b)), a + b, 0
    for _ in range(4000):
        random.shuffle(allv)
        c += abs(statistics.median(allv[:len(a)]) - statistics.median(allv[len(a):])) >= obs
    return c / 4000


def main(d):
    print("| size | build | n | median us | min-max us | / base same round: median, geomean, < 1 | p |")
    print("|---|---|---|---|---|---|---|")
    for k in (128, 256, 512, 1024, 2048, 4096):
        base = dict(times(d, "base", "f", k) + times(d, "base", "r", k))
        bv = list(base.values())
        print("| %d | base | %d | %.2f | %.2f-%.2f | - | - |" % (k, len(bv), statistics.median(bv),
                                                           min(bv), max(bv)))
        for b in ("mine", "nofast"):
            t = dict(times(d, b, "f", k) + times(d, b, "r", k))
            v = list(t.values())
            rat = [t[x] / base[x] for x in t if x in base]
            print("| %d | %s | %d | %.2f | %.2f-%.2f | %.2f, %.2f, %d of %d | %.2f |" % (
                k, b, len(v), statistics.median(v), min(v), max(v), statistics.median(rat),
                statistics.geometric_mean(rat), sum(q < 1 for q in rat), len(rat), perm_p(v, bv)))


if __name__ == "__main__":
    main(sys.argv[1])
