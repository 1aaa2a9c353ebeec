#!/bin/bash
# ab.sh: one Soft-RoCE VM boot (tests/vm/run.sh), write at 64 KiB and 256 KiB:
# uccl_perf (verbs, --sliding --window 16) against ucx_perftest ucp_put_bw
# (-O 16), each process on its own rxe device, in rounds whose order rotates.
# Every run is counted twice: on the veth pair (bench.sh's wire_gbps, the same
# yardstick for both tools) and by the tool itself. uccl runs once per setting
# in AB_UCCL_SETTINGS ("-" = defaults, else comma-separated VAR=VALUE).
# Run from the build directory:
#   ../tests/perf/results/cluster/vm14/ab.sh
# Settings: AB_ROUNDS (3), AB_SIZES ("65536 262144"), AB_BUDGET (s after which
# no new round starts, 400), AB_WARMUP (1: a round 0, see below), BENCH_MIB
# (MiB per run, 16; 64 gives runs of seconds, enough for the wire samples).
# summary.sh turns the output into the README's table.
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
top_srcdir=$(cd "$here/../../../../.." && pwd)
if [ -z "${RXE_DEV:-}" ]; then
	builddir=$PWD
	exec env top_builddir="$builddir" RXE_VM_TIMEOUT="${RXE_VM_TIMEOUT:-560}" \
		RXE_VM_SHARE="$top_srcdir" "$top_srcdir/tests/vm/run.sh" "$here/ab.sh"
fi
export BENCH_SLIDING=1 BENCH_WIRE=1 BENCH_LIB=1 BENCH_MIB=${BENCH_MIB:-16}
# shellcheck source-path=SCRIPTDIR source=../../../../rxe/bench.sh
. "$top_srcdir/tests/rxe/bench.sh"
start=$SECONDS
# CPU seconds of each process (user+system, /usr/bin/time) and of the whole
# guest (/proc/stat: softirq is where rxe does its packet work), per run.
mkdir -p /tmp/wrap
for tool in uccl_perf ucx_perftest; do
	real=$(command -v "$tool"); [ "$tool" = uccl_perf ] && real=$perf
	# shellcheck disable=SC2016 # expanded by the wrapper
	printf '#!/bin/sh\nwho=%s-${OMPI_COMM_WORLD_RANK:-$( [ "$1" = 127.0.0.1 ] && echo client || echo server)}\nexec /usr/bin/time -a -o /tmp/cpu.log -f "$who %%U %%S" %s "$@"\n' \
		"${tool%%_*}" "$real" >"/tmp/wrap/$tool"
	chmod +x "/tmp/wrap/$tool"
done
PATH=/tmp/wrap:$PATH perf=/tmp/wrap/uccl_perf
stat_cpu() { awk '$1 == "cpu" { print $2 + $3, $4, $8, $5 }' /proc/stat; }
cpu_delta() {  # cpu_delta "BEFORE": guest user, sys, softirq, idle in s since BEFORE
	local t=$1; stat_cpu | awk -v b="$t" -v hz="$(getconf CLK_TCK)" '{ split(b, a, " ")
		printf "guest u/s/si/idle %.1f/%.1f/%.1f/%.1f", ($1 - a[1]) / hz, ($2 - a[2]) / hz, ($3 - a[3]) / hz, ($4 - a[4]) / hz }'
}
settings=${AB_UCCL_SETTINGS:-"- UCCL_VERBS_NUM_QPS=1"}
echo "# $(date -u +%T) boot up; $(nproc) vCPUs; $(uname -r); host load $(cut -d' ' -f1-3 /proc/loadavg) (guest)"
ibv_devinfo -d "$RXE_DEV" | grep -E "active_mtu|max_mr_size" | tr -s ' \t' ' '
UCCL_NET_DEVICES=$RXE_DEV "$builddir/tools/uccl_info" -c 2>/dev/null | grep -E "VERBS_(NUM_QPS|CHUNK|TX_DEPTH|INFLIGHT|STRIPE|EAGER)="
echo "# round size tool setting wire_gbps own_gbps [ucx: moment_MiBps overall_MiBps] seconds | CPU s per process (user+sys), guest totals"
# Round 0 (AB_WARMUP=1, the default): one run of each at the first size, left
# out of the summary: the first run after the boot was the slowest (boot2.txt).
sizes=${AB_SIZES:-65536 262144}
for r in $(seq "$((${AB_WARMUP:-1} ? 0 : 1))" "${AB_ROUNDS:-3}"); do
	[ $((SECONDS - start)) -gt "${AB_BUDGET:-400}" ] && { echo "# budget spent, round $r not started"; break; }
	for s in $( [ "$r" = 0 ] && echo "${sizes%% *}" || echo "$sizes"); do
		read -ra runs <<<"ucx $settings"
		n=${#runs[@]}
		for k in $(seq 0 $((n - 1))); do
			t=${runs[$(((k + r) % n))]}
			t0=$SECONDS c0=$(stat_cpu)
			: >/tmp/own.log; : >/tmp/cpu.log
			if [ "$t" = ucx ]; then
				w=$(wire_gbps ucx_gbps write "$s")
				extra=$(awk '$1 == "Final:" { print $6, $7 }' /tmp/ucx.out)
			else
				# shellcheck disable=SC2046,SC2086 # the setting's words
				w=$( [ "$t" = - ] || export ${t//,/ }; wire_gbps uccl_gbps write "$s")
				extra=
			fi
			echo "$r $s $( [ "$t" = ucx ] && echo ucx || echo uccl) $t $w $(awk '{ print $2 }' /tmp/own.log) ${extra:--} $((SECONDS - t0))" \
				"| $(awk '/^(uccl|ucx)-/ { printf "%s %.1f ", $1, $2 + $3 }' /tmp/cpu.log)$(cpu_delta "$c0")"
		done
	done
done
echo "# $(date -u +%T) done after $((SECONDS - start)) s"
