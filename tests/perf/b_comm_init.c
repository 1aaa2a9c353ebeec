/* Init cost of a communicator, eager versus lazy connection: time of
 * uccl_comm_init_mpi (slowest rank), resident memory and open files it adds
 * per rank (mean), the first collective (an 8-byte allgather, which connects
 * a lazy comm's peers) and the second. Set UCCL_LAZY_CONNECT=0|1 around it:
 *   mpirun -np 64 --oversubscribe tests/perf/b_comm_init
 * tests/perf/comm-init.sh builds it and runs the table of the README. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <uccl/uccl_mpi.h>

#include "../unit/unit_proc.h"

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + t.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
    int rank, size;
    uccl_comm_t *comm;
    char sb[8] = {0}, *rb;
    double t[3], tmax[3];
    long mem[2], memsum[2];
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    rb = calloc((size_t)size, 8);
    MPI_Barrier(MPI_COMM_WORLD);
    long rss0 = unit_rss_kib();
    int fd0 = unit_fd_count();
    t[0] = now();
    uccl_status_t st = uccl_comm_init_mpi(MPI_COMM_WORLD, NULL, &comm);
    if (st != UCCL_OK) {
        fprintf(stderr, "rank %d: uccl_comm_init_mpi: %s\n", rank, uccl_strerror(st));
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    t[0] = now() - t[0];
    mem[0] = unit_rss_kib() - rss0;
    mem[1] = unit_fd_count() - fd0;
    MPI_Barrier(MPI_COMM_WORLD);
    for (int i = 1; i < 3; i++) {
        MPI_Barrier(MPI_COMM_WORLD);
        t[i] = now();
        if ((st = uccl_allgather(comm, sb, rb, 8)) != UCCL_OK) {
            fprintf(stderr, "rank %d: allgather %d: %s\n", rank, i, uccl_strerror(st));
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        t[i] = now() - t[i];
    }
    long after = unit_rss_kib() - rss0;
    int fds_after = unit_fd_count() - fd0;
    long sums[2];
    long vals[2] = {after, fds_after};
    MPI_Reduce(t, tmax, 3, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    MPI_Reduce(mem, memsum, 2, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    MPI_Reduce(vals, sums, 2, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0)
        printf("ranks %d lazy %s: init %.1f ms, +%ld KiB +%ld fds per rank; first allgather "
               "%.1f ms, second %.2f ms; after it +%ld KiB +%ld fds per rank\n",
               size, getenv("UCCL_LAZY_CONNECT") ? getenv("UCCL_LAZY_CONNECT") : "auto",
               tmax[0] * 1e3, memsum[0] / size, memsum[1] / size, tmax[1] * 1e3,
               tmax[2] * 1e3, sums[0] / size, sums[1] / size);
    uccl_comm_destroy(comm);
    free(rb);
    MPI_Finalize();
    return 0;
}
