#!/bin/bash
# moefix device check: build, then moe.py (fixed) and the original, default and direct
cd "$(dirname "$0")"
ln -sfn ../../.debs .debs
dpkg -i .debs/*.deb >/dev/null 2>&1
T0=$(date +%s)
./autogen.sh >/dev/null 2>&1 || { echo autogen failed; exit 1; }
mkdir -p build-dev && cd build-dev || exit 1
(../configure --with-cuda >configure.log 2>&1 && make -j16 >make.log 2>&1 && make -j16 check TESTS= >>make.log 2>&1) || { tail -20 make.log configure.log; exit 1; }
echo "build $(( $(date +%s) - T0 )) s"
export top_srcdir=.. top_builddir=. uccl_python_built=yes PYTHON=python3 MPIEXEC="mpirun --allow-run-as-root --oversubscribe" NCCL_NVLS_ENABLE=0
A="--device cuda --tokens 2048 --hidden 2048 --iters 4 --mode coll"
r() { name=$1 to=$2; shift 2; echo "=== $name ($(date +%T))"; timeout $to "$@" > $OUT/$name.log 2>&1; echo "rc=$?"; tail -4 $OUT/$name.log; }
r fixed-default 45 ../python/run-python.sh 2 shm,gpu_ipc numpy,mpi4py ../examples/python/moe.py $A
r fixed-direct 45 env UCCL_COLL_ALGO=direct ../python/run-python.sh 2 shm,gpu_ipc numpy,mpi4py ../examples/python/moe.py $A
r fixed-h64 30 ../python/run-python.sh 2 shm,gpu_ipc numpy,mpi4py ../examples/python/moe.py --device cuda --tokens 2048 --hidden 64 --iters 4 --mode coll
r orig-default-launchblocking 30 env CUDA_LAUNCH_BLOCKING=1 ../python/run-python.sh 2 shm,gpu_ipc numpy,mpi4py ../examples/python/moe_orig_dev.py $A
r orig-default 25 ../python/run-python.sh 2 shm,gpu_ipc numpy,mpi4py ../examples/python/moe_orig_dev.py $A
r orig-direct 20 env UCCL_COLL_ALGO=direct ../python/run-python.sh 2 shm,gpu_ipc numpy,mpi4py ../examples/python/moe_orig_dev.py $A
echo "total $(( $(date +%s) - T0 )) s"
