#!/bin/bash
# write64k-sliding.sh: in the Soft-RoCE VM, uccl_perf write against UCP put_bw
# and ib_write_bw, each tool both ways: as bench.sh ran them (uccl_perf drains
# each window of 16; ucx_perftest and perftest keep their own depths) and
# with BENCH_SLIDING=1 (all three keep 16 in flight: uccl_perf --sliding,
# ucx_perftest -O 16, perftest -t 16). Every figure is the rate on the veth
# pair (BENCH_WIRE=1). The order of the six runs rotates every round.
#   cd build && RXE_VM_SHARE=$PWD/.. ../tests/vm/run.sh \
#     ../tests/perf/results/cluster/s11/write64k-sliding.sh
# SIZES (65536), ROUNDS (4), BENCH_MIB (16) as bench.sh.
here=$(cd "$(dirname "$0")" && pwd)
export BENCH_LIB=1 BENCH_WIRE=1 BENCH_MIB=${BENCH_MIB:-16}
# shellcheck source=../../../../rxe/bench.sh
. "$here/../../../../rxe/bench.sh"
names=(uccl uccl-slide ucx ucx-O16 pt pt-t16)
run_one() { # run_one K OP SIZE
	case $1 in
	0) BENCH_SLIDING=0 wire_gbps uccl_gbps "$2" "$3" ;;
	1) BENCH_SLIDING=1 wire_gbps uccl_gbps "$2" "$3" ;;
	2) BENCH_SLIDING=0 wire_gbps ucx_gbps "$2" "$3" ;;
	3) BENCH_SLIDING=1 wire_gbps ucx_gbps "$2" "$3" ;;
	4) BENCH_SLIDING=0 wire_gbps perftest_gbps "$2" "$3" ;;
	5) BENCH_SLIDING=1 wire_gbps perftest_gbps "$2" "$3" ;;
	esac
}
echo "# $(uptime)"
echo "# Gb/s on the veth pair (wire_gbps); columns: ${names[*]}; the tools' own figures after '|'"
for s in ${SIZES:-65536}; do
	for r in $(seq "${ROUNDS:-4}"); do
		got=() order=()
		: >/tmp/own.log
		for k in 0 1 2 3 4 5; do
			j=$(((k + r) % 6))
			order+=("${names[$j]}")
			got[$j]=$(run_one "$j" write "$s")
		done
		echo "write $s round $r: ${got[*]} | run order ${order[*]}, own figures $(paste -sd' ' /tmp/own.log)"
	done
done
echo "# $(uptime)"
