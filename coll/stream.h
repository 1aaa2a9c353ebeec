/* Private header of the direct stream path (coll/stream.c: the calls;
 * coll/stream_setup.c: the comm's flags, their mapping by the peers, the
 * environment). */
#ifndef UCCL_COLL_STREAM_H
#define UCCL_COLL_STREAM_H

#include "coll.h"

#define STOK_MAGIC 0x55435354u /* "UCST" */
#define STEP_STOKEN 0x8100u
#define STEP_SACK 0x8101u
#define SENT_KEYS 8 /* descriptors remembered as known, per peer */
/* The flag words get an allocation of 2 MiB (a GPU page of their own): the
 * peers keep it mapped for the comm's life, and CUDA may give small
 * allocations sharing a page the same IPC handle, which a process can open
 * only once (cudaErrorAlreadyMapped for the user's buffers next to it, seen
 * on the H200) */
#define FLAGS_ALLOC ((size_t)2 << 20)
/* The most stream operations one call enqueues on n ranks (coll/stream.c,
 * enqueue): per peer a ready write, a ready wait, a copy, a done write and
 * a done wait; the wait for the comm's previous call, the own block's
 * copy, the own flag's write and the host word's write. */
#define SOPS_MAX(n) (5 * ((size_t)(n) - 1) + 4)

typedef struct stok {
    uint32_t magic;
    uint32_t ok;    /* 1: this rank can take the direct path for this call */
    uint32_t fresh; /* 1: desc is new to you, map it and acknowledge */
    uint32_t has_desc;
    uint64_t roff;  /* where your bytes go, from the start of desc's range */
    uint64_t rlen;  /* bytes I expect from you */
    uint64_t slen;  /* bytes I send you */
    uccl_rdesc_t desc; /* my receive buffer's registration */
} stok_t;

/* What one call enqueues, after the flags: the own block (own_len bytes
 * own_src -> own_dst, 0: none), then len[q] bytes src[q] -> dst[q] into
 * each peer q's receive buffer (mapped here), rlen[q] from q into ours. */
typedef struct splan {
    char *own_dst;
    const char *own_src;
    size_t own_len;
    const char **src; /* [size] */
    char **dst;       /* [size] */
    size_t *len;      /* [size] */
    size_t *rlen;     /* [size]: bytes each peer writes here */
} splan_t;

/* The stream plan cache (stream_cache.c): a call whose arguments equal an
 * earlier exchanged call's reuses its plan when every rank has the plan of
 * that same exchange (id), agreed by one 8-byte host allgather; the
 * receive buffer's registration stays pinned while the entry lives. */
#define SCACHE 8
typedef struct scached {
    uint64_t id;         /* the exchange that made it (1, 2, ... alike on every rank); 0 empty */
    uccl_coll_args_t key; /* arrays point into vec */
    size_t *vec;
    int slot;            /* the pinned receive buffer (<= 0 none) */
    uint64_t last_use;
    splan_t plan;
} scached_t;

typedef struct uccl_coll_sflags {
    int refs; /* the comm's, and one per request in flight (atomic) */
    uccl_engine_t *engine;
    int rank, size;
    int state;            /* 0 not set up, 1 direct path on, -1 off */
    int closed;           /* the comm is gone: its connections are not ours to ask (atomic) */
    uccl_status_t broken; /* a call failed: the path refuses the next ones */
    uint32_t seq;
    void *flags;          /* [2 * size] words, GPU memory of this rank */
    uint32_t *word;       /* host-mapped: the caller's stream writes each call's seq here last */
    void *word_dev;
    uccl_stream_op_t *ops; /* [SOPS_MAX(size)]: one call's stream operations */
    uccl_mr_t *flags_mr;
    void **peer_flags;    /* [size]: each peer's flag words, mapped here */
    uccl_conn_t **conns;  /* [size] */
    stok_t *tok;          /* [2 * size]: tokens out (0..size-1), in (size..) */
    uint32_t *acks;       /* [2 * size]: acknowledgements out and in */
    uccl_mr_t *tok_mr;
    uint64_t *sent;       /* [size][SENT_KEYS]: descriptors each peer knows */
    int *sent_next;
    uint64_t *sent_key;   /* [size] per call: the key of the token to that peer */
    splan_t cur;          /* the call being made (arrays [size]) */
    uint64_t xid;         /* exchanges made so far (every rank alike) */
    uint64_t *ids;        /* [1 + size]: this rank's cached plan id for the call, then every rank's */
    scached_t cache[SCACHE];
    uint64_t use_clock;
    uccl_mr_t **kept;     /* the comm's buffer registrations, when it went with a call queued */
    int nkept;
} coll_sflags_t;

/* stream_setup.c */
/* UCCL_COLL_STREAM (direct, else hold) and UCCL_COLL_STREAM_SEQ0, read once. */
bool uccl_coll_stream_enabled(void);
/* UCCL_COLL_STREAM_OPS: batch (memops batched), all (copies too), single (one call each). */
#define STREAM_OPS_BATCH 0
#define STREAM_OPS_ALL 1
#define STREAM_OPS_SINGLE 2
int uccl_coll_stream_ops_mode(void);
/* UCCL_COLL_STREAM_CACHE (1, else 0: the plan cache off, every call exchanges). */
bool uccl_coll_stream_cache_on(void);
/* The comm's direct-path state, created and set up (collective: every rank
 * at its first stream call); sf->state says whether the path is on. */
uccl_status_t uccl_coll_sf_open(coll_state_t *cs, coll_sflags_t **out);
/* Drop one reference (the comm's or a request's); the last frees it. */
void uccl_coll_sf_unref(coll_sflags_t *sf);

/* stream_cache.c; under cs->lock (the receive slots' pins) */
/* The live entry whose key equals args (a stale receive buffer drops it), or NULL. */
scached_t *uccl_coll_sc_find(coll_sflags_t *sf, coll_state_t *cs, const uccl_coll_args_t *args);
/* Keep sf->cur for args under id sf->xid, pinning slot (> 0) again. */
void uccl_coll_sc_put(coll_sflags_t *sf, coll_state_t *cs, const uccl_coll_args_t *args, int slot);
/* Drop every entry (flush, the comm's end). */
void uccl_coll_sc_clear(coll_sflags_t *sf, coll_state_t *cs);
/* Without cs->lock, collective: every rank's id (0: none) gathered; *hit
 * when all are the same nonzero id. The internal allgather leaves the
 * comm's counters as they were. */
uccl_status_t uccl_coll_sc_agree(coll_sflags_t *sf, coll_state_t *cs, uint64_t id, bool *hit);
/* Plan arrays of one entry / sf->cur ([size] each) and their release. */
bool uccl_coll_splan_alloc(splan_t *p, int n);
void uccl_coll_splan_free(splan_t *p);

#endif
