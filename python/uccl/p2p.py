"""Compatibility with the method names of UCCL's ``uccl.p2p.Endpoint``.

Users of that API switch with few edits: integer connection and region ids,
raw pointers, (success, ...) tuples instead of exceptions, blocking calls
and ``*_async`` forms polled with ``poll_async``. What does not map (see
python/README.md): connect takes the peer's ``get_metadata()`` bytes (an
engine address, not an IP address and GPU index); ``accept`` reports the
peer's engine id where UCCL reports its IP address; ``num_cpus`` is ignored;
``advertise`` returns a libuccl descriptor to send to the peer out of band.
The engine runs a progress thread so that a passive peer needs no calls.
"""
from ._uccl import Engine, Error, TimeoutError


class _Raw:
    """A pointer and a size, registered through __cuda_array_interface__
    (libuccl detects host or GPU memory from the pointer)."""

    def __init__(self, ptr, size):
        self.__cuda_array_interface__ = {
            "data": (int(ptr), False), "shape": (int(size),), "typestr": "|u1",
            "strides": None, "version": 3}


class Endpoint:
    """Endpoint(local_gpu_idx=-1, num_cpus=0, transports=None)"""

    def __init__(self, local_gpu_idx=-1, num_cpus=0, transports=None):
        self._engine = Engine(gpu=local_gpu_idx, transports=transports, progress_thread=True)
        self._conns, self._mrs, self._xfers = {}, {}, {}
        self._next = 0

    def _id(self, table, obj):
        self._next += 1
        table[self._next] = obj
        return self._next

    def get_metadata(self):
        """This endpoint's address (bytes) for the peer's connect()."""
        return self._engine.address

    def connect(self, metadata):
        """-> (success, conn_id)"""
        try:
            return True, self._id(self._conns, self._engine.connect(metadata))
        except Error:
            return False, -1

    def accept(self, timeout=None):
        """-> (success, peer_engine_id, remote_gpu_idx (-1: unknown), conn_id)"""
        try:
            c = self._engine.accept(timeout=timeout)
        except Error:
            return False, None, -1, -1
        return True, c.peer_id, -1, self._id(self._conns, c)

    def reg(self, ptr, size):
        """Register [ptr, ptr+size) -> (success, mr_id)"""
        try:
            return True, self._id(self._mrs, self._engine.register(_Raw(ptr, size)))
        except (Error, ValueError):
            return False, -1

    def dereg(self, mr_id):
        mr = self._mrs.pop(mr_id, None)
        if mr is not None:
            mr.release()
        return mr is not None

    def _local(self, mr_id, ptr):
        mr = self._mrs[mr_id]
        return mr, int(ptr) - mr.ptr

    def _post(self, fn, *args):
        try:
            return True, fn(*args)
        except (Error, ValueError, KeyError):
            return False, None

    # blocking forms
    def send(self, conn_id, mr_id, ptr, size):
        mr, off = self._local(mr_id, ptr)
        return self._post(lambda: self._conns[conn_id].send(mr, off, size, block=True))[0]

    def recv(self, conn_id, mr_id, ptr, size):
        """-> (success, received size)"""
        mr, off = self._local(mr_id, ptr)
        return self._post(lambda: self._conns[conn_id].recv(mr, off, size, block=True))

    def advertise(self, conn_id, mr_id, ptr, size):
        """-> (success, descriptor): send it to the peer for its read/write"""
        mr, off = self._local(mr_id, ptr)
        return self._post(lambda: mr.descriptor(off, size))

    def write(self, conn_id, mr_id, ptr, size, fifo_blob):
        mr, off = self._local(mr_id, ptr)
        return self._post(lambda: self._conns[conn_id].write(mr, fifo_blob, off, size,
                                                             block=True))[0]

    def read(self, conn_id, mr_id, ptr, size, fifo_blob):
        mr, off = self._local(mr_id, ptr)
        return self._post(lambda: self._conns[conn_id].read(mr, fifo_blob, off, size,
                                                            block=True))[0]

    # asynchronous forms: (success, transfer_id), then poll_async(transfer_id)
    def _async(self, fn):
        ok, req = self._post(fn)
        return (True, self._id(self._xfers, req)) if ok else (False, -1)

    def send_async(self, conn_id, mr_id, ptr, size):
        mr, off = self._local(mr_id, ptr)
        return self._async(lambda: self._conns[conn_id].send(mr, off, size))

    def recv_async(self, conn_id, mr_id, ptr, size):
        mr, off = self._local(mr_id, ptr)
        return self._async(lambda: self._conns[conn_id].recv(mr, off, size))

    def write_async(self, conn_id, mr_id, ptr, size, fifo_blob):
        mr, off = self._local(mr_id, ptr)
        return self._async(lambda: self._conns[conn_id].write(mr, fifo_blob, off, size))

    def read_async(self, conn_id, mr_id, ptr, size, fifo_blob):
        mr, off = self._local(mr_id, ptr)
        return self._async(lambda: self._conns[conn_id].read(mr, fifo_blob, off, size))

    def poll_async(self, transfer_id):
        """-> (success, is_done); a finished transfer's id is forgotten."""
        req = self._xfers.get(transfer_id)
        if req is None:
            return False, False
        try:
            done = req.test()
        except Error:
            del self._xfers[transfer_id]
            return False, True
        if done:
            del self._xfers[transfer_id]
        return True, done

    def wait_async(self, transfer_id, timeout=None):
        """Block until done -> success (libuccl addition)."""
        req = self._xfers.pop(transfer_id, None)
        if req is None:
            return False
        try:
            req.wait(timeout)
            return True
        except TimeoutError:
            self._xfers[transfer_id] = req
            return False
        except Error:
            return False

    def close(self):
        self._xfers.clear()
        for c in self._conns.values():
            c.close()
        self._mrs.clear()
        self._conns.clear()
        self._engine.close()
