/* The direct stream path of the stream-ordered collectives (uccl_coll.h,
 * uccl_coll_post_stream): when every peer's GPU memory is mapped here
 * (uccl_rdesc_ptr over gpu_ipc), the whole collective is enqueued on the
 * caller's stream at call time, from the calling thread:
 *   ready(s) into each peer's flag slot for this rank -> wait until every
 *   peer's ready(s) is in ours -> copy straight into each peer's receive
 *   buffer -> done(s) into each peer's slot -> wait the done(s) of every
 *   peer writing here.
 * No host hold of the stream and no thread: a kernel module load in the
 * caller's process meanwhile only waits for the device, which waits only
 * for the peers' streams (the deadlock of the hold path cannot form).
 *
 * Flags: one GPU allocation (2 MiB, FLAGS_ALLOC) per communicator of 2 * size 32-bit words
 * (word q: ready of peer q, word size + q: done of peer q), registered and
 * mapped by every peer once, at the comm's first stream-ordered call
 * (collective: two host allgathers). Sequence numbers count the comm's
 * direct stream calls from UCCL_COLL_STREAM_SEQ0 + 1 and wrap: the
 * stream waits compare cyclically. ready(s) also says that the rank's
 * stream is past call s - 1, so its receive buffer is free again; done(s)
 * that the bytes it wrote are visible.
 *
 * The first call on given arguments exchanges one token with every peer
 * (tagged messages over the host transport; later calls on the same
 * arguments reuse its plan, coll/stream_cache.c): can this rank take the
 * path (GPU buffers,
 * a supported op), its receive buffer's descriptor, where the peer's block
 * goes and how many bytes each side moves. The path is taken only when
 * every token says yes (so every rank decides alike), else the hold path
 * runs. A descriptor new to the peer (fresh) is mapped by the peer, which
 * then acknowledges it: its sender keeps the engine progressing until then
 * (the mapping asks the owner for a grant).
 *
 * The request learns that the stream passed the call from a host-mapped
 * word the stream writes last (the call's sequence number), not from an
 * event; each run of flag writes and waits is one driver call where the
 * driver batches (uccl_stream_ops, UCCL_COLL_STREAM_OPS).
 *
 * A dead peer: its flags never come, and a stream wait cannot time out.
 * A fault on the caller's stream (a kernel's illegal address): the stream
 * never writes the word. The call's request watches, every 5 ms: once a
 * peer's connection fails, once the engine's own stream reports a fault
 * the runtime keeps for the whole context (uccl_stream_query(engine,
 * NULL): CUDA's sticky errors; the caller's stream is never asked, it may
 * be gone), or when the stream has not passed the call within
 * UCCL_TIMEOUT_MS, the host writes
 * this call's sequence number into every flag word of this rank (through
 * uccl_copy_post on the engine's stream; after a context fault that fails
 * too), the caller's stream goes on, the request fails (UCCL_ERR_PEER_FAILED,
 * the fault's status, e.g. UCCL_ERR_IO, or UCCL_ERR_TIMEOUT) and the comm's
 * direct path is closed (later stream calls fail with that status). The
 * watch runs from progress: uccl_test / uccl_wait of the request, or the
 * engine's progress thread; a caller that drops the request and only
 * synchronizes its stream needs the progress thread for this bound. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "stream.h"

/* ------------------------------------------------------------------ one call */

/* Where each op sends and receives, in bytes. */
typedef struct sargs {
    const char *src; /* base of what this rank sends (the receive buffer when in place) */
    char *recv;
    size_t rext;     /* extent of the receive buffer used */
} sargs_t;

static bool sop_supported(const coll_args_t *a)
{
    return a->op == UCCL_COLL_ALLGATHER || a->op == UCCL_COLL_ALLGATHERV ||
           a->op == UCCL_COLL_ALLTOALL || a->op == UCCL_COLL_ALLTOALLV || a->op == UCCL_COLL_BCAST;
}

/* Bytes this rank sends to q and offsets: block sent to q at src + *soff. */
static size_t send_len(const coll_args_t *a, int me, int q, size_t *soff)
{
    *soff = 0;
    switch (a->op) {
    case UCCL_COLL_ALLGATHER: *soff = a->in_place ? (size_t)me * a->count : 0; return a->count;
    case UCCL_COLL_ALLGATHERV:
        *soff = a->in_place ? a->rdispls[me] : 0;
        return a->in_place ? a->recvcounts[me] : a->count;
    case UCCL_COLL_ALLTOALL: *soff = (size_t)q * a->count; return a->count;
    case UCCL_COLL_ALLTOALLV:
        *soff = a->in_place ? a->rdispls[q] : a->sdispls[q];
        return a->in_place ? a->recvcounts[q] : a->sendcounts[q];
    default: return me == a->root ? a->count : 0; /* bcast */
    }
}

