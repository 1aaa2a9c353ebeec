#!/bin/sh
# host-by-parity.sh PROGRAM [ARGS...]: run PROGRAM as one rank of mpirun with
# UCCL_HOST_ID set by the parity of its rank, so that even and odd ranks
# act as two hosts of one machine (no shm between them).
rank=${OMPI_COMM_WORLD_RANK:-${PMIX_RANK:-${PMI_RANK:-}}}
if [ -z "$rank" ]; then
    echo "host-by-parity.sh: no MPI rank in the environment (OMPI_COMM_WORLD_RANK, PMIX_RANK)" >&2
    exit 1
fi
UCCL_HOST_ID=$((rank % 2 + 1))
export UCCL_HOST_ID
exec "$@"
