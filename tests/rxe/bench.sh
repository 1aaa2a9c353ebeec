#!/bin/bash
# bench.sh: uccl_perf p2p over verbs next to perftest (ib_write_bw,
# ib_read_bw, ib_send_bw) and UCX (ucx_perftest over its rc_verbs transport:
# put_bw for write, get for read, tag_bw for send) between the same two
# Soft-RoCE devices, same sizes and bytes, in one VM boot; prints a table of
# medians with ratios. A report, not a timed test. Without ucx_perftest
# (package ucx-utils) its column reads 0.
# Run from the build directory: ../tests/rxe/bench.sh
#   BENCH_SIZES, BENCH_OPS, BENCH_ROUNDS (default 5: uccl, perftest and UCX
#   take turns, the first of each round rotating, so that drift in the
#   emulated VM hits all alike)
# Runs in the project's Soft-RoCE VM (tests/vm/run.sh); exits 77 with the
# reason where this machine cannot boot it.
here=$(cd "$(dirname "$0")" && pwd)
top_srcdir=$(cd "$here/../.." && pwd)
builddir=$(cd "${top_builddir:-.}" && pwd)
if [ -z "${RXE_DEV:-}" ]; then
	vm=$top_srcdir/tests/vm/run.sh
	why=$("$vm" --check) || { echo "bench: $why"; exit 77; }
	cd "$builddir" && exec env top_builddir="$builddir" RXE_VM_TIMEOUT="${RXE_VM_TIMEOUT:-1500}" \
		RXE_VM_SHARE="$top_srcdir" "$vm" "$here/bench.sh"
fi
sysctl -qw net.core.netdev_max_backlog=100000 2>/dev/null # as check.sh: fewer rxe retries
sizes=${BENCH_SIZES:-65536 262144 1048576 4194304}
ops=${BENCH_OPS:-write read send}
rounds=${BENCH_ROUNDS:-5}
perf=$builddir/tools/uccl_perf
# Unbound, as perftest runs: Open MPI binds each of 2 ranks to a core by
# default, and a rank pinned to the vCPU where rxe's softirq work lands (the
# VM has 2) starves it: read 1 MiB went from 0.21-0.25 to 0.42-0.54 Gb/s.
mpiexec="mpirun --oversubscribe --allow-run-as-root --bind-to none --mca btl self,vader,tcp"
[ -x "$perf" ] || { echo "bench: $perf not built (needs MPI and tools/uccl_perf)"; exit 1; }

# Transfers per run, the same for both tools: about 64 MiB, a multiple of
# uccl_perf's window of 16, at least 2 windows.
count() { local n=$(( ((64 << 20) / $1 + 8) / 16 * 16 )); echo $(( n < 32 ? 32 : n > 1024 ? 1024 : n )); }

perftest_gbps() {  # perftest_gbps OP SIZE: BW average in Gb/s, rxe0 -> rxe1
	local n; n=$(count "$2")
	timeout 120 ib_$1_bw -d "$RXE_DEV2" -x "$RXE_GID_INDEX" -s "$2" -n "$n" -F --report_gbits >/tmp/pt.srv 2>&1 &
	sleep 1
	timeout 120 ib_$1_bw -d "$RXE_DEV" -x "$RXE_GID_INDEX" -s "$2" -n "$n" -F --report_gbits 127.0.0.1 2>&1 |
		awk -v s="$2" '$1 == s { print $4; ok = 1 } END { if (!ok) print 0 }'
	wait
}

