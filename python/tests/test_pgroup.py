"""uccl.PersistentGroup (session 16): PersistentRequests started and waited
as one. Together: the send loop's sender (the ack's receive and the window);
chain=True: its receiver (the window, then the ack); wait_start();
progress=True (session 17); one GIL check a wait_start() (session 17); bytes
compared each round; misuse and failures raise; 10^4 rounds leave
reference counts and memory flat."""
import gc
import os
import sys
import threading
import time

import numpy as np
import pytest

import uccl
from conftest import T, pattern, rma_setup, rss_kib


def test_send_loop_together_and_chain(pair):
    """50 windows of 8 with an ack, then 50 more through wait_start(): the
    data of each round lands, wait() returns the bytes summed."""
    n, w = 4096, 8
    ctl = np.zeros(1, np.uint8)
    if pair.rank == 0:
        a = np.zeros(n, np.uint8)
        with pair.engine.register(a) as mr, pair.engine.register(ctl) as mc:
            ack = pair.conn.recv_init([(mc, 0, 0, 2)])
            win = pair.conn.send_init([(mr, 0, n, 1)] * w)
            g = uccl.PersistentGroup([ack, win])
            assert len(g) == 2 and not g.chain and g.requests == (ack, win) and not g.active
            for r in range(50):
                a[:] = r
                g.start()
                assert g.active and ack.active and win.active
                assert g.wait(T) == w * n
                assert not g.active and not win.active
                assert g.wait(T) == w * n  # again: the same result
            a[:] = 77  # constant: a round may still read it while wait_start returns
            g.start()
            for r in range(51, 100):
                assert g.wait_start() == w * n  # waits for round r-1, starts round r
            assert g.wait(T) == w * n
            win.start()  # the members on their own
            assert win.wait(T) == w * n
    else:
        x = np.zeros(w * n, np.uint8)
        with pair.engine.register(x) as mr, pair.engine.register(ctl) as mc:
            win = pair.conn.recv_init([(mr, k * n, n, 1) for k in range(w)])
            ack = pair.conn.send_init([(mc, 0, 0, 2)])
            g = uccl.PersistentGroup((win, ack), chain=True)
            assert g.chain and len(g) == 2
            for r in range(50):
                g.start()
                assert win.active and not ack.active
                assert g.wait(T) == w * n
                assert (x == r).all()
            g.start()
            for r in range(51, 100):
                assert g.wait_start() == w * n
            assert g.wait(T) == w * n
            assert (x == 77).all()
            win.start()
            assert win.wait(T) == w * n


def test_progress_start(pair):
    """progress=True (session 17): start() ends with a round of the engine's
    progress; the send loop's both sides (together and chain) made so run
    50 rounds with the bytes of each landing, and the attribute says so
    (False by default)."""
    n, w = 4096, 8
    ctl = np.zeros(1, np.uint8)
    if pair.rank == 0:
        a = np.zeros(n, np.uint8)
        with pair.engine.register(a) as mr, pair.engine.register(ctl) as mc:
            ack = pair.conn.recv_init([(mc, 0, 0, 2)])
            win = pair.conn.send_init([(mr, 0, n, 1)] * w)
            assert not uccl.PersistentGroup([ack, win]).progress
            g = uccl.PersistentGroup([ack, win], progress=True)
            assert g.progress and not g.chain
            for r in range(50):
                a[:] = r
                g.start()
                assert g.wait(T) == w * n
            ack.close()
            win.close()
    else:
        x = np.zeros(w * n, np.uint8)
        with pair.engine.register(x) as mr, pair.engine.register(ctl) as mc:
            win = pair.conn.recv_init([(mr, k * n, n, 1) for k in range(w)])
            ack = pair.conn.send_init([(mc, 0, 0, 2)])
            g = uccl.PersistentGroup((win, ack), chain=True, progress=True)
            assert g.progress and g.chain
            for r in range(50):  # (after wait_start() the next round may be landing)
                g.start()
                assert g.wait(T) == w * n
                assert (x == r).all()
            ack.close()
            win.close()
    pair.barrier()


