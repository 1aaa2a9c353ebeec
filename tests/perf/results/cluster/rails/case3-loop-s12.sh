#!/bin/bash
# run as: cd build/ci && RXE_VM_SHARE=$PWD/../.. top_builddir=$PWD RXE_VM_TIMEOUT=600 ../../tests/vm/run.sh THIS
# in the VM: test_verbs_rails' case 3 alone ("rail 1 down mid-transfer") at
# the test's own settings (IB timeout 17 since session 11), again and again
# until LOOP_BUDGET s have passed; per run the outcome, its time, and what
# rail 0's devices counted meanwhile (RC timeouts, duplicate requests)
sysctl -qw net.core.netdev_max_backlog=100000 2>/dev/null
: "${top_builddir:?set top_builddir to the build directory}"
cnt() { cat /sys/class/infiniband/$1/ports/1/hw_counters/$2 2>/dev/null || echo 0; }
names="rxe0:completer_retry_err rxe0:rcvd_seq_err rxe1:duplicate_request"
snap() { for n in $names; do cnt "${n%%:*}" "${n#*:}"; done | paste -sd' '; }
echo "# columns after the outcome: deltas of $names"
start=$(date +%s) i=0 pass=0
while [ $(( $(date +%s) - start )) -lt "${LOOP_BUDGET:-420}" ]; do
	i=$((i + 1))
	read -ra b <<<"$(snap)"; t0=$(date +%s)
	UNIT_ONLY="rail 1 down mid-transfer" timeout 200 "$top_builddir"/tests/unit/test_verbs_rails >/tmp/case3-$i.log 2>&1
	rc=$?
	read -ra a <<<"$(snap)"; d=""
	for k in "${!a[@]}"; do d="$d $((a[k] - b[k]))"; done
	[ $rc = 0 ] && pass=$((pass + 1))
	echo "case3 run $i rc=$rc $(( $(date +%s) - t0 )) s | $(grep -E "cases:" /tmp/case3-$i.log | tail -1) |$d"
	[ $rc = 0 ] || grep -vE "^ *\[uccl .*(debug|info) " /tmp/case3-$i.log | tail -15
done
echo "case3: $pass of $i runs passed"
