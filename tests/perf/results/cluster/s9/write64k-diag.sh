#!/bin/bash
# write64k-diag.sh: why is uccl's 64 KiB RDMA write behind ib_write_bw on
# rxe? In one VM boot, ROUNDS interleaved rounds (order rotating) of: perftest
# with 1 QP (its default) and with 2 QPs, UCX put_bw, and uccl_perf with its
# defaults (2 data QPs, window 16), with 1 data QP, and with a window of 64;
# each run moves BENCH_MIB MiB (default 16). Prints every run and the medians.
# Run from the build directory: tests/vm/run.sh ../tests/perf/results/cluster/s9/write64k-diag.sh
# (with RXE_VM_SHARE naming the source tree, as bench.sh does).
src=$(cd "$(dirname "$0")/../../../../.." && pwd)
BENCH_LIB=1 . "$src/tests/rxe/bench.sh"
export BENCH_MIB=${BENCH_MIB:-16}
size=${DIAG_SIZE:-65536} op=${DIAG_OP:-write}
names=(${DIAG_NAMES:-pt1 pt2 ucx uccl uccl_q1 uccl_w64})
run() {
	case $1 in
	pt1) perftest_gbps "$op" "$size" ;;
	pt2) BENCH_PT_ARGS="-q 2" perftest_gbps "$op" "$size" ;;
	ucx) ucx_gbps "$op" "$size" ;;
	uccl) uccl_gbps "$op" "$size" ;;
	uccl_q1) UCCL_VERBS_NUM_QPS=1 uccl_gbps "$op" "$size" ;;
	uccl_w64) BENCH_WINDOW=64 uccl_gbps "$op" "$size" ;;
	esac
}
uptime
declare -A res
for r in $(seq "${ROUNDS:-5}"); do
	for k in $(seq 0 $((${#names[@]} - 1))); do
		v=${names[$(((r + k) % ${#names[@]}))]}
		x=$(run "$v")
		res[$v]="${res[$v]} $x"
		echo "run $r $v $x"
	done
	echo "round $r done $(cut -d' ' -f1-3 /proc/loadavg)"
done
echo "# $op $size, Gb/s, $BENCH_MIB MiB per run; median [min-max] | runs"
for v in "${names[@]}"; do
	# shellcheck disable=SC2086
	printf '%s\n' ${res[$v]} | awk -v v="$v" '$1 > 0 { t[++k] = $1; all = all " " $1 } END {
		for (i = 2; i <= k; i++) for (j = i; j > 1 && t[j - 1] > t[j]; j--) { x = t[j]; t[j] = t[j - 1]; t[j - 1] = x }
		printf "%-9s %.4f [%.4f-%.4f] |%s\n", v, k % 2 ? t[(k + 1) / 2] : (t[k / 2] + t[k / 2 + 1]) / 2, t[1], t[k], all }'
done
uptime
