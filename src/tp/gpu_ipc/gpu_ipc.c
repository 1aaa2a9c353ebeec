/* gpu_ipc transport: ops table, open/close, endpoints wired by a pair of
 * shared-memory mailboxes, message dispatch and progress. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "uccl_build.h"
#include "tp/gpu_ipc/ipc.h"

#define POLL_BUDGET 64

/* What ep_pack sends. */
typedef struct ipc_wire {
    char ring[IPC_RING_NAME_MAX];
    int32_t pid;
    char bus_id[UCCL_GPU_BUS_ID_MAX];
} ipc_wire_t;

/* ------------------------------------------------------------ transport */

static uccl_status_t ipc_open(const uccl_tp_open_params_t *params, uccl_tp_t **out)
{
    ipc_tp_t *tp;
    ipc_cfg_t cfg;
    uccl_status_t st;
    int n = 0;

    /* settings first: a bad one fails engine creation even without a GPU */
    st = uccl_gpu_ipc_cfg_load(&cfg);
    if (st != UCCL_OK)
        return st;
    if (uccl_gpu_count(&n) != UCCL_OK || n == 0)
        return UCCL_ERR_NO_DEVICE;
    if (params->gpu_index >= n) {
        uccl_info("gpu_ipc: GPU %d asked for, %d present", params->gpu_index, n);
        return UCCL_ERR_NO_DEVICE;
    }
    tp = calloc(1, sizeof(*tp));
    if (tp == NULL)
        return UCCL_ERR_NO_MEMORY;
    tp->cfg = cfg;
    tp->device = params->gpu_index;
    uccl_list_init(&tp->allocs);
    uccl_list_init(&tp->eps);
    uccl_list_init(&tp->orphans);
    uccl_list_init(&tp->done_orphans);
    if (tp->device >= 0) {
        /* create the context and streams now, not inside the first transfer */
        st = uccl_gpu_pci_bus_id(tp->device, tp->bus_id, sizeof(tp->bus_id));
        if (st == UCCL_OK)
            st = uccl_gpu_ipc_use_device(tp, -1);
        if (st == UCCL_OK)
            st = uccl_gpu_ipc_copy_setup(tp); /* the copy kernel, now and never in progress */
        if (st == UCCL_OK)
            uccl_gpu_ipc_flag_setup(tp);
        if (st != UCCL_OK)
            goto err_streams;
        uccl_info("gpu_ipc: GPU %d (%s), %d copy streams, split from %zu bytes (0: never)", tp->device,
                  tp->bus_id, tp->nstreams, tp->cfg.stream_split_min);
    }
    *out = &tp->base;
    return UCCL_OK;

err_streams:
    uccl_gpu_ipc_streams_destroy(tp);
    uccl_gpu_ipc_flag_close(tp);
    free(tp);
    return st == UCCL_OK ? UCCL_ERR_NO_DEVICE : st;
}

/* The micro profile (UCCL_GPU_IPC_PROF), to stderr. */
static void prof_print(const ipc_tp_t *tp)
{
    static const char *const names[IPC_PROF_N] = {
        "post", "gap(caller+core)", "copy", "batch(per copy)", "event record", "event query busy",
        "event query done", "stream query busy", "stream query done", "message out", "message in",
        "op finish", "progress call", "sm copy", "sm batch(per copy)", "flag write", "flag late query",
        "flag kernel", "peer done", "peer word", "quiet record", "sm batch launch"};

    fprintf(stderr, "gpu_ipc prof pid %d: step calls ns/call total-us\n", (int)getpid());
    for (int i = 0; i < IPC_PROF_N; i++)
        if (tp->prof.n[i] > 0)
            fprintf(stderr, "gpu_ipc prof pid %d: %-18s %10llu %8.0f %10.0f\n", (int)getpid(), names[i],
                    (unsigned long long)tp->prof.n[i], (double)tp->prof.ns[i] / (double)tp->prof.n[i],
                    (double)tp->prof.ns[i] / 1e3);
}

