#!/bin/bash
# UCX on rxe in one VM: same-boot uccl/perftest/ucx at 64 KiB, then UCP tag_bw attempts
top=/work/wt/clus7
uptime
echo "=== bench.sh 64 KiB write,send 1 round"
true
tagbw() { # NAME ENV...
  echo "=== tag_bw 64 KiB: $1"
  shift
  env "$@" UCX_NET_DEVICES=$RXE_DEV2:1,veth1 UCX_IB_GID_INDEX=$RXE_GID_INDEX timeout 40 ucx_perftest -p 13339 >/tmp/u.srv 2>&1 &
  sleep 1
  env "$@" UCX_NET_DEVICES=$RXE_DEV:1,veth0 UCX_IB_GID_INDEX=$RXE_GID_INDEX timeout 40 ucx_perftest 127.0.0.1 -p 13339 -t tag_bw -s 65536 -n 256 -w 16 -f >/tmp/u.out 2>&1
  echo "client rc $?"; wait
  grep -E "Final|ERROR|Fatal|rror" /tmp/u.out /tmp/u.srv | head -5
}
tagbw "UCX_TLS=rc_verbs,ud_verbs, UD timeout 600 s, RC timeout 8 s" UCX_TLS=rc_verbs,ud_verbs UCX_UD_VERBS_TIMEOUT=600s UCX_RC_VERBS_TIMEOUT=8s UCX_RC_VERBS_RETRY_COUNT=7
tagbw "UCX_TLS=rc_v,self (rc_verbs only)" UCX_TLS=rc_v,self UCX_RC_VERBS_TIMEOUT=8s
tagbw "UCX_TLS=ud_verbs only, UD timeout 600 s" UCX_TLS=ud_verbs UCX_UD_VERBS_TIMEOUT=600s
uptime
