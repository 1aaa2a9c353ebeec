#!/bin/sh
# uccl_perf p2p on 2 ranks over shm and tcp: every op completes and verifies
# its data (the passive rank of write/read sleeps between polls, and tcp needs
# it to progress; tcp's write and read with --sliding; send --sliding over
# both, the MPI reference sliding alike), the JSON parses with
# one row per size, --no-ref leaves the reference out, the tcp reference runs
# over Open MPI's tcp path and says so, a path set by pml / osc is named by
# them, and a bad option is refused, named once, with the usage text once.
set -e
perf=${top_builddir:-.}/tools/uccl_perf
# no leak check under mpirun, as tests/mpi/run-mpi.sh explains
ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
export ASAN_OPTIONS
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
n=0

perf2() {  # perf2 ARGS...: uccl_perf p2p on 2 ranks; MPIEXEC holds a $(...), hence eval
    eval "timeout 120 ${MPIEXEC:-mpirun --oversubscribe} -np 2 \"\$perf\" p2p \"\$@\"" >"$tmp/out" 2>&1
}

check_json() {  # check_json FILE ROWS WANT_REF
    command -v python3 >/dev/null 2>&1 || return 0
    python3 - "$@" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
rows, want_ref = d["rows"], sys.argv[3] == "1"
assert [r["size"] for r in rows] == [4096 << i for i in range(int(sys.argv[2]))], rows
assert all(r["uccl_gbps"] > 0 for r in rows), rows
assert all((r["ref_gbps"] > 0) == want_ref for r in rows), rows
assert (d["reference"] == "none (--no-ref)") != want_ref, d["reference"]
PY
}

for tp in shm tcp; do
    slide=; [ $tp = tcp ] && slide=--sliding # tcp: W in flight all along, the data checked alike
    for op in write read; do
        perf2 --transport $tp --op $op --min 4K --max 32K --iters 3 --no-ref $slide \
            --json "$tmp/$tp-$op.json" ||
            { cat "$tmp/out"; echo "uccl_perf $tp $op $slide failed"; exit 1; }
        check_json "$tmp/$tp-$op.json" 4 0
        grep -q "\"sliding\": $([ -n "$slide" ] && echo true || echo false)" "$tmp/$tp-$op.json" ||
            { echo "uccl_perf $tp $op: the JSON does not say sliding ${slide:-off}"; exit 1; }
        n=$((n + 1))
    done
    perf2 --transport $tp --op send --min 4K --max 32K --iters 3 --json "$tmp/$tp-send.json" ||
        { cat "$tmp/out"; echo "uccl_perf $tp send failed"; exit 1; }
    check_json "$tmp/$tp-send.json" 4 1
    n=$((n + 1))
    # send --sliding: W sends in flight, W receives posted and each reposted
    # as it completes, one ack at the end; uccl's last window (and the MPI
    # reference's, sliding alike) checked byte for byte. 64K: past the
    # transports' eager sizes as well; window 5 against 7 iterations, so the
    # slots wrap at an odd place
    perf2 --transport $tp --op send --sliding --window 5 --min 4K --max 64K --iters 7 --rounds 3 \
        --json "$tmp/$tp-send-slide.json" ||
        { cat "$tmp/out"; echo "uccl_perf $tp send --sliding failed"; exit 1; }
    check_json "$tmp/$tp-send-slide.json" 5 1
    grep -q '"sliding": true' "$tmp/$tp-send-slide.json" &&
        grep -q '^# reference: .*each reposted as it completes' "$tmp/out" ||
        { cat "$tmp/out"; echo "uccl_perf $tp send --sliding: the header or the JSON does not say sliding"; exit 1; }
    ! grep -q 'DATA MISMATCH' "$tmp/out" || { cat "$tmp/out"; exit 1; }
    n=$((n + 1))
done
# --rounds: medians of alternating rounds, said in the header and the JSON
perf2 --transport shm --op send --min 4K --max 8K --iters 3 --rounds 3 --json "$tmp/rounds.json" ||
    { cat "$tmp/out"; echo "uccl_perf --rounds 3 failed"; exit 1; }
