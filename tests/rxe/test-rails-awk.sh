#!/bin/sh
# test-rails-awk.sh: how bench-rails-ctl.sh reads its runs. rails-wire.awk:
# the rate of both rails over the time both ran (two jobs whose launches are
# not in step), the overlap, each rail's share and the union; one rail alone;
# no overlap; nothing moved. rails-trace.awk: rxe_requester's calls by
# context from ftrace lines. No VM needed.
here=$(dirname "$0")
fail=0
expect() { # expect NAME WANT GOT
	if [ "$3" = "$2" ]; then echo "PASS: $1"; else echo "FAIL: $1: got '$3', want '$2'"; fail=1; fi
}
# samples every 0.1 s: rail 0 moves 1.25e8 B/s (1 Gb/s) from t = 1 to 3 s,
# rail 1 the same from 1.5 to 3.5 s (its job started 0.5 s late)
samples() {
	awk -v late="$1" 'BEGIN { for (i = 0; i <= 40; i++) { t = i * 0.1
		a = t < 1 ? 0 : t > 3 ? 2.5e8 : (t - 1) * 1.25e8
		b = t < 1 + late ? 0 : t > 3 + late ? 2.5e8 : (t - 1 - late) * 1.25e8
		printf "%.1f %d %d\n", t, a, b } }'
}
expect "two rails, 0.5 s apart: 2 Gb/s over the common time, overlap 1.3 / 2.3 s" \
	"2.0000 0.57 1.0000 1.0000 1.6522" "$(samples 0.5 | awk -f "$here/rails-wire.awk")"
expect "one rail alone: its own rate, overlap 1" \
	"1.0000 1.00 1.0000 0.0000 1.0000" "$(samples 0.5 | awk '{ print $1, $2, 0 }' | awk -f "$here/rails-wire.awk")"
expect "two rails that never ran together: 0 for the common time; the union: 2.375e8 + 1.1875e8 B in 1.1-3.95 s" \
	"0 0 0 0 1.0000" "$(samples 2.0 | awk -f "$here/rails-wire.awk")"
# uccl_perf --iters 1: rail 0 moves 2.5e8 B timed (1 to 3 s), then 2.5e8 B
# more to verify (3.5 to 5.5 s); part=0.5: the timed half alone, 1 Gb/s
expect "part=0.5: the timed half of the bytes, not the verify window and the gap before it" \
	"1.0000 1.00 1.0000 0.0000 1.0000" "$(awk 'BEGIN { for (i = 0; i <= 60; i++) { t = i * 0.1
		a = t < 1 ? 0 : t < 3 ? (t - 1) * 1.25e8 : t < 3.5 ? 2.5e8 : t < 5.5 ? 2.5e8 + (t - 3.5) * 1.25e8 : 5e8
		printf "%.1f %d 0\n", t, a } }' | awk -v part=0.5 -f "$here/rails-wire.awk")"
expect "nothing moved: zeros" "0 0 0 0 0" "$(printf '0.0 5 5\n0.1 5 5\n0.2 5 5\n' | awk -f "$here/rails-wire.awk")"
trace='# tracer: function
#           TASK-PID     CPU#  |||||  TIMESTAMP  FUNCTION
       uccl_perf-1234    [001] .....   123.456: rxe_requester <-rxe_do_task
       uccl_perf-1234    [001] .....   123.457: rxe_requester <-rxe_do_task
       uccl_perf-1235    [001] ..s1.   123.458: rxe_requester <-rxe_do_task
     ksoftirqd/1-19      [001] ..s..   123.459: rxe_requester <-rxe_do_task
          <idle>-0       [000] ..s1.   123.460: rxe_requester <-rxe_do_task
   kworker/0:1-40      [000] .....   123.461: rxe_requester <-rxe_do_task
     ib_write_bw-77      [000] .N...   123.462: rxe_requester <-rxe_do_task
           mpirun-88     [000] ..s..   123.463: rxe_requester <-rxe_do_task'
expect "requester calls by context" \
	"8 calls; tool 38%; tool-softirq 12%; ksoftirqd 12%; kworker 12%; idle-softirq 12%; other-softirq 12%; 3 tool threads" \
	"$(printf '%s\n' "$trace" | awk -f "$here/rails-trace.awk")"
expect "no trace lines: 0 calls" "0 calls; 0 tool threads" "$(printf '# tracer: function\n' | awk -f "$here/rails-trace.awk")"
exit $fail
