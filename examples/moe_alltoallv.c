/* Example: MoE dispatch and combine with uccl_alltoall + uccl_alltoallv.
 * Run: mpirun -np 4 examples/moe_alltoallv [tokens per rank, default 4096]
 * Every rank routes its tokens to random experts (expert e lives on rank
 * e % n): the per-destination token counts go out with alltoall, the tokens
 * with alltoallv (dispatch); each expert transforms what it got and sends it
 * back with the reverse alltoallv (combine). Each rank checks every token
 * against a single-process reference of the same routing and transform. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uccl/uccl_mpi.h>

#define HIDDEN 1024 /* bytes per token (a 512-wide bf16 activation) */
#define EXPERTS_PER_RANK 2

typedef struct moe {
    int rank, n;
    size_t tokens;
    int *expert;                 /* [tokens] expert of each local token */
    size_t *scount, *sdispl;     /* bytes to / from each rank, dispatch side */
    size_t *rcount, *rdispl;
    uint8_t *x, *packed, *recv, *back, *out;
} moe_t;

static uint8_t token_byte(int rank, size_t t, size_t i)
{
    return (uint8_t)((size_t)rank * 131 + t * 31 + i * 7 + (t >> 8));
}

/* The expert's work: a transform a reference can recompute. */
static uint8_t expert_fn(int expert, uint8_t v) { return (uint8_t)(v * 3 + expert + 1); }

static int route(moe_t *m)
{
    size_t *count = calloc((size_t)m->n, sizeof(size_t)), at;
    int n_exp = m->n * EXPERTS_PER_RANK;

    if (count == NULL)
        return -1;
    srand(1234u + (unsigned)m->rank);
    for (size_t t = 0; t < m->tokens; t++) {
        m->expert[t] = rand() % n_exp;
        count[m->expert[t] % m->n]++;
        for (size_t i = 0; i < HIDDEN; i++)
            m->x[t * HIDDEN + i] = token_byte(m->rank, t, i);
    }
    at = 0;
    for (int r = 0; r < m->n; r++) {
        m->scount[r] = count[r] * HIDDEN;
        m->sdispl[r] = at;
        at += m->scount[r];
    }
    /* pack by destination rank, in token order within each */
    memset(count, 0, sizeof(size_t) * (size_t)m->n);
    for (size_t t = 0; t < m->tokens; t++) {
        int d = m->expert[t] % m->n;
        memcpy(m->packed + m->sdispl[d] + count[d]++ * HIDDEN, m->x + t * HIDDEN, HIDDEN);
    }
    free(count);
    return 0;
}

/* Experts of this rank: token k from rank r had expert (recomputed by the
 * sender's routing, which is deterministic per rank: replay it). */
static void run_experts(moe_t *m)
{
    for (int r = 0; r < m->n; r++) {
        size_t k = 0;
        srand(1234u + (unsigned)r); /* replay rank r's routing */
        for (size_t t = 0; t < m->tokens; t++) {
            int e = rand() % (m->n * EXPERTS_PER_RANK);
            uint8_t *tok;
            if (e % m->n != m->rank)
                continue;
            tok = m->recv + m->rdispl[r] + k++ * HIDDEN;
            for (size_t i = 0; i < HIDDEN; i++)
                tok[i] = expert_fn(e, tok[i]);
        }
    }
}

/* Unpack the combined tokens into their original order and compare with
 * the single-process reference: expert_fn(expert[t], x[t]). */
static size_t verify(moe_t *m)
{
    size_t *k = calloc((size_t)m->n, sizeof(size_t)), bad = 0;

    for (size_t t = 0; k != NULL && t < m->tokens; t++) {
        int d = m->expert[t] % m->n;
        const uint8_t *tok = m->back + m->sdispl[d] + k[d]++ * HIDDEN;
        for (size_t i = 0; i < HIDDEN; i++)
            bad += tok[i] != expert_fn(m->expert[t], token_byte(m->rank, t, i));
    }
    free(k);
    return k == NULL ? 1 : bad;
}

static uccl_status_t dispatch_combine(moe_t *m, uccl_comm_t *comm)
{
    size_t got = 0;
    uccl_status_t st = uccl_alltoall(comm, m->scount, m->rcount, sizeof(size_t));

    for (int r = 0; r < m->n && st == UCCL_OK; r++) {
        m->rdispl[r] = got;
        got += m->rcount[r];
    }
    m->recv = malloc(got ? got : 1);
    if (st == UCCL_OK && m->recv == NULL)
        st = UCCL_ERR_NO_MEMORY;
    if (st == UCCL_OK) /* dispatch */
        st = uccl_alltoallv(comm, m->packed, m->scount, m->sdispl, m->recv, m->rcount, m->rdispl);
    if (st == UCCL_OK) {
        run_experts(m);
        /* combine: the reverse exchange, counts swapped */
        st = uccl_alltoallv(comm, m->recv, m->rcount, m->rdispl, m->back, m->scount, m->sdispl);
    }
    return st;
}

int main(int argc, char **argv)
{
    moe_t m = {0};
    uccl_comm_t *comm = NULL;
    uccl_status_t st = UCCL_ERR_NO_MEMORY;
    size_t bad = 1;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &m.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &m.n);
    m.tokens = (size_t)(argc > 1 ? atoi(argv[1]) : 4096);
    m.expert = calloc(m.tokens + 1, sizeof(int));
    m.scount = calloc((size_t)m.n * 4, sizeof(size_t));
    m.x = malloc(m.tokens * HIDDEN + 1);
    m.packed = malloc(m.tokens * HIDDEN + 1);
    m.back = malloc(m.tokens * HIDDEN + 1);
    if (m.expert && m.scount && m.x && m.packed && m.back) {
        m.sdispl = m.scount + m.n;
        m.rcount = m.sdispl + m.n;
        m.rdispl = m.rcount + m.n;
        st = route(&m) == 0 ? uccl_comm_init_mpi(MPI_COMM_WORLD, NULL, &comm) : st;
    }
    if (st == UCCL_OK)
        st = dispatch_combine(&m, comm);
    if (st == UCCL_OK)
        bad = verify(&m);
    if (st != UCCL_OK)
        fprintf(stderr, "moe_alltoallv rank %d: %s\n", m.rank, uccl_strerror(st));
    else if (m.rank == 0 || bad)
        printf("moe_alltoallv rank %d: %zu tokens of %d bytes to %d experts on %d ranks, "
               "dispatched and combined, %zu wrong bytes\n",
               m.rank, m.tokens, HIDDEN, m.n * EXPERTS_PER_RANK, m.n, bad);
    if (comm != NULL)
        uccl_comm_destroy(comm);
    free(m.expert);
    free(m.scount);
    free(m.x);
    free(m.packed);
    free(m.recv);
    free(m.back);
    MPI_Finalize();
    return st == UCCL_OK && bad == 0 ? 0 : 1;
}
