/* Wire format of the tcp transport: the address entry, the wiring info
 * exchanged at setup, the stream hello and the fixed frame header. */
#ifndef UCCL_TP_TCP_WIRE_H
#define UCCL_TP_TCP_WIRE_H

#include <stdint.h>

#include "core/tp_api.h"

/* 2: rendezvous of large messages (TCP_FLAG_RNDV, TCP_FRAME_CTS);
 * 3: the CTS names the message's length (version 2 sent 0) */
#define TCP_WIRE_VERSION 3

/* Address entry: version, pad, port (network order), IPv4 (network order). */
#define TCP_ADDR_LEN 8

/* Wiring info: magic, version, stream count, token. */
#define TCP_INFO_MAGIC 0x50434354u /* "TCCP" */
#define TCP_INFO_LEN 16

/* First bytes on every stream, initiator to acceptor. */
#define TCP_HELLO_MAGIC 0x4f4c4548u /* "HELO" */
#define TCP_HELLO_LEN 16

/* Most streams one connection may use (bounds the peer's claim). */
#define TCP_STREAMS_MAX 64

/* Frame types. Every frame is a header, then clen payload bytes. */
enum {
    TCP_FRAME_MSG = 1,       /* two-sided message chunk: a = tag, b = connection message number */
    TCP_FRAME_WRITE = 2,     /* write chunk: a = region id, b = remote addr, c = notif */
    TCP_FRAME_READ_REQ = 3,  /* read request (no payload): a = region id, b = remote addr */
    TCP_FRAME_READ_DATA = 4, /* read response chunk */
    TCP_FRAME_ACK = 5,       /* write done / read refused: a = status */
    TCP_FRAME_CTS = 6,       /* clear to send (no payload): id = the message's id, total = its length */
};

#define TCP_FLAG_NOTIF 1u
/* A message's request to send (no payload): its bytes follow the receiver's
 * CTS, once a receive took it, so they land in place (never a bounce). */
#define TCP_FLAG_RNDV 2u

/* A message, write or read response is cut into chunks that may travel on
 * any stream: each chunk names its operation (id), the operation's total
 * length and its own offset, so chunks can land in any order. */
typedef struct tcp_hdr {
    uint8_t type;
    uint8_t flags;
    uint32_t clen;  /* payload bytes following this header */
    uint64_t id;    /* message sequence number or one-sided operation id */
    uint64_t total; /* length of the whole operation */
    uint64_t off;   /* offset of this chunk within the operation */
    uint64_t a, b, c;
} tcp_hdr_t;

#define TCP_HDR_LEN 56

static inline void tcp_hdr_encode(const tcp_hdr_t *h, uint8_t *p)
{
    p[0] = h->type;
    p[1] = h->flags;
    uccl_put_u16(p + 2, 0);
    uccl_put_u32(p + 4, h->clen);
    uccl_put_u64(p + 8, h->id);
    uccl_put_u64(p + 16, h->total);
    uccl_put_u64(p + 24, h->off);
    uccl_put_u64(p + 32, h->a);
    uccl_put_u64(p + 40, h->b);
    uccl_put_u64(p + 48, h->c);
}

/* The one parser of frame headers: false when the header is malformed. */
static inline bool tcp_hdr_decode(const uint8_t *p, tcp_hdr_t *h)
{
    h->type = p[0];
    h->flags = p[1];
    h->clen = uccl_get_u32(p + 4);
    h->id = uccl_get_u64(p + 8);
    h->total = uccl_get_u64(p + 16);
    h->off = uccl_get_u64(p + 24);
    h->a = uccl_get_u64(p + 32);
    h->b = uccl_get_u64(p + 40);
    h->c = uccl_get_u64(p + 48);
    if (h->type < TCP_FRAME_MSG || h->type > TCP_FRAME_CTS)
        return false;
    if (h->off > h->total || h->clen > h->total - h->off)
        return false;
    if ((h->flags & TCP_FLAG_RNDV) && (h->type != TCP_FRAME_MSG || h->clen != 0 || h->off != 0))
        return false;
    /* requests and replies carry no payload */
    if (h->type == TCP_FRAME_READ_REQ || h->type == TCP_FRAME_ACK || h->type == TCP_FRAME_CTS)
        return h->clen == 0;
    return true;
}

#endif
