"""uccl.p2p.Endpoint: UCCL's method names over the binding, raw pointers."""
import time

import numpy as np

from uccl import p2p
from conftest import T


def test_endpoint_compat(world):
    rank = world.Get_rank()
    ep = p2p.Endpoint(local_gpu_idx=-1, num_cpus=4)
    peer_meta = world.sendrecv(ep.get_metadata(), dest=1 - rank, source=1 - rank)
    if rank == 0:
        ok, conn = ep.connect(peer_meta)
    else:
        ok, peer_id, gpu, conn = ep.accept(timeout=T)
        assert peer_id is not None and gpu == -1
    assert ok
    n = 1 << 14
    buf = np.arange(n, dtype=np.uint8) if rank == 0 else np.zeros(n, np.uint8)
    ok, mr = ep.reg(buf.ctypes.data, buf.nbytes)
    assert ok
    if rank == 0:
        assert ep.send(conn, mr, buf.ctypes.data + 100, 1000)
        ok, xid = ep.send_async(conn, mr, buf.ctypes.data, n)
        assert ok
        end = time.monotonic() + T
        while not ep.poll_async(xid)[1]:
            assert time.monotonic() < end
        fifo = world.recv(source=1)
        assert ep.write(conn, mr, buf.ctypes.data + 5, 10, fifo)
        ok, xid = ep.read_async(conn, mr, buf.ctypes.data, 16, fifo)
        assert ok and ep.wait_async(xid, T)
        assert list(buf[:16]) == list(range(5, 15)) + [0] * 6
        world.Barrier()
    else:
        ok, size = ep.recv(conn, mr, buf.ctypes.data, n)
        assert ok and size == 1000 and np.array_equal(buf[:1000], np.arange(100, 1100) % 256)
        ok, xid = ep.recv_async(conn, mr, buf.ctypes.data, n)
        assert ok and ep.wait_async(xid, T)
        assert np.array_equal(buf, np.arange(n) % 256)
        buf[:] = 0
        ok, fifo = ep.advertise(conn, mr, buf.ctypes.data, 64)
        assert ok and len(fifo) == 64
        world.send(fifo, dest=0)
        world.Barrier()  # the progress thread served the peer's write and read
        assert list(buf[:10]) == list(range(5, 15)) and not buf[10:].any()
    assert not ep.poll_async(12345)[0]
    assert ep.reg(0, 0) == (False, -1)
    assert ep.dereg(mr) and not ep.dereg(mr)
    world.Barrier()
    ep.close()
