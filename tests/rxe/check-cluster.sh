#!/bin/bash
# check-cluster.sh: libuccl across two hosts, each its own kernel: the
# two-VM cluster of tests/vm/cluster.sh (node0, node1; rxe0 on each one's
# virtio NIC), mpirun -np 4 = 2 VMs x 2 ranks through the cluster's launch
# agent. Cases: uccl_info on each node names its rxe device and the
# IPv4-mapped RoCE v2 GID; tests/mpi/t_p2p with the default transport
# choice (shm within a VM, verbs across: checked in the library's log), with
# shm,verbs only (so every cross-VM pair must go over verbs; with
# CLUSTER_ALL=1) and with UCCL_TRANSPORTS=tcp; tests/mpi/t_coll (every collective and algorithm, the
# hierarchical ones across the two real hosts); then faults that only a cluster shows (tests/vm/fault.sh,
# tests/fault/t_netfault over verbs): the link between the nodes cut
# mid-transfer (TIMEOUT or PEER_FAILED within UCCL_TIMEOUT_MS, a clean close,
# a new connection once the link is back) and, last, node1 lost mid-transfer
# (its QEMU killed mid-transfer and mid-allgather: the same error in time, and
# node0's other verbs connection goes on). `make check-cluster` calls it from the build
# directory; on the host it re-runs itself on node0 of the cluster. One line
# per case, then "N passed, N failed, N skipped" (every case skipped, with
# the reason, where the cluster cannot boot: tests/vm/cluster.sh --check).
here=$(cd "$(dirname "$0")" && pwd)
top_srcdir=$(cd "$here/../.." && pwd)
builddir=$(cd "${top_builddir:-.}" && pwd)
skip_all=""
if [ -z "${VM_NODE:-}" ]; then
	cluster=$top_srcdir/tests/vm/cluster.sh
	if skip_all=$("$cluster" --check); then
		cd "$builddir" && exec env top_builddir="$builddir" RXE_VM_SHARE="$top_srcdir" \
			RXE_VM_TIMEOUT="${RXE_VM_TIMEOUT:-900}" "$cluster" "$here/check-cluster.sh"
	fi
	skip_all=$(echo "$skip_all" | paste -sd ' ')
	echo "note: $skip_all"
fi

pass=0 fail=0 skip=0
out=${TMPDIR:-/tmp}/check-cluster.out
run() { # run NAME CMD...: exit 0 pass, 77 skip, else fail; one line per case
	local t0=$SECONDS rc
	if [ -n "$skip_all" ]; then skip=$((skip + 1)); echo "SKIP $1: no VM cluster here"; return; fi
	# CHECK_CLUSTER_ONLY=REGEX: run only the cases whose name matches (quick reruns)
	[ -z "${CHECK_CLUSTER_ONLY:-}" ] || echo "$1" | grep -Eq -- "$CHECK_CLUSTER_ONLY" || return 0
	"${@:2}" >"$out" 2>&1
	rc=$?
	case $rc in
	0) pass=$((pass + 1)); echo "ok   $1 ($((SECONDS - t0)) s)"
	   grep "^# [a-z]" "$out" | head -8 | sed 's/^/     /' ;;
	77) skip=$((skip + 1)); echo "SKIP $1"; tail -3 "$out" | sed 's/^/     /' ;;
	*) fail=$((fail + 1)); echo "FAIL $1 (exit $rc, $((SECONDS - t0)) s)"
	   grep -v '^ok ' "$out" | head -40 | sed 's/^/     /' ;;
	esac
}

info_names_gid() { # info_names_gid NODE IP: uccl_info there opens rxe0 with GID ::ffff:IP
	local cmd="UCCL_LOG_LEVEL=info $builddir/tools/uccl_info"
	if [ "$1" = "$VM_NODE" ]; then bash -c "$cmd"; else "$top_srcdir/tests/vm/agent.sh" "$1" "$cmd"; fi \
		>"$out.info" 2>&1
	cat "$out.info"
	grep "verbs: rxe0 port 1, RoCE, gid index [0-9]* (::ffff:$2)" "$out.info" >/dev/null
}

