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

typedef struct uccl_coll_sflags {
    int refs; /* the comm's, and one per request in flight (atomic) */
    uccl_engine_t *engine;
    int rank, size;
    int state;            /* 0 not set up, 1 direct path on, -1 off */
    int closed;           /* the comm is gone: its connections are not ours to ask (atomic) */
    uccl_status_t broken; /* a call failed: the path refuses the next ones */
    uint32_t seq;
    void *flags;          /* [2 * size] words, GPU memory of this rank */
    uccl_mr_t *flags_mr;
    void **peer_flags;    /* [size]: each peer's flag words, mapped here */
    uccl_conn_t **conns;  /* [size] */
    stok_t *tok;          /* [2 * size]: tokens out (0..size-1), in (size..) */
    uint32_t *acks;       /* [2 * size]: acknowledgements out and in */
    uccl_mr_t *tok_mr;
    uint64_t *sent;       /* [size][SENT_KEYS]: descriptors each peer knows */
    int *sent_next;
    uint64_t *sent_key;   /* [size] per call: the key of the token to that peer */
    void **dst;           /* [size] per call: peer buffer + offset */
    size_t *len;          /* [size] per call: bytes to that peer */
} coll_sflags_t;

/* stream_setup.c */
/* UCCL_COLL_STREAM (direct, else hold) and UCCL_COLL_STREAM_SEQ0, read once. */
bool uccl_coll_stream_enabled(void);
/* The comm's direct-path state, created and set up (collective: every rank
 * at its first stream call); sf->state says whether the path is on. */
uccl_status_t uccl_coll_sf_open(coll_state_t *cs, coll_sflags_t **out);
/* Drop one reference (the comm's or a request's); the last frees it. */
void uccl_coll_sf_unref(coll_sflags_t *sf);

#endif
