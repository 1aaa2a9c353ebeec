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
ops=${BENCH_OPS:-write read send}
rounds=${BENCH_ROUNDS:-3}
bytes=${BENCH_BYTES:-16777216}
export UCCL_VERBS_INFLIGHT=${UCCL_VERBS_INFLIGHT:-1M} UCCL_VERBS_IB_TIMEOUT=${UCCL_VERBS_IB_TIMEOUT:-20}
perf=$builddir/tools/uccl_perf
mpiexec="mpirun --oversubscribe --allow-run-as-root --bind-to none --mca btl self,vader,tcp"
[ -x "$perf" ] || { echo "bench: $perf not built (needs MPI and tools/uccl_perf)"; exit 1; }
dev0=$RXE_DEV dev1=$RXE_DEV2

gbps() {  # gbps RAILS OP SIZE: uccl_perf's GB/s as Gb/s over 1 or 2 rails, about $bytes moved
	local d0=$dev0 d1=$dev1 w=$(( bytes / $3 ))
	[ "$1" = 2 ] && d0=$dev0,$RXE_RAIL_DEV d1=$dev1,$RXE_RAIL_DEV2
	[ $w -lt 1 ] && w=1
	rm -f /tmp/uccl.json
	RXE_DEV=$d0 RXE_DEV2=$d1 timeout "${BENCH_RUN_TIMEOUT:-300}" $mpiexec -np 2 "$here/rank-dev.sh" "$perf" p2p \
		--transport verbs --op "$2" --min "$3" --max "$3" --iters 1 --window $w --warmup "${BENCH_WARMUP:-0}" \
		--no-ref --json /tmp/uccl.json >/tmp/uccl.out 2>&1
	python3 -c 'import json; r = json.load(open("/tmp/uccl.json"))["rows"][0]; print("%.4f" % (8 * r["uccl_gbps"]))' 2>/dev/null ||
		{ tail -5 /tmp/uccl.out >&2; echo 0; }
}
retries() { # RC retransmission timeouts and NAKs so far, all four devices
	cat /sys/class/infiniband/rxe[0-3]/ports/1/hw_counters/{completer_retry_err,rcvd_seq_err} 2>/dev/null |
		awk '{ n += $1 } END { print n + 0 }'
}
spread() { printf '%s\n' "$@" | awk '$1 > 0' | sort -g | awk 'NR == 1 { lo = $1 } { hi = $1 } END { printf "%s-%s", lo, hi }'; }
median() { printf '%s\n' "$@" | awk '$1 > 0' | sort -g | awk '{ v[NR] = $1 } END {
	if (NR == 0) print 0; else if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

echo "# $(nproc) vCPUs; $rounds rounds per row, one and two rails in turns; ~$((bytes >> 20)) MiB per run;" \
	"UCCL_VERBS_INFLIGHT=$UCCL_VERBS_INFLIGHT UCCL_VERBS_IB_TIMEOUT=$UCCL_VERBS_IB_TIMEOUT; Gb/s"
printf "%-6s %9s %8s %8s %6s  %-15s %-15s %s   %s\n" op size "1 rail" "2 rails" ratio "spread 1" "spread 2" retries "runs: 1 rail | 2 rails"
for op in $ops; do
	for s in $sizes; do
		one=() two=() r0=$(retries)
		for r in $(seq "$rounds"); do
			if [ $((r % 2)) = 1 ]; then one+=("$(gbps 1 "$op" "$s")"); two+=("$(gbps 2 "$op" "$s")")
			else two+=("$(gbps 2 "$op" "$s")"); one+=("$(gbps 1 "$op" "$s")"); fi
		done
		m1=$(median "${one[@]}") m2=$(median "${two[@]}")
		printf "%-6s %9s %8s %8s %6s  %-15s %-15s %s   %s | %s\n" "$op" "$s" "$m1" "$m2" \
			"$(awk -v a="$m1" -v b="$m2" 'BEGIN { if (a > 0) printf "%.2f", b / a; else print "-" }')" \
			"$(spread "${one[@]}")" "$(spread "${two[@]}")" $(( $(retries) - r0 )) "${one[*]}" "${two[*]}"
	done
done
