/* What the files of the test-only fake GPU backend share: fake.c
 * (devices, memory), fake_ipc.c (IPC handles), fake_stream.c (streams,
 * events, injected copy faults) and fake_memop.c (host-flag waits, stream
 * memory operations, the injected sticky fault). Not part of gpu.h:
 * nothing outside src/gpu/fake*.c includes it. */
#ifndef UCCL_GPU_FAKE_H
#define UCCL_GPU_FAKE_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gpu/gpu.h"
#include "util/list.h"

#define FAKE_NDEV 4 /* at most; UCCL_FAKE_GPU_COUNT are present (default 2) */

#define FAKE_FAULTS_MAX 16

typedef struct fake_copy {
    void *dst;
    const void *src;
    size_t len;
    uint64_t seq; /* its number on its stream, from 1 */
    bool fail;
    const void *wait; /* a wait entry: hold the stream until *wait >= value (cyclic) */
    void *store;      /* a write entry: store value at *store when it runs */
    uint64_t value;
    uint8_t width;    /* of wait and store: 4 or 8 */
    bool dev_wait;    /* a wait on device memory (a peer's stream sets it), not a host flag */
    bool sticky;      /* an injected sticky fault (uccl_gpu_fault_inject): the context dies here */
    uccl_list_t link;
} fake_copy_t;

struct uccl_gpu_stream {
    int device;
    uint64_t issued;      /* copies queued on it so far */
    uint64_t done;        /* copies run (or failed) so far: issue order */
    uint64_t last_record; /* issued when an event was last recorded here */
    uint64_t last_sync;   /* faults up to here were reported by a stream sync */
    uint64_t last_store;  /* seq of the last store (uccl_gpu_stream_write) run or dropped */
    uint64_t faults[FAKE_FAULTS_MAX]; /* seq of the latest copies that failed */
    int nfaults;
    uccl_list_t queue; /* fake_copy_t not run yet */
    uccl_list_t link;  /* uccl_fake_streams */
};


/* A wait entry's word has reached its value (cyclic compare, as CUDA's GEQ). */
static inline bool uccl_fake_wait_met(const fake_copy_t *c)
{
    if (c->width == 8)
        return (int64_t)(__atomic_load_n((const uint64_t *)c->wait, __ATOMIC_ACQUIRE) - c->value) >= 0;
    return (int32_t)(__atomic_load_n((const uint32_t *)c->wait, __ATOMIC_ACQUIRE) - (uint32_t)c->value) >= 0;
}

/* Every stream of the process (fake_stream.c), and the lock over streams,
 * their queues and events. */
extern pthread_mutex_t uccl_fake_stream_lock;
extern uccl_list_t uccl_fake_streams;

/* The injected sticky fault (fake_memop.c): once a stream has run into
 * one, the process's context is lost, as after an illegal address on a GPU.
 * uccl_fake_ctx_lost: 1 from then on (nothing runs any more).
 * uccl_fake_ctx_lost_set: mark it (uccl_fake_stream_lock held).
 * uccl_fake_ctx_err: UCCL_OK while the context lives, else UCCL_ERR_IO with
 * the runtime's text logged, naming what (the call that reports it). */
int uccl_fake_ctx_lost(void);
void uccl_fake_ctx_lost_set(void);
uccl_status_t uccl_fake_ctx_err(const char *what);


/* Device memory this process sees (fake.c): its own allocations and the
 * peers' allocations it opened (fake_ipc.c); what uccl_gpu_ptr_attr reports
 * as UCCL_MEM_CUDA. The table's entries are read and changed under
 * uccl_fake_alloc_lock; the *_locked calls want it held. */
#define FAKE_NAME_PREFIX "/uccl-fakegpu-"
#define FAKE_NAME_MAX 48

typedef enum { FAKE_SLOT_FREE = 0, FAKE_OWNED, FAKE_MAPPED } fake_kind_t;

typedef struct fake_alloc {
    fake_kind_t kind;
    uint8_t *base;
    size_t size;
    int device;
    int refs; /* FAKE_MAPPED: opens of the handle on that device */
    char name[FAKE_NAME_MAX];
} fake_alloc_t;

extern pthread_mutex_t uccl_fake_alloc_lock;
/* The allocation or mapping holding ptr, or NULL. */
fake_alloc_t *uccl_fake_alloc_find_locked(const void *ptr);
/* The entry of that shared-memory object's name, or NULL. */
fake_alloc_t *uccl_fake_alloc_find_name_locked(const char *name);
/* The entry of kind whose base is ptr, or NULL. */
fake_alloc_t *uccl_fake_alloc_at_locked(const void *ptr, fake_kind_t kind);
/* Record a new allocation or mapping (takes the lock); false, with an
 * error line, when the table is full. */
bool uccl_fake_alloc_add(const fake_alloc_t *a);

/* The calling thread's current device (0 until uccl_gpu_set_device). */
int uccl_fake_current_device(void);
/* Mark device's primary context active: called by every fake call that a
 * CUDA runtime would create the context in (memory, copies, streams, ...). */
void uccl_fake_ctx_touch(int device);

/* Run every copy queued on the streams of device (-1: all devices), as a
 * cudaDeviceSynchronize does. */
void uccl_fake_streams_flush(int device);
/* What a call that synchronizes the device (what: its name) does first:
 * abort when a stream of the process waits on a host flag that is not set
 * (it would hang there on a GPU; the library must not make one while it
 * holds a caller's stream), else run every stream as far as it goes. */
void uccl_fake_device_sync(const char *what);
/* Make every copy still queued that reads or writes [base, base + len) fail
 * instead of running (the memory is going away under it); returns how many. */
int uccl_fake_streams_fault_range(const void *base, size_t len);

/* UCCL_FAKE_GPU_SM_COPY: may uccl_gpu_sm_copy_load succeed? */
int uccl_fake_sm_copy_on(void);
/* UCCL_FAKE_GPU_FAIL_HOST_REGISTER: which uccl_gpu_host_register_mapped
 * call of the process fails (from 1; 0 = none). */
size_t uccl_fake_fail_host_register(void);
/* UCCL_FAKE_GPU_COUNT: how many fake GPUs there are (2..FAKE_NDEV). */
int uccl_fake_count(void);

#endif
