#!/bin/sh
# rank-dev.sh PROGRAM [ARGS...]: run PROGRAM with UCCL_NET_DEVICES set by MPI
# rank parity ($RXE_DEV for even ranks, $RXE_DEV2 for odd), so that traffic
# between neighbouring ranks crosses the VM's veth pair instead of rxe loopback;
# with BENCH_PIN="A B" (bench.sh) even ranks run on vCPU A, odd ones on B.
rank=${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-0}}
if [ $((rank % 2)) = 0 ]; then UCCL_NET_DEVICES=${RXE_DEV:-rxe0}; else UCCL_NET_DEVICES=${RXE_DEV2:-rxe1}; fi
export UCCL_NET_DEVICES
# BENCH_PIN="A B" (bench.sh): even ranks on vCPU A, odd ranks on vCPU B
if [ -n "${BENCH_PIN:-}" ]; then
	cpu=$(echo "$BENCH_PIN" | cut -d' ' -f$((rank % 2 + 1)))
	exec taskset -c "$cpu" "$@"
fi
exec "$@"