def test_misuse(pair):
    """Bad arguments: TypeError / ValueError naming the item; start() twice,
    wait() before start(), a member started on its own."""
    buf = np.zeros(64, np.uint8)
    with pair.engine.register(buf) as mr:
        p = pair.conn.send_init([(mr, 0, 8, 1)])
        q = pair.conn.send_init([(mr, 8, 8, 1)])
        with pytest.raises(TypeError):
            uccl.PersistentGroup(5)
        with pytest.raises(TypeError, match="expected uccl.PersistentRequest.*item 1"):
            uccl.PersistentGroup([p, "x"])
        with pytest.raises(ValueError, match="at least one"):
            uccl.PersistentGroup([])
        with pytest.raises(ValueError, match="item 1 is item 0 again"):
            uccl.PersistentGroup([p, p])
        with pytest.raises(TypeError):
            uccl.PersistentGroup([p], chain=1, other=2)
        c = pair.conn.send_init([(mr, 0, 8, 1)])
        c.close()
        with pytest.raises(ValueError, match="item 1 is closed"):
            uccl.PersistentGroup([p, c])
        g = uccl.PersistentGroup([p, q])
        with pytest.raises(ValueError, match="not started"):
            g.wait(T)
        with pytest.raises(ValueError, match="not started"):
            g.wait_start()
        p.start()  # on its own: the group cannot start it
        with pytest.raises(ValueError, match="still started"):
            g.start()
        assert not g.active and not q.active
        x = np.zeros(8, np.uint8)
        with pair.engine.register(x) as mx:
            assert pair.conn.recv(mx, 0, 8, 1).wait(T) == 8  # the peer's p
            assert p.wait(T) == 8
            r = pair.conn.recv_init([(mx, 0, 8, 7)])
            h = uccl.PersistentGroup([r])
            h.start()
            with pytest.raises(ValueError, match="still started"):
                h.start()
            with pytest.raises(uccl.TimeoutError):
                h.wait(0.05)  # the peer sends only after the barrier
            assert h.active  # a timeout leaves it started
            pair.barrier()
            s = pair.conn.send(mr, 0, 8, 7)
            assert h.wait(T) == 8 and not h.active
            assert s.wait(T) == 8
            r.close()
        p.close()
        q.close()
        with pytest.raises(ValueError, match="closed"):
            g.start()  # a member closed since
        assert not g.active
    pair.barrier()


def test_one_waiter_at_a_time(pair):
    """While a thread waits on a group (the GIL released), another thread's
    wait() raises uccl.BusyError and start() ValueError; the first wait
    finishes when the peer sends."""
    buf = np.zeros(8, np.uint8)
    with pair.engine.register(buf) as mr:
        r = pair.conn.recv_init([(mr, 0, 8, 11)])
        g = uccl.PersistentGroup([r], chain=True)
        g.start()
        got = []

        def waiter():
            while True:  # this thread's own polls below may hold it off a moment
                try:
                    got.append(g.wait(T))
                    return
                except uccl.BusyError:
                    time.sleep(0.001)

        t = threading.Thread(target=waiter)
        t.start()
        end = time.monotonic() + T
        while time.monotonic() < end:  # until the thread is in wait()
            try:
                g.wait(0)
            except uccl.BusyError:
                break
            except uccl.TimeoutError:
                time.sleep(0.01)
        else:
            pytest.fail("the other thread never waited")
        with pytest.raises(ValueError, match="still started"):
            g.start()
        pair.barrier()
        assert pair.conn.send(mr, 0, 8, 11).wait(T) == 8
        t.join(T)
        assert got == [8] and not g.active
        r.close()
    pair.barrier()


def test_other_engine(pair):
    """All members on one engine."""
    with uccl.Engine() as eng:
        peer = pair.swap(eng.address)
        c = eng.connect(peer) if pair.rank == 0 else eng.accept(timeout=T)
        with eng.register(np.zeros(8, np.uint8)) as m1, \
                pair.engine.register(np.zeros(8, np.uint8)) as m2:
            a = c.send_init([m1])
            b = pair.conn.send_init([m2])
            with pytest.raises(ValueError, match="item 1 is of another Engine"):
                uccl.PersistentGroup([a, b])
            a.close()
            b.close()
        pair.barrier()
        c.close()
    pair.barrier()


