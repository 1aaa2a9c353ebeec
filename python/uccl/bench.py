"""python -m uccl.bench: the same transfers from Python and from C in one run.

Launches, alternately and --rounds times, ``uccl_perf p2p`` (C, tools/) and
this module's worker (Python, the binding) on 2 MPI ranks with the same op,
sizes, window and iteration counts, and prints per size the time per
operation of each, Python's overhead per operation and the bandwidth ratio
(medians of the rounds). The worker repeats uccl_perf's pattern: windows of
W transfers posted then waited together; for send, rank 1 acks each window;
for write/read, rank 1 idles (progressing while there is work) until a fin.

    python3 -m uccl.bench --perf build/ci/tools/uccl_perf --op write --transport shm

Collectives (--op allgather|alltoall|bcast, --np N) are compared with
``uccl_perf coll`` the same way: blocking calls back to back after a barrier,
the slowest rank's mean time per call; sizes are bytes per rank block.

Memory: --mem host (default) gives both sides the same kind of buffer,
page-aligned anonymous memory allocated once at the largest size (uccl_perf's
aligned_alloc; numpy's own allocator would advise huge pages from 4 MiB,
which uccl_perf's buffers do not get, and measure the page size instead of
the binding). --mem cuda: torch CUDA tensors on GPU 0 (uccl_perf --mem
cuda), registered once per size and passed as MemoryRegions; --objects
passes the arrays themselves to the collectives (each call then reads their
buffer, CUDA array or DLPack interface and orders after their stream).
--profile (collectives): the binding's time per stage of each call
(uccl._uccl._profile), rank 0's, printed under the table.

Point-to-point ops run in one process by default (--inproc, session 9): one
mpirun job in which each rank, per size, alternates --rounds times between
uccl_perf's loop compiled into the extension (uccl._uccl._p2p_loop: C, the
GIL released) and the same loop in Python, on the same connection and
buffer, starting with C and Python in turn; the table gives the median of
each and the spread (min-max) of the per-round ratio. Separate processes
(--separate: uccl_perf itself, then the worker, alternating) differ by
placement and page layout by more than 2% from run to run. --mixed adds
two loops, Python on rank 0 and C on rank 1 (mixed), then C on rank 0 and
Python on rank 1 (mixedr, session 13b): for send, which rank's per-call
cost sets the pace.

Python's window (session 13, --post): by default one Conn.send_many /
recv_many / write_many / read_many call with group=True posts the window's
transfers and returns one Request for them (group), as uccl_perf posts them
in one C loop and waits for them with one uccl_wait_all; many: the same call
returning a Request per transfer, waited with uccl.wait_all; one: one call
per transfer (sessions 9-12). A comma list (--post group,many,one) runs
each of those loops alternating with C's: the first is the table's Py, the
others get columns of their own. group's loop binds its methods once and
makes no Python function call a window (session 13b, loop_group); groupfn
is the same calls through one Python function a window (window_group,
session 13's loop), kept to compare the two. persist (session 15): the
window's list and the ack made once per size as uccl.PersistentRequests
(Conn.send_init ...), then start() and wait() each window (loop_persist):
what a loop that moves the same ranges every round would use. pgroup
(session 16): the same requests in a uccl.PersistentGroup, one wait_start()
call a window (loop_pgroup); pgroupp (session 17): the groups made with
progress=True (start() ends with a round of progress, as C's loop waits
right after posting).
"""
import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import threading

# the loops (bench_p2p.py); all_equal and new_buffer also for bench_coll.py
# and session 13b's probe.py
from uccl.bench_p2p import Side, all_equal, auto_iters, c_phase, new_buffer, phase, sizes_of
# --variant: engines of different settings in one job (bench_ab.py)
from uccl.bench_ab import print_variants, variant_arg, worker_variants


def parse_size(s):
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(s[:-1]) * mult[s[-1].upper()] if s[-1].upper() in mult else int(s)


# ------------------------------------------------------------------ worker

COLL_OPS = ("allgather", "alltoall", "bcast")