# ucx_gbps OP SIZE: ucx_perftest's overall bandwidth (MiB/s) as Gb/s, rxe0 ->
# rxe1, over UCX's rc_verbs transport: write = UCT put_bw, read = UCT get
# (both zero-copy), send = UCP tag_bw (UCX_TLS=rc_verbs,ud_verbs:aux: UD only
# for UCP's connection setup, with UCX_UD_VERBS_ETH_DGID_CHECK=n: with the
# check on, UCX 1.13's UD drops every packet rxe delivers and dies with "UD
# endpoint ...: unhandled timeout error"; tcp is no auxiliary transport:
# "no auxiliary transport"). No -f: with it ucx_perftest prints its last line
# without the "Final:" label read here. 0 when it fails (its last lines go to
# stderr).
ucx_gbps() {
	local n t srv cli tls=rc_verbs; n=$(count "$2")
	command -v ucx_perftest >/dev/null || { echo 0; return; }
	case $1 in
	write) t="-t put_bw -D zcopy -x rc_verbs" srv="-x rc_verbs -d $RXE_DEV2:1" cli="-d $RXE_DEV:1" ;;
	read) t="-t get -D zcopy -x rc_verbs" srv="-x rc_verbs -d $RXE_DEV2:1" cli="-d $RXE_DEV:1" ;;
	*) t="-t tag_bw" srv="" cli="" tls=rc_verbs,ud_verbs:aux,self ;;
	esac
	# shellcheck disable=SC2086 # option words
	UCX_TLS=$tls UCX_NET_DEVICES=$RXE_DEV2:1 UCX_IB_GID_INDEX=$RXE_GID_INDEX UCX_UD_VERBS_ETH_DGID_CHECK=n \
		timeout 120 ucx_perftest $srv -p 13337 >/tmp/ucx.srv 2>&1 &
	sleep 1
	# shellcheck disable=SC2086
	UCX_TLS=$tls UCX_NET_DEVICES=$RXE_DEV:1 UCX_IB_GID_INDEX=$RXE_GID_INDEX UCX_UD_VERBS_ETH_DGID_CHECK=n \
		timeout 120 ucx_perftest 127.0.0.1 -p 13337 $t $cli -s "$2" -n "$n" -w 16 >/tmp/ucx.out 2>&1
	wait
	awk '$1 == "Final:" { printf "%.4f\n", $6 * 1048576 * 8 / 1e9; ok = 1 } END { if (!ok) print 0 }' /tmp/ucx.out
	grep -q '^Final:' /tmp/ucx.out || tail -3 /tmp/ucx.out /tmp/ucx.srv >&2
}

uccl_gbps() {  # uccl_gbps OP SIZE: uccl_perf's GB/s as Gb/s (rank 0 on rxe0, rank 1 on rxe1)
	rm -f /tmp/uccl.json
	timeout 300 $mpiexec -np 2 "$here/rank-dev.sh" "$perf" p2p --transport verbs --op "$1" \
		--min "$2" --max "$2" --iters $(( $(count "$2") / 16 )) --window 16 --warmup 1 --no-ref \
		--json /tmp/uccl.json >/tmp/uccl.out 2>&1
	python3 -c 'import json; r = json.load(open("/tmp/uccl.json"))["rows"][0]; print("%.4f" % (8 * r["uccl_gbps"]))' 2>/dev/null ||
		{ tail -5 /tmp/uccl.out >&2; echo 0; }
}

# median of the non-zero arguments (a failed run reads 0), 0 when none
median() { printf '%s\n' "$@" | awk '$1 > 0' | sort -g | awk '{ v[NR] = $1 } END {
	if (NR == 0) print 0; else if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

echo "# $rounds rounds per row, uccl, perftest and ucx in turns; medians in Gb/s (1e9 bit/s);"
echo "# x pt = uccl / perftest, x ucx = uccl / ucx_perftest (rc_verbs: write put_bw, read get, send tag_bw)"
printf "%-6s %8s %6s %9s %9s %9s %6s %6s   %s\n" op size count uccl perftest ucx "x pt" "x ucx" \
	"runs: uccl | perftest | ucx"
for op in $ops; do
	for s in $sizes; do
		us=() ps=() xs=()
		for r in $(seq "$rounds"); do
			for k in 0 1 2; do
				case $(((r + k) % 3)) in
				0) us+=("$(uccl_gbps "$op" "$s")") ;;
				1) ps+=("$(perftest_gbps "$op" "$s")") ;;
				2) xs+=("$(ucx_gbps "$op" "$s")") ;;
				esac
			done
		done
		u=$(median "${us[@]}") p=$(median "${ps[@]}") x=$(median "${xs[@]}")
		awk -v o="$op" -v s="$s" -v n="$(count "$s")" -v u="$u" -v p="$p" -v x="$x" \
			-v ur="${us[*]}" -v pr="${ps[*]}" -v xr="${xs[*]}" \
			'BEGIN { printf "%-6s %8d %6d %9.3f %9.3f %9.3f %6.2f %6.2f   %s | %s | %s\n", o, s, n, u, p, x,
			         (p > 0 ? u / p : 0), (x > 0 ? u / x : 0), ur, pr, xr }'
	done
done
uptime
