/* Harness of the MPI tests: setup and teardown, patterns, checks, reports. */
#include "mpi_test.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int mt_lazy(void)
{
    const char *v = getenv("UCCL_LAZY_CONNECT");
    return v != NULL && strcmp(v, "1") == 0;
}

enum { MT_TAG_BARRIER = 0x7fff0001, MT_TAG_RANK = 0x7fff0002 };

/* ------------------------------------------------------------------ patterns */

uint32_t mt_seed(int from, int to, size_t len, int salt)
{
    uint32_t h = 2166136261u;
    uint32_t v[4] = {(uint32_t)from, (uint32_t)to, (uint32_t)len, (uint32_t)salt};

    for (int i = 0; i < 4; i++)
        h = (h ^ v[i]) * 16777619u;
    return h;
}

/* Depends on the offset through a multiply so that shifted or swapped
 * blocks (pages, chunks) do not match. */
static uint8_t pattern(uint32_t seed, size_t off)
{
    uint32_t x = (uint32_t)off * 2654435761u + seed + (uint32_t)(off >> 12) * 40503u;
    return (uint8_t)(x >> 13);
}

/* Around the data: the same for every seed, so that neighbouring areas
 * (slots of one buffer) can share guard bytes. */
static uint8_t poison_at(uint32_t seed, size_t pos)
{
    (void)seed;
    return (uint8_t)~pattern(0x5a5a5a5au, pos);
}

static void piece(mt_layout_t l, size_t len, int i, size_t *msg_off, size_t *n, size_t *pos)
{
    size_t b = len * (size_t)i / (size_t)l.parts, e = len * (size_t)(i + 1) / (size_t)l.parts;
    *msg_off = b;
    *n = e - b;
    *pos = l.base + b + (size_t)i * l.gap;
}

/* The area a layout owns: the landing area with MT_GUARD bytes either side. */
static size_t extent(mt_layout_t l, size_t len)
{
    return l.base + len + (size_t)(l.parts - 1) * l.gap + MT_GUARD;
}

static size_t area_start(mt_layout_t l)
{
    return l.base > MT_GUARD ? l.base - MT_GUARD : 0;
}

void mt_fill(uint8_t *buf, mt_layout_t l, size_t len, uint32_t seed)
{
    for (int i = 0; i < l.parts; i++) {
        size_t off, n, pos;
        piece(l, len, i, &off, &n, &pos);
        for (size_t k = 0; k < n; k++)
            buf[pos + k] = pattern(seed, off + k);
    }
}

/* Every byte of the area differs from what a correct transfer leaves there. */
void mt_poison(uint8_t *buf, mt_layout_t l, size_t len, uint32_t seed)
{
    size_t end = extent(l, len);

    for (size_t p = area_start(l); p < end; p++)
        buf[p] = poison_at(seed, p);
    for (int i = 0; i < l.parts; i++) {
        size_t off, n, pos;
        piece(l, len, i, &off, &n, &pos);
        for (size_t k = 0; k < n; k++)
            buf[pos + k] = (uint8_t)~pattern(seed, off + k);
    }
}

static uint8_t expected_at(mt_layout_t l, size_t len, uint32_t seed, size_t p)
{
    for (int i = 0; i < l.parts; i++) {
        size_t off, n, pos;
        piece(l, len, i, &off, &n, &pos);
        if (p >= pos && p < pos + n)
            return pattern(seed, off + (p - pos));
    }
    return poison_at(seed, p);
}

typedef struct mt_diff {
    size_t bad, first;
} mt_diff_t;

static void check_poison(const uint8_t *buf, size_t from, size_t to, uint32_t seed, mt_diff_t *d)
{
    for (size_t p = from; p < to; p++)
        if (buf[p] != poison_at(seed, p) && d->bad++ == 0)
            d->first = p;
}

static void check_data(const uint8_t *buf, size_t pos, size_t off, size_t n, uint32_t seed,
                       mt_diff_t *d)
{
    for (size_t k = 0; k < n; k++)
        if (buf[pos + k] != pattern(seed, off + k) && d->bad++ == 0)
            d->first = pos + k;
}

