#!/bin/bash
# bench-rails-ctl.sh: the control for bench-rails.sh. Two rails gave 1.3-1.45x
# one rail (tests/perf/results/cluster/rails/README.md): is that the VM's limit
# or uccl's? In one boot of the Soft-RoCE VM with two rails (rail 0: rxe0 ->
# rxe1 over veth0-veth1, rail 1: rxe2 -> rxe3 over veth2-veth3), write,
# BENCH_SIZE bytes per transfer (4 MiB), BENCH_BYTES per rail and run (64 MiB):
#  (a) perftest: one ib_write_bw pair on rail 0 alone ("pt-1"), against two
#      pairs at the same time, one per rail, each its own processes ("pt-2x1");
#  (b) uccl_perf: one job on rail 0 alone ("uccl-1"), two 1-rail jobs at the
#      same time (rxe0 <-> rxe1, rxe2 <-> rxe3: "uccl-2x1"), and one 2-rail
#      job moving the bytes of both (rxe0+rxe2 <-> rxe1+rxe3: "uccl-2").
# If pt-2x1 / pt-1 stays under 1.6, the VM cannot show 1.6x whatever uccl
# does. If it reaches 1.6 and uccl-2x1 beats uccl-2, what the rails share is
# in uccl's process: one progress thread posts for both rails, and Linux
# 6.1's rxe builds and checksums a user QP's first window of packets in the
# thread that posts (rxe_post_send runs the requester inline).
# (a)'s rounds first, then (b)'s; the order of the settings rotates every
# round. Each run prints as it ends: the tools' own Gb/s (summed over the
# jobs of a run) and the wire rate: the four veths' transmitted bytes sampled
# every 0.1 s, over the time every rail that carried data was between 5 % and
# 95 % of its bytes (of its timed bytes: uccl_perf verifies with one more
# window of the same bytes after the timed one) (overlap: that time over the time from the first rail's
# 5 % to the last one's 95 %), with each rail's share, and over that whole
# time (the union; the table's "wire" is the common time's figure); then the guest's busy
# vCPUs over the run (user, system, softirq) and each rank's CPU seconds
# (user+system; a rank's system time is where rxe ran in its thread). Each
# block ends with a table of medians and ratios.
# Run from the build directory: ../tests/rxe/bench-rails-ctl.sh
#   BENCH_ROUNDS (3), BENCH_SIZE (4194304), BENCH_BYTES (67108864),
#   BENCH_RPS=1 (as bench-rails.sh: each veth's receive work on vCPUs 1-4,
#   the tools on 5 and up; needs 8 vCPUs), BENCH_PARTS ("a b": which blocks),
#   BENCH_CTL_BUDGET (s: no round starts that would end past it, so that the
#   tables print before the VM's time ends; default none), BENCH_RUN_TIMEOUT
#   (s per run, 120), BENCH_TRACE=1 (each run also counts the calls of
#   rxe_requester, one per packet built, by the context that made them:
#   ftrace, rails-trace.awk; it slows rxe: the rates are not comparable with
#   runs without it). UCCL_VERBS_INFLIGHT=1M and UCCL_VERBS_IB_TIMEOUT=20
#   unless set, as bench-rails.sh.
# Runs in the project's Soft-RoCE VM (tests/vm/run.sh); exits 77 with the
# reason where this machine cannot boot it.
here=$(cd "$(dirname "$0")" && pwd)
top_srcdir=$(cd "$here/../.." && pwd)
builddir=$(cd "${top_builddir:-.}" && pwd)
. "$here/reexec.sh"
rxe_reexec "$here/bench-rails-ctl.sh" 900
[ -z "${RXE_SKIP:-}" ] || { echo "bench: $RXE_SKIP"; exit 77; }
[ -n "${RXE_RAIL_DEV:-}" ] || { echo "bench: this VM has no second rail"; exit 77; }
sysctl -qw net.core.netdev_max_backlog=100000 2>/dev/null
export UCCL_VERBS_INFLIGHT=${UCCL_VERBS_INFLIGHT:-1M} UCCL_VERBS_IB_TIMEOUT=${UCCL_VERBS_IB_TIMEOUT:-20}
size=${BENCH_SIZE:-4194304} bytes=${BENCH_BYTES:-67108864} rounds=${BENCH_ROUNDS:-3}
n=$((bytes / size)) && [ "$n" -lt 5 ] && n=5 # ib_write_bw's least
tmo=${BENCH_RUN_TIMEOUT:-120}
perf=$builddir/tools/uccl_perf
[ -x "$perf" ] || { echo "bench: $perf not built (needs MPI and tools/uccl_perf)"; exit 1; }
command -v ib_write_bw >/dev/null || echo "bench: no ib_write_bw: (a) is left out"
mpiexec="mpirun --oversubscribe --allow-run-as-root --bind-to none --mca btl self,vader,tcp"
pin= # BENCH_RPS=1: the tools on vCPUs 5 and up
if [ "${BENCH_RPS:-0}" = 1 ] && [ "$(nproc)" -ge 8 ]; then
	c=1
	for v in veth1 veth0 veth3 veth2; do
		printf '%x\n' $((1 << c)) >/sys/class/net/$v/queues/rx-0/rps_cpus || echo "bench: no RPS on $v"
		c=$((c + 1))
	done
	pin="taskset -c 5-$(($(nproc) - 1))"
	echo "# RPS: veth1 -> vCPU 1, veth0 -> 2, veth3 -> 3, veth2 -> 4; the tools on vCPUs 5-$(($(nproc) - 1))"
