/* Verbs transport instance: configuration, device/port/GID selection (by
 * UCCL_NET_DEVICES, else by topology, else the first active port), the
 * address entry, memory registration, and the ops table. */
#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "topo/topo.h"
#include "uccl_build.h"
#include "verbs.h"
#include "verbs_gdr.h"

#define VERBS_FIELD(name, dflt, doc, field, type) \
    {name, dflt, doc, offsetof(tp_verbs_config_t, field), type}

static const uccl_cfg_field_t verbs_fields[] = {
    VERBS_FIELD("QP_TYPE", "rc",
                "rc or uc; uc carries one-sided writes only (read needs rc), control stays rc",
                qp_type, UCCL_CFG_STRING),
    VERBS_FIELD("NUM_QPS", "2", "data QPs per connection (1..16), chunks striped over them",
                num_qps, UCCL_CFG_INT),
    VERBS_FIELD("CHUNK", "1M", "largest RDMA work request; larger transfers are split",
                chunk, UCCL_CFG_SIZE),
    VERBS_FIELD("EAGER", "4K", "messages up to this size are sent eagerly (copied)", eager,
                UCCL_CFG_SIZE),
    VERBS_FIELD("TX_DEPTH", "256", "send queue depth of each QP", tx_depth, UCCL_CFG_INT),
    VERBS_FIELD("RX_DEPTH", "64",
                "control receive buffers per connection; also receives for immediates per data QP",
                rx_depth, UCCL_CFG_INT),
    VERBS_FIELD("IB_TIMEOUT", "18",
                "RC ACK timeout exponent: 4.096 us * 2^N (18 = 1.07 s); short ones make slow "
                "peers (Soft-RoCE, loaded hosts) retry whole reads",
                ib_timeout, UCCL_CFG_INT),
    VERBS_FIELD("RETRY_CNT", "7",
                "RC retransmissions (0..7) of an unacknowledged packet before the QP fails "
                "(RETRY_EXC: the connection ends PEER_FAILED); a silent peer shows after about "
                "(RETRY_CNT + 1) ACK timeouts, unless UCCL_TIMEOUT_MS ends the wait first",
                retry_cnt, UCCL_CFG_INT),
    VERBS_FIELD("IB_GID_INDEX", "-1", "RoCE GID index (-1 = IPv4-mapped RoCE v2, chosen automatically)",
                gid_index, UCCL_CFG_INT),
    VERBS_FIELD("GDR", "auto", "GPU memory on the NIC: auto (dma-buf, else peermem, else "
                "staging), dmabuf, peermem or off", gdr, UCCL_CFG_STRING),
    VERBS_FIELD("INFLIGHT", "0",
                "data bytes posted and not yet completed per data QP (0 = no bound beyond "
                "TX_DEPTH); a lost packet makes an RC QP resend everything posted after it, "
                "so a bound keeps a loss cheap", inflight, UCCL_CFG_SIZE),
    VERBS_FIELD("STAGE_CHUNK", "1M", "without GPUDirect RDMA, GPU memory a send or write reads "
                "is copied chunk by chunk into NIC-registered pinned buffers of this size and "
                "each chunk is posted while the next one copies", stage_chunk, UCCL_CFG_SIZE),
    VERBS_FIELD("STAGE_DEPTH", "4", "staged chunks a GPU source copies ahead of the NIC",
                stage_depth, UCCL_CFG_INT),
    VERBS_FIELD("RAILS", "2", "RDMA devices (rails) an engine opens at most (1..2): every one "
                "UCCL_NET_DEVICES names, else every one the topology finds equally near; "
                "1 = one device", rails, UCCL_CFG_INT),
    VERBS_FIELD("STRIPE", "1M", "one-sided writes, reads and rendezvous sends from this size on "
                "are striped over every rail of the connection; smaller ones stay on one",
                stripe, UCCL_CFG_SIZE),
    VERBS_FIELD("GDR_SYSROOT", "/sys", "sysfs root where the peer-memory module "
                "(nvidia_peermem...) is looked for; tests point it at a fake tree",
                gdr_sysroot, UCCL_CFG_STRING),
    {NULL, NULL, NULL, 0, 0},
};

