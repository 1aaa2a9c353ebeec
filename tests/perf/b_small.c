/* Where a small-message collective's time goes: the linear allgather
 * pattern (every rank exchanges S bytes with every peer) timed as
 *   coll     uccl_allgather (cached plan, the library's path)
 *   p2p      uccl_send/uccl_recv per peer, uccl_wait_all, uccl_req_free,
 *            with the time spent posting, waiting and freeing apart
 *   persist  persistent requests: uccl_start_all, uccl_wait_all
 *   mpi      MPI_Allgather, and MPI_Isend/Irecv/Waitall of the same pattern
 * Mean microseconds per call, slowest rank. Results checked byte for byte.
 *   mpirun -np 4 tests/perf/b_small [BYTES] [ITERS]
 * tests/perf/small-perf.sh builds it against a build's libuccl. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <uccl/uccl_mpi.h>

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e6 + t.tv_nsec * 1e-3;
}

static int rank, size;

static void die(const char *what, uccl_status_t st)
{
    fprintf(stderr, "rank %d: %s: %s\n", rank, what, uccl_strerror(st));
    MPI_Abort(MPI_COMM_WORLD, 1);
}

#define CHECK(call)                                                                              \
    do {                                                                                         \
        uccl_status_t st_ = (call);                                                              \
        if (st_ != UCCL_OK)                                                                      \
            die(#call, st_);                                                                     \
    } while (0)

static void fill(char *sb, size_t n, int salt)
{
    for (size_t i = 0; i < n; i++)
        sb[i] = (char)(rank * 31 + (int)i * 7 + salt);
}

static long wrong(const char *rb, size_t n, int salt)
{
    long w = 0;
    for (int r = 0; r < size; r++)
        for (size_t i = 0; i < n; i++)
            w += rb[(size_t)r * n + i] != (char)(r * 31 + (int)i * 7 + salt);
    return w;
}

static double slowest(double t)
{
    double m;
    MPI_Allreduce(&t, &m, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return m;
}

int main(int argc, char **argv)
{
    size_t n = argc > 1 ? strtoul(argv[1], NULL, 0) : 8;
    int iters = argc > 2 ? atoi(argv[2]) : 20000, np;
    uccl_comm_t *comm;
    uccl_mr_t *smr, *rmr;
    char *sb, *rb;
    long w = 0;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    np = size - 1;
    sb = malloc(n ? n : 1);
    rb = calloc((size_t)size, n ? n : 1);
    CHECK(uccl_comm_init_mpi(MPI_COMM_WORLD, NULL, &comm));
    uccl_engine_t *eng = uccl_comm_engine(comm);
    CHECK(uccl_mr_reg(eng, sb, n ? n : 1, 0, &smr));
    CHECK(uccl_mr_reg(eng, rb, (size_t)size * (n ? n : 1), 0, &rmr));
    uccl_req_t **reqs = calloc((size_t)(2 * np + 1), sizeof(*reqs));
    uccl_req_t **preqs = calloc((size_t)(2 * np + 1), sizeof(*preqs));
    MPI_Request *mreq = calloc((size_t)(2 * np + 1), sizeof(*mreq));
    double t = 0, t_start = 0, t_coll, t_p2p, t_post = 0, t_wait = 0, t_free = 0, t_pers, t_mpi, t_mpip;

    /* coll */
    fill(sb, n, 1);
    for (int i = -100; i < iters; i++) {
        if (i == 0) {
            MPI_Barrier(MPI_COMM_WORLD);
            t = now();
        }
        CHECK(uccl_allgather(comm, sb, rb, n));
    }
    t_coll = slowest((now() - t) / iters);
    w += wrong(rb, n, 1);

    /* p2p: the per-message public path */
    fill(sb, n, 2);
    memcpy(rb + (size_t)rank * n, sb, n);
    for (int i = -100; i < iters; i++) {
        double a, b, c;
        if (i == 0) {
            MPI_Barrier(MPI_COMM_WORLD);
            t = now();
            t_post = t_wait = t_free = 0;
        }
        a = now();
        for (int k = 1; k <= np; k++) {
            int to = (rank + k) % size, from = (rank - k + size) % size;
            CHECK(uccl_recv(uccl_comm_conn(comm, from), rmr, (size_t)from * n, n, 7,
                            &reqs[2 * k - 2]));
            CHECK(uccl_send(uccl_comm_conn(comm, to), smr, 0, n, 7, &reqs[2 * k - 1]));
        }
        b = now();
        CHECK(uccl_wait_all(reqs, (size_t)(2 * np), -1));
        c = now();
        for (int k = 0; k < 2 * np; k++)
            uccl_req_free(reqs[k]);
        t_post += b - a;
        t_wait += c - b;
        t_free += now() - c;
    }
    t_p2p = slowest((now() - t) / iters);
    t_post = slowest(t_post / iters);
    t_wait = slowest(t_wait / iters);
    t_free = slowest(t_free / iters);
    w += wrong(rb, n, 2);

    /* persistent requests */
    fill(sb, n, 3);
    memcpy(rb + (size_t)rank * n, sb, n);
    for (int k = 1; k <= np; k++) {
        int to = (rank + k) % size, from = (rank - k + size) % size;
        CHECK(uccl_recv_init(uccl_comm_conn(comm, from), rmr, (size_t)from * n, n, 8,
                             &preqs[2 * k - 2]));
        CHECK(uccl_send_init(uccl_comm_conn(comm, to), smr, 0, n, 8, &preqs[2 * k - 1]));
    }
    for (int i = -100; i < iters; i++) {
        double a;
        if (i == 0) {
            MPI_Barrier(MPI_COMM_WORLD);
            t = now();
            t_start = 0;
        }
        a = now();
        CHECK(uccl_start_all(preqs, (size_t)(2 * np), NULL));
        t_start += now() - a;
        CHECK(uccl_wait_all(preqs, (size_t)(2 * np), -1));
    }
    t_pers = slowest((now() - t) / iters);
    t_start = slowest(t_start / iters);
    w += wrong(rb, n, 3);
    for (int k = 0; k < 2 * np; k++)
        uccl_req_free(preqs[k]);

    /* MPI */
    fill(sb, n, 4);
    for (int i = -100; i < iters; i++) {
        if (i == 0) {
            MPI_Barrier(MPI_COMM_WORLD);
            t = now();
        }
        MPI_Allgather(sb, (int)n, MPI_BYTE, rb, (int)n, MPI_BYTE, MPI_COMM_WORLD);
    }
    t_mpi = slowest((now() - t) / iters);
    w += wrong(rb, n, 4);
    fill(sb, n, 5);
    memcpy(rb + (size_t)rank * n, sb, n);
    for (int i = -100; i < iters; i++) {
        if (i == 0) {
            MPI_Barrier(MPI_COMM_WORLD);
            t = now();
        }
        for (int k = 1; k <= np; k++) {
            int to = (rank + k) % size, from = (rank - k + size) % size;
            MPI_Irecv(rb + (size_t)from * n, (int)n, MPI_BYTE, from, 9, MPI_COMM_WORLD,
                      &mreq[2 * k - 2]);
            MPI_Isend(sb, (int)n, MPI_BYTE, to, 9, MPI_COMM_WORLD, &mreq[2 * k - 1]);
        }
        MPI_Waitall(2 * np, mreq, MPI_STATUSES_IGNORE);
    }
    t_mpip = slowest((now() - t) / iters);
    w += wrong(rb, n, 5);

    long wsum = 0;
    MPI_Allreduce(&w, &wsum, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0)
        printf("np %d bytes %zu iters %d (us/call, slowest rank): coll %.2f | p2p %.2f "
               "(post %.2f wait %.2f free %.2f) | persist %.2f (start %.2f) | mpi allgather %.2f | "
               "mpi isend/irecv %.2f | wrong %ld\n",
               size, n, iters, t_coll, t_p2p, t_post, t_wait, t_free, t_pers, t_start, t_mpi, t_mpip,
               wsum);
    uccl_mr_dereg(smr);
    uccl_mr_dereg(rmr);
    uccl_comm_destroy(comm);
    MPI_Finalize();
    free(reqs);
    free(preqs);
    free(mreq);
    free(sb);
    free(rb);
    return wsum != 0;
}
