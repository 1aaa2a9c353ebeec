"""py13b's probe: one loop alone in a job (C's, uccl._uccl._p2p_loop, or
Python's --post mode), send or write, so that per-engine counters printed
at close (UCCL_GPU_IPC_PROF=1: gpu_ipc's copies, batch launches, fences,
control messages) belong to that loop only. Not a benchmark: uccl.bench
compares C and Python in the same processes.

    mpirun -np 2 python3 probe.py MODE OP SIZE ITERS [cuda]
MODE: c, group, groupfn, many, one."""
import sys

import numpy as np
from mpi4py import MPI

import uccl
from uccl import bench as B

mode, op, size, iters = sys.argv[1], sys.argv[2], B.parse_size(sys.argv[3]), int(sys.argv[4])
cuda = len(sys.argv) > 5 and sys.argv[5] == "cuda"


class A:
    pass


a = A()
a.op, a.window, a.mem = op, 16, "cuda" if cuda else "host"
a.post = ["group" if mode == "c" else mode]
world = MPI.COMM_WORLD
comm = uccl.Comm.from_mpi(world, transports="shm,gpu_ipc" if cuda else "shm",
                          gpu=0 if cuda else -1)
conn = comm.conn(1 - comm.rank)
buf = B.new_buffer(a, size, 0x5A if comm.rank == 0 else 0)
mr = comm.engine.register(buf)
ctl = mr if cuda else comm.engine.register(np.zeros(1, np.uint8))
desc = world.bcast(mr.descriptor() if comm.rank == 1 else None, root=1)
ts = []
for k in range(4):
    if mode == "c":
        t = B.c_phase(a, world, conn, mr, ctl, desc, size, iters, comm.rank)
    else:
        t = B.phase(a, world, comm, conn, mr, ctl, desc, size, iters)
    ts.append(t / iters / 16 * 1e6)
if comm.rank == 0:
    print("probe %s %s %d: us/op by round %s (%d windows each)" % (
        mode, op, size, " ".join("%.3f" % x for x in ts), iters), flush=True)
world.Barrier()
if comm.rank == 1 and not B.all_equal(buf, 0x5A):
    raise SystemExit("probe: data check failed")
mr.release()
if ctl is not mr:
    ctl.release()
comm.close()
