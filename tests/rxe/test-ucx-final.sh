#!/bin/sh
# test-ucx-final.sh: ucx-final.awk reads ucx_perftest's overall bandwidth
# (the Final: line's column 7), not the last interval's (column 6), and a run
# without a Final: line as 0. No VM needed.
awk_file=$(dirname "$0")/ucx-final.awk
fail=0
expect() { # expect NAME WANT INPUT
	got=$(printf '%s\n' "$3" | awk -f "$awk_file")
	if [ "$got" = "$2" ]; then echo "PASS: $1"; else echo "FAIL: $1: got '$got', want '$2'"; fail=1; fi
}
# ucx_perftest 1.13's lines: progress lines, then Final:. The figures are a
# 256 KiB ucp_put_bw run of tests/perf/results/cluster/vm14/boot2.txt (last
# interval 8.26 MiB/s, overall 29.93 MiB/s); the latencies follow from them.
progress='                    40  31583.133  30266.585  30266.585      21.99      21.99          33          33'
final='Final:              64  31583.133  30266.585   8352.221       8.26      29.93          33         120'
expect "overall bandwidth, column 7" 0.2511 "$progress
$final"
expect "no Final: line (a failed run) reads 0" 0 "$progress
[1700000000.000000] [rxe-vm:123  :0]  perftest.c:405 client failed. connect() failed: Connection refused"
expect "no output reads 0" 0 ""
exit $fail