static void ipc_close(uccl_tp_t *base)
{
    ipc_tp_t *tp = (ipc_tp_t *)base;

    if (tp->cfg.prof)
        prof_print(tp);

    uccl_gpu_ipc_streams_destroy(tp);
    uccl_gpu_ipc_flag_close(tp);
    uccl_gpu_ipc_orphans_close(tp);
    uccl_gpu_ipc_done_orphans_close(tp);
    while (!uccl_list_empty(&tp->allocs)) {
        ipc_alloc_t *a = uccl_list_first(&tp->allocs, ipc_alloc_t, link);
        uccl_list_del(&a->link);
        free(a);
    }
    free(tp);
}

static uccl_status_t ipc_address(uccl_tp_t *base, void *buf, size_t *len)
{
    (void)base;
    (void)buf;
    *len = 0; /* everything a peer needs travels in ep_pack */
    return UCCL_OK;
}

/* ------------------------------------------------------------ messages */

static void txq_flush(ipc_ep_t *ep)
{
    while (!uccl_list_empty(&ep->txq) && ep->tx.shm != NULL) {
        ipc_txmsg_t *m = uccl_list_first(&ep->txq, ipc_txmsg_t, link);
        if (!uccl_gpu_ipc_ring_push(&ep->tx, m->type, m->data, m->len, NULL, 0))
            return;
        uccl_list_del(&m->link);
        free(m);
    }
}

/* Send in order: straight into the ring, or queued behind what waits. */
uccl_status_t uccl_gpu_ipc_send_msg(ipc_ep_t *ep, uint16_t type, const void *a, size_t alen, const void *b,
                           size_t blen)
{
    ipc_txmsg_t *m;
    uint64_t t0 = IPC_PROF_T0(ep->tp->cfg.prof);

    if (ep->failed)
        return UCCL_ERR_PEER_FAILED;
    txq_flush(ep);
    if (uccl_list_empty(&ep->txq) && ep->tx.shm != NULL && uccl_gpu_ipc_ring_push(&ep->tx, type, a, alen, b, blen)) {
        IPC_PROF_ADD(&ep->tp->prof, IPC_PROF_MSG, t0, 1);
        return UCCL_OK;
    }
    m = malloc(sizeof(*m) + alen + blen);
    if (m == NULL)
        return UCCL_ERR_NO_MEMORY;
    m->type = type;
    m->len = alen + blen;
    memcpy(m->data, a, alen);
    if (blen)
        memcpy(m->data + alen, b, blen);
    uccl_list_push_back(&ep->txq, &m->link);
    return UCCL_OK;
}

void uccl_gpu_ipc_ep_fail(ipc_ep_t *ep, const char *why)
{
    if (ep->failed)
        return;
    uccl_error("gpu_ipc: connection to pid %d broken: %s", ep->peer_pid, why);
    ep->failed = true;
    uccl_conn_fail(ep->base.conn, UCCL_ERR_PEER_FAILED);
}

/* A record parsed by ipc_wire.c, to its handler. */
static void dispatch(ipc_ep_t *ep, const ipc_rx_msg_t *m)
{
    ipc_map_t *map;

    switch (m->type) {
    case IPC_MSG_ALLOC:
        if (uccl_gpu_ipc_map_get(ep, &m->u.alloc, &map) != UCCL_OK) /* the messages that follow need it */
            uccl_gpu_ipc_ep_fail(ep, "the peer announced GPU memory that cannot be mapped here");
        return;
    case IPC_MSG_ALLOC_GONE:
        if ((map = uccl_gpu_ipc_map_find(ep, m->u.key.key)) != NULL)
            uccl_gpu_ipc_map_put(ep, map);
        else
            uccl_gpu_ipc_ep_fail(ep, "the peer withdrew GPU memory it never announced");
        return;
    case IPC_MSG_GRANT_REQ:
        uccl_gpu_ipc_on_grant_req(ep, &m->u.grant_req);
        return;
    case IPC_MSG_GRANT:
        uccl_gpu_ipc_on_grant(ep, &m->u.grant);
        return;
    case IPC_MSG_REVOKE:
        uccl_gpu_ipc_on_revoke(ep, m->u.key.key);
        return;
    case IPC_MSG_RTS:
        uccl_gpu_ipc_on_rts(ep, &m->u.rts, m->seg);
        return;
    case IPC_MSG_CTS:
        uccl_gpu_ipc_on_cts(ep, &m->u.cts, m->seg);
        return;
    case IPC_MSG_FIN:
    case IPC_MSG_TGT_DONE:
    case IPC_MSG_PUSH_DONE:
        uccl_gpu_ipc_on_fin(ep, m->type == IPC_MSG_FIN        ? IPC_WAIT_SEND
                                : m->type == IPC_MSG_TGT_DONE ? IPC_WAIT_TGT
                                                              : IPC_WAIT_PUSH,
                            &m->u.fin);
        return;
    case IPC_MSG_TGT_OP:
        uccl_gpu_ipc_on_tgt_op(ep, &m->u.tgt, m->seg);
        return;
    case IPC_MSG_NOTIF:
        uccl_conn_notif_push(ep->base.conn, m->u.key.key);
        return;
    }
}

