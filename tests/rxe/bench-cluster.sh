#!/bin/bash
# bench-cluster.sh: libuccl across two hosts against Open MPI between the same
# two hosts, in one boot of the two-VM cluster (tests/vm/cluster.sh: node0 and
# node1, rxe0 on each one's virtio NIC). One rank per node; uccl_perf p2p over
# verbs, with Open MPI's same pattern in the same job as the reference, once
# over UCX (pml ucx, osc ucx: UCX's rc_verbs on rxe0, ud_verbs only for UCX's
# connection setup, with UCX_UD_VERBS_ETH_DGID_CHECK=n: with that check, UCX
# 1.13's UD drops what rxe delivers and dies with "UD endpoint ...: unhandled
# timeout error"; tcp is no auxiliary transport there) and once over its tcp
# path (btl tcp, pml ob1); and uccl over tcp against Open MPI over tcp.
# Prints uccl_perf's tables (medians of BENCH_ROUNDS, uccl and Open MPI
# alternating, ratio = uccl / MPI) and a summary with the spread of the
# per-round ratios, and writes their JSON to BENCH_OUT (default: the build
# directory). A report, not a timed test; an MPI path that does not run reads
# "failed" with its error.
# Run from the build directory: ../tests/rxe/bench-cluster.sh
#   BENCH_OPS (send write), BENCH_SIZES (65536 1048576; one uccl_perf job per
#   size), BENCH_ROUNDS (3), BENCH_MIB (16: MiB per timed phase, at least one
#   window of 16), BENCH_PATHS (ucx tcp tcp-tcp), BENCH_RAW (1: perftest and
#   ucx_perftest once per size first, 64 MiB each), BENCH_X (NAME=VALUE words both ranks
#   get through mpirun -x, e.g. UCCL_VERBS_EAGER=64K)
# Exits 77 with the reason where this machine cannot boot the cluster.
here=$(cd "$(dirname "$0")" && pwd)
top_srcdir=$(cd "$here/../.." && pwd)
builddir=$(cd "${top_builddir:-.}" && pwd)
if [ -z "${VM_NODE:-}" ]; then
	cluster=$top_srcdir/tests/vm/cluster.sh
	why=$("$cluster" --check) || { echo "bench-cluster: $why"; exit 77; }
	out=$(cd "${BENCH_OUT:-$builddir}" && pwd)
	echo "# host: $(uptime)"
	cd "$builddir" && env top_builddir="$builddir" BENCH_OUT="$out" RXE_VM_TIMEOUT="${RXE_VM_TIMEOUT:-1500}" \
		RXE_VM_SHARE="$top_srcdir:$out" "$cluster" "$here/bench-cluster.sh"
	rc=$?
	echo "# host: $(uptime)"
	exit $rc
fi
perf=$builddir/tools/uccl_perf
[ -x "$perf" ] || { echo "bench-cluster: $perf not built (needs MPI and tools/uccl_perf)"; exit 1; }
out=${BENCH_OUT:-$builddir}
ops=${BENCH_OPS:-send write}
# One rank per node (rank 0 on node0, rank 1 on node1), unbound as in bench.sh.
mpiexec="mpirun --hostfile $VM_HOSTFILE --map-by node -np 2 --bind-to none"
for x in ${BENCH_X:-}; do mpiexec="$mpiexec -x $x"; done
for n in node0 node1; do # as check.sh: a deeper backlog, fewer rxe retries
	c="sysctl -qw net.core.netdev_max_backlog=100000"
	if [ $n = "$VM_NODE" ]; then $c; else "$top_srcdir/tests/vm/agent.sh" $n "$c"; fi
