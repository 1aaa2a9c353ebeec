#!/usr/bin/env python3
"""coll-ab.py DIR: tables from tests/perf/coll-ab-device.sh's results
(DIR/BUILD/rR/coll_OP_shm_npN.json, builds in DIR/builds.txt).

1. Per build: uccl time (median over the rounds) / the faster reference,
   <= 1.00 meets the latency goal. The references do not depend on the
   build, so each is pooled over every job of the session: ob1 = the median
   of all jobs' ob1 column, ucx = the median of all UCX runs (round 1's, or
   every round's with AB_UCX=every).
2. Per build, when every round has UCX runs: points met in each round, each
   job's uccl time against the faster of that same job's two references,
   and the cells near 1.0 (median ratio > 0.9 or some round's ratio > 1).
3. Per build other than base: the median over the rounds of (its uccl time
   / base's uccl time in the same round), and how many rounds it was < 1.
4. With AB_FOCUS runs (DIR/BUILD/fR/): per build and size, the uccl times
   per focus round, and their ratio to base's in the same round."""
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
                ucx = [x[k]["ucx_us"] for c in builds for x in data.get((c, op, np_), [])
                       if x[k]["ucx_us"] > 0]
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
    out.extend(per_round(data, builds, keys, sizes, rounds))
    out.extend(focus(d, builds))
    print("\n".join(out))


def job_ratio(x, k):
    """uccl time / the faster of the same job's references (None: no UCX run)"""
    if x[k]["ucx_us"] <= 0:
        return None
    return x[k]["uccl_us"] / min(x[k]["mpi_us"], x[k]["ucx_us"])


def per_round(data, builds, keys, sizes, rounds):
    out = []
    for b in builds:
        if not all((b, op, np_) in data for op, np_ in keys):
            continue
        rat = {(op, np_, k): [job_ratio(x, k) for x in data[(b, op, np_)]]
               for op, np_ in keys for k in sizes}
        if any(None in v for v in rat.values()):
            continue
        out.append("### %s: points met per round (each job against its own ob1 and ucx)\n" % b)
        out.append("| round | " + " | ".join("%s np %d" % key for key in keys) + " | met |")
        out.append("|" + "---|" * (len(keys) + 2))
        for i, r in enumerate(rounds):
            mets = [sum(rat[(op, np_, k)][i] <= 1.0 for k in sizes) for op, np_ in keys]
            out.append("| %d | %s | %d/%d |" % (r, " | ".join(map(str, mets)), sum(mets),
                                                 len(keys) * len(sizes)))
        med = [sum(statistics.median(rat[(op, np_, k)]) <= 1.0 for k in sizes) for op, np_ in keys]
        out.append("| median of per-round ratios | %s | %d/%d |" % (
            " | ".join(map(str, med)), sum(med), len(keys) * len(sizes)))
        out.append("")
        out.append("### %s: cells near 1.0 (median per-round ratio > 0.9 or a round > 1): "
                   "ratio per round\n" % b)
        out.append("| op | np | size | per-round ratios | median |")
        out.append("|---|---|---|---|---|")
        for op, np_ in keys:
            for k in sizes:
                v = rat[(op, np_, k)]
                if statistics.median(v) > 0.9 or max(v) > 1.0:
                    out.append("| %s | %d | %s | %s | %.2f |" % (
                        op, np_, name(k), " / ".join("%.2f" % q for q in v), statistics.median(v)))
        out.append("")
    return out


def focus(d, builds):
    out = []
    runs = {}
    for b in builds:
        p = os.path.join(d, b)
        fr = sorted(int(x[1:]) for x in os.listdir(p) if x[0] == "f") if os.path.isdir(p) else []
        for r in fr:
            for f in os.listdir(os.path.join(p, "f%d" % r)):
                op, np_ = f[5:-5].split("_shm_np")
                with open(os.path.join(p, "f%d" % r, f)) as fh:
                    rows = {x["count"]: x for x in json.load(fh)["rows"]}
                runs.setdefault((op, int(np_)), {}).setdefault(b, []).append(rows)
    for (op, np_), by in sorted(runs.items()):
        base = by.get("base")
        sizes = sorted(base[0]) if base else sorted(next(iter(by.values()))[0])
        out.append("### focus: %s np %d, uccl us per focus round (median), "
                   "ratio to base in the same round: median (rounds < 1 of n)\n" % (op, np_))
        out.append("| build | size | uccl us per round | median | / base | ob1 median |")
        out.append("|---|---|---|---|---|---|")
        for b in builds:
            if b not in by:
                continue
            for k in sizes:
                t = [x[k]["uccl_us"] for x in by[b]]
                rel = "-"
                if base and b != "base":
                    rr = [m[k]["uccl_us"] / x[k]["uccl_us"] for m, x in zip(by[b], base)]
                    rel = "%.2f (%d of %d)" % (statistics.median(rr), sum(q < 1 for q in rr), len(rr))
                out.append("| %s | %s | %s | %.2f | %s | %.2f |" % (
                    b, name(k), " ".join("%.2f" % q for q in t), statistics.median(t), rel,
                    statistics.median(x[k]["mpi_us"] for x in by[b])))
        out.append("")
    return out


if __name__ == "__main__":
    main(sys.argv[1])
