/* MAPPED's private definitions (coll/mapped.c: segments, setup, running;
 * coll/mapped_build.c: what a call writes, reads and copies). */
#ifndef UCCL_COLL_MAPPED_H
#define UCCL_COLL_MAPPED_H

#include <stdatomic.h>

#include "coll.h"

#define LINE 64
#define SLOT_MAX (64u * 1024)
#define SLOT_MIN 4096u
#define SEG_BUDGET (4u << 20) /* slot bytes per buffer and rank: n slots share it */
#define RING_BUDGET (8u << 20) /* slot bytes of all buffers of a rank's segment */
#define RING_MAX 16            /* buffers per writer: a writer runs this many calls ahead */

struct coll_mapped {
    char *seg;
    size_t seg_len, slot;
    uccl_mr_t *mr;
    char **peer;          /* [n] segments mapped here; peer[rank] = seg */
    uint64_t next_m;      /* number of the next call started */
    uint64_t next_write, next_read; /* call whose writes / reads may run */
    int depth;            /* buffers (2..RING_MAX); call m uses buffer m % depth */
    uint64_t last_write[RING_MAX];
    uint8_t *readers;     /* [depth][n]: who read each buffer's last write */
    uint64_t *acked;      /* [n]: the latest ack seen of each reader (a local copy) */
    bool prefetchw;       /* the processor prefetches for writing */
    uccl_status_t failed; /* a call failed midway: the order is lost, every later
                           * call fails with this at once */
};

typedef struct { int slot; uint8_t buf; size_t off, len; } mw_t;
typedef struct { int from, slot; uint8_t buf; size_t off, len; bool done; } mrd_t;
typedef struct { uint8_t dbuf, sbuf; size_t doff, soff, len; } mcp_t;

struct coll_mapped_run {
    uint64_t m;
    int p;     /* its buffer: m % depth */
    int state; /* 0 write, 1 read, 2 done */
    int nw, nr, nc;
    mw_t *ws;
    mrd_t *rs;
    mcp_t *cs;
    uint8_t *readers; /* [n]: who reads this rank's segment in this call */
    bool writer;
    int waiting_on;   /* a peer this call waits for (-1 none) */
    unsigned polls;
    uccl_status_t soft;
};

#endif