int mt_check(const mt_ctx_t *c, const uint8_t *buf, mt_layout_t l, size_t len, uint32_t seed,
             const char *what)
{
    mt_diff_t d = {0, 0};
    size_t cursor = area_start(l);
    uint8_t want;

    for (int i = 0; i < l.parts; i++) {
        size_t off, n, pos;
        piece(l, len, i, &off, &n, &pos);
        check_poison(buf, cursor, pos, seed, &d);
        check_data(buf, pos, off, n, seed, &d);
        cursor = pos + n;
    }
    check_poison(buf, cursor, extent(l, len), seed, &d);
    if (d.bad == 0)
        return 0;
    want = expected_at(l, len, seed, d.first);
    fprintf(stderr, "FAIL rank %d: %s (len %zu): %zu wrong bytes, first at buffer offset %zu: "
            "got 0x%02x expected 0x%02x%s\n", c->rank, what, len, d.bad, d.first, buf[d.first],
            want, (buf[d.first] ^ want) == 0xff ? " (never written)" : "");
    return -1;
}

int mt_iov(uccl_iov_t *iov, uccl_mr_t *mr, mt_layout_t l, size_t len)
{
    for (int i = 0; i < l.parts; i++) {
        size_t off, n, pos;
        piece(l, len, i, &off, &n, &pos);
        iov[i] = (uccl_iov_t){.mr = mr, .off = pos, .len = n};
    }
    return l.parts;
}

/* ------------------------------------------------------------------ outcomes */

void mt_fail(mt_ctx_t *c, const char *fmt, ...)
{
    va_list ap;

    fprintf(stderr, "FAIL rank %d: ", c->rank);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    c->failed = 1;
}

void mt_expect(mt_ctx_t *c, uccl_status_t st, uccl_status_t want, const char *what)
{
    if (st != want)
        mt_fail(c, "%s: got %s, expected %s", what, uccl_status_name(st), uccl_status_name(want));
}

void mt_wait(mt_ctx_t *c, uccl_req_t **reqs, int n, uccl_status_t want, const char *what)
{
    uccl_status_t st = uccl_wait_all(reqs, (size_t)n, -1);

    if (st == UCCL_ERR_TIMEOUT)
        mt_fail(c, "%s: timed out (UCCL_TIMEOUT_MS)", what);
    for (int i = 0; i < n; i++) {
        if (reqs[i] == NULL)
            continue;
        if (st != UCCL_ERR_TIMEOUT) {
            int done = 0;
            uccl_status_t one = uccl_test(reqs[i], &done);
            if (one != want)
                mt_fail(c, "%s: request %d of %d ended with %s, expected %s", what, i, n,
                        uccl_status_name(one), uccl_status_name(want));
        }
        uccl_req_free(reqs[i]);
        reqs[i] = NULL;
    }
}

void mt_uccl_barrier(mt_ctx_t *c)
{
    uccl_req_t *reqs[2 * 64] = {0};
    int n = 0;

    for (int q = 0; q < c->size && q < 64; q++) {
        uccl_conn_t *conn = uccl_comm_conn(c->comm, q);
        if (q == c->rank)
            continue;
        mt_expect(c, uccl_recv(conn, NULL, 0, 0, MT_TAG_BARRIER, &reqs[n++]), UCCL_OK,
                  "barrier receive");
        mt_expect(c, uccl_send(conn, NULL, 0, 0, MT_TAG_BARRIER, &reqs[n++]), UCCL_OK,
                  "barrier send");
    }
    mt_wait(c, reqs, n, UCCL_OK, "barrier");
}

