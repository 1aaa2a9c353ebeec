"""py15's callgrind probe (py16: and --post pgroup): one loop alone (C's _p2p_loop or a Python --post
mode) for ITERS windows of 16, host memory over shm. Run under mpirun with
the measured rank in valgrind (cg.sh), which dumps its counts before each
call of the marker (uccl._uccl._fast_stats): the second dump is the loop.

    mpirun -np 2 python3 cg.py MODE OP SIZE ITERS"""
import sys

import numpy as np
from mpi4py import MPI

import uccl
from uccl import bench as B
from uccl import bench_p2p as P

mode, op, size, iters = sys.argv[1], sys.argv[2], B.parse_size(sys.argv[3]), int(sys.argv[4])


class A:
    pass


a = A()
a.op, a.window, a.mem = op, 16, "host"
a.post = ["group" if mode == "c" else mode]
world = MPI.COMM_WORLD
comm = uccl.Comm.from_mpi(world, transports="shm")
conn = comm.conn(1 - comm.rank)
buf = B.new_buffer(a, size, 0x5A if comm.rank == 0 else 0)
mr = comm.engine.register(buf)
ctl = comm.engine.register(np.zeros(1, np.uint8))
desc = world.bcast(mr.descriptor() if comm.rank == 1 else None, root=1)
marker = uccl._uccl._fast_stats  # callgrind dumps before each call (cg.sh)
if mode == "c":
    B.c_phase(a, world, conn, mr, ctl, desc, size, 20, comm.rank)  # warm-up
    world.Barrier()
    marker()
    uccl._uccl._p2p_loop(conn, a.op, comm.rank, mr, ctl, desc, size, a.window, iters)
    marker()
else:
    B.phase(a, world, comm, conn, mr, ctl, desc, size, 20)
    world.Barrier()
    marker()
    post, ops = P.poster_many(a, conn, mr, desc, size, comm.rank)
    if op != "send" and comm.rank == 1:  # phase()'s passive rank
        P.idle_wait(comm.engine, conn.recv(ctl, 0, 0, P.TAG_FIN))
    elif mode == "group":  # phase()'s loop, without its barrier
        P.loop_group(post, ops, conn, ctl, iters, comm.rank, op == "send")
    elif mode == "pgroup":
        P.loop_pgroup(a, conn, mr, ctl, desc, size, iters, comm.rank)
    else:
        P.loop_persist(a, conn, mr, ctl, desc, size, iters, comm.rank)
    marker()
    if op != "send" and comm.rank == 0:
        conn.send(ctl, 0, 0, P.TAG_FIN, block=True)
world.Barrier()
if comm.rank == 1 and not B.all_equal(buf, 0x5A):
    raise SystemExit("cg: data check failed")
mr.release()
ctl.release()
comm.close()
