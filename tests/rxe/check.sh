#!/bin/bash
# check.sh: the verbs test suite on real Soft-RoCE devices. On the host it
# re-runs itself inside the rxe VM (RXE_VM, default /work/shared/rxe-vm);
# `make check-verbs` calls it from the build directory with top_builddir and
# MPIEXEC set. Runs: tests/unit/test_tp_verbs (RC, UC), and the tests/mpi
# suite with UCCL_TRANSPORTS=verbs on 2 and 4 ranks, RC and UC. Exit 0 = pass.
here=$(cd "$(dirname "$0")" && pwd)
builddir=$(cd "${top_builddir:-.}" && pwd)
if [ -z "${RXE_DEV:-}" ]; then
	vm=${RXE_VM:-/work/shared/rxe-vm}/run-in-rxe-vm.sh
	if [ ! -x "$vm" ]; then
		echo "FAIL: the Soft-RoCE VM script $vm is missing (set RXE_VM)"; exit 1
	fi
	cd "$builddir" && exec env top_builddir="$builddir" MPIEXEC="${MPIEXEC:-}" \
		RXE_VM_TIMEOUT="${RXE_VM_TIMEOUT:-900}" "$vm" "$here/check.sh"
fi

pass=0 fail=0 skip=0
run() {  # run NAME CMD...: 0 pass, 77 skip, else fail
	echo "=== $1"
	"${@:2}" >/tmp/check-verbs.out 2>&1; local rc=$?
	case $rc in
	0) pass=$((pass + 1)); echo "ok   $1" ;;
	77) skip=$((skip + 1)); echo "SKIP $1"; tail -3 /tmp/check-verbs.out | sed 's/^/     /' ;;
	*) fail=$((fail + 1)); echo "FAIL $1 (exit $rc)"; tail -40 /tmp/check-verbs.out | sed 's/^/     /' ;;
	esac
}
skipped() { skip=$((skip + 1)); echo "SKIP $1: $2"; }

export UCCL_TIMEOUT_MS=${UCCL_TIMEOUT_MS:-30000}
unit=$builddir/tests/unit/test_tp_verbs
for qp in rc uc; do
	run "test_tp_verbs $qp ($RXE_DEV <-> $RXE_DEV2)" env UCCL_VERBS_QP_TYPE=$qp timeout 300 "$unit"
done

mpidir=$builddir/tests/mpi
runmpi=$here/../mpi/run-mpi.sh
if [ ! -x "$mpidir/t_p2p" ] || [ ! -f "$runmpi" ]; then
	skipped "tests/mpi over verbs" "tests/mpi/t_p2p not built here (needs MPI and the tests/mpi suite)"
else
	for qp in rc uc; do
		for np in 2 4; do
			if [ $qp = uc ]; then
				skipped "t_p2p np=$np uc" "t_p2p includes RDMA reads, which need RC (UC carries writes only)"
				continue
			fi
			run "t_p2p np=$np verbs $qp" env UCCL_VERBS_QP_TYPE=$qp top_builddir=/ \
				sh "$runmpi" $np verbs "$here/rank-dev.sh" "$mpidir/t_p2p"
		done
	done
	if [ -x "$mpidir/t_peer_death" ]; then
		run "t_peer_death np=2 verbs rc" env top_builddir=/ \
			sh "$runmpi" 2 verbs "$here/rank-dev.sh" "$mpidir/t_peer_death"
	fi
fi
echo "verbs: $pass passed, $fail failed, $skip skipped"
[ $fail = 0 ]
