#!/bin/bash
# bench-device.sh: in one boot of the Soft-RoCE VM (tests/vm/device-rails.sh
# on the device machine), in this order, each table's rows printed as they
# end (a run cut short by the VM's time keeps the ones before):
#  1. one rail against two, write (tests/rxe/bench-rails.sh, BENCH_OPS=write);
#  2. uccl against perftest and UCX with the same window (tests/rxe/bench.sh,
#     BENCH_SLIDING=1, ops BENCH_REF_OPS (default write), sizes BENCH_REF_SIZES, default 65536;
#     BENCH_REF_SIZES=none skips it);
#  3. the write table again for each setting of BENCH_VARIANTS (space
#     separated; each a comma-separated list of VAR=VALUE for bench-rails.sh,
#     e.g. "UCCL_VERBS_NUM_QPS=8 BENCH_MTU=9000");
#  4. the other ops of BENCH_OPS (default read send) at the first setting;
#  5. bench-rails.sh's A/B when BENCH_AB is set.
# BENCH_REF_FIRST=1 moves 2 before 1 (the row the call is for, before the
# tables that the VM's time may cut); BENCH_RAILS=0 leaves out 1 and 3-5 (the
# row alone). Their settings pass through (BENCH_CPU=1: the row's CPU
# seconds per process, bench.sh); BENCH_REF_ROUNDS (3) and BENCH_REF_MIB (64)
# are bench.sh's rounds and MiB per run (16 made runs of a third of a second
# at 0.36 Gb/s: session 13's row spread 2.5x; tests/perf/results/cluster/vm14/). Run from the build directory; exits
# 77 where the VM cannot boot.
here=$(cd "$(dirname "$0")" && pwd)
top_srcdir=$(cd "$here/../.." && pwd)
builddir=$(cd "${top_builddir:-.}" && pwd)
. "$here/reexec.sh"
rxe_reexec "$here/bench-device.sh" 1500
[ -z "${RXE_SKIP:-}" ] || { echo "bench: $RXE_SKIP"; exit 77; }
cd "$builddir" || exit 1
refs() {
	echo "# $(date -u +%T) bench.sh, ${BENCH_REF_OPS:-write}, BENCH_SLIDING=1; perftest: $(command -v ib_write_bw || echo none)," \
		"ucx_perftest: $(command -v ucx_perftest || echo none)"
	env BENCH_SLIDING=1 BENCH_OPS="${BENCH_REF_OPS:-write}" BENCH_SIZES="${BENCH_REF_SIZES:-65536}" BENCH_ROUNDS="${BENCH_REF_ROUNDS:-3}" \
		BENCH_MIB="${BENCH_REF_MIB:-64}" bash "$here/bench.sh"
	echo "# $(date -u +%T) bench.sh exit $?"
}
rc=0
want_refs=1
[ "${BENCH_REF_SIZES:-}" = none ] && want_refs=0
if [ "${BENCH_REF_FIRST:-0}" = 1 ] || [ "${BENCH_RAILS:-1}" = 0 ]; then
	[ $want_refs = 1 ] && refs
	want_refs=0
fi
[ "${BENCH_RAILS:-1}" = 0 ] && exit 0
env -u BENCH_AB BENCH_OPS=write bash "$here/bench-rails.sh"
rc=$?
echo "# $(date -u +%T) bench-rails.sh exit $rc"
[ $want_refs = 1 ] && refs
for v in ${BENCH_VARIANTS:-}; do
	echo "# $(date -u +%T) bench-rails.sh, write, with ${v//,/ }"
	# shellcheck disable=SC2046 # one VAR=VALUE per word
	env -u BENCH_AB BENCH_OPS=write BENCH_PROBE=0 $(echo "$v" | tr , ' ') bash "$here/bench-rails.sh"
	echo "# $(date -u +%T) bench-rails.sh exit $?"
done
rest=$(printf '%s\n' ${BENCH_OPS:-write read send} | grep -vx write | paste -sd' ')
if [ -n "$rest" ]; then
	env -u BENCH_AB BENCH_OPS="$rest" BENCH_PROBE=0 bash "$here/bench-rails.sh"
	echo "# $(date -u +%T) bench-rails.sh ($rest) exit $?"
fi
if [ -n "${BENCH_AB:-}" ]; then
	BENCH_AB_ONLY=1 bash "$here/bench-rails.sh"
	echo "# $(date -u +%T) bench-rails.sh (A/B) exit $?"
fi
exit $rc
