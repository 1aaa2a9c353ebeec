"""Conn.send_many / recv_many / write_many / read_many: lists of operations
posted by one call (two ranks, host memory, bytes compared), their bad
entries (a clear exception naming the entry, nothing of the list posted), a
failure only the library sees (the Requests of what was posted), and flat
reference counts."""
import gc
import sys
import time

import numpy as np
import pytest

import uccl
from conftest import T, pattern, rma_setup




def test_send_many_recv_many(pair):
    """Every entry form: a bare region, (mr, off), (mr, off, len), (mr, off, len, tag)."""
    if pair.rank == 0:
        a = pattern(1000, 1)
        with pair.engine.register(a) as mr:
            reqs = pair.conn.send_many([mr, (mr, 900), (mr, 10, 20), (mr, 100, 50, 7),
                                        (mr, 0, 0, 8)])
            assert len(reqs) == 5 and all(isinstance(r, uccl.Request) for r in reqs)
            assert uccl.wait_all(reqs, timeout=T) == [1000, 100, 20, 50, 0]
    else:
        x = np.zeros(1200, np.uint8)
        with pair.engine.register(x) as mr:
            reqs = pair.conn.recv_many([(mr, 0, 1000), (mr, 1000, None), (mr, 1100, 20),
                                        (mr, 1150, 50, 7), (mr, 0, 0, 8)])
            assert uccl.wait_all(reqs, timeout=T) == [1000, 100, 20, 50, 0]
        p = pattern(1000, 1)
        assert np.array_equal(x[:1000], p) and np.array_equal(x[1000:1100], p[900:])
        assert np.array_equal(x[1100:1120], p[10:30]) and np.array_equal(x[1150:], p[100:150])
        assert not x[1120:1150].any()


def test_write_many_read_many(pair):
    n = 1 << 14
    buf, mr, desc = rma_setup(pair, n, 2)
    if pair.rank == 0:
        ops = [(mr, desc, 0, 1000, 5000), (mr, desc, 2000, 10), (mr, desc, 100, 0, n),
               (mr, desc, n - 4096, None, 8192)]
        assert uccl.wait_all(pair.conn.write_many(ops), timeout=T) == [1000, 10, 0, 4096]
        back = np.zeros(2000, np.uint8)
        with pair.engine.register(back) as mb:
            got = pair.conn.read_many([(mb, desc, 0, 1000, 5000), (mb, desc, 1000, 10, 0)])
            assert uccl.wait_all(got, timeout=T) == [1000, 10]
        p = pattern(n, 2)
        assert np.array_equal(back[:1000], p[:1000]) and np.array_equal(back[1000:1010],
                                                                         p[2000:2010])
        pair.token_send()
    else:
        pair.token_recv()
        p = pattern(n, 2)
        assert np.array_equal(buf[5000:6000], p[:1000]) and np.array_equal(buf[:10],
                                                                            p[2000:2010])
        assert np.array_equal(buf[8192:12288], p[n - 4096:])
        assert not buf[10:5000].any() and not buf[6000:8192].any() and not buf[12288:].any()
    mr.release()


def test_a_window_of_one_entry(pair):
    """[args] * 16, the benchmark's window: 16 operations, 16 Requests."""
    n = 4096
    buf, mr, desc = rma_setup(pair, n * 16, 3)
    if pair.rank == 0:
        for i in range(3):
            reqs = pair.conn.write_many([(mr, desc, n * i, n, n * i)] * 16)
            assert len(set(map(id, reqs))) == 16
            assert uccl.wait_all(reqs, timeout=T) == [n] * 16
        k = 5
        ops = [(mr, k * 64)] * 16  # send: a tuple repeated
        assert uccl.wait_all(pair.conn.send_many(ops), timeout=T) == [n * 16 - k * 64] * 16
        pair.token_send()
    else:
        x = np.zeros(n * 16, np.uint8)
        with pair.engine.register(x) as mx:
            k = 5  # receive: a bare region repeated
            assert uccl.wait_all(pair.conn.recv_many([mx] * 16), timeout=T) == [
                n * 16 - k * 64] * 16
        assert np.array_equal(x[:n * 16 - k * 64], pattern(n * 16, 3)[k * 64:])
        pair.token_recv()
        assert np.array_equal(buf[:n * 3], pattern(n * 16, 3)[:n * 3]) and not buf[n * 3:].any()
    mr.release()


def test_empty_list_and_bad_containers(pair):
    assert pair.conn.write_many([]) == [] and pair.conn.send_many(()) == []
    with pytest.raises(TypeError, match="list of"):
        pair.conn.send_many(5)
    with pytest.raises(TypeError):
        pair.conn.write_many()


