#!/bin/sh
# shm-off-rank1.sh PROGRAM [ARGS...]: run PROGRAM as one rank of mpirun, rank 1
# with UCCL_TRANSPORTS=tcp (no shm) and the others with what they were given:
# ranks of one host that differ in shm.
rank=${OMPI_COMM_WORLD_RANK:-${PMIX_RANK:-${PMI_RANK:-}}}
if [ -z "$rank" ]; then
    echo "shm-off-rank1.sh: no MPI rank in the environment (OMPI_COMM_WORLD_RANK, PMIX_RANK)" >&2
    exit 1
fi
if [ "$rank" = 1 ]; then
    UCCL_TRANSPORTS=tcp
    export UCCL_TRANSPORTS
fi
exec "$@"