/* Renamed under the VERBS_ prefix; the old names work for one release. */
static const uccl_cfg_alias_t verbs_aliases[] = {
    {"IB_TIMEOUT", "IB_TIMEOUT"},
    {"IB_GID_INDEX", "IB_GID_INDEX"},
    {NULL, NULL},
};

const uccl_cfg_table_t uccl_verbs_config_table = {.prefix = "VERBS_",
                                                  .fields = verbs_fields,
                                                  .struct_size = sizeof(tp_verbs_config_t),
                                                  .aliases = verbs_aliases};

static uccl_status_t verbs_check_config(tp_verbs_config_t *cfg, bool *uc)
{
    verbs_gdr_want_t gdr;

    if (strcmp(cfg->qp_type, "rc") != 0 && strcmp(cfg->qp_type, "uc") != 0) {
        uccl_error("UCCL_VERBS_QP_TYPE=%s: expected rc or uc", cfg->qp_type);
        return UCCL_ERR_INVALID_PARAM;
    }
    *uc = strcmp(cfg->qp_type, "uc") == 0;
    if (uccl_verbs_gdr_parse_want(cfg->gdr, &gdr) != UCCL_OK)
        return UCCL_ERR_INVALID_PARAM;
    {
        const uccl_cfg_table_t *t = &uccl_verbs_config_table;
        bool ok = uccl_cfg_in_range(t, "NUM_QPS", cfg->num_qps, 1, VERBS_MAX_QPS);

        ok &= uccl_cfg_in_range(t, "TX_DEPTH", cfg->tx_depth, 8, 1 << 16);
        ok &= uccl_cfg_in_range(t, "RX_DEPTH", cfg->rx_depth, 8, 1 << 16);
        ok &= uccl_cfg_in_range(t, "CHUNK", (long long)cfg->chunk, 4096, 1ll << 30);
        ok &= uccl_cfg_in_range(t, "EAGER", (long long)cfg->eager, 0, 1ll << 20);
        ok &= uccl_cfg_in_range(t, "IB_TIMEOUT", cfg->ib_timeout, 1, 31);
        ok &= uccl_cfg_in_range(t, "RETRY_CNT", cfg->retry_cnt, 0, 7);
        ok &= uccl_cfg_in_range(t, "IB_GID_INDEX", cfg->gid_index, -1, 255);
        ok &= uccl_cfg_in_range(t, "STAGE_CHUNK", (long long)cfg->stage_chunk, 4096, 1ll << 30);
        ok &= uccl_cfg_in_range(t, "STAGE_DEPTH", cfg->stage_depth, 1, 64);
        ok &= uccl_cfg_in_range(t, "RAILS", cfg->rails, 1, VERBS_MAX_RAILS);
        if (!ok)
            return UCCL_ERR_INVALID_PARAM;
    }
    return UCCL_OK;
}

/* ------------------------------------------------------------------ GID choice */

static bool gid_is_usable(const union ibv_gid *gid)
{
    static const uint8_t zero[16];

    if (memcmp(gid->raw, zero, sizeof(zero)) == 0)
        return false;
    return !(gid->raw[0] == 0xfe && (gid->raw[1] & 0xc0) == 0x80); /* fe80::/10 */
}

static bool gid_is_ipv4_mapped(const union ibv_gid *gid)
{
    static const uint8_t prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    return memcmp(gid->raw, prefix, sizeof(prefix)) == 0;
}

/* Rank a GID entry: 3 = IPv4-mapped RoCE v2, 2 = other RoCE v2, 1 = RoCE v1, 0 = unusable. */
static int gid_rank(const struct ibv_gid_entry *e)
{
    if (!gid_is_usable(&e->gid))
        return 0;
    if (e->gid_type == IBV_GID_TYPE_ROCE_V2)
        return gid_is_ipv4_mapped(&e->gid) ? 3 : 2;
    return 1;
}