/* Handle what the peer sent (bounded, never blocks). */
void uccl_gpu_ipc_ep_poll(ipc_ep_t *ep)
{
    _Alignas(8) uint8_t msg[IPC_MSG_MAX];
    ipc_rx_msg_t m;
    const char *why;

    for (int i = 0; i < POLL_BUDGET && !ep->failed && ep->rx.shm != NULL; i++) {
        const void *payload;
        uint16_t type;
        size_t len;
        uccl_status_t st = uccl_gpu_ipc_ring_peek(&ep->rx, &type, &payload, &len);
        uint64_t t0;

        if (st == UCCL_ERR_NOT_FOUND)
            break;
        t0 = IPC_PROF_T0(ep->tp->cfg.prof);
        if (st != UCCL_OK || len > IPC_MSG_MAX) {
            uccl_gpu_ipc_ep_fail(ep, "mailbox corrupted");
            break;
        }
        /* parse a private copy (the peer can still write the ring), taken
         * off the ring first so that nothing handles it twice */
        memcpy(msg, payload, len);
        uccl_gpu_ipc_ring_pop(&ep->rx, len);
        if (uccl_gpu_ipc_msg_parse(type, msg, len, &m, &why) != UCCL_OK) {
            char text[128];
            snprintf(text, sizeof(text), "malformed mailbox message (%s)", why);
            uccl_gpu_ipc_ep_fail(ep, text);
            break;
        }
        dispatch(ep, &m);
        IPC_PROF_ADD(&ep->tp->prof, IPC_PROF_RX, t0, 1);
    }
}

static int ipc_progress(uccl_tp_t *base)
{
    ipc_tp_t *tp = (ipc_tp_t *)base;
    uccl_list_t *pos;
    int events = 0;
    uint64_t t0 = IPC_PROF_T0(tp->cfg.prof);

    tp->prof.last_post_end = 0; /* the next post's gap is not the caller's alone */
    uccl_list_for_each(pos, &tp->eps) {
        ipc_ep_t *ep = uccl_container_of(pos, ipc_ep_t, link);
        if (ep->failed || !ep->connected)
            continue;
        uccl_gpu_ipc_ep_poll(ep);
        txq_flush(ep);
        if (ep->done_busy != 0)
            events += uccl_gpu_ipc_done_poll(ep);
        events += uccl_gpu_ipc_ops_progress(ep);
        if (!uccl_list_empty(&ep->zombies))
            uccl_gpu_ipc_maps_release(ep, false);
    }
    if (!uccl_list_empty(&tp->orphans) && uccl_engine_stream_holds(base->engine) == 0 &&
        uccl_engine_streams_passed(base->engine))
        uccl_gpu_ipc_orphans_close(tp);
    if (!uccl_list_empty(&tp->done_orphans) && uccl_engine_stream_holds(base->engine) == 0 &&
        uccl_engine_streams_passed(base->engine))
        uccl_gpu_ipc_done_orphans_close(tp);
    IPC_PROF_ADD(&tp->prof, IPC_PROF_PROGRESS, t0, 1);
    return events;
}