/* Bytes this rank receives from q, at recv + *roff. */
static size_t recv_len(const coll_args_t *a, int me, int q, size_t *roff)
{
    (void)me;
    switch (a->op) {
    case UCCL_COLL_ALLGATHER: case UCCL_COLL_ALLTOALL: *roff = (size_t)q * a->count; return a->count;
    case UCCL_COLL_ALLGATHERV: case UCCL_COLL_ALLTOALLV: *roff = a->rdispls[q]; return a->recvcounts[q];
    default: *roff = 0; return q == a->root && me != a->root ? a->count : 0; /* bcast */
    }
}

static bool is_gpu(const void *p)
{
    uccl_mem_type_t t;

    return p != NULL && uccl_mem_query(p, &t, NULL) == UCCL_OK && t != UCCL_MEM_HOST;
}

/* Can this rank take the path: op, buffers on the GPU. */
static bool call_ok(const coll_args_t *a, int me, int n, sargs_t *sa)
{
    size_t off, ext = 0, sbytes = 0;

    /* in place, an alltoall would read blocks its peers are writing */
    if (!sop_supported(a) || (a->in_place && (a->op == UCCL_COLL_ALLTOALL || a->op == UCCL_COLL_ALLTOALLV)))
        return false;
    sa->recv = a->recvbuf;
    sa->src = a->op == UCCL_COLL_BCAST || a->in_place ? a->recvbuf : a->sendbuf;
    for (int q = 0; q < n; q++) {
        size_t l = recv_len(a, me, q, &off);
        if (l > 0 && off + l > ext)
            ext = off + l;
        sbytes += send_len(a, me, q, &off);
    }
    sa->rext = ext;
    return (ext == 0 || is_gpu(sa->recv)) && (sbytes == 0 || is_gpu(sa->src));
}

/* My token for q, fresh when q may not know the descriptor yet. */
static void tok_fill(coll_sflags_t *sf, coll_state_t *cs, const coll_args_t *a, int q, bool ok, int slot,
                     stok_t *t)
{
    size_t roff, soff;

    memset(t, 0, sizeof(*t));
    t->magic = STOK_MAGIC;
    t->ok = ok;
    if (!ok)
        return;
    t->rlen = recv_len(a, sf->rank, q, &roff);
    t->slen = send_len(a, sf->rank, q, &soff);
    if (slot > 0 && t->rlen > 0) {
        coll_buf_entry_t *e = &cs->bufs[slot];
        uint64_t key = ((uint64_t)e->gen << 32) | (uint32_t)slot, *known = sf->sent + (size_t)q * SENT_KEYS;
        t->has_desc = 1;
        t->desc = e->desc;
        t->roff = (uint64_t)(a->recvbuf - e->addr) + roff;
        t->fresh = 1;
        for (int i = 0; i < SENT_KEYS; i++)
            if (known[i] == key)
                t->fresh = 0;
        sf->sent_key[q] = key;
    }
}

/* The peers mapped what was fresh to them: remember it. */
static void tok_known(coll_sflags_t *sf)
{
    for (int q = 0; q < sf->size; q++) {
        if (q == sf->rank || !sf->tok[q].fresh)
            continue;
        sf->sent[(size_t)q * SENT_KEYS + (size_t)sf->sent_next[q]] = sf->sent_key[q];
        sf->sent_next[q] = (sf->sent_next[q] + 1) % SENT_KEYS;
    }
}

static void reqs_free(uccl_req_t **r, int n)
{
    for (int i = 0; i < n; i++)
        if (r[i] != NULL)
            uccl_req_free(r[i]);
}

/* Tokens out to every peer and in from every peer; then the fresh
 * descriptors mapped and acknowledged. Fills sf->cur.dst / len. */
