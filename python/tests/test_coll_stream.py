"""The collectives of uccl.Comm and GPU streams: the stream-ordered form
(stream=), the producer-stream ordering of array objects (DLPack's
handshake, the CUDA array interface v3 'stream', torch's current stream),
on any number of ranks; the GPU cases run with UCCL_PY_TEST_MEM=torch|cupy
(mem.py), test_stream_host_memory on host memory. Split from test_coll.py;
tests/gpu/python-device.sh runs this file first, under a watchdog."""
import os

import numpy as np
import pytest

import mem
import uccl
from conftest import T, blk, cat


class CAIStream:
    """Only __cuda_array_interface__ (as Numba's arrays): the interface of x
    read when the binding asks, with the v3 'stream' where x's library
    queues its work, or given here."""

    def __init__(self, x, stream=None):
        self.x, self.stream = x, stream

    @property
    def __cuda_array_interface__(self):
        if mem.KIND == "numpy":
            d = {"data": (self.x.ctypes.data, False), "shape": self.x.shape,
                 "typestr": self.x.dtype.str, "strides": None, "version": 3}
        else:
            d = dict(self.x.__cuda_array_interface__)
        if self.stream is not None:
            d["stream"], d["version"] = self.stream, 3
        return d


def side_stream(kind):
    """A stream of this memory kind's library, and its context manager."""
    if mem.KIND == "torch":
        import torch
        st = torch.cuda.default_stream() if kind == "null" else torch.cuda.Stream()
        return st, torch.cuda.stream(st), st.cuda_stream
    import cupy
    st = {"null": cupy.cuda.Stream.null, "blocking": cupy.cuda.Stream(),
          "nonblocking": cupy.cuda.Stream(non_blocking=True)}[kind]
    return st, st, st.ptr


def late_fill(dst, src):
    """dst <- src on the current stream, after about 10 ms of GPU time: a
    consumer that does not order after this stream reads the old bytes."""
    if mem.KIND == "torch":
        import torch
        torch.cuda._sleep(20000000)
        dst.copy_(src)
        return
    import cupy
    spin = cupy.RawKernel(r"""extern "C" __global__ void spin(long long n)
        { long long t0 = clock64(); while (clock64() - t0 < n) { } }""", "spin")
    spin((1,), (1,), (np.int64(20000000),))
    dst[...] = src


class PtrStream:
    """A stream object as CuPy's: its handle in .ptr (the legacy stream)."""
    ptr = 0


class BrokenStream:
    @property
    def cuda_stream(self):
        raise RuntimeError("broken stream")


def test_stream_query_cost(cm):
    """uccl._uccl._stream_query_cost (tests/gpu/py_object_cost.py: the floor
    of a host-ordered call's producer-stream step, in C): seconds per query
    where a GPU runtime answers, a clear error where none does; bad
    arguments refused."""
    cost = uccl._uccl._stream_query_cost
    with pytest.raises(ValueError, match="n >= 1"):
        cost(cm.engine, 0, 0)
    with pytest.raises(TypeError):
        cost("not an engine", 0, 1)
    try:
        c = cost(cm.engine, 0, 20)
    except (uccl.NoDeviceError, uccl.UnsupportedError, uccl.InvalidParamError):
        assert not mem.GPU
    else:
        assert 0 < c < 1e-2, c


def test_stream_host_memory(cm):
    """On host memory: without a GPU runtime (or on the fake GPU build of
    CI) the stream form, and an object naming a producer stream, are refused
    clearly and the comm goes on working; with one (the device machine)
    they order host memory like any other and give the right bytes."""
    size, n = cm.size, 65536
    want = cat([blk(n, 23, q) for q in range(size)])
    with pytest.raises(TypeError, match="stream"):
        cm.iallgather(mem.zeros(n), mem.zeros(size * n), stream="not a stream")
    # a stream object's own error while its handle is read is not hidden
    with pytest.raises(RuntimeError, match="broken stream"):
        cm.iallgather(mem.zeros(n), mem.zeros(size * n), stream=BrokenStream())
    if mem.GPU:
        pytest.skip("host memory")
    refused = (uccl.NoDeviceError, uccl.UnsupportedError, uccl.InvalidParamError)
    # an int, and an object with .ptr (CuPy's streams): the same stream
    for stream in (0, PtrStream()):
        recv = mem.zeros(size * n)
        try:
            req = cm.allgather(mem.new(blk(n, 23, cm.rank)), recv, stream=stream)
        except refused:
            pass
        else:
            req.wait(timeout=T)
            assert np.array_equal(mem.host(recv), want)
    recv = mem.zeros(size * n)
    # CAI v3 'stream': the host waits for that stream first. 0 (the legacy
    # default stream to CUDA, which the binding accepts though v3 says 1):
    # the fake GPU runtime of CI takes any other value for one of its own
    try:
        cm.allgather(CAIStream(mem.new(blk(n, 23, cm.rank)), stream=0), recv)
    except refused:
        pass
    else:
        assert np.array_equal(mem.host(recv), want)
    recv = mem.zeros(size * n)
    cm.allgather(CAIStream(mem.new(blk(n, 23, cm.rank)), stream=None), recv)  # no stream
    assert np.array_equal(mem.host(recv), want)
    recv = mem.zeros(size * n)
    cm.allgather(mem.new(blk(n, 23, cm.rank)), recv)  # still works
    assert np.array_equal(mem.host(recv), want)


