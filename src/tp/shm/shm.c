/* The shm transport: configuration, open/close, connection setup over a
 * POSIX shared segment holding one ring per direction, and the ops table. */
#include "shm.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdatomic.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define SHM_FIELD(name, dflt, doc, field, type) {name, dflt, doc, offsetof(shm_config_t, field), type}

static const uccl_cfg_field_t shm_fields[] = {
    SHM_FIELD("CMA", "auto",
              "single-copy large transfers with process_vm_readv/writev: auto (probe at connect), "
              "on (required), off (pipeline through the ring)", cma, UCCL_CFG_STRING),
    SHM_FIELD("CMA_PTRACER", "1",
              "under Yama ptrace_scope 1, let any process of this user attach to this one "
              "(prctl PR_SET_PTRACER_ANY, as Open MPI does) so that peers can use CMA", cma_ptracer,
              UCCL_CFG_BOOL),
    SHM_FIELD("RING_SIZE", "4M", "bytes of the shared ring of each direction (power of two, >= 64K)",
              ring_size, UCCL_CFG_SIZE),
    SHM_FIELD("CHUNK", "64K",
              "without CMA, large transfers stream through the ring in packets of this size "
              "(header included; at most a quarter of the ring)", chunk, UCCL_CFG_SIZE),
    SHM_FIELD("EAGER_THRESHOLD", "16K",
              "messages up to this size are copied through the ring, larger ones use rendezvous",
              eager_threshold, UCCL_CFG_SIZE),
    SHM_FIELD("STAGE_CHUNK", "1M", "GPU memory is staged through pinned host buffers of this size",
              stage_chunk, UCCL_CFG_SIZE),
    SHM_FIELD("STAGE_DEPTH", "4", "staged chunks a GPU source copies ahead of the ring",
              stage_depth, UCCL_CFG_INT),
    SHM_FIELD("SPLIT_MIN", "1M",
              "CMA transfers of at least this size are copied by both processes at once (the "
              "receiver or target pulls or pushes the first part, the peer the rest); 0 = off",
              split_min, UCCL_CFG_SIZE),
    SHM_FIELD("SPLIT_PCT", "50",
              "percent of a split CMA transfer that the receiver or target copies (0..100)",
              split_pct, UCCL_CFG_INT),
    SHM_FIELD("CMA_CHUNK", "4M",
              "largest process_vm_readv/writev call in bytes (a larger copy takes several); "
              "0 = one call per copy", cma_chunk, UCCL_CFG_SIZE),
    SHM_FIELD("PROGRESS_BYTES", "8M",
              "most bytes one progress call copies with CMA (all connections together; at most "
              "64 calls): a larger copy goes on in the next calls, so waits keep their deadlines",
              progress_bytes, UCCL_CFG_SIZE),
    SHM_FIELD("MAP_MAX", "64M",
              "rendezvous sends of at most this size from memory of uccl_mem_alloc are copied by "
              "the receiver with memcpy from its mapping of the sender's memory (no CMA, no split); "
              "0 = off", map_max, UCCL_CFG_SIZE),
    SHM_FIELD("CMA_HELPER", "auto",
              "a thread copies the second half of large CMA transfers while progress copies the "
              "first: auto (with 2 shm peers or more and online CPUs >= 2 x (shm peers + 1)), "
              "on, off", cma_helper,
              UCCL_CFG_STRING),
    SHM_FIELD("CMA_HELPER_MIN", "512K",
              "CMA transfers of at least this size are shared with the CMA helper; 0 = never",
              cma_helper_min, UCCL_CFG_SIZE),
    {NULL, NULL, NULL, 0, 0},
};

const uccl_cfg_table_t uccl_shm_config_table = {
    .prefix = "SHM_", .fields = shm_fields, .struct_size = sizeof(shm_config_t)};

/* What one side sends the other in ep_pack. */
typedef struct shm_ep_info {
    uint64_t magic;
    uint64_t ring_size;
    uint64_t probe_addr;
    uint64_t probe_value;
    char seg_name[64];
} shm_ep_info_t;

