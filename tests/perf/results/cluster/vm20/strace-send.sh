#!/bin/bash
# strace-send.sh: the system calls a 64 KiB send costs, uccl_perf --sliding
# against ib_send_bw -t 16 (both at ACK timeout 18), in the Soft-RoCE VM:
# each tool runs N1 and N2 messages under strace -f -c (the host's strace,
# which the guest sees), and the difference of the two counts over N2 - N1
# is the calls per message, start-up and teardown cancelling out.
# Run from a build directory: ../../tests/perf/results/cluster/vm20/strace-send.sh
# (it boots the VM itself). STRACE_N1 (256), STRACE_N2 (1024), STRACE_SIZE (65536).
here=$(cd "$(dirname "$0")" && pwd)
top_srcdir=$(cd "$here/../../../../.." && pwd)
builddir=$(cd "${top_builddir:-.}" && pwd)
# shellcheck source-path=SCRIPTDIR source=../../../../rxe/reexec.sh
. "$top_srcdir/tests/rxe/reexec.sh"
rxe_reexec "$here/strace-send.sh" 900
[ -z "${RXE_SKIP:-}" ] || { echo "strace-send: $RXE_SKIP"; exit 77; }
n1=${STRACE_N1:-256} n2=${STRACE_N2:-1024} s=${STRACE_SIZE:-65536}
perf=$builddir/tools/uccl_perf
mpiexec="mpirun --oversubscribe --allow-run-as-root --bind-to none --mca btl self,vader,tcp"
out=/tmp/strace-send && mkdir -p $out
uccl() { # uccl N: strace of both ranks to $out/uccl-N-RANK
	# shellcheck disable=SC2086,SC2016 # mpiexec: command words; $OMPI_COMM_WORLD_RANK and $@: the rank's shell's
	UCCL_VERBS_IB_TIMEOUT=18 timeout 300 $mpiexec -x UCCL_VERBS_IB_TIMEOUT -np 2 sh -c \
		"exec strace -f -c -o $out/uccl-$1-"'$OMPI_COMM_WORLD_RANK "$@"' _ "$top_srcdir/tests/rxe/rank-dev.sh" \
		"$perf" p2p --transport verbs --op send --min "$s" --max "$s" --iters $(($1 / 16)) --window 16 --sliding \
		--warmup 1 --no-ref >"$out/uccl-$1.out" 2>&1 || tail -3 "$out/uccl-$1.out"
}
pt() { # pt N: strace of ib_send_bw's server (1) and client (0) to $out/pt-N-SIDE
	strace -f -c -o "$out/pt-$1-1" timeout 120 ib_send_bw -d "$RXE_DEV2" -x "$RXE_GID_INDEX" -s "$s" -n "$1" -F \
		--report_gbits -t 16 -u 18 >"$out/pt-$1.srv" 2>&1 &
	sleep 1
	strace -f -c -o "$out/pt-$1-0" timeout 120 ib_send_bw -d "$RXE_DEV" -x "$RXE_GID_INDEX" -s "$s" -n "$1" -F \
		--report_gbits -t 16 -u 18 127.0.0.1 >"$out/pt-$1.cli" 2>&1
	wait
}
calls() { awk '$1 ~ /^[0-9.]+$/ && NF >= 5 && $NF != "total" { print $NF, $4 }' "$1"; } # "SYSCALL CALLS" lines of strace -c
for n in $n1 $n2; do uccl "$n"; pt "$n"; done
echo "# $(date -u +%FT%TZ) $(nproc) vCPUs; $s bytes; system calls per message = (count at $n2 - count at $n1) / $((n2 - n1))"
for f in "uccl-0 uccl rank 0" "uccl-1 uccl rank 1" "pt-0 ib_send_bw client" "pt-1 ib_send_bw server"; do
	read -r k label <<<"$f"
	{ calls "$out/${k%-*}-$n1-${k#*-}" | sed 's/^/a /'; calls "$out/${k%-*}-$n2-${k#*-}" | sed 's/^/b /'; } |
		awk -v d=$((n2 - n1)) -v l="$label" '{ c[$2] += ($1 == "b" ? $3 : -$3) }
		END { for (k in c) { t += c[k] / d; if (c[k] / d >= 0.05 || c[k] / d <= -0.05) printf "%.2f|%-18s %-16s %7.2f per message\n", c[k] / d, l, k, c[k] / d }
			printf "%.2f|%-18s %-16s %7.2f per message\n", 1e9, l, "(all)", t }' | sort -t'|' -k1,1 -gr | cut -d'|' -f2-
done
