/* libfabric transport: everything it asks of the core through the SPI
 * (open parameters, the NIC choice, connection state, a request's region
 * handles) and the ops table, kept here so that the transport's other files
 * see the core only through these few calls. */
#include <stdlib.h>
#include <string.h>

#include "ofi.h"
#include "topo/topo.h"

/* ------------------------------------------------------------------ accessors */

uccl_tp_memh_t *uccl_ofi_iov_memh(const tp_ofi_t *tp, const uccl_req_t *req, int i)
{
    const uccl_region_t *region = req->iov[i].region;

    return region != NULL ? uccl_region_memh(region, &tp->base) : NULL;
}

bool uccl_ofi_conn_ok(const tp_ofi_ep_t *ep)
{
    return uccl_conn_status(ep->base.conn) == UCCL_OK;
}

uccl_status_t uccl_ofi_conn_state(const tp_ofi_ep_t *ep)
{
    return uccl_conn_status(ep->base.conn);
}

void uccl_ofi_conn_fail(tp_ofi_ep_t *ep, uccl_status_t st)
{
    uccl_conn_fail(ep->base.conn, st);
}

/* ------------------------------------------------------------------ domain choice */

static void ofi_info_busid(const struct fi_info *info, char *buf, size_t len)
{
    const struct fi_pci_attr *pci;

    buf[0] = '\0';
    if (info->nic == NULL || info->nic->bus_attr == NULL ||
        info->nic->bus_attr->bus_type != FI_BUS_PCI)
        return;
    pci = &info->nic->bus_attr->attr.pci;
    snprintf(buf, len, "%04x:%02x:%02x.%x", pci->domain_id, pci->bus_id, pci->device_id,
             pci->function_id);
}

/* The engine's NIC choice (configured devices, else the topology's nearest
 * to its GPU or NUMA node): the first candidate whose domain is one of those
 * NICs, by name, network interface or PCI address; NULL = no opinion. The
 * one place the transport asks for a NIC. */
static const struct fi_info *ofi_pick_by_nics(const uccl_tp_open_params_t *params,
                                              const struct fi_info *const *cand, int n)
{
    char ibus[UCCL_TP_NIC_BUSID_MAX];
    uccl_tp_nics_t nics;

    if (uccl_tp_nics(params, UCCL_TOPO_NIC_RDMA | UCCL_TOPO_NIC_NET, &nics) != UCCL_OK)
        return NULL;
    for (int k = 0; k < nics.n; k++) {
        for (int i = 0; i < n; i++) {
            const char *dom = cand[i]->domain_attr->name;

            ofi_info_busid(cand[i], ibus, sizeof(ibus));
            if (strcmp(dom, nics.nic[k].name) == 0 ||
                (nics.nic[k].netdev[0] && strcmp(dom, nics.nic[k].netdev) == 0) ||
                (nics.nic[k].busid[0] && strcmp(ibus, nics.nic[k].busid) == 0)) {
                uccl_info("ofi: domain %s: %s", dom, nics.why);
                return cand[i];
            }
        }
    }
    if (nics.configured)
        uccl_warn("ofi: no %s domain is one of the configured devices (%s); taking %s",
                  cand[0]->fabric_attr->prov_name, params->net_devices,
                  cand[0]->domain_attr->name);
    return NULL;
}

/* The best candidate: the named provider or the best ranked one, on the
 * domain of the engine's NIC choice, else the first. */
static uccl_status_t ofi_pick(tp_ofi_t *tp, const uccl_tp_open_params_t *params,
                              struct fi_info *list, const struct fi_info **out)
{
    const struct fi_info *cand[64];
    char why[256] = "";
    int best = -1, n = 0;

