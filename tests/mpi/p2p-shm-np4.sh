#!/bin/sh
# make check: t_p2p on 4 ranks over shm (all pairs, up to 1 MiB), with the shm CMA helper thread
# copying the second half of every CMA transfer from 8 KiB (UCCL_SHM_CMA_HELPER=1,
# UCCL_SHM_CMA_HELPER_MIN=8K); fails unless every rank says at close that it did
log=$(mktemp) || exit 1
UCCL_SHM_CMA_HELPER=1 UCCL_SHM_CMA_HELPER_MIN=8K UCCL_LOG_LEVEL=info \
    "$(dirname "$0")/run-mpi.sh" 4 shm tests/mpi/t_p2p --max-size 1048576 >"$log" 2>&1
rc=$?
grep -v '^\[uccl' "$log"
n=$(grep -c 'shm: the CMA helper copied [1-9][0-9]* job halves' "$log")
rm -f "$log"
[ $rc != 0 ] && exit $rc
[ "$n" = 4 ] || { echo "FAIL: $n of 4 ranks report pieces copied by the CMA helper"; exit 1; }
echo "ok all 4 ranks' CMA helpers copied job halves"
