#!/bin/bash
# UCX on rxe in one VM (tests/vm/run.sh): ucx_info -d, then UCP tag_bw attempts with RC only
uptime
export UCX_IB_GID_INDEX=$RXE_GID_INDEX
echo "=== ucx_info -d (transports and devices)"
timeout 60 ucx_info -d 2>&1 | grep -E "Transport:|Device:|Memory domain:" | paste -sd' ' | sed 's/#//g' | tr -s ' ' | fold -w 200
n=0
tagbw() { # NAME ENV...: 64 KiB tag_bw rxe0 -> rxe1
  n=$((n + 1)); echo "=== tag_bw 64 KiB, attempt $n: $1"
  shift
  env "$@" UCX_IB_GID_INDEX=$RXE_GID_INDEX timeout 45 ucx_perftest -p $((13400 + n)) >/tmp/u.srv 2>&1 &
  sleep 1
  env "$@" UCX_IB_GID_INDEX=$RXE_GID_INDEX timeout 40 ucx_perftest 127.0.0.1 -p $((13400 + n)) -t tag_bw -s 65536 -n 256 -w 16 -f >/tmp/u.out 2>&1
  echo "client rc $?"; wait
  grep -E "^Final|ERROR|Fatal|rror" /tmp/u.out /tmp/u.srv | head -4
}
D0="UCX_NET_DEVICES=$RXE_DEV:1,veth0"
tagbw "UCX_TLS=rc_verbs,posix:aux,self (shared memory only for wireup)" UCX_TLS=rc_verbs,posix:aux,self
tagbw "UCX_TLS=rc_verbs,tcp:aux,self, all devices" UCX_TLS=rc_verbs,tcp:aux,self
tagbw "UCX_TLS=rc_verbs,tcp,self, UCX_NET_DEVICES=rxe0:1,lo" UCX_TLS=rc_verbs,tcp,self UCX_NET_DEVICES=$RXE_DEV:1,lo
tagbw "UCX_TLS=rc_verbs,ud_verbs:aux, RC timeout 8 s, UD timeout 60 s, rxe0 both sides" UCX_TLS=rc_verbs,ud_verbs:aux,self UCX_NET_DEVICES=$RXE_DEV:1 UCX_RC_VERBS_TIMEOUT=8s UCX_UD_VERBS_TIMEOUT=60s
echo "=== UCT put_bw zcopy rc_verbs 64 KiB (reference that ran before)"
timeout 45 ucx_perftest -x rc_verbs -d $RXE_DEV2:1 -p 13399 >/tmp/u.srv 2>&1 &
sleep 1
timeout 40 ucx_perftest 127.0.0.1 -p 13399 -x rc_verbs -d $RXE_DEV:1 -t put_bw -D zcopy -s 65536 -n 256 -w 16 -f 2>&1 | grep -E "^Final|rror"
wait
uptime