fi

gid_index() { # gid_index DEV: the index of DEV's IPv4 RoCE v2 GID (RXE_GID_INDEX if none is found)
	local f i
	for f in /sys/class/infiniband/"$1"/ports/1/gids/*; do
		i=${f##*/}
		case $(cat "$f" 2>/dev/null) in
		0000:0000:0000:0000:0000:ffff:*)
			[ "$(cat /sys/class/infiniband/"$1"/ports/1/gid_attrs/types/"$i" 2>/dev/null)" = "RoCE v2" ] &&
				{ echo "$i"; return; } ;;
		esac
	done
	echo "$RXE_GID_INDEX"
}
declare -A gid
for d in "$RXE_DEV" "$RXE_DEV2" "$RXE_RAIL_DEV" "$RXE_RAIL_DEV2"; do gid[$d]=$(gid_index "$d"); done
retries() { # RC retransmission timeouts and NAKs so far, all four devices
	cat /sys/class/infiniband/rxe[0-3]/ports/1/hw_counters/{completer_retry_err,rcvd_seq_err} 2>/dev/null |
		awk '{ n += $1 } END { print n + 0 }'
}
stat_cpu() { awk '$1 == "cpu" { print $2 + $3, $4, $7 + $8 }' /proc/stat; }

# pt RAIL PORT: one ib_write_bw pair on RAIL (0: rxe0 -> rxe1, 1: rxe2 ->
# rxe3), n transfers of size, its processes' CPU to /tmp/ctl.cpu; prints its
# Gb/s (0 if it failed)
pt() {
	local c=$RXE_DEV s=$RXE_DEV2 o=/tmp/ctl.pt$1
	[ "$1" = 1 ] && c=$RXE_RAIL_DEV s=$RXE_RAIL_DEV2
	# shellcheck disable=SC2086 # pin: command words
	$pin "$here/cputime.sh" /tmp/ctl.cpu pt$1-server timeout "$tmo" ib_write_bw -d "$s" -x "${gid[$s]}" -p "$2" \
		-s "$size" -n "$n" -F --report_gbits >"$o.srv" 2>&1 &
	sleep 1
	# shellcheck disable=SC2086
	$pin "$here/cputime.sh" /tmp/ctl.cpu pt$1-client timeout "$tmo" ib_write_bw -d "$c" -x "${gid[$c]}" -p "$2" \
		-s "$size" -n "$n" -F --report_gbits 127.0.0.1 >"$o" 2>&1
	wait
	awk -v s="$size" '$1 == s { print $4; ok = 1 } END { if (!ok) print 0 }' "$o"
	# its result line as printed (a local rehearsal read a BW average of 0.000000 once)
	if grep -q "^ *$size " "$o"; then grep -m 1 "^ *$size " "$o" | sed "s/^/#     pt$1:/" >&2
	else tail -n 3 "$o" "$o.srv" >&2; fi
}

