/* Private definitions of the tcp transport: the transport instance, its
 * endpoints and their parallel streams, outgoing operations and incoming
 * records, and the calls between tcp.c, tcp_ep.c, tcp_tx.c, tcp_rx.c and
 * tcp_match.c. */
#ifndef UCCL_TP_TCP_H
#define UCCL_TP_TCP_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/tp_api.h"
#include "util/hmap.h"
#include "util/idmap.h"
#include "tcp_wire.h"
#include "tp/staging.h"

typedef struct tcp_config {
    int num_streams;
    size_t chunk;
    size_t sockbuf;
    size_t rxbuf;
    size_t progress_bytes;
    size_t rndv_min;
    size_t stage_chunk;
    int stage_depth;
} tcp_config_t;

/* What an epoll event points to. */
typedef enum { TCP_POLL_LISTENER, TCP_POLL_PENDING, TCP_POLL_STREAM } tcp_poll_kind_t;
typedef struct tcp_poll {
    tcp_poll_kind_t kind;
} tcp_poll_t;

typedef struct tcp_tp {
    uccl_tp_t base;
    tcp_config_t cfg;
    int epfd;
    int listen_fd;
    uint16_t port; /* network order */
    tcp_poll_t listen_poll;
    uccl_list_t eps;
    uccl_list_t pending; /* accepted sockets whose hello is not in yet, oldest first */
    int npending;        /* at most UCCL_SETUP_MAX_PENDING */
    bool accept_retry;   /* accept met EMFILE: its epoll edge is spent, retry */
    uccl_stage_t *stage; /* GPU memory through pinned buffers; NULL without a GPU */
    unsigned idle_rounds; /* progress rounds with no connection (listener polled 1 in N) */
} tcp_tp_t;

#define TCP_IDLE_POLL_EVERY 32

/* An accepted socket waiting for its hello. */
typedef struct tcp_pending {
    tcp_poll_t poll;
    int fd;
    uint8_t buf[TCP_HELLO_LEN];
    size_t have;
    uint64_t deadline_ms;
    uccl_list_t link;
} tcp_pending_t;

/* Where incoming payload bytes go. */
typedef enum { TCP_SINK_DISCARD, TCP_SINK_REQ, TCP_SINK_FLAT } tcp_sink_kind_t;
typedef struct tcp_sink {
    tcp_sink_kind_t kind;
    bool staged;     /* GPU memory: through pinned buffers and H2D copies */
    uccl_req_t *req; /* REQ: bytes go to the request's iov at pos */
    uint8_t *ptr;    /* FLAT: bytes go to ptr + pos */
    size_t pos;
} tcp_sink_t;

/* An operation to send (a message, a write, a read request or response, an
 * ack) and, for one-sided requests, the initiator's record until the reply. */
typedef struct tcp_op {
    struct tcp_ep *ep;
    uccl_list_t all_link;  /* ep->ops: every op of the endpoint, for teardown */
    uccl_list_t tx_link;   /* ep->tx_queue while chunks remain to be cut */
    uccl_list_t wait_link; /* ep->rma_wait: write/read waiting for the peer */
    tcp_hdr_t hdr;         /* template of every chunk's header */
    uccl_req_t *req;       /* payload source (send, write) or destination (read) */
    const uint8_t *flat;   /* payload source of a read response */
    size_t next_off;       /* first byte not yet cut into a chunk */
    int frames;            /* chunks cut but not fully sent */
    int rx_busy;           /* read data chunks being received into req */
    size_t rx_inflight;    /* their bytes: received + rx_inflight <= the read's length */
    size_t received;       /* read data bytes landed */
    bool waiting;          /* in rma_wait, hdr.id in ep->rma_ids */
    bool cut_done;         /* every chunk has been cut (a frame exists for each) */
    bool sent;             /* every chunk has been written to a socket */
    bool gpu;              /* req (or flat) is GPU memory: staged */
    uint8_t rndv;          /* message by rendezvous: TCP_RNDV_* */
    uccl_stage_src_t src;  /* payload source when gpu and sending */
} tcp_op_t;