void mt_check_comm(mt_ctx_t *c, uccl_comm_t *comm)
{
    uccl_engine_t *engine = uccl_comm_engine(comm);
    uint64_t mine = uccl_engine_id(engine), *ids = calloc((size_t)c->size, sizeof(*ids));
    int *got = calloc((size_t)c->size, sizeof(*got));
    uccl_req_t **reqs = calloc(2 * (size_t)c->size, sizeof(*reqs));
    uccl_mr_t *mr = NULL;
    int n = 0;

    MPI_Allgather(&mine, 1, MPI_UINT64_T, ids, 1, MPI_UINT64_T, MPI_COMM_WORLD);
    if (uccl_comm_rank(comm) != c->rank || uccl_comm_size(comm) != c->size)
        mt_fail(c, "comm has rank/size %d/%d, MPI says %d/%d", uccl_comm_rank(comm),
                uccl_comm_size(comm), c->rank, c->size);
    if (uccl_mr_reg(engine, got, (size_t)c->size * sizeof(*got), 0, &mr) != UCCL_OK)
        mt_fail(c, "registering");
    for (int q = 0; mr != NULL && q < c->size; q++) {
        uccl_conn_t *conn = uccl_comm_conn(comm, q);
        uccl_conn_attr_t attr = {0};
        if (q == c->rank)
            continue;
        if (uccl_conn_query(conn, &attr) != UCCL_OK || attr.peer_id != ids[q])
            mt_fail(c, "conn to rank %d leads to engine %016llx, rank %d has %016llx", q,
                    (unsigned long long)attr.peer_id, q, (unsigned long long)ids[q]);
        mt_expect(c, uccl_recv(conn, mr, (size_t)q * sizeof(int), sizeof(int), MT_TAG_RANK,
                               &reqs[n++]), UCCL_OK, "uccl_recv");
        got[c->rank] = c->rank;
        mt_expect(c, uccl_send(conn, mr, (size_t)c->rank * sizeof(int), sizeof(int), MT_TAG_RANK,
                               &reqs[n++]), UCCL_OK, "uccl_send");
    }
    mt_wait(c, reqs, n, UCCL_OK, "rank exchange");
    for (int q = 0; mr != NULL && q < c->size; q++) {
        if (q != c->rank && got[q] != q)
            mt_fail(c, "message on conn(%d) came from rank %d", q, got[q]);
    }
    if (mr != NULL)
        uccl_mr_dereg(mr);
    free(reqs);
    free(got);
    free(ids);
}

void mt_skip(mt_ctx_t *c, const char *fmt, ...)
{
    va_list ap;

    c->skipped = 1;
    if (c->rank != 0)
        return;
    printf("SKIP: ");
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf(" [%s, np %d]\n", c->transport, c->size);
    fflush(stdout);
}