# uccl JOB RAILS COUNT: one uccl_perf write job (JOB 0: rank 0 on rxe0, rank 1
# on rxe1; JOB 1: rxe2, rxe3; RAILS 2: rxe0+rxe2 and rxe1+rxe3), COUNT
# transfers of size in one window, its ranks' CPU to /tmp/ctl.cpu; prints
# its Gb/s from the us/op column (0 if it failed)
uccl() {
	local d0=$RXE_DEV d1=$RXE_DEV2 o=/tmp/ctl.uccl$1
	[ "$1" = 1 ] && d0=$RXE_RAIL_DEV d1=$RXE_RAIL_DEV2
	[ "$2" = 2 ] && d0=$RXE_DEV,$RXE_RAIL_DEV d1=$RXE_DEV2,$RXE_RAIL_DEV2
	# shellcheck disable=SC2086 # pin, mpiexec: command words
	RXE_DEV=$d0 RXE_DEV2=$d1 $pin timeout "$tmo" $mpiexec -np 2 "$here/cputime.sh" /tmp/ctl.cpu "uccl$1" \
		"$here/rank-dev.sh" "$perf" p2p --transport verbs --op write --min "$size" --max "$size" --iters 1 \
		--window "$3" --warmup 0 --no-ref >"$o" 2>&1 || tail -n 5 "$o" >&2
	awk -v s="$size" '$1 == s && $3 > 0 { printf "%.4f\n", 8 * $1 / ($3 * 1e3); ok = 1 } END { if (!ok) print 0 }' "$o"
}

# wire: the four veths' tx bytes every 0.1 s, rail 0 then rail 1, to /tmp/ctl.wire
wire_on() {
	(while :; do
		read -r a </sys/class/net/veth0/statistics/tx_bytes; read -r b </sys/class/net/veth1/statistics/tx_bytes
		read -r c </sys/class/net/veth2/statistics/tx_bytes; read -r d </sys/class/net/veth3/statistics/tx_bytes
		echo "$EPOCHREALTIME $((a + b)) $((c + d))"; sleep 0.1
	done) >/tmp/ctl.wire &
	wire_pid=$!
}
wire_off() { # wire_off PART: prints rails-wire.awk's "Gb/s overlap rail0 rail1 union-Gb/s"
	sleep 0.3
	kill "$wire_pid"; wait "$wire_pid" 2>/dev/null
	awk -v part="$1" -f "$here/rails-wire.awk" /tmp/ctl.wire
}

# BENCH_TRACE=1: rxe_requester's calls during the run, by context
trace=/sys/kernel/tracing
trace_on() {
	[ "${BENCH_TRACE:-0}" = 1 ] || return 0
	[ -e $trace/tracing_on ] || mount -t tracefs nodev $trace || echo "bench: cannot mount tracefs" >&2
	echo 0 >$trace/tracing_on && echo nop >$trace/current_tracer && echo rxe_requester >$trace/set_ftrace_filter &&
		echo "${BENCH_TRACE_KB:-16384}" >$trace/buffer_size_kb && echo function >$trace/current_tracer &&
		echo >$trace/trace && echo 1 >$trace/tracing_on || echo "bench: no function tracer for rxe_requester" >&2
}
trace_off() {
	[ "${BENCH_TRACE:-0}" = 1 ] || return 0
	echo 0 >$trace/tracing_on
	echo "#     rxe_requester: $(awk -f "$here/rails-trace.awk" $trace/trace)"
	echo nop >$trace/current_tracer
}