def test_failures_stop_in_order(pair):
    """Together: a member whose region was released stops start() there; the
    members before it were started and wait() finishes them (their bytes
    land). Chain: the next member fails to start after the first finished:
    wait() raises, the group is no longer started. A libuccl error at
    start() (a stale descriptor) raises as the member's."""
    n = 4096
    buf, mr, desc = rma_setup(pair, n, 9)
    if pair.rank == 0:
        other = pair.engine.register(np.zeros(n, np.uint8))
        a = pair.conn.write_init([(mr, desc, 0, 100)])
        b = pair.conn.write_init([(other, desc, 100, 100)])
        g = uccl.PersistentGroup([a, b])
        h = uccl.PersistentGroup([a, b], chain=True)
        other.release()
        with pytest.raises(ValueError, match="released"):
            g.start()
        assert g.active and a.active and not b.active
        assert g.wait(T) == 100 and not g.active
        h.start()
        with pytest.raises(ValueError, match="released"):
            h.wait(T)
        assert not h.active and not a.active and not b.active
        with pytest.raises(ValueError, match="not started"):
            h.wait(T)
        with uccl.Engine(transports="shm") as e3, e3.register(np.zeros(n, np.uint8)) as m3:
            s = pair.conn.write_init([(mr, m3.descriptor(), 0, 10)])
            g2 = uccl.PersistentGroup([s])
            with pytest.raises(uccl.StaleError):
                g2.start()
            assert not g2.active
            s.close()
        a.close()
        b.close()
        pair.token_send()
    else:
        pair.token_recv()
        assert np.array_equal(buf[:100], pattern(n, 9)[:100]) and not buf[100:].any()
    mr.release()


def test_ten_thousand_rounds_flat(pair):
    """After a warm-up, 10^4 rounds of a group of windows of 16 (start,
    wait_start, wait), 10^3 groups made, run and dropped, 100 refused: the
    members, region and connection hold as many references as before, and
    RSS stays flat (plain builds)."""
    n = 1024
    buf, mr, desc = rma_setup(pair, n, 8)
    if pair.rank == 0:
        w1 = pair.conn.write_init([(mr, desc, 0, n)] * 16)
        w2 = pair.conn.write_init([(mr, desc, 0, n)] * 8)
        g = uccl.PersistentGroup([w1, w2])
        g.start()
        for _ in range(6000):  # warm-up: the shm rings' first lap (test_persist.py)
            g.wait_start()
        g.wait(T)
        gc.collect()
        refs = tuple(sys.getrefcount(o) for o in (w1, w2, mr, desc, pair.conn))
        before = rss_kib()
        g.start()
        for _ in range(10000):
            assert g.wait_start() == 24 * n
        g.wait(T)
        for k in range(1000):
            h = uccl.PersistentGroup((w1, w2), chain=k % 2 == 1)
            h.start()
            h.wait(T)
        del h
        for _ in range(100):
            with pytest.raises(ValueError):
                uccl.PersistentGroup([w1, w1])
        gc.collect()
        grown = rss_kib() - before
        assert tuple(sys.getrefcount(o) for o in (w1, w2, mr, desc, pair.conn)) == refs
        if not os.environ.get("UCCL_PY_SANITIZED"):
            assert grown < 1024, "RSS grew by %d KiB" % grown
        base = sys.getrefcount(w1)
        del g
        gc.collect()
        assert sys.getrefcount(w1) == base - 1  # the group let go of its members
        w1.close()
        w2.close()
        pair.token_send()
    else:
        pair.token_recv()
        assert np.array_equal(buf, pattern(n, 8))
    mr.release()


def _asks_rounds(g, rounds):
    """rounds of wait_start() after a start(): the _fast_stats counts of the
    rounds alone, then wait()."""
    g.start()
    uccl._uccl._fast_stats(reset=True)
    for _ in range(rounds):
        g.wait_start()
    s = uccl._uccl._fast_stats()
    g.wait(T)
    return s


