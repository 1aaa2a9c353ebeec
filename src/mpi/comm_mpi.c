/* uccl_comm_init_mpi: the MPI adapter of the generic bootstrap (coll/boot.c).
 * MPI_Allgather is the bootstrap's callback; data never touches MPI. The
 * engines it creates share one admission secret per job, drawn by rank 0
 * and broadcast over MPI. */
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
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

/* The job's secret: rank 0's draw, on every rank (collective). */
static uccl_status_t job_secret(MPI_Comm mpi_comm, int rank, uint8_t secret[UCCL_SECRET_SIZE])
{
    static const uint8_t zero[UCCL_SECRET_SIZE];
    int ok = 1;

    memset(secret, 0, UCCL_SECRET_SIZE);
    if (rank == 0)
        ok = getrandom(secret, UCCL_SECRET_SIZE, 0) == UCCL_SECRET_SIZE &&
             memcmp(secret, zero, UCCL_SECRET_SIZE) != 0;
    if (MPI_Bcast(secret, UCCL_SECRET_SIZE, MPI_BYTE, 0, mpi_comm) != MPI_SUCCESS)
        return UCCL_ERR_IO;
    /* without randomness rank 0 sends zeros: engines then draw their own */
    (void)ok;
    return UCCL_OK;
}

/* The caller's engine params (only the fields its mask names: an older
 * caller's struct may be shorter) plus the job secret, unless it gave one. */
static void with_secret(const uccl_engine_params_t *in, const uint8_t secret[UCCL_SECRET_SIZE],
                        uccl_engine_params_t *out)
{
    static const uint8_t zero[UCCL_SECRET_SIZE];

    memset(out, 0, sizeof(*out));
    if (in != NULL) {
        out->field_mask = in->field_mask;
        if (in->field_mask & UCCL_ENGINE_PARAM_GPU_INDEX)
            out->gpu_index = in->gpu_index;
        if (in->field_mask & UCCL_ENGINE_PARAM_TRANSPORTS)
            out->transports = in->transports;
        if (in->field_mask & UCCL_ENGINE_PARAM_NET_DEVICES)
            out->net_devices = in->net_devices;
        if (in->field_mask & UCCL_ENGINE_PARAM_PROGRESS_THREAD)
            out->progress_thread = in->progress_thread;
        if (in->field_mask & UCCL_ENGINE_PARAM_SECRET) {
            memcpy(out->secret, in->secret, UCCL_SECRET_SIZE);
            return;
        }
    }
    if (memcmp(secret, zero, UCCL_SECRET_SIZE) != 0) {
        out->field_mask |= UCCL_ENGINE_PARAM_SECRET;
        memcpy(out->secret, secret, UCCL_SECRET_SIZE);
    }
}

/* MPI calls abort the process before MPI_Init and after MPI_Finalize, and
 * an intercommunicator's MPI_Bcast and MPI_Allgather reach the remote group
 * (rank 0 as the root would have every rank wait): refused at once. */
static uccl_status_t check_mpi_comm(MPI_Comm mpi_comm)
{
    int initialized = 0, finalized = 0, inter = 0;

    MPI_Initialized(&initialized);
    MPI_Finalized(&finalized);
    if (!initialized || finalized) {
        fprintf(stderr, "[uccl mpi-boot] uccl_comm_init_mpi: MPI is %s\n",
                finalized ? "finalized already (MPI_Finalize)" : "not initialized (MPI_Init)");
        return UCCL_ERR_INVALID_PARAM;
    }
    if (MPI_Comm_test_inter(mpi_comm, &inter) != MPI_SUCCESS)
        return UCCL_ERR_IO;
    if (inter) {
        fprintf(stderr, "[uccl mpi-boot] uccl_comm_init_mpi: an intercommunicator; give an "
                        "intracommunicator (MPI_Intercomm_merge)\n");
        return UCCL_ERR_INVALID_PARAM;
    }
    return UCCL_OK;
}

uccl_status_t uccl_comm_init_mpi(MPI_Comm mpi_comm, const uccl_comm_params_t *params,
                                 uccl_comm_t **comm)
{
    uint8_t secret[UCCL_SECRET_SIZE];
    uccl_engine_params_t ep;
    const uint64_t engine_bits = UCCL_COMM_PARAM_ENGINE | UCCL_COMM_PARAM_ENGINE_PARAMS;
    uccl_comm_params_t p = {.field_mask = UCCL_COMM_PARAM_RANK | UCCL_COMM_PARAM_SIZE |
                                          UCCL_COMM_PARAM_ALLGATHER,
                            .allgather = mpi_allgather,
                            .allgather_ctx = &mpi_comm};
    uccl_status_t st;

    if (comm == NULL || mpi_comm == MPI_COMM_NULL)
        return UCCL_ERR_INVALID_PARAM;
    if ((st = check_mpi_comm(mpi_comm)) != UCCL_OK)
        return st;
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
        MPI_Comm_size(mpi_comm, &p.size) != MPI_SUCCESS ||
        job_secret(mpi_comm, p.rank, secret) != UCCL_OK)
        return UCCL_ERR_IO;
    if (!(p.field_mask & UCCL_COMM_PARAM_ENGINE)) { /* we create the engine: the job's secret */
        with_secret(p.engine_params, secret, &ep);
        p.engine_params = &ep;
        p.field_mask |= UCCL_COMM_PARAM_ENGINE_PARAMS;
    }
    return uccl_comm_init(&p, comm);
}
