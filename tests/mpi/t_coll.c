/* MPI test of the collectives: every collective x every algorithm (forced)
 * x sizes including 0 x in place, blocking, non-blocking and persistent,
 * compared byte for byte with Open MPI's blocking collective on the same
 * inputs (v-variants: random counts with zeros, scattered displacements).
 * Then plan reuse, several in flight, errors (coll_cases.c). Any -np. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll_test.h"

static uint32_t rnd(uint32_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 17;
    *s ^= *s << 5;
    return *s;
}

static void fill(uint8_t *buf, size_t len, uint32_t seed)
{
    uint32_t s = seed | 1;

    for (size_t i = 0; i < len; i++)
        buf[i] = (uint8_t)(rnd(&s) >> 7);
}

static uint8_t *alloc_filled(size_t len, uint32_t seed)
{
    uint8_t *b = malloc(len + 1);

    if (b != NULL)
        fill(b, len + 1, seed);
    return b;
}

/* Blocks of the given counts at displacements in a random order with
 * random gaps; returns the extent. */
static size_t layout(const size_t *counts, size_t *displs, int n, uint32_t seed)
{
    int order[64];
    size_t pos = 0;
    uint32_t s = seed | 1;

    for (int i = 0; i < n; i++)
        order[i] = i;
    for (int i = n - 1; i > 0; i--) {
        int j = (int)(rnd(&s) % (uint32_t)(i + 1)), t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
    for (int i = 0; i < n; i++) {
        pos += rnd(&s) % 8;
        displs[order[i]] = pos;
        pos += counts[order[i]];
    }
    return pos + 8;
}

/* Random block size in [0, max], zero one time in four. */
static size_t rcount(uint32_t *s, size_t max)
{
    return rnd(s) % 4 == 0 ? 0 : rnd(s) % (max + 1);
}

/* In place, alltoallv sends what it receives: the matrix is symmetric. */
static void prepare_v(mt_ctx_t *c, ct_case_t *k, uccl_coll_op_t op, size_t max, bool sym,
                      uint32_t seed)
{
    int n = c->size, r = c->rank;
    uint32_t s = seed | 1;
    size_t *m = calloc((size_t)n * (size_t)n, sizeof(*m)); /* m[i*n+j]: i sends j */

    k->rcounts = calloc((size_t)n, sizeof(size_t));
    k->rdispls = calloc((size_t)n, sizeof(size_t));
    k->scounts = calloc((size_t)n, sizeof(size_t));
    k->sdispls = calloc((size_t)n, sizeof(size_t));
    for (int i = 0; i < n * n; i++)
        m[i] = rcount(&s, max);
    for (int i = 0; sym && i < n; i++)
        for (int j = 0; j < i; j++)
            m[i * n + j] = m[j * n + i];
    for (int j = 0; j < n; j++) {
        k->rcounts[j] = op == UCCL_COLL_ALLGATHERV ? m[j] : m[j * n + r];
        k->scounts[j] = m[r * n + j];
    }
    k->rlen = layout(k->rcounts, k->rdispls, n, seed ^ (uint32_t)(r * 7919 + 1));
    k->slen = op == UCCL_COLL_ALLGATHERV ? m[r]
                                        : layout(k->scounts, k->sdispls, n, seed ^ (uint32_t)r);
    free(m);
}

static void set_args(mt_ctx_t *c, ct_case_t *k, uccl_coll_op_t op, size_t count, int root,
                     bool in_place)
{
    uccl_coll_args_t *a = &k->args;
    bool at_root = c->rank == root;

    *a = (uccl_coll_args_t){.field_mask = UCCL_COLL_ARG_ROOT, .op = op, .sendbuf = k->sbuf,
                            .recvbuf = k->rbuf, .count = count, .root = root,
                            .sendcounts = k->scounts, .sdispls = k->sdispls,
                            .recvcounts = k->rcounts, .rdispls = k->rdispls};
    if (op == UCCL_COLL_ALLGATHERV)
        a->count = k->rcounts[c->rank];
    if (!in_place)
        return;
    if (op == UCCL_COLL_SCATTER && at_root)
        a->recvbuf = UCCL_IN_PLACE;
    else if (op != UCCL_COLL_SCATTER && op != UCCL_COLL_BCAST && (op != UCCL_COLL_GATHER || at_root))
        a->sendbuf = UCCL_IN_PLACE;
}

static void sizes(mt_ctx_t *c, ct_case_t *k, uccl_coll_op_t op, size_t count, int root,
                  bool in_place, uint32_t seed)
{
    size_t n = (size_t)c->size;
    bool at_root = c->rank == root;

    switch (op) {
    case UCCL_COLL_ALLGATHER: k->slen = count, k->rlen = n * count; break;
    case UCCL_COLL_ALLTOALL: k->slen = k->rlen = n * count; break;
    case UCCL_COLL_BCAST: k->rlen = count; break;
    case UCCL_COLL_GATHER: k->slen = count, k->rlen = at_root ? n * count : 0; break;
    case UCCL_COLL_SCATTER: k->slen = at_root ? n * count : 0, k->rlen = count; break;
    default: prepare_v(c, k, op, count, in_place, seed); break;
    }
}

/* In place, the data starts in rbuf: copy the parts MPI reads there. */
static void in_place_inputs(mt_ctx_t *c, ct_case_t *k, uccl_coll_op_t op, size_t count, int root)
{
    int r = c->rank;

    if (op == UCCL_COLL_ALLGATHER || (op == UCCL_COLL_GATHER && r == root))
        memcpy(k->rbuf + (size_t)r * count, k->sbuf, count);
    else if (op == UCCL_COLL_ALLGATHERV)
        memcpy(k->rbuf + k->rdispls[r], k->sbuf, k->rcounts[r]);
}

static void reference(mt_ctx_t *c, ct_case_t *k, uccl_coll_op_t op, size_t count, int root,
                      bool ip)
{
    int n = c->size, ic = (int)count, sc[64], sd[64], rc[64], rd[64];
    const void *sb = ip && (op != UCCL_COLL_GATHER || c->rank == root) ? MPI_IN_PLACE : k->sbuf;
    void *rb = k->ref;

    for (int i = 0; k->rcounts != NULL && i < n; i++)
        sc[i] = (int)k->scounts[i], sd[i] = (int)k->sdispls[i], rc[i] = (int)k->rcounts[i],
        rd[i] = (int)k->rdispls[i];
    switch (op) {
    case UCCL_COLL_ALLGATHER: MPI_Allgather(sb, ic, MPI_BYTE, rb, ic, MPI_BYTE, MPI_COMM_WORLD); break;
    case UCCL_COLL_ALLGATHERV:
        MPI_Allgatherv(sb, rc[c->rank], MPI_BYTE, rb, rc, rd, MPI_BYTE, MPI_COMM_WORLD);
        break;
    case UCCL_COLL_ALLTOALL: MPI_Alltoall(sb, ic, MPI_BYTE, rb, ic, MPI_BYTE, MPI_COMM_WORLD); break;
    case UCCL_COLL_ALLTOALLV:
        MPI_Alltoallv(sb, sc, sd, MPI_BYTE, rb, rc, rd, MPI_BYTE, MPI_COMM_WORLD);
        break;
    case UCCL_COLL_BCAST: MPI_Bcast(rb, ic, MPI_BYTE, root, MPI_COMM_WORLD); break;
    case UCCL_COLL_GATHER: MPI_Gather(sb, ic, MPI_BYTE, rb, ic, MPI_BYTE, root, MPI_COMM_WORLD); break;
    default:
        MPI_Scatter(k->sbuf, ic, MPI_BYTE, ip && c->rank == root ? MPI_IN_PLACE : rb, ic,
                    MPI_BYTE, root, MPI_COMM_WORLD);
        break;
    }
}

void ct_prepare(mt_ctx_t *c, ct_case_t *k, uccl_coll_op_t op, size_t count, int root,
                bool in_place, uint32_t seed)
{
    uint32_t mine = seed * 31u + (uint32_t)c->rank * 1000003u;

    memset(k, 0, sizeof(*k));
    sizes(c, k, op, count, root, in_place, seed);
    k->sbuf = alloc_filled(k->slen, mine);
    k->rbuf = alloc_filled(k->rlen, mine ^ 0xabcdu); /* bytes nobody writes stay */
    if (op == UCCL_COLL_BCAST && c->rank != root)
        fill(k->rbuf, k->rlen, seed ^ 0x5555u); /* only the root's content counts */
    if (in_place)
        in_place_inputs(c, k, op, count, root);
    k->ref = malloc(k->rlen + 1);
    memcpy(k->ref, k->rbuf, k->rlen + 1);
    if (in_place && op == UCCL_COLL_ALLTOALLV) { /* MPI reads rcounts/rdispls from recvbuf */
        fill(k->rbuf, k->rlen, mine);
        memcpy(k->ref, k->rbuf, k->rlen + 1);
    }
    if (in_place && op == UCCL_COLL_ALLTOALL)
        memcpy(k->rbuf, k->sbuf, k->rlen), memcpy(k->ref, k->sbuf, k->rlen);
    reference(c, k, op, count, root, in_place);
    set_args(c, k, op, count, root, in_place);
}

void ct_free(ct_case_t *k)
{
    free(k->sbuf);
    free(k->rbuf);
    free(k->ref);
    free(k->scounts);
    free(k->sdispls);
    free(k->rcounts);
    free(k->rdispls);
    memset(k, 0, sizeof(*k));
}

int ct_compare(mt_ctx_t *c, const ct_case_t *k, const char *what)
{
    for (size_t i = 0; i < k->rlen + 1; i++) {
        if (k->rbuf[i] != k->ref[i]) {
            mt_fail(c, "%s: byte %zu of %zu is 0x%02x, MPI has 0x%02x", what, i, k->rlen,
                    k->rbuf[i], k->ref[i]);
            return -1;
        }
    }
    return 0;
}

void ct_run(mt_ctx_t *c, ct_case_t *k, uccl_coll_algo_t algo, ct_mode_t mode)
{
    uccl_coll_plan_t *plan = NULL;
    uccl_req_t *req = NULL;
    uccl_status_t st;
    char what[160];

    k->args.field_mask |= UCCL_COLL_ARG_ALGO;
    k->args.algo = algo;
    snprintf(what, sizeof(what), "%s/%s count %zu root %d%s (%s)",
             uccl_coll_op_name(k->args.op), uccl_coll_algo_name(algo), k->args.count,
             k->args.root,
             k->args.sendbuf == UCCL_IN_PLACE || k->args.recvbuf == UCCL_IN_PLACE ? " in place" : "",
             mode == CT_BLOCKING ? "blocking" : mode == CT_NONBLOCKING ? "non-blocking"
                                              : mode == CT_PERSISTENT ? "persistent" : "stream");
    if (ct_mem() != CT_MEM_HOST) {
        st = ct_gpu_run(c, k, mode);
    } else if (mode == CT_BLOCKING) {
        st = uccl_coll(c->comm, &k->args);
    } else {
        st = mode == CT_NONBLOCKING ? uccl_coll_post(c->comm, &k->args, &req)
                                    : uccl_coll_init(c->comm, &k->args, &plan);
        if (st == UCCL_OK && plan != NULL)
            st = uccl_coll_start(plan, &req);
        if (st == UCCL_OK)
            st = uccl_wait(req, -1);
        if (req != NULL)
            uccl_req_free(req);
        if (plan != NULL)
            mt_expect(c, uccl_coll_plan_free(plan), UCCL_OK, "uccl_coll_plan_free");
    }
    mt_expect(c, st, UCCL_OK, what);
    if (st == UCCL_OK)
        ct_compare(c, k, what);
}

/* ------------------------------------------------------------------ the matrix */

static const size_t counts[] = {0, 1, 13, 1000, 33001};

/* What the header promises each algorithm implements. */
static bool algo_implements(uccl_coll_op_t op, uccl_coll_algo_t algo)
{
    bool all_to = op <= UCCL_COLL_ALLTOALLV, rooted = !all_to;

    switch (algo) {
    case UCCL_COLL_ALGO_AUTO: case UCCL_COLL_ALGO_DIRECT: case UCCL_COLL_ALGO_LINEAR: return true;
    case UCCL_COLL_ALGO_RING: return op == UCCL_COLL_ALLGATHER || op == UCCL_COLL_ALLGATHERV;
    case UCCL_COLL_ALGO_PAIRWISE: return op == UCCL_COLL_ALLTOALL || op == UCCL_COLL_ALLTOALLV;
    case UCCL_COLL_ALGO_BRUCK: return op == UCCL_COLL_ALLTOALL;
    case UCCL_COLL_ALGO_BINOMIAL: return rooted;
    case UCCL_COLL_ALGO_SCATTER_ALLGATHER: return op == UCCL_COLL_BCAST;
    case UCCL_COLL_ALGO_HIER:
        return op == UCCL_COLL_ALLGATHER || op == UCCL_COLL_ALLGATHERV || op == UCCL_COLL_BCAST;
    case UCCL_COLL_ALGO_MAPPED: return true;
    default: return false;
    }
}

static int matrix_op(mt_ctx_t *c, uccl_coll_op_t op, uint32_t *seed)
{
    int fails = 0, nroots = op >= UCCL_COLL_BCAST ? 2 : 1, vec = 0;
    bool has_ip = op != UCCL_COLL_BCAST;

    vec = op == UCCL_COLL_ALLGATHERV || op == UCCL_COLL_ALLTOALLV;
    for (int algo = 0; algo < UCCL_COLL_ALGO_COUNT; algo++) {
        int i = 0;
        char name[96];
        if (!algo_implements(op, (uccl_coll_algo_t)algo))
            continue;
        if (algo == UCCL_COLL_ALGO_MAPPED && !ct_mapped_usable(c, c->comm)) {
            mt_skip(c, "%s mapped (the ranks cannot map each other's memory: not shm on one host)",
                    uccl_coll_op_name(op));
            fails += mt_report(c, "mapped");
            continue;
        }
        for (size_t s = 0; s < sizeof(counts) / sizeof(counts[0]); s++)
            for (int ip = 0; ip <= (int)has_ip; ip++)
                for (int rt = 0; rt < nroots; rt++, i++) {
                    ct_case_t k;
                    int root = rt == 0 ? 0 : c->size - 1;
                    ct_prepare(c, &k, op, vec ? counts[s] / 3 + (s > 0) : counts[s], root,
                               ip, ++*seed);
                    ct_run(c, &k, (uccl_coll_algo_t)algo,
                           (ct_mode_t)(i % (ct_mem() == CT_MEM_HOST ? 3 : 4)));
                    ct_free(&k);
                    /* freed buffers must not stay registered (an address
                     * malloc hands out again would hit a stale entry) */
                    mt_expect(c, uccl_comm_coll_flush(c->comm), UCCL_OK, "flush");
                }
        snprintf(name, sizeof(name), "%s %s (%d cases, %s memory)", uccl_coll_op_name(op),
                 uccl_coll_algo_name(algo), i, ct_mem_name());
        fails += mt_report(c, name);
    }
    return fails;
}

/* T_COLL_HOSTS=H: split the ranks into H emulated hosts (UCCL_HOST_ID,
 * rank r on host r % H: hosts interleave, so leaders are not the first
 * ranks); the table must then see several hosts. */
static int emulate_hosts(void)
{
    const char *v = getenv("T_COLL_HOSTS");
    int hosts = v ? atoi(v) : 0, rank;
    char id[32];

    if (hosts < 2)
        return 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    snprintf(id, sizeof(id), "emulated-host-%d", rank % hosts);
    setenv("UCCL_HOST_ID", id, 1);
    return hosts;
}

/* How many hosts the ranks span, by the engines' host identity (real hosts,
 * e.g. the two-VM cluster, or those T_COLL_HOSTS emulates). */
static int count_hosts(mt_ctx_t *c)
{
    uint64_t mine = uccl_engine_host_id(c->engine), *all = calloc((size_t)c->size, sizeof(*all));
    int hosts = 0;

    if (all == NULL)
        return 1;
    MPI_Allgather(&mine, 1, MPI_UINT64_T, all, 1, MPI_UINT64_T, MPI_COMM_WORLD);
    for (int r = 0; r < c->size; r++) {
        int seen = 0;
        for (int q = 0; q < r && !seen; q++)
            seen = all[q] == all[r];
        hosts += !seen;
    }
    free(all);
    return hosts;
}

/* What the table picks on one host for large blocks of host memory:
 * linear (the receiver's single CMA copy on shm measured best, and on tcp
 * the rendezvous beat direct's token round trip). */
static uccl_coll_algo_t one_host_large(mt_ctx_t *c)
{
    (void)c;
    return UCCL_COLL_ALGO_LINEAR;
}

/* More than one rank, every peer over shm (what MAPPED needs): the run's
 * UCCL_TRANSPORTS (asking the connections would connect a lazy comm's
 * pairs here, out of the order the lazy tests expect). */
static bool shm_peers(mt_ctx_t *c)
{
    const char *tps = getenv("UCCL_TRANSPORTS");

    return c->size > 1 && tps != NULL && strstr(tps, "shm") != NULL && strstr(tps, "tcp") == NULL &&
           strstr(tps, "ofi") == NULL && strstr(tps, "verbs") == NULL;
}

static void check_layout(mt_ctx_t *c, int hosts)
{
    uccl_coll_algo_t ag = uccl_coll_algo_select(c->comm, UCCL_COLL_ALLGATHER, 1 << 20), forced;
    uccl_coll_algo_t small = uccl_coll_algo_select(c->comm, UCCL_COLL_ALLGATHER, 64);
    uccl_coll_algo_t large = one_host_large(c);
    const char *env = getenv("UCCL_COLL_ALGO");

    if (env != NULL && uccl_coll_algo_parse(env, &forced) == UCCL_OK) {
        uccl_coll_algo_t at = uccl_coll_algo_select(c->comm, UCCL_COLL_ALLTOALL, 1 << 20);
        if (ag != forced || (c->size > 1 && hosts <= 1 && at != large))
            mt_fail(c, "UCCL_COLL_ALGO=%s: allgather gets %s, alltoall (no %s) gets %s", env,
                    uccl_coll_algo_name(ag), env, uccl_coll_algo_name(at));
        if (c->rank == 0)
            printf("# UCCL_COLL_ALGO=%s: allgather gets %s\n", env, uccl_coll_algo_name(ag));
        ag = hosts > 1 ? UCCL_COLL_ALGO_RING : large; /* for the checks below */
        small = shm_peers(c) ? UCCL_COLL_ALGO_MAPPED : UCCL_COLL_ALGO_LINEAR;
    }

    if (c->size > 1 && hosts > 1 && (ag == UCCL_COLL_ALGO_DIRECT || ag == UCCL_COLL_ALGO_LINEAR))
        mt_fail(c, "%d hosts, yet the table picks %s (one host)", hosts,
                uccl_coll_algo_name(ag));
    if (c->size > 1 && hosts <= 1 && ag != large)
        mt_fail(c, "one host, yet the table picks %s at 1 MiB (want %s)", uccl_coll_algo_name(ag),
                uccl_coll_algo_name(large));
    /* small blocks on one host: through the mapped segments over shm, else
     * one eager message per peer */
    if (hosts <= 1 && small != (shm_peers(c) ? UCCL_COLL_ALGO_MAPPED : UCCL_COLL_ALGO_LINEAR))
        mt_fail(c, "one host, yet the table picks %s at 64 B", uccl_coll_algo_name(small));
    if (c->rank == 0)
        printf("# %d host(s): auto picks %s for allgather (%s at 64 B), %s for alltoall, %s "
               "for bcast\n", hosts > 1 ? hosts : 1, uccl_coll_algo_name(ag),
               uccl_coll_algo_name(small),
               uccl_coll_algo_name(uccl_coll_algo_select(c->comm, UCCL_COLL_ALLTOALL, 1 << 20)),
               uccl_coll_algo_name(uccl_coll_algo_select(c->comm, UCCL_COLL_BCAST, 1 << 20)));
}

/* UCCL_COLL_COPY_THREAD=1 (coll-shm-np3/np4, coll-tcp-np2): the matrix's
 * local copies (own blocks, in-place temporaries) of UCCL_COLL_COPY_MIN
 * bytes and more ran on the copy helper, every result compared with Open
 * MPI's; =0: none did. */
static void check_helper(mt_ctx_t *c)
{
    const char *v = getenv("UCCL_COLL_COPY_THREAD");
    uccl_coll_stats_t st;

    if (v == NULL || (strcmp(v, "0") != 0 && strcmp(v, "1") != 0))
        return;
    if (uccl_comm_coll_stats(c->comm, &st) != UCCL_OK) {
        mt_fail(c, "uccl_comm_coll_stats failed");
        return;
    }
    if (c->size > 1 && (v[0] == '1') != (st.helper_copies > 0))
        mt_fail(c, "UCCL_COLL_COPY_THREAD=%s, yet the copy helper ran %llu copies", v,
                (unsigned long long)st.helper_copies);
    else if (c->rank == 0)
        printf("# UCCL_COLL_COPY_THREAD=%s: the copy helper ran %llu copies on rank 0\n", v,
               (unsigned long long)st.helper_copies);
}

int main(int argc, char **argv)
{
    mt_ctx_t c;
    int rc, fails = 0, hosts, seen;
    uint32_t seed = 12345;

    MPI_Init(&argc, &argv);
    hosts = emulate_hosts();
    MPI_Comm_rank(MPI_COMM_WORLD, &rc);
    if ((rc = ct_mem_init(rc)) != 0) {
        MPI_Finalize();
        return rc;
    }
    rc = mt_init(&c, 64);
    if (rc != 0) {
        mt_fini(&c);
        MPI_Finalize();
        return rc;
    }
    seen = count_hosts(&c);
    if (hosts != 0 && seen != hosts)
        mt_fail(&c, "T_COLL_HOSTS=%d, yet the engines name %d hosts", hosts, seen);
    hosts = seen;
    check_layout(&c, hosts);
    fails += mt_report(&c, "host layout seen by the algorithm table");
    /* T_COLL_STREAM_ONLY=1: only the stream-form cases below (GPU) */
    for (int op = 0; op < UCCL_COLL_OP_COUNT && !getenv("T_COLL_STREAM_ONLY"); op++)
        fails += matrix_op(&c, (uccl_coll_op_t)op, &seed);
    if (!getenv("T_COLL_STREAM_ONLY")) {
        check_helper(&c);
        fails += mt_report(&c, "copy helper used as UCCL_COLL_COPY_THREAD says");
    }
    if (ct_mem() != CT_MEM_HOST) { /* the host-memory cases below run in t_coll */
        const char *only = getenv("T_COLL_STREAM_CASE"); /* wide, two, flush, holddead, destroy: that case alone */
        if (ct_mem() == CT_MEM_GPU && only != NULL && strcmp(only, "wide") == 0) {
            ct_stream_wide(&c);
            fails += mt_report(&c, "stream form: every peer written and waited for");
        } else if (ct_mem() == CT_MEM_GPU && only != NULL && strcmp(only, "two") == 0) {
            ct_stream_two(&c);
            fails += mt_report(&c, "stream form: two streams, the second one's run first");
        } else if (ct_mem() == CT_MEM_GPU && only != NULL && strcmp(only, "holddead") == 0) {
            ct_stream_hold_dead(&c);
            fails += mt_report(&c, "stream form (hold path): a rank gone, the held streams go on");
        } else if (ct_mem() == CT_MEM_GPU && only != NULL && strcmp(only, "destroy") == 0) {
            ct_stream_destroy(&c);
            fails += mt_report(&c, "stream form: a comm destroyed with its call queued");
        } else if (ct_mem() == CT_MEM_GPU && only != NULL && strcmp(only, "flush") == 0) {
            ct_stream_flush(&c);
            fails += mt_report(&c, "stream form: a flush while a call is queued is refused");
        } else if (ct_mem() == CT_MEM_GPU) {
            ct_stream_order(&c);
            fails += mt_report(&c, "stream form: after the stream's work, before its later work");
            ct_stream_direct(&c);
            fails += mt_report(&c, "stream form: back-to-back calls enqueued whole on the stream");
            ct_stream_cache(&c);
            fails += mt_report(&c, "stream form: plan cache, ranks disagreeing, a buffer freed");
            ct_stream_stats(&c);
            fails += mt_report(&c, "stream form: counters exact with a collective in flight during the agreement");
            ct_stream_two(&c);
            fails += mt_report(&c, "stream form: two streams, the second one's run first");
            ct_stream_flush(&c);
            fails += mt_report(&c, "stream form: a flush while a call is queued is refused");
            ct_stream_hold_dead(&c);
            fails += mt_report(&c, "stream form (hold path): a rank gone, the held streams go on");
            ct_stream_destroy(&c);
            fails += mt_report(&c, "stream form: a comm destroyed with its call queued");
            ct_stream_dead(&c);
            fails += mt_report(&c, "stream form: a rank gone with its part queued: the stream goes on");
            ct_gpu_refused(&c);
            fails += mt_report(&c, "GPU memory and no GPU transport: UCCL_ERR_UNSUPPORTED everywhere");
            ct_gpu_auto_small(&c);
            fails += mt_report(&c, "AUTO leaves MAPPED out where every peer is over gpu_ipc");
            ct_stream_fault(&c); /* last: the context stays lost */
            fails += mt_report(&c, "stream form: a sticky fault fails the request with its status at once");
        }
        ct_mem_fini();
        mt_fini(&c);
        MPI_Finalize();
        return fails ? 1 : 0;
    }
    ct_reuse(&c);
    fails += mt_report(&c, "1000 calls on the same buffers: no registration, no descriptor");
    ct_freed(&c);
    fails += mt_report(&c, "buffers freed with uccl_mem_free: registered anew, plans refused");
    ct_shared_large(&c);
    fails += mt_report(&c, "large blocks on uccl_mem_alloc buffers: Open MPI's bytes");
    ct_inflight(&c);
    fails += mt_report(&c, "non-blocking: several collectives in flight");
    ct_persistent(&c);
    fails += mt_report(&c, "persistent plans started repeatedly");
    ct_bad_args(&c);
    fails += mt_report(&c, "bad arguments: UCCL_ERR_INVALID_PARAM");
    ct_mismatch(&c);
    fails += mt_report(&c, "count mismatches: UCCL_ERR_TRUNCATED");
    ct_peer_gone(&c, UCCL_COLL_ALGO_DIRECT, false);
    fails += mt_report(&c, "a rank gone: the others fail, no hang");
    ct_peer_gone(&c, UCCL_COLL_ALGO_MAPPED, false);
    fails += mt_report(&c, "mapped, a rank gone: the others fail, no hang");
    ct_peer_gone(&c, UCCL_COLL_ALGO_MAPPED, true);
    fails += mt_report(&c, "mapped, a rank gone: a persistent plan's request fails, no hang");
    ct_mapped_ring(&c);
    fails += mt_report(&c, "mapped ring: rooted calls back to back, varying roots and sizes");
    ct_mapped_scatter_edges(&c);
    fails += mt_report(&c, "mapped scatter: 1-8 KiB blocks across the prefetched bytes");
    ct_mapped_hits(&c);
    fails += mt_report(&c, "mapped hits: repeated calls, blocking and non-blocking mixed");
    ct_mapped_plans(&c);
    fails += mt_report(&c, "mapped plans: persistent starts mixed with plain calls");
    ct_mapped_ring_dead(&c);
    fails += mt_report(&c, "mapped ring: a reader gone while the root runs ahead");
    mt_fini(&c);
    MPI_Finalize();
    return fails ? 1 : 0;
}