done
echo "# two VMs, each its own kernel; rxe0 on each virtio NIC; uccl_perf rank 0 on node0, rank 1 on node1"
echo "# guest load: node0 $(cut -d' ' -f1-3 /proc/loadavg)"
# The raw references between the same two devices, one run each (rank 0's
# side on node0, the server on node1): perftest's ib_write_bw / ib_send_bw
# and ucx_perftest (UCT put_bw zero-copy over rc_verbs; UCP tag_bw with
# UCX_TLS=rc_verbs,ud_verbs:aux), each moving about 64 MiB; Gb/s (1e9 bit/s).
# (No -f for ucx_perftest: with it, its last line has no "Final:" label.
# ucx-final.awk reads that line's overall bandwidth, as bench.sh does.)
# The server starts on node1 through the launch agent, which in the emulated
# VMs took more than the 2 s waited at first (ucx_perftest: "connect()
# failed: Connection refused"): the client tries again, up to 3 times, 2 s
# apart, while it is refused and the server still runs. For ucx_perftest the
# "Final:" line read follows the figure, so that the column read can be
# checked against it.
raw() { # raw NAME SERVER-CMD CLIENT-CMD AWK-PROGRAM: run the pair, print the client's figure (awk sees s=$S)
	local try spid
	"$top_srcdir/tests/vm/agent.sh" node1 "timeout 120 $2" >/tmp/raw.srv 2>&1 &
	spid=$!
	for try in 1 2 3; do
		sleep 2
		# shellcheck disable=SC2086 # a command line
		timeout 120 $3 >/tmp/raw.out 2>&1
		grep -qi "connection refused" /tmp/raw.out && kill -0 "$spid" 2>/dev/null || break
		echo "#   $1: refused (try $try), again"
	done
	wait
	printf "%-30s %s\n" "$1" "$(awk -v s="$S" "$4" /tmp/raw.out)"
	grep -h "^Final:" /tmp/raw.out | sed 's/^/#   /'
	grep -qiE 'error|fatal' /tmp/raw.out /tmp/raw.srv && grep -hiE 'error|fatal' /tmp/raw.out /tmp/raw.srv | head -2
}
n_of() { local n=$(((64 << 20) / $1)); echo $((n < 32 ? 32 : n)); }
if [ "${BENCH_RAW:-1}" = 1 ]; then
	echo "## raw references across the VMs (Gb/s; 0 = it failed, error below)"
	pt='$1 == s { print $4; ok = 1 } END { if (!ok) print 0 }'
	ux=$(cat "$here/ucx-final.awk")
	g=$RXE_GID_INDEX
	for S in ${BENCH_SIZES:-65536 1048576}; do
		n=$(n_of $S) s=$S
		for op in write send; do
			raw "ib_${op}_bw $s" "ib_${op}_bw -d rxe0 -x $g -s $s -n $n -F --report_gbits" \
				"ib_${op}_bw -d rxe0 -x $g -s $s -n $n -F --report_gbits node1" "$pt"
		done
		UCX_IB_GID_INDEX=$g raw "ucx put_bw zcopy $s" "ucx_perftest -d rxe0:1 -x rc_verbs -p 13337" \
			"ucx_perftest node1 -p 13337 -d rxe0:1 -x rc_verbs -t put_bw -D zcopy -s $s -n $n -w 16" "$ux"
		UCX_TLS=rc_verbs,ud_verbs:aux,self UCX_NET_DEVICES=rxe0:1 UCX_IB_GID_INDEX=$g \
			UCX_UD_VERBS_ETH_DGID_CHECK=n \
			raw "ucx tag_bw $s" "ucx_perftest -p 13338" \
			"ucx_perftest node1 -p 13338 -t tag_bw -s $s -n $n -w 16" "$ux"
	done
fi
sizes=${BENCH_SIZES:-65536 1048576}
echo "# summary lines: op size uccl-Gb/s mpi-Gb/s ratio-of-medians [per-round ratio min-max]"
for path in ${BENCH_PATHS:-ucx tcp tcp-tcp}; do
	case $path in
	ucx) tp=verbs mca="--mca pml ucx --mca osc ucx --mca btl self -x UCX_TLS=rc_verbs,ud_verbs:aux,self -x UCX_NET_DEVICES=rxe0:1 -x UCX_UD_VERBS_ETH_DGID_CHECK=n" ;;
	tcp) tp=verbs mca="--mca pml ob1 --mca btl self,tcp --mca osc pt2pt" ;;
	tcp-tcp) tp=tcp mca="" ;; # uccl_perf pins the reference to btl tcp itself
	esac
	for op in $ops; do
		for s in $sizes; do
			echo "## uccl over $tp, Open MPI over $path: $op $s"
			iters=$(((${BENCH_MIB:-16} << 20) / (s * 16)))
			json=$out/cluster-$tp-$path-$op-$s.json
			# shellcheck disable=SC2086 # option words
			timeout 600 $mpiexec $mca "$perf" p2p --transport $tp --op "$op" --min "$s" --max "$s" \
				--iters $((iters < 1 ? 1 : iters)) --window 16 --warmup 1 \
				--rounds "${BENCH_ROUNDS:-3}" --json "$json" >/tmp/bench.out 2>&1
			rc=$?
			grep -v '^\[uccl' /tmp/bench.out | grep -E '^ *[0-9]|size' || true
			[ $rc = 0 ] || { echo "failed (exit $rc):"; tail -8 /tmp/bench.out; continue; }
			python3 -c 'import json, sys
for r in json.load(open(sys.argv[1]))["rows"]:
    print("summary %s %s %d %.4f %.4f %.2f [%.2f-%.2f]" % (sys.argv[2], sys.argv[3], r["size"], 8 * r["uccl_gbps"],
          8 * r["ref_gbps"], r["ratio"], r.get("ratio_min", 0), r.get("ratio_max", 0)))' "$json" "$path" "$op"
		done
	done
done
echo "# guest load: node0 $(cut -d' ' -f1-3 /proc/loadavg)"