static uccl_status_t exchange(coll_sflags_t *sf, uint32_t tseq, bool *all_ok, uccl_status_t *soft)
{
    int n = sf->size, me = sf->rank, nr = 0;
    size_t tsz = sizeof(stok_t);
    uccl_req_t **r = calloc(4 * (size_t)n, sizeof(*r));
    uccl_status_t st = r != NULL ? UCCL_OK : UCCL_ERR_NO_MEMORY;

    for (int q = 0; st == UCCL_OK && q < n; q++) {
        if (q == me)
            continue;
        st = uccl_recv(sf->conns[q], sf->tok_mr, (size_t)(n + q) * tsz, tsz, coll_tag(tseq, STEP_STOKEN),
                       &r[nr++]);
        if (st == UCCL_OK)
            st = uccl_send(sf->conns[q], sf->tok_mr, (size_t)q * tsz, tsz, coll_tag(tseq, STEP_STOKEN),
                           &r[nr++]);
    }
    if (st == UCCL_OK)
        st = uccl_wait_all(r, (size_t)nr, uccl_coll_timeout_ms());
    *all_ok = sf->tok[me].ok;
    for (int q = 0; st == UCCL_OK && q < n; q++) {
        stok_t *t = &sf->tok[n + q];
        if (q != me && (t->magic != STOK_MAGIC))
            st = UCCL_ERR_PEER_FAILED;
        else if (q != me && !t->ok)
            *all_ok = false;
    }
    for (int q = 0; st == UCCL_OK && *all_ok && q < n; q++) /* q acknowledges what it maps */
        if (q != me && sf->tok[q].fresh)
            st = uccl_recv(sf->conns[q], sf->tok_mr, 2 * (size_t)n * tsz + (size_t)(n + q) * 4, 4,
                           coll_tag(tseq, STEP_SACK), &r[nr++]);
    for (int q = 0; st == UCCL_OK && *all_ok && q < n; q++) {
        stok_t *in = &sf->tok[n + q], *out = &sf->tok[q];
        if (q == me)
            continue;
        if (in->rlen != out->slen || in->slen != out->rlen) {
            coll_error("stream collective: rank %d sends %llu bytes to rank %d, which expects %llu", me,
                       (unsigned long long)out->slen, q, (unsigned long long)in->rlen);
            *soft = UCCL_ERR_TRUNCATED;
        }
        sf->cur.len[q] = out->slen < in->rlen ? out->slen : in->rlen;
        sf->cur.rlen[q] = in->slen < out->rlen ? in->slen : out->rlen; /* q's len[me] */
        void *dst = NULL;
        if (sf->cur.len[q] > 0 && !in->has_desc)
            st = UCCL_ERR_PEER_FAILED;
        else if (sf->cur.len[q] > 0 || in->fresh)
            st = uccl_rdesc_ptr(sf->conns[q], &in->desc, &dst);
        sf->cur.dst[q] = st == UCCL_OK && dst != NULL ? (char *)dst + in->roff : NULL;
        if (st == UCCL_OK && in->fresh) {
            sf->acks[q] = 1;
            st = uccl_send(sf->conns[q], sf->tok_mr, 2 * (size_t)n * tsz + (size_t)q * 4, 4,
                           coll_tag(tseq, STEP_SACK), &r[nr++]);
        }
    }
    /* the acks this rank sends, and those it waits for (posted above) */
    if (st == UCCL_OK)
        st = uccl_wait_all(r, (size_t)nr, uccl_coll_timeout_ms());
    if (st == UCCL_OK && *all_ok)
        tok_known(sf);
    if (r != NULL)
        reqs_free(r, nr);
    free(r);
    return st;
}

/* The request: done once the stream has passed the call (its seq in the
 * comm's host word: the calls of a comm run in one order on the device,
 * as the flags need); watches the peers. */
typedef struct sreq {
    coll_sflags_t *sf;
    uccl_req_t *release; /* the flags written by the host after a failure */
    uint32_t seq;
    uccl_status_t status;
    uint64_t t0, last_check;
    uint32_t *vals; /* [2 * size] = seq, the release's source */
} sreq_t;

static uint64_t now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static uccl_status_t peers_state(const coll_sflags_t *sf)
{
    if (__atomic_load_n(&sf->closed, __ATOMIC_ACQUIRE))
        return UCCL_OK;
    for (int q = 0; q < sf->size; q++) {
        uccl_conn_attr_t attr;
        if (q != sf->rank && uccl_conn_query(sf->conns[q], &attr) == UCCL_OK && attr.state != UCCL_OK)
            return UCCL_ERR_PEER_FAILED;
    }
    return UCCL_OK;
}

