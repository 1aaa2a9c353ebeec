#!/bin/bash
# check.sh: the verbs test suite on real Soft-RoCE devices. On the host it
# re-runs itself inside the rxe VM (tests/vm/run.sh); `make check-verbs` calls
# it from the build directory with top_builddir and MPIEXEC set. One line per
# case, then "N passed, N failed, N skipped"; exit 0 only when nothing failed.
# Where the VM cannot boot (tests/vm/run.sh --check says why), every case is
# reported skipped. Large sizes run once, small sizes several times
# (CHECK_VERBS_LOOPS, default 2), so that the whole run stays within a few
# minutes even in the emulated VM. CHECK_VERBS_MAX (bytes, default 64 MiB)
# caps the large t_p2p case; CI runs one loop and 16 MiB (scripts/test-all.sh). CHECK_VERBS_ONLY=REGEX runs only the cases
# whose name matches.
here=$(cd "$(dirname "$0")" && pwd)
top_srcdir=$(cd "$here/../.." && pwd)
builddir=$(cd "${top_builddir:-.}" && pwd)
. "$here/reexec.sh"
rxe_reexec "$here/check.sh" 900 MPIEXEC="${MPIEXEC:-}"

# Inside the VM. The veth pair hands every packet to the backlog queue of
# the receiving side (netdev_max_backlog, 1000 by default); the emulated CPU
# drains it slowly, so bursts of RDMA packets overflow it and rxe retries.
# rxe (Linux 6.1) mishandles some of those retries of RDMA READs: reads
# complete without their data, or a QP goes to error without an error
# completion. A deep backlog keeps the drops, hence the retries, rare.
[ -n "${RXE_SKIP:-}" ] || sysctl -qw net.core.netdev_max_backlog=100000 2>/dev/null ||
	echo "note: could not raise net.core.netdev_max_backlog; expect rxe retries"

pass=0 fail=0 skip=0
out=${TMPDIR:-/tmp}/check-verbs.out
run() {  # run NAME CMD...: exit 0 pass (+ one skip per "SKIP: " line), 77 skip, else fail
	rxe_case_skipped "$1" && return
	# CHECK_VERBS_ONLY=REGEX: run only the cases whose name matches (quick reruns)
	[ -z "${CHECK_VERBS_ONLY:-}" ] || echo "$1" | grep -Eq -- "$CHECK_VERBS_ONLY" || return 0
	local t0=$SECONDS rc
	"${@:2}" >"$out" 2>&1
	rc=$?
	case $rc in
	0) pass=$((pass + 1)) skip=$((skip + $(grep -c '^SKIP: ' "$out")))
	   echo "ok   $1 ($((SECONDS - t0)) s$(skips))" ;;
	77) skip=$((skip + 1)); echo "SKIP $1"; tail -3 "$out" | sed 's/^/     /' ;;
	*) fail=$((fail + 1)); echo "FAIL $1 (exit $rc, $((SECONDS - t0)) s)"
	   grep -v '^ok ' "$out" | head -40 | sed 's/^/     /' ;;
	esac
}
# run_flaky NAME CMD...: run, and once more if it failed, for a case with a
# rare failure (test_verbs_rails, "rail 1 down mid-transfer": about 1 run in
# 13, a rail 0 write timed out at 20 s, and once failed with a remote invalid
# request. With its 67 ms ACK timeout the live rail 0 retransmitted for
# nothing under load, into Soft-RoCE 6.1's retry path; the case now uses 0.54
# s as the others: tests/perf/results/cluster/s11. Kept until CI shows it
# clean over many runs). The first failure is printed and the case is
# reported FLAKY; failing twice fails it.
run_flaky() {
	local before=$fail
	run "$@"
	[ "$fail" -gt "$before" ] || return 0
	fail=$before
	echo "FLAKY $1: failed once (above); running it again"
	run "$1 (second run)" "${@:2}"
}
skips() {  # ", N cases skipped: WHY" from the "SKIP: NAME: WHY" lines of a run that passed
	local n why
	n=$(grep -c '^SKIP: ' "$out")
	why=$(grep -m1 '^SKIP: ' "$out" | sed 's/^SKIP: //')
	[ "$n" -gt 0 ] && echo ", $n cases skipped: $why"
}
skipped() { rxe_case_skipped "$1" || { skip=$((skip + 1)); echo "SKIP $1: $2"; }; }

export UCCL_TIMEOUT_MS=${UCCL_TIMEOUT_MS:-30000}
unit=$builddir/tests/unit
for qp in rc uc; do
	run "test_tp_conformance verbs $qp ($RXE_DEV <-> $RXE_DEV2)" env UCCL_VERBS_QP_TYPE=$qp \
		timeout 400 "$unit/test_tp_conformance" verbs
	# uc with a 32K bound on the bytes in flight per QP (UCCL_VERBS_INFLIGHT,
	# default none): every window of the 1000 operations, the 8 QPs and the
	# notified writes waits on it, so a bound that stalls a request shows
	inflight=; [ $qp = uc ] && inflight=32K
	run "test_tp_verbs $qp ($RXE_DEV <-> $RXE_DEV2)${inflight:+, UCCL_VERBS_INFLIGHT=$inflight}" \
		env UCCL_VERBS_QP_TYPE=$qp ${inflight:+UCCL_VERBS_INFLIGHT=$inflight} timeout 300 \
		"$unit/test_tp_verbs"