int mt_report(mt_ctx_t *c, const char *name)
{
    int mine[2] = {c->failed, c->skipped}, any[2] = {0, 0};

    MPI_Allreduce(mine, any, 2, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (c->rank == 0 && (any[0] || !any[1])) {
        printf("%s %s [%s, np %d]\n", any[0] ? "FAIL" : "ok", name, c->transport, c->size);
        fflush(stdout);
    }
    c->failed = 0;
    c->skipped = 0;
    return any[0];
}

/* ------------------------------------------------------------------ setup */

/* A transport that is not built, or not usable here, skips the test on
 * every rank instead of failing it. */
static int transports_usable(void)
{
    uccl_engine_t *engine;
    uccl_status_t st = uccl_engine_create(NULL, &engine);
    int unusable = 0, any = 0;

    if (st == UCCL_OK)
        uccl_engine_destroy(engine);
    else
        unusable = st == UCCL_ERR_NO_TRANSPORT || st == UCCL_ERR_NO_DEVICE ||
                   st == UCCL_ERR_INVALID_PARAM;
    MPI_Allreduce(&unusable, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    return !any;
}

static int alloc_regions(mt_ctx_t *c)
{
    size_t n = (size_t)c->size;

    c->src = calloc(n, sizeof(*c->src));
    c->dst = calloc(n, sizeof(*c->dst));
    c->src_mr = calloc(n, sizeof(*c->src_mr));
    c->dst_mr = calloc(n, sizeof(*c->dst_mr));
    c->peer_dst = calloc(n, sizeof(*c->peer_dst));
    c->peer_src = calloc(n, sizeof(*c->peer_src));
    if (!c->src || !c->dst || !c->src_mr || !c->dst_mr || !c->peer_dst || !c->peer_src)
        return -1;
    for (int q = 0; q < c->size; q++) {
        if (q == c->rank)
            continue;
        c->src[q] = calloc(1, c->buf_len);
        c->dst[q] = calloc(1, c->buf_len);
        if (c->src[q] == NULL || c->dst[q] == NULL)
            return -1;
        if (uccl_mr_reg(c->engine, c->src[q], c->buf_len, 0, &c->src_mr[q]) != UCCL_OK ||
            uccl_mr_reg(c->engine, c->dst[q], c->buf_len, 0, &c->dst_mr[q]) != UCCL_OK)
            return -1;
    }
    return 0;
}

/* Each rank describes, for every peer, the dst region that peer writes into
 * and the src region it reads from; descriptors travel by MPI (setup). */
static int exchange_descs(mt_ctx_t *c)
{
    size_t n = (size_t)c->size;
    uccl_rdesc_t *mine = calloc(2 * n, sizeof(*mine)), *theirs = calloc(2 * n, sizeof(*theirs));
    int rc = -1;

    if (mine == NULL || theirs == NULL)
        goto out;
    for (int q = 0; q < c->size; q++) {
        if (q == c->rank)
            continue;
        if (uccl_mr_pack(c->dst_mr[q], 0, c->buf_len, &mine[2 * q]) != UCCL_OK ||
            uccl_mr_pack(c->src_mr[q], 0, c->buf_len, &mine[2 * q + 1]) != UCCL_OK)
            goto out;
    }
    MPI_Alltoall(mine, 2 * (int)sizeof(*mine), MPI_BYTE, theirs, 2 * (int)sizeof(*mine), MPI_BYTE,
                 MPI_COMM_WORLD);
    for (int q = 0; q < c->size; q++) {
        c->peer_dst[q] = theirs[2 * q];
        c->peer_src[q] = theirs[2 * q + 1];
    }
    rc = 0;
out:
    free(mine);
    free(theirs);
    return rc;
}

const uccl_engine_params_t *mt_engine_params;

int mt_init(mt_ctx_t *c, size_t buf_len)
{
    uccl_comm_params_t cp = {0};
    uccl_conn_attr_t attr = {.transport = "self"};
    uccl_status_t st;
    int bad = 0, any = 0;

    memset(c, 0, sizeof(*c));
    MPI_Comm_rank(MPI_COMM_WORLD, &c->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &c->size);
    c->buf_len = buf_len;
    if (!transports_usable()) {
        if (c->rank == 0)
            printf("SKIP: UCCL_TRANSPORTS=%s is not usable here\n",
                   getenv("UCCL_TRANSPORTS") ? getenv("UCCL_TRANSPORTS") : "");
        return MT_SKIP;
    }
    if (mt_engine_params != NULL) {
        cp.field_mask = UCCL_COMM_PARAM_ENGINE_PARAMS;
        cp.engine_params = mt_engine_params;
    }
    st = uccl_comm_init_mpi(MPI_COMM_WORLD, mt_engine_params ? &cp : NULL, &c->comm);
    if (st != UCCL_OK) {
        fprintf(stderr, "FAIL rank %d: uccl_comm_init_mpi: %s\n", c->rank, uccl_status_name(st));
        return 1;
    }
    c->engine = uccl_comm_engine(c->comm);
    /* The transport's name, from one connection. Under lazy connection
     * (uccl_coll.h) a higher rank asking for a pair waits for the lower one
     * to use it too, and here only ranks 0 and 1 would: the others name
     * the transport from the environment instead. */
    if (c->size > 1 && (!mt_lazy() || c->rank < 2))
        uccl_conn_query(uccl_comm_conn(c->comm, c->rank == 0 ? 1 : 0), &attr);
    else if (c->size > 1)
        attr.transport = getenv("UCCL_TRANSPORTS");
    c->transport = attr.transport;
    bad = alloc_regions(c) != 0 || exchange_descs(c) != 0;
    MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (any && c->rank == 0)
        fprintf(stderr, "FAIL: allocating or registering %zu-byte regions\n", buf_len);
    return any;
}

void mt_fini(mt_ctx_t *c)
{
    /* Nobody closes connections a peer is still using. */
    MPI_Barrier(MPI_COMM_WORLD);
    for (int q = 0; c->src && c->dst && c->src_mr && c->dst_mr && q < c->size; q++) {
        if (c->src_mr[q] != NULL)
            uccl_mr_dereg(c->src_mr[q]);
        if (c->dst_mr[q] != NULL)
            uccl_mr_dereg(c->dst_mr[q]);
        free(c->src[q]);
        free(c->dst[q]);
    }
    if (c->comm != NULL)
        uccl_comm_destroy(c->comm);
    free(c->src);
    free(c->dst);
    free(c->src_mr);
    free(c->dst_mr);
    free(c->peer_dst);
    free(c->peer_src);
}