/* A fault the runtime keeps for the context, asked on the engine's own
 * stream (its copies in flight are no fault). A peer's context is its own:
 * a peer that faulted alone is seen here only once it closes or dies (a
 * failed connection), else at UCCL_TIMEOUT_MS. */
static uccl_status_t ctx_fault(const coll_sflags_t *sf)
{
    uccl_status_t st = uccl_stream_query(sf->engine, NULL);

    return st == UCCL_INPROGRESS || st == UCCL_ERR_NO_DEVICE ? UCCL_OK : st;
}

static int sreq_progress(uccl_req_t *req, void *arg)
{
    sreq_t *x = arg;
    coll_sflags_t *sf = x->sf;
    uint64_t t = now_ms();
    size_t bytes;
    uccl_status_t st = uccl_stream_word_reached(sf->word, x->seq) ? UCCL_OK : UCCL_INPROGRESS;

    if (st == UCCL_INPROGRESS && x->release == NULL && t - x->last_check >= 5) {
        uccl_status_t bad = peers_state(sf);
        x->last_check = t;
        if (bad == UCCL_OK)
            bad = ctx_fault(sf);
        if (bad == UCCL_OK && t - x->t0 >= (uint64_t)uccl_coll_timeout_ms())
            bad = UCCL_ERR_TIMEOUT;
        if (bad != UCCL_OK) { /* let the stream go: this call's values into every word */
            coll_error("stream collective %u: %s; releasing the stream", x->seq, uccl_strerror(bad));
            x->status = bad;
            __atomic_store_n(&sf->broken, bad, __ATOMIC_RELEASE);
            for (int i = 0; i < 2 * sf->size; i++)
                x->vals[i] = x->seq;
            if (uccl_copy_post(sf->engine, sf->flags, x->vals, 2 * (size_t)sf->size * 4, &x->release) !=
                UCCL_OK)
                x->release = NULL;
        }
    }
    if (x->release != NULL && uccl_coll_req_status(x->release, &bytes) == UCCL_INPROGRESS)
        return 0;
    if (st == UCCL_INPROGRESS && x->status == UCCL_OK)
        return 0;
    if (x->release != NULL)
        uccl_req_free(x->release);
    uccl_req_finish(req, x->status, 0);
    uccl_coll_sf_unref(sf);
    free(x->vals);
    free(x);
    return 1;
}

/* The copies of the call whose exchange filled sf->cur.dst / len. */
static void plan_fill(coll_sflags_t *sf, const sargs_t *sa, const coll_args_t *a)
{
    splan_t *p = &sf->cur;
    int n = sf->size, me = sf->rank;
    size_t soff = 0, roff = 0, l;

    /* own block first: it waits for nobody */
    l = a->op == UCCL_COLL_BCAST ? 0 : send_len(a, me, me, &soff);
    recv_len(a, me, me, &roff);
    p->own_len = l > 0 && sa->src + soff != sa->recv + roff ? l : 0;
    p->own_dst = sa->recv + roff;
    p->own_src = sa->src + soff;
    for (int q = 0; q < n; q++) {
        p->src[q] = NULL;
        if (q == me || p->len[q] == 0)
            continue;
        send_len(a, me, q, &soff);
        p->src[q] = sa->src + soff;
    }
}

/* Enqueue the protocol of call s on stream, behind the comm's call s - 1
 * (this rank's own flag word, mine[me], holds the last call its streams
 * finished): the flags count the calls of the comm, not of a stream, so
 * calls queued on two streams run in call order as on one (else the later
 * call's flags, written first, passed the earlier call's waits: a done
 * before the bytes, and its request finished before its stream started
 * it). Every flag is written every
 * call (no word falls 2^31 calls behind: the waits compare cyclically),
 * but a rank waits only for what it needs: ready(s) of the peers it writes
 * into, done(s) of the peers writing into it (bcast: the root waits for
 * no done, the others for no ready; v-variants with empty blocks). The
 * operations go in three runs, each one driver call where the driver
 * batches (UCCL_COLL_STREAM_OPS): the ready writes and waits, the copies
 * (the own block first), then the done writes and waits and this call's
 * seq into the host word the request polls (no event per call). */