static uccl_status_t verbs_pick_gid(const tp_verbs_t *v, tp_verbs_rail_t *r, int table_len)
{
    struct ibv_gid_entry e;
    int best = -1, best_rank = 0;

    if (v->cfg.gid_index >= 0) {
        if (ibv_query_gid(r->ctx, r->port, v->cfg.gid_index, &r->gid) != 0 ||
            !gid_is_usable(&r->gid)) {
            uccl_error("%s:%u: UCCL_VERBS_IB_GID_INDEX=%d is empty, link-local or invalid", r->dev_name,
                       r->port, v->cfg.gid_index);
            return UCCL_ERR_INVALID_PARAM;
        }
        r->gid_index = v->cfg.gid_index;
        return UCCL_OK;
    }
    for (int i = 0; i < table_len; i++) {
        if (ibv_query_gid_ex(r->ctx, r->port, (uint32_t)i, &e, 0) != 0)
            continue; /* empty entry */
        if (gid_rank(&e) > best_rank) {
            best_rank = gid_rank(&e);
            best = i;
        }
    }
    if (best < 0) {
        uccl_info("%s:%u: no usable RoCE GID (all empty or link-local)", r->dev_name, r->port);
        return UCCL_ERR_NO_DEVICE;
    }
    r->gid_index = best;
    return ibv_query_gid(r->ctx, r->port, best, &r->gid) == 0 ? UCCL_OK : UCCL_ERR_NO_DEVICE;
}

/* ------------------------------------------------------------------ device choice */

/* Open dev (port 0 = first active port) as the next rail of v;
 * UCCL_ERR_NO_DEVICE when unusable. */
static uccl_status_t verbs_try_device(tp_verbs_t *v, struct ibv_device *dev, int want_port)
{
    tp_verbs_rail_t *r = &v->rails[v->nrails];
    struct ibv_device_attr dattr;
    struct ibv_port_attr pattr;
    uccl_status_t st = UCCL_ERR_NO_DEVICE;

    for (int i = 0; i < v->nrails; i++)
        if (strcmp(v->rails[i].dev_name, ibv_get_device_name(dev)) == 0)
            return UCCL_ERR_NO_DEVICE; /* named twice: one rail */
    memset(r, 0, sizeof(*r));
    r->ctx = ibv_open_device(dev);
    if (r->ctx == NULL) {
        uccl_info("cannot open %s: %s", ibv_get_device_name(dev), strerror(errno));
        return UCCL_ERR_NO_DEVICE;
    }
    snprintf(r->dev_name, sizeof(r->dev_name), "%s", ibv_get_device_name(dev));
    if (ibv_query_device(r->ctx, &dattr) != 0)
        goto err_close;
    for (int p = 1; p <= dattr.phys_port_cnt; p++) {
        if ((want_port && p != want_port) || ibv_query_port(r->ctx, (uint8_t)p, &pattr) != 0 ||
            pattr.state != IBV_PORT_ACTIVE)
            continue;
        r->port = (uint8_t)p;
        r->lid = pattr.lid;
        r->mtu = pattr.active_mtu;
        r->is_roce = pattr.link_layer == IBV_LINK_LAYER_ETHERNET;
        r->max_sge = dattr.max_sge < VERBS_MAX_SGE ? dattr.max_sge : VERBS_MAX_SGE;
        r->max_rd_atomic = dattr.max_qp_rd_atom < 16 ? dattr.max_qp_rd_atom : 16;
        st = r->is_roce ? verbs_pick_gid(v, r, pattr.gid_tbl_len) : UCCL_OK;
        if (st == UCCL_OK || st == UCCL_ERR_INVALID_PARAM)
            break;
    }
    if (st == UCCL_OK && v->nrails > 0 && r->is_roce != v->rails[0].is_roce) {
        uccl_info("%s: link layer differs from rail %s's: not a rail", r->dev_name,
                  v->rails[0].dev_name);
        st = UCCL_ERR_NO_DEVICE;
    }
    if (st == UCCL_OK) {
        v->nrails++;
        return UCCL_OK;
    }
    if (st == UCCL_ERR_NO_DEVICE)
        uccl_info("%s: no ACTIVE port%s", r->dev_name, want_port ? " of the one named" : "");
err_close:
    ibv_close_device(r->ctx);
    r->ctx = NULL;
    return st;
}