mpiexec="mpirun --hostfile ${VM_HOSTFILE:-} --bind-to none --mca btl self,vader,tcp"
# t_p2p across the VMs took 47-104 s at host loads 9-18 (run-mpi.sh's usual cap
# is 170 s): a cap of 300 s leaves room for a slower emulation, not for a hang
p2p() { # p2p TRANSPORTS: t_p2p on 4 ranks (0-1 on node0, 2-3 on node1), up to 1 MiB
	RUN_MPI_TIMEOUT=${RUN_MPI_TIMEOUT:-300} MPIEXEC=$mpiexec top_builddir=/ sh "$here/../mpi/run-mpi.sh" 4 "$1" \
		"$builddir/tests/mpi/t_p2p" --max-size 1048576
}
coll() { # coll TRANSPORTS: t_coll on 4 ranks (0-1 on node0, 2-3 on node1): every
	# collective and forced algorithm, hierarchical ones across real hosts
	RUN_MPI_TIMEOUT=${RUN_MPI_TIMEOUT:-300} MPIEXEC=$mpiexec top_builddir=/ sh "$here/../mpi/run-mpi.sh" 4 "$1" \
		"$builddir/tests/mpi/t_coll"
}
p2p_default() { # default transports; the log must show shm within a VM, verbs across
	UCCL_LOG_LEVEL=debug p2p "" >"$out.log" 2>&1
	local rc=$?
	grep -v '\] debug ' "$out.log"
	[ $rc = 0 ] || return $rc
	# "[uccl node0:PID file:line] debug connected to node1 pid N via verbs"
	sed -n 's/^\[uccl \([^:]*\):.* connected to \([^ ]*\) pid [0-9]* via \([a-z_-]*\).*/\1 \2 \3/p' \
		"$out.log" | sort | uniq -c | tee "$out.conns"
	awk '$2 == $3 && $4 != "shm" || $2 != $3 && $4 != "verbs" { bad = 1 }
	     $2 == $3 { same += $1 } $2 != $3 { across += $1 }
	     END { exit !(same > 0 && across > 0 && !bad) }' "$out.conns" ||
		{ echo "FAIL: expected shm within a VM and verbs across, and some of each (above)"; return 1; }
}

export UCCL_TIMEOUT_MS=${UCCL_TIMEOUT_MS:-30000}
# RC ACK timeout 4.3 s instead of 1.07 s: a loaded host stalls an emulated VM
# for over a second, and each spurious timeout retransmits everything in flight
# (the rxe retry paths that failed here at UCCL_VERBS_IB_TIMEOUT=18)
export UCCL_VERBS_IB_TIMEOUT=${UCCL_VERBS_IB_TIMEOUT:-20}
agent=$top_srcdir/tests/vm/agent.sh
fault=$top_srcdir/tests/vm/fault.sh
netfault=$builddir/tests/fault/t_netfault
fault_ms=8000 # UCCL_TIMEOUT_MS of the fault cases
# t_netfault times the error from the end of its last operation that
# completed; the fault comes after it, after fault.sh's round trip through the
# host (seconds, emulated), and an operation in flight is slow to fail
export NETFAULT_SLACK_MS=${NETFAULT_SLACK_MS:-15000}
node1_gone=""

wait_for() { # wait_for FILE SECONDS
	local n=0
	while [ ! -e "$1" ]; do
		n=$((n + 1))
		[ $n -gt $(($2 * 10)) ] && { echo "FAIL: no $1 within $2 s"; return 1; }
		sleep 0.1
	done
}

link_cut() { # t_netfault client on node0, server on node1, over verbs; the link cut mid-transfer
	local d rc spid cpid
	d=$(mktemp -d "$builddir/.cluster-fault.XXXXXX") || return 1
	UCCL_TRANSPORTS=verbs UCCL_TIMEOUT_MS=$fault_ms "$agent" node1 "exec $netfault server $d" &
	spid=$!
	wait_for "$d/addr" 60 || { kill $spid; return 1; }
	UCCL_TRANSPORTS=verbs UCCL_TIMEOUT_MS=$fault_ms "$netfault" client "$d" &
	cpid=$!
	wait_for "$d/go" 120 && "$fault" link off && echo "# link between node0 and node1 down mid-transfer" &&
		wait_for "$d/failed" $((fault_ms / 1000 + 60))
	rc=$?
	"$fault" link on && echo "# link up again"
	touch "$d/up"
	[ $rc = 0 ] || kill $cpid 2>/dev/null
	wait $cpid || rc=1
	touch "$d/quit"
	wait $spid || { echo "FAIL: the server on node1 exited with $?"; rc=1; }
	rm -rf "$d"
	return $rc
}