static uccl_status_t enqueue(coll_sflags_t *sf, void *stream, uint32_t s, const splan_t *p)
{
    int n = sf->size, me = sf->rank, mode = uccl_coll_stream_ops_mode();
    uint32_t *mine = sf->flags;
    uccl_stream_op_t *o = sf->ops;
    size_t k = 0;
    uccl_status_t st = UCCL_OK;

#define OP(kd, a, sr, l, v) (o[k++] = (uccl_stream_op_t){.kind = (kd), .addr = (a), .src = (sr), .len = (l), .value = (v)})
    /* after the comm's call s - 1, whatever stream it was queued on */
    OP(UCCL_STREAM_OP_WAIT, mine + me, NULL, 4, s - 1);
    for (int q = 0; q < n; q++)
        if (q != me)
            OP(UCCL_STREAM_OP_WRITE, (uint32_t *)sf->peer_flags[q] + me, NULL, 4, s);
    for (int q = 0; q < n; q++) /* only the buffers I write into */
        if (q != me && p->len[q] > 0)
            OP(UCCL_STREAM_OP_WAIT, mine + q, NULL, 4, s);
    if (p->own_len > 0)
        OP(UCCL_STREAM_OP_COPY, p->own_dst, p->own_src, p->own_len, 0);
    for (int q = 0; q < n; q++)
        if (q != me && p->len[q] > 0)
            OP(UCCL_STREAM_OP_COPY, p->dst[q], p->src[q], p->len[q], 0);
    for (int q = 0; q < n; q++)
        if (q != me)
            OP(UCCL_STREAM_OP_WRITE, (uint32_t *)sf->peer_flags[q] + n + me, NULL, 4, s);
    for (int q = 0; q < n; q++) /* only the peers writing here */
        if (q != me && p->rlen[q] > 0)
            OP(UCCL_STREAM_OP_WAIT, mine + n + q, NULL, 4, s);
    OP(UCCL_STREAM_OP_WRITE, mine + me, NULL, 4, s);
    OP(UCCL_STREAM_OP_WRITE, sf->word_dev, NULL, 4, s);
#undef OP
    if (mode != STREAM_OPS_SINGLE)
        return uccl_stream_ops(sf->engine, stream, o, k, mode == STREAM_OPS_ALL ? UCCL_STREAM_OPS_COPY_BATCH : 0);
    for (size_t i = 0; st == UCCL_OK && i < k; i++)
        st = uccl_stream_ops(sf->engine, stream, o + i, 1, 0);
    return st;
}

static uccl_status_t post_req(coll_sflags_t *sf, uint32_t s, uccl_status_t soft, uccl_req_t **req)
{
    sreq_t *x = calloc(1, sizeof(*x));
    uccl_req_t *g = NULL;
    uccl_status_t st = x != NULL ? UCCL_OK : UCCL_ERR_NO_MEMORY;

    if (st == UCCL_OK && (x->vals = malloc(2 * (size_t)sf->size * 4)) == NULL)
        st = UCCL_ERR_NO_MEMORY;
    if (st == UCCL_OK) {
        x->sf = sf;
        x->seq = s;
        x->status = soft;
        x->t0 = x->last_check = now_ms();
        __atomic_add_fetch(&sf->refs, 1, __ATOMIC_ACQ_REL);
        st = uccl_req_create(sf->engine, sreq_progress, x, &g);
        if (st != UCCL_OK)
            uccl_coll_sf_unref(sf);
    }
    if (st != UCCL_OK) {
        if (x != NULL)
            free(x->vals);
        free(x);
        return st;
    }
    if (req != NULL)
        *req = g;
    else
        uccl_req_free(g); /* detached: progress still watches it */
    return UCCL_OK;
}

/* Enqueue call s of plan p and count it; a failure closes the comm's path
 * (part of the protocol may be queued). */
static uccl_status_t run_plan(coll_state_t *cs, coll_sflags_t *sf, void *stream, const splan_t *p,
                              uccl_status_t soft, bool hit, uccl_req_t **req)
{
    uint32_t s = ++sf->seq;
    uccl_status_t st = enqueue(sf, stream, s, p);

    if (st == UCCL_OK)
        st = post_req(sf, s, soft, req);
    if (st == UCCL_OK || st == UCCL_ERR_TRUNCATED) {
        pthread_mutex_lock(&cs->lock);
        cs->stats.calls++;
        cs->stats.stream_direct++;
        if (hit)
            cs->stats.stream_plan_hits++;
        else
            cs->stats.stream_exchanges++;
        pthread_mutex_unlock(&cs->lock);
    }
    if (st != UCCL_OK)
        sf->broken = st;
    return st;
}

/* A call whose arguments no plan of every rank covers: tokens exchanged
 * with every peer, then the path when every rank can take it. */
