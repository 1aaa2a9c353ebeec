/* Bootstrap a libuccl communicator from an MPI communicator: an adapter of
 * uccl_comm_init (uccl_coll.h). MPI only exchanges engine addresses; no MPI
 * call is on any data path. */
#ifndef UCCL_UCCL_MPI_H
#define UCCL_UCCL_MPI_H

#include <mpi.h>
#include <uccl/uccl_coll.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Collective over mpi_comm: uccl_comm_init with this rank and size of
 * mpi_comm and MPI_Allgather as the callback. Each rank creates an engine
 * (or uses params->engine), all ranks exchange address blobs, connect to
 * every peer (lower ranks connect, higher ranks accept: no deadlock), and
 * learn which peers share their host (uccl_engine_host_id). The engines it
 * creates get one admission secret per job (rank 0 draws it, MPI_Bcast
 * shares it) unless the engine params give one. params may be
 * NULL; it may set only UCCL_COMM_PARAM_ENGINE or _ENGINE_PARAMS.
 * Every rank gets the same status: if any rank fails, all return an error
 * (the failing rank's own status there, UCCL_ERR_PEER_FAILED elsewhere).
 * mpi_comm is any intracommunicator (a split of MPI_COMM_WORLD too), used
 * between MPI_Init and MPI_Finalize.
 * Errors: those of uccl_comm_init, UCCL_ERR_IO (an MPI call failed),
 * UCCL_ERR_INVALID_PARAM at once (no MPI call that could abort) when MPI is
 * not initialized or finalized already, or mpi_comm is an intercommunicator. */
UCCL_API uccl_status_t uccl_comm_init_mpi(MPI_Comm mpi_comm, const uccl_comm_params_t *params,
                                          uccl_comm_t **comm);

#ifdef __cplusplus
}
#endif

#endif /* UCCL_UCCL_MPI_H */
