"""libuccl for Python: engines, connections, registered memory, requests.

    import uccl
    with uccl.Engine() as eng:
        conn = eng.connect(peer_address)          # or eng.accept()
        mr = eng.register(numpy_array)            # buffer protocol, CUDA arrays, DLPack
        conn.send(mr).wait()                      # or conn.send(mr, block=True)

Every failing libuccl call raises uccl.Error (subclasses per status, e.g.
uccl.TimeoutError, uccl.PeerFailedError, uccl.OutOfBoundsError); misuse
(wrong types, non-contiguous or read-only memory, closed objects) raises
TypeError or ValueError. See python/README.md.
"""
from ._uccl import *  # noqa: F401,F403
from ._uccl import Conn, Engine, Error, MemoryRegion, PeerError, Request  # noqa: F401
from ._uccl import PersistentGroup, PersistentRequest  # noqa: F401
from ._uccl import start_all, strerror, version, wait_all  # noqa: F401
from .comm import Comm  # noqa: F401

__version__ = version()
