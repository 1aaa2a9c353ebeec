#!/bin/sh
# test-rank-pin.sh: BENCH_PIN="A B" puts uccl_perf's ranks where bench.sh puts
# each reference's client and server: rank-dev.sh runs even ranks on CPU A and
# odd ranks on CPU B (taskset), and without BENCH_PIN leaves the affinity
# alone. No VM: the ranks' program here prints its allowed CPUs. Skipped (77)
# without taskset or with fewer than 2 CPUs.
here=$(dirname "$0")
fail=0
command -v taskset >/dev/null || { echo "SKIP: no taskset"; exit 77; }
[ "$(nproc)" -ge 2 ] || { echo "SKIP: fewer than 2 CPUs"; exit 77; }
expect() { # expect NAME WANT GOT
	if [ "$3" = "$2" ]; then echo "PASS: $1"; else echo "FAIL: $1: got '$3', want '$2'"; fail=1; fi
}
# shellcheck disable=SC2016 # awk's and the inner shell's text, not expanded here
cpus() { # cpus RANK [BENCH_PIN]: the CPUs rank RANK may run on, under rank-dev.sh
	OMPI_COMM_WORLD_RANK=$1 BENCH_PIN=${2:-} "$here/rank-dev.sh" \
		awk '/^Cpus_allowed_list/ { print $2 }' /proc/self/status
}
all=$(awk '/^Cpus_allowed_list/ { print $2 }' /proc/self/status)
expect "rank 0, BENCH_PIN='1 0': CPU 1" 1 "$(cpus 0 '1 0')"
expect "rank 1, BENCH_PIN='1 0': CPU 0" 0 "$(cpus 1 '1 0')"
expect "rank 3, BENCH_PIN='0 1': CPU 1" 1 "$(cpus 3 '0 1')"
expect "rank 1 without BENCH_PIN: every CPU this test may use" "$all" "$(cpus 1)"
out=$(OMPI_COMM_WORLD_RANK=0 BENCH_PIN=3 "$here/rank-dev.sh" echo ran 2>&1)
expect "BENCH_PIN=3 (one vCPU): refused, the program not run" \
	"rank-dev.sh: BENCH_PIN='3': want two vCPUs, \"A B\"" "$out"
OMPI_COMM_WORLD_RANK=1 BENCH_PIN='0 1 2' "$here/rank-dev.sh" true 2>/dev/null
expect "BENCH_PIN='0 1 2': exit status 2" 2 $?
# shellcheck disable=SC2016
expect "the device still follows the rank" rxe1 \
	"$(OMPI_COMM_WORLD_RANK=1 BENCH_PIN='0 1' "$here/rank-dev.sh" sh -c 'echo $UCCL_NET_DEVICES')"
# shellcheck disable=SC2016 # bench.sh's text, not expanded here
# bench.sh pins each reference's client (0) and server (1) the same way
for w in 'perftest-server) $(pin 1)' 'perftest-client) $(pin 0)' 'ucx-server) $(pin 1)' 'ucx-client) $(pin 0)'; do
	grep -qF "$w" "$here/bench.sh" || { echo "FAIL: bench.sh lacks '$w'"; fail=1; }
done
exit $fail
