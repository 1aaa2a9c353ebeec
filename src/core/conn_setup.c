/* Connection setup over the engine's TCP setup socket: the transport
 * choice per peer, then on the connect and the accept side the messages of
 * setup_auth.h: a hello and a challenge by which each engine proves it knows
 * the admission secret (HMAC over fresh nonces; the secret never crosses
 * the wire), then a framed request and reply carrying each chosen
 * transport's wiring info.
 *
 * Request (after its head, setup_auth.h): blob_len(2) blob (the
 * connector's, secret zeroed) n(1) n x endpoint
 * Reply:   magic(4) version(2) status(4) [n(1) n x endpoint when OK]
 * Admission comes first: a hello that does not name this incarnation
 * (UCCL_ERR_STALE) or a request without the right proof (UCCL_ERR_DENIED) is
 * answered with that status before anything is made for it: no connection
 * object, no transport endpoint, no memory exposed. The connector creates
 * its endpoints only after the listener has proved itself. */
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core.h"
#include "oob.h"
#include "setup_auth.h"

#define SETUP_MAX 8192
#define EP_INFO_MAX 1024
#define EP_FLAG_HOST 1u
#define EP_FLAG_DEV 2u

/* ------------------------------------------------------------------ transport choice */

static void fill_peer(const uccl_address_t *addr, int entry, uccl_tp_peer_t *peer)
{
    peer->engine_id = addr->engine_id;
    peer->host_id = addr->host_id;
    peer->pid = (int)addr->pid;
    peer->addr = entry >= 0 ? addr->tp[entry].addr : NULL;
    peer->addr_len = entry >= 0 ? addr->tp[entry].len : 0;
}

static int peer_entry(const uccl_address_t *addr, const char *name)
{
    for (int i = 0; i < addr->ntp; i++)
        if (strcmp(addr->tp[i].name, name) == 0)
            return i;
    return -1;
}

/* Best local transport with any of the caps that the peer also has and can reach. */
static int pick_transport(uccl_engine_t *engine, const uccl_address_t *addr, uint64_t caps)
{
    int best = -1;

    for (int i = 0; i < engine->ntp; i++) {
        uccl_tp_t *tp = engine->tp[i];
        int entry = peer_entry(addr, tp->ops->name);
        uccl_tp_peer_t peer;

        if (!(uccl_tp_caps(tp) & caps) || entry < 0)
            continue;
        if ((tp->ops->caps & UCCL_TP_CAP_SAME_HOST) && addr->host_id != engine->host_id)
            continue;
        fill_peer(addr, entry, &peer);
        if (tp->ops->reachable != NULL && !tp->ops->reachable(tp, &peer))
            continue;
        if (best < 0 || tp->ops->priority > engine->tp[best]->ops->priority)
            best = i;
    }
    return best;
}

static int find_local_tp(uccl_engine_t *engine, const char *name)
{
    for (int i = 0; i < engine->ntp; i++)
        if (strcmp(engine->tp[i]->ops->name, name) == 0)
            return i;
    return -1;
}

static void conn_set_peer(uccl_conn_t *conn, const uccl_address_t *addr)
{
    conn->peer_id = addr->engine_id;
    conn->peer_host_id = addr->host_id;
    conn->peer_pid = (int)addr->pid;
    conn->same_host = addr->host_id == conn->engine->host_id;
    snprintf(conn->peer_host, sizeof(conn->peer_host), "%s", addr->hostname);
}

/* ------------------------------------------------------------------ wire messages */

typedef struct setup_ep {
    char name[16];
    uint8_t flags;
    const uint8_t *info;
    size_t info_len;
} setup_ep_t;

/* Append "name_len name flags info_len info" for one endpoint. */
static uccl_status_t put_ep(oob_buf_t *b, uccl_tp_ep_t *ep, uint8_t flags)
{
    uint8_t info[EP_INFO_MAX];
    size_t info_len = sizeof(info);
    const char *name = ep->tp->ops->name;
    uccl_status_t st = ep->tp->ops->ep_pack(ep, info, &info_len);

    if (st != UCCL_OK)
        return st;
    uccl_oob_put_u8(b, (uint8_t)strlen(name));
    uccl_oob_put_bytes(b, name, strlen(name));
    uccl_oob_put_u8(b, flags);
    uccl_oob_put_u16(b, (uint16_t)info_len);
    uccl_oob_put_bytes(b, info, info_len);
    return b->overflow ? UCCL_ERR_NO_MEMORY : UCCL_OK;
}

