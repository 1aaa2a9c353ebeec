"""Error paths: exceptions mapped from uccl_status_t and clear Python errors
for misuse (wrong types, non-contiguous or read-only memory, released or
closed objects) — never a crash."""
import time

import numpy as np
import pytest

import uccl
from conftest import T


def test_exception_hierarchy():
    assert issubclass(uccl.TimeoutError, uccl.Error)
    assert issubclass(uccl.PeerFailedError, uccl.PeerError)
    assert issubclass(uccl.PeerError, uccl.Error)
    assert issubclass(uccl.OutOfBoundsError, uccl.Error)
    assert not issubclass(uccl.OutOfBoundsError, uccl.PeerError)
    assert uccl.TimeoutError.status == uccl.ERR_TIMEOUT == -7
    assert uccl.PeerFailedError.status == -100
    assert uccl.RemoteAccessError.status == -103
    assert uccl.strerror(uccl.ERR_TIMEOUT) == "timed out"
    # one class per error status of UCCL_STATUS_MAP
    for name in ("InvalidParam", "NoMemory", "Unsupported", "NotFound", "Truncated",
                 "BufferTooSmall", "BadAddress", "BadDesc", "Version", "Stale",
                 "InvalidHandle", "Busy", "NoDevice", "NoTransport", "Io", "Canceled",
                 "Transport", "NotRegistered", "Unreachable", "ConnRefused"):
        assert issubclass(getattr(uccl, name + "Error"), uccl.Error)


def test_register_misuse(pair):
    e = pair.engine
    with pytest.raises(TypeError, match="cannot register a 'int'"):
        e.register(5)
    with pytest.raises(TypeError):
        e.register("text")
    with pytest.raises(ValueError, match="non-contiguous"):
        e.register(np.zeros((8, 8))[:, 1])
    with pytest.raises(ValueError, match="empty"):
        e.register(bytearray())
    # object pointers, alone or as a field: a receive would overwrite them
    for objs in (np.empty(4, object), np.zeros(2, [("a", "i8"), ("b", "O")])):
        with pytest.raises(TypeError, match="Python objects"):
            e.register(objs)
    with e.register(np.zeros(2, [("OUT", "i8")])) as m:  # a field name, no objects
        assert m.nbytes == 16
    with pytest.raises(TypeError):
        e.register()


class CAI:
    """A stand-in for a CUDA array (host pointer: libuccl detects host)."""

    def __init__(self, arr, strides=None, readonly=False):
        self.arr = arr
        self.__cuda_array_interface__ = {
            "data": (arr.ctypes.data, readonly), "shape": arr.shape,
            "typestr": arr.dtype.str, "strides": strides, "version": 3}


class DLPackOnly:
    def __init__(self, arr):
        self.arr = arr

    def __dlpack__(self, stream=None):
        return self.arr.__dlpack__()


def test_register_cuda_array_interface_and_dlpack(pair):
    e = pair.engine
    a = np.arange(64, dtype=np.float32)
    with e.register(CAI(a)) as m:
        assert m.nbytes == 256 and m.ptr == a.ctypes.data and m.mem_type == "host"
        assert m.device == -1 and not m.readonly
    with e.register(CAI(a, readonly=True)) as m:
        assert m.readonly
    b = np.zeros((4, 4), np.int64)
    with pytest.raises(ValueError, match="non-contiguous"):
        e.register(CAI(b, strides=(8, 32)))
    with e.register(CAI(b, strides=(32, 8))) as m:  # explicit C strides are fine
        assert m.nbytes == 128
    if not hasattr(a, "__dlpack__"):
        pytest.skip("this numpy has no __dlpack__")
    with e.register(DLPackOnly(a)) as m:
        assert m.nbytes == 256 and m.ptr == a.ctypes.data
    with pytest.raises(ValueError, match="non-contiguous"):
        e.register(DLPackOnly(np.zeros((8, 8), np.float32)[:, :4]))


