#!/bin/bash
# bench.sh: uccl_perf p2p over verbs next to perftest (ib_write_bw,
# ib_read_bw, ib_send_bw) and UCX (ucx_perftest through UCP over rc_verbs:
# ucp_put_bw for write, ucp_get for read, tag_bw for send) between the same two
# Soft-RoCE devices, same sizes and bytes, in one VM boot; prints a table of
# medians with ratios. A report, not a timed test. Without ucx_perftest
# (package ucx-utils) its column reads 0.
# Run from the build directory: ../tests/rxe/bench.sh
#   BENCH_SIZES, BENCH_OPS, BENCH_ROUNDS (default 5: uccl, perftest and UCX
#   take turns, the first of each round rotating, so that drift in the
#   emulated VM hits all alike), BENCH_MIB (MiB each run moves, default 64);
#   BENCH_WIRE=1 (every tool measured alike: bytes on the veth pair over
#   time, wire_gbps below, the tools' own figures beside);
#   BENCH_SLIDING=1 (every tool keeps BENCH_WINDOW transfers in flight, a new
#   one posted as one completes, for every op: uccl_perf --sliding, ucx_perftest
#   -O W, perftest -t W; for send the receivers keep W receives posted as well,
#   uccl_perf's rank 1 and ib_send_bw's server each reposting one as one
#   completes; without it uccl_perf drains each window of W (send: and waits
#   for a 0-byte ack), UCX and perftest keep their own depths);
#   BENCH_WARMUP=0 (no untimed run of each tool before the table);
#   BENCH_CPU=1 (each row also prints the CPU seconds, user+system, of every
#   process: uccl_perf's ranks, each reference's client and server
#   (tests/rxe/cputime.sh), and the guest's busy and idle vCPU seconds);
#   BENCH_PIN="A B" (every tool's initiator on guest vCPU A, its target on
#   vCPU B, by taskset: uccl_perf's rank 0 and 1 (rank-dev.sh), each
#   reference's client and server; the same for all tools);
#   BENCH_SAMPLE (seconds between wire_gbps's samples, default 0.2);
#   for experiments: BENCH_WINDOW (uccl_perf's window, 16), BENCH_PT_ARGS
#   (more perftest options), BENCH_LIB=1 (sourced in the VM: functions only)
# Each row: the medians, each tool's min-max over the rounds, the ratios of
# the medians and the min-max of the per-round ratios (uccl's run against
# the reference's run of the same round, minutes apart at most).
# Runs in the project's Soft-RoCE VM (tests/vm/run.sh); exits 77 with the
# reason where this machine cannot boot it.
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
top_srcdir=$(cd "$here/../.." && pwd)
builddir=$(cd "${top_builddir:-.}" && pwd)
. "$here/reexec.sh"
rxe_reexec "$here/bench.sh" 1500
[ -z "${RXE_SKIP:-}" ] || { echo "bench: $RXE_SKIP"; exit 77; }
sysctl -qw net.core.netdev_max_backlog=100000 2>/dev/null # as check.sh: fewer rxe retries
sizes=${BENCH_SIZES:-65536 262144 1048576 4194304}
ops=${BENCH_OPS:-write read send}
rounds=${BENCH_ROUNDS:-5}
perf=$builddir/tools/uccl_perf
# Unbound, as perftest runs: Open MPI binds each of 2 ranks to a core by
# default, and a rank pinned to the vCPU where rxe's softirq work lands (the
# VM has 2) starves it: read 1 MiB went from 0.21-0.25 to 0.42-0.54 Gb/s.
mpiexec="mpirun --oversubscribe --allow-run-as-root --bind-to none --mca btl self,vader,tcp"
[ -x "$perf" ] || { echo "bench: $perf not built (needs MPI and tools/uccl_perf)"; exit 1; }

# Transfers per run, the same for all tools: about BENCH_MIB MiB, a multiple
# of uccl_perf's window of 16, at least 1 window.
count() { local n=$(( ((${BENCH_MIB:-64} << 20) / $1 + 8) / 16 * 16 )); echo $(( n < 16 ? 16 : n > 1024 ? 1024 : n )); }

# depth OPT: with BENCH_SLIDING=1, "OPT W" (the tool's in-flight depth option)
depth() { [ "${BENCH_SLIDING:-0}" = 1 ] && echo "$1 ${BENCH_WINDOW:-16}"; }

# cpu LABEL: with BENCH_CPU=1, the words that make the command after them
# log its CPU seconds as LABEL to /tmp/cpu.log (cputime.sh)
cpu() { [ "${BENCH_CPU:-0}" = 1 ] && echo "$here/cputime.sh /tmp/cpu.log $1"; }

