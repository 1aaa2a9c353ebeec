#!/usr/bin/env python3
"""MoE dispatch and combine with uccl collectives, on any number of MPI ranks.

Every rank holds --tokens tokens of --hidden float32 values and hosts
--experts-per-rank experts. Each token is routed to --topk random experts
(of any rank). Dispatch: the per-destination row counts go by alltoall, the
rows (and the expert id of each row) by alltoallv; each rank applies its
experts (y = x * (e + 1) + e); combine: the results come back by the reverse
alltoallv and each token sums its topk results with its routing weights.
Verified on every rank: the rows received by dispatch against the tokens
every source rank generates (same seeds), and the combined output against a
single-process reference computed on the rank's own tokens. Prints GB/s of
the dispatch + combine payload and the per-iteration latency (p50/p99).

Tensors are torch's when torch imports (CPU, or --device cuda), else numpy.
With GPU memory the collectives may be refused by a libuccl without GPU
collectives (uccl.UnsupportedError); --mode auto then moves the same blocks
with point-to-point send/recv on the comm's connections (gpu_ipc).

    mpirun -np 4 python3 examples/python/moe.py [--tokens 512 --hidden 1024 --topk 2]
"""
import argparse
import sys
import time
import traceback

import numpy as np
from mpi4py import MPI

import uccl

T = 60.0
try:
    import torch
except ImportError:
    torch = None


def parse():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tokens", type=int, default=512, help="tokens per rank")
    p.add_argument("--hidden", type=int, default=1024, help="float32 values per token")
    p.add_argument("--experts-per-rank", type=int, default=2)
    p.add_argument("--topk", type=int, default=2)
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    p.add_argument("--mode", choices=("auto", "coll", "p2p"), default="auto",
                   help="collectives, point-to-point, or collectives with a p2p fallback")
    p.add_argument("--numpy", action="store_true", help="numpy arrays even if torch imports")
    a = p.parse_args()
    for name in ("tokens", "hidden", "experts_per_rank", "topk", "iters"):
        if getattr(a, name) < 1:
            p.error("--%s must be at least 1" % name.replace("_", "-"))
    if a.warmup < 0:
        p.error("--warmup must be at least 0")
    return a


class Backend:
    """The few tensor operations the example needs, on torch or numpy."""

    def __init__(self, a):
        self.torch = torch is not None and not a.numpy
        if a.device == "cuda" and not self.torch:
            raise SystemExit("moe.py --device cuda needs torch")
        self.dev = a.device
        if self.dev == "cuda":
            torch.cuda.set_device(0)

    def name(self):
        return "torch (%s)" % self.dev if self.torch else "numpy"

    def tensor(self, arr):
        if not self.torch:
            return np.ascontiguousarray(arr)
        t = torch.from_numpy(np.ascontiguousarray(arr))
        return t.to(self.dev) if self.dev != "cpu" else t

    def empty(self, shape, dtype):
        if not self.torch:
            return np.zeros(shape, dtype)
        tdt = {np.float32: torch.float32, np.int32: torch.int32, np.int64: torch.int64}[dtype]
        return torch.zeros(shape, dtype=tdt, device=self.dev)

    def numpy(self, t):
        return t if not self.torch else t.cpu().numpy()

    def sync(self):
        if self.torch and self.dev == "cuda":
            torch.cuda.synchronize()


def tokens_of(a, rank):
    """Rank's tokens, routing (expert ids) and weights: the same on every rank."""
    g = np.random.default_rng([7, rank])
    x = g.integers(-1000, 1000, (a.tokens, a.hidden)).astype(np.float32) / 8
    n_exp = a.experts_per_rank * a.size
    experts = np.stack([g.choice(n_exp, a.topk, replace=False) for _ in range(a.tokens)])
    w = g.integers(1, 16, (a.tokens, a.topk)).astype(np.float32) / 16
    return x, experts, w


def expert(x, e):
    return x * np.float32(e + 1) + np.float32(e)


