"""uccl.Comm: libuccl's communicator (uccl_comm_init) and its collectives.

The type is the extension's (uccl._uccl.Comm: bootstrap, connections,
collectives, all in C); this subclass adds the constructors from launchers.

    comm = uccl.Comm.from_mpi(MPI.COMM_WORLD)      # mpi4py only exchanges addresses
    comm.allgather(shard, whole)                    # numpy, bytearray, torch, CuPy, MemoryRegion
    req = comm.ialltoallv(tokens, got, counts, peer_counts, unit=row_bytes)
    req.wait()
"""
from ._uccl import Comm as _Comm


class Comm(_Comm):
    """A libuccl communicator: conn(r), same_host(r), and the collectives
    allgather(v), alltoall(v), bcast, gather, scatter (blocking, and
    i-prefixed non-blocking forms returning a uccl.Request)."""

    @classmethod
    def from_mpi(cls, mpi_comm, engine=None, **engine_kwargs):
        """Build a Comm over every rank of an mpi4py communicator (collective).

        MPI carries only the bootstrap (addresses and two votes, through
        mpi_comm.allgather); data never goes through it. engine: use this
        Engine (not closed by Comm.close); else one is made with
        engine_kwargs (gpu, transports, net_devices, progress_thread)."""
        return cls(mpi_comm.Get_rank(), mpi_comm.Get_size(), mpi_comm.allgather,
                   engine=engine, **engine_kwargs)

    @classmethod
    def from_store(cls, store, rank, size, prefix="uccl", engine=None, **engine_kwargs):
        """Build a Comm with a key-value store (torch.distributed's TCPStore,
        FileStore, ...: set(key, bytes) and get(key) -> bytes, get waiting
        for the key)."""
        rounds = [0]

        def allgather(data):
            k = "%s/%d" % (prefix, rounds[0])
            rounds[0] += 1
            store.set("%s/%d" % (k, rank), bytes(data))
            return [bytes(store.get("%s/%d" % (k, r))) for r in range(size)]

        return cls(rank, size, allgather, engine=engine, **engine_kwargs)