check_json "$tmp/rounds.json" 2 1
grep -q 'the median of 3 rounds' "$tmp/out" || { cat "$tmp/out"; echo "no rounds line"; exit 1; }
grep -q '"rounds": 3' "$tmp/rounds.json" || { echo "no rounds in the JSON"; exit 1; }
# and the spread of the per-round ratios around the ratio of the medians
python3 -c 'import json, sys
for r in json.load(open(sys.argv[1]))["rows"]:
    assert 0 < r["ratio_min"] <= r["ratio"] * 1.0001 and r["ratio"] <= r["ratio_max"] * 1.0001, r' \
    "$tmp/rounds.json" || { echo "bad ratio range in the JSON"; exit 1; }
n=$((n + 1))
# the tcp reference runs over Open MPI's tcp path, whatever mpirun chose, and says so
perf2 --transport tcp --op send --min 4K --max 4K --iters 3 --json "$tmp/tcp-path.json" ||
    { cat "$tmp/out"; echo "uccl_perf tcp send failed"; exit 1; }
grep -q '^# reference: .*path: btl tcp,self, pml ob1' "$tmp/out" ||
    { cat "$tmp/out"; echo "the tcp reference path is not pinned or not printed"; exit 1; }
grep -q '"reference_path": "btl tcp,self' "$tmp/tcp-path.json" ||
    { echo "no reference_path in the JSON"; exit 1; }
n=$((n + 1))
# a reference path chosen by pml / osc (e.g. --mca pml ucx --mca osc ucx --mca
# btl self, bench-cluster.sh's UCX path) is named by them, not by the btl alone
OMPI_MCA_pml=ob1 OMPI_MCA_osc=pt2pt OMPI_MCA_btl=self,vader,tcp \
    perf2 --transport shm --op send --min 4K --max 4K --iters 3 --json "$tmp/pml-path.json" ||
    { cat "$tmp/out"; echo "uccl_perf shm send with OMPI_MCA_pml failed"; exit 1; }
grep -q '"reference_path": "pml ob1, osc pt2pt, btl self,vader,tcp ' "$tmp/pml-path.json" ||
    { cat "$tmp/pml-path.json"; echo "the reference path does not name pml and osc"; exit 1; }
n=$((n + 1))
# --op a,b,c: a block of rows for each op in turn, in one job
perf2 --transport shm --op write,read,send --min 4K --max 8K --iters 2 --no-ref ||
    { cat "$tmp/out"; echo "uccl_perf --op write,read,send failed"; exit 1; }
[ "$(grep -E '^# uccl_perf p2p --op (write|read|send):' "$tmp/out" | cut -d: -f1 | paste -sd' ')" = \
    "# uccl_perf p2p --op write # uccl_perf p2p --op read # uccl_perf p2p --op send" ] &&
    [ "$(grep -cE '^ +(4096|8192) +[0-9.]+ ' "$tmp/out")" = 6 ] ||
    { cat "$tmp/out"; echo "uccl_perf --op write,read,send: want 3 headers in order, 2 rows each"; exit 1; }