done

# two rails per engine: rxe0+rxe2 <-> rxe1+rxe3, striping, one rail, rail 1 down
info_rails() { # uccl_info opens both devices named, each a rail
	UCCL_NET_DEVICES=$RXE_DEV,$RXE_RAIL_DEV UCCL_LOG_LEVEL=info "$builddir/tools/uccl_info" 2>&1 |
		tee /dev/stderr | grep -q "verbs: $RXE_RAIL_DEV port 1, RoCE, gid index [0-9]* (::ffff:198.51.100.1), .*rail 1 of 2"
}
run "uccl_info names two rails ($RXE_DEV, ${RXE_RAIL_DEV:-?})" info_rails
run_flaky "test_verbs_rails (${RXE_DEV},${RXE_RAIL_DEV:-?} <-> ${RXE_DEV2},${RXE_RAIL_DEV2:-?})" \
	timeout 300 "$unit/test_verbs_rails"
# ofi over verbs;ofi_rxm (libfabric's verbs provider through rxm, both engines
# on the first rxe device): the conformance suite, ~35 s on 2 loaded cores; it sets
# FI_UNIVERSE_SIZE=16 (rxe refuses the CQ rxm sizes from the default 256).
# Skips (77) where libuccl was built without libfabric.
run "test_tp_conformance ofi_verbs (verbs;ofi_rxm)" timeout 120 "$unit/test_tp_conformance" ofi_verbs

mpidir=$builddir/tests/mpi
runmpi=$here/../mpi/run-mpi.sh
p2p() {  # p2p NP QP [ARGS...]: t_p2p over verbs, neighbouring ranks on different devices
	local np=$1 qp=$2
	shift 2
	env UCCL_VERBS_QP_TYPE="$qp" top_builddir=/ \
		sh "$runmpi" "$np" verbs "$here/rank-dev.sh" "$mpidir/t_p2p" "$@"
}
small=$((1 << 20)) # up to 1 MiB: chunk and page boundaries, several chunks in flight
loops=${CHECK_VERBS_LOOPS:-2}
large=${CHECK_VERBS_MAX:-$((64 << 20))}
if [ ! -x "$mpidir/t_p2p" ] || [ ! -f "$runmpi" ]; then
	skipped "tests/mpi over verbs" "tests/mpi/t_p2p not built here (needs MPI and the tests/mpi suite)"
else
	run "t_p2p np=2 verbs rc, sizes up to $((large >> 20)) MiB" p2p 2 rc --max-size "$large"
	for i in $(seq 1 "$loops"); do
		run "t_p2p np=4 verbs rc, sizes up to 1 MiB (run $i)" p2p 4 rc --max-size $small
	done
	for i in $(seq 1 "$loops"); do
		run "t_p2p np=2 verbs uc, sizes up to 1 MiB (run $i)" p2p 2 uc --max-size $small
	done
	run "t_p2p np=4 verbs uc, sizes up to 1 MiB" p2p 4 uc --max-size $small
	if [ -x "$mpidir/t_coll" ]; then
		# the collective suite (every op x algorithm, checked against Open MPI) over verbs,
		# neighbouring ranks on different devices
		run "t_coll np=3 verbs rc" env top_builddir=/ \
			sh "$runmpi" 3 verbs "$here/rank-dev.sh" "$mpidir/t_coll"
	else
		skipped "t_coll over verbs" "tests/mpi/t_coll not built here"
	fi
	if [ -x "$mpidir/t_peer_death" ]; then
		for qp in rc uc; do
			# a dead peer must show well before the (short) timeout
			run "t_peer_death np=2 verbs $qp" env UCCL_VERBS_QP_TYPE=$qp top_builddir=/ \
				UCCL_TIMEOUT_MS=10000 \
				sh "$runmpi" 2 verbs "$here/rank-dev.sh" "$mpidir/t_peer_death"
		done
	else
		skipped "t_peer_death over verbs" "tests/mpi/t_peer_death not built here"
	fi
	if [ -x "$builddir/tests/fault/t_fault" ]; then
		# the fault suite (issue 20): kill -9 and SIGSTOP mid send/recv, write, read,
		# writev and allgather; the survivor errs within UCCL_TIMEOUT_MS, its other
		# connection keeps working. 5 s: with the host loaded (CI beside other
		# builds), one-sided operations into the stopped peer took 2-3 s each in
		# the emulated VM, and 3 s ended one with TIMEOUT (session 21)
		run "t_fault np=2 verbs rc (kill -9, SIGSTOP)" env top_builddir=/ UCCL_TIMEOUT_MS=5000 \
			sh "$runmpi" 2 verbs "$here/rank-dev.sh" "$builddir/tests/fault/t_fault"
	else
		skipped "t_fault over verbs" "tests/fault/t_fault not built here"
	fi
fi
if [ -x "$builddir/tests/fault/t_netfault" ]; then
	run "netfault verbs (veth1 down mid-transfer, new connection after)" \
		env top_builddir="$builddir" UCCL_TIMEOUT_MS=3000 sh "$here/netfault-verbs.sh"
else
	skipped "netfault over verbs" "tests/fault/t_netfault not built here"
fi
echo "$pass passed, $fail failed, $skip skipped"
[ $fail = 0 ]
