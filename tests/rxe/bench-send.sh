#!/bin/bash
# bench-send.sh: uccl send against ib_send_bw (and ucx_perftest tag_bw) in
# one boot of the Soft-RoCE VM, built to measure the per-round ratio and its
# spread. It grew in tests/perf/results/cluster/: vm16 (the columns), vm19
# (pinning, the u flag, round summaries), vm20 (each run's CPU split over its
# data phase, the e and x flags); those folders' runs used the versions in
# git history that their READMEs name. In the device guest: tests/vm/device-rails.sh with DEVICE_BENCH=bench-send.sh. Every figure is the
# rate on the veth pair (tests/rxe/bench.sh's functions, BENCH_WIRE=1,
# BENCH_SLIDING=1: 16 in flight everywhere, the receivers keeping 16
# receives posted). Columns are TOOL or TOOL_FLAGS:
#   TOOL   slide  uccl_perf --op send --sliding (libuccl's defaults)
#          pt     ib_send_bw -t 16
#          ucx    ucx_perftest tag_bw -O 16 (UCP over rc_verbs)
#   FLAGS  p      pinned: BENCH_PIN=$AB_PIN ("A B": the initiator on guest
#                 vCPU A, the target on B; uccl_perf's rank 0 / 1 and each
#                 reference's client / server alike)
#          s      short: AB_SHORT_MIB MiB per run instead of BENCH_MIB, and
#                 fast samples as f (8 MiB at 0.3 Gb/s is 0.2 s of data: at
#                 0.2 s samples the wire rate read 0.13-0.18 Gb/s where the
#                 tools' own figures read 0.29-0.32)
#          f      fast samples: BENCH_SAMPLE=$AB_FAST_SAMPLE (s)
#          u      one RC ACK timeout for every tool: AB_ACK_TIMEOUT (18: 4.096 us
#                 x 2^18 = 1.07 s, libuccl's default) as ib_send_bw's -u,
#                 UCCL_VERBS_IB_TIMEOUT and UCX_RC_TIMEOUT (without it
#                 ib_send_bw runs at its own default, 14: 67 ms)
#          e      uccl only: UCCL_VERBS_EAGER=$AB_EAGER (64K): the message goes
#                 copied in one control message, no RTS / CTS round
#          x      uccl only: the uccl_perf at $AB_PERF_X (another build)
#                 (e and x columns are compared with the references of their
#                 other flags: slide_ue with pt_u)
# Every uccl column is compared with the pt (and ucx) column of the same
# flags, so two tools always run under the same placement, sizes, message
# count and window. Each round runs every size and, per size, every column
# once; the first column rotates from round to round (with two columns the
# order alternates). The summary per size: each column's runs, median and
# spread (CV: standard deviation / mean), and per pair the per-round ratios
# with their median, quartiles and IQR (Q3 - Q1, quartiles interpolated),
# the rounds at >= 0.9, and the ratio of the medians.
# Run from the build directory (it boots the VM itself: tests/vm/run.sh), or
# in the device guest as tests/vm/device-rails.sh's DEVICE_BENCH.
#   AB_SIZES ("65536 262144"), AB_ROUNDS (10), AB_TOOLS ("slide pt"),
#   AB_TOOLS_<SIZE>, AB_PIN ("0 1"), AB_SHORT_MIB (8), AB_FAST_SAMPLE (0.05),
#   AB_ACK_TIMEOUT (18),
#   AB_WARMUP (columns of the untimed warm-up, default all), AB_BUDGET (s: no
#   round starts after it), AB_HWC (1: rxe's counters per run; 0: none),
#   BENCH_MIB (MiB per run, 32), BENCH_CPU=1 (CPU seconds per process).
here=$(cd "$(dirname "$0")" && pwd)
top_srcdir=$(cd "$here/../.." && pwd)
builddir=$(cd "${top_builddir:-.}" && pwd)
# shellcheck source-path=SCRIPTDIR source=reexec.sh
. "$top_srcdir/tests/rxe/reexec.sh"
rxe_reexec "$here/bench-send.sh" 3000
[ -z "${RXE_SKIP:-}" ] || { echo "bench: $RXE_SKIP"; exit 77; }
export BENCH_SLIDING=1 BENCH_WIRE=1 BENCH_MIB=${BENCH_MIB:-32}
# shellcheck source-path=SCRIPTDIR source=bench.sh
BENCH_LIB=1 . "$top_srcdir/tests/rxe/bench.sh"
# wire_gbps as bench.sh's, each sample also with the guest's CPU counters
# (/proc/stat's cpu lines, all vCPUs then each, ticks: user+nice, system,
# irq+softirq, idle+iowait) for cpu_window
wire_gbps() {
	local own pid
	(while :; do read -r a </sys/class/net/veth0/statistics/tx_bytes; read -r b </sys/class/net/veth1/statistics/tx_bytes
		l="$EPOCHREALTIME $((a + b))"
		while read -r c u n s i w q sq _; do
			case $c in cpu*) l+=" $((u + n)) $s $((q + sq)) $((i + w))" ;; *) break ;; esac
		done </proc/stat
		echo "$l"; sleep "${BENCH_SAMPLE:-0.2}"; done) >/tmp/wire.log &
	pid=$!
	own=$("$@")
	sleep 0.4
	kill "$pid"; wait "$pid" 2>/dev/null
	echo "${1%_gbps} $own" >>/tmp/own.log
	awk -v own="$own" -v want=$(($(count "$3") * $3)) -f "$top_srcdir/tests/rxe/wire-rate.awk" /tmp/wire.log
}
# cpu_window MSGS: the guest's CPU over the run's data phase (the samples
# around 5 % and 95 % of its bytes on the pair: about 0.9 x MSGS messages),
# "U/S/SI" in vCPU-ms per message (user, system, softirq; all processes and
# rxe alike), then "K1,K2": the kernel's share (system + softirq) of the two
# vCPUs where it was largest, in % of the window (with both sides of every
# tool spinning, a vCPU near 100 % kernel is one that rxe's work saturates)
cpu_window() {
	awk -v n="$1" -v hz="$(getconf CLK_TCK)" '{ t[NR] = $1; b[NR] = $2; nf = NF; for (c = 3; c <= NF; c++) v[NR, c] = $c }
		END { tot = NR ? b[NR] - b[1] : 0
			if (tot <= 0 || n <= 0 || nf < 6) { printf "-"; exit }
			for (i = 1; i < NR && b[i + 1] <= b[1] + 0.05 * tot; i++);
			for (j = NR; j > 1 && b[j - 1] >= b[1] + 0.95 * tot; j--);
			f = (b[j] - b[i]) / tot * n; k = 1000 / hz
			if (f <= 0 || j <= i) { printf "-"; exit }
			printf "%.2f/%.2f/%.2f", (v[j, 3] - v[i, 3]) * k / f, (v[j, 4] - v[i, 4]) * k / f, (v[j, 5] - v[i, 5]) * k / f
			m1 = m2 = 0
			for (c = 7; c + 3 <= nf; c += 4) { all = 0; for (x = 0; x < 4; x++) all += v[j, c + x] - v[i, c + x]
				ker = v[j, c + 1] - v[i, c + 1] + v[j, c + 2] - v[i, c + 2]
				p = all > 0 ? 100 * ker / all : 0
				if (p > m1) { m2 = m1; m1 = p } else if (p > m2) m2 = p }
			printf " ms/msg u/s/si, kernel %.0f,%.0f %%", m1, m2 }' /tmp/wire.log
}
start=$SECONDS
veth_pkts() { local a b; read -r a </sys/class/net/veth0/statistics/tx_packets; read -r b </sys/class/net/veth1/statistics/tx_packets; echo $((a + b)); }
hwc() { # "DEV:COUNTER VALUE" lines of both rxe devices
	local d
	[ "${AB_HWC:-1}" = 1 ] || return 0
	for d in "$RXE_DEV" "$RXE_DEV2"; do
		grep -H . /sys/class/infiniband/"$d"/ports/1/hw_counters/* 2>/dev/null |
			sed "s|^.*/hw_counters/\([^:]*\):|$d:\1 |"
	done
}
hwc_delta() { # the counters that moved, packets and sends aside
	echo "$1" >/tmp/hwc.0
	echo "$2" | awk 'NR == FNR { a[$1] = $2; next } { d = $2 - a[$1]
		if (d != 0 && $1 !~ /(sent_pkts|rcvd_pkts|rdma_sends|rdma_recvs)$/) { printf "%s%s=%d", n++ ? "," : "", $1, d } }
		END { if (!n) printf "-" }' /tmp/hwc.0 -
}
stall() { # the longest gap between samples of /tmp/wire.log that moved
	awk 'NR > 1 && $2 > b { if (seen && $1 - t > m) m = $1 - t; t = $1; seen = 1 } { b = $2 } NR == 1 { t = $1 }
		END { printf "%.2f", m }' /tmp/wire.log
}
one() { # one COLUMN SIZE: "GBPS PKTS_PER_MSG STALL_S OWN_FIGURE RXE_COUNTERS SECONDS CPU_MS_PER_MSG"
	local tool=${1%%_*} flags='' g n p0 h0 l0 t0
	[ "$tool" != "$1" ] && flags=${1#*_}
	local BENCH_PIN='' BENCH_MIB=$BENCH_MIB BENCH_SAMPLE=${BENCH_SAMPLE:-0.2}
	case $flags in *p*) BENCH_PIN=${AB_PIN:-0 1} ;; esac
	case $flags in *s*) BENCH_MIB=${AB_SHORT_MIB:-8} ;; esac
	case $flags in *[fs]*) BENCH_SAMPLE=${AB_FAST_SAMPLE:-0.05} ;; esac
	local BENCH_PT_ARGS=${BENCH_PT_ARGS:-} UCCL_VERBS_IB_TIMEOUT=${UCCL_VERBS_IB_TIMEOUT:-} UCX_RC_TIMEOUT=${UCX_RC_TIMEOUT:-}
	case $flags in *u*)
		BENCH_PT_ARGS+=" -u ${AB_ACK_TIMEOUT:-18}" UCCL_VERBS_IB_TIMEOUT=${AB_ACK_TIMEOUT:-18}
		UCX_RC_TIMEOUT=$(awk -v t="${AB_ACK_TIMEOUT:-18}" 'BEGIN { printf "%.0fus", 4.096 * 2 ^ t }') ;;
	esac
	local UCCL_VERBS_EAGER=${UCCL_VERBS_EAGER:-} perf=$perf
	case $flags in *e*) UCCL_VERBS_EAGER=${AB_EAGER:-64K} ;; esac
	case $flags in *x*) perf=${AB_PERF_X:?AB_PERF_X: the uccl_perf of the x columns} ;; esac
	[ -n "$UCCL_VERBS_EAGER" ] && export UCCL_VERBS_EAGER
	export BENCH_PIN BENCH_PT_ARGS
	[ -n "$UCCL_VERBS_IB_TIMEOUT" ] && export UCCL_VERBS_IB_TIMEOUT
	[ -n "$UCX_RC_TIMEOUT" ] && export UCX_RC_TIMEOUT
	p0=$(veth_pkts) l0=$(wc -l 2>/dev/null </tmp/cpu.log) h0=$(hwc) t0=$EPOCHREALTIME
	case $tool in
	slide) g=$(wire_gbps uccl_gbps send "$2") ;;
	pt) g=$(wire_gbps perftest_gbps send "$2") ;;
	ucx) g=$(wire_gbps ucx_gbps send "$2") ;;
	*) echo "bench-send: unknown column $1" >&2; g=0 ;;
	esac
	[ "${BENCH_CPU:-0}" = 1 ] && sed -i "$((l0 + 1)),\$ s/^/$1@$2:/" /tmp/cpu.log
	case $tool in slide) n=$(($(count "$2") + 32)) ;; ucx) n=$(($(count "$2") + 16)) ;; *) n=$(count "$2") ;; esac
	echo "$g $(awk -v a="$p0" -v b="$(veth_pkts)" -v n="$n" 'BEGIN { printf "%.1f", (b - a) / n }') $(stall)" \
		"$(awk 'END { print $2 == "" ? "none" : $2 }' /tmp/own.log) $(hwc_delta "$h0" "$(hwc)")" \
		"$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')" "$(cpu_window "$(count "$2")")"
}
# ratio_stats LABEL V...: "LABEL median M [Q1, Q3] IQR I, min-max, rounds at >= 0.9"
# over the values > 0 (quartiles interpolated between the sorted values)
ratio_stats() {
	echo "$@" | awk '{ k = 0; for (i = 2; i <= NF; i++) if ($i + 0 > 0) v[++k] = $i + 0
		for (i = 2; i <= k; i++) for (j = i; j > 1 && v[j - 1] > v[j]; j--) { x = v[j]; v[j] = v[j - 1]; v[j - 1] = x }
		if (!k) { printf "%s no rounds\n", $1; exit }
		for (i = 1; i <= k; i++) if (v[i] >= 0.9) ok++
		printf "%s median %.2f [Q1 %.2f, Q3 %.2f] IQR %.2f, min-max %.2f-%.2f, %d of %d rounds >= 0.9\n",
			$1, q(0.5), q(0.25), q(0.75), q(0.75) - q(0.25), v[1], v[k], ok, k }
		function q(p,   h, l) { h = (k - 1) * p + 1; l = int(h); return l >= k ? v[k] : v[l] + (h - l) * (v[l + 1] - v[l]) }'
}
med_ratio() { # med_ratio COLUMN REF SIZE: the ratio of the two columns' medians
	local a='' b='' r
	for r in $(seq "$done_r"); do a+=" ${g[$1,$3,$r]}" b+=" ${g[$2,$3,$r]}"; done
	awk -v a="$a" -v b="$b" 'function med(s,   v, k, i, j, x) { k = 0; n = split(s, w, " ")
			for (i = 1; i <= n; i++) if (w[i] > 0) v[++k] = w[i]
			for (i = 2; i <= k; i++) for (j = i; j > 1 && v[j - 1] > v[j]; j--) { x = v[j]; v[j] = v[j - 1]; v[j - 1] = x }
			return k == 0 ? 0 : k % 2 ? v[(k + 1) / 2] : (v[k / 2] + v[k / 2 + 1]) / 2 }
		BEGIN { x = med(a); y = med(b); printf "%s", (y > 0 ? sprintf("%.2f", x / y) : "-") }'
}
echo "# $(date -u +%FT%TZ) $(uname -r); $(nproc) vCPUs; load $(cut -d' ' -f1-3 /proc/loadavg); $(ibv_devinfo -d "$RXE_DEV" 2>/dev/null | awk '/active_mtu/ { print "RoCE MTU", $2 }')"
echo "# send, sliding, 16 in flight; ${AB_ROUNDS:-10} rounds, the first column rotating; Gb/s on the veth pair (1e9 bit/s)"
echo "# BENCH_MIB $BENCH_MIB, samples every ${BENCH_SAMPLE:-0.2} s, unpinned; column flags: p pinned to vCPUs ${AB_PIN:-0 1}," \
	"s ${AB_SHORT_MIB:-8} MiB, f samples every ${AB_FAST_SAMPLE:-0.05} s, u ACK timeout ${AB_ACK_TIMEOUT:-18}"
