#!/usr/bin/env python3
"""Run an example with arguments that differ by rank (the check scripts'
failure cases: one rank's call disagrees with its peers').

    mpirun -np N python3 rank_args.py PROGRAM RANK0-ARGS... -- OTHER-RANKS-ARGS...
"""
import runpy
import sys

from mpi4py import MPI

prog, rest = sys.argv[1], sys.argv[2:]
cut = rest.index("--")
sys.argv = [prog] + (rest[:cut] if MPI.COMM_WORLD.Get_rank() == 0 else rest[cut + 1:])
runpy.run_path(prog, run_name="__main__")