class DLPackOn:
    """__dlpack__ of arr's memory said to be on DLPack device type dev (a
    capsule made by hand: 14 is oneAPI, an Intel GPU's memory)."""

    def __init__(self, arr, dev):
        import ctypes as C

        class Tensor(C.Structure):
            _fields_ = [("data", C.c_void_p), ("device_type", C.c_int32),
                        ("device_id", C.c_int32), ("ndim", C.c_int32), ("code", C.c_uint8),
                        ("bits", C.c_uint8), ("lanes", C.c_uint16),
                        ("shape", C.POINTER(C.c_int64)), ("strides", C.c_void_p),
                        ("byte_offset", C.c_uint64), ("ctx", C.c_void_p),
                        ("deleter", C.c_void_p)]
        self.arr, self.shape = arr, (C.c_int64 * 1)(arr.nbytes)
        self.t = Tensor(arr.ctypes.data, dev, 0, 1, 1, 8, 1, self.shape, None, 0, None, None)
        self.new = C.pythonapi.PyCapsule_New
        self.new.restype, self.new.argtypes = C.py_object, [C.c_void_p, C.c_char_p, C.c_void_p]

    def __dlpack__(self, stream=None):
        import ctypes as C
        return self.new(C.addressof(self.t), b"dltensor", None)


def test_register_dlpack_device_types(pair, cm):
    """Memory libuccl cannot touch (another GPU's, DLPack device type 14)
    is refused, not read as host memory: register and a collective."""
    a = np.arange(64, dtype=np.uint8)
    for dev in (1, 3):  # CPU, CUDA host (pinned): host memory
        with pair.engine.register(DLPackOn(a, dev)) as m:
            assert m.nbytes == 64 and m.mem_type == "host"
    with pytest.raises(TypeError, match="device type 14"):
        pair.engine.register(DLPackOn(a, 14))
    with pytest.raises(TypeError, match="device type 14"):
        cm.allgather(DLPackOn(a, 14), np.zeros(64 * cm.size, np.uint8))


def test_local_misuse(pair):
    e, c = pair.engine, pair.conn
    ro = e.register(b"read only bytes")
    with pytest.raises(ValueError, match="read-only"):
        c.recv(ro)
    with pytest.raises(ValueError, match="read-only"):
        c.recvv([ro])
    with pytest.raises(TypeError, match="MemoryRegion"):
        c.send(bytearray(4))
    with pytest.raises(uccl.OutOfBoundsError):
        c.send(ro, offset=100)
    with pytest.raises(uccl.OutOfBoundsError):
        c.send(ro, 0, 1000)
    with pytest.raises(ValueError, match="1 to 64 local pieces"):
        c.sendv([ro] * (uccl.IOV_MAX + 1))
    with pytest.raises(ValueError):
        c.sendv([])
    ro.release()
    assert ro.released and ro.obj is None
    ro.release()  # idempotent
    with pytest.raises(ValueError, match="released"):
        c.send(ro)
    with pytest.raises(ValueError, match="released"):
        ro.descriptor()
    with uccl.Engine() as other:
        foreign = other.register(bytearray(8))
        with pytest.raises(ValueError, match="another engine"):
            c.send(foreign)
    with pytest.raises(ValueError, match="engine is closed"):
        c.send(foreign)
    with pytest.raises(ValueError, match="engine is closed"):
        other.register(bytearray(8))
    with pytest.raises(ValueError, match="engine is closed"):
        other.address
    foreign.release()  # after its engine: nothing to deregister, no crash


def test_argument_errors(pair):
    """The per-operation methods parse their own arguments (fast calls):
    every misuse a TypeError naming the method and the argument, nothing
    posted, the connection fine afterwards."""
    e, c = pair.engine, pair.conn
    buf = bytearray(8)
    with e.register(buf) as mr:
        desc = mr.descriptor()
        with pytest.raises(TypeError, match=r"send\(\) missing required argument 'mr'"):
            c.send()
        with pytest.raises(TypeError, match=r"write\(\) missing required argument 'desc'"):
            c.write(mr)
        with pytest.raises(TypeError, match="'bogus' is an invalid keyword argument for recv"):
            c.recv(mr, bogus=1)
        with pytest.raises(TypeError, match="given by name .'offset'. and position"):
            c.send(mr, 0, offset=0)
        with pytest.raises(TypeError, match=r"read\(\) takes at most 5 positional"):
            c.read(mr, desc, 0, None, 0, True)  # block is keyword-only
        with pytest.raises(TypeError):
            c.send(mr, "0")  # offset: an int
        with pytest.raises(TypeError):
            c.send(mr, tag=1.5)
        with pytest.raises(TypeError, match="a remote descriptor is 64 bytes"):
            c.write(mr, 5)
        with pytest.raises(ValueError, match="a remote descriptor is 64 bytes, not 3"):
            c.write(mr, b"abc")
        with pytest.raises(TypeError, match=r"wait_all\(\) missing required argument"):
            uccl.wait_all()
        with pytest.raises(TypeError, match=r"wait\(\) takes at most 1 positional"):
            c.send(mr, length=0, tag=0xbeef).wait(T, 1)
        # keywords and numpy integers (anything with __index__) are taken
        req = c.recv(mr, offset=np.int64(0), length=np.int32(0), tag=np.uint64(0xbeef))
        assert uccl.wait_all([req], timeout=T) == [0]
    pair.barrier()


