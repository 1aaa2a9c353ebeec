"""Fixtures for the uccl binding tests: MPI ranks (mpi4py), one engine each
and a communicator over them (uccl.Comm.from_mpi). The point-to-point tests
(pair) run on exactly 2 ranks, the collectives (test_coll.py) on any number.
UCCL_TRANSPORTS (set by check-pytest.sh) picks shm or tcp. Every wait has a
timeout so a failing rank never leaves its peer hanging forever."""
import faulthandler
import signal

import numpy as np
import pytest

T = 30.0  # seconds for any wait in the tests


def blk(n, *key):
    """Deterministic bytes named by key (the same on every rank)."""
    return np.random.default_rng(list(key)).integers(0, 256, int(n), dtype=np.uint8)


def cat(parts):
    return np.concatenate(parts) if parts else np.zeros(0, np.uint8)


def rss_kib():
    """This process's resident set (statm's second field, in 4 KiB pages)."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4


def pattern(n, seed):
    """n pseudo-random bytes from seed (the point-to-point tests' data)."""
    return np.random.default_rng(seed).integers(0, 256, n, dtype=np.uint8)


def rma_setup(pair, n, seed):
    """Rank 1 exposes a zeroed region (descriptor swapped), rank 0 a pattern."""
    buf = pattern(n, seed) if pair.rank == 0 else np.zeros(n, np.uint8)
    mr = pair.engine.register(buf)
    return buf, mr, pair.swap(mr.descriptor())

# tests/gpu/hang-dump.sh: SIGUSR1 prints every thread's Python stack
faulthandler.register(signal.SIGUSR1, all_threads=True)


@pytest.fixture(scope="session")
def world():
    from mpi4py import MPI
    return MPI.COMM_WORLD


@pytest.fixture(scope="session")
def comm(world):
    import mem
    import uccl
    c = uccl.Comm.from_mpi(world, gpu=0 if mem.GPU else -1)
    yield c
    world.Barrier()
    c.close()


@pytest.fixture
def cm(comm, world):
    """The collectives' communicator, after a barrier."""
    world.Barrier()
    return comm


class Pair:
    """This rank's view of the pair: engine, connection to the peer, MPI."""

    def __init__(self, comm, world):
        if world.Get_size() != 2:
            pytest.fail("the point-to-point tests run on exactly 2 MPI ranks")
        self.comm, self.world = comm, world
        self.engine = comm.engine
        self.rank = comm.rank
        self.peer = 1 - comm.rank
        self.conn = comm.conn(self.peer)

    def swap(self, obj):
        """Send obj to the peer (MPI), return the peer's."""
        return self.world.sendrecv(obj, dest=self.peer, source=self.peer)

    def barrier(self):
        self.world.Barrier()

    def token_send(self):
        """Tell the peer we are done (its recv progresses its engine meanwhile)."""
        import numpy as np
        with self.engine.register(np.ones(1, np.uint8)) as mr:
            self.conn.send(mr, tag=0xdead).wait(T)

    def token_recv(self, timeout=T):
        """Progress until the peer's token_send (one-sided ops need that on tcp)."""
        import numpy as np
        buf = np.zeros(1, np.uint8)
        with self.engine.register(buf) as mr:
            assert self.conn.recv(mr, tag=0xdead).wait(timeout) == 1


@pytest.fixture
def pair(comm, world):
    p = Pair(comm, world)
    world.Barrier()
    return p


def pytest_runtest_logreport(report):
    """A test that failed on one rank leaves the other waiting on it: print
    the failure now and abort the job rather than hang until the timeout."""
    if report.failed:
        import sys
        from mpi4py import MPI
        print("\nFAILED on rank %d: %s (%s)\n%s" % (MPI.COMM_WORLD.Get_rank(), report.nodeid,
                                                   report.when, report.longreprtext),
              flush=True)
        sys.stderr.flush()
        MPI.COMM_WORLD.Abort(1)
