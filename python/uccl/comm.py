"""uccl.Comm: one engine and a connection to every other rank.

Comm.from_mpi(mpi4py_comm) exchanges engine addresses with mpi4py (MPI is
used only for that), then lower ranks connect and higher ranks accept,
matching accepted connections to ranks by the peer engine id. The
collectives (allgather, alltoall(v), bcast, ...) join this class when
libuccl's communicator API (uccl_coll.h) is bound; until then a Comm is the
point-to-point mesh they will run on.
"""
from ._uccl import Engine


class Comm:
    """An ordered set of connections: conn(r) is the connection to rank r."""

    def __init__(self, engine, rank, size, conns, hosts, owns_engine=True):
        self.engine = engine
        self.rank = rank
        self.size = size
        self._conns = conns
        self._hosts = hosts
        self._owns_engine = owns_engine

    @classmethod
    def from_mpi(cls, mpi_comm, engine=None, timeout=None, **engine_kwargs):
        """Build a Comm over every rank of mpi_comm (collective).

        engine: use this Engine (not closed by Comm.close); else one is made
        with engine_kwargs (gpu, transports, ...). timeout bounds each accept
        in seconds (None: no limit)."""
        owns = engine is None
        eng = Engine(**engine_kwargs) if owns else engine
        try:
            rank, size = mpi_comm.Get_rank(), mpi_comm.Get_size()
            peers = mpi_comm.allgather((eng.address, eng.id, eng.host_id))
            conns = [None] * size
            for r in range(rank + 1, size):
                conns[r] = eng.connect(peers[r][0])
            by_id = {peers[r][1]: r for r in range(rank)}
            for _ in range(rank):
                c = eng.accept(timeout=timeout)
                r = by_id.get(c.peer_id)
                if r is None or conns[r] is not None:
                    raise RuntimeError("Comm.from_mpi: connection from an unknown engine")
                conns[r] = c
            hosts = [p[2] for p in peers]
            mpi_comm.Barrier()
        except BaseException:
            if owns:
                eng.close()
            raise
        return cls(eng, rank, size, conns, hosts, owns_engine=owns)

    def conn(self, r):
        """The connection to rank r (None for this rank)."""
        return self._conns[r]

    def same_host(self, r):
        """True when rank r runs on this rank's host."""
        return self._hosts[r] == self._hosts[self.rank]

    def close(self):
        """Close every connection, and the engine when the Comm made it."""
        for c in self._conns:
            if c is not None:
                c.close()
        self._conns = [None] * self.size
        if self._owns_engine and self.engine is not None:
            self.engine.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False