n=$((n + 1))
# a bad option is named once (rank 0 only), then the usage once
for bad in "--no-ref=1|'--no-ref' doesn't allow an argument" "--rounds 0|invalid value '0' for --rounds" \
    "--rounds 16|invalid value '16' for --rounds" "--op foo|invalid value 'foo' for --op" \
    "--bogus|unrecognized option '--bogus'" "extra|unexpected argument 'extra'" \
    "--min 8K --max 4K|--min 8192 is larger than --max 4096" \
    "--op write,bogus --no-ref|invalid value 'write,bogus' for --op" \
    "--op write,read|a list of ops is for --no-ref" \
    "--min 1K --max 18014398509481985K --no-ref --iters 1|invalid value '18014398509481985K' for --max"; do
    # shellcheck disable=SC2086 # the option and its value are two words
    if perf2 ${bad%%|*}; then
        echo "uccl_perf accepted ${bad%%|*}"; exit 1
    fi
    if [ "$(grep -c -F -e "${bad#*|}" "$tmp/out")" != 1 ] ||
        [ "$(grep -c 'usage: mpirun -np 2 uccl_perf p2p' "$tmp/out")" != 1 ]; then
        cat "$tmp/out"; echo "uccl_perf ${bad%%|*}: want '${bad#*|}' and the usage, once each"; exit 1
    fi
done
# a wrong benchmark name: both benchmarks are named
if eval "timeout 60 ${MPIEXEC:-mpirun --oversubscribe} -np 2 \"\$perf\" pp2" >"$tmp/out" 2>&1; then
    echo "uccl_perf accepted the benchmark pp2"; exit 1
fi
grep -q "names the benchmark: p2p .* or coll .*(not 'pp2')" "$tmp/out" ||
    { cat "$tmp/out"; echo "uccl_perf pp2: want both benchmarks named"; exit 1; }
# uccl_perf coll: every op on 3 ranks, data checked (#wrong 0, exit 0), JSON rows
coll3() {  # coll3 ARGS...: uccl_perf coll on 3 ranks
    eval "timeout 120 ${MPIEXEC:-mpirun --oversubscribe} -np 3 \"\$perf\" coll \"\$@\"" >"$tmp/out" 2>&1
}
for op in allgather allgatherv alltoall alltoallv bcast gather scatter; do
    coll3 --op $op --transport shm --min 1K --max 2K --iters 2 --warmup 1 --ucx-ref off \
        --json "$tmp/coll.json" ||
        { cat "$tmp/out"; echo "uccl_perf coll --op $op failed"; exit 1; }
    if command -v python3 >/dev/null 2>&1; then
        python3 - "$tmp/coll.json" "$op" <<'PY' || { cat "$tmp/out"; exit 1; }
import json, sys
d = json.load(open(sys.argv[1]))
assert d["op"] == sys.argv[2] and d["ranks"] == 3, d
assert [r["count"] for r in d["rows"]] == [1024, 2048], d["rows"]
assert all(r["wrong"] == 0 and r["uccl_us"] > 0 and r["plan_us"] > 0 and r["mpi_us"] > 0
           for r in d["rows"]), d["rows"]
PY
    fi
done
# p2p --mem cuda --peer-mem host: rank 1's buffer is host memory, and the
# check must read that buffer (it read rank 1's unused GPU buffer: every write
# was a DATA MISMATCH at offset 0); builds without a GPU must say so
for op in write read; do
    if ! perf2 --transport tcp --mem cuda --peer-mem host --op $op --min 4K --max 64K --iters 2 \
        --window 2 --no-ref; then
        grep -q 'needs a GPU' "$tmp/out" ||
            { cat "$tmp/out"; echo "p2p --mem cuda --peer-mem host --op $op failed"; exit 1; }
    fi
done
n=$((n + 1))
# --mem cuda --no-ref: the JSON says no reference ran (it described the
# copy and NCCL references, whose columns read 0)
if perf2 --transport gpu_ipc --mem cuda --op send --min 4K --max 8K --iters 2 --no-ref \
    --json "$tmp/gpu-noref.json"; then
    grep -q '"reference": "none (--no-ref)"' "$tmp/gpu-noref.json" ||
        { cat "$tmp/gpu-noref.json"; echo "p2p --mem cuda --no-ref: the JSON names references"; exit 1; }
else
    grep -q 'needs a GPU' "$tmp/out" || { cat "$tmp/out"; echo "p2p --mem cuda --no-ref failed"; exit 1; }
fi
# --mem cuda: GPU buffers (the fake GPU build's "GPUs" too), data checked, the
# device-to-device copy as the reference; elsewhere it must say there is no GPU
for op in allgather alltoallv bcast; do
    if coll3 --op $op --mem cuda --min 1K --max 2K --iters 2 --warmup 1 --json "$tmp/coll.json"; then
        if command -v python3 >/dev/null 2>&1; then
            python3 - "$tmp/coll.json" <<'PY' || { cat "$tmp/out"; exit 1; }
import json, sys
d = json.load(open(sys.argv[1]))
assert d["mem"] == "cuda" and "copy" in d["reference"], d
assert all(r["wrong"] == 0 and r["uccl_us"] > 0 and r["copy_us"] >= 0 for r in d["rows"]), d["rows"]
# 3 ranks on one host: the peer-copy ceiling ran for every size, NCCL says why not
assert d["gpus"] >= 1 and d["nccl"] != "not run", d
assert all(r["peer_us"] > 0 and r["peer_busbw_gbs"] > 0 for r in d["rows"]), d["rows"]
PY
        fi
    else
        grep -q 'no GPU here' "$tmp/out" || { cat "$tmp/out"; echo "coll --mem cuda --op $op failed"; exit 1; }
    fi
done
n=$((n + 1))
# the Open MPI over UCX column: measured for every row where that path runs,
# else every row empty and the reason on the header line and in the JSON
coll3 --op alltoall --transport shm --min 1K --max 2K --iters 2 --warmup 1 --json "$tmp/coll.json" ||
    { cat "$tmp/out"; echo "uccl_perf coll with the UCX reference failed"; exit 1; }
grep -q '^# reference ucx: ' "$tmp/out" || { cat "$tmp/out"; echo "no UCX reference line"; exit 1; }
if command -v python3 >/dev/null 2>&1; then
    python3 - "$tmp/coll.json" <<'PY' || { cat "$tmp/out"; exit 1; }
import json, sys
d = json.load(open(sys.argv[1]))
ref = d["reference_ucx"]
if ref.startswith("skipped: "):
    assert all(r["ucx_us"] == 0 for r in d["rows"]), d["rows"]
    print("SKIP: Open MPI over UCX does not run here (%s)" % ref)
else:
    assert ref.startswith("pml ucx"), ref
    # busbw has 4 decimals: a loaded host's 3 KiB rows round to 0.0
    assert all(r["ucx_us"] > 0 and r["ucx_busbw_gbs"] >= 0 for r in d["rows"]), d["rows"]
PY
fi
n=$((n + 1))
# the UCX run's failure, its last line quoted in reference_ucx: the JSON
# still parses when that line has quotes (Open MPI's: unknown option "--mca")
cat >"$tmp/mpirun" <<'EOF'
#!/bin/sh
echo 'mpirun: Error: unknown option "--mca" \ here'
exit 1
EOF
chmod +x "$tmp/mpirun"
coll3 --op allgather --transport shm --min 1K --max 1K --iters 1 --warmup 0 \
    --mpirun "$tmp/mpirun" --json "$tmp/coll.json" ||
    { cat "$tmp/out"; echo "uccl_perf coll with a failing UCX run failed"; exit 1; }
if command -v python3 >/dev/null 2>&1; then
    python3 - "$tmp/coll.json" <<'PY' || { cat "$tmp/coll.json"; echo "coll JSON with a quoted failure"; exit 1; }
import json, sys
ref = json.load(open(sys.argv[1]))["reference_ucx"]
assert ref == 'skipped: exit status 1: mpirun: Error: unknown option "--mca" \\ here', ref
PY
fi
n=$((n + 1))
for bad in "--op nosuch" "--op allgather --algo nosuch" "--op allgather --bogus" "--min 1K" \
    "--op allgather --ucx-ref maybe" \
    "--op allgather --mem nosuch" \
    "--op allgather --max 18014398509481985K --iters 1 --warmup 0 --ucx-ref off"; do
    # shellcheck disable=SC2086 # the option and its value are two words
    if coll3 $bad; then
        echo "uccl_perf coll accepted $bad"; exit 1
    fi
    grep -q 'uccl_perf coll: ' "$tmp/out" || { cat "$tmp/out"; echo "coll $bad: no message"; exit 1; }
done
n=$((n + 1))
echo "uccl_perf: $((n + 1)) passed, 0 failed"
