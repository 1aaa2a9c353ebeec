#!/bin/bash
# bench-send-ab.sh: uccl send before and after uccl_perf --sliding for send,
# against ib_send_bw -t W and ucx_perftest tag_bw -O W, in one boot of the
# Soft-RoCE VM (tests/vm/run.sh), every figure the rate on the veth pair
# (tests/rxe/bench.sh's functions, BENCH_WIRE=1, BENCH_SLIDING=1). Columns:
#   win   main's uccl_perf (AB_MAIN_PERF, default tools/uccl_perf-main in the
#         build directory: built from main before this branch), --op send
#         without --sliding: windows of 16, a 0-byte ack after each
#   slide this branch's tools/uccl_perf --op send --sliding: 16 sends in
#         flight, rank 1 keeps 16 receives posted, one ack at the end
#   eager as slide with UCCL_VERBS_EAGER=<size> (no rendezvous: one eager
#         control message per send); only where AB_TOOLS names it
#   pt    ib_send_bw -t 16 (server and client, the server's rx depth 16)
#   ucx   ucx_perftest tag_bw -O 16 (UCP over rc_verbs)
# Each round runs every column once, the first rotating. Each run also
# counts the packets the veth pair carried (both directions, RoCE ACKs
# included) per transfer ("pkts/msg"): over count + 32 transfers for
# uccl_perf (its warm-up and verify windows of 16), count + 16 for
# ucx_perftest (-w 16), count for ib_send_bw; each tool's connection setup
# is in it too.
# With BENCH_CPU=1 each size's block ends with the CPU seconds (user+system)
# of every process, per column (tests/rxe/cputime.sh, bench.sh's cpu_report),
# and the guest's busy and idle vCPU seconds over the block.
# Run from the build directory: ../tests/perf/results/cluster/vm15c/bench-send-ab.sh
#   AB_SIZES ("65536 262144"), AB_ROUNDS (3), AB_TOOLS ("win slide pt ucx"),
#   BENCH_MIB (MiB per run, 64), BENCH_CPU, AB_MAIN_PERF
here=$(cd "$(dirname "$0")" && pwd)
top_srcdir=$(cd "$here/../../../../.." && pwd)
builddir=$(cd "${top_builddir:-.}" && pwd)
. "$top_srcdir/tests/rxe/reexec.sh"
rxe_reexec "$here/bench-send-ab.sh" 3000
[ -z "${RXE_SKIP:-}" ] || { echo "bench: $RXE_SKIP"; exit 77; }
export BENCH_SLIDING=1 BENCH_WIRE=1
# shellcheck source-path=SCRIPTDIR source=../../../../rxe/bench.sh
BENCH_LIB=1 . "$top_srcdir/tests/rxe/bench.sh"
main_perf=${AB_MAIN_PERF:-$builddir/tools/uccl_perf-main}
tools=${AB_TOOLS:-win slide pt ucx}
read -ra tl <<<"$tools"
nt=${#tl[@]}
veth_pkts() { local a b; read -r a </sys/class/net/veth0/statistics/tx_packets; read -r b </sys/class/net/veth1/statistics/tx_packets; echo $((a + b)); }
one() { # one TOOL SIZE: "GBPS PKTS_PER_MSG"
	local p0 g n l0
	p0=$(veth_pkts) l0=$(wc -l 2>/dev/null </tmp/cpu.log)
	case $1 in
	win) g=$(perf=$main_perf BENCH_SLIDING=0 wire_gbps uccl_gbps send "$2") ;;
	slide) g=$(wire_gbps uccl_gbps send "$2") ;;
	eager) g=$(UCCL_VERBS_EAGER=$2 wire_gbps uccl_gbps send "$2") ;;
	pt) g=$(wire_gbps perftest_gbps send "$2") ;;
	ucx) g=$(wire_gbps ucx_gbps send "$2") ;;
	esac
	[ "$1" = pt ] && [ "$g" = 0 ] && { tail -n 4 /tmp/pt.srv | sed 's/^/#     ib_send_bw server: /'
		tail -n 6 /tmp/pt.cli | sed 's/^/#     ib_send_bw client: /'; } >&2
	# BENCH_CPU=1: the run's lines in /tmp/cpu.log get the column's name
	[ "${BENCH_CPU:-0}" = 1 ] && sed -i "$((l0 + 1)),\$ s/^/$1:/" /tmp/cpu.log
	case $1 in win | slide | eager) n=$(($(count "$2") + 32)) ;; ucx) n=$(($(count "$2") + 16)) ;; *) n=$(count "$2") ;; esac
	echo "$g $(awk -v a="$p0" -v b="$(veth_pkts)" -v n="$n" 'BEGIN { printf "%.1f", (b - a) / n }')"
}
echo "# $(date -u +%FT%TZ) $(uname -r); $(nproc) vCPUs; load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# send, ${AB_ROUNDS:-3} rounds x ($tools), the first rotating; Gb/s on the veth pair (1e9 bit/s)"
echo "# win: main's uccl_perf ($main_perf), windows of 16 + ack; slide: --sliding (16 in flight, 16 receives posted)"
[ -x "$main_perf" ] || echo "# no $main_perf: the win column reads 0"
for t in $tools; do one "$t" 65536 >/dev/null 2>&1; done
echo "# warm-up: one untimed run of each column (65536 bytes)"
for s in ${AB_SIZES:-65536 262144}; do
	declare -A g=() p=()
	: >/tmp/cpu.log
	st0=$(stat_cpu) t0=$EPOCHREALTIME
	for r in $(seq "${AB_ROUNDS:-3}"); do
		for k in $(seq 0 $((nt - 1))); do
			t=${tl[$(((r + k) % nt))]}
			read -r "g[$t,$r]" "p[$t,$r]" <<<"$(one "$t" "$s")"
			echo "#   size $s round $r $t: ${g[$t,$r]} Gb/s, ${p[$t,$r]} pkts/msg"
		done
	done
	echo "## send $s bytes, $(count "$s") transfers per run"
	for t in $tools; do
		runs='' pk=
		for r in $(seq "${AB_ROUNDS:-3}"); do runs+=" ${g[$t,$r]}"; pk+=" ${p[$t,$r]}"; done
		echo "$t $runs" | awk -v pk="$pk" '{ k = 0; for (i = 2; i <= NF; i++) if ($i > 0) v[++k] = $i
			for (i = 2; i <= k; i++) for (j = i; j > 1 && v[j - 1] > v[j]; j--) { x = v[j]; v[j] = v[j - 1]; v[j - 1] = x }
			m = k == 0 ? 0 : k % 2 ? v[(k + 1) / 2] : (v[k / 2] + v[k / 2 + 1]) / 2
			printf "%-6s median %6.4f  runs:%s  pkts/msg:%s\n", $1, m, substr($0, length($1) + 1), pk }'
	done
	for t in $tools; do
		for ref in pt ucx win; do
			[ "$t" = "$ref" ] || [ "$t" = pt ] || [ "$t" = ucx ] && continue
			case " $tools " in *" $ref "*) ;; *) continue ;; esac
			line="$t / $ref per round:"
			for r in $(seq "${AB_ROUNDS:-3}"); do
				line+=" $(awk -v a="${g[$t,$r]}" -v b="${g[$ref,$r]}" 'BEGIN { printf (a > 0 && b > 0) ? "%.2f" : "-", a / (b > 0 ? b : 1) }')"
			done
			echo "#   $line"
		done
	done
	[ "${BENCH_CPU:-0}" = 1 ] && cpu_report "$st0" "$t0"
	unset g p
done
uptime
