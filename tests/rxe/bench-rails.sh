#!/bin/bash
# bench-rails.sh: uccl_perf p2p over verbs with two rails per engine
# (rank 0 on rxe0+rxe2, rank 1 on rxe1+rxe3: veth0-veth1 and veth2-veth3)
# against one rail (rxe0 <-> rxe1), taking turns in one VM boot; prints the
# medians in Gb/s and the ratio. A report, not a timed test. Slow in the
# emulated VM: one uccl_perf run of 4 MiB x 32 took about 55 s (rxe packet
# losses, each a 1.07 s ACK timeout, dominate), so the defaults are small.
# Run from the build directory: ../tests/rxe/bench-rails.sh
#   BENCH_SIZES (default 4194304), BENCH_OPS (write), BENCH_ROUNDS (3),
#   RXE_VM_CPUS (the VM's vCPUs, default 2)
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
sizes=${BENCH_SIZES:-4194304}
ops=${BENCH_OPS:-write}
rounds=${BENCH_ROUNDS:-3}
perf=$builddir/tools/uccl_perf
mpiexec="mpirun --oversubscribe --allow-run-as-root --bind-to none --mca btl self,vader,tcp"
[ -x "$perf" ] || { echo "bench: $perf not built (needs MPI and tools/uccl_perf)"; exit 1; }
dev0=$RXE_DEV dev1=$RXE_DEV2

gbps() {  # gbps RAILS OP SIZE: uccl_perf's GB/s as Gb/s over 1 or 2 rails, about 64 MiB moved
	local d0=$dev0 d1=$dev1 n=$(( (64 << 20) / $3 / 16 ))
	[ "$1" = 2 ] && d0=$dev0,$RXE_RAIL_DEV d1=$dev1,$RXE_RAIL_DEV2
	[ $n -lt 2 ] && n=2
	rm -f /tmp/uccl.json
	RXE_DEV=$d0 RXE_DEV2=$d1 timeout 300 $mpiexec -np 2 "$here/rank-dev.sh" "$perf" p2p \
		--transport verbs --op "$2" --min "$3" --max "$3" --iters $n --window 16 --warmup 1 \
		--no-ref --json /tmp/uccl.json >/tmp/uccl.out 2>&1
	python3 -c 'import json; r = json.load(open("/tmp/uccl.json"))["rows"][0]; print("%.4f" % (8 * r["uccl_gbps"]))' 2>/dev/null ||
		{ tail -5 /tmp/uccl.out >&2; echo 0; }
}
median() { printf '%s\n' "$@" | awk '$1 > 0' | sort -g | awk '{ v[NR] = $1 } END {
	if (NR == 0) print 0; else if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

echo "# $(nproc) vCPUs; $rounds rounds per row, one and two rails in turns; medians in Gb/s"
printf "%-6s %9s %9s %9s %6s   %s\n" op size "1 rail" "2 rails" ratio "runs: 1 rail | 2 rails"
for op in $ops; do
	for s in $sizes; do
		one=() two=()
		for r in $(seq "$rounds"); do
			if [ $((r % 2)) = 1 ]; then one+=("$(gbps 1 "$op" "$s")"); two+=("$(gbps 2 "$op" "$s")")
			else two+=("$(gbps 2 "$op" "$s")"); one+=("$(gbps 1 "$op" "$s")"); fi
		done
		m1=$(median "${one[@]}") m2=$(median "${two[@]}")
		printf "%-6s %9s %9s %9s %6s   %s | %s\n" "$op" "$s" "$m1" "$m2" \
			"$(awk -v a="$m1" -v b="$m2" 'BEGIN { if (a > 0) printf "%.2f", b / a; else print "-" }')" \
			"${one[*]}" "${two[*]}"
	done
done