static bool get_ep(oob_reader_t *r, setup_ep_t *ep)
{
    size_t name_len = uccl_oob_get_u8(r);

    if (name_len == 0 || name_len >= sizeof(ep->name) || !uccl_oob_get_bytes(r, ep->name, name_len))
        return false;
    ep->name[name_len] = '\0';
    ep->flags = uccl_oob_get_u8(r);
    ep->info_len = uccl_oob_get_u16(r);
    ep->info = uccl_oob_get_ptr(r, ep->info_len);
    return !r->bad && ep->info_len <= EP_INFO_MAX;
}

/* ------------------------------------------------------------------ connect side */

static uccl_status_t connect_create_eps(uccl_conn_t *conn, const uccl_address_t *addr)
{
    uccl_engine_t *engine = conn->engine;
    uint64_t dev_caps = UCCL_TP_CAP_CUDA_MEM | UCCL_TP_CAP_ROCM_MEM;
    int slots[2];

    conn->host_tp = pick_transport(engine, addr, UCCL_TP_CAP_HOST_MEM);
    conn->dev_tp = engine->gpu_index >= 0 ? pick_transport(engine, addr, dev_caps) : -1;
    if (conn->host_tp < 0 && conn->dev_tp < 0) {
        uccl_error("no transport reaches %s (pid %d): transports here and there have nothing in common",
                   addr->hostname, (int)addr->pid);
        return UCCL_ERR_NO_TRANSPORT;
    }
    slots[0] = conn->host_tp;
    slots[1] = conn->dev_tp;
    for (int k = 0; k < 2; k++) {
        int i = slots[k];
        uccl_tp_peer_t peer;
        uccl_status_t st;

        if (i < 0 || conn->ep[i] != NULL)
            continue;
        fill_peer(addr, peer_entry(addr, engine->tp[i]->ops->name), &peer);
        st = engine->tp[i]->ops->ep_create(engine->tp[i], conn, &peer, true, &conn->ep[i]);
        if (st != UCCL_OK) {
            uccl_error("%s: cannot create endpoint to %s: %s", engine->tp[i]->ops->name,
                       addr->hostname, uccl_strerror(st));
            return st;
        }
        conn->ep[i]->tp = engine->tp[i];
        conn->ep[i]->conn = conn;
    }
    return UCCL_OK;
}

/* The peer refused (its status st) or answered something we cannot read. */
static uccl_status_t connect_refused(uccl_conn_t *conn, uccl_status_t st)
{
    if (st == UCCL_ERR_IO || st == UCCL_ERR_VERSION) {
        uccl_error("peer %s answered the setup with %s", conn->peer_host,
                   st == UCCL_ERR_IO ? "a truncated message"
                                     : "another setup version (an older or newer libuccl)");
        return st;
    }
    uccl_error("peer %s refused the connection: %s", conn->peer_host, uccl_strerror(st));
    return st == UCCL_ERR_STALE || st == UCCL_ERR_DENIED || st == UCCL_ERR_VERSION
               ? st
               : UCCL_ERR_CONN_REFUSED;
}

/* Hello and challenge: the listener proves it knows the secret of addr
 * (ours follows in the request). A wrong proof is refused (UCCL_ERR_DENIED,
 * told to the listener) before any endpoint of ours exists. */