def buffers(cm, key, n=65536):
    """An allgather's expected result, this rank's block of it (src), and
    zeroed send and receive buffers."""
    return (cat([blk(n, key, q) for q in range(cm.size)]), mem.new(blk(n, key, cm.rank)),
            mem.zeros(n), mem.zeros(cm.size * n))


def copy_of(x):
    return x.clone() if mem.KIND == "torch" else x.copy()


def device_sync():
    if mem.KIND == "torch":
        import torch
        torch.cuda.synchronize()
    else:
        import cupy
        cupy.cuda.Device().synchronize()


GPU_ONLY = pytest.mark.skipif(not mem.GPU, reason="GPU memory (UCCL_PY_TEST_MEM=torch|cupy)")
KINDS = pytest.mark.parametrize("kind", ["nonblocking", "blocking", "null"])


@GPU_ONLY
@KINDS
def test_stream_form(cm, kind):
    """stream=: the collective runs after the send buffer's late fill queued
    on the stream, and a copy queued after it sees the result; the host
    waits for nothing but progress. Every kind of stream: a non-blocking
    one (torch's), a blocking one (CuPy's default Stream()) and the legacy
    default stream."""
    if mem.KIND == "torch" and kind == "blocking":
        pytest.skip("torch makes non-blocking streams only")
    want, src, send, recv = buffers(cm, 23)
    st, ctx, _ = side_stream(kind)
    with ctx:
        late_fill(send, send)  # the kernels' first use (module loads) before the hold
        copy_of(recv)
        late_fill(send, src)
        req = cm.allgather(send, recv, stream=st)
        after = copy_of(recv)
    assert isinstance(req, uccl.Request)
    req.wait(timeout=T)  # progress first, then wait on the stream
    st.synchronize()
    assert np.array_equal(mem.host(recv), want)
    assert np.array_equal(mem.host(after), want)


@GPU_ONLY
@pytest.mark.parametrize("form", ["host", "stream"])
@pytest.mark.parametrize("via", ["native", "cai"])
def test_producer_stream(cm, form, via):
    """A buffer filled late on a producer stream, then a collective with no
    synchronization in between sees the fill: host-ordered, the host waits
    for the producer's stream (the CUDA array interface v3 'stream', or
    DLPack's stream handshake that torch and CuPy answer); stream=, the
    call's stream waits for it (an event), the host does not."""
    want, src, send, recv = buffers(cm, 29)
    prod, pctx, pptr = side_stream("nonblocking")
    cons, cctx, _ = side_stream("nonblocking")
    with pctx:  # the producer's stream is the current one while the call reads it
        late_fill(send, send)
        copy_of(recv)
        late_fill(send, src)
        obj = CAIStream(send, stream=pptr) if via == "cai" else send
        if form == "host":
            assert cm.allgather(obj, recv) is None
        else:
            req = cm.allgather(obj, recv, stream=cons)
    if form == "stream":
        with cctx:
            after = copy_of(recv)
        req.wait(timeout=T)
        cons.synchronize()
        assert np.array_equal(mem.host(after), want)
    assert np.array_equal(mem.host(recv), want)


# first_kernel deadlocked now and then under the hold path (session 7: the
# module load took the CUDA context's lock while it waited for the held
# stream, and progress's next cudaMemcpyAsync waited for that lock; stacks in
# tests/gpu/results/4xH100/stream-first-kernel-hang.txt). The direct stream
# path (coll/stream.c, the default where every peer is on gpu_ipc) enqueues
# the whole collective at call time: nothing of the library's runs later.


@GPU_ONLY
@pytest.mark.parametrize("wait", ["device_sync", "first_kernel"])
def test_stream_form_host_waits_first(cm, wait):
    """After a stream-ordered call the host waits for the device before it
    ever calls Request.wait: a device synchronize, or a kernel used for the
    first time (its module load waits for the device: CuPy's first copy hung
    here in cuModuleLoadData before the binding drove progress from a thread
    of its own while a stream-ordered call is in flight)."""
    want, src, send, recv = buffers(cm, 31)
    st, ctx, _ = side_stream("nonblocking")
    with ctx:
        late_fill(send, src)
        req = cm.allgather(send, recv, stream=st)
        if wait == "device_sync":
            device_sync()
            after = copy_of(recv)
        elif mem.KIND == "cupy":  # a kernel no earlier test compiled or loaded
            import cupy
            k = cupy.ElementwiseKernel("uint8 x", "uint8 y", "y = x ^ %du" % (cm.rank + 77),
                                       "uccl_first_use_%d" % cm.rank)
            after = k(k(recv))  # x ^ c ^ c == x
        else:
            after = (recv.to(__import__("torch").int16) + 0).to(__import__("torch").uint8)
    st.synchronize()
    assert np.array_equal(mem.host(after), want)
    req.wait(timeout=T)
    assert np.array_equal(mem.host(recv), want)