def worker(a):
    if a.op in COLL_OPS:
        from uccl.bench_coll import coll_worker
        return coll_worker(a)
    from mpi4py import MPI
    import uccl
    world = MPI.COMM_WORLD
    if a.variant:
        return worker_variants(a, world)
    side = Side(a, world)
    comm, conn, mr, ctl, desc = side.comm, side.conn, side.mr, side.ctl, side.desc
    sizes = sizes_of(a.min, a.max)
    rows = []
    for size in sizes:
        iters = a.iters or auto_iters(size, a.window)
        ops = iters * a.window
        if a.inproc:  # C and Python alternating, each first in turn
            py = lambda n: phase(a, world, comm, conn, mr, ctl, desc, size, n)  # noqa: E731
            # --post's other modes: each its own loop, alternating with the rest
            extra = [(m, (lambda m: lambda n: phase(a, world, comm, conn, mr, ctl, desc,
                                                    size, n, mode=m))(m)) for m in a.post[1:]]
            c = lambda n: c_phase(a, world, conn, mr, ctl, desc, size, n,  # noqa: E731
                                  comm.rank)
            mixed = py if comm.rank == 0 else c  # --mixed: Python rank 0, C rank 1
            mixedr = c if comm.rank == 0 else py  # and C rank 0, Python rank 1
            c(a.warmup)
            py(a.warmup)
            for _, fn in extra:
                fn(a.warmup)
            ts = {"c": [], "py": [], "mixed": [], "mixedr": [], "split": [], "c_post": [],
                  "c_wait": [], "split_post": [], "split_wait": []}
            ts.update({m: [] for m, _ in extra})

            def split(n):  # --split: the Python loop timed in parts
                acc = [0.0, 0.0]
                t = phase(a, world, comm, conn, mr, ctl, desc, size, n, acc)
                ts["split_post"].append(acc[0] / ops * 1e6)
                ts["split_wait"].append(acc[1] / ops * 1e6)
                return t
            for k in range(a.rounds):
                order = [("c", c), ("py", py)] + extra + (
                    [("mixed", mixed), ("mixedr", mixedr)] if a.mixed else []) + (
                    [("split", split)] if a.split else [])
                for name, fn in order if k % 2 == 0 else order[::-1]:
                    ts[name].append(fn(iters) / ops * 1e6)
                    if name == "c" and a.split:
                        post_s, wait_s = uccl._uccl._p2p_loop_split()
                        ts["c_post"].append(post_s / ops * 1e6)
                        ts["c_wait"].append(wait_s / ops * 1e6)
            rows.append({"size": size, "c_us": ts["c"], "py_us": ts["py"],
                         "mixed_us": ts["mixed"], "mixedr_us": ts["mixedr"]})
            rows[-1].update({m + "_us": ts[m] for m, _ in extra})
            if a.split:
                rows[-1].update({k: ts[k] for k in ("split", "c_post", "c_wait", "split_post",
                                                    "split_wait")})
            continue
        phase(a, world, comm, conn, mr, ctl, desc, size, a.warmup)
        t = phase(a, world, comm, conn, mr, ctl, desc, size, iters)
        rows.append({"size": size, "us": t / ops * 1e6, "gbps": size * ops / t / 1e9 if t else 0})
    # session 14: whether the waits and list posts kept the GIL (no other
    # thread) or released it, and the reused descriptors, this process's
    fast = getattr(uccl._uccl, "_fast_stats", dict)()
    if fast:
        print("# uccl.bench rank %d (%d threads): %s" % (
            comm.rank, threading.active_count(),
            ", ".join("%s %d" % kv for kv in sorted(fast.items()))), flush=True)
    if comm.rank == 0:
        with open(a.json, "w") as f:
            json.dump({"transport": conn.transport, "rows": rows, "fast": fast}, f)
    side.close(world)


# ------------------------------------------------------------------ driver

def mpirun_cmd(a):
    cmd = shlex.split(a.mpirun) + ["-np", str(a.np if a.op in COLL_OPS else 2)]
    if os.geteuid() == 0 and "--allow-run-as-root" not in cmd:
        cmd.append("--allow-run-as-root")
    return cmd


def run_c(a, out):
    if a.op in COLL_OPS:
        cmd = mpirun_cmd(a) + [a.perf, "coll", "--op", a.op, "--min", str(a.min), "--max",
                               str(a.max), "--warmup", str(a.warmup), "--no-ref", "--json",
                               out]
    else:
        cmd = mpirun_cmd(a) + [a.perf, "p2p", "--op", a.op, "--min", str(a.min), "--max",
                               str(a.max), "--window", str(a.window), "--warmup",
                               str(a.warmup), "--no-ref", "--json", out]
    if a.transport:
        cmd += ["--transport", a.transport]
    if a.iters:
        cmd += ["--iters", str(a.iters)]
    if a.mem == "cuda":
        cmd += ["--mem", "cuda"]
    if a.stream and a.op in COLL_OPS:
        cmd.append("--stream")
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    with open(out) as f:
        d = json.load(f)
    key = "count" if a.op in COLL_OPS else "size"
    return d["transport"], {r[key]: r["uccl_us"] for r in d["rows"]}


