"""Session 14's per-window shortcuts of the binding (two ranks, host
memory): a wait or a list post keeps the GIL where no other thread could
take it and releases it where one could (another thread then runs while
this one waits), and write/read lists reuse their connection's last decoded
descriptor without landing bytes anywhere else (uccl._uccl._fast_stats
counts which path each call took)."""
import threading
import time

import numpy as np
import pytest

import uccl
from conftest import T


def stats(reset=False):
    return uccl._uccl._fast_stats(reset)


def test_alone_keeps_the_gil(pair):
    """No other thread: send_many/recv_many and their waits keep the GIL."""
    n = 4096
    buf = np.full(n, 3, np.uint8) if pair.rank == 0 else np.zeros(n, np.uint8)
    assert threading.active_count() == 1
    with pair.engine.register(buf) as mr:
        pair.barrier()
        stats(reset=True)
        post = pair.conn.send_many if pair.rank == 0 else pair.conn.recv_many
        assert post([(mr, 0, n, 5)] * 4, group=True).wait(T) == 4 * n
        s = stats()
        assert s["gil_kept"] >= 1 and s["gil_released"] == 0, s
    if pair.rank == 1:
        assert (buf == 3).all()


def test_other_thread_gets_the_gil(pair):
    """With a second thread alive, a wait releases the GIL: the thread counts
    while this one waits for a message that comes 0.3 s later."""
    n = 64
    buf = np.zeros(n, np.uint8)
    with pair.engine.register(buf) as mr:
        pair.barrier()
        if pair.rank == 0:
            time.sleep(0.3)
            buf[:] = 9
            pair.conn.send(mr, tag=6, block=True)
            return
        count, stop = [0], threading.Event()

        def spin():
            while not stop.is_set():
                count[0] += 1
        th = threading.Thread(target=spin)
        th.start()
        try:
            time.sleep(0.02)
            stats(reset=True)
            before = count[0]
            assert pair.conn.recv(mr, tag=6).wait(T) == n
            during = count[0] - before
            s = stats()
        finally:
            stop.set()
            th.join()
        assert s["gil_released"] >= 1 and s["gil_kept"] == 0, s
        assert during > 1000, during  # it ran while this thread waited
        assert (buf == 9).all()


def test_alone_wait_keeps_its_timeout(pair):
    """Kept-GIL waits run in 1 ms slices; a timeout still means that long."""
    buf = np.zeros(8, np.uint8)
    with pair.engine.register(buf) as mr:
        req = pair.conn.recv(mr, tag=77)
        t0 = time.monotonic()
        with pytest.raises(uccl.TimeoutError):
            req.wait(0.2)
        assert 0.19 <= time.monotonic() - t0 < 2.0
        pair.barrier()
        pair.conn.send(mr, tag=77, block=True)  # the peer's finishes our receive
        assert req.wait(T) == 8


def test_descriptor_reuse(pair):
    """write_many with descriptor A, again A (reused), then B of another
    region, then A: each lands in its own region; a bad descriptor after a
    cached good one still raises."""
    n = 1024
    a = np.zeros(n, np.uint8)
    b = np.zeros(n, np.uint8)
    with pair.engine.register(a) as ma, pair.engine.register(b) as mb:
        da, db = pair.swap((ma.descriptor(), mb.descriptor()))
        pair.barrier()
        if pair.rank == 0:
            src = np.arange(n, dtype=np.uint8)
            with pair.engine.register(src) as ms:
                stats(reset=True)
                for desc, off in ((da, 0), (da, 256), (db, 512), (da, 768)):
                    ops = [(ms, desc, off + 64 * k, 64, off + 64 * k) for k in range(4)]
                    pair.conn.write_many(ops, group=True).wait(T)
                s = stats()
                # per list the first entry decodes or reuses, the other 3 name
                # the same object as the one before them
                assert s["rdesc_hits"] == 1, s
                with pytest.raises(uccl.Error, match="write_many: entry 1"):
                    pair.conn.write_many([(ms, da, 0, 8), (ms, bytes(64), 0, 8)])
                # da (bytearray, same bytes): decoded the same
                pair.conn.write_many([(ms, bytearray(da), 0, 1)], group=True).wait(T)
            pair.token_send()
        else:
            pair.token_recv()
            ref = np.arange(n, dtype=np.uint8)
            assert np.array_equal(a[:512], ref[:512]) and not a[512:768].any()
            assert np.array_equal(a[768:], ref[768:])
            assert np.array_equal(b[512:768], ref[512:768])
            assert not b[:512].any() and not b[768:].any()


def test_keyword_names(pair):
    """Keywords are matched by their ASCII text (a compact str's characters):
    the usual ones work, a name that is not ASCII is unknown."""
    buf = np.zeros(8, np.uint8)
    with pair.engine.register(buf) as mr:
        with pytest.raises(TypeError, match="invalid keyword argument for send"):
            pair.conn.send(mr, **{"bl\u00f6ck": True})
        with pytest.raises(TypeError, match="invalid keyword argument for send_many"):
            pair.conn.send_many([mr], **{"gro": True})
        pair.barrier()
        req = pair.conn.recv(mr, offset=0, length=8, tag=78)
        assert pair.conn.send(mr, tag=78, length=None, block=True) == 8
        assert req.wait(timeout=T) == 8
