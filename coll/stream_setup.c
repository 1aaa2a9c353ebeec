/* The direct stream path's per-comm state (coll/stream.h): the flag words
 * in GPU memory, registered and mapped by every peer at the comm's first
 * stream-ordered call (two host allgathers: the descriptors, then whether
 * every rank mapped every peer's), the token buffers, the environment, and
 * the reference count that lets requests in flight outlive the comm. */
#include <stdlib.h>
#include <string.h>

#include "stream.h"

/* ------------------------------------------------------------------ environment */

static pthread_once_t env_once = PTHREAD_ONCE_INIT;
static bool env_direct = true;
static uint32_t env_seq0;
static bool env_cache = true;
static int env_ops = STREAM_OPS_BATCH;

static void env_read(void)
{
    const char *v = getenv("UCCL_COLL_STREAM");

    if (v != NULL && strcmp(v, "hold") == 0)
        env_direct = false;
    else if (v != NULL && *v != '\0' && strcmp(v, "direct") != 0)
        coll_error("UCCL_COLL_STREAM=%s: expected direct or hold; using direct", v);
    v = getenv("UCCL_COLL_STREAM_CACHE"); /* 0: every call exchanges (the plan cache off) */
    if (v != NULL && strcmp(v, "0") == 0)
        env_cache = false;
    v = getenv("UCCL_COLL_STREAM_OPS"); /* checked at engine creation (core's table) */
    if (v != NULL && strcmp(v, "single") == 0)
        env_ops = STREAM_OPS_SINGLE;
    else if (v != NULL && strcmp(v, "all") == 0)
        env_ops = STREAM_OPS_ALL;
    v = getenv("UCCL_COLL_STREAM_SEQ0");
    if (v != NULL && *v != '\0')
        env_seq0 = (uint32_t)strtoul(v, NULL, 0);
}

/* ------------------------------------------------------------------ lifetime */

void uccl_coll_sf_unref(coll_sflags_t *sf)
{
    if (__atomic_sub_fetch(&sf->refs, 1, __ATOMIC_ACQ_REL) > 0)
        return;
    for (int i = 0; i < sf->nkept; i++)
        uccl_mr_dereg(sf->kept[i]);
    free(sf->kept);
    if (sf->tok_mr != NULL)
        uccl_mr_dereg(sf->tok_mr);
    if (sf->flags_mr != NULL)
        uccl_mr_dereg(sf->flags_mr);
    if (sf->flags != NULL)
        uccl_mem_free(sf->engine, sf->flags);
    if (sf->word != NULL)
        uccl_stream_word_free(sf->engine, sf->word);
    free(sf->tok);
    free(sf->ops);
    free(sf->peer_flags);
    free(sf->conns);
    free(sf->sent);
    free(sf->sent_next);
    free(sf->sent_key);
    uccl_coll_splan_free(&sf->cur);
    free(sf->ids);
    free(sf);
}

/* The comm goes while this rank's stream has not passed its last direct
 * call: its peers may still be in that call, and they write into its
 * receive buffer through their mappings, which a deregistration would
 * close under them (one that has not enqueued its copies yet would then
 * enqueue them into a closed range). The registrations of the comm's
 * buffers move to sf and go with its last reference: the last request,
 * once the stream passed its call (or the call failed and released it). */
static void keep_regs(coll_sflags_t *sf, coll_state_t *cs)
{
    sf->kept = calloc((size_t)cs->nbufs, sizeof(*sf->kept));
    for (int i = 1; sf->kept != NULL && i < cs->nbufs; i++)
        if (cs->bufs[i].mr != NULL) {
            sf->kept[sf->nkept++] = cs->bufs[i].mr;
            cs->bufs[i].mr = NULL;
        }
}

void uccl_coll_stream_destroy(coll_state_t *cs)
{
    if (cs->sf != NULL) {
        pthread_mutex_lock(&cs->lock);
        uccl_coll_sc_clear(cs->sf, cs); /* unpins the receive buffers */
        if (uccl_coll_stream_busy(cs))
            keep_regs(cs->sf, cs);
        pthread_mutex_unlock(&cs->lock);
        __atomic_store_n(&cs->sf->closed, 1, __ATOMIC_RELEASE);
        uccl_coll_sf_unref(cs->sf);
    }
    cs->sf = NULL;
}

static uccl_status_t flags_alloc(coll_sflags_t *sf)
{
    size_t len = 2 * (size_t)sf->size * sizeof(uint32_t);
    uint32_t *init = malloc(len);
    size_t alloc = len > FLAGS_ALLOC ? len : FLAGS_ALLOC;
    uccl_status_t st = uccl_mem_alloc(sf->engine, UCCL_MEM_CUDA, alloc, &sf->flags);

    if (st == UCCL_ERR_UNSUPPORTED)
        st = uccl_mem_alloc(sf->engine, UCCL_MEM_ROCM, alloc, &sf->flags);
    if (init == NULL && st == UCCL_OK)
        st = UCCL_ERR_NO_MEMORY;
    for (int i = 0; st == UCCL_OK && i < 2 * sf->size; i++)
        init[i] = sf->seq;
    if (st == UCCL_OK)
        st = uccl_copy(sf->engine, sf->flags, init, len);
    if (st == UCCL_OK)
        st = uccl_mr_reg(sf->engine, sf->flags, len, 0, &sf->flags_mr);
    if (st == UCCL_OK)
        st = uccl_stream_word_alloc(sf->engine, &sf->word, &sf->word_dev);
    if (st == UCCL_OK)
        __atomic_store_n(sf->word, sf->seq, __ATOMIC_RELEASE);
    free(init);
    return st;
}