def test_wait_start_asks_once(pair):
    """Session 18: wait_start() asks once whether another thread could take
    the GIL for its wait and all its members' posts (not once per post): a
    round asks at most once more than its wait's slices. Together and chain,
    alone and with another thread alive (then every wait and post releases
    the GIL); the bytes land."""
    n, rounds = 1024, 200
    buf, mr, desc = rma_setup(pair, n, 12)
    if pair.rank == 0:
        a = pair.conn.write_init([(mr, desc, 0, n // 2)] * 4)
        b = pair.conn.write_init([(mr, desc, n // 2, n // 2, n // 2)] * 4)
        for chain in (False, True):
            g = uccl.PersistentGroup([a, b], chain=chain)
            s = _asks_rounds(g, rounds)
            posts = 2 * rounds  # each member once a round
            slices = s["gil_kept"] + s["gil_released"] - posts
            assert s["gil_released"] == 0, s
            assert s["gil_asks"] <= slices + rounds, (chain, s)
            stop = threading.Event()
            t = threading.Thread(target=stop.wait)
            t.start()
            try:
                s = _asks_rounds(g, rounds)
            finally:
                stop.set()
                t.join()
            slices = s["gil_kept"] + s["gil_released"] - posts
            assert s["gil_kept"] == 0 and s["gil_released"] >= posts, s
            assert s["gil_asks"] <= slices + rounds, (chain, s)
        a.close()
        b.close()
        pair.token_send()
    else:
        pair.token_recv()
        assert np.array_equal(buf, pattern(n, 12))
    mr.release()


def test_one_member_write_read_flat(pair):
    """A group of one member waits on that member's own requests (session
    17): a write group's bytes land, a read group's come back, round after
    round; 10^4 wait_start() rounds of the read group leave reference counts
    and RSS flat."""
    n = 1024
    buf, mr, desc = rma_setup(pair, n, 13)
    if pair.rank == 0:
        w = pair.conn.write_init([(mr, desc, 0, n // 4), (mr, desc, n // 4, 3 * n // 4, n // 4)])
        gw = uccl.PersistentGroup([w])
        gw.start()
        for _ in range(50):
            assert gw.wait_start() == n
        assert gw.wait(T) == n
        back = np.zeros(n, np.uint8)
        with pair.engine.register(back) as mb:
            r = pair.conn.read_init([(mb, desc, 0, n)])
            gr = uccl.PersistentGroup([r])
            gr.start()
            assert gr.wait(T) == n
            assert np.array_equal(back, pattern(n, 13))
            back[:] = 0
            gr.start()
            for _ in range(6000):  # warm-up (test_ten_thousand_rounds_flat)
                gr.wait_start()
            assert gr.wait(T) == n
            assert np.array_equal(back, pattern(n, 13))
            gc.collect()
            refs = tuple(sys.getrefcount(o) for o in (r, mb, desc, pair.conn, gr))
            before = rss_kib()
            gr.start()
            for _ in range(10000):
                assert gr.wait_start() == n
            assert gr.wait(T) == n
            gc.collect()
            grown = rss_kib() - before
            assert tuple(sys.getrefcount(o) for o in (r, mb, desc, pair.conn, gr)) == refs
            if not os.environ.get("UCCL_PY_SANITIZED"):
                assert grown < 1024, "RSS grew by %d KiB" % grown
            r.close()
        w.close()
        pair.token_send()
    else:
        pair.token_recv()
        assert np.array_equal(buf, pattern(n, 13))
    mr.release()


def test_wait_start_start_fails(pair):
    """wait_start() whose start() fails (a member closed after the group
    finished): ValueError, the group no longer started, the result's int
    not leaked; a group not started: ValueError before anything."""
    n = 256
    buf, mr, desc = rma_setup(pair, n, 14)
    if pair.rank == 0:
        a = pair.conn.write_init([(mr, desc, 0, n)])
        g = uccl.PersistentGroup([a])
        with pytest.raises(ValueError, match="not started"):
            g.wait_start()
        g.start()
        res = g.wait(T)
        assert res == n
        a.close()
        base = sys.getrefcount(res)
        with pytest.raises(ValueError, match="closed"):
            g.wait_start()  # the wait's result dropped, start() raised
        assert not g.active
        for _ in range(100):  # no longer started: raises before anything
            with pytest.raises(ValueError, match="not started"):
                g.wait_start()
        with pytest.raises(ValueError, match="not started"):
            g.wait(T)
        assert sys.getrefcount(res) == base
        pair.token_send()
    else:
        pair.token_recv()
        assert np.array_equal(buf, pattern(n, 14))
    mr.release()