def plan(a, rank):
    """Dispatch order of this rank's (token, k) pairs: sorted by destination."""
    x, experts, w = tokens_of(a, rank)
    dest = experts // a.experts_per_rank
    flat = np.argsort(dest.reshape(-1), kind="stable")  # pair index = token * topk + k
    counts = np.bincount(dest.reshape(-1), minlength=a.size).astype(np.int64)
    return x, experts, w, flat, counts


class P2P:
    """alltoall(v) by point-to-point send/recv on the comm's connections."""

    def __init__(self, comm):
        self.comm = comm

    def alltoallv(self, send, recv, sc, rc, unit):
        c, eng = self.comm, self.comm.engine
        ms, mr = eng.register(send), eng.register(recv)
        reqs, so, ro = [], 0, 0
        for q in range(c.size):
            ns, nr = int(sc[q]) * unit, int(rc[q]) * unit
            if q == c.rank:
                local = (ms, so, ns, mr, ro)
            else:
                reqs.append(c.conn(q).recv(mr, ro, nr, tag=5))
                reqs.append(c.conn(q).send(ms, so, ns, tag=5))
            so, ro = so + ns, ro + nr
        uccl.wait_all(reqs, timeout=T)
        ms.release()
        mr.release()
        return local  # the caller copies its own block

    def alltoall_counts(self, counts):
        return np.asarray(MPI.COMM_WORLD.alltoall(list(counts)), np.int64)


