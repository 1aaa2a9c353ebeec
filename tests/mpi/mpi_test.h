/* Harness of the MPI tests: the rank's communicator, one source and one
 * destination region per peer, data patterns with layouts, case reports. */
#ifndef UCCL_TESTS_MPI_TEST_H
#define UCCL_TESTS_MPI_TEST_H

#include <stddef.h>
#include <stdint.h>
#include <uccl/uccl_mpi.h>

/* Exit status that automake reads as "skipped". */
#define MT_SKIP 77
#define MT_GUARD 16 /* poisoned bytes checked after each landing area */

typedef struct mt_ctx {
    int rank, size;
    uccl_comm_t *comm;
    uccl_engine_t *engine;
    const char *transport; /* of the connections, for the report lines */
    size_t buf_len;        /* of each region */
    uint8_t **src, **dst;  /* [peer]; [rank] unused */
    uccl_mr_t **src_mr, **dst_mr;
    uccl_rdesc_t *peer_dst; /* [peer]: the peer's dst region kept for me (I write there) */
    uccl_rdesc_t *peer_src; /* [peer]: the peer's src region kept for me (I read there) */
    int failed;             /* this rank failed the current case */
    int skipped;            /* the current case was skipped (mt_skip) */
} mt_ctx_t;

/* Where a message of len bytes lies in a buffer: parts pieces, piece i
 * holding message bytes [i*len/parts, (i+1)*len/parts) at
 * base + i*len/parts + i*gap. */
typedef struct mt_layout {
    size_t base;
    int parts;
    size_t gap;
} mt_layout_t;

/* Engine parameters of the comm mt_init creates (NULL: defaults). */
extern const uccl_engine_params_t *mt_engine_params;

/* Bootstraps over MPI_COMM_WORLD; returns MT_SKIP (on every rank) when the
 * transports in UCCL_TRANSPORTS cannot be used here. */
int mt_init(mt_ctx_t *c, size_t buf_len);
void mt_fini(mt_ctx_t *c);

uint32_t mt_seed(int from, int to, size_t len, int salt);
void mt_fill(uint8_t *buf, mt_layout_t l, size_t len, uint32_t seed);
void mt_poison(uint8_t *buf, mt_layout_t l, size_t len, uint32_t seed);
/* 0 when buf holds the message where l says and poison around it; else
 * prints the first difference (naming what) and returns -1. */
int mt_check(const mt_ctx_t *c, const uint8_t *buf, mt_layout_t l, size_t len, uint32_t seed,
             const char *what);
/* iov (at most UCCL_IOV_MAX) for the pieces of l; returns the count. */
int mt_iov(uccl_iov_t *iov, uccl_mr_t *mr, mt_layout_t l, size_t len);

/* Note a failure of this rank in the current case (printed to stderr). */
void mt_fail(mt_ctx_t *c, const char *fmt, ...);
/* Note a failure unless st == want. */
void mt_expect(mt_ctx_t *c, uccl_status_t st, uccl_status_t want, const char *what);
/* Wait for n requests, each must end with want; frees them. */
void mt_wait(mt_ctx_t *c, uccl_req_t **reqs, int n, uccl_status_t want, const char *what);
/* A barrier through libuccl: 0-byte messages to and from every peer, so
 * that every rank keeps progressing until all are here. */
void mt_uccl_barrier(mt_ctx_t *c);
/* comm (over MPI_COMM_WORLD's ranks) has MPI's rank and size, and conn(q)
 * leads to rank q: its peer id is q's engine id, and a message sent on it
 * by q carries q's rank. Collective. */
void mt_check_comm(mt_ctx_t *c, uccl_comm_t *comm);
/* The current case is skipped, for the reason fmt gives: rank 0 prints a
 * "SKIP: " line (tests/driver.sh counts it as a skip) and mt_report prints
 * no "ok" for the case. Every rank calls it (the decision is collective). */
void mt_skip(mt_ctx_t *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Agree on the case and print "ok NAME" / "FAIL NAME" on rank 0 (nothing
 * for a case skipped without a failure); returns 1 if any rank failed.
 * Resets c->failed and c->skipped. */
int mt_report(mt_ctx_t *c, const char *name);

/* 1 when UCCL_LAZY_CONNECT=1: comms connect each pair on first use. */
int mt_lazy(void);

#endif