# pin 0|1: with BENCH_PIN="A B", the words that put the command after them on
# guest vCPU A (0: the initiator, the client) or B (1: the target, the server);
# uccl_perf's ranks are pinned the same way by rank-dev.sh
# (any form but two words fails the run: the tool gets "false" in front)
pin() {
	local p; read -ra p <<<"${BENCH_PIN:-}"
	case ${#p[@]} in
	0) ;;
	2) echo "taskset -c ${p[$1]}" ;;
	*) echo "bench: BENCH_PIN='$BENCH_PIN': want two vCPUs, \"A B\"" >&2; echo false ;;
	esac
}

perftest_gbps() {  # perftest_gbps OP SIZE: BW average in Gb/s, rxe0 -> rxe1 (the client's output in /tmp/pt.cli)
	local n; n=$(count "$2")
	# shellcheck disable=SC2086,SC2046 # BENCH_PT_ARGS, depth, cpu, pin: option words
	$(cpu perftest-server) $(pin 1) timeout 120 ib_$1_bw -d "$RXE_DEV2" -x "$RXE_GID_INDEX" -s "$2" -n "$n" -F --report_gbits $(depth -t) ${BENCH_PT_ARGS:-} >/tmp/pt.srv 2>&1 &
	sleep 1
	# shellcheck disable=SC2086,SC2046
	$(cpu perftest-client) $(pin 0) timeout 120 ib_$1_bw -d "$RXE_DEV" -x "$RXE_GID_INDEX" -s "$2" -n "$n" -F --report_gbits $(depth -t) ${BENCH_PT_ARGS:-} 127.0.0.1 2>&1 |
		tee /tmp/pt.cli | awk -v s="$2" '$1 == s { print $4; ok = 1 } END { if (!ok) print 0 }'
	wait
}

# ucx_gbps OP SIZE: ucx_perftest's overall bandwidth (MiB/s) as Gb/s, rxe0 ->
# rxe1, over UCX's rc_verbs transport through UCP (UCX_NET_DEVICES rxe0 for
# the client, rxe1 for the server): write = ucp_put_bw, read = ucp_get,
# send = tag_bw (UCX_TLS=rc_verbs,ud_verbs:aux: UD only for UCP's connection
# setup, with UCX_UD_VERBS_ETH_DGID_CHECK=n: with the check on, UCX 1.13's UD
# drops every packet rxe delivers and dies with "UD endpoint ...: unhandled
# timeout error"; tcp is no auxiliary transport: "no auxiliary transport").
# Not UCT put_bw / get with -d: ucx_perftest 1.13's server takes the
# client's UCT device, so both ends sat on rxe0 and the data went through
# rxe's internal loopback, never over the veth pair (rxe1 and both veths
# counted no packet: tests/perf/results/cluster/s10/). No -f: with it
# ucx_perftest prints its last line without the "Final:" label read here.
# The figure: that line's overall bandwidth (ucx-final.awk; not the last
# report interval's, which read 256 KiB put_bw at 0.05-0.08 Gb/s where the
# run did 0.25). 0 when it fails (its last lines go to stderr).
ucx_gbps() {
	local n t tls=rc_verbs,ud_verbs:aux,self; n=$(count "$2")
	command -v ucx_perftest >/dev/null || { echo 0; return; }
	case $1 in
	write) t=ucp_put_bw ;;
	read) t=ucp_get ;;
	*) t=tag_bw ;;
	esac
	# shellcheck disable=SC2046 # cpu: command words
	UCX_TLS=$tls UCX_NET_DEVICES=$RXE_DEV2:1 UCX_IB_GID_INDEX=$RXE_GID_INDEX UCX_UD_VERBS_ETH_DGID_CHECK=n \
		$(cpu ucx-server) $(pin 1) timeout 120 ucx_perftest -p 13337 >/tmp/ucx.srv 2>&1 &
	sleep 1
	# shellcheck disable=SC2046 # depth, cpu: option words
	UCX_TLS=$tls UCX_NET_DEVICES=$RXE_DEV:1 UCX_IB_GID_INDEX=$RXE_GID_INDEX UCX_UD_VERBS_ETH_DGID_CHECK=n \
		$(cpu ucx-client) $(pin 0) timeout 120 ucx_perftest 127.0.0.1 -p 13337 -t $t -s "$2" -n "$n" -w 16 $(depth -O) >/tmp/ucx.out 2>&1
	wait
	awk -f "$here/ucx-final.awk" /tmp/ucx.out
	grep -q "^Final:" /tmp/ucx.out || tail -n 3 /tmp/ucx.out /tmp/ucx.srv >&2
}

