#!/bin/bash
# Session 9, helper py9, second device call: the stream tests with torch (the
# tensor cache's test, its count fixed), the tensors-as-objects allgather
# with the breakdown (3 rounds), and send/write on torch CUDA tensors in one
# process (C loop and Python alternating, 7 rounds) up to 64 MiB.
export OUT=${OUT:-/tmp/uccl-gpu-out} CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0
ONLY=python PY_BENCH="allgather_cuda_objects send_cuda write_cuda" PY_STREAM_KINDS=torch \
    PY_PYTEST_KINDS="" PY_BENCH_MIN=64K PY_BENCH_MAX=64M PY_BENCH_ROUNDS=7 \
    PY_BENCH_OBJ_ROUNDS=3 PY_BENCH_COLL_MAX=256K PY_HOST_TESTS=0 PY_EXAMPLES="" \
    PY_STREAM_EXTRA="" timeout 240 bash tests/gpu/run-device.sh
