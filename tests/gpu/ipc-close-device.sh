#!/bin/bash
# tests/gpu/p_ipc_close.c on the device machine: build it against the CUDA
# toolkit (CUDA_HOME, default /usr/local/cuda) and run its cases (argument:
# the case letters, default ABCD). Output in $OUT/ipc-close.txt.
set -u
OUT=${OUT:-/tmp/uccl-gpu-out}
CUDA=${CUDA_HOME:-/usr/local/cuda}
mkdir -p "$OUT"
{
    date -u
    nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv
    grep -m1 CUDA_VERSION "$CUDA/include/cuda.h"
    gcc -std=gnu11 -O2 -Wall -I"$CUDA/include" "$(dirname "$0")/p_ipc_close.c" -o /tmp/p_ipc_close \
        -L"$CUDA/lib64" -lcudart -lcuda -lpthread || exit 1
    for i in 1 2; do
        echo "##### run $i"
        timeout 120 /tmp/p_ipc_close "${1:-ABCD}"
        echo "p_ipc_close exit code: $?"
    done
} 2>&1 | tee "$OUT/ipc-close.txt"