static struct ibv_device *verbs_find_device(struct ibv_device **list, int n, const char *name,
                                            size_t name_len)
{
    for (int i = 0; i < n; i++)
        if (strlen(ibv_get_device_name(list[i])) == name_len &&
            strncmp(ibv_get_device_name(list[i]), name, name_len) == 0)
            return list[i];
    return NULL;
}

/* "rxe0, rxe1" into buf: the devices a bad UCCL_NET_DEVICES can be told about. */
static const char *verbs_known_devices(struct ibv_device **list, int n, char *buf, size_t len)
{
    size_t used = 0;

    buf[0] = '\0';
    for (int i = 0; i < n && used < len; i++)
        used += (size_t)snprintf(buf + used, len - used, "%s%s", i ? ", " : "",
                                 ibv_get_device_name(list[i]));
    return buf;
}

/* The nics that open with an ACTIVE port, in order, as rails (up to
 * UCCL_VERBS_RAILS); *known (may be NULL) says whether any of them is an
 * RDMA device here. */
static uccl_status_t verbs_open_rails(tp_verbs_t *v, struct ibv_device **list, int n,
                                      const uccl_tp_nics_t *nics, bool *known)
{
    for (int i = 0; i < nics->n && v->nrails < v->cfg.rails; i++) {
        struct ibv_device *dev = verbs_find_device(list, n, nics->nic[i].name,
                                                   strlen(nics->nic[i].name));
        if (dev != NULL && known != NULL)
            *known = true;
        if (dev != NULL)
            verbs_try_device(v, dev, nics->nic[i].port);
    }
    return v->nrails > 0 ? UCCL_OK : UCCL_ERR_NO_DEVICE;
}

/* UCCL_NET_DEVICES: "mlx5_0:1,rxe0"; every entry that works is a rail (up
 * to UCCL_VERBS_RAILS), in the order given. Names that are no RDMA device
 * here are an error when none of them works. */
static uccl_status_t verbs_open_named(tp_verbs_t *v, struct ibv_device **list, int n,
                                      const uccl_tp_nics_t *nics, const char *names)
{
    bool any_known = false;
    char known[256];

    if (verbs_open_rails(v, list, n, nics, &any_known) == UCCL_OK) {
        uccl_info("verbs: %s port %u%s, as UCCL_NET_DEVICES=%s asks", v->rails[0].dev_name,
                  v->rails[0].port, v->nrails > 1 ? " and more rails" : "", names);
        return UCCL_OK;
    }
    verbs_known_devices(list, n, known, sizeof(known));
    if (!any_known) {
        uccl_error("UCCL_NET_DEVICES=%s names no RDMA device of this host; known: %s", names, known);
        return UCCL_ERR_NOT_FOUND;
    }
    uccl_error("UCCL_NET_DEVICES=%s: no named device has an ACTIVE port (devices: %s)", names, known);
    return UCCL_ERR_NO_DEVICE;
}

/* The devices used when none is named: the engine's choice by topology
 * (every NIC equally near the engine's GPU, or this process's NUMA node for
 * host memory, each a rail), else the first device with an ACTIVE port. */
static uccl_status_t verbs_open_default(tp_verbs_t *v, struct ibv_device **list, int n,
                                        const uccl_tp_nics_t *nics, uccl_status_t nics_status)
{
    if (nics_status != UCCL_OK) {
        uccl_info("verbs: %s: taking the first device with an ACTIVE port", nics->why);
    } else if (verbs_open_rails(v, list, n, nics, NULL) == UCCL_OK) {
        uccl_info("verbs: %s port %u%s chosen by topology: %s", v->rails[0].dev_name,
                  v->rails[0].port, v->nrails > 1 ? " and more rails" : "", nics->why);
        return UCCL_OK;
    } else {
        uccl_info("verbs: topology chose nothing usable (%s): taking the first device with an "
                  "ACTIVE port", nics->why);
    }
    for (int i = 0; i < n; i++) {
        if (verbs_try_device(v, list[i], 0) == UCCL_OK) {
            uccl_info("verbs: %s port %u, the first device with an ACTIVE port",
                      v->rails[0].dev_name, v->rails[0].port);
            return UCCL_OK;
        }
    }
    return UCCL_ERR_NO_DEVICE;
}