def bad_entries(pair, mr, desc, ro, other):
    """(ops, exception class, text) for write_many: the first entry is good."""
    n = mr.nbytes
    good = (mr, desc, 0, 100)
    return [
        ([good, 5], TypeError, r"write_many: entry 1: expected a tuple \(mr, desc"),
        ([good, mr], TypeError, "entry 1: expected a tuple"),
        ([good, (mr,)], TypeError, "entry 1: expected a tuple"),
        ([good, (mr, desc, 0, 1, 0, 9)], TypeError, "entry 1: expected a tuple"),
        ([good, good, ("x", desc)], TypeError, "entry 2: expected a uccl.MemoryRegion"),
        ([good, (mr, b"short")], ValueError, "entry 1: a remote descriptor is 64 bytes"),
        ([good, (mr, 42)], TypeError, "entry 1: a remote descriptor is 64 bytes"),
        ([good, (mr, bytes(64))], uccl.Error, "entry 1"),
        ([good, (mr, desc, "0")], TypeError, "entry 1: "),
        ([good, (mr, desc, n - 10, 11)], uccl.OutOfBoundsError, "entry 1: offset/length"),
        ([good, (mr, desc, -1)], uccl.OutOfBoundsError, "entry 1: offset/length"),
        ([good, (mr, desc, 0, -5)], uccl.OutOfBoundsError, "entry 1: offset/length"),
        ([good, (mr, desc, 0, 100, n - 99)], uccl.OutOfBoundsError,
         "entry 1: roffset\\+length past the remote range"),
        ([good, (mr, desc, 0, 1, n + 1)], uccl.OutOfBoundsError, "entry 1: roffset past"),
        ([good, (ro, desc, 0, 10)], ValueError, "entry 1: the memory region is released"),
        ([good, (other, desc, 0, 10)], ValueError, "entry 1: .*another engine"),
    ]


def test_bad_entries_post_nothing(pair):
    """Each bad list raises, naming the entry; its good first entry (which
    would write a pattern) was not posted: the peer's range stays zero."""
    n = 4096
    buf, mr, desc = rma_setup(pair, n, 4)
    if pair.rank == 0:
        released = pair.engine.register(np.zeros(16, np.uint8))
        released.release()
        with uccl.Engine(transports="shm") as e2, e2.register(np.zeros(64, np.uint8)) as other:
            refs = sys.getrefcount(mr), sys.getrefcount(desc)
            for ops, exc, text in bad_entries(pair, mr, desc, released, other):
                with pytest.raises(exc, match=text):
                    pair.conn.write_many(ops)
                with pytest.raises(exc, match=text.replace("write_many", "read_many")):
                    pair.conn.read_many(ops)
            del ops
            assert (sys.getrefcount(mr), sys.getrefcount(desc)) == refs
        ro = pair.engine.register(bytes(64))
        with pytest.raises(ValueError, match="recv_many: entry 1: .*read-only"):
            pair.conn.recv_many([mr, (ro, 0, 8)])
        with pytest.raises(TypeError, match=r"send_many: entry 0: expected a MemoryRegion or "):
            pair.conn.send_many([5, mr])
        with pytest.raises(uccl.OutOfBoundsError, match="send_many: entry 2: offset/length"):
            pair.conn.send_many([mr, mr, (mr, 0, n + 1)])
        with pytest.raises(TypeError, match="send_many: entry 1: "):
            pair.conn.send_many([mr, (mr, 0, 1, "tag")])
        ro.release()
        # what did land: only this marker, after all of the above
        marker = np.full(8, 0xEE, np.uint8)
        with pair.engine.register(marker) as mm:
            pair.conn.write(mm, desc, roffset=n - 8, block=True)
        pair.token_send()
    else:
        pair.token_recv()
        assert not buf[:n - 8].any() and (buf[n - 8:] == 0xEE).all()
    # nothing was sent by the send_many lists either: the next message is this one
    if pair.rank == 0:
        with pair.engine.register(np.full(4, 7, np.uint8)) as m7:
            pair.conn.send(m7, tag=0, block=True)
    else:
        got = np.zeros(n, np.uint8)
        with pair.engine.register(got) as mg:
            assert pair.conn.recv(mg, tag=0, block=True) == 4
        assert (got[:4] == 7).all()
    mr.release()


def test_post_failure_returns_what_was_posted(pair):
    """A descriptor of a third engine passes every check of the binding;
    libuccl refuses it when posting (a stale descriptor): the entries before
    it were posted, their Requests are in the exception's .requests."""
    n = 4096
    buf, mr, desc = rma_setup(pair, n, 5)
    if pair.rank == 0:
        with uccl.Engine(transports="shm") as e3, e3.register(np.zeros(n, np.uint8)) as m3:
            stale = m3.descriptor()
            ops = [(mr, desc, 0, 100), (mr, desc, 100, 100, 100), (mr, stale, 0, 10),
                   (mr, desc, 200, 100, 200)]
            with pytest.raises(uccl.Error, match="write_many: entry 2 .*posted") as ei:
                pair.conn.write_many(ops)
            posted = ei.value.requests
            assert len(posted) == 2 and all(isinstance(r, uccl.Request) for r in posted)
            assert uccl.wait_all(posted, timeout=T) == [100, 100]
            del ei, posted
        pair.token_send()
    else:
        pair.token_recv()
        assert np.array_equal(buf[:200], pattern(n, 5)[:200]) and not buf[200:].any()
    mr.release()


