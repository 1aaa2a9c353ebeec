#!/bin/sh
# t_gpu_stream_kill (a rank SIGKILLed under a stream-ordered allgather) with
# UCCL_GPU_IPC_PEER_DONE=1: the survivors tear down the dead peer's endpoint
# while their streams still wait on its part, and PEER_DONE's word page must
# not be unregistered then (cudaHostUnregister synchronizes the device: both
# survivors hung on one H200 in session 16; the fake backend aborts there).
# PEER_DONE_MIN=0: the allgather's 4 KiB blocks are below the default floor.
# Skips without a GPU, as t_gpu_stream_kill does (exit 77).
UCCL_GPU_IPC_PEER_DONE=1 UCCL_GPU_IPC_PEER_DONE_MIN=0 exec "${top_builddir:-.}/tests/gpu/t_gpu_stream_kill"