static uccl_status_t verbs_open_device(tp_verbs_t *v, const uccl_tp_open_params_t *params)
{
    uccl_tp_nics_t nics;
    int n = 0;
    struct ibv_device **list = ibv_get_device_list(&n);
    uccl_status_t st;

    if (list == NULL || n == 0) {
        uccl_info("no RDMA device on this host");
        if (list != NULL)
            ibv_free_device_list(list);
        return UCCL_ERR_NO_DEVICE;
    }
    st = uccl_tp_nics(params, UCCL_TOPO_NIC_VERBS, &nics);
    if (nics.configured && st == UCCL_OK)
        st = verbs_open_named(v, list, n, &nics, params->net_devices);
    else if (nics.configured)
        uccl_error("verbs: %s", nics.why);
    else
        st = verbs_open_default(v, list, n, &nics, st);
    ibv_free_device_list(list);
    return st;
}

/* ------------------------------------------------------------------ open, close */

static void verbs_close_rails(tp_verbs_t *v)
{
    for (int i = 0; i < v->nrails; i++) {
        if (v->rails[i].pd != NULL)
            ibv_dealloc_pd(v->rails[i].pd);
        ibv_close_device(v->rails[i].ctx);
    }
    v->nrails = 0;
}

/* A protection domain on every rail. */
static uccl_status_t verbs_open_pds(tp_verbs_t *v)
{
    for (int i = 0; i < v->nrails; i++) {
        tp_verbs_rail_t *r = &v->rails[i];

        r->pd = ibv_alloc_pd(r->ctx);
        if (r->pd == NULL) {
            uccl_error("%s: ibv_alloc_pd: %s", r->dev_name, strerror(errno));
            return UCCL_ERR_TRANSPORT;
        }
    }
    for (int i = 1; i < v->nrails; i++) { /* QPs of every rail share one shape */
        if (v->rails[i].max_sge < v->max_sge)
            v->max_sge = v->rails[i].max_sge;
        if (v->rails[i].max_rd_atomic < v->max_rd_atomic)
            v->max_rd_atomic = v->rails[i].max_rd_atomic;
    }
    return UCCL_OK;
}

/* One info line per rail (uccl_info and UCCL_LOG_LEVEL=info show them). */
static void verbs_log_rails(const tp_verbs_t *v)
{
    for (int i = 0; i < v->nrails; i++) {
        const tp_verbs_rail_t *r = &v->rails[i];
        char gid[INET6_ADDRSTRLEN];

        if (!r->is_roce || inet_ntop(AF_INET6, r->gid.raw, gid, sizeof(gid)) == NULL)
            strcpy(gid, "-");
        uccl_info("verbs: %s port %u, %s, gid index %d (%s), mtu %d, %s QPs x %d, rail %d of %d",
                  r->dev_name, r->port, r->is_roce ? "RoCE" : "IB", r->is_roce ? r->gid_index : -1,
                  gid, 128 << r->mtu, v->uc ? "UC" : "RC", v->cfg.num_qps, i, v->nrails);
    }
}