    for (struct fi_info *i = list; i != NULL; i = i->next) {
        char w[256];
        int rank = uccl_ofi_quirk(i->fabric_attr->prov_name)->rank;

        if (uccl_ofi_check_info(i, w, sizeof(w)) != UCCL_OK) {
            if (why[0] == '\0')
                snprintf(why, sizeof(why), "%s", w);
            continue;
        }
        if (rank > best) {
            best = rank;
            n = 0;
        }
        if (rank == best && n < 64)
            cand[n++] = i;
    }
    if (n == 0) {
        uccl_error("ofi: no provider usable: %s", why[0] ? why : "none offers what we need");
        return tp->cfg.provider[0] ? UCCL_ERR_UNSUPPORTED : UCCL_ERR_NO_DEVICE;
    }
    if (!tp->cfg.provider[0] && (uccl_ofi_quirk(cand[0]->fabric_attr->prov_name)->flags &
                                 OFI_QUIRK_SOFTWARE)) {
        uccl_info("ofi: only software providers here (best: %s); the tcp and shm transports "
                  "serve these paths (set UCCL_OFI_PROVIDER to use one through libfabric)",
                  cand[0]->fabric_attr->prov_name);
        return UCCL_ERR_NO_DEVICE;
    }
    *out = n > 1 || params->net_devices[0] ? ofi_pick_by_nics(params, cand, n) : NULL;
    if (*out == NULL)
        *out = cand[0];
    return UCCL_OK;
}

/* ------------------------------------------------------------------ open, close */

static uccl_status_t ofi_check_config(tp_ofi_config_t *cfg)
{
    const uccl_cfg_table_t *t = &uccl_ofi_config_table;
    bool ok = uccl_cfg_in_range(t, "TX_DEPTH", cfg->tx_depth, 4, 4096);

    if (cfg->rx_depth != 0) /* 0: the quirk table's */
        ok &= uccl_cfg_in_range(t, "RX_DEPTH", cfg->rx_depth, 4, 4096);
    ok &= uccl_cfg_in_range(t, "CHUNK", (long long)cfg->chunk, 4096, 1ll << 30);
    ok &= uccl_cfg_in_range(t, "EAGER", (long long)cfg->eager, 0, 1ll << 20);
    ok &= uccl_cfg_in_range(t, "MAX_IOV", cfg->max_iov, 0, OFI_IOV_MAX);
    ok &= uccl_cfg_in_range(t, "PULL", cfg->pull, 0, 1);
    ok &= uccl_cfg_in_range(t, "TAGGED", cfg->tagged, -1, 1);
    ok &= uccl_cfg_in_range(t, "DIRECT", cfg->direct, -1, 1);
    ok &= uccl_cfg_in_range(t, "DIRECT_MAX", (long long)cfg->direct_max, 16384, 1ll << 30);
    ok &= uccl_cfg_in_range(t, "DIRECT_WAIT", cfg->direct_wait_us, 0, 1000000);
    ok &= uccl_cfg_in_range(t, "DIRECT_DEPTH", cfg->direct_depth, 0, OFI_DDEPTH_MAX);
    ok &= uccl_cfg_in_range(t, "STAGE_CHUNK", (long long)cfg->stage_chunk, 4096, 1ll << 30);
    ok &= uccl_cfg_in_range(t, "STAGE_DEPTH", cfg->stage_depth, 1, UCCL_RNDV_MAX_SLOTS);
    if (strcmp(cfg->imm, "auto") != 0 && strcmp(cfg->imm, "data") != 0 &&
        strcmp(cfg->imm, "msg") != 0) {
        uccl_error("UCCL_OFI_IMM=%s: expected auto, data or msg", cfg->imm);
        ok = false;
    }
    if (strcmp(cfg->pack_below, "auto") != 0) { /* checked here, before any provider is sought */
        size_t v;
        if (uccl_cfg_parse_value(UCCL_CFG_SIZE, cfg->pack_below, &v) != UCCL_OK) {
            uccl_error("UCCL_OFI_PACK_BELOW=%s: a size (0 = never pack) or auto", cfg->pack_below);
            ok = false;
        }
    }
    if (!ok)
        return UCCL_ERR_INVALID_PARAM;
    return UCCL_OK;
}

