/* The gpu_ipc control mailbox: one shared SPSC ring (tp/common/spsc_ring.h)
 * in POSIX shared memory per direction. The receiving side creates it, the
 * sending side maps it and unlinks the name, so nothing outlives the two
 * processes. Records are the ring's {u32 type, u32 size} header and the
 * payload, 8-aligned. */
#ifndef UCCL_TP_GPU_IPC_RING_H
#define UCCL_TP_GPU_IPC_RING_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uccl/uccl.h>

#include "tp/common/spsc_ring.h"
#include "tp/gpu_ipc/ipc_wire.h"

#define IPC_RING_BYTES (256u * 1024u)
#define IPC_RING_NAME_MAX 64

/* A page of the segment (its own, so that the side that attached it can
 * register it for its GPU) holds done words (done.c): the side that
 * created the ring reads them, the other side's GPU writes them. */
#define IPC_DONE_PAGE 4096u
typedef struct ipc_ring_shm {
    uccl_spsc_ctl_t ctl;
    uint8_t data[IPC_RING_BYTES];
    _Alignas(IPC_DONE_PAGE) uint32_t done[IPC_DONE_PAGE / sizeof(uint32_t)];
} ipc_ring_shm_t;

typedef struct ipc_ring {
    ipc_ring_shm_t *shm;
    uccl_spsc_t view; /* consumer (create) or producer (attach) */
    char name[IPC_RING_NAME_MAX];
    bool linked; /* our name still exists in /dev/shm */
} ipc_ring_t;

/* Create a fresh ring (the consumer side). */
uccl_status_t uccl_gpu_ipc_ring_create(ipc_ring_t *ring);
/* Map the peer's ring by name and unlink the name (the producer side). */
uccl_status_t uccl_gpu_ipc_ring_attach(ipc_ring_t *ring, const char *name);
void uccl_gpu_ipc_ring_destroy(ipc_ring_t *ring);

/* Append one record made of two parts; false when the ring is full. */
bool uccl_gpu_ipc_ring_push(ipc_ring_t *ring, uint16_t type, const void *a, size_t alen, const void *b,
                   size_t blen);
/* Oldest record, or UCCL_ERR_NOT_FOUND when empty, or UCCL_ERR_PEER_FAILED
 * when the ring holds garbage. *payload stays valid until uccl_gpu_ipc_ring_pop, but
 * the peer can still write it: copy before parsing. */
uccl_status_t uccl_gpu_ipc_ring_peek(ipc_ring_t *ring, uint16_t *type, const void **payload, size_t *len);
/* Drop the record peek returned; len is the length peek gave (the shared
 * header is not read again: the peer may have changed it since). */
void uccl_gpu_ipc_ring_pop(ipc_ring_t *ring, size_t len);

#endif