static uccl_status_t tp_verbs_open(const uccl_tp_open_params_t *params, uccl_tp_t **out)
{
    tp_verbs_t *v = calloc(1, sizeof(*v));
    uccl_status_t st;

    if (v == NULL)
        return UCCL_ERR_NO_MEMORY;
    st = uccl_cfg_parse(&uccl_verbs_config_table, &v->cfg);
    if (st == UCCL_OK)
        st = verbs_check_config(&v->cfg, &v->uc);
    if (st != UCCL_OK)
        goto err_free;
    st = verbs_open_device(v, params);
    if (st != UCCL_OK)
        goto err_close;
    st = verbs_open_pds(v);
    if (st != UCCL_OK)
        goto err_close;
    v->mr_access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
#if HAVE_DECL_IBV_ACCESS_RELAXED_ORDERING
    v->mr_access |= IBV_ACCESS_RELAXED_ORDERING; /* optional: dropped where unsupported */
#endif
    uccl_list_init(&v->eps);
    st = uccl_verbs_gpu_open(v, params);
    if (st != UCCL_OK)
        goto err_close;
    verbs_log_rails(v);
    *out = &v->base;
    return UCCL_OK;

err_close:
    verbs_close_rails(v);
err_free:
    free(v);
    return st;
}

static void tp_verbs_close(uccl_tp_t *tp)
{
    tp_verbs_t *v = (tp_verbs_t *)tp;

    uccl_verbs_gpu_close(v);
    verbs_close_rails(v);
    free(v);
}

/* ------------------------------------------------------------------ address */

/* Address entry: version(1) port(1) mtu(1) roce(1) lid(2) gid(16) rails(1),
 * rail 0's; a connection uses the first min(ours, peer's) rails of each side
 * (uccl_verbs_peer_rails), rail i toward the peer's rail i. */
#define VERBS_ADDR_LEN 23

static uccl_status_t tp_verbs_address(uccl_tp_t *tp, void *buf, size_t *len)
{
    tp_verbs_t *v = (tp_verbs_t *)tp;
    uint8_t *p = buf;

    if (*len < VERBS_ADDR_LEN) {
        *len = VERBS_ADDR_LEN;
        return UCCL_ERR_BUFFER_TOO_SMALL;
    }
    p[0] = VERBS_WIRE_VERSION;
    p[1] = v->port;
    p[2] = (uint8_t)v->mtu;
    p[3] = v->is_roce;
    uccl_put_u16(p + 4, v->lid);
    memcpy(p + 6, v->gid.raw, 16);
    p[22] = (uint8_t)v->nrails;
    *len = VERBS_ADDR_LEN;
    return UCCL_OK;
}

/* Same link layer on both sides, and a well-formed entry. */
static bool tp_verbs_reachable(uccl_tp_t *tp, const uccl_tp_peer_t *peer)
{
    const tp_verbs_t *v = (const tp_verbs_t *)tp;
    const uint8_t *p = peer->addr;

    if (p == NULL || peer->addr_len < VERBS_ADDR_LEN || p[0] != VERBS_WIRE_VERSION)
        return false;
    return p[3] == v->is_roce && p[22] >= 1;
}

int uccl_verbs_peer_rails(const tp_verbs_t *v, const uccl_tp_peer_t *peer)
{
    const uint8_t *p = peer->addr;
    int n = p != NULL && peer->addr_len >= VERBS_ADDR_LEN ? p[22] : 1;

    n = n < v->nrails ? n : v->nrails;
    return n < 1 ? 1 : n;
}

/* ------------------------------------------------------------------ memory */

/* One rail's registration of host memory; NULL after logging why. */
static struct ibv_mr *verbs_reg_host(tp_verbs_t *v, int rail, void *addr, size_t len,
                                     uccl_status_t *st)
{
    struct ibv_mr *mr = ibv_reg_mr(v->rails[rail].pd, addr, len, v->mr_access);
    const char *dev = v->rails[rail].dev_name;
    int err = errno;
    struct rlimit rl;

    if (mr != NULL)
        return mr;
    if ((err == ENOMEM || err == EAGAIN || err == EPERM) && getrlimit(RLIMIT_MEMLOCK, &rl) == 0 &&
        rl.rlim_cur != RLIM_INFINITY) {
        /* the kernel pins registered pages, up to RLIMIT_MEMLOCK without CAP_IPC_LOCK */
        uccl_error("%s: ibv_reg_mr(%p, %zu): %s: registered memory is pinned, and "
                   "RLIMIT_MEMLOCK (ulimit -l) allows %llu KiB in all; raise it or register less",
                   dev, addr, len, strerror(err), (unsigned long long)rl.rlim_cur / 1024);
        *st = UCCL_ERR_NO_MEMORY;
        return NULL;
    }
    uccl_error("%s: ibv_reg_mr(%p, %zu): %s", dev, addr, len, strerror(err));
    *st = err == ENOMEM ? UCCL_ERR_NO_MEMORY : UCCL_ERR_TRANSPORT;
    return NULL;
}