static uccl_status_t try_exchange(coll_state_t *cs, coll_sflags_t *sf, const uccl_coll_args_t *args,
                                  coll_args_t *a, const sargs_t *sa, bool ok, int slot, void *stream,
                                  uccl_req_t **req, bool *taken)
{
    bool all_ok = false;
    uint32_t tseq;
    uccl_status_t soft = UCCL_OK, st;

    pthread_mutex_lock(&cs->lock);
    tseq = cs->seq++;
    pthread_mutex_unlock(&cs->lock);
    for (int q = 0; q < sf->size; q++)
        tok_fill(sf, cs, a, q, ok, slot, &sf->tok[q]);
    st = exchange(sf, tseq, &all_ok, &soft);
    sf->xid++;
    if (st == UCCL_OK && all_ok) {
        *taken = true;
        plan_fill(sf, sa, a);
        st = run_plan(cs, sf, stream, &sf->cur, soft, false, req);
        if (st == UCCL_OK && soft == UCCL_OK) {
            pthread_mutex_lock(&cs->lock);
            uccl_coll_sc_put(sf, cs, args, slot);
            pthread_mutex_unlock(&cs->lock);
        }
    } else if (st != UCCL_OK) {
        *taken = true; /* a peer failed in the exchange: nothing was queued */
        sf->broken = st;
    }
    return st;
}

uccl_status_t uccl_coll_stream_try(uccl_comm_t *comm, const uccl_coll_args_t *args, void *stream,
                                   uccl_req_t **req, bool *taken)
{
    coll_state_t *cs;
    coll_sflags_t *sf;
    coll_args_t a;
    sargs_t sa = {0};
    scached_t *hitc;
    int slot = -1;
    bool ok, hit = false;
    uccl_status_t st = uccl_coll_state_get(comm, &cs);

    *taken = false;
    if (st != UCCL_OK || args == NULL || stream == NULL)
        return UCCL_OK; /* the hold path reports it */
    if (!uccl_coll_stream_enabled() || cs->size < 2)
        return UCCL_OK;
    if (cs->sf == NULL && (st = uccl_coll_sf_open(cs, &cs->sf)) != UCCL_OK)
        return st; /* collective: the comm's first stream call on every rank */
    sf = cs->sf;
    if (sf->state < 0)
        return UCCL_OK;
    if ((st = __atomic_load_n(&sf->broken, __ATOMIC_ACQUIRE)) != UCCL_OK) {
        *taken = true;
        return st;
    }
    pthread_mutex_lock(&cs->lock);
    hitc = uccl_coll_sc_find(sf, cs, args);
    pthread_mutex_unlock(&cs->lock);
    if (hitc == NULL && uccl_coll_args_check(cs, args, &a) != UCCL_OK)
        return UCCL_OK; /* the hold path reports it (a cached key was checked before) */
    if (uccl_coll_stream_cache_on()) /* the same on every rank (the environment) */
        st = uccl_coll_sc_agree(sf, cs, hitc != NULL ? hitc->id : 0, &hit);
    if (st == UCCL_OK && hit) { /* every rank has this exchange's plan: no token */
        *taken = true;
        return run_plan(cs, sf, stream, &hitc->plan, UCCL_OK, true, req);
    }
    if (hitc != NULL && st == UCCL_OK && uccl_coll_args_check(cs, args, &a) != UCCL_OK)
        st = UCCL_ERR_INVALID_PARAM; /* cannot be: it was checked when kept */
    if (st != UCCL_OK) {
        *taken = true;
        sf->broken = st;
        if (hitc == NULL)
            uccl_coll_args_free(&a);
        return st;
    }
    ok = call_ok(&a, sf->rank, sf->size, &sa);
    pthread_mutex_lock(&cs->lock);
    if (ok && sa.rext > 0 && (uccl_coll_buf_get(cs, sa.recv, sa.rext, true, &slot) != UCCL_OK ||
                              uccl_coll_buf_desc(cs, slot, &(const uccl_rdesc_t *){NULL}) != UCCL_OK))
        ok = false;
    pthread_mutex_unlock(&cs->lock);
    st = try_exchange(cs, sf, args, &a, &sa, ok, slot, stream, req, taken);
    pthread_mutex_lock(&cs->lock);
    if (slot > 0)
        uccl_coll_buf_unpin(cs, slot);
    pthread_mutex_unlock(&cs->lock);
    uccl_coll_args_free(&a);
    return st;
}
