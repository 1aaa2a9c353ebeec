#!/bin/bash
# run as: cd build && RXE_VM_SHARE=$PWD/.. top_builddir=$PWD ../tests/vm/run.sh THIS TAG (LOGDIR: where the logs go)
# in the VM: test_verbs_rails' case 3 alone ("rail 1 down mid-transfer"),
# RAILS_IB_TIMEOUT 14 and 17 in turns, until LOOP_BUDGET s have passed; per
# run the outcome and what rail 0's devices (rxe0 = rank 0's requester, rxe1
# its responder; rail 0 never goes down in this case) counted meanwhile
sysctl -qw net.core.netdev_max_backlog=100000 2>/dev/null
dir=${LOGDIR:-$PWD}
: "${top_builddir:?set top_builddir to the build directory}"
tag=$1
cnt() { local d=$1 c=$2; cat /sys/class/infiniband/$d/ports/1/hw_counters/$c 2>/dev/null || echo 0; }
names="rxe0:completer_retry_err rxe0:retry_exceeded_err rxe0:rcvd_seq_err rxe1:duplicate_request rxe1:out_of_seq_request rxe1:send_err rxe0:send_err"
snap() { for n in $names; do cnt "${n%%:*}" "${n#*:}"; done | paste -sd' '; }
echo "# columns after the outcome: deltas of $names"
start=$(date +%s)
i=0
while :; do
  [ $(( $(date +%s) - start )) -gt ${LOOP_BUDGET:-350} ] && break
  i=$((i+1))
  t=$([ $((i % 2)) = 1 ] && echo 14 || echo 17)
  log=$dir/case3-$tag-$i-ib$t.log
  read -ra b <<<"$(snap)"; t0=$(date +%s)
  RAILS_IB_TIMEOUT=$t UNIT_ONLY="rail 1 down mid-transfer" UCCL_LOG_LEVEL=debug timeout 200 \
    "$top_builddir"/tests/unit/test_verbs_rails > $log 2>&1
  rc=$?
  read -ra a <<<"$(snap)"; d=""
  for k in "${!a[@]}"; do d="$d $((a[k] - b[k]))"; done
  echo "case3 $tag-$i ib_timeout $t rc=$rc $(( $(date +%s) - t0 )) s | $(grep -E "after 'ip link set veth2 down':" $log | sed 's/^ *//') |$d"
done
