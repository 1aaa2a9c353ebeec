#!/bin/bash
# Build and run every test libuccl has on a machine without GPU or RDMA NIC:
#  0. the include rules of docs/LAYERS.md (scripts/check-layers.sh)
#  1. -Werror build, make check (unit, transport, MPI, example tests)
#  2. ASan+UBSan build, make check again, less the host-only tests (host_only
#     below) that step 5 runs under ASan on the same code
#  3. HIP backend build (compile and link only: no AMD GPU here)
#  4. test-only fake GPU backend build (--enable-fake-gpu: two "GPUs" whose
#     memory is host shared memory), make check: gpu_ipc and the GPU tests
#     run there (transport logic only, no real GPU involved); the host-only
#     tests, which steps 1 and 5 run, are left out here
#  5. the same fake GPU build with ASan+UBSan and without libcrypto's headers
#     (loaded at run time, as on a machine without libssl-dev), make check again
#  6. verbs tests inside the project's Soft-RoCE VM (tests/vm/run.sh; where
#     this machine cannot boot it, the cases count as skipped, with the reason),
#     one loop of the small cases, the large t_p2p case at 16 MiB
#  7. GPU memory over verbs in that VM, on the fake GPU build of step 4
#     (staging and GPUDirect paths)
#  8. the two-VM cluster suite (tests/rxe/check-cluster.sh: mpirun across
#     two Soft-RoCE VMs, each its own kernel; node loss and link cut)
#  9. libFuzzer harnesses of tests/fuzz (clang), FUZZ_SECONDS each (default
#     30; the later ones, shm ring, notification and gpu_ipc records,
#     FUZZ_SHORT_SECONDS, default 20), one per core at a time
# Ends with one line "N passed, N failed, N skipped" over all of them.
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
jobs=$(nproc 2>/dev/null || echo 2)
cd "$top"
fail=0
step() { echo; echo "=== $* ($(date +%T))"; }
slowest() { # slowest BUILD_DIR: the 6 slowest tests of its make check (tests/driver.sh times each)
    echo "slowest tests in $1:"
    grep -rh --include='*.log' '^# test time: ' "$1" 2>/dev/null | sed 's/^# test time: //' |
        sort -rn | head -6 | sed 's/^/  /'
}
# FI_PROVIDER: libfabric's psm2 provider (Omni-Path), probed when an engine
# opens ofi without a named provider (uccl_info does), leaves libpsm2 in a
# state that makes LeakSanitizer's tracer crash at exit ("Tracer caught
# signal 11"); there is no Omni-Path hardware here, so the sanitizer runs
# leave psm2 out (a plain build probes it and exits cleanly).
sanitizer_env() { # run "$@" with the sanitizer settings of the ASan+UBSan builds
    FI_PROVIDER=${FI_PROVIDER:-^psm2} \
    ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
    LSAN_OPTIONS=suppressions=$top/tests/lsan.supp:print_suppressions=0 \
    UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 "$@"
}

steps_skipped=0
skip_step() { # skip_step WHY: a step that cannot run here counts as one skip in the summary
    echo "SKIP: $*"
    steps_skipped=$((steps_skipped + 1))
}
stop() { # stop WHY: a step that the rest depends on failed; still end with the summary line
    echo "stopped: $*"
    echo "0 passed, 1 failed, 0 skipped"
    exit 1
}

# The README's demo configures in the source tree; the builds below are out of
# tree, which configure refuses next to an in-tree configuration ("source
# directory already configured"). Clean it first: the demo rebuilds it.
if [ -f config.status ]; then
    step "make distclean (the source tree was configured in place, e.g. by the README's demo)"
    make distclean >/dev/null 2>&1 || rm -f config.status config.h uccl_build.h Makefile uccl.pc libtool
fi

step autogen
./autogen.sh >/dev/null 2>&1 || { ./autogen.sh; stop "autogen.sh failed"; }

# also a test of every make check below (counted there, with its self-test)
step "layer check (docs/LAYERS.md include rules)"
scripts/check-layers.sh || fail=1

build() { # build DIR CONFIGURE-ARGS...
    local dir=$1; shift
    mkdir -p "$dir" && (cd "$dir" && "$top/configure" --enable-werror "$@" >configure.out 2>&1 ||
        { tail -30 configure.out; exit 1; }) && make -C "$dir" -j"$jobs" >"$dir/make.out" 2>&1 ||
        { tail -40 "$dir/make.out"; return 1; }
}

