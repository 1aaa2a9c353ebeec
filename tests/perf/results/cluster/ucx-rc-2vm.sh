#!/bin/bash
# UCX across the two cluster VMs (tests/vm/cluster.sh): UCP tag_bw attempts with RC data lanes
top=${top:-$(cd "$(dirname "$0")/../../../.." && pwd)} # the source tree; run as tests/vm/cluster.sh THIS from its build/ci
agent=$top/tests/vm/agent.sh
uptime
for n in node0 node1; do c="sysctl -qw net.core.netdev_max_backlog=100000"; if [ $n = node0 ]; then $c; else $agent $n "$c"; fi; done
export UCX_IB_GID_INDEX=$RXE_GID_INDEX
echo "=== ucx_info -d on node0"
timeout 60 ucx_info -d 2>&1 | grep -E "Transport:|Device:" | paste -sd' ' | sed 's/#//g' | tr -s ' ' | fold -w 200
n=0
tagbw() { # NAME UCX-ENV: 64 KiB tag_bw node0 -> node1
  n=$((n + 1)); echo "=== tag_bw 64 KiB node0 -> node1, attempt $n: $1"
  $agent node1 "$2 UCX_IB_GID_INDEX=$RXE_GID_INDEX timeout 35 ucx_perftest -p $((13500 + n))" >/tmp/u.srv 2>&1 &
  sleep 2
  env $2 timeout 30 ucx_perftest node1 -p $((13500 + n)) -t tag_bw -s 65536 -n 256 -w 16 -f >/tmp/u.out 2>&1
  echo "client rc $?"; wait
  grep -E "Final|ERROR|Fatal|rror" /tmp/u.out /tmp/u.srv | head -4
}
tagbw "UCX_TLS=rc_verbs,ud_verbs:aux,self, UCX_UD_VERBS_ETH_DGID_CHECK=n" "UCX_TLS=rc_verbs,ud_verbs:aux,self UCX_NET_DEVICES=rxe0:1 UCX_UD_VERBS_ETH_DGID_CHECK=n"
tagbw "UCX_TLS=ud_verbs,self, UCX_UD_VERBS_ETH_DGID_CHECK=n (UD data too)" "UCX_TLS=ud_verbs,self UCX_NET_DEVICES=rxe0:1 UCX_UD_VERBS_ETH_DGID_CHECK=n"
tagbw "UCX_TLS=rc_verbs,ud_verbs:aux,self (UD for wireup only)" "UCX_TLS=rc_verbs,ud_verbs:aux,self UCX_NET_DEVICES=rxe0:1"
tagbw "UCX_TLS=rc_verbs,tcp,self" "UCX_TLS=rc_verbs,tcp,self UCX_NET_DEVICES=rxe0:1,eth0"
echo "=== UCT put_bw zcopy rc_verbs 64 KiB"
$agent node1 "UCX_IB_GID_INDEX=$RXE_GID_INDEX timeout 45 ucx_perftest -x rc_verbs -d rxe0:1 -p 13599" >/tmp/u.srv 2>&1 &
sleep 2
timeout 40 ucx_perftest node1 -p 13599 -x rc_verbs -d rxe0:1 -t put_bw -D zcopy -s 65536 -n 256 -w 16 -f 2>&1 | grep -E "Final|rror"
wait
echo "=== Open MPI pml ucx, osu-like: uccl_perf p2p send 64K (1 round)"
for tls in "rc_verbs,ud_verbs:aux,self" "rc_verbs,tcp,self"; do
  echo "--- UCX_TLS=$tls"
  timeout 120 mpirun --hostfile $VM_HOSTFILE --map-by node -np 2 --bind-to none --mca pml ucx --mca osc ucx --mca btl self \
    -x UCX_TLS=$tls -x UCX_NET_DEVICES=rxe0:1,eth0 -x UCX_IB_GID_INDEX -x UCX_UD_VERBS_ETH_DGID_CHECK=n \
    $top/build/ci/tools/uccl_perf p2p --transport verbs --op send --min 64K --max 64K --iters 4 --window 16 --warmup 1 --rounds 1 >/tmp/b.out 2>&1
  echo "rc $?"; grep -v '^\[uccl' /tmp/b.out | grep -E '^#|^ *[0-9]|size|rror|Fatal' | head -12
done
uptime