/* ------------------------------------------------------------ endpoints */

static uccl_status_t ipc_ep_create(uccl_tp_t *base, uccl_conn_t *conn, const uccl_tp_peer_t *peer,
                                   bool is_initiator, uccl_tp_ep_t **out)
{
    ipc_tp_t *tp = (ipc_tp_t *)base;
    ipc_ep_t *ep = calloc(1, sizeof(*ep));
    uccl_status_t st;

    (void)is_initiator;
    if (ep == NULL)
        return UCCL_ERR_NO_MEMORY;
    ep->tp = tp;
    ep->base.tp = base;
    ep->base.conn = conn;
    ep->peer_pid = peer->pid;
    ep->peer_device = -1;
    uccl_list_t *lists[] = {&ep->txq, &ep->maps,  &ep->zombies,   &ep->grants,
                            &ep->ops, &ep->unexp, &ep->grant_wait};
    for (size_t i = 0; i < sizeof(lists) / sizeof(lists[0]); i++)
        uccl_list_init(lists[i]);
    for (int i = 0; i < IPC_WAIT_N; i++)
        uccl_hmap_init(&ep->waits[i]);
    uccl_hmap_init(&ep->map_keys);
    uccl_hmap_init(&ep->grant_ids);
    uccl_hmap_init(&ep->ptr_maps);
    uccl_hmap_init(&ep->ptr_asked);
    st = uccl_gpu_ipc_ring_create(&ep->rx);
    if (st != UCCL_OK) {
        free(ep);
        return st;
    }
    uccl_list_push_back(&tp->eps, &ep->link);
    *out = &ep->base;
    return UCCL_OK;
}

static uccl_status_t ipc_ep_pack(uccl_tp_ep_t *base, void *buf, size_t *len)
{
    ipc_ep_t *ep = (ipc_ep_t *)base;
    ipc_wire_t w;

    if (*len < sizeof(w))
        return UCCL_ERR_BUFFER_TOO_SMALL;
    memset(&w, 0, sizeof(w));
    snprintf(w.ring, sizeof(w.ring), "%s", ep->rx.name);
    w.pid = ep->tp->base.params->pid;
    snprintf(w.bus_id, sizeof(w.bus_id), "%s", ep->tp->bus_id);
    memcpy(buf, &w, sizeof(w));
    *len = sizeof(w);
    return UCCL_OK;
}

/* Say at info level how the two GPUs are linked. */
static void log_link(ipc_ep_t *ep, const char *peer_bus)
{
    int can = 0, nvlink = 0;

    if (ep->tp->device < 0 || ep->peer_device < 0)
        return;
    if (uccl_gpu_peer_query(ep->tp->device, ep->peer_device, &can, &nvlink) != UCCL_OK)
        return;
    uccl_info("gpu_ipc: GPU %d (%s) <-> pid %d GPU %d (%s): %s", ep->tp->device, ep->tp->bus_id,
              ep->peer_pid, ep->peer_device, peer_bus,
              ep->tp->device == ep->peer_device ? "same GPU"
              : !can                            ? "no peer access (copies staged by the driver)"
              : nvlink                          ? "peer access over NVLink"
                                                : "peer access over PCIe");
}

static uccl_status_t ipc_ep_connect(uccl_tp_ep_t *base, const void *info, size_t len)
{
    ipc_ep_t *ep = (ipc_ep_t *)base;
    ipc_wire_t w;
    uccl_status_t st;

    if (len != sizeof(w))
        return UCCL_ERR_BAD_ADDRESS;
    memcpy(&w, info, sizeof(w));
    w.ring[sizeof(w.ring) - 1] = '\0';
    w.bus_id[sizeof(w.bus_id) - 1] = '\0';
    st = uccl_gpu_ipc_ring_attach(&ep->tx, w.ring);
    if (st != UCCL_OK)
        return st;
    ep->peer_pid = w.pid;
    if (w.bus_id[0] != '\0' && uccl_gpu_device_by_bus_id(w.bus_id, &ep->peer_device) != UCCL_OK)
        ep->peer_device = -1;
    log_link(ep, w.bus_id);
    uccl_gpu_ipc_done_setup(ep);
    ep->connected = true;
    uccl_gpu_ipc_peers_changed(ep->tp);
    return UCCL_OK;
}