static uccl_status_t shm_parse_cma(const char *text, shm_cma_mode_t *mode)
{
    static const char *const on[] = {"1", "on", "yes", "y", "true"};
    static const char *const off[] = {"0", "off", "no", "n", "false"};

    if (strcasecmp(text, "auto") == 0) {
        *mode = SHM_CMA_AUTO;
        return UCCL_OK;
    }
    for (size_t i = 0; i < sizeof(on) / sizeof(on[0]); i++) {
        if (strcasecmp(text, on[i]) == 0) {
            *mode = SHM_CMA_ON;
            return UCCL_OK;
        }
        if (strcasecmp(text, off[i]) == 0) {
            *mode = SHM_CMA_OFF;
            return UCCL_OK;
        }
    }
    uccl_error("UCCL_SHM_CMA=%s: expected auto, on or off", text);
    return UCCL_ERR_INVALID_PARAM;
}

static uccl_status_t shm_open_tp(const uccl_tp_open_params_t *params, uccl_tp_t **out)
{
    shm_tp_t *tp = calloc(1, sizeof(*tp));
    uccl_status_t st;

    if (tp == NULL)
        return UCCL_ERR_NO_MEMORY;
    st = uccl_cfg_parse(&uccl_shm_config_table, &tp->cfg);
    if (st == UCCL_OK)
        st = shm_parse_cma(tp->cfg.cma, &tp->cma_mode);
    if (st == UCCL_OK)
        st = uccl_shm_cma_helper_parse(tp);
    if (st != UCCL_OK)
        goto err_free;
    if (tp->cfg.ring_size < 65536 || (tp->cfg.ring_size & (tp->cfg.ring_size - 1)) ||
        tp->cfg.ring_size > (1ull << 31)) {
        uccl_error("UCCL_SHM_RING_SIZE=%zu: must be a power of two in [64K, 2G]", tp->cfg.ring_size);
        st = UCCL_ERR_INVALID_PARAM;
        goto err_free;
    }
    /* a packet may take at most half the ring; keep room for the header */
    if (tp->cfg.eager_threshold > tp->cfg.ring_size / 4)
        tp->cfg.eager_threshold = tp->cfg.ring_size / 4;
    /* packets of one size tile the ring: no PAD at the end that would make
     * the sender wait for more than one packet's room */
    tp->chunk = tp->cfg.chunk < tp->cfg.ring_size / 4 ? tp->cfg.chunk : tp->cfg.ring_size / 4;
    if (tp->chunk < 4096) {
        uccl_error("UCCL_SHM_CHUNK=%zu: must be at least 4K", tp->cfg.chunk);
        st = UCCL_ERR_INVALID_PARAM;
        goto err_free;
    }
    tp->probe = SHM_WIRE_MAGIC ^ (uint64_t)getpid();
    tp->online_cpus = sysconf(_SC_NPROCESSORS_ONLN);
    uccl_list_init(&tp->eps);
    if (tp->cfg.stage_chunk < 4096 || tp->cfg.stage_depth < 1) {
        uccl_error("UCCL_SHM_STAGE_CHUNK=%zu must be at least 4K and UCCL_SHM_STAGE_DEPTH=%d >= 1",
                   tp->cfg.stage_chunk, tp->cfg.stage_depth);
        st = UCCL_ERR_INVALID_PARAM;
        goto err_free;
    }
    if (tp->cfg.progress_bytes == 0) {
        uccl_error("UCCL_SHM_PROGRESS_BYTES must be > 0");
        st = UCCL_ERR_INVALID_PARAM;
        goto err_free;
    }
    if (tp->cfg.split_pct < 0 || tp->cfg.split_pct > 100) {
        uccl_error("UCCL_SHM_SPLIT_PCT=%d: must be in [0, 100]", tp->cfg.split_pct);
        st = UCCL_ERR_INVALID_PARAM;
        goto err_free;
    }
    uccl_shm_cma_allow_peers(tp);
    /* GPU memory is moved by staging when a GPU is usable here */
    if (uccl_stage_create(params->gpu_index, tp->cfg.stage_chunk, (int)tp->cfg.stage_depth,
                          &tp->stage) == UCCL_OK)
        tp->base.open_caps = UCCL_TP_CAP_CUDA_MEM | UCCL_TP_CAP_ROCM_MEM;
    *out = &tp->base;
    return UCCL_OK;

err_free:
    free(tp);
    return st;
}

