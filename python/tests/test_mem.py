"""Point-to-point transfers on the memory kind of UCCL_PY_TEST_MEM (mem.py):
numpy in CI, torch CUDA tensors or CuPy arrays on the device machine (two
processes on one GPU: gpu_ipc). Bytes compared on the receiving side."""
import numpy as np
import pytest

import mem
import uccl
from conftest import T, pattern



class DLPackOnly:
    """Exposes only __dlpack__ (torch's, CuPy's): the DLPack path of register."""

    def __init__(self, x):
        self.x = x

    def __dlpack__(self, stream=None):
        return self.x.__dlpack__()

    def __dlpack_device__(self):
        return self.x.__dlpack_device__()


def test_register_kind(pair):
    x = mem.new(pattern(4096, 1))
    with pair.engine.register(x) as mr:
        assert mr.nbytes == 4096 and not mr.readonly
        assert mr.mem_type == ("cuda" if mem.GPU else "host")
        assert mr.device == (0 if mem.GPU else -1)
        if mem.GPU:
            assert mr.ptr == (x.data_ptr() if mem.KIND == "torch" else x.data.ptr)
    if hasattr(x, "__dlpack__"):
        with pair.engine.register(DLPackOnly(x)) as mr:
            assert mr.nbytes == 4096 and mr.mem_type == ("cuda" if mem.GPU else "host")


@pytest.mark.parametrize("n", [1, 4096, 1 << 20, 8 << 20])
def test_send_recv(pair, n):
    if pair.rank == 0:
        with pair.engine.register(mem.new(pattern(n, n))) as mr:
            assert pair.conn.send(mr, tag=11).wait(T) == n
    else:
        dst = mem.zeros(n + 64)
        with pair.engine.register(dst) as mr:
            assert pair.conn.recv(mr, tag=11).wait(T) == n
        got = mem.host(dst)
        assert np.array_equal(got[:n], pattern(n, n)) and not got[n:].any()


def test_sendv_recvv(pair):
    """Three pieces of this kind gathered into one message, scattered into two."""
    a = pattern(9000, 2)
    if pair.rank == 0:
        x = mem.new(a)
        with pair.engine.register(x) as mx:
            iov = [(mx, 0, 1000), (mx, 1000, 5000), (mx, 6000, 3000)]
            assert pair.conn.sendv(iov, tag=12, block=True) == 9000
    else:
        x, y = mem.zeros(4000), mem.zeros(5000)
        with pair.engine.register(x) as mx, pair.engine.register(y) as my:
            assert pair.conn.recvv([mx, my], tag=12, block=True) == 9000
        assert np.array_equal(np.concatenate([mem.host(x), mem.host(y)]), a)


def test_sendv_mixed_host_and_gpu(pair):
    """Host and GPU pieces in one message: moved on host memory; with GPU
    memory this libuccl refuses the send at once (uccl.UnsupportedError:
    one transport moves a message, and none takes both kinds)."""
    if mem.GPU:
        if pair.rank == 0:
            x, h = mem.new(pattern(5000, 4)), pattern(3000, 3)
            with pair.engine.register(x) as mx, pair.engine.register(h) as mh:
                with pytest.raises(uccl.UnsupportedError):
                    pair.conn.sendv([mx, mh], tag=13)
        pair.barrier()
        return
    if pair.rank == 0:
        x, h = mem.new(pattern(5000, 4)), pattern(3000, 3)
        with pair.engine.register(x) as mx, pair.engine.register(h) as mh:
            assert pair.conn.sendv([mx, mh], tag=13, block=True) == 8000
    else:
        x, h = mem.zeros(5000), np.zeros(3000, np.uint8)
        with pair.engine.register(x) as mx, pair.engine.register(h) as mh:
            assert pair.conn.recvv([mx, mh], tag=13, block=True) == 8000
        assert np.array_equal(mem.host(x), pattern(5000, 4)) and np.array_equal(h, pattern(3000, 3))


@pytest.mark.parametrize("op", ["write", "read"])
@pytest.mark.parametrize("n", [4096, 4 << 20])
def test_write_read(pair, op, n):
    """Rank 0 writes into (or reads from) rank 1's buffer by descriptor."""
    target = 1
    if pair.rank == target:
        buf = mem.new(pattern(n, 7) if op == "read" else np.zeros(n, np.uint8))
        with pair.engine.register(buf) as mr:
            pair.swap(mr.descriptor())
            pair.token_recv()  # progress until rank 0 is done
            if op == "write":
                assert np.array_equal(mem.host(buf), pattern(n, 8))
    else:
        desc = pair.swap(None)
        buf = mem.new(pattern(n, 8) if op == "write" else np.zeros(n, np.uint8))
        with pair.engine.register(buf) as mr:
            req = pair.conn.write(mr, desc) if op == "write" else pair.conn.read(mr, desc)
            assert req.wait(T) == n
            pair.token_send()
        if op == "read":
            assert np.array_equal(mem.host(buf), pattern(n, 7))


def test_writemsg_notify_pages(pair):
    """A paged layout: 16 non-contiguous pages of rank 0's buffer into
    scattered pages of rank 1's, one writemsg with a notification."""
    page, pages = 4096, 64
    src_idx, dst_idx = list(range(3, 35, 2)), list(range(60, 28, -2))
    if pair.rank == 1:
        buf = mem.zeros(page * pages)
        with pair.engine.register(buf) as mr:
            pair.swap(mr.descriptor())
            while True:
                v = pair.conn.poll_notif()
                if v is not None:
                    break
            assert v == 77
            got = mem.host(buf).reshape(pages, page)
        want = pattern(page * pages, 9).reshape(pages, page)
        for s, d in zip(src_idx, dst_idx):
            assert np.array_equal(got[d], want[s])
        assert not got[[p for p in range(pages) if p not in dst_idx]].any()
    else:
        desc = pair.swap(None)
        src = mem.new(pattern(page * pages, 9))
        with pair.engine.register(src) as mr:
            iov = [(mr, s * page, page) for s in src_idx]
            riov = [(desc, d * page, page) for d in dst_idx]
            assert pair.conn.writemsg(iov, riov, notify=77).wait(T) == page * len(src_idx)
    pair.barrier()