/* A message of at least UCCL_TCP_RNDV_MIN bytes: its request to send is
 * cut first (RTS), then it waits in ep->rndv_wait (by wait_link) for the
 * receiver's CTS (WAIT), then its chunks go as any message's (GO). */
enum { TCP_RNDV_NONE, TCP_RNDV_RTS, TCP_RNDV_WAIT, TCP_RNDV_GO };

/* One chunk on its way out of a stream. */
typedef struct tcp_frame {
    tcp_op_t *op;
    uccl_stage_buf_t *buf; /* staged payload: the pinned buffer it holds */
    const uint8_t *data;   /* staged payload: its bytes in buf */
    uint8_t hdr[TCP_HDR_LEN];
    size_t off, len; /* payload range within the operation */
    size_t sent;     /* header + payload bytes already written */
} tcp_frame_t;

#define TCP_TX_RING 32

typedef enum { TCP_STREAM_NONE, TCP_STREAM_CONNECTING, TCP_STREAM_UP, TCP_STREAM_DEAD } tcp_stream_state_t;

typedef struct tcp_ep tcp_ep_t;

typedef struct tcp_stream {
    tcp_poll_t poll;
    tcp_ep_t *ep;
    int fd;
    int index;
    tcp_stream_state_t state;
    bool readable, writable;
    bool rdhup; /* the peer's end of file (or an error) is in: read until it shows */
    uint8_t hello[TCP_HELLO_LEN];
    size_t hello_left;
    /* transmit: a ring of frames written with one sendmsg */
    tcp_frame_t ring[TCP_TX_RING];
    int tx_head, tx_count;
    size_t tx_bytes;
    /* receive: a staging buffer for headers and small payloads */
    uint8_t *rbuf;
    size_t rhead, rtail;
    bool in_payload;
    bool header_only; /* next staged read takes only a header */
    tcp_hdr_t cur;
    size_t remaining;
    tcp_sink_t sink;
    void *target; /* the record the current chunk belongs to */
} tcp_stream_t;

/* An incoming message (MSG) or write (WRITE) being received. */
typedef struct tcp_rx_rec {
    uccl_list_t link;    /* ep->rx_active until all bytes are in */
    uccl_list_t uq_link; /* ep->unexpected: held by the core's matching */
    uccl_msg_t msg;      /* the core's view of a held message */
    uint8_t type;
    uint64_t id, tag, msg_seq, total, received;
    uint64_t inflight; /* bytes of chunks begun on some stream, not ended: received + inflight <= total */
    bool presented, in_active;
    bool chunk_seen; /* a chunk ended (a zero-length message has one) */
    uint8_t *bounce;  /* message payload when no receive was there first */
    uccl_req_t *req;  /* matched receive */
    uint64_t region_id, addr, notif;
    bool has_notif;
    bool staged; /* write: some chunk went to GPU memory through staging */
    bool rndv;   /* message: its bytes come after our CTS (queued once a receive took it) */
    bool cts_sent;
    uccl_status_t status; /* write: UCCL_OK or why the target refused it */
} tcp_rx_rec_t;

struct tcp_ep {
    uccl_tp_ep_t base;
    uccl_list_t link; /* tp->eps */
    bool is_initiator;
    bool failing; /* a stream died: read the others to their end, then fail the conn */
    uint64_t fail_deadline_ms; /* failing: fail then even if a stream is still open */
    uint64_t token, peer_token;
    struct sockaddr_in peer;
    int nstreams;
    tcp_stream_t *streams;
    uint64_t next_msg_id, next_rx_id;
    uccl_idmap_t rma_ids; /* hdr.id -> tcp_op_t of the writes and reads in rma_wait */
    uccl_list_t ops;          /* tcp_op_t by all_link */
    uccl_list_t tx_queue;     /* tcp_op_t by tx_link */
    uccl_list_t rma_wait;     /* tcp_op_t by wait_link */
    uccl_list_t rndv_wait;    /* tcp_op_t by wait_link: messages waiting for their CTS */
    uccl_list_t rx_active;    /* tcp_rx_rec_t by link */
    /* the records of rx_active by the peer's id: [0] messages, [1] writes */
    uccl_hmap_t rx_ids[2];
    uccl_list_t unexpected;   /* tcp_rx_rec_t by uq_link */
};

