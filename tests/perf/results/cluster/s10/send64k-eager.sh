#!/bin/bash
# send64k-eager.sh: across the two VMs (tests/vm/cluster.sh, one rank per
# node), uccl send of 64 KiB with the default eager limit (UCCL_VERBS_EAGER
# 4K: a rendezvous, RTS / CTS / write) and with UCCL_VERBS_EAGER=64K (one
# eager control message), each job against Open MPI over UCX in the same job
# (uccl_perf alternates them DIAG_ROUNDS times), the two settings taking turns
# ROUNDS times. Prints uccl_perf's summary per job.
# Run from the build directory:
#   RXE_VM_SHARE=$PWD/../.. ../tests/vm/cluster.sh ../tests/perf/results/cluster/s10/send64k-eager.sh
builddir=$PWD
perf=$builddir/tools/uccl_perf
size=${DIAG_SIZE:-65536}
ucx="--mca pml ucx --mca osc ucx --mca btl self -x UCX_TLS=rc_verbs,ud_verbs:aux,self -x UCX_NET_DEVICES=rxe0:1 -x UCX_UD_VERBS_ETH_DGID_CHECK=n"
mpiexec="mpirun --hostfile $VM_HOSTFILE --map-by node -np 2 --bind-to none $ucx"
src=$(cd "$(dirname "$0")/../../../../.." && pwd)
for n in node0 node1; do
	c="sysctl -qw net.core.netdev_max_backlog=100000"
	if [ $n = "$VM_NODE" ]; then $c; else "$src/tests/vm/agent.sh" $n "$c"; fi
done
echo "# guest load: node0 $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# UCP's protocols on rc_verbs between the nodes' rxe0 (ucx_info -e -u t on node0)"
UCX_TLS=rc_verbs,ud_verbs:aux,self UCX_NET_DEVICES=rxe0:1 UCX_IB_GID_INDEX=$RXE_GID_INDEX UCX_UD_VERBS_ETH_DGID_CHECK=n \
	timeout 60 ucx_info -e -u t 2>&1 | grep -iE "tag_send|rndv|eager" | head -12
iters=$(((${BENCH_MIB:-16} << 20) / (size * 16)))
set -- ${DIAG_EAGER:-4K 64K}
for r in $(seq "${ROUNDS:-2}"); do
	for e in "$@"; do
		[ $((r % 2)) = 0 ] && e=$([ "$e" = "$1" ] && echo "$2" || echo "$1")
		json=/tmp/s64-$e-$r.json
		timeout 300 $mpiexec -x UCCL_VERBS_EAGER=$e "$perf" p2p --transport verbs --op send \
			--min "$size" --max "$size" --iters $((iters < 1 ? 1 : iters)) --window 16 --warmup 1 \
			--rounds "${DIAG_ROUNDS:-3}" --json "$json" >/tmp/s64.out 2>&1 || { echo "eager $e failed:"; tail -5 /tmp/s64.out; continue; }
		python3 -c 'import json, sys
for r in json.load(open(sys.argv[1]))["rows"]:
    print("round %s eager %-4s send %d uccl %.4f mpi %.4f Gb/s ratio %.2f [%.2f-%.2f]" % (sys.argv[3], sys.argv[2], r["size"],
          8 * r["uccl_gbps"], 8 * r["ref_gbps"], r["ratio"], r.get("ratio_min", 0), r.get("ratio_max", 0)))' "$json" "$e" "$r"
	done
done
echo "# guest load: node0 $(cut -d' ' -f1-3 /proc/loadavg)"