static void shm_close_tp(uccl_tp_t *base)
{
    shm_tp_t *tp = (shm_tp_t *)base;

    if (tp->cma_helper_pieces > 0)
        uccl_info("shm: the CMA helper copied %llu job halves",
                  (unsigned long long)tp->cma_helper_pieces);
    uccl_shm_cma_helper_destroy(tp);
    uccl_stage_destroy(((shm_tp_t *)base)->stage);
    uccl_shm_map_close((shm_tp_t *)base);
    free(base);
}

static uccl_status_t shm_address(uccl_tp_t *tp, void *buf, size_t *len)
{
    uint8_t *p = buf;

    (void)tp;
    if (*len < 8)
        return UCCL_ERR_BUFFER_TOO_SMALL;
    uccl_put_u64(p, SHM_WIRE_MAGIC);
    *len = 8;
    return UCCL_OK;
}

static bool shm_reachable(uccl_tp_t *tp, const uccl_tp_peer_t *peer)
{
    return peer->host_id == tp->params->host_id && peer->addr_len == 8 &&
           uccl_get_u64(peer->addr) == SHM_WIRE_MAGIC;
}

/* ------------------------------------------------------------------ segment */

static size_t shm_seg_size(size_t ring_size)
{
    return sizeof(shm_seg_hdr_t) + 2 * uccl_spsc_footprint(ring_size);
}

/* Attach both rings of a mapped segment: the initiator produces into ring 0. */
static void shm_ep_attach(shm_ep_t *ep, size_t ring_size, bool init)
{
    uint8_t *base = (uint8_t *)ep->seg + sizeof(shm_seg_hdr_t);
    uint8_t *ring0 = base, *ring1 = base + uccl_spsc_footprint(ring_size);

    uccl_spsc_attach(&ep->tx, ep->is_initiator ? ring0 : ring1, ring_size, SHM_RING_ALIGN, true, init);
    uccl_spsc_attach(&ep->rx, ep->is_initiator ? ring1 : ring0, ring_size, SHM_RING_ALIGN, false, init);
}

/* Memory: the segment (two rings of UCCL_SHM_RING_SIZE, 8 MiB by default)
 * is a sparse file of /dev/shm, mapped by both processes; a page becomes
 * resident when the rings first reach it. Packets go round each ring, so
 * every process's RSS grows by up to both rings (RssShmem, counted in both
 * processes for the same pages) over the first lap, then stays flat; the
 * pages are freed once both ends closed (munmap; the name is unlinked as
 * soon as the peer attached).
 * 1 KiB writes by CMA take 128 bytes of the writer's ring (RMA, 64-byte
 * aligned) and 64 of the other (FIN): 4 MiB rings fill after 2048 and 4096
 * windows of 16 (tests/perf/results/core-rss16). */
static uccl_status_t shm_seg_create(shm_ep_t *ep)
{
    size_t ring_size = ep->tp->cfg.ring_size;
    size_t len = shm_seg_size(ring_size);
    shm_seg_hdr_t *hdr;
    int fd;

    snprintf(ep->seg_name, sizeof(ep->seg_name), "/uccl-shm-%016" PRIx64 "-%016" PRIx64,
             ep->tp->base.params->engine_id, uccl_random_u64());
    fd = shm_open(ep->seg_name, O_RDWR | O_CREAT | O_EXCL, 0600);
    if (fd < 0) {
        uccl_error("shm_open(%s): %s", ep->seg_name, strerror(errno));
        return UCCL_ERR_NO_MEMORY;
    }
    ep->seg_named = true;
    if (ftruncate(fd, (off_t)len) != 0) {
        uccl_error("ftruncate(%s, %zu): %s", ep->seg_name, len, strerror(errno));
        goto err_unlink;
    }
    ep->seg = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (ep->seg == MAP_FAILED) {
        uccl_error("mmap(%s, %zu): %s", ep->seg_name, len, strerror(errno));
        ep->seg = NULL;
        goto err_unlink;
    }
    close(fd);
    ep->seg_len = len;
    hdr = ep->seg;
    hdr->magic = SHM_WIRE_MAGIC;
    hdr->ring_size = ring_size;
    shm_ep_attach(ep, ring_size, true);
    return UCCL_OK;

err_unlink:
    close(fd);
    shm_unlink(ep->seg_name);
    ep->seg_named = false;
    return UCCL_ERR_NO_MEMORY;
}