def test_descriptor_errors(pair):
    e, c = pair.engine, pair.conn
    buf = bytearray(64)
    with e.register(buf) as mr:
        assert len(mr.descriptor(8, 16)) == 64
        with pytest.raises(uccl.OutOfBoundsError):
            mr.descriptor(60, 16)
        with pytest.raises(uccl.OutOfBoundsError):
            mr.descriptor(65)
        with pytest.raises(ValueError, match="64 bytes"):
            c.write(mr, b"short")
        with pytest.raises(TypeError, match="64 bytes"):
            c.write(mr, 12345)
        with pytest.raises(uccl.BadDescError):
            c.write(mr, bytes(64))
        # our own descriptor names this engine, not the peer's
        with pytest.raises(uccl.StaleError):
            c.write(mr, mr.descriptor())
        peer_desc = pair.swap(mr.descriptor(0, 32))
        with pytest.raises(uccl.OutOfBoundsError):  # past the described 32 bytes
            c.write(mr, peer_desc, 0, 16, roffset=20)
        with pytest.raises(uccl.OutOfBoundsError):
            c.writemsg([mr], [(peer_desc, 0, 64)])
        with pytest.raises(uccl.InvalidParamError):  # totals differ
            c.writemsg([(mr, 0, 16)], [(peer_desc, 0, 8)])
        with pytest.raises(ValueError, match="remote pieces"):
            c.readmsg([mr], [])
        with pytest.raises(TypeError):
            c.writemsg([mr], [(peer_desc, "x")])
        pair.barrier()


def test_timeouts_and_in_flight(pair):
    e, c = pair.engine, pair.conn
    with pytest.raises(uccl.TimeoutError):
        e.accept(timeout=0.05)
    with pytest.raises(ValueError, match="timeout"):
        e.accept(timeout=-1)
    if pair.rank == 1:
        buf = np.zeros(16, np.uint8)
        mr = e.register(buf)
        req = c.recv(mr, tag=123)
        assert req.test() is False and not req.done
        with pytest.raises(ValueError, match="in flight"):
            req.nbytes
        with pytest.raises(uccl.TimeoutError):
            req.wait(timeout=0.05)
        with pytest.raises(uccl.BusyError):  # the request still uses it
            mr.release()
        with pytest.raises(uccl.BusyError):
            mr.__exit__(None, None, None)
        pair.barrier()  # now the peer sends
        assert req.wait(T) == 16 and req.nbytes == 16 and req.test() is True
        assert list(buf) == list(range(16))
        mr.release()
    else:
        pair.barrier()
        with e.register(np.arange(16, dtype=np.uint8)) as mr:
            c.send(mr, tag=123, block=True)
    with pytest.raises(TypeError, match="Request"):
        uccl.wait_all([1])


def test_peer_close_fails_requests(world):
    """A fresh pair of engines: rank 0 closes its connection while rank 1 waits."""
    rank = world.Get_rank()
    with uccl.Engine() as eng:
        peer_addr = world.sendrecv(eng.address, dest=1 - rank, source=1 - rank)
        conn = eng.connect(peer_addr) if rank == 0 else eng.accept(timeout=T)
        if rank == 1:
            buf = bytearray(8)
            with eng.register(buf) as mr:
                req = conn.recv(mr)
                world.Barrier()
                with pytest.raises(uccl.PeerError) as ei:
                    req.wait(T)
                assert ei.value.status == uccl.ERR_PEER_FAILED
        else:
            with eng.register(bytearray(8)) as mr:
                req = conn.recv(mr)
                world.Barrier()
                conn.close()
                with pytest.raises(uccl.CanceledError):
                    req.wait(T)
                assert conn.closed
                with pytest.raises(ValueError, match="connection is closed"):
                    conn.send(mr)
                with pytest.raises(ValueError, match="connection is closed"):
                    conn.peer_id
        world.Barrier()
        conn.close()


