#!/bin/bash
# bench.sh: uccl_perf p2p over verbs next to perftest (ib_write_bw,
# ib_read_bw, ib_send_bw) between the same two Soft-RoCE devices, same sizes,
# in one VM boot; prints a table with ratios. A report, not a timed test.
# Run from the build directory: ../tests/rxe/bench.sh   (BENCH_SIZES, BENCH_OPS)
# The VM script: RXE_VM, default the source tree's sibling ../shared/rxe-vm.
here=$(cd "$(dirname "$0")" && pwd)
top_srcdir=$(cd "$here/../.." && pwd)
builddir=$(cd "${top_builddir:-.}" && pwd)
if [ -z "${RXE_DEV:-}" ]; then
	vm=${RXE_VM:-$top_srcdir/../shared/rxe-vm}/run-in-rxe-vm.sh
	[ -x "$vm" ] || { echo "bench: the Soft-RoCE VM script $vm is missing (set RXE_VM)"; exit 1; }
	cd "$builddir" && exec env top_builddir="$builddir" RXE_VM_TIMEOUT="${RXE_VM_TIMEOUT:-900}" \
		"$vm" "$here/bench.sh"
fi
sysctl -qw net.core.netdev_max_backlog=100000 2>/dev/null # as check.sh: fewer rxe retries
sizes=${BENCH_SIZES:-65536 262144 1048576 4194304}
ops=${BENCH_OPS:-write read send}
perf=$builddir/tools/uccl_perf
mpiexec="mpirun --oversubscribe --allow-run-as-root --mca btl self,vader,tcp"
[ -x "$perf" ] || { echo "bench: $perf not built (needs MPI and tools/uccl_perf)"; exit 1; }

iters() { echo $(( (64 << 20) / $1 < 20 ? 20 : ((64 << 20) / $1 > 1000 ? 1000 : (64 << 20) / $1) )); }

perftest_gbps() {  # perftest_gbps OP SIZE: BW average in Gb/s, rxe0 -> rxe1
	local n; n=$(iters "$2")
	timeout 120 ib_$1_bw -d "$RXE_DEV2" -x "$RXE_GID_INDEX" -s "$2" -n "$n" -F --report_gbits >/tmp/pt.srv 2>&1 &
	sleep 1
	timeout 120 ib_$1_bw -d "$RXE_DEV" -x "$RXE_GID_INDEX" -s "$2" -n "$n" -F --report_gbits 127.0.0.1 2>&1 |
		awk -v s="$2" '$1 == s { print $4 }'
	wait
}

uccl_gbps() {  # uccl_gbps OP SIZE: uccl_perf's GB/s as Gb/s (rank 0 on rxe0, rank 1 on rxe1)
	local n; n=$(( $(iters "$2") / 16 )); [ $n -lt 2 ] && n=2
	rm -f /tmp/uccl.json
	timeout 300 $mpiexec -np 2 "$here/rank-dev.sh" "$perf" p2p --transport verbs --op "$1" \
		--min "$2" --max "$2" --iters "$n" --json /tmp/uccl.json >/tmp/uccl.out 2>&1
	python3 -c 'import json; r = json.load(open("/tmp/uccl.json"))["rows"][0]; print("%.4f" % (8 * r["uccl_gbps"]))' 2>/dev/null ||
		{ tail -5 /tmp/uccl.out >&2; echo 0; }
}

printf "%-6s %10s %14s %14s %8s\n" op size "uccl Gb/s" "perftest Gb/s" ratio
for op in $ops; do
	for s in $sizes; do
		u=$(uccl_gbps "$op" "$s"); p=$(perftest_gbps "$op" "$s")
		awk -v o="$op" -v s="$s" -v u="$u" -v p="$p" \
			'BEGIN { printf "%-6s %10d %14.3f %14.3f %8.2f\n", o, s, u, p, (p > 0 ? u / p : 0) }'
	done
done