def run_py(a, out):
    cmd = mpirun_cmd(a) + [sys.executable, "-m", "uccl.bench", "--worker", "--op", a.op,
                           "--min", str(a.min), "--max", str(a.max), "--window", str(a.window),
                           "--warmup", str(a.warmup), "--iters", str(a.iters), "--json", out,
                           "--mem", a.mem, "--rounds", str(a.rounds), "--post",
                           ",".join(a.post)]
    if a.inproc:
        cmd.append("--inproc")
    if a.mixed:
        cmd.append("--mixed")
    if a.split:
        cmd.append("--split")
    for name, env in a.variant:
        cmd += ["--variant", "%s:%s" % (name, ",".join("%s=%s" % kv for kv in env.items()))]
    if a.engine_per_loop:
        cmd.append("--engine-per-loop")
    if a.stream:
        cmd.append("--stream")
    if a.objects:
        cmd.append("--objects")
    if a.profile:
        cmd.append("--profile")
    if a.transport:
        cmd += ["--transport", a.transport]
    subprocess.run(cmd, check=True)
    with open(out) as f:
        d = json.load(f)
    if a.inproc:
        return d["transport"], d["rows"]
    a.breakdown = {r["size"]: r["profile"] for r in d["rows"] if r.get("profile")}
    return d["transport"], {r["size"]: r["us"] for r in d["rows"]}


def print_breakdown(a):
    """--profile: rank 0's time per call in each stage of the binding
    (uccl._uccl._profile; the last round)."""
    names = sorted({k for p in a.breakdown.values() for k in p})
    if not names:
        return
    print("# binding breakdown, rank 0, us per call (last round): call = the whole C-side "
          "call, coll = libuccl's; view = the objects' interfaces (torch, dlpack_device, "
          "dlpack, cai), order = producer streams (event, wait), free = their release")
    print("%10s" % "size" + "".join("%14s" % n for n in names))
    for s in sorted(a.breakdown):
        print("%10d" % s + "".join("%14.3f" % a.breakdown[s].get(n, 0.0) for n in names))


def print_split(raw, rows):
    """--split: rank 0's time per operation posting its window and waiting
    for it (with the frees), C's loop and the Python loop timed in parts (a
    fourth loop: its clock reads cost it about 0.01 us/op), medians."""
    med = statistics.median
    print("# split, rank 0, us per op (medians): post = posting the window's transfers, "
          "wait = waiting for them and freeing them; 'split' is the Python loop with "
          "those clocks (its total), Py the plain one")
    print("%10s %9s %9s %9s %9s %9s %9s %9s" % ("size", "C post", "Py post", "C wait",
                                                "Py wait", "C", "split", "Py"))
    for r, row in zip(raw, rows):
        if not r.get("c_post"):
            continue
        v = {k: med(r[k]) for k in ("c_post", "c_wait", "split_post", "split_wait", "split")}
        row.update({k + "_us": x for k, x in v.items()})
        print("%10d %9.3f %9.3f %9.3f %9.3f %9.3f %9.3f %9.3f" % (
            r["size"], v["c_post"], v["split_post"], v["c_wait"], v["split_wait"],
            row["c_us"], v["split"], row["py_us"]))


def post_modes(s):
    modes = s.split(",")
    if not modes or any(m not in ("group", "groupfn", "many", "one", "persist", "pgroup",
                                  "pgroupp")
                        for m in modes) or len(set(modes)) != len(modes):
        raise argparse.ArgumentTypeError("--post: a comma list of group, groupfn, many, one, "
                                         "persist, pgroup, pgroupp")
    return modes


def spread(xs):
    return min(xs), max(xs)