echo "# uccl settings: $(env | grep '^UCCL_' | paste -sd' ' || true)"
: >/tmp/cpu.log
for t in ${AB_WARMUP:-${AB_TOOLS:-slide pt}}; do one "$t" 65536 >/dev/null 2>&1; done
echo "# warm-up: one untimed run of ${AB_WARMUP:-each column} (65536 bytes)"
sizes=${AB_SIZES:-65536 262144}
declare -A g=() p=() z=() o=() h=() d=() c=()
: >/tmp/cpu.log
st0=$(stat_cpu) tw0=$EPOCHREALTIME
done_r=0
for r in $(seq "${AB_ROUNDS:-10}"); do
	[ -n "${AB_BUDGET:-}" ] && [ $((SECONDS - start)) -ge "$AB_BUDGET" ] && { echo "# AB_BUDGET: no round $r"; break; }
	for s in $sizes; do
		tv=AB_TOOLS_$s tools=${!tv:-${AB_TOOLS:-slide pt}}
		read -ra tl <<<"$tools"
		nt=${#tl[@]}
		for k in $(seq 0 $((nt - 1))); do
			t=${tl[$(((r + k) % nt))]}
			read -r "g[$t,$s,$r]" "p[$t,$s,$r]" "z[$t,$s,$r]" "o[$t,$s,$r]" "h[$t,$s,$r]" "d[$t,$s,$r]" "c[$t,$s,$r]" <<<"$(one "$t" "$s")"
			echo "#   $(date -u +%T) size $s round $r $t: ${g[$t,$s,$r]} Gb/s, ${p[$t,$s,$r]} pkts/msg," \
				"stall ${z[$t,$s,$r]} s, own ${o[$t,$s,$r]}, ${d[$t,$s,$r]} s, cpu ${c[$t,$s,$r]}," \
				"rxe ${h[$t,$s,$r]}"
		done
	done
	done_r=$r
done
for s in $sizes; do
	tv=AB_TOOLS_$s tools=${!tv:-${AB_TOOLS:-slide pt}}
	echo "## send $s bytes, $done_r rounds"
	for t in $tools; do
		runs=
		for r in $(seq "$done_r"); do runs+=" ${g[$t,$s,$r]}"; done
		echo "$t $runs" | awk '{ k = 0; for (i = 2; i <= NF; i++) if ($i > 0) { v[++k] = $i; m1 += $i; m2 += $i * $i }
			for (i = 2; i <= k; i++) for (j = i; j > 1 && v[j - 1] > v[j]; j--) { x = v[j]; v[j] = v[j - 1]; v[j - 1] = x }
			m = k == 0 ? 0 : k % 2 ? v[(k + 1) / 2] : (v[k / 2] + v[k / 2 + 1]) / 2
			cv = k > 1 ? sqrt((m2 - m1 * m1 / k) / (k - 1)) / (m1 / k) : 0
			printf "%-8s median %6.4f CV %.2f  runs:%s\n", $1, m, cv, substr($0, length($1) + 1) }'
		cpus=
		for r in $(seq "$done_r"); do read -r c1 _ _ _ c2 _ <<<"${c[$t,$s,$r]}" && cpus+=" $c1|$c2|${p[$t,$s,$r]}"; done
		# medians over the runs: the data phase's vCPU-ms per message, the kernel's
		# share of its busiest vCPU, and the packets per message
		echo "$t $cpus" | awk '{ k = 0; for (i = 2; i <= NF; i++) if (split($i, w, "|") == 3 && split(w[1], x, "/") == 3) {
				k++; for (j = 1; j <= 3; j++) a[j, k] = x[j]; split(w[2], y, ","); a[4, k] = y[1]; a[5, k] = w[3] }
			if (!k) exit
			for (j = 1; j <= 5; j++) { for (i = 1; i <= k; i++) v[i] = a[j, i]
				for (i = 2; i <= k; i++) for (l = i; l > 1 && v[l - 1] > v[l]; l--) { z = v[l]; v[l] = v[l - 1]; v[l - 1] = z }
				m[j] = k % 2 ? v[(k + 1) / 2] : (v[k / 2] + v[k / 2 + 1]) / 2 }
			printf "#   %-8s data phase, medians of %d runs: vCPU-ms per message user %.2f system %.2f softirq %.2f" \
				" (kernel %.2f); busiest vCPU %.0f %% kernel; %.1f pkts/msg\n", $1, k, m[1], m[2], m[3], m[2] + m[3], m[4], m[5] }'
	done
	for t in $tools; do
		tool=${t%%_*} suf=${t#"$tool"}
		[ "$tool" = slide ] || continue
		suf=${suf//[ex]/} && [ "$suf" = _ ] && suf=
		for ref in pt ucx slide; do
			[ "$ref$suf" = "$t" ] && continue # slide_ue / slide_u: the e column against main's path
			case " $tools " in *" $ref$suf "*) ;; *) continue ;; esac
			line=
			for r in $(seq "$done_r"); do
				line+=" $(awk -v a="${g[$t,$s,$r]}" -v b="${g[$ref$suf,$s,$r]}" 'BEGIN { printf (a > 0 && b > 0) ? "%.3f" : "-", a / (b > 0 ? b : 1) }')"
			done
			echo "#   $t / $ref$suf per round:$line"
			# shellcheck disable=SC2086 # the ratios: one word each
			echo "#   $(ratio_stats "$t/$ref$suf" $line); of the medians $(med_ratio "$t" "$ref$suf" "$s")"
		done
	done
done
if [ "${BENCH_CPU:-0}" = 1 ]; then
	cpu_report "$st0" "$tw0"
	# the same per process, user and system apart (whole runs: start-up included)
	awk '{ n[$1]++; u[$1] = u[$1] " " $2; s[$1] = s[$1] " " $3 }
		END { for (l in n) printf "#   CPU s %-16s user:%s | system:%s\n", l, u[l], s[l] }' /tmp/cpu.log | sort
fi
uptime
