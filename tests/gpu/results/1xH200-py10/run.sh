#!/bin/bash
# Session 10, helper py10: one device call, from the branch's source root
# (.dev/py10 of the call's tree, main's tree two levels up, .debs beside it):
# the build, the GPU Python tests with torch (stream order, pytest on GPU
# memory), then python -m uccl.bench before and after in the same run:
#   before: main's python/ (extension built here by gcc against this
#           libuccl, and main's uccl/bench.py);
#   after:  this branch's;
#   loop:   main's extension with this branch's bench.py (what the
#           benchmark's own loop change gives, without the binding's).
export OUT=${OUT:-/tmp/uccl-gpu-out} CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0
base=$(cd "${BASE_SRC:-../..}" && pwd)
[ -e .debs ] || ln -s "$base/.debs" .debs
ONLY=python PY_BENCH="" PY_STREAM_KINDS=torch PY_STREAM_EXTRA="" PY_PYTEST_KINDS=torch \
    PY_HOST_TESTS=0 PY_EXAMPLES="" timeout 200 bash tests/gpu/run-device.sh
cd build-dev || exit 1
stage=$(mktemp -d)
mkdir -p "$stage/before/uccl" "$stage/after/uccl" "$stage/loop/uccl"
inc=$(python3 -c "import sysconfig; print(sysconfig.get_paths()['include'])")
gcc -shared -fPIC -O2 -I"$inc" -I../include "$base"/python/src/*.c -L.libs -luccl \
    -Wl,-rpath,"$PWD/.libs" -o "$stage/before/uccl/_uccl.so" || { echo "base build failed"; exit 1; }
cp "$base"/python/uccl/*.py "$stage/before/uccl/"
cp ../python/uccl/*.py python/uccl/.libs/_uccl.so "$stage/after/uccl/"
cp ../python/uccl/*.py "$stage/before/uccl/_uccl.so" "$stage/loop/uccl/"
echo "=== benchmarks ($(date +%T))"
bench() { # NAME STAGE ARGS...
    local name=$1 which=$2
    shift 2
    echo "## $name $which" | tee -a "$OUT/pybench.txt"
    PYTHONPATH=$stage/$which timeout 100 python3 -m uccl.bench --perf tools/uccl_perf \
        --json "$OUT/${name}_$which.json" \
        --mpirun "mpirun --allow-run-as-root --oversubscribe --bind-to core -x PYTHONPATH -x NCCL_NVLS_ENABLE $MPI_X" \
        "$@" 2>&1 | grep -v "^\[" | tee -a "$OUT/pybench.txt"
}
for which in before after; do
    bench allgather_cuda_objects $which --op allgather --np 2 --mem cuda --objects \
        --transport shm,gpu_ipc --min 4K --max 256K --rounds 3 --profile
done
for which in before after loop; do
    for op in send write; do
        bench ${op}_cuda $which --op $op --mem cuda --transport shm,gpu_ipc --min 4K --max 16M \
            --rounds 7 --mixed
    done
done
for which in before after; do
    for op in send write; do
        bench $op $which --op $op --transport shm --min 4K --max 4M --rounds 7 --mixed
    done
done
export UCCL_SHM_SPLIT_MIN=0
MPI_X="-x UCCL_SHM_SPLIT_MIN" bench send_nosplit after --op send --transport shm --min 256K \
    --max 4M --rounds 7 --mixed
echo "=== done ($(date +%T))"
rm -rf "$stage"
# the device tool returns at most 8 files: the JSON in one archive
(cd "$OUT" && tar czf py10-json.tgz ./*.json && rm -f ./*.json)