/* Map the peer's segment and remove its name at once: from now on the
 * mapping alone keeps it alive, so nothing is left behind by a crash. */
static uccl_status_t shm_seg_map(shm_ep_t *ep, const shm_ep_info_t *info)
{
    size_t len = shm_seg_size(info->ring_size);
    struct stat sb;
    int fd;

    if (info->ring_size < 65536 || (info->ring_size & (info->ring_size - 1)) ||
        info->ring_size > (1ull << 31) || memchr(info->seg_name, '\0', sizeof(info->seg_name)) == NULL ||
        strncmp(info->seg_name, "/uccl-shm-", 10) != 0) {
        uccl_error("shm: malformed connection info from pid %d", ep->peer_pid);
        return UCCL_ERR_TRANSPORT;
    }
    fd = shm_open(info->seg_name, O_RDWR, 0);
    if (fd < 0) {
        uccl_error("shm_open(%s): %s", info->seg_name, strerror(errno));
        return UCCL_ERR_TRANSPORT;
    }
    shm_unlink(info->seg_name);
    if (fstat(fd, &sb) != 0 || (size_t)sb.st_size != len) {
        uccl_error("shm segment %s has the wrong size", info->seg_name);
        close(fd);
        return UCCL_ERR_TRANSPORT;
    }
    ep->seg = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (ep->seg == MAP_FAILED) {
        uccl_error("mmap(%s, %zu): %s", info->seg_name, len, strerror(errno));
        ep->seg = NULL;
        return UCCL_ERR_NO_MEMORY;
    }
    ep->seg_len = len;
    if (((shm_seg_hdr_t *)ep->seg)->magic != SHM_WIRE_MAGIC) {
        uccl_error("shm segment %s: bad magic", info->seg_name);
        return UCCL_ERR_TRANSPORT;
    }
    shm_ep_attach(ep, info->ring_size, false);
    return UCCL_OK;
}

/* ------------------------------------------------------------------ endpoints */

static uccl_status_t shm_ep_create(uccl_tp_t *base, uccl_conn_t *conn, const uccl_tp_peer_t *peer,
                                   bool is_initiator, uccl_tp_ep_t **out)
{
    shm_tp_t *tp = (shm_tp_t *)base;
    shm_ep_t *ep = calloc(1, sizeof(*ep));
    uccl_status_t st;

    (void)conn;
    if (ep == NULL)
        return UCCL_ERR_NO_MEMORY;
    ep->tp = tp;
    ep->peer_pid = peer->pid;
    ep->is_initiator = is_initiator;
    ep->pidfd = -1;
    uccl_idmap_init(&ep->ids, 64, 20);
    uccl_idmap_init(&ep->split_ids, 64, 20);
    uccl_list_init(&ep->recv_active);
    uccl_list_init(&ep->unexp);
    uccl_list_init(&ep->txq);
    uccl_list_init(&ep->waiting);
    uccl_list_init(&ep->ctrlq);
    uccl_list_init(&ep->streams);
    uccl_list_init(&ep->splits);
    uccl_list_init(&ep->cma_jobs);
    uccl_list_init(&ep->cma_spare);
    if (is_initiator) {
        st = shm_seg_create(ep);
        if (st != UCCL_OK) {
            free(ep);
            return st;
        }
    }
    uccl_list_push_back(&tp->eps, &ep->link);
    *out = &ep->base;
    return UCCL_OK;
}

static uccl_status_t shm_ep_pack(uccl_tp_ep_t *base, void *buf, size_t *len)
{
    shm_ep_t *ep = (shm_ep_t *)base;
    shm_ep_info_t info = {
        .magic = SHM_WIRE_MAGIC,
        .ring_size = ep->is_initiator ? ep->tp->cfg.ring_size : 0,
        .probe_addr = (uint64_t)(uintptr_t)&ep->tp->probe,
        .probe_value = ep->tp->probe,
    };

    if (*len < sizeof(info))
        return UCCL_ERR_BUFFER_TOO_SMALL;
    if (ep->is_initiator)
        snprintf(info.seg_name, sizeof(info.seg_name), "%s", ep->seg_name);
    memcpy(buf, &info, sizeof(info));
    *len = sizeof(info);
    return UCCL_OK;
}