def driver_inproc(a):
    """One job: per size, C (the extension's loop) and Python alternating in
    each process (worker --inproc)."""
    with tempfile.TemporaryDirectory() as tmp:
        tp, raw = run_py(a, os.path.join(tmp, "py.json"))
    if a.variant:
        return print_variants(a, tp, raw)
    what = {"one": "one call per transfer",
            "many": "one Conn.%s_many call per window, a Request per transfer" % a.op,
            "group": "one Conn.%s_many(group=True) call per window, one Request" % a.op,
            "groupfn": "group through a Python function a window (session 13's loop)",
            "persist": "Conn.%s_init once, PersistentRequest start() and wait() per window"
                       % a.op,
            "pgroup": "persist's requests in a uccl.PersistentGroup, one start() and one "
                      "wait() per window",
            "pgroupp": "pgroup with PersistentGroup(progress=True): start() ends with a "
                       "round of progress"}
    print("# uccl.bench: %s over %s, window %d, %s, C and Python in the same processes on "
          "the same connection and buffer, %d alternating rounds (C: uccl_perf's loop in "
          "uccl._uccl._p2p_loop; Py: the uccl binding, %s%s); medians, Py/C spread "
          "min-max of the per-round ratios" % (
              a.op, tp, a.window, "host memory" if a.mem == "host" else "torch CUDA tensors",
              a.rounds, what[a.post[0]],
              "".join("; %s: %s" % (m, what[m]) for m in a.post[1:])))
    print("%10s %10s %10s %12s %9s %9s %7s %15s" % ("size", "C us/op", "Py us/op", "overhead us",
                                                   "C GB/s", "Py GB/s", "Py/C", "Py/C spread"),
          "".join("%10s %9s %9s" % (m + " us/op", m + " over", m + "/C") for m in a.post[1:]) +
          ("%10s %8s %10s %8s" % ("mixed us", "mixed/C", "mixedr us", "mixedr/C")
           if a.mixed else ""))
    rows = []
    for r in raw:
        s, cs, ps = r["size"], r["c_us"], r["py_us"]
        c, p = statistics.median(cs), statistics.median(ps)
        ratios = [x / y for x, y in zip(cs, ps)]
        lo, hi = spread(ratios)
        rows.append({"size": s, "c_us": c, "py_us": p, "overhead_us": p - c,
                     "c_gbps": s / c / 1e3, "py_gbps": s / p / 1e3, "ratio": c / p,
                     "ratio_median": statistics.median(ratios), "ratio_min": lo,
                     "ratio_max": hi, "c_us_rounds": cs, "py_us_rounds": ps})
        print("%10d %10.3f %10.3f %12.3f %9.3f %9.3f %7.3f %7.3f-%-7.3f" % (
            s, c, p, p - c, s / c / 1e3, s / p / 1e3, c / p, lo, hi), end="")
        for m in a.post[1:]:
            q = statistics.median(r[m + "_us"])
            r1 = [x / y for x, y in zip(cs, r[m + "_us"])]
            rows[-1].update({m + "_us": q, m + "_overhead_us": q - c, m + "_ratio": c / q,
                             m + "_ratio_min": min(r1), m + "_ratio_max": max(r1),
                             m + "_us_rounds": r[m + "_us"]})
            print(" %10.3f %9.3f %9.3f" % (q, q - c, c / q), end="")
        if r.get("mixed_us"):
            m = statistics.median(r["mixed_us"])
            mr = statistics.median(r["mixedr_us"])
            rows[-1].update({"mixed_us": m, "mixed_rounds": r["mixed_us"], "mixedr_us": mr,
                             "mixedr_rounds": r["mixedr_us"]})
            print(" %10.3f %8.3f %10.3f %8.3f" % (m, c / m, mr, c / mr), end="")
        print()
    if a.split:
        print_split(raw, rows)
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"op": a.op, "transport": tp, "window": a.window, "rounds": a.rounds,
                       "mem": a.mem, "inproc": True, "post": a.post,
                       "reference": "uccl_perf's loop in C (uccl._uccl._p2p_loop), same "
                                    "processes, alternating", "rows": rows}, f, indent=1)