# Tests that use host memory only and take no GPU branch (their sources name
# no GPU, their scripts set no GPU memory): the library code they run is the
# same sources in every build, except that a fake GPU build adds the gpu_ipc
# transport and src/gpu/fake*.c where the others have src/gpu/none.c. Each
# runs in full in the -Werror build (no GPU backend, no sanitizer) and in the
# fake GPU ASan build (GPU backend and gpu_ipc present, under ASan+UBSan), so
# the plain ASan build and the plain fake GPU build leave them out: the same
# checks on the same code, a third and fourth time (about 520 s of test time
# in the ASan build, 170 s in the fake GPU one, in the session 10 rehearsal).
# What stays in those two builds is what they alone check: the GPU tests'
# answers without a GPU backend, libcrypto linked (ASan) rather than loaded,
# and the GPU paths without a sanitizer (fake GPU). uccl_perf's test takes a
# GPU branch: the ASan build leaves it out (its no-GPU answers are checked by
# the -Werror build), the fake GPU build keeps it. A test added to this list
# must stay host-only. CI_EVERY_TEST=1 runs every test in every build.
host_only="tests/soak/t_soak tests/fault/fault-shm.sh tests/fault/fault-tcp.sh
    tests/fault/netloss.sh tests/fault/netfault.sh
    tests/mpi/lazy-coll-shm-np4.sh tests/mpi/lazy-coll-tcp-np4.sh
    tests/mpi/lazy-comm-shm-np4.sh tests/mpi/lazy-comm-tcp-np4.sh
    tests/mpi/p2p-shm-np2.sh tests/mpi/p2p-tcp-np2.sh tests/mpi/p2p-shm-np4.sh
    tests/mpi/p2p-tcp-np4.sh tests/mpi/p2p-ofi-shm-np2.sh tests/mpi/p2p-ofi-tcp-np2.sh
    tests/mpi/coll-shm-np3.sh tests/mpi/coll-shm-np4.sh tests/mpi/coll-shm-np5.sh
    tests/mpi/coll-tcp-np3.sh tests/mpi/coll-tcp-np5.sh tests/mpi/coll-ofi-shm-np3.sh
    tests/mpi/coll-ofi-tcp-np3.sh tests/mpi/coll-2host-np4.sh
    tests/mpi/comm-shm-np8.sh tests/mpi/comm-tcp-np3.sh tests/mpi/boot-tcp-np3.sh
    tests/mpi/boot-shm-np4.sh tests/mpi/boot-hosts-np4.sh
    tests/unit/test_tp_conformance tests/unit/test_close_inflight
    examples/check-collectives.sh examples/python/check-moe.sh
    examples/python/check-weight_bcast.sh examples/python/check-kv_cache.sh"
# Checks of the source tree alone (the include rules; the device header
# compiled by the host's compilers): the same in every build, so only the
# -Werror build runs them (check-layers.sh also ran as step 0).
source_only="scripts/check-layers.sh tests/gpu/check-device-header.sh"
# The slowest tests start first, so that no long one runs alone at the end
# (t_soak did for ~25 s in the fake GPU ASan build).
slow_first="tests/soak/t_soak tools/test_uccl_perf.sh tests/fault/fault-shm.sh python/check-pytest.sh"
check_tests() { # check_tests DIR [LEAVE-OUT...]: DIR's TESTS, slow_first first, without LEAVE-OUT
    local dir=$1 all t out=
    shift
    make -C "$dir" Makefile >/dev/null 2>&1 # brought up to date first: nothing else on stdout
    # shellcheck disable=SC2016 # $(TESTS) is make's, expanded by make
    all=$(printf 'ci-print-tests:\n\t@echo $(TESTS)\n' | make -s -C "$dir" -f Makefile -f - ci-print-tests)
    [ "${CI_EVERY_TEST:-0}" = 1 ] && set --
    for t in $slow_first $all; do
        case " $* $out " in *" $t "*) continue ;; esac
        case " $all " in *" $t "*) out="$out $t" ;; esac
    done
    echo "${out# }"
}
left_out() { # left_out DIR WHERE LIST...: say which tests of DIR's make check LIST leaves out
    local dir=$1 where=$2 t n=0 names=
    shift 2
    for t in $(check_tests "$dir"); do
        case " $* " in *" $t "*) ;; *) n=$((n + 1)) names="$names ${t##*/}" ;; esac
    done
    [ $n = 0 ] || echo "$dir leaves out $n tests, run on the same code in $where:$names"
}

clear_results() { # clear_results DIR: drop an earlier run's test results (.trs and its .log)
    # in a kept build tree, so that a test this run leaves out is not counted
    find "$1" -name '*.trs' -type f | while IFS= read -r trs; do rm -f "$trs" "${trs%.trs}.log"; done
}

