/* Example: one-sided write with a notification.
 * Run: mpirun -np 2 examples/one_sided_write
 * Rank 1 registers a buffer and sends rank 0 a descriptor of it; rank 0
 * writes into it with uccl_write_notify; rank 1 waits for the notification,
 * which arrives only after the data has landed, and checks the bytes. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uccl/uccl_mpi.h>

#define SIZE (1u << 20)
#define NOTIF 0x5eedull

static int check(uccl_status_t st, const char *what)
{
    if (st != UCCL_OK)
        fprintf(stderr, "one_sided_write: %s: %s\n", what, uccl_strerror(st));
    return st == UCCL_OK ? 0 : -1;
}

/* req is read only after the post (an argument's order of evaluation is
 * unspecified, hence the pointer). */
static int wait_free(uccl_status_t posted, uccl_req_t **req, const char *what)
{
    uccl_status_t st = posted;

    if (posted == UCCL_OK) {
        st = uccl_wait(*req, -1);
        uccl_req_free(*req);
    }
    return check(st, what);
}

/* Rank 0: get the descriptor (a plain 64-byte message), write, done. */
static int writer(uccl_conn_t *conn, uccl_mr_t *mr, uint8_t *buf, uccl_mr_t *desc_mr,
                  uccl_rdesc_t *desc)
{
    uccl_req_t *req = NULL;

    if (wait_free(uccl_recv(conn, desc_mr, 0, sizeof(*desc), 0, &req), &req, "receive descriptor"))
        return -1;
    for (size_t i = 0; i < SIZE; i++)
        buf[i] = (uint8_t)(i % 251);
    return wait_free(uccl_write_notify(conn, mr, 0, SIZE, desc, 0, NOTIF, &req), &req,
                     "uccl_write_notify");
}

/* Rank 1: describe the buffer, send the descriptor, wait for the notification. */
static int target(uccl_conn_t *conn, uccl_mr_t *mr, uint8_t *buf, uccl_mr_t *desc_mr,
                  uccl_rdesc_t *desc)
{
    uccl_req_t *req = NULL;
    uint64_t value = 0;

    memset(buf, 0, SIZE);
    if (check(uccl_mr_pack(mr, 0, SIZE, desc), "uccl_mr_pack") ||
        wait_free(uccl_send(conn, desc_mr, 0, sizeof(*desc), 0, &req), &req, "send descriptor"))
        return -1;
    /* bounded: a peer that never writes gives UCCL_ERR_TIMEOUT, a dead one its error */
    if (check(uccl_notif_wait(conn, &value, 30000), "uccl_notif_wait") != 0)
        return -1;
    if (value != NOTIF) {
        fprintf(stderr, "one_sided_write: notification %#llx, expected %#llx\n",
                (unsigned long long)value, NOTIF);
        return -1;
    }
    for (size_t i = 0; i < SIZE; i++) {
        if (buf[i] != (uint8_t)(i % 251)) {
            fprintf(stderr, "one_sided_write: byte %zu is %u, expected %u\n", i, buf[i],
                    (unsigned)(i % 251));
            return -1;
        }
    }
    printf("one_sided_write: rank 1 got notification %#llx and %u correct bytes\n",
           (unsigned long long)value, SIZE);
    return 0;
}

int main(int argc, char **argv)
{
    uccl_comm_t *comm = NULL;
    uccl_engine_t *engine;
    uccl_mr_t *mr = NULL, *desc_mr = NULL;
    uccl_rdesc_t desc;
    uint8_t *buf = malloc(SIZE);
    int rank, nranks, rc = 1;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    if (nranks != 2 || buf == NULL) {
        fprintf(stderr, "one_sided_write: run with mpirun -np 2\n");
        goto sync;
    }
    if (check(uccl_comm_init_mpi(MPI_COMM_WORLD, NULL, &comm), "uccl_comm_init_mpi"))
        goto sync;
    engine = uccl_comm_engine(comm);
    if (check(uccl_mr_reg(engine, buf, SIZE, 0, &mr), "uccl_mr_reg") ||
        check(uccl_mr_reg(engine, &desc, sizeof(desc), 0, &desc_mr), "uccl_mr_reg"))
        goto sync;
    if (rank == 0)
        rc = writer(uccl_comm_conn(comm, 1), mr, buf, desc_mr, &desc) != 0;
    else
        rc = target(uccl_comm_conn(comm, 0), mr, buf, desc_mr, &desc) != 0;
sync:
    /* One verdict for both; and the writer must not tear down before the
     * target has checked the bytes. */
    MPI_Allreduce(MPI_IN_PLACE, &rc, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (desc_mr != NULL)
        uccl_mr_dereg(desc_mr);
    if (mr != NULL)
        uccl_mr_dereg(mr);
    if (comm != NULL)
        uccl_comm_destroy(comm);
    if (rank == 0)
        printf("%s\n", rc == 0 ? "one_sided_write: ok" : "one_sided_write: FAILED");
    free(buf);
    MPI_Finalize();
    return rc;
}
