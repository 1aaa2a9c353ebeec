/* Device queues (include/uccl/uccl_devq.h): what devq.c (objects, memory,
 * binding) and devq_proxy.c (the proxy thread) share. The proxy layer uses
 * the public API for every transfer, the GPU layer for mapped memory and the
 * util layer; never core or a transport (docs/LAYERS.md). */
#ifndef UCCL_PROXY_DEVQ_H
#define UCCL_PROXY_DEVQ_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <uccl/uccl.h>
#include <uccl/uccl_devq.h>

/* One vectored write in flight: the commands it carries, in ticket order. */
typedef struct uccl_devq_flight {
    uccl_req_t *req;
    uint32_t ncmds;
    uint64_t bytes;
    uint64_t posted_ms;
    uint64_t first;              /* ticket of its first command */
    uint64_t seen_ns, posted_ns; /* traced rings only (uccl_devq_trace_enable) */
} uccl_devq_flight_t;

/* One traced vectored write (tests/gpu/b_devq: the latency breakdown).
 * Times are CLOCK_REALTIME ns, the clock a GPU's global timer follows. */
typedef struct uccl_devq_trace_rec {
    uint64_t first;        /* ticket of its first command */
    uint32_t ncmds;
    uint64_t seen_ns;      /* its first command found published */
    uint64_t posted_ns;    /* uccl_writemsg returned */
    uint64_t done_ns;      /* uccl_test found it complete */
    uint64_t published_ns; /* the done word stored */
} uccl_devq_trace_rec_t;

struct uccl_devq {
    uccl_engine_t *engine;
    uccl_devq_params_t p; /* every field resolved */
    int device;           /* GPU the ring is mapped for (-1: host memory) */

    /* one allocation: control words, counters, entries (host view; dev_base
     * is the same memory as kernels address it) */
    void *mem;
    void *dev_base;
    size_t mem_bytes;
    uccl_devq_ctrl_t *ctrl;
    uint64_t *counters;
    uccl_devq_cmd_t *cmds;
    size_t counters_off, cmds_off;
    unsigned long long *head; /* ticket counter: GPU memory when mapped */

    uccl_mr_t *local;
    size_t local_len;
    uccl_conn_t **peers;
    uccl_rdesc_t *slots;
    uint8_t *slot_bound;

    pthread_t thread, sentinel;
    bool running;           /* the thread exists (owner's view) */
    bool sentinel_running;
    atomic_int sentinel_stop;
    atomic_int stop_req;    /* ask the thread to drain and leave */
    int canceled_by_stop;   /* the error word is the stop's CANCELED */

    /* proxy thread's own */
    uint64_t tail; /* next ticket to take */
    uint64_t done; /* the done word's value (the proxy is its only writer) */
    uccl_devq_trace_rec_t *trace; /* the first trace_cap writes, or NULL */
    uint32_t trace_cap, trace_fill, trace_count; /* written; readable (atomic) */
    uccl_devq_flight_t *fifo;
    uint32_t fifo_head, fifo_count, fifo_cap;
    uccl_iov_t *iov;
    uccl_riov_t *riov;

    _Atomic uint64_t n_commands, n_completed, n_writes, n_bytes, n_notifs;
};

/* Set the error word unless set already; returns the word's value after. */
uccl_status_t uccl_devq_set_error(uccl_devq_t *q, uccl_status_t error);
/* Record the first n vectored writes from the next start on (before the
 * start; n = 0 turns it off). Internal: tests only. */
uccl_status_t uccl_devq_trace_enable(uccl_devq_t *q, uint32_t n);
/* Copy up to n records (those complete so far); returns how many. */
uint32_t uccl_devq_trace_read(const uccl_devq_t *q, uccl_devq_trace_rec_t *out, uint32_t n);
/* The proxy thread's body (devq_proxy.c). */
void *uccl_devq_proxy_main(void *arg);
/* The sentinel thread's body: sets the error word when a bound connection
 * failed, even while the proxy thread is held up in the engine. */
void *uccl_devq_sentinel_main(void *arg);

#endif