static inline tcp_tp_t *tcp_tp_of(tcp_ep_t *ep) { return (tcp_tp_t *)ep->base.tp; }

/* tcp_ep.c */
uccl_status_t uccl_tcp_ep_create(uccl_tp_t *tp, uccl_conn_t *conn, const uccl_tp_peer_t *peer,
                            bool is_initiator, uccl_tp_ep_t **ep);
uccl_status_t uccl_tcp_ep_pack(uccl_tp_ep_t *ep, void *buf, size_t *len);
uccl_status_t uccl_tcp_ep_connect(uccl_tp_ep_t *ep, const void *info, size_t len);
void uccl_tcp_ep_destroy(uccl_tp_ep_t *ep);
/* Attach an accepted socket whose hello arrived; false = no such endpoint. */
bool uccl_tcp_ep_attach_stream(tcp_tp_t *tp, int fd, const uint8_t *hello);
/* An initiator's stream became writable: finish its non-blocking connect. */
void uccl_tcp_stream_connect_done(tcp_stream_t *s);
/* Note that a stream is gone; the endpoint fails after draining the rest. */
void uccl_tcp_stream_lost(tcp_stream_t *s, const char *why);
/* Fail the connection of ep now (protocol error, no memory). */
void uccl_tcp_ep_fail(tcp_ep_t *ep, const char *why);
/* No stream of ep is open or opening any more: all the peer sent is read. */
bool uccl_tcp_ep_drained(uccl_tp_ep_t *ep);

/* tcp_tx.c */
uccl_status_t uccl_tcp_post_send(uccl_tp_ep_t *ep, uccl_req_t *req);
uccl_status_t uccl_tcp_post_write(uccl_tp_ep_t *ep, uccl_req_t *req);
uccl_status_t uccl_tcp_post_read(uccl_tp_ep_t *ep, uccl_req_t *req);
/* Queue a control frame or a read response (no request behind it). */
uccl_status_t uccl_tcp_queue_ack(tcp_ep_t *ep, uint64_t id, uccl_status_t status);
uccl_status_t uccl_tcp_queue_cts(tcp_ep_t *ep, uint64_t id, uint64_t len);
/* The peer's CTS for message id of len bytes: its chunks may go (false = no
 * such message waits, or it has another length). */
bool uccl_tcp_rndv_go(tcp_ep_t *ep, uint64_t id, uint64_t len);
uccl_status_t uccl_tcp_queue_read_data(tcp_ep_t *ep, uint64_t id, const uint8_t *src, uint64_t len,
                                  bool gpu);
/* Send what the endpoint has queued, within budget bytes. */
int uccl_tcp_ep_tx(tcp_ep_t *ep, size_t budget);
void uccl_tcp_op_free(tcp_op_t *op);
/* Give back the pinned buffers that the stream's unsent frames hold. */
void uccl_tcp_stream_tx_release(tcp_stream_t *s);
/* The iovec of bytes [off, off+len) of a request's local iov. */
int uccl_tcp_req_iovec(const uccl_req_t *req, size_t off, size_t len, struct iovec *out, int max);

/* tcp_rx.c */
/* Read and handle what a stream has, up to budget bytes (SIZE_MAX = all). */
int uccl_tcp_stream_rx(tcp_stream_t *s, size_t budget);

/* tcp_match.c */
void uccl_tcp_msg_deliver(uccl_tp_ep_t *ep, uccl_msg_t *msg, uccl_req_t *req);
/* A chunk header arrived: choose s->sink and s->target (false = protocol error). */
bool uccl_tcp_rx_chunk_begin(tcp_stream_t *s);
/* The current chunk's payload is all in. */
void uccl_tcp_rx_chunk_end(tcp_stream_t *s);
void uccl_tcp_match_release(tcp_ep_t *ep);

#endif
