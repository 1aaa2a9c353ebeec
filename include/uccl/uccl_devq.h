/* libuccl device queues: GPU-initiated transfers through a command ring and a
 * CPU proxy. A kernel (include/uccl/uccl_device.cuh) writes commands
 * {peer, local offset, remote descriptor slot, remote offset, length,
 * optional notification} into a ring in host-mapped pinned memory; a proxy
 * thread per ring reads them and issues uccl_writemsg on the ordinary engine
 * (so it runs over every transport), batching consecutive commands to the
 * same peer into one vectored write, and publishes completions to a counter
 * the kernel can wait on. Notifications that arrive on the ring's peers are
 * added to counters in mapped memory, so a consumer kernel can wait for data
 * without the host. Any failure (a failed write or connection, a timeout, a
 * malformed command, the proxy stopped under a waiting kernel) sets the
 * ring's error word, which the kernel sees and uccl_devq_status reports.
 *
 * Memory layout shared by the host and the device (C and C++/CUDA/HIP):
 * this header defines it; uccl_device.cuh holds the device-side calls. */
#ifndef UCCL_UCCL_DEVQ_H
#define UCCL_UCCL_DEVQ_H

#include <stdint.h>

#include <uccl/uccl.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- shared layout */

enum {
    UCCL_DEVQ_CMD_NOTIFY = 1u << 0, /* deliver notif after the data landed */
    /* set by the device API for a peer or slot index past the 16 bits of
     * its field (never truncated to another index): the proxy refuses the
     * command as malformed, as it does any flag it does not know */
    UCCL_DEVQ_CMD_BAD_INDEX = 1u << 30,
};

/* One command, 48 bytes. The producer writes every field, makes them visible
 * (a system-scope fence) and then writes seq = (ticket + 1) truncated to 32
 * bits: the proxy takes entry ticket & mask only when seq matches, so entries
 * of an earlier lap are never mistaken for new ones and nothing is cleared. */
typedef struct uccl_devq_cmd {
    uint64_t local_off;  /* into the region bound with uccl_devq_bind_local */
    uint64_t remote_off; /* into the range of the slot's remote descriptor */
    uint64_t notif;      /* with UCCL_DEVQ_CMD_NOTIFY */
    uint64_t len;        /* bytes, > 0 */
    uint16_t peer;       /* connection index (uccl_devq_bind_peer) */
    uint16_t slot;       /* remote descriptor index (uccl_devq_bind_rdesc) */
    uint32_t flags;      /* UCCL_DEVQ_CMD_* */
    uint32_t seq;        /* written last */
    uint32_t pad;
} uccl_devq_cmd_t;

/* Control words of a ring (host-mapped memory), one cache line each:
 * tail: commands the proxy has taken (entries below it may be reused);
 * done: commands whose writes completed, in ticket order (command t is done
 *       when done > t);
 * error: 0, or the uccl_status_t that stopped the ring (negative);
 * lost: set by a producer that gave up tickets it had taken (a put that
 *       waited for room and saw the error word): they are never published,
 *       so the proxy could never pass them and the ring never runs again
 *       (not even after a clean stop). */
typedef struct uccl_devq_ctrl {
    volatile uint64_t tail;
    uint8_t pad0[56];
    volatile uint64_t done;
    uint8_t pad1[56];
    volatile int32_t error;
    volatile int32_t lost;
    uint8_t pad2[56];
} uccl_devq_ctrl_t;

/* What a kernel (or a host thread standing in for one) needs, passed by
 * value: device-visible pointers. uccl_devq_handle fills it. */
typedef struct uccl_devq_handle {
    uccl_devq_cmd_t *cmds;            /* entries, mask + 1 of them (mapped) */
    unsigned long long *head;         /* ticket counter (device memory, or host) */
    unsigned long long *tail_cache;   /* the last tail producers read (same memory) */
    uccl_devq_ctrl_t *ctrl;           /* mapped */
    volatile uint64_t *counters;      /* notification counters (mapped), or NULL */
    uint32_t mask;                    /* entries - 1 */
    uint32_t ncounters;
    uint64_t spin_timeout_ns;         /* a device-side wait gives up after this long
                                       * without progress (UCCL_ERR_TIMEOUT) */
} uccl_devq_handle_t;

/* Notification values seen by the receiving side's counters: a notification
 * v adds UCCL_DEVQ_NOTIF_ADD(v) to counter UCCL_DEVQ_NOTIF_INDEX(v). */
#define UCCL_DEVQ_NOTIF(index, add) (((uint64_t)(index) << 48) | ((uint64_t)(add) & 0xffffffffffffull))
#define UCCL_DEVQ_NOTIF_INDEX(v) ((uint32_t)((uint64_t)(v) >> 48))
#define UCCL_DEVQ_NOTIF_ADD(v) ((uint64_t)(v) & 0xffffffffffffull)

/* ---------------------------------------------------------------- host API */

typedef struct uccl_devq uccl_devq_t;

enum {
    UCCL_DEVQ_PARAM_ENTRIES = 1u << 0,
    UCCL_DEVQ_PARAM_NPEERS = 1u << 1,
    UCCL_DEVQ_PARAM_NSLOTS = 1u << 2,
    UCCL_DEVQ_PARAM_NCOUNTERS = 1u << 3,
    UCCL_DEVQ_PARAM_MEM = 1u << 4,
    UCCL_DEVQ_PARAM_BATCH_MAX = 1u << 5,
    UCCL_DEVQ_PARAM_TIMEOUT_MS = 1u << 6,
    UCCL_DEVQ_PARAM_INFLIGHT_MAX = 1u << 7,
    UCCL_DEVQ_PARAM_BATCH_BYTES = 1u << 8,
};