/* Map every peer's flags (the peers are in this exchange too: they answer
 * the grants while they wait in theirs). */
static uccl_status_t flags_map(coll_sflags_t *sf, coll_state_t *cs, const uccl_rdesc_t *descs)
{
    for (int q = 0; q < sf->size; q++) {
        uccl_conn_attr_t attr;
        uccl_status_t st;

        if (q == sf->rank) {
            sf->peer_flags[q] = sf->flags;
            continue;
        }
        sf->conns[q] = uccl_comm_conn(cs->comm, q);
        if (sf->conns[q] == NULL || uccl_conn_query(sf->conns[q], &attr) != UCCL_OK ||
            strcmp(attr.gpu_transport, "gpu_ipc") != 0)
            return UCCL_ERR_UNSUPPORTED;
        st = uccl_rdesc_ptr(sf->conns[q], &descs[q], &sf->peer_flags[q]);
        if (st != UCCL_OK)
            return st;
    }
    return UCCL_OK;
}

/* Collective, at the comm's first stream-ordered call: every rank sets up
 * and maps, then all learn whether all succeeded. */
static uccl_status_t sf_setup(coll_state_t *cs, coll_sflags_t *sf)
{
    int n = cs->size;
    uccl_rdesc_t mine, *descs = calloc((size_t)n, sizeof(*descs));
    uint8_t ok = 0, *oks = calloc((size_t)n, 1);
    uccl_status_t st = descs != NULL && oks != NULL ? UCCL_OK : UCCL_ERR_NO_MEMORY;

    memset(&mine, 0, sizeof(mine));
    if (st == UCCL_OK && env_direct && n > 1 && flags_alloc(sf) == UCCL_OK &&
        uccl_mr_pack(sf->flags_mr, 0, 2 * (size_t)n * sizeof(uint32_t), &mine) == UCCL_OK)
        ok = 1;
    if (st == UCCL_OK)
        st = uccl_allgather(cs->comm, &mine, descs, sizeof(mine));
    for (int q = 0; st == UCCL_OK && ok && q < n; q++)
        if (descs[q].bytes[0] == 0) /* that rank has no flags */
            ok = 0;
    if (st == UCCL_OK && ok && flags_map(sf, cs, descs) != UCCL_OK)
        ok = 0;
    if (st == UCCL_OK)
        st = uccl_allgather(cs->comm, &ok, oks, 1);
    for (int q = 0; st == UCCL_OK && q < n; q++)
        ok = ok && oks[q];
    sf->state = st == UCCL_OK && ok ? 1 : -1;
    coll_log(2, "stream-ordered collectives: direct path %s", sf->state > 0 ? "on" : "off");
    free(descs);
    free(oks);
    return st;
}

static uccl_status_t sf_create(coll_state_t *cs, coll_sflags_t **out)
{
    coll_sflags_t *sf = calloc(1, sizeof(*sf));
    int n = cs->size;

    if (sf == NULL)
        return UCCL_ERR_NO_MEMORY;
    pthread_once(&env_once, env_read);
    sf->refs = 1;
    sf->engine = cs->engine;
    sf->rank = cs->rank;
    sf->size = n;
    sf->seq = env_seq0;
    sf->broken = UCCL_OK;
    sf->peer_flags = calloc((size_t)n, sizeof(void *));
    sf->conns = calloc((size_t)n, sizeof(void *));
    sf->tok = calloc(2 * (size_t)n, sizeof(stok_t) + 2 * sizeof(uint32_t));
    sf->sent = calloc((size_t)n * SENT_KEYS, sizeof(uint64_t));
    sf->sent_next = calloc((size_t)n, sizeof(int));
    sf->sent_key = calloc((size_t)n, sizeof(uint64_t));
    sf->ids = calloc(1 + (size_t)n, sizeof(uint64_t));
    sf->ops = calloc(SOPS_MAX(n), sizeof(uccl_stream_op_t));
    if (!uccl_coll_splan_alloc(&sf->cur, n) || sf->peer_flags == NULL || sf->conns == NULL ||
        sf->tok == NULL || sf->sent == NULL || sf->sent_next == NULL || sf->sent_key == NULL || sf->ids == NULL ||
        sf->ops == NULL ||
        uccl_mr_reg(cs->engine, sf->tok, 2 * (size_t)n * (sizeof(stok_t) + 2 * sizeof(uint32_t)), 0,
                    &sf->tok_mr) != UCCL_OK) {
        uccl_coll_sf_unref(sf);
        return UCCL_ERR_NO_MEMORY;
    }
    sf->acks = (uint32_t *)(sf->tok + 2 * n);
    *out = sf;
    return UCCL_OK;
}

bool uccl_coll_stream_enabled(void)
{
    pthread_once(&env_once, env_read);
    return env_direct;
}

int uccl_coll_stream_ops_mode(void)
{
    pthread_once(&env_once, env_read);
    return env_ops;
}

bool uccl_coll_stream_cache_on(void)
{
    pthread_once(&env_once, env_read);
    return env_cache;
}

uccl_status_t uccl_coll_sf_open(coll_state_t *cs, coll_sflags_t **out)
{
    uccl_status_t st = sf_create(cs, out);

    if (st == UCCL_OK && (st = sf_setup(cs, *out)) != UCCL_OK) {
        uccl_coll_sf_unref(*out);
        *out = NULL;
    }
    return st;
}