node_loss() { # node1's QEMU killed while node0 writes to one server there and runs allgathers
	# with another; node0's connection to a third server (on node0) goes on
	local d rc=0 s1 s2 b c1 c2 k
	d=$(mktemp -d "$builddir/.cluster-fault.XXXXXX") && mkdir "$d/rma" "$d/coll" "$d/b" || return 1
	UCCL_TRANSPORTS=verbs UCCL_TIMEOUT_MS=$fault_ms "$agent" node1 "exec $netfault server $d/rma" &
	s1=$!
	# the agent carries UCCL_* only: NETFAULT_OP goes in the command (without
	# it the server there sent a descriptor instead of joining the allgather,
	# and the client's first allgather could never finish)
	UCCL_TRANSPORTS=verbs UCCL_TIMEOUT_MS=$fault_ms \
		"$agent" node1 "NETFAULT_OP=allgather exec $netfault server $d/coll" &
	s2=$!
	# the survivor: a process on node0 that counts as another host, so that
	# its connections are verbs too (over rxe0's loopback); both clients write the
	# same pattern there at the same stages, so their round trips cannot disturb each other
	UCCL_TRANSPORTS=verbs UCCL_HOST_ID=node0-survivor "$netfault" server "$d/b" &
	b=$!
	if ! wait_for "$d/rma/addr" 60 || ! wait_for "$d/coll/addr" 60 || ! wait_for "$d/b/addr" 60; then
		kill $s1 $s2 $b
		return 1
	fi
	(wait_for "$d/rma/go" 120 && wait_for "$d/coll/go" 120 && "$fault" kill node1 &&
		echo "# node1 killed mid-transfer and mid-allgather") &
	k=$!
	UCCL_TRANSPORTS=verbs UCCL_TIMEOUT_MS=$fault_ms timeout 300 "$netfault" client-loss "$d/rma" "$d/b" \
		> "$d/c1.out" 2>&1 &
	c1=$!
	NETFAULT_OP=allgather UCCL_TRANSPORTS=verbs UCCL_TIMEOUT_MS=$fault_ms timeout 300 \
		"$netfault" client-loss "$d/coll" "$d/b" > "$d/c2.out" 2>&1 &
	c2=$!
	wait $c1 || rc=1
	sed 's/^# /# write\/read: /' "$d/c1.out"
	wait $c2 || rc=1
	sed 's/^# /# allgather: /' "$d/c2.out"
	node1_gone=1
	wait $k || rc=1
	kill $s1 $s2 2>/dev/null # their dbclients wait on a host that is gone
	touch "$d/b/quit"
	wait $b || { echo "FAIL: the survivor's server exited with $?"; rc=1; }
	rm -rf "$d"
	return $rc
}
run "uccl_info on node0 names rxe0 and GID ::ffff:192.0.2.11" info_names_gid node0 192.0.2.11
run "uccl_info on node1 names rxe0 and GID ::ffff:192.0.2.12" info_names_gid node1 192.0.2.12
if [ -z "$skip_all" ] && [ ! -x "$builddir/tests/mpi/t_p2p" ]; then
	skip_all="tests/mpi/t_p2p not built (needs MPI)"
fi
run "t_p2p np=4 across 2 VMs, default transports (shm within a VM, verbs across)" p2p_default
# shm,verbs alone: the default case above already fails unless every pair
# across the VMs went over verbs; CLUSTER_ALL=1 runs it too (44 s in CI)
if [ "${CLUSTER_ALL:-0}" = 1 ]; then
	run "t_p2p np=4 across 2 VMs, UCCL_TRANSPORTS=shm,verbs" p2p shm,verbs
fi
run "t_p2p np=4 across 2 VMs, UCCL_TRANSPORTS=tcp" p2p tcp
run "t_coll np=4 across 2 VMs, default transports (hierarchical algorithms across the hosts)" coll ""
if [ -z "$skip_all" ] && [ ! -x "$netfault" ]; then
	skip_all="tests/fault/t_netfault not built"
fi
run "link cut mid-transfer over verbs: TIMEOUT or PEER_FAILED in time, clean close, new connection after" link_cut
run "node1 lost mid-transfer and mid-allgather over verbs: TIMEOUT or PEER_FAILED in time, node0's other connection goes on" node_loss
if [ -z "$skip_all" ] && [ $fail != 0 ]; then # what rxe saw: retries, drops, errors
	for n in node0 $([ -z "$node1_gone" ] && echo node1); do
		c='cd /sys/class/infiniband/rxe0/ports/1/hw_counters && grep -v "^0$" -H -- * | tr "\n" " "'
		if [ $n = "$VM_NODE" ]; then echo "rxe0 counters on $n: $(bash -c "$c")"
		else echo "rxe0 counters on $n: $("$top_srcdir/tests/vm/agent.sh" $n "$c" 2>/dev/null)"; fi
	done
fi
echo "$pass passed, $fail failed, $skip skipped"
[ $fail = 0 ]
