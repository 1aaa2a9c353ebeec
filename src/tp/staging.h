/* Staging of GPU memory through pinned host buffers, shared by the shm, tcp
 * and verbs transports: a pool of page-locked buffers, one copy stream, D2H
 * prefetch pipelines for sources, H2D copies for sinks and completions
 * deferred until the copies before them are done. Everything is polled:
 * nothing here blocks except teardown and the pool's back-pressure.
 * A transport whose NIC reads the buffers itself (verbs without GPUDirect
 * RDMA) sets a registration hook: every buffer of the pool is registered
 * when it is made and deregistered before it is freed, so a chunk can be
 * posted to the NIC straight from the buffer its D2H copy filled. */
#ifndef UCCL_TP_STAGING_H
#define UCCL_TP_STAGING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/tp_api.h"

typedef struct uccl_stage uccl_stage_t;
typedef struct uccl_stage_buf uccl_stage_buf_t;

/* A source pipeline over a request's local iov (req) or one flat range:
 * up to depth chunks are copied ahead into pinned buffers. */
typedef struct uccl_stage_src {
    uccl_stage_t *stage;
    const uccl_req_t *req;
    const uint8_t *flat;
    size_t len, issued;
    uccl_list_t queue; /* uccl_stage_buf_t, source order */
    int nqueued;
} uccl_stage_src_t;

/* Called once the copies issued before uccl_stage_defer are done;
 * copy_status is UCCL_OK or the error that a copy of the stream hit, so the
 * work that waited for the copies can fail instead of reporting success. A
 * copy fault stays the stage's (as a GPU context's does): every work item
 * that runs after it was seen gets the error. */
typedef void (*uccl_stage_fn_t)(void *arg, uccl_status_t copy_status, uint64_t a, uint64_t b,
                                uint64_t c);

/* Open staging on device (-1 = the current one): UCCL_ERR_NO_DEVICE when no
 * GPU is usable. chunk = bytes per pinned buffer, depth = chunks a source
 * copies ahead. */
uccl_status_t uccl_stage_create(int device, size_t chunk, int depth, uccl_stage_t **stage);
/* Waits for the copy stream, drops deferred work uncalled, frees all. */
void uccl_stage_destroy(uccl_stage_t *stage);

/* NIC-registration hook, set before the first staged copy: reg registers
 * len bytes at ptr (*handle: what the transport needs to post them, e.g. an
 * ibv_mr), dereg undoes it. A failed reg fails the buffer's allocation. */
typedef uccl_status_t (*uccl_stage_reg_fn_t)(void *ctx, void *ptr, size_t len, void **handle);
typedef void (*uccl_stage_dereg_fn_t)(void *ctx, void *handle);
void uccl_stage_set_reg(uccl_stage_t *stage, uccl_stage_reg_fn_t reg, uccl_stage_dereg_fn_t dereg,
                        void *ctx);
/* The handle reg gave for buf (NULL without a hook). */
void *uccl_stage_buf_reg(const uccl_stage_buf_t *buf);
size_t uccl_stage_chunk(const uccl_stage_t *stage);

/* Does any local piece of req live in GPU memory? */
bool uccl_stage_req_is_gpu(const uccl_req_t *req);

/* Sources. peek gives the ready bytes at the read position (UCCL_INPROGRESS
 * while the next copy runs); take consumes n of them. A caller that keeps
 * pointing into the buffer after take holds it (hold/put). */
void uccl_stage_src_init(uccl_stage_src_t *src, uccl_stage_t *stage, const uccl_req_t *req,
                         const void *flat, size_t len);
uccl_status_t uccl_stage_src_peek(uccl_stage_src_t *src, const uint8_t **ptr, size_t *n,
                                  uccl_stage_buf_t **buf);
void uccl_stage_src_take(uccl_stage_src_t *src, size_t n);
void uccl_stage_src_fini(uccl_stage_src_t *src);
void uccl_stage_buf_hold(uccl_stage_buf_t *buf);
void uccl_stage_buf_put(uccl_stage_t *stage, uccl_stage_buf_t *buf);

/* Sinks: copy n host bytes to byte off of req's local iov (req != NULL) or
 * to flat + off, through pinned buffers and the copy stream. The data is
 * in place once a later uccl_stage_defer fires. */
uccl_status_t uccl_stage_copy_in(uccl_stage_t *stage, const uccl_req_t *req, uint8_t *flat,
                                 size_t off, const void *src, size_t n);

/* The same without the host copy, for data read from a socket: reserve
 * gives up to *n free bytes of pinned memory to fill (nothing is taken;
 * req/flat name the destination, as for commit), commit copies the first
 * n of them to off of req or flat + off. */
uccl_status_t uccl_stage_sink_reserve(uccl_stage_t *stage, const uccl_req_t *req,
                                      const uint8_t *flat, uint8_t **ptr, size_t *n);
uccl_status_t uccl_stage_sink_commit(uccl_stage_t *stage, const uccl_req_t *req, uint8_t *flat,
                                     size_t off, size_t n);

/* Sinks that land data in stage buffers themselves (a NIC writing or
 * reading into registered buffers): buf_take gives a buffer for req's data
 * (refs 1; give it back with uccl_stage_buf_put), buf_copy_in copies its
 * first n bytes to byte off of req's local iov on the copy stream; the
 * buffer may be filled again once a later uccl_stage_defer fires. */
uccl_stage_buf_t *uccl_stage_buf_take(uccl_stage_t *stage, const uccl_req_t *req);
uint8_t *uccl_stage_buf_ptr(const uccl_stage_buf_t *buf);
uccl_status_t uccl_stage_buf_copy_in(uccl_stage_t *stage, uccl_stage_buf_t *buf,
                                     const uccl_req_t *req, size_t off, size_t n);

/* Run fn(arg, a, b, c) from uccl_stage_progress once every copy issued so
 * far is done; key names the owner for uccl_stage_cancel. */
uccl_status_t uccl_stage_defer(uccl_stage_t *stage, void *key, uccl_stage_fn_t fn, void *arg,
                               uint64_t a, uint64_t b, uint64_t c);
/* Complete req with (status, bytes) once its copies are done. */
uccl_status_t uccl_stage_complete_req(uccl_stage_t *stage, void *key, uccl_req_t *req,
                                      uccl_status_t status, size_t bytes);
/* Drop key's deferred work uncalled (after waiting for the copy stream). */
void uccl_stage_cancel(uccl_stage_t *stage, void *key);
/* Run the deferred work whose copies are done; returns how many ran. */
int uccl_stage_progress(uccl_stage_t *stage);

#endif
