/* libfabric transport: everything that reads the core's objects (engine
 * settings and topology, connection state, a request's region handles) and
 * the ops table, kept here so that the transport's other files see the core
 * only through these few calls. */
#include <stdlib.h>
#include <string.h>

#include "gpu/gpu.h"
#include "ofi.h"
#include "topo/topo.h"

/* ------------------------------------------------------------------ accessors */

uccl_tp_memh_t *uccl_ofi_iov_memh(const tp_ofi_t *tp, const uccl_req_t *req, int i)
{
    const uccl_region_t *region = req->iov[i].region;

    return region != NULL ? region->memh[tp->base.index] : NULL;
}

bool uccl_ofi_conn_ok(const tp_ofi_ep_t *ep)
{
    return ep->base.conn->state == UCCL_OK;
}

uccl_status_t uccl_ofi_conn_state(const tp_ofi_ep_t *ep)
{
    return ep->base.conn->state;
}

void uccl_ofi_conn_fail(tp_ofi_ep_t *ep, uccl_status_t st)
{
    uccl_conn_fail(ep->base.conn, st);
}

/* ------------------------------------------------------------------ domain choice */

static bool ofi_name_in(const char *name, const char *list)
{
    size_t n = strlen(name);

    for (const char *p = list; *p;) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        const char *colon = memchr(p, ':', len);

        if (colon != NULL)
            len = (size_t)(colon - p);
        if (len == n && strncmp(p, name, n) == 0)
            return true;
        p += (end ? (size_t)(end - p) + 1 : strlen(p));
    }
    return false;
}

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

/* The topology's NIC for the engine's GPU (or this process's NUMA node):
 * the candidate whose domain is that NIC (by name, its network interface, or
 * PCI address), or NULL. The one place the transport asks the topology. */
static const struct fi_info *ofi_pick_by_topo(const uccl_engine_t *engine,
                                              const struct fi_info *const *cand, int n)
{
    char busid[UCCL_TOPO_BUSID_MAX], ibus[UCCL_TOPO_BUSID_MAX];
    uccl_topo_query_t query = {.numa_node = -1,
                               .kinds = UCCL_TOPO_NIC_RDMA | UCCL_TOPO_NIC_NET};
    const struct fi_info *found = NULL;
    uccl_topo_choice_t choice;
    uccl_topo_t *topo;

    if (n < 2 || uccl_engine_topo_load(engine, &topo) != UCCL_OK)
        return NULL;
    if (engine->gpu_index >= 0 &&
        uccl_gpu_pci_bus_id(engine->gpu_index, busid, sizeof(busid)) == UCCL_OK)
        query.gpu_busid = busid;
    if (uccl_topo_select(topo, &query, &choice) == UCCL_OK) {
        const uccl_topo_nic_t *nic = choice.nics[0].nic;

        for (int i = 0; i < n && found == NULL; i++) {
            const char *dom = cand[i]->domain_attr->name;
            ofi_info_busid(cand[i], ibus, sizeof(ibus));
            if (strcmp(dom, nic->name) == 0 || (nic->netdev[0] && strcmp(dom, nic->netdev) == 0) ||
                (nic->busid[0] && strcmp(ibus, nic->busid) == 0))
                found = cand[i];
        }
        if (found != NULL)
            uccl_info("ofi: domain %s chosen by topology: %s", found->domain_attr->name,
                      choice.why);
    }
    uccl_topo_free(topo);
    return found;
}

/* The best candidate: the named provider or the best ranked one, a domain
 * UCCL_NET_DEVICES names, else the topology's, else the first. */
static uccl_status_t ofi_pick(tp_ofi_t *tp, const uccl_engine_t *engine, struct fi_info *list,
                              const struct fi_info **out)
{
    const struct fi_info *cand[64];
    const char *devices = engine->cfg.net_devices;
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
    *out = NULL;
    for (int i = 0; i < n && devices[0] && *out == NULL; i++)
        if (ofi_name_in(cand[i]->domain_attr->name, devices))
            *out = cand[i];
    if (*out == NULL)
        *out = ofi_pick_by_topo(engine, cand, n);
    if (*out == NULL)
        *out = cand[0];
    return UCCL_OK;
}

/* ------------------------------------------------------------------ open, close */

static uccl_status_t ofi_check_config(tp_ofi_config_t *cfg)
{
    if (cfg->tx_depth < 4 || cfg->tx_depth > 4096 || cfg->rx_depth < 4 || cfg->rx_depth > 4096 ||
        cfg->chunk < 4096 || cfg->chunk > (1u << 30) || cfg->eager > (1u << 20) ||
        cfg->max_iov < 0 || cfg->max_iov > OFI_IOV_MAX) {
        uccl_error("ofi settings out of range: TX/RX_DEPTH 4..4096, CHUNK 4K..1G, EAGER <= 1M, "
                   "MAX_IOV 0..%d", OFI_IOV_MAX);
        return UCCL_ERR_INVALID_PARAM;
    }
    return UCCL_OK;
}

static void tp_ofi_close(uccl_tp_t *base)
{
    tp_ofi_t *tp = (tp_ofi_t *)base;

    uccl_ofi_fabric_close(tp);
    free(tp);
}

static uccl_status_t tp_ofi_open(uccl_engine_t *engine, uccl_tp_t **out)
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
    tp->host_id = engine->host_id;
    tp->next_ep_id = (uint32_t)uccl_random_u64() & 0xffffff;
    st = uccl_cfg_parse(&uccl_ofi_config_table, &tp->cfg);
    if (st == UCCL_OK)
        st = ofi_check_config(&tp->cfg);
    if (st == UCCL_OK)
        st = uccl_ofi_getinfo(tp, &list);
    if (st == UCCL_OK)
        st = ofi_pick(tp, engine, list, &info);
    if (st == UCCL_OK)
        st = uccl_ofi_fabric_open(tp, info);
    fi_freeinfo(list);
    if (st != UCCL_OK) {
        tp_ofi_close(&tp->base);
        return st;
    }
    if (tp->cfg.max_iov == 0)
        tp->cfg.max_iov = (int)(tp->iov_limit < OFI_IOV_MAX ? tp->iov_limit : OFI_IOV_MAX);
    if (tp->cfg.max_iov < 1)
        tp->cfg.max_iov = 1;
    if (tp->cfg.chunk > tp->max_msg)
        tp->cfg.chunk = tp->max_msg;
    uccl_info("ofi: provider %s, fabric %s, domain %s, mr_mode 0x%llx (%s addressing), "
              "iov_limit %zu, key size %zu", tp->prov, tp->info->fabric_attr->name,
              tp->info->domain_attr->name, (unsigned long long)tp->mr_mode,
              (tp->mr_mode & FI_MR_VIRT_ADDR) ? "virtual" : "offset", tp->iov_limit, tp->key_size);
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
            UCCL_TP_CAP_RKEY,
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
