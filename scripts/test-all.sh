#!/bin/bash
# Build and run every test libuccl has on a machine without GPU or RDMA NIC:
#  1. -Werror build, make check (unit, transport, MPI, example tests)
#  2. ASan+UBSan build, make check again
#  3. HIP backend build (compile and link only: no AMD GPU here)
#  4. verbs tests inside the Soft-RoCE VM (../shared/rxe-vm), when present
#  5. GPU memory over verbs in that VM, on the test-only fake GPU backend
#     (--enable-fake-gpu: staging and GPUDirect paths; no real GPU involved)
# Ends with one line "N passed, N failed, N skipped" over all of them.
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
jobs=$(nproc 2>/dev/null || echo 2)
cd "$top"
fail=0
step() { echo; echo "=== $*"; }

step autogen
./autogen.sh >/dev/null 2>&1 || { ./autogen.sh; exit 1; }

build() { # build DIR CONFIGURE-ARGS...
    local dir=$1; shift
    mkdir -p "$dir" && (cd "$dir" && "$top/configure" --enable-werror "$@" >configure.out 2>&1 ||
        { tail -30 configure.out; exit 1; }) && make -C "$dir" -j"$jobs" >"$dir/make.out" 2>&1 ||
        { tail -40 "$dir/make.out"; return 1; }
}

step "build (-Werror)"
build build/ci || exit 1
grep -A12 'libuccl .* configured' build/ci/configure.out
step "make check (-Werror build)"
make -C build/ci -j"$jobs" check >build/ci/check.out 2>&1 || fail=1
tests/summary.sh build/ci || fail=1

step "build (ASan+UBSan)"
build build/asan --enable-sanitizers || exit 1
step "make check (ASan+UBSan build)"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 LSAN_OPTIONS=suppressions=$top/tests/lsan.supp:print_suppressions=0 \
UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    make -C build/asan -j"$jobs" check >build/asan/check.out 2>&1 || fail=1
tests/summary.sh build/asan || fail=1

step "build (HIP backend, compile and link only)"
if [ -e /usr/include/hip/hip_runtime_api.h ]; then
    build build/hip --without-cuda --with-rocm || fail=1
else
    echo "skipped: HIP headers not installed (libamdhip64-dev)"
fi

step "verbs tests in the Soft-RoCE VM"
if [ -x ../shared/rxe-vm/run-in-rxe-vm.sh ] && grep -q '^check-verbs:' build/ci/Makefile 2>/dev/null; then
    make -C build/ci check-verbs >build/ci/verbs.out 2>&1 || fail=1
    tail -30 build/ci/verbs.out
else
    echo "skipped: no ../shared/rxe-vm or no verbs support built"
fi

step "GPU memory over verbs in the Soft-RoCE VM (fake GPU backend)"
if [ -x ../shared/rxe-vm/run-in-rxe-vm.sh ] && grep -q '^check-verbs:' build/ci/Makefile 2>/dev/null; then
    { build build/fakegpu --without-cuda --without-rocm --enable-fake-gpu &&
        make -C build/fakegpu check-verbs-gpu >build/fakegpu/verbs-gpu.out 2>&1; } || fail=1
    tail -8 build/fakegpu/verbs-gpu.out 2>/dev/null
else
    echo "skipped: no ../shared/rxe-vm or no verbs support built"
fi

step "summary"
# one closing line over every suite: the automake runs plus the VM's own count
read -r p f k < <(tests/summary.sh build/ci build/asan | tail -1 | awk '{print $1, $3, $5}')
if [ -f build/ci/verbs.out ]; then
    read -r vp vf vk < <(grep -E '^[0-9]+ passed, [0-9]+ failed' build/ci/verbs.out | tail -1 |
        awk '{print $1, $3, $5}')
    p=$((p + ${vp:-0})) f=$((f + ${vf:-1})) k=$((k + ${vk:-0}))
fi
if [ -f build/fakegpu/verbs-gpu.out ]; then
    read -r vp vf vk < <(grep -E '^[0-9]+ passed, [0-9]+ failed' build/fakegpu/verbs-gpu.out | tail -1 |
        awk '{print $1, $3, $5}')
    p=$((p + ${vp:-0})) f=$((f + ${vf:-1})) k=$((k + ${vk:-0}))
fi
echo "$p passed, $f failed, $k skipped"
exit $fail