static uccl_status_t connect_authenticate(uccl_conn_t *conn, const uccl_address_t *addr,
                                          uint64_t deadline, uccl_setup_auth_t *auth)
{
    uccl_engine_t *engine = conn->engine;
    uint8_t proof[UCCL_HMAC_SIZE], *msg = NULL;
    size_t len = 0;
    oob_reader_t r;
    oob_buf_t b;
    uccl_status_t st;

    auth->to_id = addr->engine_id;
    auth->from_id = engine->id;
    if (!uccl_crypto_random(auth->nonce_c, UCCL_SETUP_NONCE))
        return UCCL_ERR_UNSUPPORTED;
    uccl_oob_buf_init(&b, 64);
    uccl_setup_put_hello(&b, auth);
    st = uccl_oob_send_frame(engine, conn->oob_fd, b.data, b.len, deadline);
    uccl_oob_buf_free(&b);
    if (st == UCCL_OK)
        st = uccl_oob_recv_frame(engine, conn->oob_fd, SETUP_MAX, deadline, &msg, &len);
    if (st != UCCL_OK)
        return st;
    r = (oob_reader_t){msg, len, 0, false};
    st = uccl_setup_get_status(&r);
    if (st == UCCL_OK && !uccl_setup_get_challenge(&r, auth->nonce_a, proof))
        st = UCCL_ERR_IO;
    free(msg);
    if (st != UCCL_OK)
        return connect_refused(conn, st);
    if (uccl_setup_proof_ok(addr->secret, auth, true, proof))
        return UCCL_OK;
    uccl_error("%s (pid %d) did not prove it knows the admission secret of the address given "
               "(UCCL_ERR_DENIED): the address is another job's or was tampered with, or "
               "another process answers there",
               addr->hostname, (int)addr->pid);
    uccl_oob_buf_init(&b, 64);
    uccl_setup_put_refuse(&b, UCCL_ERR_DENIED);
    (void)uccl_oob_send_frame(engine, conn->oob_fd, b.data, b.len, deadline);
    uccl_oob_buf_free(&b);
    return UCCL_ERR_DENIED;
}

static uccl_status_t connect_build_request(uccl_conn_t *conn, const uccl_address_t *addr,
                                           const uccl_setup_auth_t *auth, oob_buf_t *b)
{
    uint8_t proof[UCCL_HMAC_SIZE];
    uint8_t blob[UCCL_ADDRESS_MAX];
    size_t blob_len = sizeof(blob);
    uccl_status_t st = uccl_address_pack_public(conn->engine, blob, &blob_len);
    int n = 0;

    if (st != UCCL_OK)
        return st;
    if (!uccl_setup_proof(addr->secret, auth, false, proof))
        return UCCL_ERR_UNSUPPORTED;
    for (int i = 0; i < UCCL_TP_MAX; i++)
        n += conn->ep[i] != NULL;
    uccl_setup_put_request_head(b, proof);
    uccl_oob_put_u16(b, (uint16_t)blob_len);
    uccl_oob_put_bytes(b, blob, blob_len);
    uccl_oob_put_u8(b, (uint8_t)n);
    for (int i = 0; i < UCCL_TP_MAX && st == UCCL_OK; i++) {
        if (conn->ep[i] == NULL)
            continue;
        st = put_ep(b, conn->ep[i], (uint8_t)((i == conn->host_tp ? EP_FLAG_HOST : 0) |
                                              (i == conn->dev_tp ? EP_FLAG_DEV : 0)));
    }
    return st;
}

static uccl_status_t connect_apply_reply(uccl_conn_t *conn, const uint8_t *msg, size_t len)
{
    oob_reader_t r = {msg, len, 0, false};
    uccl_status_t st = uccl_setup_get_status(&r);
    int n;

    if (st != UCCL_OK)
        return connect_refused(conn, st);
    n = uccl_oob_get_u8(&r);
    for (int k = 0; k < n; k++) {
        setup_ep_t ep;
        int i;

        if (!get_ep(&r, &ep))
            return UCCL_ERR_IO;
        i = find_local_tp(conn->engine, ep.name);
        if (i < 0 || conn->ep[i] == NULL)
            return UCCL_ERR_IO;
        st = conn->ep[i]->tp->ops->ep_connect(conn->ep[i], ep.info, ep.info_len);
        if (st != UCCL_OK)
            return st;
    }
    return UCCL_OK;
}