static void tp_verbs_mem_dereg(uccl_tp_t *tp, uccl_tp_memh_t *memh)
{
    (void)tp;
    for (int r = 0; r < VERBS_MAX_RAILS; r++) {
        struct ibv_mr *mr = tp_verbs_memh_mr(memh, r);

        if (mr != NULL && ibv_dereg_mr(mr) != 0)
            uccl_warn("ibv_dereg_mr: %s", strerror(errno));
    }
    free(memh);
}

/* Host memory is registered on every rail. */
static uccl_status_t tp_verbs_mem_reg(uccl_tp_t *tp, void *addr, size_t len, uccl_mem_type_t type,
                                      int device, uccl_tp_memh_t **out)
{
    tp_verbs_t *v = (tp_verbs_t *)tp;
    uccl_status_t st = UCCL_OK;
    uccl_tp_memh_t *memh;

    if (type != UCCL_MEM_HOST) /* GPUDirect RDMA, else staged (verbs_stage.c) */
        return uccl_verbs_gpu_mem_reg(v, addr, len, type, device, out);
    memh = calloc(1, sizeof(*memh));
    if (memh == NULL)
        return UCCL_ERR_NO_MEMORY;
    memh->mr = verbs_reg_host(v, 0, addr, len, &st);
    for (int r = 1; r < v->nrails && st == UCCL_OK; r++)
        memh->rail_mr[r - 1] = verbs_reg_host(v, r, addr, len, &st);
    if (st != UCCL_OK) {
        tp_verbs_mem_dereg(tp, memh);
        return st;
    }
    *out = memh;
    return UCCL_OK;
}

/* A staged GPU region has no key: peers cannot reach it one-sided. Else
 * one rkey per rail it is registered on, rail 0 first. */
static size_t tp_verbs_mem_pack(uccl_tp_t *tp, uccl_tp_memh_t *memh, uint8_t rkey[UCCL_TP_RKEY_MAX])
{
    size_t n = 0;

    (void)tp;
    if (memh == NULL)
        return 0;
    for (int r = 0; r < VERBS_MAX_RAILS && tp_verbs_memh_mr(memh, r) != NULL; r++, n += 4)
        uccl_put_u32(rkey + n, tp_verbs_memh_mr(memh, r)->rkey);
    return n;
}

const struct uccl_tp_ops uccl_tp_verbs_ops = {
    .size = sizeof(struct uccl_tp_ops),
    .name = "verbs",
    .priority = 30,
    .caps = UCCL_TP_CAP_HOST_MEM | UCCL_TP_CAP_RMA | UCCL_TP_CAP_NOTIFY | UCCL_TP_CAP_MEM_REG |
            UCCL_TP_CAP_RKEY,
    .engine_cap = UCCL_CAP_VERBS,
    .rkey_owner = UCCL_TP_KEY_VERBS,
    .config_table = &uccl_verbs_config_table,
    .open = tp_verbs_open,
    .close = tp_verbs_close,
    .address = tp_verbs_address,
    .reachable = tp_verbs_reachable,
    .ep_create = uccl_verbs_ep_create,
    .ep_pack = uccl_verbs_ep_pack,
    .ep_connect = uccl_verbs_ep_connect,
    .ep_destroy = uccl_verbs_ep_destroy,
    .mem_reg = tp_verbs_mem_reg,
    .mem_dereg = tp_verbs_mem_dereg,
    .mem_pack = tp_verbs_mem_pack,
    .post_send = uccl_verbs_post_send,
    .msg_deliver = uccl_verbs_msg_deliver,
    .post_write = uccl_verbs_post_write,
    .post_read = uccl_verbs_post_read,
    .progress = uccl_verbs_progress,
};