step "build (-Werror)"
build build/ci || stop "the -Werror build failed"
grep -A12 'libuccl .* configured' build/ci/configure.out
step "make check (-Werror build)"
clear_results build/ci
make -C build/ci -j"$jobs" check TESTS="$(check_tests build/ci)" >build/ci/check.out 2>&1 || fail=1
tests/summary.sh build/ci || fail=1
slowest build/ci

step "build (ASan+UBSan)"
build build/asan --enable-sanitizers || stop "the ASan+UBSan build failed"
step "make check (ASan+UBSan build)"
# shellcheck disable=SC2086 # lists of test names, one word each
asan_tests=$(check_tests build/asan $host_only $source_only tools/test_uccl_perf.sh)
# shellcheck disable=SC2086
left_out build/asan "build/ci and build/fakegpu-asan" $asan_tests
clear_results build/asan
sanitizer_env make -C build/asan -j"$jobs" check TESTS="$asan_tests" >build/asan/check.out 2>&1 || fail=1
tests/summary.sh build/asan || fail=1
slowest build/asan

step "build (HIP backend, compile and link only)"
if [ -e /usr/include/hip/hip_runtime_api.h ]; then
    build build/hip --without-cuda --with-rocm || fail=1
else
    skip_step "HIP build: HIP headers not installed (libamdhip64-dev)"
fi

