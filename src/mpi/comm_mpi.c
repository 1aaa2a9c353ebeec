/* uccl_comm_init_mpi: the MPI adapter of the generic bootstrap (coll/boot.c).
 * MPI_Allgather is the bootstrap's callback; data never touches MPI. */
#include <limits.h>
#include <stdio.h>
#include <uccl/uccl_mpi.h>

static uccl_status_t mpi_allgather(const void *send, void *recv, size_t bytes_per_rank,
                                   void *ctx)
{
    MPI_Comm comm = *(MPI_Comm *)ctx;
    int rc;

    if (bytes_per_rank > INT_MAX)
        return UCCL_ERR_INVALID_PARAM;
    rc = MPI_Allgather(send, (int)bytes_per_rank, MPI_BYTE, recv, (int)bytes_per_rank, MPI_BYTE,
                       comm);
    if (rc != MPI_SUCCESS) {
        fprintf(stderr, "[uccl mpi-boot] MPI_Allgather failed (MPI error %d)\n", rc);
        return UCCL_ERR_IO;
    }
    return UCCL_OK;
}

uccl_status_t uccl_comm_init_mpi(MPI_Comm mpi_comm, const uccl_comm_params_t *params,
                                 uccl_comm_t **comm)
{
    const uint64_t engine_bits = UCCL_COMM_PARAM_ENGINE | UCCL_COMM_PARAM_ENGINE_PARAMS;
    uccl_comm_params_t p = {.field_mask = UCCL_COMM_PARAM_RANK | UCCL_COMM_PARAM_SIZE |
                                          UCCL_COMM_PARAM_ALLGATHER,
                            .allgather = mpi_allgather,
                            .allgather_ctx = &mpi_comm};

    if (comm == NULL || mpi_comm == MPI_COMM_NULL)
        return UCCL_ERR_INVALID_PARAM;
    if (params != NULL) {
        if (params->field_mask & ~engine_bits)
            return UCCL_ERR_INVALID_PARAM; /* rank, size and callback are ours to set */
        /* Only the fields the mask names: an older caller's struct may be shorter. */
        p.field_mask |= params->field_mask;
        if (params->field_mask & UCCL_COMM_PARAM_ENGINE)
            p.engine = params->engine;
        if (params->field_mask & UCCL_COMM_PARAM_ENGINE_PARAMS)
            p.engine_params = params->engine_params;
    }
    if (MPI_Comm_rank(mpi_comm, &p.rank) != MPI_SUCCESS ||
        MPI_Comm_size(mpi_comm, &p.size) != MPI_SUCCESS)
        return UCCL_ERR_IO;
    return uccl_comm_init(&p, comm);
}
