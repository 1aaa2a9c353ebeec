/* Example: a trainer (rank 0) broadcasts N MiB of "weights" to inference
 * ranks with uccl_bcast; every receiver checks a checksum per tensor.
 * Run: mpirun -np 4 examples/weight_bcast [MiB, default 64]
 * The weights are 8 tensors of equal size in one buffer, sent by one call;
 * rank 0 prints the bandwidth of the broadcast. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <uccl/uccl_mpi.h>

#define TENSORS 8

static uint64_t checksum(const uint8_t *p, size_t len)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (size_t i = 0; i < len; i++)
        h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

int main(int argc, char **argv)
{
    size_t bytes = (size_t)(argc > 1 ? atoi(argv[1]) : 64) << 20, each = bytes / TENSORS;
    uint64_t sums[TENSORS] = {0};
    uccl_comm_t *comm = NULL;
    uccl_status_t st;
    struct timespec t0, t1;
    int rank, bad = 0;
    uint8_t *w;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    w = malloc(bytes);
    st = w ? uccl_comm_init_mpi(MPI_COMM_WORLD, NULL, &comm) : UCCL_ERR_NO_MEMORY;
    if (st == UCCL_OK && rank == 0) { /* the trainer's weights and their sums */
        for (size_t i = 0; i < bytes; i++)
            w[i] = (uint8_t)(i * 2654435761u >> 13);
        for (int t = 0; t < TENSORS; t++)
            sums[t] = checksum(w + (size_t)t * each, each);
    }
    /* the sums travel beside the weights, through MPI: not part of the timing */
    MPI_Bcast(sums, TENSORS, MPI_UINT64_T, 0, MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);
    clock_gettime(CLOCK_MONOTONIC, &t0);
    if (st == UCCL_OK)
        st = uccl_bcast(comm, w, bytes, 0);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    for (int t = 0; t < TENSORS && st == UCCL_OK; t++)
        bad += checksum(w + (size_t)t * each, each) != sums[t];
    if (st != UCCL_OK)
        fprintf(stderr, "weight_bcast rank %d: %s\n", rank, uccl_strerror(st));
    else if (rank == 0 || bad)
        printf("weight_bcast rank %d: %zu MiB in %d tensors, %d bad checksums, %.2f GB/s\n",
               rank, bytes >> 20, TENSORS, bad,
               (double)bytes / ((double)(t1.tv_sec - t0.tv_sec) +
                                (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9) / 1e9);
    if (comm != NULL)
        uccl_comm_destroy(comm);
    free(w);
    MPI_Finalize();
    return st == UCCL_OK && bad == 0 ? 0 : 1;
}
