#!/bin/bash
# Session 11, helper py11: one device call, from the branch's source root
# (.dev/py11 of the call's tree, main's tree two levels up, .debs beside it):
# the build, the torch stream-order tests and pytest on torch CUDA tensors,
# torch's per-call costs (py_object_cost.py), then allgather with torch
# tensors as objects (--profile: the binding's stages) in three builds of
# the Python side against this branch's libuccl, in one run:
#   before: main's python/ (extension built here by gcc, main's bench.py);
#   after:  this branch's (stream query before an event; torch's own
#           descriptors for the tensor's attributes);
#   desc0:  this branch's with UCCL_PY_TORCH_DESC=0 (the query alone).
# Order: before, after, desc0, then before and after again while time allows;
# last, host send at 512 KiB-2 MiB (--mixed), before and after.
export OUT=${OUT:-/tmp/uccl-gpu-out} CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0
base=$(cd "${BASE_SRC:-../..}" && pwd)
[ -e .debs ] || ln -s "$base/.debs" .debs
ONLY=python PY_BENCH=none PY_STREAM_KINDS=torch PY_STREAM_EXTRA="" PY_PYTEST_KINDS=torch \
    PY_HOST_TESTS=0 PY_EXAMPLES="" timeout 100 bash tests/gpu/run-device.sh
cd build-dev || exit 1
echo "=== torch per-call costs ($(date +%T))"
timeout 30 python3 ../tests/gpu/py_object_cost.py 2>&1 | tee "$OUT/object_cost.txt"
stage=$(mktemp -d)
mkdir -p "$stage/before/uccl" "$stage/after/uccl"
inc=$(python3 -c "import sysconfig; print(sysconfig.get_paths()['include'])")
gcc -shared -fPIC -O2 -I"$inc" -I../include "$base"/python/src/*.c -L.libs -luccl \
    -Wl,-rpath,"$PWD/.libs" -o "$stage/before/uccl/_uccl.so" || { echo "base build failed"; exit 1; }
cp "$base"/python/uccl/*.py "$stage/before/uccl/"
cp ../python/uccl/*.py python/uccl/.libs/_uccl.so "$stage/after/uccl/"
echo "=== benchmarks ($(date +%T))"
bench() { # NAME STAGE ARGS...
    local name=$1 which=$2 dir=${2%2}
    shift 2
    [ "$which" = desc0 ] && dir=after
    echo "## $name $which ($(date +%T))" | tee -a "$OUT/pybench.txt"
    UCCL_PY_TORCH_DESC=$([ "$which" = desc0 ] && echo 0 || echo 1) PYTHONPATH=$stage/$dir \
        timeout 40 python3 -m uccl.bench --perf tools/uccl_perf \
        --json "$OUT/${name}_$which.json" \
        --mpirun "mpirun --allow-run-as-root --oversubscribe --bind-to core -x PYTHONPATH -x NCCL_NVLS_ENABLE -x UCCL_PY_TORCH_DESC" \
        "$@" 2>&1 | grep -v "^\[" | tee -a "$OUT/pybench.txt"
}
t0=$SECONDS
for which in before after desc0 before2 after2; do
    [ $((SECONDS - t0)) -gt 50 ] && [ "${which%2}" != "$which" ] && { echo "skip $which: time"; continue; }
    bench allgather_cuda_objects $which --op allgather --np 2 --mem cuda --objects \
        --transport shm,gpu_ipc --min 4K --max 256K --rounds 3 --profile
done
# host send around 1 MiB, main's bench.py and binding against the branch's
# (the window's requests freed before the receiver's ack)
for which in before after; do
    bench send_host $which --op send --transport shm --min 512K --max 2M --rounds 7 --mixed
done
echo "=== done ($(date +%T))"
rm -rf "$stage"
(cd "$OUT" && tar czf py11-json.tgz ./*.json && rm -f ./*.json)
