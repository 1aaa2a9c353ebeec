/* Example: gather the shards of a tensor on every rank with uccl_allgather.
 * Run: mpirun -np 4 examples/allgather [MiB per shard, default 4]
 * Each rank owns one shard of a float tensor; after the allgather every
 * rank holds the whole tensor and checks every element. The second call on
 * the same buffers reuses the comm's cached registration (no new one). */
#include <stdio.h>
#include <stdlib.h>
#include <uccl/uccl_mpi.h>

static float element(size_t i) { return (float)(i % 100003) * 0.5f; }

int main(int argc, char **argv)
{
    size_t shard_bytes = (size_t)(argc > 1 ? atoi(argv[1]) : 4) << 20;
    size_t shard = shard_bytes / sizeof(float), bad = 0;
    uccl_comm_t *comm = NULL;
    uccl_coll_stats_t stats = {0};
    uccl_status_t st;
    int rank, n;
    float *mine, *all;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    mine = malloc(shard * sizeof(float));
    all = malloc(shard * sizeof(float) * (size_t)n);
    st = mine && all ? uccl_comm_init_mpi(MPI_COMM_WORLD, NULL, &comm) : UCCL_ERR_NO_MEMORY;
    for (size_t i = 0; i < shard && st == UCCL_OK; i++)
        mine[i] = element((size_t)rank * shard + i);
    for (int call = 0; call < 2 && st == UCCL_OK; call++) /* same buffers twice */
        st = uccl_allgather(comm, mine, all, shard * sizeof(float));
    for (size_t i = 0; i < shard * (size_t)n && st == UCCL_OK; i++)
        bad += all[i] != element(i);
    if (st == UCCL_OK)
        st = uccl_comm_coll_stats(comm, &stats);
    if (st != UCCL_OK)
        fprintf(stderr, "allgather rank %d: %s\n", rank, uccl_strerror(st));
    else if (rank == 0 || bad != 0)
        printf("allgather rank %d: %d shards of %zu bytes, %zu wrong elements, "
               "%llu buffer registrations for %llu calls\n", rank, n, shard_bytes, bad,
               (unsigned long long)stats.buf_regs, (unsigned long long)stats.calls);
    if (comm != NULL)
        uccl_comm_destroy(comm);
    free(mine);
    free(all);
    MPI_Finalize();
    return st == UCCL_OK && bad == 0 ? 0 : 1;
}
