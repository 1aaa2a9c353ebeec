#!/bin/bash
# ucx-diag.sh: what does ucx_perftest's put_bw measure on rxe in one VM?
# For each run: the figure the tool prints (Gb/s), its wall time, and the
# deltas of both rxe devices' packet counters and both veths' byte counters,
# which say which device carried the traffic and whether it crossed the veth
# pair. Runs: ib_write_bw; UCT put_bw as bench.sh ran it (client -d rxe0,
# server -d rxe1); the same with 4x the iterations; UCP ucp_put_bw with
# UCX_NET_DEVICES=rxe0 / rxe1 per process; UCP tag_bw; uccl_perf write.
# Run from the build directory: tests/vm/run.sh ../tests/perf/results/cluster/s10/ucx-diag.sh
# (with RXE_VM_SHARE naming the source tree, as bench.sh does).
src=$(cd "$(dirname "$0")/../../../../.." && pwd)
BENCH_LIB=1 . "$src/tests/rxe/bench.sh"
export BENCH_MIB=${BENCH_MIB:-16}
size=${DIAG_SIZE:-65536}
n=$(count "$size")
uptime
ucx_info -v | head -1
echo "# ucx_info -d: transports and devices"
ucx_info -d 2>/dev/null | grep -E "Transport:|Device:" | sed 's/#//' | paste -sd' ' | tr -s ' ' | fold -w 160
echo "# UCP's protocol thresholds on rc_verbs (ucx_info -e -u t, UCX_TLS as the references use)"
UCX_TLS=rc_verbs,ud_verbs:aux,self UCX_NET_DEVICES=$RXE_DEV:1 UCX_IB_GID_INDEX=$RXE_GID_INDEX UCX_UD_VERBS_ETH_DGID_CHECK=n \
	timeout 60 ucx_info -e -u t 2>&1 | grep -E "tag_send|put|get|rndv|lane" | head -20
hc=/sys/class/infiniband
snap() {
	for d in $RXE_DEV $RXE_DEV2; do
		for c in sent_pkts rcvd_pkts; do cat $hc/$d/ports/1/hw_counters/$c 2>/dev/null || echo 0; done
	done
	for v in veth0 veth1; do cat /sys/class/net/$v/statistics/tx_bytes 2>/dev/null || echo 0; done
}
measure() { # measure NAME CMD...: CMD prints Gb/s
	local a b t0 t1 g
	a=($(snap)); t0=$(date +%s.%N)
	g=$("${@:2}")
	t1=$(date +%s.%N); b=($(snap))
	printf "%-22s %8s Gb/s %6.1f s | rxe0 sent %6d rcvd %6d | rxe1 sent %6d rcvd %6d | veth0 tx %9d B veth1 tx %9d B\n" \
		"$1" "$g" "$(awk -v a="$t0" -v b="$t1" "BEGIN { print b - a }")" $((b[0] - a[0])) $((b[1] - a[1])) $((b[2] - a[2])) $((b[3] - a[3])) \
		$((b[4] - a[4])) $((b[5] - a[5]))
}
ucx_run() { # ucx_run SERVER-ENV CLIENT-ENV CLIENT-ARGS: Gb/s from the client's Final line
	env $1 UCX_IB_GID_INDEX=$RXE_GID_INDEX UCX_UD_VERBS_ETH_DGID_CHECK=n \
		timeout 120 ucx_perftest $SRV_ARGS -p 13339 >/tmp/d.srv 2>&1 &
	sleep 1
	env $2 UCX_IB_GID_INDEX=$RXE_GID_INDEX UCX_UD_VERBS_ETH_DGID_CHECK=n \
		timeout 120 ucx_perftest 127.0.0.1 -p 13339 $3 >/tmp/d.out 2>&1
	wait
	awk '$1 == "Final:" { printf "%.4f\n", $6 * 1048576 * 8 / 1e9; ok = 1 } END { if (!ok) print 0 }' /tmp/d.out
	grep -q '^Final:' /tmp/d.out || tail -3 /tmp/d.out /tmp/d.srv >&2
}
U="UCX_TLS=rc_verbs,ud_verbs:aux,self"
echo "# $size B, $n iterations (4x for the one so named), $BENCH_MIB MiB per run"
for r in $(seq "${ROUNDS:-2}"); do
	measure "ib_write_bw" perftest_gbps write "$size"
	SRV_ARGS="-x rc_verbs -d $RXE_DEV2:1" measure "uct put_bw (bench.sh)" ucx_run "" "" \
		"-t put_bw -D zcopy -x rc_verbs -d $RXE_DEV:1 -s $size -n $n -w 16"
	SRV_ARGS="-x rc_verbs -d $RXE_DEV2:1" measure "uct put_bw 4x iters" ucx_run "" "" \
		"-t put_bw -D zcopy -x rc_verbs -d $RXE_DEV:1 -s $size -n $((4 * n)) -w 16"
	SRV_ARGS="" measure "ucp_put_bw rxe0->rxe1" ucx_run "$U UCX_NET_DEVICES=$RXE_DEV2:1" \
		"$U UCX_NET_DEVICES=$RXE_DEV:1" "-t ucp_put_bw -s $size -n $n -w 16"
	SRV_ARGS="" measure "ucp tag_bw rxe0->rxe1" ucx_run "$U UCX_NET_DEVICES=$RXE_DEV2:1" \
		"$U UCX_NET_DEVICES=$RXE_DEV:1" "-t tag_bw -s $size -n $n -w 16"
	measure "uccl_perf write" uccl_gbps write "$size"
	SRV_ARGS="" measure "ucp_get rxe0<-rxe1" ucx_run "$U UCX_NET_DEVICES=$RXE_DEV2:1" \
		"$U UCX_NET_DEVICES=$RXE_DEV:1" "-t ucp_get -s $size -n $n -w 16"
	measure "ib_read_bw" perftest_gbps read "$size"
	echo "round $r done, guest load $(cut -d' ' -f1-3 /proc/loadavg)"
done
echo "# UCT put_bw's server with UCX_LOG_LEVEL=debug: which device it opened"
SRV_ARGS="-x rc_verbs -d $RXE_DEV2:1" ucx_run "UCX_LOG_LEVEL=debug" "" \
	"-t put_bw -D zcopy -x rc_verbs -d $RXE_DEV:1 -s $size -n 64 -w 4" >/dev/null
grep -oE "rxe[0-9]:1|dev_name[^,]*|iface[^ ]* .*rxe[0-9][^ ]*" /tmp/d.srv | sort | uniq -c | head -8
uptime
