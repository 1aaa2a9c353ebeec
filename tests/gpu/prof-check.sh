# Sourced by the check-gpu-ipc-*.sh scripts: two fake-GPU processes under
# uccl_perf with gpu_ipc's micro profile (UCCL_GPU_IPC_PROF=1), and the
# copies each profile step counted. After sourcing: $perf, $tmp (removed at
# exit), fail=0; a missing mpirun skips (77).
perf=${top_builddir:-.}/tools/uccl_perf
ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" # as tests/mpi/run-mpi.sh
export ASAN_OPTIONS
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
command -v mpirun >/dev/null 2>&1 || { echo "SKIP: no mpirun"; exit 77; }
fail=0

env_on() { # env_on VAR=VAL...: exports each, and $xs names them for mpirun -x
    xs=""
    for kv in "$@"; do
        export "$kv"
        xs="$xs -x ${kv%%=*}"
    done
}
env_off() { # env_off VAR=VAL...: unsets what env_on exported
    for kv in "$@"; do unset "${kv%%=*}"; done
}
# run_p2p NAME OP WINDOW MIN MAX ITERS VAR=VAL...: uccl_perf p2p over
# gpu_ipc on GPU memory, 2 ranks, OP from MIN to MAX bytes with WINDOW in
# flight, ITERS timed windows, VAR=VAL... in both ranks' environment;
# output in $tmp/NAME, uccl_perf's status returned
run_p2p() {
    name=$1 op=$2 p2p_w=$3 p2p_min=$4 p2p_max=$5 p2p_iters=$6
    shift 6
    env_on "$@"
    st=0
    eval "timeout 120 ${MPIEXEC:-mpirun --oversubscribe} -np 2 $xs \"\$perf\" p2p --mem cuda --transport gpu_ipc \
        --op $op --min $p2p_min --max $p2p_max --window $p2p_w --iters $p2p_iters --no-ref" >"$tmp/$name" 2>&1 || st=$?
    env_off "$@"
    return $st
}
# run_small NAME OP WINDOW VAR=VAL...: OP at 4 KiB-16 KiB (3 sizes), WINDOW
# in flight, 3 windows, the profile on
run_small() {
    name=$1 op=$2 p2p_w=$3
    shift 3
    run_p2p "$name" "$op" "$p2p_w" 4K 16K 3 UCCL_GPU_IPC_PROF=1 "$@"
}
count() { # count FILE STEP: calls of STEP in the profiles of FILE (0: no such row)
    awk -v s="$2" 'index($0, "gpu_ipc prof") && index($0, ": " s " ") { n += $(NF - 2) } END { print n + 0 }' "$1"
}
# skip_no_gpu NAME: exits 77 where run NAME found no GPU (a CUDA/ROCm build without a device)
skip_no_gpu() {
    if grep -qE "needs a GPU|but no GPU here" "$tmp/$1"; then # uccl_perf p2p's words, then coll's
        echo "SKIP: uccl_perf --mem cuda finds no GPU here (a CUDA/ROCm build without a device)"
        exit 77
    fi
}
# expect NAME OP MIN MAX VAR=VAL...: run NAME OP VAR=VAL... (the sourcing
# script's), and the copies the profile step $kstep counted on both ranks are
# in [MIN, MAX]; leaves $n (those) and $c (copy-engine copies)
expect() {
    name=$1 op=$2 lo=$3 hi=$4
    shift 4
    if ! run "$name" "$op" "$@"; then
        skip_no_gpu "$name"
        cat "$tmp/$name"
        echo "FAIL: $name: uccl_perf $op over gpu_ipc ($*)"
        fail=1
        return
    fi
    n=$(count "$tmp/$name" "$kstep")
    c=$(($(count "$tmp/$name" copy) + $(count "$tmp/$name" "batch(per copy)")))
    echo "$name ($op $*): $n copies by $kstep, $c by the copy engines"
    if [ "$n" -lt "$lo" ] || [ "$n" -gt "$hi" ]; then
        cat "$tmp/$name"
        echo "FAIL: $name: $n copies by $kstep, expected $lo..$hi"
        fail=1
    fi
}
# expect_fail NAME PATTERN ARGS...: run NAME ARGS... (the sourcing
# script's) must fail and print a line matching PATTERN (a refused setting
# naming itself, a failed window's status); prints that line
expect_fail() {
    name=$1 pat=$2
    shift 2
    if run "$name" "$@"; then
        cat "$tmp/$name"
        echo "FAIL: $name: uccl_perf ($*) succeeded; it must fail"
        fail=1
    elif ! grep -q "$pat" "$tmp/$name"; then
        cat "$tmp/$name"
        echo "FAIL: $name: uccl_perf ($*) failed without a line matching '$pat'"
        fail=1
    else
        echo "$name: $(grep -m1 "$pat" "$tmp/$name")"
    fi
}