@GPU_ONLY
def test_producer_stream_torch_fast_path(cm):
    """torch CUDA tensors as objects: their memory and current stream come
    from torch's C-level methods, not DLPack's handshake (the breakdown of
    uccl._uccl._profile shows which ran); the host still waits for the
    producer's stream; what DLPack refuses is refused as before."""
    if mem.KIND != "torch":
        pytest.skip("torch tensors only")
    if os.environ.get("UCCL_PY_TORCH_FAST") == "0":
        pytest.skip("UCCL_PY_TORCH_FAST=0: the DLPack handshake for every tensor")
    import torch
    want, src, send, recv = buffers(cm, 37)
    prod, pctx, _ = side_stream("nonblocking")
    with pctx:
        late_fill(send, send)
        late_fill(send, src)
        uccl._uccl._profile(True, reset=True)
        try:
            assert cm.allgather(send, recv) is None
        finally:
            stages = uccl._uccl._profile(False, reset=True)
    assert np.array_equal(mem.host(recv), want)
    assert stages["torch"][0] == 2 and "dlpack" not in stages, stages
    grad = torch.zeros(send.numel() // 4, device="cuda", requires_grad=True)
    with pytest.raises(RuntimeError, match="grad"):
        cm.allgather(grad, mem.zeros(recv.numel()))
    recv = mem.zeros(recv.numel())
    cm.allgather(src, recv)  # still works
    assert np.array_equal(mem.host(recv), want)


@GPU_ONLY
def test_torch_fast_path_remembers_tensors(cm):
    """The fast path remembers tensor objects it has seen (by weak
    reference) and still reads their address, size, contiguity and
    requires_grad on every call: a freed tensor's successor at the same
    address with another size, set_/resize_ in place, t_ in place (non-
    contiguous: refused) and requires_grad_ all give the right bytes or the
    general path's error, never the remembered address."""
    if mem.KIND != "torch" or os.environ.get("UCCL_PY_TORCH_FAST") == "0":
        pytest.skip("torch tensors through the fast path only")
    import torch
    n, size = 65536, cm.size

    def check(send, key, m):
        recv = mem.zeros(size * m)
        cm.allgather(send, recv)
        assert np.array_equal(mem.host(recv), cat([blk(m, key, q) for q in range(size)]))

    uccl._uccl._tensor_cache(clear=True)
    send = mem.new(blk(n, 51, cm.rank))
    check(send, 51, n)
    h0, m0, _ = uccl._uccl._tensor_cache()
    check(send, 51, n)
    h1, m1, live = uccl._uccl._tensor_cache()
    # the send tensor seen again, the new recv tensor not
    assert (h1, m1) == (h0 + 1, m0 + 1) and live >= 1
    # freed, and another tensor of half the size at the same address
    ptr = send.data_ptr()
    del send
    send = torch.empty(n // 2, dtype=torch.uint8, device="cuda")
    send.copy_(mem.new(blk(n // 2, 52, cm.rank)))
    same = send.data_ptr() == ptr  # torch's caching allocator: usually
    check(send, 52, n // 2)
    # in place: set_ to other memory, then resize_ to a quarter
    check(send, 52, n // 2)
    other = mem.new(blk(n, 53, cm.rank))
    send.set_(other)
    check(send, 53, n)
    send.resize_(n // 4)
    check(send, 53, n // 4)
    # t_ in place: non-contiguous, refused by the general path
    sq = torch.empty(256, 256, dtype=torch.uint8, device="cuda")
    sq.copy_(mem.new(blk(n, 54, cm.rank)).view(256, 256))
    check(sq, 54, n)
    sq.t_()
    with pytest.raises(ValueError, match="contiguous"):
        cm.allgather(sq, mem.zeros(size * n))
    sq.t_()
    check(sq, 54, n)
    fl = mem.new(blk(n, 55, cm.rank)).view(torch.float32)
    check(fl, 55, n)
    fl.requires_grad_(True)
    with pytest.raises(RuntimeError, match="grad"):
        cm.allgather(fl, mem.zeros(size * n))
    fl.requires_grad_(False)
    check(fl, 55, n)
    h2, m2, _ = uccl._uccl._tensor_cache()
    assert h2 >= h1 + 4, (h1, h2, same)  # set_ moved it: a miss
