#!/usr/bin/env python3
"""Paged KV-cache transfer for disaggregated prefill/decode, on 2 MPI ranks.

Rank 0 ("prefill") holds a paged KV cache: per layer one pool of K and V
blocks (block = 16 tokens x heads x head_dim x 2 bytes). Rank 1 ("decode")
has its own pool. For each request, decode picks a random set of prefill
blocks and random free slots of its own, and asks prefill for them with one
uccl send. The blocks move with one writemsg (prefill pushes, --op write,
notification per layer) or readmsg (decode pulls, --op read) per layer,
each with 2 x blocks local pieces (K and V, non-contiguous) and as many
remote pieces. Every block is verified; prints GB/s and the per-request
latency (p50/p99) seen by decode. --device cuda keeps both caches in GPU
memory (torch CUDA tensors; two processes on one GPU move it with gpu_ipc).

    mpirun -np 2 python3 examples/python/kv_cache.py [--op write|read] [...]
"""
import argparse
import sys
import time
import traceback

import numpy as np
from mpi4py import MPI

import uccl

T = 60.0  # seconds for any single wait
REQ_TAG, DONE_TAG = 1, 2


def parse():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--op", choices=("write", "read"), default="write")
    p.add_argument("--layers", type=int, default=32)
    p.add_argument("--pool-blocks", type=int, default=128, help="blocks per layer pool")
    p.add_argument("--block-bytes", type=int, default=16 * 8 * 128 * 2,
                   help="bytes of one K (or V) block: 16 tokens x 8 heads x 128 x fp16")
    p.add_argument("--blocks", type=int, default=32, help="blocks per request (<= 32)")
    p.add_argument("--iters", type=int, default=50)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                   help="where the caches live (cuda: torch CUDA tensors)")
    a = p.parse_args()
    for name in ("layers", "block_bytes", "iters"):
        if getattr(a, name) < 1:
            p.error("--%s must be at least 1" % name.replace("_", "-"))
    if a.warmup < 0:
        p.error("--warmup must be at least 0")
    if not 1 <= a.blocks <= min(uccl.IOV_MAX // 2, a.pool_blocks):
        p.error("--blocks must be 1..%d and <= --pool-blocks" % (uccl.IOV_MAX // 2))
    return a


def block_value(layer, kv, block):
    """The byte prefill stores in every byte of (layer, K/V, block)."""
    return (layer * 31 + kv * 17 + block * 7 + 1) % 251


def make_cache(a, prefill):
    """One array per layer: [2 (K, V), pool_blocks, block_bytes]."""
    cache = []
    for layer in range(a.layers):
        arr = np.zeros((2, a.pool_blocks, a.block_bytes), np.uint8)
        if prefill:
            for kv in range(2):
                for b in range(a.pool_blocks):
                    arr[kv, b, :] = block_value(layer, kv, b)
        cache.append(to_device(a, arr))
    sync(a)
    return cache


def to_device(a, arr):
    if a.device == "cpu":
        return arr
    import torch
    return torch.from_numpy(arr).to("cuda")


def sync(a):
    """GPU memory: the zeroing/filling kernels are done before a transfer."""
    if a.device == "cuda":
        import torch
        torch.cuda.synchronize()


def pieces(a, mrs, descs, src_blocks, dst_blocks, prefill_local):
    """Per layer: local pieces of this rank's region and the peer's pieces."""
    loc = src_blocks if prefill_local else dst_blocks
    rem = dst_blocks if prefill_local else src_blocks
    bb = a.block_bytes
    out = []
    for layer in range(a.layers):
        iov = [(mrs[layer], (kv * a.pool_blocks + int(b)) * bb, bb)
               for kv in range(2) for b in loc]
        riov = [(descs[layer], (kv * a.pool_blocks + int(b)) * bb, bb)
                for kv in range(2) for b in rem]
        out.append((iov, riov))
    return out


def prefill(a, engine, conn, mrs, descs):
    """Serve decode's requests until it sends iteration -1."""
    ask = np.zeros(2 * a.blocks + 1, np.int64)
    with engine.register(ask) as mr_ask:
        while True:
            conn.recv(mr_ask, tag=REQ_TAG, block=True)
            it = int(ask[-1])
            if it < 0:
                return
            if a.op == "read":  # decode pulls; progress until it says done
                continue
            src, dst = ask[:a.blocks], ask[a.blocks:2 * a.blocks]
            reqs = [conn.writemsg(iov, riov, notify=(it << 16) | layer)
                    for layer, (iov, riov) in enumerate(pieces(a, mrs, descs, src, dst, True))]
            uccl.wait_all(reqs, timeout=T)


def decode_one(a, conn, cache, mrs, descs, mr_ask, ask, it, rng):
    """One request: ask for random blocks, wait for them, verify; seconds."""
    src = rng.choice(a.pool_blocks, a.blocks, replace=False)
    dst = rng.choice(a.pool_blocks, a.blocks, replace=False)
    for arr in cache:
        arr[:, list(dst), :] = 0
    sync(a)
    ask[:a.blocks], ask[a.blocks:2 * a.blocks], ask[-1] = src, dst, it
    t0 = time.perf_counter()
    conn.send(mr_ask, tag=REQ_TAG, block=True)
    if a.op == "write":
        seen, end = 0, time.monotonic() + T
        while seen < a.layers:
            v = conn.poll_notif()
            if v is None:
                if time.monotonic() > end:
                    raise uccl.TimeoutError("no notification in %s s" % T)
                continue
            assert v >> 16 == it, "notification of request %d during %d" % (v >> 16, it)
            seen += 1
    else:
        reqs = [conn.readmsg(iov, riov)
                for iov, riov in pieces(a, mrs, descs, src, dst, False)]
        uccl.wait_all(reqs, timeout=T)
    dt = time.perf_counter() - t0
    for layer, arr in enumerate(cache):
        if a.device == "cuda":
            arr = arr.cpu().numpy()
        for kv in range(2):
            for s, d in zip(src, dst):
                want = block_value(layer, kv, int(s))
                if not (arr[kv, d] == want).all():
                    raise AssertionError("layer %d kv %d block %d -> %d: wrong bytes"
                                         % (layer, kv, s, d))
    return dt


def main():
    a = parse()
    world = MPI.COMM_WORLD
    if world.Get_size() != 2:
        raise SystemExit("kv_cache.py runs on 2 ranks (mpirun -np 2)")
    rank = world.Get_rank()
    if a.device == "cuda":
        import torch
        torch.cuda.set_device(0)
    comm = uccl.Comm.from_mpi(world, gpu=0 if a.device == "cuda" else -1)
    engine = comm.engine
    conn = comm.conn(1 - rank)
    cache = make_cache(a, prefill=rank == 0)
    mrs = [engine.register(arr) for arr in cache]
    descs = world.sendrecv([m.descriptor() for m in mrs], dest=1 - rank, source=1 - rank)
    world.Barrier()
    if rank == 0:
        prefill(a, engine, conn, mrs, descs)
    else:
        ask = np.zeros(2 * a.blocks + 1, np.int64)
        rng = np.random.default_rng(1234)
        with engine.register(ask) as mr_ask:
            lat = [decode_one(a, conn, cache, mrs, descs, mr_ask, ask, it, rng)
                   for it in range(a.warmup + a.iters)][a.warmup:]
            ask[-1] = -1
            conn.send(mr_ask, tag=REQ_TAG, block=True)
        per_req = a.layers * 2 * a.blocks * a.block_bytes
        lat_us = np.array(lat) * 1e6
        print("kv_cache: %s memory, op %s over %s, %d layers x K,V x %d blocks x %d B = %d bytes/request, "
              "%d pieces per %s call" % (a.device, a.op,
                                         conn.gpu_transport if a.device == "cuda"
                                         else conn.transport, a.layers, a.blocks,
                                         a.block_bytes, per_req, 2 * a.blocks,
                                         "writemsg" if a.op == "write" else "readmsg"))
        print("kv_cache: %d requests verified: %.3f GB/s, latency p50 %.1f us, p99 %.1f us"
              % (a.iters, per_req * a.iters / sum(lat) / 1e9,
                 np.percentile(lat_us, 50), np.percentile(lat_us, 99)))
    world.Barrier()
    for m in mrs:
        m.release()
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
