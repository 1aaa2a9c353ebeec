#!/bin/bash
# bench-send.sh: uccl send (uccl_perf --op send --sliding, 16 in flight,
# rank 1 keeping 16 receives posted) against ib_send_bw -t 16 and
# ucx_perftest tag_bw -O 16 in one boot of the Soft-RoCE VM (tests/vm/run.sh,
# or tests/vm/device-rails.sh with DEVICE_BENCH=this file), every figure the
# rate on the veth pair (tests/rxe/bench.sh's functions, BENCH_WIRE=1,
# BENCH_SLIDING=1), with what each run cost on the wire. vm15c's
# bench-send-ab.sh (removed: this runs its columns), plus rxe's counters and setting columns. Columns:
#   slide  libuccl's defaults
#   pt     ib_send_bw -t 16 (the server's rx depth 16)
#   ucx    ucx_perftest tag_bw -O 16 (UCP over rc_verbs)
#   eager  slide with UCCL_VERBS_EAGER=<size>: one eager message per send,
#          no RTS / CTS
#   qp1    slide with UCCL_VERBS_NUM_QPS=1: every message on one data QP
#          (by default a message below UCCL_VERBS_CHUNK, 1M, is one RDMA
#          WRITE with immediate on one of 2 data QPs, taken in turn)
#   tN     slide with UCCL_VERBS_IB_TIMEOUT=N (t14: 67 ms, ib_send_bw's
#          default ACK timeout, against libuccl's 18: 1.07 s)
#   win    AB_MAIN_PERF's uccl_perf without --sliding (windows of 16 + ack)
# Each round runs every column once, the first rotating. Per run:
#   pkts/msg  packets on the veth pair (both directions, RoCE ACKs
#             included) per transfer: over count + 32 transfers for
#             uccl_perf (its warm-up and verify windows of 16), count + 16
#             for ucx_perftest (-w 16), count for ib_send_bw
#   stall     the longest gap between two of wire_gbps's samples (every
#             0.2 s) in which the pair's byte count grew, from the first
#             to the last (0.2: none): an RC ACK timeout shows there
#   own       the tool's own figure (Gb/s; perftest's may read 0.000000:
#             bench.sh's wire_gbps then keeps the wire rate if the payload
#             crossed)
#   rxe       the counters of both rxe devices that moved in the run, other
#             than packets and sends (hw_counters: duplicate_request,
#             out_of_seq_request, rcvd_rnr_err, send_rnr_err, rcvd_seq_err,
#             ack_deferred, retry_exceeded_err, completer_retry_err, ...):
#             retransmissions, duplicates and RNR NAKs show there
# Rounds are outermost: each round runs every size. With BENCH_CPU=1 the
# table ends with the CPU seconds (user+system) of every process per column
# and size (bench.sh's cpu_report) and the guest's vCPU seconds over all.
# Run from the build directory: ../../tests/perf/results/cluster/vm16/bench-send.sh
#   AB_SIZES ("65536 262144"), AB_ROUNDS (5), AB_TOOLS ("slide pt ucx"),
#   AB_TOOLS_<SIZE> (that size's columns, e.g. AB_TOOLS_65536), BENCH_MIB
#   (MiB per run, 64), BENCH_CPU, AB_MAIN_PERF, AB_WARMUP (the columns of
#   the untimed warm-up, default all), AB_BUDGET (seconds: no new
#   round starts after them; the tables take the rounds done)
here=$(cd "$(dirname "$0")" && pwd)
top_srcdir=$(cd "$here/../../../../.." && pwd)
builddir=$(cd "${top_builddir:-.}" && pwd)
. "$top_srcdir/tests/rxe/reexec.sh"
rxe_reexec "$here/bench-send.sh" 3000
[ -z "${RXE_SKIP:-}" ] || { echo "bench: $RXE_SKIP"; exit 77; }
export BENCH_SLIDING=1 BENCH_WIRE=1
# shellcheck source-path=SCRIPTDIR source=../../../../rxe/bench.sh
BENCH_LIB=1 . "$top_srcdir/tests/rxe/bench.sh"
main_perf=${AB_MAIN_PERF:-$builddir/tools/uccl_perf-main}
start=$SECONDS
veth_pkts() { local a b; read -r a </sys/class/net/veth0/statistics/tx_packets; read -r b </sys/class/net/veth1/statistics/tx_packets; echo $((a + b)); }
# "DEV:COUNTER VALUE" lines of both rxe devices, one grep each: a cat per
# file (32 processes) took 4.2 s a reading in the local guest against 0.6 s,
# and made the device call's runs 10-14 s long against vm15's 6 (README)
hwc() {
	local d
	for d in "$RXE_DEV" "$RXE_DEV2"; do
		grep -H . /sys/class/infiniband/"$d"/ports/1/hw_counters/* 2>/dev/null |
			sed "s|^.*/hw_counters/\([^:]*\):|$d:\1 |"
	done
}
hwc_delta() { # hwc_delta BEFORE AFTER: the counters that moved, packets and sends aside (no /dev/fd in the guest)
	echo "$1" >/tmp/hwc.0
	echo "$2" | awk 'NR == FNR { a[$1] = $2; next } { d = $2 - a[$1]
		if (d != 0 && $1 !~ /(sent_pkts|rcvd_pkts|rdma_sends|rdma_recvs)$/) { printf "%s%s=%d", n++ ? "," : "", $1, d } }
		END { if (!n) printf "-" }' /tmp/hwc.0 -
}
stall() { # the longest run of samples in /tmp/wire.log without a byte, between the first and last that moved
	awk 'NR > 1 && $2 > b { if (seen && $1 - t > m) m = $1 - t; t = $1; seen = 1 } { b = $2 } NR == 1 { t = $1 }
		END { printf "%.1f", m }' /tmp/wire.log
}
one() { # one TOOL SIZE: "GBPS PKTS_PER_MSG STALL_S OWN_FIGURE RXE_COUNTERS"
	local p0 g n l0 h0
	p0=$(veth_pkts) l0=$(wc -l 2>/dev/null </tmp/cpu.log) h0=$(hwc)
	case $1 in
	win) g=$(perf=$main_perf BENCH_SLIDING=0 wire_gbps uccl_gbps send "$2") ;;
	slide) g=$(wire_gbps uccl_gbps send "$2") ;;
	eager) g=$(UCCL_VERBS_EAGER=$2 wire_gbps uccl_gbps send "$2") ;;
	qp1) g=$(UCCL_VERBS_NUM_QPS=1 wire_gbps uccl_gbps send "$2") ;;
	t[0-9]*) g=$(UCCL_VERBS_IB_TIMEOUT=${1#t} wire_gbps uccl_gbps send "$2") ;;
	pt) g=$(wire_gbps perftest_gbps send "$2") ;;
	ucx) g=$(wire_gbps ucx_gbps send "$2") ;;
	esac
	[ "$1" = pt ] && [ "$g" = 0 ] && { tail -n 4 /tmp/pt.srv | sed 's/^/#     ib_send_bw server: /'
		tail -n 6 /tmp/pt.cli | sed 's/^/#     ib_send_bw client: /'; } >&2
	[ "${BENCH_CPU:-0}" = 1 ] && sed -i "$((l0 + 1)),\$ s/^/$1@$2:/" /tmp/cpu.log
	case $1 in win | slide | eager | qp1) n=$(($(count "$2") + 32)) ;; ucx) n=$(($(count "$2") + 16)) ;; *) n=$(count "$2") ;; esac
	echo "$g $(awk -v a="$p0" -v b="$(veth_pkts)" -v n="$n" 'BEGIN { printf "%.1f", (b - a) / n }') $(stall) $(awk 'END { print $2 == "" ? "none" : $2 }' /tmp/own.log) $(hwc_delta "$h0" "$(hwc)")"
}
echo "# $(date -u +%FT%TZ) $(uname -r); $(nproc) vCPUs; load $(cut -d' ' -f1-3 /proc/loadavg); $(ibv_devinfo -d "$RXE_DEV" 2>/dev/null | awk '/active_mtu/ { print "RoCE MTU", $2 }')"
echo "# send, sliding, 16 in flight; ${AB_ROUNDS:-5} rounds, the first column rotating; Gb/s on the veth pair (1e9 bit/s)"
echo "# uccl settings: $(env | grep '^UCCL_' | paste -sd' ' || true)"
for t in ${AB_WARMUP:-${AB_TOOLS:-slide pt ucx}}; do one "$t" 65536 >/dev/null 2>&1; done
echo "# warm-up: one untimed run of ${AB_WARMUP:-each column} (65536 bytes)"
sizes=${AB_SIZES:-65536 262144}
declare -A g=() p=() z=() o=() h=()
: >/tmp/cpu.log
st0=$(stat_cpu) t0=$EPOCHREALTIME
done_r=0
# rounds outermost, every size in each: a budget cut leaves the sizes alike
for r in $(seq "${AB_ROUNDS:-5}"); do
	[ -n "${AB_BUDGET:-}" ] && [ $((SECONDS - start)) -ge "$AB_BUDGET" ] && { echo "# AB_BUDGET: no round $r"; break; }
	for s in $sizes; do
		tv=AB_TOOLS_$s tools=${!tv:-${AB_TOOLS:-slide pt ucx}}
		read -ra tl <<<"$tools"
		nt=${#tl[@]}
		for k in $(seq 0 $((nt - 1))); do
			t=${tl[$(((r + k) % nt))]}
			read -r "g[$t,$s,$r]" "p[$t,$s,$r]" "z[$t,$s,$r]" "o[$t,$s,$r]" "h[$t,$s,$r]" <<<"$(one "$t" "$s")"
			echo "#   $(date -u +%T) size $s round $r $t: ${g[$t,$s,$r]} Gb/s, ${p[$t,$s,$r]} pkts/msg, stall ${z[$t,$s,$r]} s, own ${o[$t,$s,$r]}, rxe ${h[$t,$s,$r]}"
		done
	done
	done_r=$r
done
for s in $sizes; do
	tv=AB_TOOLS_$s tools=${!tv:-${AB_TOOLS:-slide pt ucx}}
	echo "## send $s bytes, $(count "$s") transfers per run, $done_r rounds"
	for t in $tools; do
		runs='' pk=
		for r in $(seq "$done_r"); do runs+=" ${g[$t,$s,$r]}"; pk+=" ${p[$t,$s,$r]}"; done
		echo "$t $runs" | awk -v pk="$pk" '{ k = 0; for (i = 2; i <= NF; i++) if ($i > 0) v[++k] = $i
			for (i = 2; i <= k; i++) for (j = i; j > 1 && v[j - 1] > v[j]; j--) { x = v[j]; v[j] = v[j - 1]; v[j - 1] = x }
			m = k == 0 ? 0 : k % 2 ? v[(k + 1) / 2] : (v[k / 2] + v[k / 2 + 1]) / 2
			printf "%-6s median %6.4f  runs:%s  pkts/msg:%s\n", $1, m, substr($0, length($1) + 1), pk }'
	done
	for t in $tools; do
		for ref in pt ucx slide; do
			[ "$t" = "$ref" ] || [ "$t" = pt ] || [ "$t" = ucx ] && continue
			case " $tools " in *" $ref "*) ;; *) continue ;; esac
			line="$t / $ref per round:"
			for r in $(seq "$done_r"); do
				line+=" $(awk -v a="${g[$t,$s,$r]}" -v b="${g[$ref,$s,$r]}" 'BEGIN { printf (a > 0 && b > 0) ? "%.2f" : "-", a / (b > 0 ? b : 1) }')"
			done
			echo "#   $line"
		done
	done
done
# CPU seconds per process, labelled COLUMN@SIZE:PROCESS; the guest's over all rounds
[ "${BENCH_CPU:-0}" = 1 ] && cpu_report "$st0" "$t0"
uptime
