#!/bin/bash
# Session 12, helper py12: one device call, GPU 0 only, from the branch's
# source root (.dev/py12 of the call's tree; main's tree two levels up, .debs
# there). The branch's libuccl serves three builds of the binding, each
# compiled here by the same gcc line, each with its own uccl/*.py except
# bench.py, which is this branch's for all (the same loops):
#   before: session 10's binding (python/ at c7d5735^1, the last commit of
#           main before py11's merge),
#   main:   main's (a2ae8a5: py11's stream query before an event, torch's
#           descriptors),
#   py12:   this branch's.
# 1. the build; the torch stream-order tests (this branch's binding);
# 2. torch's and uccl_stream_query's per-call costs (py_object_cost.py);
# 3. allgather with torch tensors as objects, rank 0's --profile (the
#    binding's stages), the Python worker alone (no C job: the binding's
#    cost is call - coll), in the order before main py12 py12-stream, twice;
#    py12-stream: stream= the current stream (no producer-stream step);
# 4. GPU send and write 1-16 MiB, window 16, --split, 9 rounds of 200
#    windows (C's loop and Python's alternating in the same processes);
# 5. host send 512 KiB-2 MiB, --split --mixed, 7 rounds.
# shellcheck disable=SC2086,SC2046 # $M, $B: command words, split on purpose
export OUT=${OUT:-/tmp/uccl-gpu-out} CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0
base=$(cd "${BASE_SRC:-../..}" && pwd)
here=$PWD
[ -e .debs ] || ln -s "$base/.debs" .debs
ONLY=python PY_BENCH=none PY_STREAM_KINDS=torch PY_STREAM_EXTRA="" PY_PYTEST_KINDS="" \
    PY_HOST_TESTS=0 PY_EXAMPLES="" timeout 100 bash tests/gpu/run-device.sh
cd build-dev || exit 1
grep -E "passed|failed" "$OUT/stream_torch.log" | tail -2
stage=$(mktemp -d)
inc=$(python3 -c "import sysconfig; print(sysconfig.get_paths()['include'])")
for b in before main py12; do
    src=$here/.py12-base/$b/python
    [ $b = py12 ] && src=$here/python
    mkdir -p "$stage/$b/uccl"
    gcc -shared -fPIC -O2 -I"$inc" -I../include "$src"/src/*.c -L.libs -luccl \
        -Wl,-rpath,"$PWD/.libs" -o "$stage/$b/uccl/_uccl.so" || { echo "$b: build failed"; exit 1; }
    cp "$src"/uccl/*.py "$stage/$b/uccl/"
    cp "$here"/python/uccl/bench.py "$stage/$b/uccl/"
done
echo "=== torch and uccl_stream_query per call ($(date +%T))"
PYTHONPATH=$stage/py12 timeout 40 python3 ../tests/gpu/py_object_cost.py 2>&1 | tee "$OUT/object_cost.txt"
M="mpirun --allow-run-as-root --oversubscribe --bind-to core -np 2 -x PYTHONPATH -x NCCL_NVLS_ENABLE"
echo "=== allgather, torch tensors as objects, the Python worker ($(date +%T))"
t0=$SECONDS
for round in 1 2; do
    for v in before main py12 py12-stream; do
        [ $round = 2 ] && [ $((SECONDS - t0)) -gt 60 ] && { echo "skip round 2 $v: time"; continue; }
        PYTHONPATH=$stage/${v%-stream} timeout 40 $M python3 -m uccl.bench --worker --op allgather \
            --np 2 --mem cuda --objects --profile --transport shm,gpu_ipc --min 4K --max 64K \
            --iters 300 --json "$OUT/obj_${v}_$round.json" $([ $v = py12-stream ] && echo --stream) \
            2>&1 | grep -v "^\[" | tail -3
        echo "$v round $round: exit ${PIPESTATUS[0]} ($(date +%T))"
    done
done
python3 - "$OUT" <<'PY' | tee "$OUT/objects.txt"
import json, glob, os, sys
out = sys.argv[1]
print("# allgather, 2 ranks on GPU 0, torch tensors as objects, rank 0, us per call "
      "(300 calls a size): us = the whole Python call (slowest rank), bind = call - coll "
      "(the binding), then its stages")
keys = ["us", "bind", "call", "coll", "view", "torch", "order", "event", "wait", "free"]
print("%-12s %2s %7s" % ("binding", "rd", "size") + "".join("%9s" % k for k in keys))
for f in sorted(glob.glob(os.path.join(out, "obj_*.json"))):
    name = os.path.basename(f)[4:-5]
    v, rd = name.rsplit("_", 1)
    for r in json.load(open(f))["rows"]:
        p = dict(r["profile"])
        p["us"] = r["us"]
        p["bind"] = p.get("call", 0) - p.get("coll", 0)
        print("%-12s %2s %7d" % (v, rd, r["size"]) + "".join("%9.3f" % p.get(k, 0) for k in keys))
PY
B="python3 -m uccl.bench --perf tools/uccl_perf --mpirun"
MB="mpirun --allow-run-as-root --oversubscribe --bind-to core -x PYTHONPATH -x NCCL_NVLS_ENABLE"
for op in send write; do
    echo "=== GPU $op, window 16, split ($(date +%T))"
    PYTHONPATH=$stage/py12 timeout 60 $B "$MB" --op $op --mem cuda --transport shm,gpu_ipc \
        --min 1M --max 16M --iters 200 --rounds 9 --split --json "$OUT/${op}_cuda.json" 2>&1 |
        grep -v "^\[" | tee -a "$OUT/pybench.txt"
done
echo "=== host send, split, mixed ($(date +%T))"
PYTHONPATH=$stage/py12 timeout 40 $B "$MB" --op send --transport shm --min 512K --max 2M \
    --iters 100 --rounds 7 --split --mixed --json "$OUT/send_host.json" 2>&1 |
    grep -v "^\[" | tee -a "$OUT/pybench.txt"
echo "=== done ($(date +%T))"
rm -rf "$stage"
(cd "$OUT" && tar czf py12-json.tgz ./*.json && rm -f ./*.json)