uccl_status_t uccl_connect(uccl_engine_t *engine, const void *blob, size_t len, uccl_conn_t **out)
{
    uccl_status_t st = uccl_engine_check(engine);
    uint64_t deadline;
    uccl_address_t addr;
    uccl_setup_auth_t auth;
    uccl_conn_t *conn;
    oob_buf_t b;
    uint8_t *reply = NULL;
    size_t reply_len = 0;

    if (st != UCCL_OK)
        return st;
    if (out == NULL || blob == NULL)
        return UCCL_ERR_INVALID_PARAM;
    st = uccl_address_parse(blob, len, &addr);
    if (st != UCCL_OK) {
        uccl_error("uccl_connect: address rejected: %s", uccl_strerror(st));
        return st;
    }
    deadline = uccl_time_ms() + (uint64_t)engine->cfg.timeout_ms;
    uccl_engine_lock(engine);
    conn = uccl_conn_alloc(engine);
    if (conn == NULL) {
        st = UCCL_ERR_NO_MEMORY;
        goto out_unlock;
    }
    conn->is_initiator = true;
    conn_set_peer(conn, &addr);
    uccl_oob_buf_init(&b, SETUP_MAX);
    st = uccl_oob_connect(engine, &addr.oob, deadline, &conn->oob_fd);
    if (st == UCCL_OK)
        st = connect_authenticate(conn, &addr, deadline, &auth);
    if (st == UCCL_OK)
        st = connect_create_eps(conn, &addr);
    if (st == UCCL_OK)
        st = connect_build_request(conn, &addr, &auth, &b);
    if (st == UCCL_OK)
        st = uccl_oob_send_frame(engine, conn->oob_fd, b.data, b.len, deadline);
    if (st == UCCL_OK)
        st = uccl_oob_recv_frame(engine, conn->oob_fd, SETUP_MAX, deadline, &reply, &reply_len);
    if (st == UCCL_OK)
        st = connect_apply_reply(conn, reply, reply_len);
    free(reply);
    uccl_oob_buf_free(&b);
    if (st != UCCL_OK) {
        uccl_error("connect to %s (pid %d) failed: %s", addr.hostname, (int)addr.pid, uccl_strerror(st));
        uccl_conn_destroy(conn, UCCL_ERR_CANCELED);
        goto out_unlock;
    }
    uccl_list_push_back(&engine->conns, &conn->link);
    uccl_debug("connected to %s pid %d via %s", conn->peer_host, conn->peer_pid,
               conn->host_tp >= 0 ? engine->tp[conn->host_tp]->ops->name : "-");
    *out = conn;
out_unlock:
    uccl_engine_unlock(engine);
    return st;
}

/* ------------------------------------------------------------------ accept side */

/* A hello: for this incarnation? Then the challenge: our nonce and our
 * proof. Nothing is allocated. False when the setup ends here. */
static bool accept_hello(uccl_engine_t *engine, uccl_handshake_t *hs)
{
    uint8_t proof[UCCL_HMAC_SIZE];
    uccl_status_t st = uccl_setup_get_hello(hs->buf, hs->have, &hs->auth);
    oob_buf_t b;

    if (st == UCCL_ERR_VERSION)
        uccl_setup_drop_note(engine, "not a setup request of this version (an older or newer "
                                     "libuccl): UCCL_ERR_VERSION");
    else if (st != UCCL_OK)
        uccl_setup_drop_note(engine, "truncated setup request");
    else if (hs->auth.to_id != engine->id) {
        uccl_setup_drop_note(engine, "meant for an earlier incarnation of this engine (stale "
                                     "address): UCCL_ERR_STALE");
        st = UCCL_ERR_STALE;
    } else if (!uccl_crypto_random(hs->auth.nonce_a, UCCL_SETUP_NONCE) ||
               !uccl_setup_proof(engine->secret, &hs->auth, true, proof)) {
        st = UCCL_ERR_UNSUPPORTED;
    }
    uccl_oob_buf_init(&b, 128);
    if (st == UCCL_OK)
        uccl_setup_put_challenge(&b, hs->auth.nonce_a, proof);
    else
        uccl_setup_put_status(&b, st);
    if (uccl_oob_send_frame(engine, hs->fd, b.data, b.len, uccl_time_ms() + 1000) != UCCL_OK)
        st = UCCL_ERR_IO;
    uccl_oob_buf_free(&b);
    free(hs->buf);
    hs->buf = NULL;
    hs->have = hs->need = 0;
    hs->challenged = true;
    return st == UCCL_OK;
}

