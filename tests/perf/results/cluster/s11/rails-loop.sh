#!/bin/bash
# run as: cd build && RXE_VM_SHARE=$PWD/.. top_builddir=$PWD ../tests/vm/run.sh THIS TAG (LOGDIR: where the logs go)
# in the VM: test_verbs_rails again and again, each run's full log kept,
# until LOOP_BUDGET seconds of this hold have passed; while a run goes, the
# rail devices' QP states and counters every 3 s (kept only when it fails)
sysctl -qw net.core.netdev_max_backlog=100000 2>/dev/null
dir=${LOGDIR:-$PWD}
: "${top_builddir:?set top_builddir to the build directory}"
tag=$1
start=$(date +%s)
i=0
while :; do
  now=$(date +%s)
  [ $((now - start)) -gt ${LOOP_BUDGET:-350} ] && break
  i=$((i+1))
  log=$dir/run-$tag-$i.log side=$dir/side-$tag-$i.log
  t0=$(date +%s)
  UCCL_LOG_LEVEL=${LVL:-debug} timeout 300 "$top_builddir"/tests/unit/test_verbs_rails > $log 2>&1 &
  pid=$!
  : > $side
  while kill -0 $pid 2>/dev/null; do
    { echo "== +$(( $(date +%s) - t0 )) s"; rdma res show qp 2>&1 | grep -v "lqpn 1 " | grep -E "rxe2|rxe3|rxe0" ;
      for d in rxe0 rxe2; do echo "$d $(cd /sys/class/infiniband/$d/ports/1/hw_counters && grep -H . * 2>/dev/null | grep -v ':0$' | tr '\n' ' ')"; done; } >> $side 2>&1
    sleep 3
  done
  wait $pid; rc=$?
  grep -q "FAILED\|assert" $log || [ $rc != 0 ] || rm -f $side
  echo "run $tag-$i rc=$rc $(( $(date +%s) - t0 )) s: $(grep -E 'cases:' $log) | $(grep -E "after 'ip link set veth2 down':" $log | sed 's/^ *//')"
done