uccl_gbps() {  # uccl_gbps OP SIZE: uccl_perf's GB/s as Gb/s (rank 0 on rxe0, rank 1 on rxe1)
	local w=${BENCH_WINDOW:-16} slide= # transfers in flight, then a wait for all of them
	# W in flight all along (send: W receives posted on rank 1, each reposted as it completes)
	[ "${BENCH_SLIDING:-0}" = 1 ] && slide=--sliding
	# its us column (time per transfer), as bench-rails.sh reads it: no python
	# (its start costs seconds in the emulated VM, and the device machine's
	# python3 is a virtual environment)
	# shellcheck disable=SC2046,SC2086 # mpiexec, cpu: command words (the label gets "-RANK")
	timeout 300 $mpiexec -np 2 $(cpu uccl) "$here/rank-dev.sh" "$perf" p2p --transport verbs --op "$1" \
		--min "$2" --max "$2" --iters $(( ($(count "$2") + w - 1) / w )) --window "$w" $slide --warmup 1 --no-ref \
		>/tmp/uccl.out 2>&1 || tail -5 /tmp/uccl.out >&2
	awk -v s="$2" '$1 == s && $3 > 0 { printf "%.4f\n", 8 * $1 / ($3 * 1e3); ok = 1 } END { if (!ok) print 0 }' /tmp/uccl.out
}

# wire_gbps FUNC OP SIZE: run FUNC (one of the above) and print, instead of
# its own figure, the rate on the veth pair while it ran: both veths'
# transmitted bytes (RoCE headers and acknowledgements included, the same
# for every tool) sampled every BENCH_SAMPLE s (0.2), without a subshell per
# sample, read by wire-rate.awk (over the time between 5% and 95% of the
# run's bytes). The tool's own figure goes to
# /tmp/own.log. 0 when the tool failed (no figure of its own) or too little
# crossed the pair. A figure of its own that reads 0.000000 (ib_send_bw's
# client, now and then, after a complete run: vm15c) is not a failure when
# the pair carried the run's payload: its wire rate counts.
wire_gbps() {
	local own pid
	(while :; do read -r a </sys/class/net/veth0/statistics/tx_bytes; read -r b </sys/class/net/veth1/statistics/tx_bytes
		echo "$EPOCHREALTIME $((a + b))"; sleep "${BENCH_SAMPLE:-0.2}"; done) >/tmp/wire.log &
	pid=$!
	own=$("$@")
	sleep 0.4
	kill "$pid"; wait "$pid" 2>/dev/null
	echo "${1%_gbps} $own" >>/tmp/own.log
	awk -v own="$own" -v want=$(($(count "$3") * $3)) -f "$here/wire-rate.awk" /tmp/wire.log
}
[ "${BENCH_WIRE:-0}" = 1 ] || wire_gbps() { "$@"; }

# BENCH_CPU=1: the CPU seconds (user+system) per run of each process in
# /tmp/cpu.log (uccl-0 is uccl_perf's initiator, uccl-1 its target; each
# reference's client initiates), their medians, and the guest's vCPU seconds
# over the row from /proc/stat (busy: user, system, softirq, where rxe does
# its packet work; idle: what was to spare).
stat_cpu() { awk '$1 == "cpu" { print $2 + $3, $4, $7 + $8, $5 + $6 }' /proc/stat; }
cpu_report() { # cpu_report "STAT BEFORE" EPOCHREALTIME-BEFORE
	awk '{ v = $2 + $3; n[$1]++; r[$1] = r[$1] " " sprintf("%.2f", v); a[$1, n[$1]] = v }
	END { for (l in n) { k = n[l]; for (i = 1; i <= k; i++) t[i] = a[l, i]
		for (i = 2; i <= k; i++) for (j = i; j > 1 && t[j - 1] > t[j]; j--) { x = t[j]; t[j] = t[j - 1]; t[j - 1] = x }
		printf "#   CPU s %-16s median %5.2f, runs:%s\n", l, k % 2 ? t[(k + 1) / 2] : (t[k / 2] + t[k / 2 + 1]) / 2, r[l] } }' \
		/tmp/cpu.log | sort
	stat_cpu | awk -v b="$1" -v t0="$2" -v t1="$EPOCHREALTIME" -v hz="$(getconf CLK_TCK)" -v nc="$(nproc)" '{ split(b, a, " ")
		printf "#   guest over the row: %d vCPUs x %.0f s; busy user %.1f, system %.1f, irq+softirq %.1f; idle %.1f vCPU-s\n",
			nc, t1 - t0, ($1 - a[1]) / hz, ($2 - a[2]) / hz, ($3 - a[3]) / hz, ($4 - a[4]) / hz }'
}

