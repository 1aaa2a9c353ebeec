"""The collectives' worker of python -m uccl.bench (--op allgather|alltoall|
bcast): blocking calls back to back after a barrier, the slowest rank's mean
time per call, as uccl_perf coll measures them (uccl/bench.py's driver runs
both and prints the table)."""
import json
import time

from uccl.bench import all_equal, new_buffer, sizes_of


def coll_iters(a, n, count):  # as uccl_perf coll's auto_iters
    if a.iters:
        return a.iters
    recv = count if a.op == "bcast" else n * count
    return max(5, min(1000, (64 << 20) // (recv + 4096)))


def coll_worker(a):
    from mpi4py import MPI
    import uccl
    world = MPI.COMM_WORLD
    comm = uccl.Comm.from_mpi(world, transports=a.transport, gpu=0 if a.mem == "cuda" else -1)
    n, rows = comm.size, []
    # once, at the largest size, as uccl_perf coll: every size uses their start
    sbuf = new_buffer(a, a.max * (n if a.op == "alltoall" else 1), comm.rank)
    rbuf = new_buffer(a, a.max * n, 0)
    for count in sizes_of(a.min, a.max):
        send = sbuf[:count if a.op != "alltoall" else n * count]
        recv = rbuf[:n * count]
        regions = []
        if a.mem == "cuda" and not a.objects:
            regions = [comm.engine.register(send), comm.engine.register(recv)]
            send, recv_arg = regions
        else:
            recv_arg = recv
        if a.stream:  # stream order on the current stream: no producer query
            import torch
            st = torch.cuda.current_stream()
            post = {"allgather": comm.allgather, "alltoall": comm.alltoall}.get(a.op)
            if post is None:
                raise SystemExit("uccl.bench: --stream: allgather or alltoall")
            sync = st.synchronize

            def call():  # as uccl_perf coll --stream: each call's stream synchronized
                post(send, recv_arg, stream=st).wait()
                sync()
        elif a.op == "allgather":
            call = lambda: comm.allgather(send, recv_arg)  # noqa: E731
        elif a.op == "alltoall":
            call = lambda: comm.alltoall(send, recv_arg)  # noqa: E731
        else:
            call = lambda: comm.bcast(send, 0)  # noqa: E731
        iters = coll_iters(a, n, count)
        for _ in range(a.warmup):
            call()
        world.Barrier()
        if a.profile:
            uccl._uccl._profile(True, reset=True)
        t0 = time.perf_counter()
        for _ in range(iters):
            call()
        t = world.allreduce((time.perf_counter() - t0) / iters, op=MPI.MAX)
        prof = uccl._uccl._profile(False, reset=True) if a.profile else {}
        for q in range(n if a.op != "bcast" else 0):
            if not all_equal(recv[q * count:(q + 1) * count], q):
                raise SystemExit("uccl.bench: %s data check failed" % a.op)
        for r in regions:
            r.release()
        if regions:
            comm.flush()  # their registrations go with them
        rows.append({"size": count, "us": t * 1e6, "gbps": count / t / 1e9,
                     "profile": {k: v[1] / iters * 1e6 for k, v in prof.items()}})
    if comm.rank == 0:
        with open(a.json, "w") as f:
            json.dump({"transport": comm.conn(1).transport if n > 1 else "none",
                       "rows": rows}, f)
    world.Barrier()
    comm.close()