def main():
    a = parse()
    world = MPI.COMM_WORLD
    a.size, rank = world.Get_size(), world.Get_rank()
    if a.topk > a.experts_per_rank * a.size:
        raise SystemExit("moe.py: --topk %d is more than the %d experts (%d ranks x "
                         "--experts-per-rank %d)" % (a.topk, a.experts_per_rank * a.size,
                                                     a.size, a.experts_per_rank))
    be = Backend(a)
    comm = uccl.Comm.from_mpi(world, gpu=0 if a.device == "cuda" else -1)
    x, experts, w, flat, counts = plan(a, rank)
    row = a.hidden * 4
    # dispatch buffers: rows in destination order, and their expert ids
    send_x = be.tensor(x[flat // a.topk])
    send_e = be.tensor(experts.reshape(-1)[flat].astype(np.int32))
    mode = a.mode

    def a2av(send, recv, sc, rc, unit):
        nonlocal mode
        if mode != "p2p":
            try:
                # A plain collective reads and writes GPU memory from the
                # engine's own streams: torch's pending work on these tensors
                # (the zero fill of recv, the copy into send) must be done.
                be.sync()
                comm.alltoallv(send, recv, sc, rc, unit=unit)
                return
            except uccl.UnsupportedError as e:
                if mode == "coll":
                    raise
                if rank == 0:
                    print("moe: %s; using point-to-point send/recv" % e)
                mode = "p2p"
        be.sync()
        _ms, so, ns, _mr, ro = P2P(comm).alltoallv(send, recv, sc, rc, unit)
        if ns:  # own block: a local copy
            flat_copy(be, send, so, recv, ro, ns)

    lat, moved = [], 0
    for it in range(a.warmup + a.iters):
        world.Barrier()
        t0 = time.perf_counter()
        # 1. counts by alltoall
        sc = be.tensor(counts)
        rc_t = be.empty(a.size, np.int64)
        if mode == "p2p":
            rc = P2P(comm).alltoall_counts(counts)
        else:
            try:
                be.sync()  # rc_t's zero fill runs on torch's stream
                comm.alltoall(sc, rc_t)
                be.sync()
                rc = be.numpy(rc_t).astype(np.int64)
            except uccl.UnsupportedError:
                if mode == "coll":
                    raise
                rc = P2P(comm).alltoall_counts(counts)
        n_in = int(rc.sum())
        # 2. payload (rows and expert ids) by alltoallv
        recv_x = be.empty((max(n_in, 1), a.hidden), np.float32)
        recv_e = be.empty(max(n_in, 1), np.int32)
        a2av(send_x, recv_x, counts, rc, row)
        a2av(send_e, recv_e, counts, rc, 4)
        be.sync()
        # 3. experts
        rx, re_ = be.numpy(recv_x)[:n_in], be.numpy(recv_e)[:n_in]
        y = np.empty_like(rx)
        for e in np.unique(re_):
            sel = re_ == e
            y[sel] = expert(rx[sel], int(e))
        # 4. combine: the reverse alltoallv
        back = be.empty((max(len(flat), 1), a.hidden), np.float32)
        a2av(be.tensor(y), back, rc, counts, row)
        be.sync()
        dt = time.perf_counter() - t0
        out_pairs = np.empty((a.tokens * a.topk, a.hidden), np.float32)
        out_pairs[flat] = be.numpy(back)[:len(flat)]
        out = np.zeros((a.tokens, a.hidden), np.float32)
        for k in range(a.topk):
            out += out_pairs[k::a.topk] * w[:, k:k + 1]
        if it >= a.warmup:
            lat.append(dt)
            moved += (int(counts.sum()) + n_in) * row  # rows sent: dispatch, combine
        verify(a, rank, rx, re_, out, x, experts, w)
    world.Barrier()
    total = world.allreduce(moved)
    span = world.allreduce(sum(lat), op=MPI.MAX)
    if rank == 0:
        lat_us = np.array(lat) * 1e6
        print("moe: %d ranks, %s, %d tokens x %d float32 per rank, top-%d of %d experts, %s"
              % (a.size, be.name(), a.tokens, a.hidden, a.topk, a.experts_per_rank * a.size,
                 "collectives" if mode != "p2p" else "point-to-point"))
        print("moe: %d iterations verified: %.3f GB/s (dispatch + combine, all ranks), "
              "latency p50 %.1f us, p99 %.1f us" % (a.iters, total / span / 1e9,
                                                   np.percentile(lat_us, 50),
                                                   np.percentile(lat_us, 99)))
    comm.close()


def flat_copy(be, src, soff, dst, doff, nbytes):
    """Copy nbytes from byte offset soff of src to doff of dst (same kind)."""
    if be.torch:
        s = src.reshape(-1).view(torch.uint8)
        d = dst.reshape(-1).view(torch.uint8)
    else:
        s, d = src.reshape(-1).view(np.uint8), dst.reshape(-1).view(np.uint8)
    d[doff:doff + nbytes] = s[soff:soff + nbytes]


def verify(a, rank, rx, re_, out, x, experts, w):
    # dispatch: rows from every source rank, in source order, in its send order
    off = 0
    for src in range(a.size):
        sx, sexp, _sw, sflat, _ = plan(a, src)
        dest = (sexp // a.experts_per_rank).reshape(-1)[sflat]
        mine = sflat[dest == rank]
        n = len(mine)
        if not np.array_equal(rx[off:off + n], sx[mine // a.topk]) or \
                not np.array_equal(re_[off:off + n], sexp.reshape(-1)[mine]):
            raise AssertionError("rank %d: dispatch rows from rank %d are wrong" % (rank, src))
        off += n
    if off != len(rx):
        raise AssertionError("rank %d: received %d rows, expected %d" % (rank, len(rx), off))
    # combine: against the single-process reference of this rank's tokens
    ref = np.zeros_like(out)
    for k in range(a.topk):
        ref += np.stack([expert(x[t], int(experts[t, k])) for t in range(a.tokens)]) * \
            w[:, k:k + 1]
    if not np.array_equal(out, ref):
        raise AssertionError("rank %d: combined output differs from the reference" % rank)


if __name__ == "__main__":
    try:
        main()
    except Exception:
        # this rank failed: end the whole job, or the ranks waiting for it in
        # MPI (a barrier, a bcast of the next round) would wait forever
        traceback.print_exc()
        sys.stderr.flush()
        MPI.COMM_WORLD.Abort(1)