# Sourced with BENCH_LIB=1 (in the VM): the functions above, no table.
[ "${BENCH_LIB:-0}" = 1 ] && return 0
echo "# $rounds rounds per row, uccl, perftest and ucx in turns; medians in Gb/s (1e9 bit/s);"
[ "${BENCH_SLIDING:-0}" = 1 ] && echo "# BENCH_SLIDING=1: each tool keeps ${BENCH_WINDOW:-16} in flight (uccl_perf --sliding, ucx_perftest -O, perftest -t)"
[ "${BENCH_WIRE:-0}" = 1 ] && echo "# BENCH_WIRE=1: every figure is the rate on the veth pair (wire_gbps), not the tool's own"
echo "# x pt = uccl / perftest, x ucx = uccl / ucx_perftest (UCP over rc_verbs: write ucp_put_bw, read ucp_get, send tag_bw)"
echo "# [a-b]: min-max over the rounds (a failed run, 0, left out); ratio ranges pair the runs of one round"
# One untimed run of each tool first (BENCH_WARMUP=0: none). In a fresh boot
# the first run of all was the slowest (write 64 KiB: 0.26 and 0.29-0.36
# Gb/s against 0.39-0.44 after them, tests/perf/results/cluster/vm14/), and
# round 1 of the first row always starts with perftest.
if [ "${BENCH_WARMUP:-1}" = 1 ]; then
	for f in uccl_gbps perftest_gbps ucx_gbps; do "$f" "${ops%% *}" "${sizes%% *}" >/dev/null 2>&1; done
	echo "# warm-up: one untimed run of each tool (${ops%% *}, ${sizes%% *} bytes)"
fi
printf "%-5s %8s %5s %20s %20s %20s %16s %16s\n" op size count "uccl [min-max]" "perftest [min-max]" \
	"ucx [min-max]" "x pt [min-max]" "x ucx [min-max]"
for op in $ops; do
	for s in $sizes; do
		us=() ps=() xs=()
		: >/tmp/own.log; : >/tmp/cpu.log
		st0=$(stat_cpu) t0=$EPOCHREALTIME
		for r in $(seq "$rounds"); do
			for k in 0 1 2; do
				case $(((r + k) % 3)) in
				0) us+=("$(wire_gbps uccl_gbps "$op" "$s")") ;;
				1) ps+=("$(wire_gbps perftest_gbps "$op" "$s")") ;;
				2) xs+=("$(wire_gbps ucx_gbps "$op" "$s")") ;;
				esac
			done
		done
		echo "${us[*]} | ${ps[*]} | ${xs[*]}" | awk -v o="$op" -v s="$s" -v n="$(count "$s")" '
		function med(a, m,   t, i, j, k) { k = 0
			for (i = 1; i <= m; i++) if (a[i] > 0) t[++k] = a[i]
			for (i = 2; i <= k; i++) for (j = i; j > 1 && t[j - 1] > t[j]; j--) { v = t[j]; t[j] = t[j - 1]; t[j - 1] = v }
			lo = k ? t[1] : 0; hi = k ? t[k] : 0
			return k == 0 ? 0 : k % 2 ? t[(k + 1) / 2] : (t[k / 2] + t[k / 2 + 1]) / 2 }
		function col(a, m,   x) { x = med(a, m); return sprintf("%6.3f [%.3f-%.3f]", x, lo, hi) }
		function rat(a, b, m,   r, i, k, x, y) { k = 0
			for (i = 1; i <= m; i++) if (a[i] > 0 && b[i] > 0) r[++k] = a[i] / b[i]
			x = med(a, m); y = med(b, m); med(r, k)
			return y > 0 ? sprintf("%5.2f [%.2f-%.2f]", x / y, lo, hi) : "    -" }
		{ split($0, part, "\\|"); m = split(part[1], u, " "); split(part[2], p, " "); split(part[3], x, " ")
		  printf "%-5s %8d %5d %20s %20s %20s %16s %16s\n", o, s, n, col(u, m), col(p, m), col(x, m),
		         rat(u, p, m), rat(u, x, m)
		  printf "#   runs: uccl %s | perftest %s | ucx %s\n", part[1], part[2], part[3]
		  printf "#   per round: x pt"; for (i = 1; i <= m; i++) printf " %s", (u[i] > 0 && p[i] > 0) ? sprintf("%.2f", u[i] / p[i]) : "-"
		  printf " | x ucx"; for (i = 1; i <= m; i++) printf " %s", (u[i] > 0 && x[i] > 0) ? sprintf("%.2f", u[i] / x[i]) : "-"
		  printf "\n" }'
		[ "${BENCH_CPU:-0}" = 1 ] && cpu_report "$st0" "$t0"
		[ "${BENCH_WIRE:-0}" = 1 ] && echo "#   the tools' own figures, in run order: $(paste -sd' ' /tmp/own.log)"
	done
done
uptime