/* Admission: the request must carry the connector's proof of the secret
 * over both nonces of this setup (a replayed one names an old nonce of
 * ours), compared in constant time. Nothing is allocated before. */
static uccl_status_t accept_admit(uccl_engine_t *engine, const uccl_handshake_t *hs,
                                  oob_reader_t *r, bool *peer_refused)
{
    uint8_t proof[UCCL_HMAC_SIZE];
    uccl_status_t refused, st = uccl_setup_get_request_head(r, proof, &refused);

    *peer_refused = st == UCCL_ERR_DENIED;
    if (st == UCCL_ERR_DENIED) {
        engine->setup_denied++;
        uccl_setup_drop_note(engine, "the connecting engine found our proof wrong: its address "
                                     "of this engine has another admission secret (another "
                                     "job's, or tampered with): UCCL_ERR_DENIED");
        return st;
    }
    if (st != UCCL_OK) {
        uccl_setup_drop_note(engine, st == UCCL_ERR_VERSION ? "not a setup request of this version"
                                                            : "truncated setup request");
        return st;
    }
    if (!uccl_setup_proof_ok(engine->secret, &hs->auth, false, proof)) {
        engine->setup_denied++;
        uccl_setup_drop_note(engine, "no proof of the admission secret (another job, a forged "
                                     "address, or a replayed setup): UCCL_ERR_DENIED");
        return UCCL_ERR_DENIED;
    }
    return UCCL_OK;
}

/* Build the reply for an admitted setup request (r is past its admission
 * header); creates and wires the endpoints. */
static uccl_status_t accept_handle_request(uccl_conn_t *conn, uint64_t from_id, oob_reader_t *r,
                                           oob_buf_t *reply)
{
    uccl_engine_t *engine = conn->engine;
    uccl_address_t addr;
    const uint8_t *blob;
    size_t blob_len;
    uccl_status_t st;
    int n;

    blob_len = uccl_oob_get_u16(r);
    blob = uccl_oob_get_ptr(r, blob_len);
    if (r->bad || uccl_address_parse(blob, blob_len, &addr) != UCCL_OK ||
        addr.engine_id != from_id) /* the engine that said hello, and proved it */
        return UCCL_ERR_BAD_ADDRESS;
    conn_set_peer(conn, &addr);
    n = uccl_oob_get_u8(r);
    uccl_oob_put_u8(reply, (uint8_t)n);
    for (int k = 0; k < n; k++) {
        setup_ep_t ep;
        uccl_tp_peer_t peer;
        int i;

        if (!get_ep(r, &ep))
            return UCCL_ERR_IO;
        i = find_local_tp(engine, ep.name);
        if (i < 0 || conn->ep[i] != NULL) {
            uccl_warn("peer %s asked for transport %s, not open here", addr.hostname, ep.name);
            return UCCL_ERR_NO_TRANSPORT;
        }
        fill_peer(&addr, peer_entry(&addr, ep.name), &peer);
        st = engine->tp[i]->ops->ep_create(engine->tp[i], conn, &peer, false, &conn->ep[i]);
        if (st != UCCL_OK)
            return st;
        conn->ep[i]->tp = engine->tp[i];
        conn->ep[i]->conn = conn;
        if (ep.flags & EP_FLAG_HOST)
            conn->host_tp = i;
        if (ep.flags & EP_FLAG_DEV)
            conn->dev_tp = i;
        st = engine->tp[i]->ops->ep_connect(conn->ep[i], ep.info, ep.info_len);
        if (st == UCCL_OK)
            st = put_ep(reply, conn->ep[i], ep.flags);
        if (st != UCCL_OK)
            return st;
    }
    return UCCL_OK;
}

