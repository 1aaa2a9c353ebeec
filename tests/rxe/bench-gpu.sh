#!/bin/bash
# bench-gpu.sh: GPU memory over verbs without GPUDirect RDMA (staged through
# pinned host buffers) next to host memory over verbs, uccl_perf p2p between
# the same two Soft-RoCE devices, same sizes and bytes, in one VM boot;
# prints a table of medians with the ratio GPU / host. Run from a fake GPU
# build (--without-cuda --without-rocm --enable-fake-gpu: the "GPU" memory
# is host memory the backend classifies as CUDA, its copies are CPU copies),
# so the ratio measures what staging costs the transport, not a GPU's copy
# engine. send: both ends in GPU memory (sender and receiver staged). write
# and read: rank 0's source or sink in GPU memory, the target's in host
# memory (uccl_perf --peer-mem host: a staged GPU region has no RDMA key, so
# one-sided transfers into it are refused). A report, not a timed test.
# Run from the build directory: ../tests/rxe/bench-gpu.sh
#   BENCH_SIZES (default 1M 4M 8M), BENCH_OPS (default send; also write read),
#   BENCH_ROUNDS (default 5: host and GPU take turns, the first of each pair
#   alternating, so that drift in the emulated VM hits both alike),
#   UCCL_VERBS_STAGE_CHUNK, UCCL_VERBS_STAGE_DEPTH and UCCL_VERBS_INFLIGHT pass through
# Runs in the project's Soft-RoCE VM (tests/vm/run.sh); exits 77 with the
# reason where this machine cannot boot it.
here=$(cd "$(dirname "$0")" && pwd)
top_srcdir=$(cd "$here/../.." && pwd)
builddir=$(cd "${top_builddir:-.}" && pwd)
. "$here/reexec.sh"
rxe_reexec "$here/bench-gpu.sh" 1500
[ -z "${RXE_SKIP:-}" ] || { echo "bench-gpu: $RXE_SKIP"; exit 77; }
cd "$builddir" || exit 1
sysctl -qw net.core.netdev_max_backlog=100000 2>/dev/null # as check.sh: fewer rxe retries
sizes=${BENCH_SIZES:-1048576 4194304 8388608}
ops=${BENCH_OPS:-send}
rounds=${BENCH_ROUNDS:-5}
perf=$builddir/tools/uccl_perf
mpiexec="mpirun --oversubscribe --allow-run-as-root --bind-to none --mca btl self,vader,tcp"
[ -x "$perf" ] || { echo "bench-gpu: $perf not built (needs MPI and tools/uccl_perf)"; exit 1; }
grep -q 'enable-fake-gpu' "$builddir/config.log" 2>/dev/null ||
	{ echo "bench-gpu: $builddir is not a fake GPU build (--enable-fake-gpu)"; exit 1; }

# Transfers per run: about 64 MiB, a multiple of the window of 16, >= 2 windows.
count() { local n=$(( ((64 << 20) / $1 + 8) / 16 * 16 )); echo $(( n < 32 ? 32 : n > 1024 ? 1024 : n )); }

uccl_gbps() {  # uccl_gbps MEM OP SIZE: uccl_perf's GB/s as Gb/s (rank 0 on rxe0, rank 1 on rxe1)
	local peer=
	[ "$1" = cuda ] && [ "$2" != send ] && peer="--peer-mem host"
	rm -f /tmp/uccl.json
	UCCL_VERBS_GDR=off timeout 300 $mpiexec -x UCCL_VERBS_GDR -x UCCL_VERBS_STAGE_CHUNK \
		-x UCCL_VERBS_STAGE_DEPTH -x UCCL_VERBS_INFLIGHT -x UCCL_TIMEOUT_MS -np 2 "$here/rank-dev.sh" "$perf" p2p --transport verbs \
		--mem "$1" $peer --op "$2" --min "$3" --max "$3" --iters $(( $(count "$3") / 16 )) --window 16 \
		--warmup 1 --no-ref --json /tmp/uccl.json >/tmp/uccl.out 2>&1
	python3 -c 'import json; r = json.load(open("/tmp/uccl.json"))["rows"][0]; print("%.4f" % (8 * r["uccl_gbps"]))' 2>/dev/null ||
		{ tail -5 /tmp/uccl.out >&2; echo 0; }
}

# median of the non-zero arguments (a failed run reads 0), 0 when none
median() { printf '%s\n' "$@" | awk '$1 > 0' | sort -g | awk '{ v[NR] = $1 } END {
	if (NR == 0) print 0; else if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

export UCCL_VERBS_STAGE_CHUNK=${UCCL_VERBS_STAGE_CHUNK:-1M} UCCL_VERBS_STAGE_DEPTH=${UCCL_VERBS_STAGE_DEPTH:-4}
# a window of 16 large transfers can take minutes in the emulated VM on a loaded host
export UCCL_TIMEOUT_MS=${UCCL_TIMEOUT_MS:-240000}
echo "# fake GPU memory (staged, UCCL_VERBS_GDR=off, STAGE_CHUNK $UCCL_VERBS_STAGE_CHUNK," \
	"STAGE_DEPTH $UCCL_VERBS_STAGE_DEPTH) vs host memory over verbs (rxe), one VM boot"
echo "# $rounds rounds per row, host and GPU in turns; medians in Gb/s (1e9 bit/s); runs listed"
printf "%-6s %9s %6s %10s %10s %6s   %s\n" op size count host gpu ratio "runs: host | gpu"
for op in $ops; do
	for s in $sizes; do
		hs=() gs=()
		for r in $(seq "$rounds"); do
			if [ $((r % 2)) = 1 ]; then
				hs+=("$(uccl_gbps host "$op" "$s")"); gs+=("$(uccl_gbps cuda "$op" "$s")")
			else
				gs+=("$(uccl_gbps cuda "$op" "$s")"); hs+=("$(uccl_gbps host "$op" "$s")")
			fi
		done
		h=$(median "${hs[@]}") g=$(median "${gs[@]}")
		awk -v o="$op" -v s="$s" -v n="$(count "$s")" -v h="$h" -v g="$g" -v hr="${hs[*]}" -v gr="${gs[*]}" \
			'BEGIN { printf "%-6s %9d %6d %10.3f %10.3f %6.2f   %s | %s\n", o, s, n, h, g,
			         (h > 0 ? g / h : 0), hr, gr }'
	done
done
