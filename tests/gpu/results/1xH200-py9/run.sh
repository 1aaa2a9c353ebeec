#!/bin/bash
# Session 9, helper py9: one device call (from the source root, .debs beside
# it): the Python part of run-device.sh narrowed to the stream tests (the
# tensor cache's test among them), pytest on GPU memory, and the benchmarks
# that matter here, then the per-call costs of torch's interfaces.
export OUT=${OUT:-/tmp/uccl-gpu-out} CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0
ONLY=python PY_BENCH="allgather_cuda_objects send_cuda write_cuda send write" \
    PY_BENCH_MIN=4K PY_BENCH_MAX=16M PY_BENCH_ROUNDS=${PY_BENCH_ROUNDS:-9} \
    PY_BENCH_OBJ_ROUNDS=3 PY_BENCH_COLL_MAX=1M PY_HOST_TESTS=0 PY_EXAMPLES="" \
    PY_STREAM_EXTRA="" timeout 480 bash tests/gpu/run-device.sh
py=python3
[ -x /opt/torch/.venv/bin/python3 ] && py=/opt/torch/.venv/bin/python3
timeout 60 "$py" tests/gpu/py_object_cost.py >"$OUT/object_cost.txt" 2>&1
cat "$OUT/object_cost.txt"