def driver(a):
    if a.inproc:
        return driver_inproc(a)
    c_us, py_us, tp = {}, {}, None
    a.breakdown = {}
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(a.rounds):
            tp, c = run_c(a, os.path.join(tmp, "c.json"))
            _, p = run_py(a, os.path.join(tmp, "py.json"))
            for s in c:
                c_us.setdefault(s, []).append(c[s])
                py_us.setdefault(s, []).append(p[s])
    what = "%d ranks" % a.np if a.op in COLL_OPS else "window %d" % a.window
    kind = "host memory" if a.mem == "host" else "torch CUDA tensors (%s)" % (
        "passed as objects" if a.objects else "registered once per size")
    print("# uccl.bench: %s over %s, %s, %s, median of %d alternating rounds "
          "(C: %s, Python: the uccl binding)" % (a.op, tp, what, kind, a.rounds, a.perf))
    print("%10s %12s %12s %14s %10s %10s %8s" % ("size", "C us/op", "Py us/op",
                                                 "overhead us", "C GB/s", "Py GB/s", "Py/C"))
    rows = []
    for s in sorted(c_us):
        c, p = statistics.median(c_us[s]), statistics.median(py_us[s])
        rows.append({"size": s, "c_us": c, "py_us": p, "overhead_us": p - c,
                     "c_gbps": s / c / 1e3, "py_gbps": s / p / 1e3, "ratio": c / p})
        r = rows[-1]
        print("%10d %12.3f %12.3f %14.3f %10.3f %10.3f %8.3f" % (
            s, c, p, p - c, r["c_gbps"], r["py_gbps"], r["ratio"]))
    print_breakdown(a)
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"op": a.op, "transport": tp, "window": a.window, "rounds": a.rounds,
                       "mem": a.mem, "objects": a.objects, "np": a.np,
                       "reference": "uccl_perf (C) in the same run", "rows": rows,
                       "breakdown_us": a.breakdown}, f, indent=1)


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m uccl.bench", description=__doc__.split("\n")[0])
    p.add_argument("--op", choices=("send", "write", "read") + COLL_OPS, default="send")
    p.add_argument("--np", type=int, default=2, help="ranks of a collective (p2p: 2)")
    p.add_argument("--transport", default=None, help="e.g. shm or tcp")
    p.add_argument("--min", type=parse_size, default=4096)
    p.add_argument("--max", type=parse_size, default=4 << 20)
    p.add_argument("--window", type=int, default=16)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--iters", type=int, default=0, help="windows per size (0: as uccl_perf)")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--perf", default=os.environ.get("UCCL_PERF", "uccl_perf"),
                   help="the uccl_perf binary (default $UCCL_PERF or PATH)")
    p.add_argument("--mpirun", default=os.environ.get("UCCL_MPIRUN", "mpirun --oversubscribe"))
    p.add_argument("--json", default=None)
    p.add_argument("--mem", choices=("host", "cuda"), default="host",
                   help="host memory, or torch CUDA tensors on GPU 0 (uccl_perf --mem cuda)")
    p.add_argument("--objects", action="store_true",
                   help="collectives: pass the arrays, not MemoryRegions (cuda)")
    p.add_argument("--profile", action="store_true",
                   help="collectives: the binding's time per stage (uccl._uccl._profile)")
    p.add_argument("--inproc", action="store_true", default=None,
                   help="point-to-point: C and Python in the same processes (the default)")
    p.add_argument("--separate", dest="inproc", action="store_false",
                   help="point-to-point: uccl_perf and the Python worker as separate jobs")
    p.add_argument("--mixed", action="store_true",
                   help="in-process point-to-point: two more loops, Python on rank 0 and C "
                        "on rank 1 (mixed), C on rank 0 and Python on rank 1 (mixedr): which "
                        "rank's Python cost sets the pace")
    p.add_argument("--split", action="store_true",
                   help="in-process point-to-point: a fourth loop, Python timed in parts "
                        "(posting, waiting), against C's loop in the same parts")
    p.add_argument("--stream", action="store_true",
                   help="collectives on GPU memory: stream= the current torch stream (the "
                        "stream form, no producer-stream query), each call's Request waited")
    p.add_argument("--post", type=post_modes, default=["group"],
                   help="point-to-point, Python's window, a comma list of: group (default: "
                        "one Conn.*_many(group=True) call, one Request), many (one "
                        "Conn.*_many call, a Request per transfer), one (one call per "
                        "transfer), groupfn (group through a function a window, session "
                        "13's loop), persist (Conn.*_init once, PersistentRequest start "
                        "and wait a window, session 15); each runs alternating with C's, "
                        "the first is Py")
    p.add_argument("--variant", type=variant_arg, action="append", default=[],
                   metavar="NAME:VAR=VAL,...",
                   help="in-process point-to-point: an engine opened with these environment "
                        "settings (libuccl's UCCL_*), repeated for each variant; all variants "
                        "run in the same processes, interleaved per round, each with its own "
                        "C and Python loops (--post's first mode only)")
    p.add_argument("--engine-per-loop", action="store_true",
                   help="with --variant: a variant's C loop and Python loop each on an "
                        "engine of its own (per-loop counters, e.g. UCCL_GPU_IPC_PROF=1, "
                        "printed at each engine's close after a '# uccl.bench engine' line naming its pid)")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.inproc is None:
        a.inproc = a.op not in COLL_OPS and not a.worker
    if a.op in COLL_OPS:
        a.inproc = False
    if a.variant and (not a.inproc or a.mixed or a.split or len(a.post) > 1):
        p.error("--variant: in-process point-to-point, one --post mode, no --mixed/--split")
    if len({n for n, _ in a.variant}) != len(a.variant):
        p.error("--variant: names must differ")
    if a.worker:
        worker(a)
    else:
        driver(a)


if __name__ == "__main__":
    main()