/* Drop our references to waiting requests without completing them: the
 * core completes them with the connection's error, or UCCL_ERR_CANCELED
 * when it is closed (tp_api.h, ep_destroy). */
static void forget_list(uccl_list_t *list)
{
    while (uccl_list_pop_front(list) != NULL)
        ;
}

static void free_list(uccl_list_t *list, size_t link_offset)
{
    while (!uccl_list_empty(list)) {
        uccl_list_t *l = uccl_list_pop_front(list);
        free((char *)l - link_offset);
    }
}

static void ipc_ep_destroy(uccl_tp_ep_t *base)
{
    ipc_ep_t *ep = (ipc_ep_t *)base;

    ep->failed = true; /* nothing more goes out */
    uccl_gpu_ipc_ops_cancel(ep);
    uccl_gpu_ipc_done_close(ep); /* no copy of ours writes the peer's words any more */
    for (int i = 0; i < IPC_WAIT_N; i++)
        uccl_hmap_fini(&ep->waits[i]);
    forget_list(&ep->grant_wait);
    free_list(&ep->grants, offsetof(ipc_grant_t, link));
    uccl_hmap_fini(&ep->grant_ids);
    uccl_hmap_fini(&ep->ptr_maps); /* their maps go with the rest */
    uccl_hmap_fini(&ep->ptr_asked);
    uccl_gpu_ipc_maps_release(ep, true);
    uccl_hmap_fini(&ep->map_keys);
    free_list(&ep->unexp, offsetof(ipc_rts_t, link));
    free_list(&ep->txq, offsetof(ipc_txmsg_t, link));
    uccl_gpu_ipc_ring_destroy(&ep->rx);
    uccl_gpu_ipc_ring_destroy(&ep->tx);
    free(ep->announced);
    uccl_list_del(&ep->link);
    uccl_gpu_ipc_peers_changed(ep->tp);
    free(ep);
}

const struct uccl_tp_ops uccl_tp_gpu_ipc_ops = {
    .size = sizeof(struct uccl_tp_ops),
    .name = "gpu_ipc",
    .priority = 100,
#if defined(UCCL_HAVE_CUDA) || defined(UCCL_HAVE_FAKE_GPU) /* fake memory says UCCL_MEM_CUDA */
    .caps = UCCL_TP_CAP_CUDA_MEM | UCCL_TP_CAP_SAME_HOST | UCCL_TP_CAP_RMA | UCCL_TP_CAP_NOTIFY |
            UCCL_TP_CAP_MEM_REG,
#else
    .caps = UCCL_TP_CAP_ROCM_MEM | UCCL_TP_CAP_SAME_HOST | UCCL_TP_CAP_RMA | UCCL_TP_CAP_NOTIFY |
            UCCL_TP_CAP_MEM_REG,
#endif
    .engine_cap = UCCL_CAP_GPU_IPC,
    .config_table = &uccl_gpu_ipc_cfg_table,
    .open = ipc_open,
    .close = ipc_close,
    .address = ipc_address,
    .reachable = NULL,
    .ep_create = ipc_ep_create,
    .ep_pack = ipc_ep_pack,
    .ep_connect = ipc_ep_connect,
    .ep_destroy = ipc_ep_destroy,
    .mem_reg = uccl_gpu_ipc_mem_reg,
    .mem_dereg = uccl_gpu_ipc_mem_dereg,
    .mem_pack = NULL,
    .post_send = uccl_gpu_ipc_post_send,
    .msg_deliver = uccl_gpu_ipc_msg_deliver,
    .post_write = uccl_gpu_ipc_post_write,
    .post_read = uccl_gpu_ipc_post_read,
    .progress = ipc_progress,
    .remote_ptr = uccl_gpu_ipc_remote_ptr,
};