static void tp_ofi_close(uccl_tp_t *base)
{
    tp_ofi_t *tp = (tp_ofi_t *)base;

    uccl_debug("ofi (%s): progress calls %llu, %llu of them found no completion", tp->prov,
               (unsigned long long)tp->polls, (unsigned long long)tp->polls_empty);
    if (tp->direct_sent + tp->direct_placed + tp->direct_copied > 0)
        uccl_debug("ofi (%s): direct sends %llu (hinted %llu); received %llu in place, %llu "
                   "copied; passes over the direct receives %llu",
                   tp->prov, (unsigned long long)tp->direct_sent,
                   (unsigned long long)tp->direct_hints, (unsigned long long)tp->direct_placed,
                   (unsigned long long)tp->direct_copied, (unsigned long long)tp->direct_passes);
    uccl_ofi_fabric_close(tp); /* staging too (uccl_ofi_gpu_close) */
    uccl_ofi_op_cache_free(tp);
    uccl_idmap_fini(&tp->ep_ids);
    free(tp);
}

static uccl_status_t tp_ofi_open(const uccl_tp_open_params_t *params, uccl_tp_t **out)
{
    tp_ofi_t *tp = calloc(1, sizeof(*tp));
    struct fi_info *list = NULL;
    const struct fi_info *info = NULL;
    uccl_status_t st;

    if (tp == NULL)
        return UCCL_ERR_NO_MEMORY;
    uccl_list_init(&tp->eps);
    uccl_list_init(&tp->zombies);
    uccl_list_init(&tp->peers);
    uccl_list_init(&tp->bounce_free);
    uccl_list_init(&tp->op_free);
    tp->host_id = params->host_id;
    tp->timeout_ms = params->timeout_ms;
    tp->ep_id_salt = (uint32_t)uccl_random_u64() | 0x80000000u;
    uccl_idmap_init(&tp->ep_ids, OFI_EP_ID_BITS, OFI_EP_ID_INDEX_BITS);
    st = uccl_cfg_parse(&uccl_ofi_config_table, &tp->cfg);
    if (st == UCCL_OK)
        st = ofi_check_config(&tp->cfg);
    if (st == UCCL_OK)
        st = uccl_ofi_getinfo(tp, &list);
    if (st == UCCL_OK)
        st = ofi_pick(tp, params, list, &info);
    if (st == UCCL_OK)
        st = uccl_ofi_fabric_open(tp, info);
    if (st == UCCL_OK)
        st = uccl_ofi_pack_setup(tp);
    fi_freeinfo(list);
    if (st != UCCL_OK) {
        tp_ofi_close(&tp->base);
        return st;
    }
    uccl_ofi_gpu_open(tp, params);
    if (tp->cfg.max_iov == 0)
        tp->cfg.max_iov = (int)(tp->iov_limit < OFI_IOV_MAX ? tp->iov_limit : OFI_IOV_MAX);
    if (tp->cfg.max_iov < 1)
        tp->cfg.max_iov = 1;
    if (tp->cfg.chunk > tp->max_msg)
        tp->cfg.chunk = tp->max_msg;
    tp->pull = tp->cfg.pull != 0;
    tp->tmsg = !tp->pull && (tp->cfg.tagged == 1 ||
                             (tp->cfg.tagged < 0 && (tp->quirk->flags & OFI_QUIRK_TAGGED)));
    if ((tp->cfg.direct == 1 || (tp->cfg.direct < 0 && (tp->quirk->flags & OFI_QUIRK_DIRECT))) &&
        tp->info->domain_attr->cq_data_size >= 8)
        tp->direct_max = tp->cfg.direct_max < tp->max_msg ? tp->cfg.direct_max : tp->max_msg;
    tp->direct_depth = tp->cfg.direct_depth > 0 ? tp->cfg.direct_depth : tp->quirk->direct_depth;
    tp->exact_tags = (tp->quirk->flags & OFI_QUIRK_EXACT_TAGS) != 0;
    tp->direct_min = tp->exact_tags ? tp->info->tx_attr->inject_size : 0;
    if (tp->direct_max == 0 && tp->cfg.direct == 1)
        uccl_info("ofi (%s): UCCL_OFI_DIRECT=1 needs 8 bytes of remote CQ data (the provider "
                  "has %zu): direct sends off", tp->prov, tp->info->domain_attr->cq_data_size);
    uccl_info("ofi: provider %s, fabric %s, domain %s, mr_mode 0x%llx (%s addressing), "
              "iov_limit %zu, key size %zu, immediates as %s, writes %s, packing below %zu bytes, "
              "%s rendezvous, direct sends above %zu up to %zu bytes (%d ahead)", tp->prov,
              tp->info->fabric_attr->name, tp->info->domain_attr->name,
              (unsigned long long)tp->mr_mode,
              (tp->mr_mode & FI_MR_VIRT_ADDR) ? "virtual" : "offset", tp->iov_limit, tp->key_size,
              tp->imm_msg ? "messages" : "CQ data", tp->rma_ordered ? "ordered" : "fenced",
              tp->pack_below, tp->pull ? "pull" : tp->tmsg ? "tagged" : "push",
              tp->direct_min > tp->cfg.eager ? tp->direct_min : tp->cfg.eager, tp->direct_max,
              tp->direct_depth);
    *out = &tp->base;
    return UCCL_OK;
}