typedef enum {
    UCCL_DEVQ_MEM_MAPPED = 0, /* pinned host memory mapped for the current GPU (default) */
    UCCL_DEVQ_MEM_HOST = 1,   /* ordinary host memory: host threads stand in for kernels */
} uccl_devq_mem_t;

typedef struct uccl_devq_params {
    uint64_t field_mask;   /* UCCL_DEVQ_PARAM_* bits; unset fields take the defaults */
    uint32_t entries;      /* ring entries, a power of two in [2, 2^20] (1024) */
    uint32_t npeers;       /* connection indices (16), at most 65536 */
    uint32_t nslots;       /* remote descriptor slots (64), at most 65536 */
    uint32_t ncounters;    /* notification counters (0: the ring polls no notifications) */
    uccl_devq_mem_t mem;   /* where the ring lives (UCCL_DEVQ_MEM_MAPPED) */
    uint32_t batch_max;    /* most commands in one vectored write, 1..4096 (256) */
    uint32_t inflight_max; /* most vectored writes in flight (64) */
    uint64_t batch_bytes;  /* a batch closes once it holds this many bytes (no limit:
                            * on gpu_ipc, 1 MiB commands 256 to a write beat one
                            * write each by 2x, tests/gpu/results/1xH100/devq.md) */
    int timeout_ms;        /* a write in flight longer fails the ring with
                            * UCCL_ERR_TIMEOUT; also the device-side spin bound: a
                            * wait without progress for this long returns
                            * UCCL_ERR_TIMEOUT, and a producer that timed out
                            * waiting for room sets the error word (60000).
                            * A failed connection is reported sooner: a
                            * sentinel thread per running ring watches the
                            * bound connections' state (a dead peer: about
                            * 0.2 s after its socket closed) */
} uccl_devq_params_t;

/* Create a ring on engine (params may be NULL). With UCCL_DEVQ_MEM_MAPPED the
 * ring is pinned host memory mapped for the calling thread's current GPU and
 * the ticket counter lives in that GPU's memory.
 * Errors: UCCL_ERR_INVALID_PARAM (bad field), UCCL_ERR_NO_DEVICE (MAPPED in a
 * build or on a host without a GPU), UCCL_ERR_NO_MEMORY. */
UCCL_API uccl_status_t uccl_devq_create(uccl_engine_t *engine, const uccl_devq_params_t *params,
                                        uccl_devq_t **q);
/* The region that commands' local offsets index (any memory the engine
 * registered). Bind before start; binding again replaces it. */
UCCL_API uccl_status_t uccl_devq_bind_local(uccl_devq_t *q, uccl_mr_t *mr);
/* Connection of peer index peer (< npeers). Bind before start. */
UCCL_API uccl_status_t uccl_devq_bind_peer(uccl_devq_t *q, uint32_t peer, uccl_conn_t *conn);
/* Remote descriptor of slot (< nslots), copied (64 bytes, from the peer's
 * uccl_mr_pack); it must come from the engine of the peer that commands
 * naming the slot write to. Checked with uccl_rdesc_info.
 * Errors: UCCL_ERR_INVALID_PARAM, UCCL_ERR_BAD_DESC, UCCL_ERR_VERSION,
 * UCCL_ERR_BUSY (the proxy runs: stop it first). */
UCCL_API uccl_status_t uccl_devq_bind_rdesc(uccl_devq_t *q, uint32_t slot, const uccl_rdesc_t *rdesc);

/* Start the proxy thread (a ring that only counts notifications needs no
 * local region; a command on a ring without one fails it). Errors:
 * UCCL_ERR_INVALID_PARAM, UCCL_ERR_BUSY (running), UCCL_ERR_NO_MEMORY, or
 * the ring's error word (a failed ring stays failed; a clean stop may be
 * followed by a start, unless a put gave up tickets meanwhile: then
 * UCCL_ERR_CANCELED and the ring stays stopped). */
UCCL_API uccl_status_t uccl_devq_start(uccl_devq_t *q);
/* Stop the proxy thread after it has taken every command published so far and
 * waited (up to timeout_ms) for their writes. The error word then becomes
 * UCCL_ERR_CANCELED (unless it holds an error already), so that no kernel
 * spins on a proxy that is gone. Returns the ring's status before the stop
 * (UCCL_OK, or the error that failed it). */
UCCL_API uccl_status_t uccl_devq_stop(uccl_devq_t *q);
/* The handle to pass to kernels (by value). */
UCCL_API uccl_status_t uccl_devq_handle(const uccl_devq_t *q, uccl_devq_handle_t *handle);
/* The ring's error word: UCCL_OK or the error that stopped it. */
UCCL_API uccl_status_t uccl_devq_status(const uccl_devq_t *q);
/* Set the error word (first error wins): e.g. to release waiting kernels. */
UCCL_API uccl_status_t uccl_devq_fail(uccl_devq_t *q, uccl_status_t error);

typedef struct uccl_devq_stats {
    uint64_t commands;  /* commands taken from the ring */
    uint64_t completed; /* commands whose write completed (the done word) */
    uint64_t writes;    /* vectored writes issued (commands / writes = batching) */
    uint64_t bytes;     /* bytes of completed commands */
    uint64_t notifs;    /* notifications received and counted */
} uccl_devq_stats_t;

UCCL_API uccl_status_t uccl_devq_stats(const uccl_devq_t *q, uccl_devq_stats_t *stats);

/* Host view of notification counter index (the proxy adds to it). */
UCCL_API uccl_status_t uccl_devq_counter(const uccl_devq_t *q, uint32_t index, uint64_t *value);

/* Stop (if running) and free the ring. */
UCCL_API uccl_status_t uccl_devq_destroy(uccl_devq_t *q);

#ifdef __cplusplus
}
#endif

#endif /* UCCL_UCCL_DEVQ_H */