# one LABEL: a run of setting LABEL; appends to fig[LABEL] and own[LABEL]
declare -A fig uni own
one() {
	local v w st t0 cpu
	: >/tmp/ctl.cpu
	cat "$perf" >/dev/null # read through the share before the timing (the first run of a boot was slow)
	st=$(stat_cpu) t0=$EPOCHREALTIME
	trace_on
	wire_on
	case $1 in
	pt-1) v=$(pt 0 18515) ;;
	pt-2x1) v=$( (pt 0 18515 >/tmp/ctl.v0 & pt 1 18516 >/tmp/ctl.v1; wait) && cat /tmp/ctl.v0 /tmp/ctl.v1 | paste -sd' ') ;;
	uccl-1) v=$(uccl 0 1 "$n") ;;
	uccl-2x1) v=$( (uccl 0 1 "$n" >/tmp/ctl.v0 & uccl 1 1 "$n" >/tmp/ctl.v1; wait) && cat /tmp/ctl.v0 /tmp/ctl.v1 | paste -sd' ') ;;
	uccl-2) v=$(uccl 0 2 $((2 * n))) ;;
	esac
	# uccl_perf moves one more window after the timed one, untimed, to verify
	# the bytes: with --iters 1 the first half of each rail's bytes is timed
	w=$(wire_off "$(case $1 in uccl*) echo 0.5 ;; *) echo 1 ;; esac)")
	cpu=$(stat_cpu | awk -v b="$st" -v t0="$t0" -v t1="$EPOCHREALTIME" -v hz="$(getconf CLK_TCK)" '{ split(b, a, " ")
		printf "%.1f s, vCPUs busy %.2f (user %.2f sys %.2f softirq %.2f)", t1 - t0,
			($1 + $2 + $3 - a[1] - a[2] - a[3]) / hz / (t1 - t0), ($1 - a[1]) / hz / (t1 - t0),
			($2 - a[2]) / hz / (t1 - t0), ($3 - a[3]) / hz / (t1 - t0) }')
	fig[$1]+=" ${w%% *}" uni[$1]+=" ${w##* }"
	own[$1]+=" $(echo "$v" | awk '{ s = 0; for (i = 1; i <= NF; i++) s += $i; printf "%.4f", s }')"
	echo "#   $(date -u +%T) $1: own $v; wire $w; $cpu"
	echo "#     CPU s (user sys): $(sort /tmp/ctl.cpu | paste -sd';' | sed 's/;/; /g')"
	trace_off
}
table() { # table BASE SETTING...: per setting the medians [min-max] of the wire rate over the common
	# time, over the union and of the tools' own figures, and their ratios to BASE's (one awk: a
	# fork costs in the emulated VM)
	local s
	for s in "$@"; do echo "$s fig ${fig[$s]:-}"; echo "$s uni ${uni[$s]:-}"; echo "$s own ${own[$s]:-}"; done | awk '
	function med(k,   t, i, j, m, x) { m = 0
		for (i = 3; i <= NF; i++) if ($i > 0) t[++m] = $i
		for (i = 2; i <= m; i++) for (j = i; j > 1 && t[j - 1] > t[j]; j--) { x = t[j]; t[j] = t[j - 1]; t[j - 1] = x }
		lo[k] = m ? t[1] : 0; hi[k] = m ? t[m] : 0
		return m == 0 ? 0 : m % 2 ? t[(m + 1) / 2] : (t[m / 2] + t[m / 2 + 1]) / 2 }
	{ k = $1 SUBSEP $2; m[k] = med(k); runs[k] = $3; for (i = 4; i <= NF; i++) runs[k] = runs[k] " " $i
	  if (NR == 1) base = $1; if (!($1 in seen)) { seen[$1] = 1; order[++n] = $1 } }
	END { printf "%-9s %-26s %-26s %-26s   %s\n", "setting", "wire (common) x base", "wire (union) x base",
		"own x base", "runs: common | union | own"
		for (i = 1; i <= n; i++) { s = order[i]; line = sprintf("%-9s", s)
			split("fig uni own", f, " ")
			for (j = 1; j <= 3; j++) { k = s SUBSEP f[j]; b = m[base SUBSEP f[j]]
				line = line sprintf(" %-26s", sprintf("%.4f [%.4f-%.4f] %s", m[k], lo[k], hi[k],
					b > 0 ? sprintf("%.2f", m[k] / b) : "-")) }
			print line "  " runs[s SUBSEP "fig"] " |" runs[s SUBSEP "uni"] " |" runs[s SUBSEP "own"] } }'
}
block() { # block NAME SETTING...: the rounds of one block, the order rotating; then its table
	local name=$1 r k i t0=$SECONDS r0 last=0 tr
	shift
	r0=$(retries)
	for r in $(seq "$rounds"); do
		if [ -n "${BENCH_CTL_BUDGET:-}" ] && [ $((SECONDS + last)) -gt "$BENCH_CTL_BUDGET" ]; then
			echo "#   round $r left out: it would end past BENCH_CTL_BUDGET=${BENCH_CTL_BUDGET}s"
			break
		fi
		tr=$SECONDS
		for ((k = 0; k < $#; k++)); do
			i=$(((r - 1 + k) % $# + 1))
			one "${!i}"
		done
		last=$((SECONDS - tr))
	done
	echo "# ($name) write, $size B x $n per rail and run, $(($(retries) - r0)) RC retries/NAKs, $((SECONDS - t0)) s; Gb/s, x = / $1"
	table "$@"
}
echo "# $(nproc) vCPUs; write $size B x $n per rail and run ($((n * size >> 20)) MiB); $rounds rounds;" \
	"UCCL_VERBS_INFLIGHT=$UCCL_VERBS_INFLIGHT UCCL_VERBS_IB_TIMEOUT=$UCCL_VERBS_IB_TIMEOUT;" \
	"GID index ${gid[$RXE_DEV]} ${gid[$RXE_DEV2]} ${gid[$RXE_RAIL_DEV]} ${gid[$RXE_RAIL_DEV2]}; veth MTU $(cat /sys/class/net/veth0/mtu)"
for p in ${BENCH_PARTS:-a b}; do
	case $p in
	a) command -v ib_write_bw >/dev/null && block a pt-1 pt-2x1 ;;
	b) block b uccl-1 uccl-2x1 uccl-2 ;;
	esac
done