/* ------------------------------------------------------------------ address */

/* Address entry: version(1) addr format(1) provider length(1) name length(1)
 * provider name, endpoint name (parsed in ofi_ep.c and below). */
static uccl_status_t tp_ofi_address(uccl_tp_t *base, void *buf, size_t *len)
{
    tp_ofi_t *tp = (tp_ofi_t *)base;
    size_t plen = strlen(tp->prov), need = 4 + plen + tp->name_len;
    uint8_t *p = buf;

    if (need > 255) {
        uccl_error("ofi: endpoint name of %zu bytes does not fit the address entry", tp->name_len);
        return UCCL_ERR_UNSUPPORTED;
    }
    if (*len < need) {
        *len = need;
        return UCCL_ERR_BUFFER_TOO_SMALL;
    }
    p[0] = OFI_WIRE_VERSION;
    p[1] = (uint8_t)tp->addr_format;
    p[2] = (uint8_t)plen;
    p[3] = (uint8_t)tp->name_len;
    memcpy(p + 4, tp->prov, plen);
    memcpy(p + 4 + plen, tp->name, tp->name_len);
    *len = need;
    return UCCL_OK;
}

/* Same provider and address format; shm only on this host. */
static bool tp_ofi_reachable(uccl_tp_t *base, const uccl_tp_peer_t *peer)
{
    const tp_ofi_t *tp = (const tp_ofi_t *)base;
    const uint8_t *p = peer->addr;
    size_t plen = strlen(tp->prov);

    if (p == NULL || peer->addr_len < 4 || p[0] != OFI_WIRE_VERSION ||
        peer->addr_len != 4 + (size_t)p[2] + p[3])
        return false;
    if (p[1] != (uint8_t)tp->addr_format || p[2] != plen || memcmp(p + 4, tp->prov, plen) != 0)
        return false;
    return !(tp->quirk->flags & OFI_QUIRK_SAME_HOST) || peer->host_id == tp->host_id;
}

const struct uccl_tp_ops uccl_tp_ofi_ops = {
    .size = sizeof(struct uccl_tp_ops),
    .name = "ofi",
    .priority = 20,
    .caps = UCCL_TP_CAP_HOST_MEM | UCCL_TP_CAP_RMA | UCCL_TP_CAP_NOTIFY | UCCL_TP_CAP_MEM_REG |
            UCCL_TP_CAP_RKEY | UCCL_TP_CAP_RSEG,
    .engine_cap = UCCL_CAP_OFI,
    .rkey_owner = UCCL_TP_KEY_OFI,
    .config_table = &uccl_ofi_config_table,
    .open = tp_ofi_open,
    .close = tp_ofi_close,
    .address = tp_ofi_address,
    .reachable = tp_ofi_reachable,
    .ep_create = uccl_ofi_ep_create,
    .ep_pack = uccl_ofi_ep_pack,
    .ep_connect = uccl_ofi_ep_connect,
    .ep_destroy = uccl_ofi_ep_destroy,
    .mem_reg = uccl_ofi_mem_reg,
    .mem_dereg = uccl_ofi_mem_dereg,
    .mem_pack = uccl_ofi_mem_pack,
    .post_send = uccl_ofi_post_send,
    .msg_deliver = uccl_ofi_msg_deliver,
    .post_write = uccl_ofi_post_write,
    .post_read = uccl_ofi_post_read,
    .progress = uccl_ofi_progress,
};