def test_engine_and_connect_errors(pair):
    with pytest.raises(uccl.InvalidParamError) as ei:
        uccl.Engine(transports="no-such-transport")
    assert ei.value.status == uccl.ERR_INVALID_PARAM
    with pytest.raises((uccl.BadAddressError, uccl.VersionError)):
        pair.engine.connect(b"not an engine address")
    with pytest.raises(TypeError):
        pair.engine.connect(12)
    with pytest.raises(TypeError):
        uccl.Engine(gpu="zero")


def test_wait_all_timeout_and_gil_released(pair):
    """rank 1 waits (no limit) in a thread; the main thread keeps running
    Python meanwhile, which it could not if the wait held the GIL."""
    import threading
    e, c = pair.engine, pair.conn
    if pair.rank == 1:
        buf = np.zeros(8, np.uint8)
        with e.register(buf) as mr:
            req = c.recv(mr, tag=321)
            with pytest.raises(uccl.TimeoutError):
                uccl.wait_all([req], timeout=0.02)
            out = {}
            t = threading.Thread(target=lambda: out.setdefault("n", req.wait()))
            t.start()
            spins = 0
            while spins < 200000:  # Python bytecode while the thread waits
                spins += 1
            assert t.is_alive() and "n" not in out
            with pytest.raises(uccl.BusyError):  # never destroyed under a waiter
                e.close()
            pair.barrier()  # the peer sends now
            t.join(T)
            assert out["n"] == 8 and list(buf) == [3] * 8
    else:
        pair.barrier()
        with e.register(np.full(8, 3, np.uint8)) as mr:
            c.send(mr, tag=321, block=True)


@pytest.mark.parametrize("kind", ["request", "persistent", "wait_all"])
def test_wait_and_test_on_two_threads(pair, kind):
    """rank 1 waits on a receive in a thread (Request.wait,
    PersistentRequest.wait, uccl.wait_all of it and another) while its main
    thread polls test() on the same object: only the waiter finishes it
    (test() says False until then, another wait() raises uccl.BusyError),
    so both see the message's 8 bytes; a test() that freed the request
    under the waiter left it 0 bytes, or a freed handle's error."""
    import threading
    e, c = pair.engine, pair.conn
    if pair.rank == 1:
        buf = np.zeros(64, np.uint8)
        with e.register(buf) as mr:
            if kind == "persistent":
                req = c.recv_init([(mr, 0, None, 322)])
                req.start()
                wait = req.wait
            else:
                req = c.recv(mr, 0, 32, tag=322)
                wait = req.wait
            if kind == "wait_all":
                other = c.recv(mr, 32, None, tag=323)
                wait = lambda t: uccl.wait_all([req, other], t)[0]  # noqa: E731
            out = {}
            t = threading.Thread(target=lambda: out.setdefault("n", wait(T)))
            t.start()
            spins = 0
            while spins < 100000:  # the thread is waiting by now
                spins += 1
            with pytest.raises(uccl.BusyError):
                req.wait(0.01)
            pair.barrier()  # the peer sends now
            end = time.monotonic() + T
            while not req.test() and time.monotonic() < end:
                pass
            t.join(T)
            assert out["n"] == 8 and req.nbytes == 8 and list(buf[:8]) == [4] * 8
    else:
        pair.barrier()
        with e.register(np.full(8, 4, np.uint8)) as mr:
            c.send(mr, tag=322, block=True)
            if kind == "wait_all":
                c.send(mr, tag=323, block=True)


def test_job_secret(world):
    """Engines given the job's secret connect; a wrong-sized secret is refused."""
    import os
    with pytest.raises(ValueError, match="16 bytes"):
        uccl.Engine(secret=b"short")
    secret = world.bcast(os.urandom(16) if world.Get_rank() == 0 else None, root=0)
    e = uccl.Engine(secret=secret)
    assert secret in e.address  # the blob carries the job's secret, not one of its own
    peer = world.sendrecv(e.address, dest=1 - world.Get_rank(), source=1 - world.Get_rank())
    if world.Get_rank() == 0:
        conn = e.connect(peer)
    else:
        conn = e.accept(timeout=30.0)
    assert conn.peer_id != 0
    world.Barrier()
    conn.close()
    e.close()