static void accept_finish(uccl_engine_t *engine, uccl_handshake_t *hs)
{
    oob_reader_t r = {hs->buf, hs->have, 0, false};
    bool peer_refused;
    uccl_status_t st = accept_admit(engine, hs, &r, &peer_refused);
    uccl_conn_t *conn = NULL;
    oob_buf_t body = {0}, reply;

    if (peer_refused) {
        close(hs->fd); /* the connector refused us: it has gone */
        return;
    }
    if (st == UCCL_OK) {
        conn = uccl_conn_alloc(engine);
        st = conn != NULL ? UCCL_OK : UCCL_ERR_NO_MEMORY;
    }
    if (conn != NULL) {
        uccl_oob_buf_init(&body, SETUP_MAX);
        st = accept_handle_request(conn, hs->auth.from_id, &r, &body);
    }
    uccl_oob_buf_init(&reply, SETUP_MAX);
    uccl_setup_put_status(&reply, st);
    if (st == UCCL_OK)
        uccl_oob_put_bytes(&reply, body.data, body.len);
    if (uccl_oob_send_frame(engine, hs->fd, reply.data, reply.len, uccl_time_ms() + 1000) != UCCL_OK &&
        st == UCCL_OK)
        st = UCCL_ERR_IO;
    uccl_oob_buf_free(&body);
    uccl_oob_buf_free(&reply);
    if (st != UCCL_OK) {
        if (conn != NULL) { /* admitted; refusals of admission are counted by drop notes */
            uccl_warn("incoming connection rejected: %s", uccl_strerror(st));
            uccl_conn_destroy(conn, UCCL_ERR_CANCELED);
        }
        close(hs->fd);
        return;
    }
    conn->oob_fd = hs->fd;
    uccl_list_push_back(&engine->accept_q, &conn->link);
    uccl_debug("accepted connection from %s pid %d", conn->peer_host, conn->peer_pid);
}

/* Read what is available of pending setup requests; finish complete ones. */
void uccl_conn_progress_setup(uccl_engine_t *engine)
{
    uccl_list_t *pos, *tmp;

    uccl_setup_accept(engine);
    uccl_list_for_each_safe(pos, tmp, &engine->handshakes) {
        uccl_handshake_t *hs = uccl_container_of(pos, uccl_handshake_t, link);
        int r = uccl_oob_frame_read_some(hs->fd, SETUP_MAX, &hs->buf, &hs->have, &hs->need);

        if (r == 0 && uccl_time_ms() < hs->deadline_ms)
            continue;
        if (r > 0 && !hs->challenged) {
            if (accept_hello(engine, hs))
                continue; /* the request comes next, within the same deadline */
            close(hs->fd);
        } else if (r > 0) {
            accept_finish(engine, hs);
        } else {
            uccl_setup_drop_note(engine, r < 0 ? "malformed or closed before its request"
                                               : "no setup request within UCCL_SETUP_TIMEOUT_MS");
            close(hs->fd);
        }
        uccl_handshake_free(engine, hs);
    }
}

uccl_status_t uccl_accept(uccl_engine_t *engine, int timeout_ms, uccl_conn_t **out)
{
    uccl_status_t st = uccl_engine_check(engine);
    uint64_t deadline;

    if (st != UCCL_OK)
        return st;
    if (out == NULL)
        return UCCL_ERR_INVALID_PARAM;
    deadline = uccl_time_ms() + (uint64_t)(timeout_ms < 0 ? engine->cfg.timeout_ms : timeout_ms);
    uccl_engine_lock(engine);
    /* progress first, the deadline after: a zero timeout polls once */
    for (;;) {
        uccl_list_t *link;

        engine->next_liveness_ms = 0; /* look at the listener now */
        uccl_engine_progress_locked(engine);
        link = uccl_list_pop_front(&engine->accept_q);
        if (link != NULL) {
            uccl_conn_t *conn = uccl_container_of(link, uccl_conn_t, link);
            uccl_list_push_back(&engine->conns, &conn->link);
            *out = conn;
            break;
        }
        if (uccl_time_ms() >= deadline) {
            st = UCCL_ERR_TIMEOUT;
            break;
        }
        (void)uccl_oob_poll_unlocked(engine, engine->listen_fd, POLLIN, 1);
    }
    uccl_engine_unlock(engine);
    return st;
}

