#!/bin/bash
# check-gpu.sh: GPU memory over verbs, on the test-only fake GPU backend
# (a build configured --without-cuda --without-rocm --enable-fake-gpu), in
# the Soft-RoCE VM: the staging path (UCCL_VERBS_GDR=off), the GPUDirect
# path (peermem; UCCL_VERBS_GDR_SYSROOT points at a fake sysfs tree with
# module/nvidia_peermem, rxe registers the fake "device" memory like host
# memory) and the overrides that cannot be met. `make check-verbs-gpu` calls
# it from the build directory. Ends with "N passed, N failed, N skipped"
# (every case skipped where the VM cannot boot: tests/vm/run.sh --check).
here=$(cd "$(dirname "$0")" && pwd)
top_srcdir=$(cd "$here/../.." && pwd)
builddir=$(cd "${top_builddir:-.}" && pwd)
. "$here/reexec.sh"
rxe_reexec "$here/check-gpu.sh" 300

[ -n "${RXE_SKIP:-}" ] || sysctl -qw net.core.netdev_max_backlog=100000 2>/dev/null || true
pass=0 fail=0 skip=0
out=${TMPDIR:-/tmp}/check-verbs-gpu.out
run() {  # run NAME CMD...: exit 0 pass (+ one skip per "SKIP: " line), 77 skip, else fail
	rxe_case_skipped "$1" && return
	local t0=$SECONDS rc
	"${@:2}" >"$out" 2>&1
	rc=$?
	case $rc in
	0) pass=$((pass + 1)) skip=$((skip + $(grep -c '^SKIP: ' "$out")))
	   echo "ok   $1 ($((SECONDS - t0)) s)"; grep '^SKIP: ' "$out" | sed 's/^/     /' ;;
	77) skip=$((skip + 1)); echo "SKIP $1"; tail -3 "$out" | sed 's/^/     /' ;;
	*) fail=$((fail + 1)); echo "FAIL $1 (exit $rc, $((SECONDS - t0)) s)"
	   grep -v '^ok ' "$out" | head -40 | sed 's/^/     /' ;;
	esac
}

export UCCL_TIMEOUT_MS=${UCCL_TIMEOUT_MS:-30000}
t=$builddir/tests/unit/test_verbs_gpu
sysroot=${TMPDIR:-/tmp}/fake-sys-peermem
[ -n "${RXE_SKIP:-}" ] || mkdir -p "$sysroot/module/nvidia_peermem" "${TMPDIR:-/tmp}/fake-sys-empty"
# staging with a 128K bound on the bytes in flight per QP (default none): the
# window case's granted windows, reads and staged sources all wait on it
run "test_verbs_gpu staging (UCCL_VERBS_GDR=off, UCCL_VERBS_INFLIGHT=128K)" \
	env UCCL_VERBS_GDR=off UCCL_VERBS_INFLIGHT=128K timeout 200 "$t"
run "test_verbs_gpu GPUDirect (UCCL_VERBS_GDR=peermem, fake nvidia_peermem)" \
	env UCCL_VERBS_GDR=peermem UCCL_VERBS_GDR_SYSROOT="$sysroot" timeout 200 "$t"
run "UCCL_VERBS_GDR=peermem without the module: engine refused" env UCCL_VERBS_GDR=peermem \
	UCCL_VERBS_GDR_SYSROOT="${TMPDIR:-/tmp}/fake-sys-empty" VERBS_GPU_EXPECT_REFUSED=1 "$t"
run "UCCL_VERBS_GDR=dmabuf (fake GPU exports none): engine refused" env UCCL_VERBS_GDR=dmabuf \
	VERBS_GPU_EXPECT_REFUSED=1 "$t"
echo "$pass passed, $fail failed, $skip skipped"
[ $fail = 0 ]
