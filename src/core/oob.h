/* The setup socket: framed messages ([u32 length][body]) over TCP, with
 * bounded waits that keep the engine progressing, and a small bounds-checked
 * writer and reader for message bodies. */
#ifndef UCCL_CORE_OOB_H
#define UCCL_CORE_OOB_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core.h"

typedef struct oob_buf {
    uint8_t *data;
    size_t len, cap;
    bool overflow; /* a put did not fit: the message is unusable */
} oob_buf_t;

void uccl_oob_buf_init(oob_buf_t *b, size_t cap);
void uccl_oob_buf_free(oob_buf_t *b);
void uccl_oob_put_bytes(oob_buf_t *b, const void *p, size_t n);
void uccl_oob_put_u8(oob_buf_t *b, uint8_t v);
void uccl_oob_put_u16(oob_buf_t *b, uint16_t v);
void uccl_oob_put_u32(oob_buf_t *b, uint32_t v);
void uccl_oob_put_u64(oob_buf_t *b, uint64_t v);

/* Reading past the end sets bad and returns zeros. */
typedef struct oob_reader {
    const uint8_t *p;
    size_t len, pos;
    bool bad;
} oob_reader_t;

uint8_t uccl_oob_get_u8(oob_reader_t *r);
uint16_t uccl_oob_get_u16(oob_reader_t *r);
uint32_t uccl_oob_get_u32(oob_reader_t *r);
uint64_t uccl_oob_get_u64(oob_reader_t *r);
bool uccl_oob_get_bytes(oob_reader_t *r, void *dst, size_t n);
const uint8_t *uccl_oob_get_ptr(oob_reader_t *r, size_t n);

/* poll(fd, events, timeout_ms) with the engine lock released, so that no
 * call holds it while it sleeps (uccl.h); kept inside progress, whose walk
 * of the engine's lists is half done. The engine lock is held on entry. */
int uccl_oob_poll_unlocked(uccl_engine_t *engine, int fd, short events, int timeout_ms);

/* Blocking-with-deadline socket steps; each progresses engine while it
 * waits, and sleeps without the engine lock (uccl_oob_poll_unlocked). */
uccl_status_t uccl_oob_connect(uccl_engine_t *engine, const struct sockaddr_in *sa, uint64_t deadline_ms,
                          int *fd_out);
uccl_status_t uccl_oob_send_frame(uccl_engine_t *engine, int fd, const void *body, size_t len,
                             uint64_t deadline_ms);
uccl_status_t uccl_oob_recv_frame(uccl_engine_t *engine, int fd, size_t max, uint64_t deadline_ms,
                             uint8_t **body, size_t *len);

/* Non-blocking: read what is there of one frame. Returns 1 when the frame
 * is complete (*buf holds *have bytes of body), 0 when more is needed, -1 on
 * EOF, error or a frame over max. */
int uccl_oob_frame_read_some(int fd, size_t max, uint8_t **buf, size_t *have, size_t *need);

/* The peer closed its end (EOF or error) of an idle setup socket. */
bool uccl_oob_peer_closed(int fd);

#endif
