"""--variant of python -m uccl.bench (session 17): in one job, an engine per
variant, each opened with its own libuccl settings in the environment
(UCCL_*, read when an engine opens), all in the same processes; per round
every variant runs its C loop (uccl_perf's) and its Python loop, so that
settings are compared within one pair of processes (separate jobs differ by
placement by more than the effects looked for). --engine-per-loop gives a
variant's C loop and Python loop an engine each, for counters kept per
engine (UCCL_GPU_IPC_PROF=1 prints them when the engine closes)."""
import argparse
import json
import os
import statistics
import sys

from uccl.bench_p2p import Side, auto_iters, c_phase, phase, sizes_of


def variant_arg(s):
    """NAME:VAR=VAL,VAR=VAL (NAME: alone = the defaults) -> (NAME, {VAR: VAL})."""
    name, sep, rest = s.partition(":")
    env = {}
    for kv in filter(None, rest.split(",")):
        k, eq, v = kv.partition("=")
        if not eq or not k:
            raise argparse.ArgumentTypeError("--variant: NAME:VAR=VAL,... (got %r)" % s)
        env[k] = v
    if not sep or not name or not name.isidentifier():
        raise argparse.ArgumentTypeError("--variant: NAME:VAR=VAL,... with NAME a word "
                                         "(got %r)" % s)
    return name, env


def variant_rounds(a, world, sides, size, iters):
    """--variant: per round, each variant's C loop and Python loop (each
    first in turn), the variants in a rotating order; per variant name, the
    us/op of every round. With --engine-per-loop a variant's loops each have
    an engine of their own (sides[name] = (c side, py side))."""
    ops = iters * a.window
    names = list(sides)

    def loops(name):
        sc, sp = sides[name]
        rank = sc.comm.rank
        return [("c", lambda n: c_phase(a, world, sc.conn, sc.mr, sc.ctl, sc.desc, size, n,
                                         rank)),
                ("py", lambda n: phase(a, world, sp.comm, sp.conn, sp.mr, sp.ctl, sp.desc,
                                       size, n))]
    ts = {name: {"c": [], "py": []} for name in names}
    for name in names:
        for _, fn in loops(name):
            fn(a.warmup)
    for k in range(a.rounds):
        for name in names[k % len(names):] + names[:k % len(names)]:
            order = loops(name)
            for loop, fn in order if k % 2 == 0 else order[::-1]:
                ts[name][loop].append(fn(iters) / ops * 1e6)
    return {"size": size, "variants": {name: {"c_us": ts[name]["c"], "py_us": ts[name]["py"]}
                                       for name in names}}


def worker_variants(a, world):
    """--variant: an engine per variant (its settings in the environment
    while it opens), all in the same processes, rounds interleaved."""
    import uccl
    sides = {}
    for name, env in a.variant:
        sc = Side(a, world, env)
        sides[name] = (sc, Side(a, world, env) if a.engine_per_loop else sc)
    rows = [variant_rounds(a, world, sides, size, a.iters or auto_iters(size, a.window))
            for size in sizes_of(a.min, a.max)]
    rank = world.Get_rank()
    if rank == 0:
        with open(a.json, "w") as f:
            json.dump({"transport": sides[a.variant[0][0]][0].conn.transport, "rows": rows,
                       "variants": [[n, e] for n, e in a.variant],
                       "fast": getattr(uccl._uccl, "_fast_stats", dict)()}, f)
    for name, (sc, sp) in sides.items():
        for loop, side in (("c", sc), ("py", sp)) if sp is not sc else (("c+py", sc),):
            # gpu_ipc's profile (UCCL_GPU_IPC_PROF) follows this line on stderr
            print("# uccl.bench engine %s %s rank %d pid %d closing" % (
                name, loop, rank, os.getpid()), file=sys.stderr, flush=True)
            side.close(world)


def print_variants(a, tp, raw):
    """--variant: per variant the Python/C table, then C's and Python's
    us/op against the first variant's (medians of the per-round ratios:
    the variants alternate within each round)."""
    med = statistics.median
    names = [n for n, _ in a.variant]
    print("# uccl.bench: %s over %s, window %d, %s, %d rounds; variants (an engine each, "
          "same processes, rounds interleaved): %s%s" % (
              a.op, tp, a.window, "host memory" if a.mem == "host" else "torch CUDA tensors",
              a.rounds, "; ".join("%s: %s" % (n, " ".join("%s=%s" % kv for kv in e.items())
                                                    or "defaults") for n, e in a.variant),
              "; C and Python each on an engine of its own" if a.engine_per_loop else ""))
    print("%10s %8s %9s %9s %7s %15s %9s %9s" % ("size", "variant", "C us/op", "Py us/op",
                                               "Py/C", "Py/C spread", "C/C0", "Py/Py0"))
    rows = []
    for r in raw:
        ref = r["variants"][names[0]]
        for n in names:
            v = r["variants"][n]
            cs, ps = v["c_us"], v["py_us"]
            ratios = [x / y for x, y in zip(cs, ps)]
            c_rel = med([x / y for x, y in zip(ref["c_us"], cs)])  # > 1: faster than C0
            p_rel = med([x / y for x, y in zip(ref["py_us"], ps)])
            row = {"size": r["size"], "variant": n, "c_us": med(cs), "py_us": med(ps),
                   "ratio_median": med(ratios), "ratio_min": min(ratios),
                   "ratio_max": max(ratios), "c_speed_vs_first": c_rel,
                   "py_speed_vs_first": p_rel, "c_us_rounds": cs, "py_us_rounds": ps}
            rows.append(row)
            print("%10d %8s %9.3f %9.3f %7.3f %7.3f-%-7.3f %9.3f %9.3f" % (
                r["size"], n, row["c_us"], row["py_us"], row["ratio_median"], row["ratio_min"],
                row["ratio_max"], c_rel, p_rel))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"op": a.op, "transport": tp, "window": a.window, "rounds": a.rounds,
                       "mem": a.mem, "inproc": True, "post": a.post,
                       "variants": [[n, e] for n, e in a.variant],
                       "engine_per_loop": a.engine_per_loop,
                       "reference": "per variant: uccl_perf's loop in C (uccl._uccl._p2p_loop) "
                                    "on the same engine, alternating; C/C0 and Py/Py0: the "
                                    "first variant's time over this one's, per round",
                       "rows": rows}, f, indent=1)
