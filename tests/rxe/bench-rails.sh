#!/bin/bash
# bench-rails.sh: uccl_perf p2p over verbs with two rails per engine
# (rank 0 on rxe0+rxe2, rank 1 on rxe1+rxe3: veth0-veth1 and veth2-veth3)
# against one rail (rxe0 <-> rxe1), taking turns in one VM boot (the order
# flips every round); prints per op and size the median in Gb/s of each, the
# spread (min-max) and the ratio of the medians. A report, not a timed test.
# The emulated VM is slow (Soft-RoCE is the guest CPU's work, and the guest's
# 2 vCPUs are host threads): each run moves about BENCH_BYTES.
# Run from the build directory: ../tests/rxe/bench-rails.sh
#   BENCH_SIZES (default "4194304 16777216 67108864"), BENCH_OPS ("write read
#   send"), BENCH_ROUNDS (3), BENCH_BYTES (16 MiB per run, at least one
#   transfer), BENCH_WARMUP (untimed windows, 0), BENCH_RUN_TIMEOUT (s per
#   run, 300), RXE_VM_CPUS (the VM's vCPUs, default 2)
#   BENCH_RPS=1 (at least 8 vCPUs): each veth's receive work on a vCPU of its
#   own (RPS: veth1, veth0, veth3, veth2 on vCPUs 1-4) and the ranks on vCPUs
#   5 and up. Without it a veth hands each packet to the backlog of the vCPU
#   that sent it, and rxe's requester, responder and completer all run where
#   the packet is handled, so both rails' Soft-RoCE work follows the posting
#   rank's vCPU.
#   BENCH_SPAN=1: a run is one job over one op and every size (below), and each
#   op gets a row "all" too (a run's bytes over its time);
#   BENCH_AB=PATH: then this uccl_perf against another (below; BENCH_AB_ONLY=1:
#   that alone)
#   BENCH_MTU=N: the four veths' MTU first (9000: a 4096-byte RoCE MTU;
#   rxe follows its netdev's MTU), 1500 again at the end; each table's
#   first run prints libuccl's line for each rail (its MTU, QPs per rail)
#   BENCH_PROBE=1: first one 2-rail write of 2 x 64 MiB (BENCH_PROBE_BYTES in
#   all) with the guest's CPU time per vCPU (user, system, softirq) and the
#   busiest threads (tests/rxe/cpu-probe.sh); with BENCH_RPS=1 once before
#   RPS is set and once after
# The guest has a deep receive backlog (below; with the default 1000 the veth
# pairs dropped rxe's bursts). Unless the caller sets them,
# UCCL_VERBS_INFLIGHT=1M and UCCL_VERBS_IB_TIMEOUT=20: a bound on the bytes in
# flight per QP keeps what one RC retry resends (go-back-N) and the backlog's
# queue small, and a long ACK timeout keeps a slow emulated responder from
# looking dead. The retries column counts RC timeouts and sequence NAKs of
# all four devices during the row. tests/perf/results/cluster/rails/README.md
# has the measurements.
# Runs in the project's Soft-RoCE VM (tests/vm/run.sh); exits 77 with the
# reason where this machine cannot boot it.
here=$(cd "$(dirname "$0")" && pwd)
top_srcdir=$(cd "$here/../.." && pwd)
builddir=$(cd "${top_builddir:-.}" && pwd)
. "$here/reexec.sh"
rxe_reexec "$here/bench-rails.sh" 1500
[ -z "${RXE_SKIP:-}" ] || { echo "bench: $RXE_SKIP"; exit 77; }
[ -n "${RXE_RAIL_DEV:-}" ] || { echo "bench: this VM has no second rail"; exit 77; }
sysctl -qw net.core.netdev_max_backlog=100000 2>/dev/null # as check.sh: fewer rxe retries
sizes=${BENCH_SIZES:-4194304 16777216 67108864}
# write first, whatever the order given: its rows are the ones asked for
# first, and a run cut short by the VM's time keeps them
ops=$(printf '%s\n' ${BENCH_OPS:-write read send} | awk '$1 == "write" { print; next } { o[++n] = $1 }
	END { for (i = 1; i <= n; i++) print o[i] }' | paste -sd' ')
rounds=${BENCH_ROUNDS:-3}
bytes=${BENCH_BYTES:-16777216}
export UCCL_VERBS_INFLIGHT=${UCCL_VERBS_INFLIGHT:-1M} UCCL_VERBS_IB_TIMEOUT=${UCCL_VERBS_IB_TIMEOUT:-20}
perf=$builddir/tools/uccl_perf
mpiexec="mpirun --oversubscribe --allow-run-as-root --bind-to none --mca btl self,vader,tcp"
rps_on() { # veth1, veth0, veth3, veth2 take their packets on vCPUs 1-4, the ranks 5 and up
	local c=1 v
	for v in veth1 veth0 veth3 veth2; do
		printf '%x\n' $((1 << c)) >/sys/class/net/$v/queues/rx-0/rps_cpus || echo "bench: no RPS on $v"
		c=$((c + 1))
	done
	mpiexec="taskset -c 5-$(($(nproc) - 1)) $mpiexec"
	echo "# RPS: veth1 -> vCPU 1, veth0 -> 2, veth3 -> 3, veth2 -> 4; the ranks on vCPUs 5-$(($(nproc) - 1))"
}
rps=${BENCH_RPS:-0}
if [ -n "${BENCH_MTU:-}" ]; then # rxe takes its port's active MTU from the netdev's (NETDEV_CHANGEMTU)
	for v in veth0 veth1 veth2 veth3; do ip link set "$v" mtu "$BENCH_MTU" || echo "bench: $v refuses mtu $BENCH_MTU"; done
	trap 'for v in veth0 veth1 veth2 veth3; do ip link set "$v" mtu 1500; done' EXIT
fi
[ "$rps" = 1 ] && [ "$(nproc)" -lt 8 ] && { echo "# BENCH_RPS=1 needs 8 vCPUs: left off"; rps=0; }
[ -x "$perf" ] || { echo "bench: $perf not built (needs MPI and tools/uccl_perf)"; exit 1; }
dev0=$RXE_DEV dev1=$RXE_DEV2

# run RAILS OPS MIN MAX W: one uccl_perf job, each op of the comma list OPS
# in turn, sizes MIN..MAX (doubling), W transfers each; prints "op size Gb/s"
# per row (from its us/op column: the GB/s one has 3 decimals), nothing when
# it failed (its last lines go to stderr)
run() {
	local d0=$dev0 d1=$dev1
	[ "$1" = 2 ] && d0=$dev0,$RXE_RAIL_DEV d1=$dev1,$RXE_RAIL_DEV2
	UCCL_LOG_LEVEL=${UCCL_LOG_LEVEL:-info} RXE_DEV=$d0 RXE_DEV2=$d1 timeout "${BENCH_RUN_TIMEOUT:-300}" $mpiexec -np 2 "$here/rank-dev.sh" "$perf" p2p \
		--transport verbs --op "$2" --min "$3" --max "$4" --iters 1 --window "$5" --warmup "${BENCH_WARMUP:-0}" \
		--no-ref >/tmp/uccl.out 2>&1 || tail -5 /tmp/uccl.out >&2
	# once per setting: what libuccl made of the devices (rank 0's rails: MTU, QPs per rail)
	local say="$1 ${UCCL_VERBS_NUM_QPS:-} $(cat /sys/class/net/veth0/mtu)"
	[ "$say" = "${said:-}" ] || grep -m 2 "verbs: rxe.* mtu " /tmp/uccl.out | sed 's/^/#   /' >&2
	said=$say
	awk -v w="$5" '/^# uccl_perf p2p --op / { op = $5; sub(/:$/, "", op) }
		/^ +[0-9]+ +[0-9.]+ +[0-9.]+ / && $3 > 0 { printf "%s %s %.4f\n", op, $1, 8 * $1 / ($3 * 1e3) }' /tmp/uccl.out
}
gbps() {  # gbps RAILS OP SIZE: uccl_perf's rate in Gb/s over 1 or 2 rails, about $bytes moved; 0 if it failed
	local w=$(( bytes / $3 ))
	[ $w -lt 1 ] && w=1
	run "$1" "$2" "$3" "$3" $w | awk '{ v = $3 } END { print v + 0 }'
}
retries() { # RC retransmission timeouts and NAKs so far, all four devices
	cat /sys/class/infiniband/rxe[0-3]/ports/1/hw_counters/{completer_retry_err,rcvd_seq_err} 2>/dev/null |
		awk '{ n += $1 } END { print n + 0 }'
}
spread() { printf '%s\n' "$@" | awk '$1 > 0' | sort -g | awk 'NR == 1 { lo = $1 } { hi = $1 } END { printf "%s-%s", lo, hi }'; }
median() { printf '%s\n' "$@" | awk '$1 > 0' | sort -g | awk '{ v[NR] = $1 } END {
	if (NR == 0) print 0; else if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

. "$here/cpu-probe.sh"
probe() { bytes=${BENCH_PROBE_BYTES:-134217728} cpu_probe gbps 2 write $((${BENCH_PROBE_BYTES:-134217728} / 2)); }
ab_only=${BENCH_AB_ONLY:-0} # 1: the A/B below only (after an earlier table in this boot)
[ "${BENCH_PROBE:-0}" = 1 ] && [ "$ab_only" = 0 ] && probe
[ "$rps" = 1 ] && rps_on && [ "${BENCH_PROBE:-0}" = 1 ] && [ "$ab_only" = 0 ] && probe
echo "# $(nproc) vCPUs; $rounds rounds per row, one and two rails in turns; ~$((bytes >> 20)) MiB per run;" \
	"UCCL_VERBS_INFLIGHT=$UCCL_VERBS_INFLIGHT UCCL_VERBS_IB_TIMEOUT=$UCCL_VERBS_IB_TIMEOUT" \
	"UCCL_VERBS_NUM_QPS=${UCCL_VERBS_NUM_QPS:-default} veth MTU $(cat /sys/class/net/veth0/mtu); Gb/s"
printf "%-6s %9s %8s %8s %6s  %-15s %-15s %s   %s\n" op size "1 rail" "2 rails" ratio "spread 1" "spread 2" retries "runs: 1 rail | 2 rails"
# BENCH_SPAN=1: one job per run covers every size from the smallest to the
# largest of BENCH_SIZES (one transfer each) of one op, so a round costs one
# launch per setting and op instead of one per size (a launch of two ranks
# costs seconds in the emulated VM); an op's rows print when its rounds end
declare -A one two
lo=$(printf '%s\n' $sizes | sort -n | head -1) hi=$(printf '%s\n' $sizes | sort -n | tail -1)
span() { # span RAILS [SLOT]: append this run's figures (ops $span_ops) to one["op size"] or two["op size"]
	local o sz v
	run "$1" "$(echo $span_ops | tr ' ' ,)" "$lo" "$hi" 1 >/tmp/span.out # (no /dev/fd in the VM for a <(...))
	# and the run as a whole, "all": the bytes of the sizes in BENCH_SIZES over
	# the sum of their times (what one job of those transfers would take)
	awk -v want=" $sizes " 'index(want, " " $2 " ") && $3 > 0 { b[$1] += $2; t[$1] += $2 / $3 }
		END { for (o in b) printf "%s all %.4f\n", o, b[o] / t[o] }' /tmp/span.out >>/tmp/span.out
	while read -r o sz v; do
		if [ "${2:-$1}" = 1 ]; then one["$o $sz"]+=" $v"; else two["$o $sz"]+=" $v"; fi
	done </tmp/span.out
	# each run as it ends, so that a run cut short by the VM's time keeps what it had
	echo "#   $(date -u +%T) ${2:-$1}: $(awk -v want=" $sizes " 'index(want, " " $2 " ") { printf "%s %s %s  ", $1, $2, $3 }' /tmp/span.out)"
}
row() { # row OP SIZE RETRIES SECONDS [LABEL]: the table's line from one["OP SIZE"] and two["OP SIZE"]
	local m1 m2 a b
	read -ra a <<<"${one[$1 $2]:-0}"; read -ra b <<<"${two[$1 $2]:-0}"
	m1=$(median "${a[@]}") m2=$(median "${b[@]}")
	printf "%-6s %9s %8s %8s %6s  %-15s %-15s %s   %s | %s\n" "${5:-$1}" "$2" "$m1" "$m2" \
		"$(awk -v a="$m1" -v b="$m2" 'BEGIN { if (a > 0) printf "%.2f", b / a; else print "-" }')" \
		"$(spread "${a[@]}")" "$(spread "${b[@]}")" "$3" "${a[*]}" "${b[*]}"
	echo "#   $4 s for the row"
}
if [ "$ab_only" = 1 ]; then
	:
elif [ "${BENCH_SPAN:-0}" = 1 ]; then
	for span_ops in $ops; do
		r0=$(retries) t0=$SECONDS
		for r in $(seq "$rounds"); do
			if [ $((r % 2)) = 1 ]; then span 1; span 2; else span 2; span 1; fi
		done
		for s in $sizes all; do row "$span_ops" "$s" $(( $(retries) - r0 )) $((SECONDS - t0)); done
	done
else
	for op in $ops; do
		for s in $sizes; do
			one=() two=() r0=$(retries) t0=$SECONDS
			for r in $(seq "$rounds"); do
				if [ $((r % 2)) = 1 ]; then one["$op $s"]+=" $(gbps 1 "$op" "$s")"; two["$op $s"]+=" $(gbps 2 "$op" "$s")"
				else two["$op $s"]+=" $(gbps 2 "$op" "$s")"; one["$op $s"]+=" $(gbps 1 "$op" "$s")"; fi
			done
			row "$op" "$s" $(( $(retries) - r0 )) $((SECONDS - t0))
		done
	done
fi
# BENCH_AB=PATH (with BENCH_SPAN=1): then, over two rails, write (or the ops
# BENCH_AB_OPS: one unless PATH takes a list), this uccl_perf ("2 rails"
# column) against the one at PATH ("1 rail" column), in turns
if [ -n "${BENCH_AB:-}" ] && [ "${BENCH_SPAN:-0}" = 1 ]; then
	ops=${BENCH_AB_OPS:-write} span_ops=$ops
	echo "# A/B over two rails: \"1 rail\" = $BENCH_AB, \"2 rails\" = $perf"
	one=() two=() r0=$(retries) t0=$SECONDS this=$perf
	for r in $(seq "$rounds"); do
		for k in $((r % 2)) $(((r + 1) % 2)); do
			if [ "$k" = 1 ]; then perf=$BENCH_AB span 2 1; else perf=$this span 2 2; fi
		done
	done
	for op in $ops; do
		for s in $sizes all; do row "$op" "$s" $(( $(retries) - r0 )) $((SECONDS - t0)) "ab-$op"; done
	done
fi
