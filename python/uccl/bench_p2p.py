"""The point-to-point loops of python -m uccl.bench (session 14: moved out of
bench.py, which keeps the driver, the worker and the tables): the buffers,
Python's windows in each --post mode (phase), and C's loop (c_phase,
uccl._uccl._p2p_loop: uccl_perf's). Per window each Python loop makes the
calls uccl_perf's _p2p_loop makes, in its order: rank 0 of send posts the
ack's receive and the window, then waits for both; rank 1 posts the
window's receives, waits, then sends the ack; write/read post the window
and wait, rank 1 idles until the fin."""
import mmap
import os
import time

TAG_DATA, TAG_ACK, TAG_FIN = 1, 2, 3


def auto_iters(size, window):  # as uccl_perf's auto_iters
    return max(3, min(200, (256 << 20) // max(1, size * window)))


def sizes_of(lo, hi):
    out, s = [], lo
    while s <= hi:
        out.append(s)
        s *= 2
    return out


def idle_wait(engine, req):
    """Rank 1 of write/read: progress while the engine has work, else sleep."""
    last, pause = time.monotonic(), 0.0
    while True:
        events = engine.progress()
        if req.test():
            return
        now = time.monotonic()
        if events > 0:
            last, pause = now, 0.0
        elif now - last > 1e-3:
            pause = 1e-5 if pause == 0 else min(pause * 2, 1e-3)
            time.sleep(pause)


def host_buffer(n, fill):
    """n bytes of page-aligned anonymous memory (no huge-page advice), as a
    writable numpy array: what uccl_perf's aligned_alloc gives it."""
    import numpy as np
    buf = np.frombuffer(mmap.mmap(-1, max(1, n)), np.uint8)[:n]
    buf[:] = fill
    return buf


def gpu_buffer(n, fill):
    import torch
    return torch.full((max(1, n),), fill, dtype=torch.uint8, device="cuda")[:n]


def new_buffer(a, n, fill):
    return gpu_buffer(n, fill) if a.mem == "cuda" else host_buffer(n, fill)


def all_equal(buf, value):
    return bool((buf == value).all())


def poster(a, conn, mr, desc, size, rank):
    """The window's operation and its arguments, chosen once per phase, as
    a loop written for speed would (what remains is the binding's cost and
    the loop's own)."""
    if a.op == "send":
        return (conn.send if rank == 0 else conn.recv), (mr, 0, size, TAG_DATA)
    return (conn.write if a.op == "write" else conn.read), (mr, desc, 0, size)


def poster_many(a, conn, mr, desc, size, rank):
    """The batch forms (--post many, group): the Conn method that posts a list, and
    the window's list (one entry, the one-by-one call's arguments, repeated:
    the binding reads it once)."""
    if a.op == "send":
        post = conn.send_many if rank == 0 else conn.recv_many
        return post, [(mr, 0, size, TAG_DATA)] * a.window
    post = conn.write_many if a.op == "write" else conn.read_many
    return post, [(mr, desc, 0, size)] * a.window


def window(op, args, n, wait_all, conn, ctl, ack_first, ack_after):
    reqs = [conn.recv(ctl, 0, 0, TAG_ACK)] if ack_first else []
    for _ in range(n):
        reqs.append(op(*args))
    wait_all(reqs)
    # the window's requests freed before the ack, as the C loop frees them
    # (session 11): after it they sat between the ack and the receiver's
    # next receives, while the sender's next messages were already coming
    reqs.clear()
    if ack_after:
        conn.send(ctl, 0, 0, TAG_ACK, block=True)


def window_many(post, ops, wait_all, conn, ctl, ack_first, ack_after):
    """window() with the window's transfers posted by one call (Conn.*_many)."""
    ack = conn.recv(ctl, 0, 0, TAG_ACK) if ack_first else None
    reqs = post(ops)
    if ack is not None:
        reqs.append(ack)
    wait_all(reqs)
    reqs = ack = None  # freed before the ack, as window() and the C loop do
    if ack_after:
        conn.send(ctl, 0, 0, TAG_ACK, block=True)


def window_group(post, ops, wait_all, conn, ctl, ack_first, ack_after):
    """window() with the window posted by one call returning one Request."""
    if ack_first:
        ack = conn.recv(ctl, 0, 0, TAG_ACK)
        wait_all([post(ops, group=True), ack])
        ack = None
    else:
        post(ops, group=True).wait()
    if ack_after:
        conn.send(ctl, 0, 0, TAG_ACK, block=True)


def loop_group(post, ops, conn, ctl, iters, rank, send):
    """--post group: iters windows, each posted by one *_many(group=True)
    call, written as a loop for speed (session 13b): the same calls as
    window_group() in the same order, the methods bound once and no Python
    function call a window. Rank 0 of send: the ack's receive, the window,
    one wait for both; rank 1: the window, its wait, the ack; write/read:
    the window and its wait."""
    from uccl import wait_all
    if not send:
        for _ in range(iters):
            post(ops, group=True).wait()
    elif rank == 0:
        recv = conn.recv
        for _ in range(iters):
            wait_all((recv(ctl, 0, 0, TAG_ACK), post(ops, group=True)))
    else:
        ack = conn.send
        for _ in range(iters):
            post(ops, group=True).wait()
            ack(ctl, 0, 0, TAG_ACK, block=True)


def loop_pgroup(a, conn, mr, ctl, desc, size, iters, rank, progress=False):
    """--post pgroup (session 16): loop_persist's PersistentRequests in a
    uccl.PersistentGroup: start() before the first window, then
    wait_start() (wait(), then start() again) after each but the last, and
    wait() after it; the same library calls in the same order as
    loop_persist. Rank 0 of send: the ack's receive and the window
    together (as start_all / wait_all); rank 1: the window, then the ack
    (chain=True: wait() waits for the window, then starts the ack and waits
    for it); write/read: the window alone. progress (--post pgroupp, session
    17): the groups made with progress=True (start() ends with a round of
    progress: gpu_ipc's held-back copies go before the interpreter runs)."""
    from itertools import repeat

    from uccl import PersistentGroup
    if a.op == "send":
        mine = conn.send_init if rank == 0 else conn.recv_init
        ack = (conn.recv_init if rank == 0 else conn.send_init)([(ctl, 0, 0, TAG_ACK)])
        win = mine([(mr, 0, size, TAG_DATA)] * a.window)
        g = (PersistentGroup((ack, win), progress=progress) if rank == 0
             else PersistentGroup((win, ack), chain=True, progress=progress))
    else:
        ack = None
        win = (conn.write_init if a.op == "write" else conn.read_init)(
            [(mr, desc, 0, size)] * a.window)
        g = PersistentGroup((win,), progress=progress)
    if iters > 0:  # timeit's loop: no int made per round (range makes one)
        g.start()
        for _ in repeat(None, iters - 1):
            g.wait_start()  # a method call: cheaper than a bound method in 3.11
        g.wait()
    win.close()
    if ack is not None:
        ack.close()


def loop_persist(a, conn, mr, ctl, desc, size, iters, rank, acc=None):
    """--post persist (session 15): the window's transfers and the ack as
    uccl.PersistentRequests (Conn.*_init), made once, then started and
    waited each window: the same calls in the same order as loop_group
    (rank 0 of send: the ack's receive and the window started together and
    waited together; rank 1: the window, its wait, the ack and its wait;
    write/read: the window and its wait), with nothing parsed or made per
    window. acc (--split): seconds starting and waiting, summed."""
    from uccl import start_all, wait_all
    if a.op == "send":
        mine = conn.send_init if rank == 0 else conn.recv_init
        ack = (conn.recv_init if rank == 0 else conn.send_init)([(ctl, 0, 0, TAG_ACK)])
        win = mine([(mr, 0, size, TAG_DATA)] * a.window)
    else:
        ack = None
        win = (conn.write_init if a.op == "write" else conn.read_init)(
            [(mr, desc, 0, size)] * a.window)
    with win:
        if acc is not None:
            perf = time.perf_counter
            for _ in range(iters):
                both = ack is not None and rank == 0
                t0 = perf()
                if both:
                    start_all((ack, win))
                else:
                    win.start()
                t1 = perf()
                if both:
                    wait_all((ack, win))
                else:
                    win.wait()
                acc[0] += t1 - t0
                acc[1] += perf() - t1
                if ack is not None and rank == 1:
                    ack.start()
                    ack.wait()
        elif ack is None:
            start, wait = win.start, win.wait
            for _ in range(iters):
                start()
                wait()
        elif rank == 0:
            both = (ack, win)
            for _ in range(iters):
                start_all(both)
                wait_all(both)
        else:
            start, wait, ack_start, ack_wait = win.start, win.wait, ack.start, ack.wait
            for _ in range(iters):
                start()
                wait()
                ack_start()
                ack_wait()
    if ack is not None:
        ack.close()


def window_group_split(post, ops, wait_all, conn, ctl, ack_first, ack_after, acc):
    """window_group() timed in two parts (--split)."""
    t0 = time.perf_counter()
    ack = conn.recv(ctl, 0, 0, TAG_ACK) if ack_first else None
    g = post(ops, group=True)
    t1 = time.perf_counter()
    if ack is not None:
        wait_all([g, ack])
    else:
        g.wait()
    g = ack = None
    t2 = time.perf_counter()
    acc[0] += t1 - t0
    acc[1] += t2 - t1
    if ack_after:
        conn.send(ctl, 0, 0, TAG_ACK, block=True)


def window_many_split(post, ops, wait_all, conn, ctl, ack_first, ack_after, acc):
    """window_many() timed in two parts (--split)."""
    t0 = time.perf_counter()
    ack = conn.recv(ctl, 0, 0, TAG_ACK) if ack_first else None
    reqs = post(ops)
    if ack is not None:
        reqs.append(ack)
    t1 = time.perf_counter()
    wait_all(reqs)
    reqs = ack = None
    t2 = time.perf_counter()
    acc[0] += t1 - t0
    acc[1] += t2 - t1
    if ack_after:
        conn.send(ctl, 0, 0, TAG_ACK, block=True)


def window_split(op, args, n, wait_all, conn, ctl, ack_first, ack_after, acc):
    """window() timed in two parts (--split), as the C loop's are
    (uccl._uccl._p2p_loop_split): posting, and waiting plus the frees."""
    t0 = time.perf_counter()
    reqs = [conn.recv(ctl, 0, 0, TAG_ACK)] if ack_first else []
    for _ in range(n):
        reqs.append(op(*args))
    t1 = time.perf_counter()
    wait_all(reqs)
    reqs.clear()
    t2 = time.perf_counter()
    acc[0] += t1 - t0
    acc[1] += t2 - t1
    if ack_after:
        conn.send(ctl, 0, 0, TAG_ACK, block=True)


def phase(a, world, comm, conn, mr, ctl, desc, size, iters, acc=None, mode=None):
    """Python's loop: windows posted one call per transfer (mode "one"), or
    one Conn.*_many call per window ("many": a Request per transfer,
    "group": one for the window, loop_group; "groupfn": the same through
    window_group), or once for all windows ("persist": PersistentRequests,
    loop_persist). mode None: the first of --post."""
    from uccl import wait_all
    rank = comm.rank
    mode = mode or a.post[0]
    many = mode not in ("one", "persist", "pgroup", "pgroupp")
    op, args = (poster_many if many else poster)(a, conn, mr, desc, size, rank)
    send = a.op == "send"
    world.Barrier()
    t0 = time.perf_counter()
    if rank == 1 and not send:
        idle_wait(comm.engine, conn.recv(ctl, 0, 0, TAG_FIN))
        return 0.0
    if mode == "persist" or (mode in ("pgroup", "pgroupp") and acc is not None):
        loop_persist(a, conn, mr, ctl, desc, size, iters, rank, acc)
    elif mode in ("pgroup", "pgroupp"):
        loop_pgroup(a, conn, mr, ctl, desc, size, iters, rank, progress=mode == "pgroupp")
    elif mode == "group" and acc is None:
        loop_group(op, args, conn, ctl, iters, rank, send)
    elif many:
        if mode != "many":  # group (timed in parts) or groupfn
            fn = window_group if acc is None else window_group_split
        else:
            fn = window_many if acc is None else window_many_split
        extra = () if acc is None else (acc,)
        for _ in range(iters):
            fn(op, args, wait_all, conn, ctl, send and rank == 0, rank == 1, *extra)
    elif acc is not None:
        for _ in range(iters):
            window_split(op, args, a.window, wait_all, conn, ctl, send and rank == 0,
                         rank == 1, acc)
    else:
        for _ in range(iters):
            window(op, args, a.window, wait_all, conn, ctl, send and rank == 0, rank == 1)
    t = time.perf_counter() - t0
    if rank == 0 and not send:
        conn.send(ctl, 0, 0, TAG_FIN, block=True)
    return t



def c_phase(a, world, conn, mr, ctl, desc, size, iters, rank):
    """The same as phase(), in C (uccl._uccl._p2p_loop)."""
    import uccl
    world.Barrier()
    return uccl._uccl._p2p_loop(conn, a.op, rank, mr, ctl, desc,
                                size, a.window, iters)


class Side:
    """One engine's point-to-point setup: its Comm, connection, buffer,
    region, ack region and the peer's descriptor."""

    def __init__(self, a, world, env=None):
        import numpy as np
        import uccl
        saved = {k: os.environ.get(k) for k in env or {}}
        os.environ.update(env or {})  # read by libuccl when the engine opens
        try:
            self.comm = uccl.Comm.from_mpi(world, transports=a.transport,
                                           gpu=0 if a.mem == "cuda" else -1)
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
        rank = self.comm.rank
        self.conn = self.comm.conn(1 - rank)
        self.source = 1 if a.op == "read" else 0
        self.buf = new_buffer(a, a.max, 0x5A if rank == self.source else 0)
        self.mr = self.comm.engine.register(self.buf)
        # 0-byte acks and fins: on the data's region with GPU memory, as
        # uccl_perf (they then go over the transport that moves the data)
        self.ctl = (self.mr if a.mem == "cuda"
                    else self.comm.engine.register(np.zeros(1, np.uint8)))
        self.desc = world.bcast(self.mr.descriptor() if rank == 1 else None, root=1)

    def close(self, world):
        if self.comm.rank != self.source and not all_equal(self.buf, 0x5A):
            raise SystemExit("uccl.bench: data check failed")  # the destination checks
        world.Barrier()
        self.mr.release()
        if self.ctl is not self.mr:
            self.ctl.release()
        self.comm.close()
