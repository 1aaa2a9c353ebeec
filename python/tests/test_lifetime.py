"""Lifetimes and leaks: a region keeps its object and engine alive, a
request its regions and connection; dropped requests finish in the
background; 10^4 register/transfer/release rounds leave memory flat."""
import gc
import os
import sys
import weakref

import numpy as np
import pytest

import uccl
from conftest import T, rss_kib


def test_region_keeps_object_and_engine():
    buf = bytearray(64)
    base = sys.getrefcount(buf)
    eng = uccl.Engine()
    weng = weakref.ref(eng)
    mr = eng.register(buf)
    assert sys.getrefcount(buf) > base
    del eng
    gc.collect()
    assert weng() is not None  # the region holds it
    assert mr.obj is buf
    mr.release()
    assert sys.getrefcount(buf) == base
    del mr
    gc.collect()
    assert weng() is None  # destroyed with its last region


def test_context_managers():
    with uccl.Engine() as eng:
        with eng.register(bytearray(8)) as mr:
            assert not mr.released
        assert mr.released
    assert eng.closed
    eng.close()  # idempotent


def test_request_keeps_region_and_orphans_finish(pair):
    e, c = pair.engine, pair.conn
    if pair.rank == 1:
        buf = np.zeros(4096, np.uint8)
        base = sys.getrefcount(buf)
        mr = e.register(buf)
        wmr = weakref.ref(mr)
        req = c.recv(mr, tag=55)
        del mr
        assert wmr() is not None  # the request keeps it
        del req  # dropped in flight: an orphan of the engine now
        gc.collect()
        assert wmr() is not None and sys.getrefcount(buf) > base
        pair.barrier()
        pair.token_recv()  # progresses; the orphan's message arrived before the token
        e.progress()       # reaps finished orphans
        gc.collect()
        assert wmr() is None and sys.getrefcount(buf) == base
        assert np.array_equal(buf, np.full(4096, 9, np.uint8))
    else:
        pair.barrier()
        with e.register(np.full(4096, 9, np.uint8)) as mr:
            c.send(mr, tag=55).wait(T)
        pair.token_send()


def one_round(pair, src, dst):
    e, c = pair.engine, pair.conn
    if pair.rank == 0:
        mr = e.register(src)
        r = c.send(mr, tag=11)
        assert r.wait(T) == src.nbytes
    else:
        mr = e.register(dst)
        assert c.recv(mr, tag=11, block=True) == dst.nbytes
    mr.release()


def rounds_grown(pair, src, dst, n):
    """n rounds (rank 1 checks the bytes every 1000th): RSS growth in KiB."""
    gc.collect()
    before = rss_kib()
    for i in range(n):
        if pair.rank == 1:
            dst[:] = 0
        one_round(pair, src, dst)
        if pair.rank == 1 and i % 1000 == 0:
            assert np.array_equal(dst, src)
    gc.collect()
    return rss_kib() - before


def test_ten_thousand_rounds_flat_memory(pair):
    """RSS is sampled half-way and at the end: allocators (ASan's most of
    all) settle in the first half; a leak of ~200 bytes a round shows in the
    second. A leak grows in every window, a one-off step does not (once, at
    host load ~25, 1288 KiB in one window, no leak found in 14 runs after):
    a window over the limit gets a second one of 5000 rounds, and the test
    fails when that one grows past the limit too."""
    limit = 1024  # KiB over 5000 rounds
    src = np.arange(4096, dtype=np.uint8)
    dst = np.zeros(4096, np.uint8)
    for _ in range(1000):  # warm up caches and allocators
        one_round(pair, src, dst)
    gc.collect()
    refs = sys.getrefcount(src), sys.getrefcount(dst)
    rounds_grown(pair, src, dst, 5000)
    grown = rounds_grown(pair, src, dst, 5000)
    assert (sys.getrefcount(src), sys.getrefcount(dst)) == refs
    pair.barrier()
    if os.environ.get("UCCL_PY_SANITIZED"):
        pytest.skip("RSS under ASan measures its allocator (it grew %d KiB over the last "
                    "5000 rounds): flat RSS is checked by the plain build; refcounts held"
                    % grown)
    # both ranks run the second window when either went over (rounds are pairs)
    from mpi4py import MPI
    if pair.world.allreduce(int(grown >= limit), op=MPI.MAX):
        again = rounds_grown(pair, src, dst, 5000)
        assert (sys.getrefcount(src), sys.getrefcount(dst)) == refs
        assert again < limit, ("RSS grew by %d KiB, then by %d KiB over two windows of 5000 "
                               "rounds" % (grown, again))
        print("# RSS grew by %d KiB over 5000 rounds once, %d KiB in the next 5000"
              % (grown, again))

