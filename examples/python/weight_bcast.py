#!/usr/bin/env python3
"""Weight broadcast (RL trainer -> inference ranks) with uccl, on any number
of MPI ranks.

The root ("trainer") holds a dict of --tensors named float32 tensors of
--mib MiB in all (uneven sizes, like a model's layers). Every iteration it
changes the weights and broadcasts all of them: one non-blocking ibcast per
tensor, all in flight, then one wait_all. Receivers zero their copies before
each round and verify a checksum (BLAKE2b) of every tensor against the
root's. Prints GB/s (bytes of the dict per second, per receiver) and the
time per round.

Tensors are torch's when torch imports (CPU, or --device cuda), else numpy.
With GPU memory a libuccl without GPU collectives refuses ibcast
(uccl.UnsupportedError); --mode auto then sends each tensor from the root
to every rank with point-to-point send/recv (gpu_ipc on one host).

    mpirun -np 4 python3 examples/python/weight_bcast.py [--mib 256 --tensors 32]
"""
import argparse
import hashlib
import sys
import time
import traceback

import numpy as np
from mpi4py import MPI

import uccl

T = 120.0
try:
    import torch
except ImportError:
    torch = None


def parse():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--mib", type=float, default=64, help="MiB of weights in all")
    p.add_argument("--tensors", type=int, default=16)
    p.add_argument("--root", type=int, default=0)
    p.add_argument("--iters", type=int, default=5)
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    p.add_argument("--mode", choices=("auto", "coll", "p2p"), default="auto")
    p.add_argument("--numpy", action="store_true", help="numpy arrays even if torch imports")
    a = p.parse_args()
    for name in ("tensors", "iters"):
        if getattr(a, name) < 1:
            p.error("--%s must be at least 1" % name)
    if not a.mib > 0:
        p.error("--mib must be more than 0")
    return a


def manifest(a):
    """Names and element counts: uneven sizes summing to --mib MiB."""
    total = int(a.mib * (1 << 20)) // 4
    g = np.random.default_rng(3)
    share = g.integers(1, 10, a.tensors).astype(np.float64)
    counts = np.maximum(1, (share / share.sum() * total).astype(np.int64))
    counts[-1] = max(1, total - int(counts[:-1].sum()))
    return [("layers.%d.%s" % (i // 2, "attn.weight" if i % 2 == 0 else "mlp.weight"), int(n))
            for i, n in enumerate(counts)]


class Tensors:
    def __init__(self, a):
        self.torch = torch is not None and not a.numpy
        if a.device == "cuda" and not self.torch:
            raise SystemExit("weight_bcast.py --device cuda needs torch")
        self.dev = a.device
        if self.dev == "cuda":
            torch.cuda.set_device(0)

    def name(self):
        return "torch (%s)" % self.dev if self.torch else "numpy"

    def zeros(self, n):
        if self.torch:
            return torch.zeros(n, dtype=torch.float32, device=self.dev)
        return np.zeros(n, np.float32)

    def fill(self, t, step, i):
        """The root's weights of tensor i at training step `step`."""
        if self.torch:
            t.copy_(torch.arange(t.numel(), dtype=torch.float32, device=self.dev)
                    .mul_(0.5).add_(step * 1000 + i))
        else:
            t[:] = np.arange(t.size, dtype=np.float32) * np.float32(0.5) + (step * 1000 + i)

    def zero(self, t):
        if self.torch:
            t.zero_()
        else:
            t[:] = 0

    def digest(self, t):
        arr = t.cpu().numpy() if self.torch else t
        return hashlib.blake2b(memoryview(np.ascontiguousarray(arr)).cast("B"),
                               digest_size=16).hexdigest()

    def sync(self):
        if self.torch and self.dev == "cuda":
            torch.cuda.synchronize()


def bcast_p2p(comm, weights, root):
    """The root sends each tensor to every rank (registered per round)."""
    eng, reqs, mrs = comm.engine, [], []
    for i, t in enumerate(weights.values()):
        mr = eng.register(t)
        mrs.append(mr)
        if comm.rank == root:
            reqs += [comm.conn(q).send(mr, tag=100 + i) for q in range(comm.size) if q != root]
        else:
            reqs.append(comm.conn(root).recv(mr, tag=100 + i))
    uccl.wait_all(reqs, timeout=T)
    for mr in mrs:
        mr.release()


def main():
    a = parse()
    world = MPI.COMM_WORLD
    rank, size = world.Get_rank(), world.Get_size()
    if not 0 <= a.root < size:
        raise SystemExit("--root out of range")
    ts = Tensors(a)
    comm = uccl.Comm.from_mpi(world, gpu=0 if a.device == "cuda" else -1)
    weights = {name: ts.zeros(n) for name, n in manifest(a)}
    # registered once, as a trainer's weights are: a MemoryRegion costs the
    # collective nothing per call, where a tensor is looked at each time
    # (its DLPack export and a wait for its stream; ts.sync() orders here)
    regions = [comm.engine.register(t) for t in weights.values()]
    nbytes = sum(n for _, n in manifest(a)) * 4
    mode, times = a.mode, []
    for step in range(a.iters + 1):  # round 0 is a warm-up
        for i, t in enumerate(weights.values()):
            if rank == a.root:
                ts.fill(t, step, i)
            else:
                ts.zero(t)
        ts.sync()
        sums = world.bcast([ts.digest(t) for t in weights.values()] if rank == a.root else None,
                           root=a.root)
        world.Barrier()
        t0 = time.perf_counter()
        if mode != "p2p":
            try:
                reqs = [comm.ibcast(r, a.root) for r in regions]
                uccl.wait_all(reqs, timeout=T)
            except uccl.UnsupportedError as e:
                if mode == "coll":
                    raise
                if rank == 0:
                    print("weight_bcast: %s; using point-to-point send/recv" % e)
                mode = "p2p"
        if mode == "p2p":
            bcast_p2p(comm, weights, a.root)
        ts.sync()
        dt = world.allreduce(time.perf_counter() - t0, op=MPI.MAX)
        for (name, t), want in zip(weights.items(), sums):
            if ts.digest(t) != want:
                raise AssertionError("rank %d, step %d: checksum of %s differs" % (rank, step,
                                                                                 name))
        if step:
            times.append(dt)
    if rank == 0:
        med = float(np.median(times))
        print("weight_bcast: %d ranks, %s, %d tensors, %.1f MiB, root %d, %s" %
              (size, ts.name(), len(weights), nbytes / (1 << 20), a.root,
               "collectives (ibcast per registered tensor)" if mode != "p2p"
              else "point-to-point"))
        print("weight_bcast: %d rounds verified (checksum per tensor on every rank): %.3f GB/s "
              "per receiver (median), %.2f ms per round (best %.2f ms)" %
              (len(times), nbytes / med / 1e9, med * 1e3, min(times) * 1e3))
    for r in regions:
        r.release()
    comm.close()


if __name__ == "__main__":
    try:
        main()
    except Exception:
        # this rank failed: end the whole job, or the ranks waiting for it in
        # MPI (a barrier, a bcast of the next round) would wait forever
        traceback.print_exc()
        sys.stderr.flush()
        MPI.COMM_WORLD.Abort(1)
