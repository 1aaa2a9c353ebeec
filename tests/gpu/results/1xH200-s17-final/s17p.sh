#!/bin/bash
# lead, session 17: PersistentGroup(progress=True) (pgroupp) against pgroup and C, 1-16 MiB, 16 rounds, send and write
S=$(date +%s); t() { echo "### $* (t=$(( $(date +%s) - S ))s)"; }
export NCCL_NVLS_ENABLE=0 CUDA_VISIBLE_DEVICES=0 PYTHONUNBUFFERED=1
R=$OUT
dpkg -i .debs/*.deb >/dev/null && echo "debs installed"; nvidia-smi -L
t build
./autogen.sh >/dev/null 2>&1 && mkdir -p build-dev && cd build-dev && ../configure --with-cuda --enable-werror >configure.log 2>&1 &&
  make -j16 libuccl.la tools/uccl_perf python/uccl/_uccl.la >make.log 2>&1 || { tail -20 configure.log; grep error make.log | head; exit 1; }
mkdir -p stage/uccl && cp ../python/uccl/*.py ../python/uccl/*.pyi stage/uccl/ && cp python/uccl/.libs/_uccl.so stage/uccl/
for op in send write; do
    t "$op"
    PYTHONPATH=$PWD/stage timeout 150 python3 -m uccl.bench --perf tools/uccl_perf \
        --mpirun "mpirun --allow-run-as-root --oversubscribe --bind-to core -x PYTHONPATH -x NCCL_NVLS_ENABLE" \
        --op $op --mem cuda --transport shm,gpu_ipc --min 1M --max 16M --iters 300 --rounds 16 \
        --post pgroup,pgroupp --json "$R/pybench-$op.json" 2>&1 | grep -v "^\[" | tee "$R/pybench-$op.txt" | tail -7
done
t end
