#!/bin/sh
# rank-dev.sh PROGRAM [ARGS...]: run PROGRAM with UCCL_NET_DEVICES set by MPI
# rank parity ($RXE_DEV for even ranks, $RXE_DEV2 for odd), so that traffic
# between neighbouring ranks crosses the VM's veth pair instead of rxe loopback;
# with BENCH_PIN="A B" (bench.sh) even ranks run on vCPU A, odd ones on B.
rank=${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-0}}
if [ $((rank % 2)) = 0 ]; then UCCL_NET_DEVICES=${RXE_DEV:-rxe0}; else UCCL_NET_DEVICES=${RXE_DEV2:-rxe1}; fi
export UCCL_NET_DEVICES
# BENCH_PIN="A B" (bench.sh): even ranks on vCPU A, odd ranks on vCPU B; any
# other form is refused (a rank pinned where the references are not would be
# an unfair comparison)
if [ -n "${BENCH_PIN:-}" ]; then
	# shellcheck disable=SC2086 # the words of BENCH_PIN
	[ "$(echo $BENCH_PIN | wc -w)" = 2 ] ||
		{ echo "rank-dev.sh: BENCH_PIN='$BENCH_PIN': want two vCPUs, \"A B\"" >&2; exit 2; }
	# shellcheck disable=SC2086
	cpu=$(echo $BENCH_PIN | cut -d' ' -f$((rank % 2 + 1)))
	exec taskset -c "$cpu" "$@"
fi
exec "$@"
