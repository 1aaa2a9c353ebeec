/* Example: ping-pong between two MPI ranks over libuccl (MPI only bootstraps).
 * Run: mpirun -np 2 examples/p2p_pingpong
 * Rank 0 sends a message, rank 1 returns it; rank 0 checks every byte. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <uccl/uccl_mpi.h>

#define MAX_SIZE (4u << 20)
#define ITERS 50

static int check(uccl_status_t st, const char *what)
{
    if (st != UCCL_OK)
        fprintf(stderr, "p2p_pingpong: %s: %s\n", what, uccl_strerror(st));
    return st == UCCL_OK ? 0 : -1;
}

/* Post one send or receive of len bytes and wait for it. */
static int transfer(uccl_conn_t *conn, uccl_mr_t *mr, size_t len, int is_send)
{
    uccl_req_t *req;
    uccl_status_t st = is_send ? uccl_send(conn, mr, 0, len, 0, &req)
                               : uccl_recv(conn, mr, 0, len, 0, &req);
    if (check(st, is_send ? "uccl_send" : "uccl_recv") != 0)
        return -1;
    st = uccl_wait(req, -1); /* bounded by UCCL_TIMEOUT_MS */
    uccl_req_free(req);
    return check(st, "uccl_wait");
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int pingpong(int rank, uccl_conn_t *conn, uccl_mr_t *mr, uint8_t *buf, size_t size)
{
    double t0;

    if (rank == 0) {
        for (size_t i = 0; i < size; i++)
            buf[i] = (uint8_t)(i * 7 + size);
    }
    t0 = now_s();
    for (int it = 0; it < ITERS; it++) {
        if (rank == 1 && it == ITERS - 1)
            memset(buf, 0, size); /* so an echo of stale bytes cannot pass */
        if (transfer(conn, mr, size, rank == 0) != 0 || transfer(conn, mr, size, rank == 1) != 0)
            return -1;
    }
    t0 = now_s() - t0;
    if (rank != 0)
        return 0;
    for (size_t i = 0; i < size; i++) {
        if (buf[i] != (uint8_t)(i * 7 + size)) {
            fprintf(stderr, "p2p_pingpong: size %zu: byte %zu is wrong\n", size, i);
            return -1;
        }
    }
    printf("%10zu bytes  %9.3f GB/s  %9.2f us round trip\n", size,
           2.0 * ITERS * (double)size / t0 / 1e9, t0 / ITERS * 1e6);
    return 0;
}

int main(int argc, char **argv)
{
    static const size_t sizes[] = {8, 4096, 65536, 1u << 20, MAX_SIZE};
    uccl_comm_t *comm = NULL;
    uccl_mr_t *mr = NULL;
    uint8_t *buf = malloc(MAX_SIZE);
    int rank, nranks, rc = 1;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    if (nranks != 2 || buf == NULL) {
        fprintf(stderr, "p2p_pingpong: run with mpirun -np 2\n");
        goto sync;
    }
    /* Engines and connections for every rank; transports from UCCL_TRANSPORTS. */
    if (check(uccl_comm_init_mpi(MPI_COMM_WORLD, NULL, &comm), "uccl_comm_init_mpi") ||
        check(uccl_mr_reg(uccl_comm_engine(comm), buf, MAX_SIZE, 0, &mr), "uccl_mr_reg"))
        goto sync;
    if (rank == 0) {
        uccl_conn_attr_t attr;
        uccl_conn_query(uccl_comm_conn(comm, 1), &attr);
        printf("libuccl %s ping-pong over %s, %d round trips per size\n", uccl_version(),
               attr.transport, ITERS);
    }
    rc = 0;
    for (size_t i = 0; rc == 0 && i < sizeof(sizes) / sizeof(sizes[0]); i++)
        rc = pingpong(rank, uccl_comm_conn(comm, 1 - rank), mr, buf, sizes[i]) != 0;
sync:
    /* One verdict for both ranks (a wrong byte on rank 0 fails the run), and
     * nobody closes its connection while the peer still uses it. */
    MPI_Allreduce(MPI_IN_PLACE, &rc, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (mr != NULL)
        uccl_mr_dereg(mr);
    if (comm != NULL)
        uccl_comm_destroy(comm);
    if (rank == 0)
        printf("%s\n", rc == 0 ? "p2p_pingpong: ok" : "p2p_pingpong: FAILED");
    free(buf);
    MPI_Finalize();
    return rc;
}