def settle(pair, pending):
    """While pending() (at most T), progress: requests dropped in flight
    finish and are reaped (the peer is in token_recv, progressing); then let
    the peer go on and collect."""
    end = time.monotonic() + T
    while pending() and time.monotonic() < end:
        pair.engine.progress()
    pair.token_send()
    gc.collect()


def test_refcounts_flat(pair):
    """1000 windows of 16: the regions, descriptor and connection hold no
    more references after than before, and every Request went back."""
    n = 1024
    buf, mr, desc = rma_setup(pair, n, 6)
    if pair.rank == 0:
        ops = [(mr, desc, 0, n)] * 16
        uccl.wait_all(pair.conn.write_many(ops), timeout=T)
        gc.collect()
        refs = sys.getrefcount(mr), sys.getrefcount(desc), sys.getrefcount(pair.conn)
        for _ in range(1000):
            reqs = pair.conn.write_many(ops)
            uccl.wait_all(reqs, timeout=T)
            del reqs
        reqs = pair.conn.write_many(ops)  # dropped in flight: orphans that finish
        del reqs
        pair.engine.progress()
        for _ in range(100):
            with pytest.raises(uccl.OutOfBoundsError):
                pair.conn.write_many(ops + [(mr, desc, 0, n + 1)])
        settle(pair, lambda: sys.getrefcount(mr) != refs[0])
        assert (sys.getrefcount(mr), sys.getrefcount(desc), sys.getrefcount(pair.conn)) == refs
    else:
        pair.token_recv()
        assert np.array_equal(buf, pattern(n, 6))
    mr.release()


def test_group_request(pair):
    """group=True: one Request for the list; nbytes is the sum; wait, test
    and wait_all (with other Requests) see it finish when every operation has."""
    n = 1 << 12
    buf, mr, desc = rma_setup(pair, n * 8, 7)
    if pair.rank == 0:
        g = pair.conn.write_many([(mr, desc, i * n, n, i * n) for i in range(4)], group=True)
        assert isinstance(g, uccl.Request) and g.wait(T) == 4 * n and g.nbytes == 4 * n
        assert g.test() is True and g.done
        g2 = pair.conn.write_many([(mr, desc, 4 * n, n, 4 * n)] * 3, group=True)
        one = pair.conn.write(mr, desc, 7 * n, n, 7 * n)
        assert uccl.wait_all([g2, one], timeout=T) == [3 * n, n]
        g3 = pair.conn.write_many([(mr, desc, 5 * n, 2 * n, 5 * n)], group=True)
        while not g3.test():
            pass
        assert g3.nbytes == 2 * n
        empty = pair.conn.read_many([], group=True)
        assert empty.done and empty.wait(T) == 0 and uccl.wait_all([empty]) == [0]
        pair.token_send()
        # two-sided: the group's sends, and a group receive whose second entry is too small
        with pair.engine.register(pattern(300, 8)) as ms:
            assert pair.conn.send_many([(ms, 0, 100, 3), (ms, 100, 200, 3)], group=True
                                       ).wait(T) == 300
    else:
        pair.token_recv()
        assert np.array_equal(buf, pattern(n * 8, 7))
        small = np.zeros(300, np.uint8)
        with pair.engine.register(small) as mx:
            g = pair.conn.recv_many([(mx, 0, 100, 3), (mx, 100, 150, 3)], group=True)
            with pytest.raises(uccl.TruncatedError, match="recv"):
                g.wait(T)
            assert g.done
            with pytest.raises(uccl.TruncatedError):  # a failed group has no byte count
                g.nbytes
            # the message stays for the next receive of that tag
            assert pair.conn.recv_many([(mx, 100, 200, 3)], group=True).wait(T) == 200
        p = pattern(300, 8)
        assert np.array_equal(small[:100], p[:100]) and np.array_equal(small[100:300], p[100:])
    mr.release()


def test_group_refcounts_and_orphans(pair):
    """1000 grouped windows, then groups dropped in flight: the region, the
    descriptor and the connection hold as many references as before."""
    n = 1024
    buf, mr, desc = rma_setup(pair, n, 9)
    if pair.rank == 0:
        ops = [(mr, desc, 0, n)] * 16
        pair.conn.write_many(ops, group=True).wait(T)
        gc.collect()
        refs = sys.getrefcount(mr), sys.getrefcount(desc), sys.getrefcount(pair.conn)
        for _ in range(1000):
            pair.conn.write_many(ops, group=True).wait(T)
        for _ in range(10):
            pair.conn.write_many(ops, group=True)  # dropped in flight: orphans
        settle(pair, lambda: sys.getrefcount(mr) != refs[0])
        assert (sys.getrefcount(mr), sys.getrefcount(desc), sys.getrefcount(pair.conn)) == refs
    else:
        pair.token_recv()
        assert np.array_equal(buf, pattern(n, 9))
    mr.release()