# The GPU tests (tests/gpu, test_gpu_fake) run for real only here: no GPU
# on this machine, so they run on the fake backend and say so.
fake_gpu="--without-cuda --without-rocm --enable-fake-gpu"
step "build (fake GPU backend)"
fake_built=0
# shellcheck disable=SC2086
build build/fakegpu $fake_gpu && fake_built=1 || fail=1
step "make check (fake GPU backend: gpu_ipc and the GPU tests on host memory)"
if [ $fake_built = 1 ]; then
    # shellcheck disable=SC2086 # lists of test names, one word each
    fake_tests=$(check_tests build/fakegpu $host_only $source_only)
    # shellcheck disable=SC2086
    left_out build/fakegpu "build/ci and build/fakegpu-asan" $fake_tests
    clear_results build/fakegpu
    make -C build/fakegpu -j"$jobs" check TESTS="$fake_tests" >build/fakegpu/check.out 2>&1 || fail=1
    tests/summary.sh build/fakegpu || fail=1
    slowest build/fakegpu
    grep -h -E '^(fake GPU backend|t_gpu_fault:)' build/fakegpu/tests/gpu/*.log | sort | uniq -c
fi

# This build also goes without libcrypto's headers (--without-libcrypto), as
# the GPU machine may: the setup's challenge-response then loads
# libcrypto.so.3 at run time, and its whole make check runs that way.
step "build (fake GPU backend, ASan+UBSan, libcrypto loaded at run time)"
fake_asan_built=0
# shellcheck disable=SC2086
build build/fakegpu-asan $fake_gpu --enable-sanitizers --without-libcrypto && fake_asan_built=1 || fail=1
step "make check (fake GPU backend, ASan+UBSan build)"
if [ $fake_asan_built = 1 ]; then
    # shellcheck disable=SC2086 # a list of test names, one word each
    fake_asan_tests=$(check_tests build/fakegpu-asan $source_only)
    # shellcheck disable=SC2086
    left_out build/fakegpu-asan "build/ci" $fake_asan_tests
    clear_results build/fakegpu-asan
    sanitizer_env make -C build/fakegpu-asan -j"$jobs" check TESTS="$fake_asan_tests" \
        >build/fakegpu-asan/check.out 2>&1 || fail=1
    tests/summary.sh build/fakegpu-asan || fail=1
    slowest build/fakegpu-asan
fi

rm -f build/ci/verbs.out build/fakegpu/verbs-gpu.out build/ci/cluster.out # counted below only when run now
step "verbs tests in the Soft-RoCE VM"
if grep -q '^check-verbs:' build/ci/Makefile 2>/dev/null; then
    # one loop of the small-size cases and a 16 MiB large case (make check-verbs alone:
    # two loops and 64 MiB) keep CI's time down; the other suites cover the rest
    CHECK_VERBS_LOOPS=${CHECK_VERBS_LOOPS:-1} CHECK_VERBS_MAX=${CHECK_VERBS_MAX:-$((16 << 20))} \
        make -C build/ci check-verbs >build/ci/verbs.out 2>&1 || fail=1
    tail -30 build/ci/verbs.out
else
    skip_step "verbs tests: no verbs support built (libibverbs-dev)"
fi

step "GPU memory over verbs in the Soft-RoCE VM (fake GPU backend)"
if grep -q '^check-verbs-gpu:' build/fakegpu/Makefile 2>/dev/null && [ $fake_built = 1 ]; then
    make -C build/fakegpu check-verbs-gpu >build/fakegpu/verbs-gpu.out 2>&1 || fail=1
    tail -8 build/fakegpu/verbs-gpu.out 2>/dev/null
else
    skip_step "GPU memory over verbs: no verbs support or no fake GPU build"
fi

# Two VMs, each its own kernel and rxe device, mpirun across them (5.5-8
# minutes on the shared 2-core machine; a hang is cut at 12); every case
# skipped, with the reason, where this machine cannot boot the cluster
# (tests/vm/cluster.sh --check).
step "two-VM cluster suite (mpirun across two Soft-RoCE VMs, node loss, link cut)"
if grep -q '^check-cluster:' build/ci/Makefile 2>/dev/null; then
    RXE_VM_TIMEOUT=${RXE_VM_TIMEOUT:-720} make -C build/ci check-cluster >build/ci/cluster.out 2>&1 || fail=1
    grep -E '^(ok|FAIL|SKIP|note:|rxe0 counters)|passed, .*failed' build/ci/cluster.out ||
        tail -30 build/ci/cluster.out
else
    skip_step "cluster suite: no verbs support built (libibverbs-dev)"
fi

# libFuzzer on every parser of peer bytes, each harness for FUZZ_SECONDS
# (default 30 s, the later ones 20 s), one per core at a time, on its committed
# seed corpus; a crash or leak fails CI.
rm -f build/fuzz/fuzz.out
fuzz_s=${FUZZ_SECONDS:-30} fuzz_short_s=${FUZZ_SHORT_SECONDS:-20}
step "fuzz (libFuzzer, clang, $fuzz_s s per harness, $fuzz_short_s s the later ones, $jobs at a time)"
if command -v clang >/dev/null 2>&1; then
    mkdir -p build/fuzz && (cd build/fuzz && "$top/configure" CC=clang --enable-werror --enable-fuzz \
        --disable-shared --without-cuda --without-rocm >configure.out 2>&1) &&
        make -C build/fuzz -j"$jobs" fuzz FUZZ_SECONDS="$fuzz_s" FUZZ_SHORT_SECONDS="$fuzz_short_s" \
            FUZZ_JOBS="$jobs" >build/fuzz/fuzz.out 2>&1 ||
        fail=1
    grep -E '^(PASS|FAIL)|passed, .*failed' build/fuzz/fuzz.out || tail -30 build/fuzz/fuzz.out
else
    skip_step "fuzz: clang is not installed (scripts/install-deps.sh installs it)"
fi

step "summary"
# one closing line over every suite: the automake runs plus the VM's own count
dirs="build/ci build/asan"
[ $fake_built = 1 ] && dirs="$dirs build/fakegpu"
[ $fake_asan_built = 1 ] && dirs="$dirs build/fakegpu-asan"
# shellcheck disable=SC2086
read -r p f k < <(tests/summary.sh $dirs | tail -1 | awk '{print $1, $3, $5}')
[ $fake_built = 1 ] && [ $fake_asan_built = 1 ] || f=$((f + 1)) # a build that failed counts
# the suites outside automake print their own "N passed, N failed[, N skipped]"
# (a missing line counts as one failure); each is listed, then added in
suite_counts() { # suite_counts NAME FILE
    local vp vf vk
    [ -f "$2" ] || return 0
    read -r vp vf vk < <(grep -E '^[0-9]+ passed, [0-9]+ failed' "$2" | tail -1 | awk '{print $1, $3, $5}')
    echo "$1: ${vp:-0} passed, ${vf:-1} failed, ${vk:-0} skipped"
    p=$((p + ${vp:-0})) f=$((f + ${vf:-1})) k=$((k + ${vk:-0}))
}
echo "automake builds ($dirs): $p passed, $f failed, $k skipped"
suite_counts "verbs in the VM" build/ci/verbs.out
suite_counts "GPU memory over verbs in the VM" build/fakegpu/verbs-gpu.out
suite_counts "two-VM cluster" build/ci/cluster.out
suite_counts "fuzz" build/fuzz/fuzz.out
k=$((k + steps_skipped)) # whole steps that could not run here
echo "$p passed, $f failed, $k skipped"
exit $fail