static uccl_status_t shm_ep_decide_cma(shm_ep_t *ep)
{
    if (ep->tp->cma_mode == SHM_CMA_OFF) {
        ep->cma = false;
        uccl_info("shm: connection to pid %d uses the ring for large transfers (UCCL_SHM_CMA=0)",
                  ep->peer_pid);
        return UCCL_OK;
    }
    ep->cma = uccl_shm_cma_probe(ep);
    if (!ep->cma && ep->tp->cma_mode == SHM_CMA_ON) {
        uccl_error("UCCL_SHM_CMA=on but CMA to pid %d is not permitted", ep->peer_pid);
        return UCCL_ERR_UNSUPPORTED;
    }
    uccl_info("shm: connection to pid %d uses %s for large transfers", ep->peer_pid,
               ep->cma ? "CMA" : "the ring");
    return UCCL_OK;
}

static uccl_status_t shm_ep_connect(uccl_tp_ep_t *base, const void *peer_info, size_t len)
{
    shm_ep_t *ep = (shm_ep_t *)base;
    shm_ep_info_t info;
    uccl_status_t st;

    if (len != sizeof(info)) {
        uccl_error("shm: connection info of %zu bytes from pid %d (expected %zu)", len,
                   ep->peer_pid, sizeof(info));
        return UCCL_ERR_TRANSPORT;
    }
    memcpy(&info, peer_info, sizeof(info));
    if (info.magic != SHM_WIRE_MAGIC)
        return UCCL_ERR_VERSION;
    ep->peer_probe_addr = info.probe_addr;
    ep->peer_probe_value = info.probe_value;
    if (ep->is_initiator) {
        /* the acceptor has mapped the segment by now: drop its name */
        shm_unlink(ep->seg_name);
        ep->seg_named = false;
    } else {
        st = shm_seg_map(ep, &info);
        if (st != UCCL_OK)
            return st;
    }
    st = shm_ep_decide_cma(ep);
    if (st != UCCL_OK)
        return st;
    /* before anything of ours is in the ring: the peer reads it when our packets come */
    atomic_store(&((shm_seg_hdr_t *)ep->seg)->cma_on[ep->is_initiator ? 0 : 1], ep->cma);
    ep->connected = true;
    return UCCL_OK;
}

static void shm_free_list(uccl_list_t *head)
{
    uccl_list_t *link;

    while ((link = uccl_list_pop_front(head)) != NULL)
        free(link); /* every element type starts with its link */
}

/* Requests are the core's to complete: only forget them here. */
static void shm_forget_reqs(uccl_list_t *head)
{
    while (uccl_list_pop_front(head) != NULL)
        ;
}

/* Close fence (shm_seg_hdr_t): once this returns, the peer's CMA calls
 * leave our memory alone. Waits while a call of the peer is under way (one
 * bounded copy), at most UCCL_TIMEOUT_MS for a frozen peer. */
static void shm_close_fence(shm_ep_t *ep)
{
    shm_seg_hdr_t *hdr = ep->seg;
    int me = ep->is_initiator ? 0 : 1;
    uccl_deadline_t deadline = uccl_deadline_in((uint64_t)ep->tp->base.params->timeout_ms);

    atomic_store(&hdr->closed[me], 1);
    while (atomic_load(&hdr->cma_busy[1 - me])) {
        if (uccl_pid_gone(ep->peer_pid))
            return; /* gone or a zombie: it copies nothing any more */
        if (uccl_deadline_passed(&deadline)) {
            uccl_warn("shm: closing while pid %d is still copying (frozen?) after %d ms",
                      ep->peer_pid, ep->tp->base.params->timeout_ms);
            return;
        }
        sched_yield();
    }
}

static void shm_ep_destroy(uccl_tp_ep_t *base)
{
    shm_ep_t *ep = (shm_ep_t *)base;

    shm_forget_reqs(&ep->recv_active);
    shm_forget_reqs(&ep->txq);
    shm_forget_reqs(&ep->waiting);
    uccl_idmap_fini(&ep->ids);
    shm_free_list(&ep->unexp);
    shm_free_list(&ep->ctrlq);
    uccl_shm_cma_jobs_free(ep);
    uccl_idmap_fini(&ep->split_ids);
    while (!uccl_list_empty(&ep->streams))
        uccl_shm_stream_free(uccl_list_first(&ep->streams, shm_stream_t, link));
    if (ep->tp->stage != NULL)
        uccl_stage_cancel(ep->tp->stage, ep);
    if (ep->seg != NULL) {
        shm_close_fence(ep);
        munmap(ep->seg, ep->seg_len);
    }
    uccl_shm_splits_free(ep); /* the fence passed: their regions may go */
    if (ep->seg_named)
        shm_unlink(ep->seg_name);
    uccl_shm_map_release(ep);
    uccl_list_del(&ep->link);
    free(ep);
}

/* The peer is gone: what it put in our ring before is read by progress
 * (its mapping is ours too); done once the ring is empty. */
static bool shm_ep_drained(uccl_tp_ep_t *base)
{
    shm_ep_t *ep = (shm_ep_t *)base;

    return !ep->connected || uccl_spsc_empty(&ep->rx);
}

/* Most process_vm_readv/writev calls of one progress call. */
#define SHM_CMA_CALLS_MAX 64

static int shm_progress(uccl_tp_t *base)
{
    shm_tp_t *tp = (shm_tp_t *)base;
    shm_cma_budget_t budget = {tp->cfg.progress_bytes, SHM_CMA_CALLS_MAX};
    uccl_list_t *pos;
    int events = tp->stage != NULL ? uccl_stage_progress(tp->stage) : 0;

    uccl_list_for_each(pos, &tp->eps) {
        shm_ep_t *ep = uccl_container_of(pos, shm_ep_t, link);

        if (!ep->connected || uccl_conn_status(ep->base.conn) != UCCL_OK)
            continue;
        events += uccl_shm_rx_progress(ep);
        if (uccl_conn_status(ep->base.conn) == UCCL_OK)
            events += uccl_shm_cma_progress(ep, &budget);
        if (uccl_conn_status(ep->base.conn) == UCCL_OK)
            events += uccl_shm_tx_progress(ep);
    }
    /* the budget ran out: the next call starts with the next endpoint */
    if ((budget.bytes == 0 || budget.calls == 0) && !uccl_list_empty(&tp->eps))
        uccl_list_push_back(&tp->eps, uccl_list_pop_front(&tp->eps));
    return events;
}

const struct uccl_tp_ops uccl_tp_shm_ops = {
    .size = sizeof(struct uccl_tp_ops),
    .name = "shm",
    .priority = 50,
    .caps = UCCL_TP_CAP_HOST_MEM | UCCL_TP_CAP_SAME_HOST | UCCL_TP_CAP_RMA | UCCL_TP_CAP_NOTIFY |
            UCCL_TP_CAP_MEM_REG | UCCL_TP_CAP_RKEY,
    .engine_cap = UCCL_CAP_SHM,
    .rkey_owner = UCCL_TP_KEY_SHM,
    .config_table = &uccl_shm_config_table,
    .open = shm_open_tp,
    .close = shm_close_tp,
    .address = shm_address,
    .reachable = shm_reachable,
    .ep_create = shm_ep_create,
    .ep_pack = shm_ep_pack,
    .ep_connect = shm_ep_connect,
    .ep_destroy = shm_ep_destroy,
    .post_send = uccl_shm_post_send,
    .msg_deliver = uccl_shm_msg_deliver,
    .post_write = uccl_shm_post_rma,
    .post_read = uccl_shm_post_rma,
    .progress = shm_progress,
    .ep_drained = shm_ep_drained,
    .mem_reg = uccl_shm_mem_reg,
    .mem_dereg = uccl_shm_mem_dereg,
    .mem_pack = uccl_shm_mem_pack,
    .remote_ptr = uccl_shm_remote_ptr,
};
