/* libfabric transport: settings, the provider quirk table, provider choice
 * (UCCL_OFI_PROVIDER, else the best ranked that offers what we need), the
 * engine's fabric objects (fabric, domain, AV, CQ, one RDM endpoint), and
 * error text. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ofi.h"

#define OFI_FIELD(name, dflt, doc, field, type) \
    {name, dflt, doc, offsetof(tp_ofi_config_t, field), type}

static const uccl_cfg_field_t ofi_fields[] = {
    OFI_FIELD("PROVIDER", "",
              "libfabric provider (cxi, efa, \"verbs;ofi_rxm\", \"tcp;ofi_rxm\", shm); empty = "
              "the best ranked one that offers FI_EP_RDM with messages and RMA; a name that is "
              "no libfabric provider's fails engine creation",
              provider, UCCL_CFG_STRING),
    OFI_FIELD("CHUNK", "1M", "largest RMA operation; larger transfers are split", chunk,
              UCCL_CFG_SIZE),
    OFI_FIELD("EAGER", "8K", "messages up to this size are sent eagerly (copied)", eager,
              UCCL_CFG_SIZE),
    OFI_FIELD("TX_DEPTH", "64", "control send slots per connection", tx_depth, UCCL_CFG_INT),
    OFI_FIELD("RX_DEPTH", "0",
              "control receive buffers per connection (4-4096), each posted to the provider; "
              "0 = the provider's row of the quirk table (64; 16 on shm, whose tagged "
              "receives are matched in the order posted, control receives ahead of the direct "
              "ones: tests/perf/results/ofi/ofi17-H200host)",
              rx_depth, UCCL_CFG_INT),
    OFI_FIELD("MAX_IOV", "0",
              "local pieces per RMA operation (0 = the provider's iov_limit, at most 16); "
              "more pieces are split over several operations",
              max_iov, UCCL_CFG_INT),
    OFI_FIELD("IMM", "auto",
              "how writes closed by an immediate carry it: auto (remote CQ data where the "
              "provider has 8 bytes of it, else a message after the write), data or msg",
              imm, UCCL_CFG_STRING),
    OFI_FIELD("PACK_BELOW", "auto",
              "a transfer whose local pieces average less than this and outnumber what one "
              "operation takes is copied through registered bounce buffers, in operations of "
              "256 KiB (0 = never; auto = the provider's threshold)",
              pack_below, UCCL_CFG_STRING),
    OFI_FIELD("PULL", "0",
              "messages above UCCL_OFI_EAGER: 1 = the receiver reads them (pull rendezvous: "
              "RTS naming the sender's pieces, read, FIN), 0 = the sender writes them after the "
              "receiver's CTS (measured no faster on shm: tests/perf/results/ofi/s9-README.md)",
              pull, UCCL_CFG_INT),
    OFI_FIELD("TAGGED", "-1",
              "messages above UCCL_OFI_EAGER from host memory whose pieces one operation takes: "
              "1 = an RTS, then the data as one tagged message the receiver takes once matched "
              "(the provider's own rendezvous, no CTS round trip), 0 = CTS and write (push), "
              "-1 = the provider's row of the quirk table (push on every provider here: "
              "tests/perf/results/ofi/s12-README.md); UCCL_OFI_PULL=1 wins", tagged, UCCL_CFG_INT),
    OFI_FIELD("DIRECT", "-1",
              "messages above UCCL_OFI_EAGER (and, with exact tags: shm, above the "
              "provider's inject size) up to UCCL_OFI_DIRECT_MAX from up to "
              "UCCL_OFI_MAX_IOV pieces of "
              "registered host memory, tag below 4096: 1 = one tagged message the provider "
              "places straight into the receive (no RTS, no CTS; matching stays the core's), "
              "0 = the "
              "rendezvous (UCCL_OFI_TAGGED), -1 = the provider's row of the quirk table (on for "
              "shm, off for tcp;ofi_rxm: tests/perf/results/ofi/s13-README.md); needs 8 bytes "
              "of remote CQ data", direct, UCCL_CFG_INT),
    OFI_FIELD("DIRECT_MAX", "256K",
              "largest direct message a connection takes (its bounce for messages no posted "
              "receive takes is this big); larger ones take the rendezvous", direct_max,
              UCCL_CFG_SIZE),
    OFI_FIELD("DIRECT_WAIT", "20",
              "microseconds the next message may keep a connection waiting before a bounce "
              "receive for it is posted behind the one into the receive (the message came "
              "with another tag, or no receive is posted); on shm the sender's oldest direct "
              "send waits at least this long (its clock read every 16 progress calls) before it "
              "tells the message's tag (ofi_dhint.c)",
              direct_wait_us, UCCL_CFG_INT),
    OFI_FIELD("DIRECT_DEPTH", "0",
              "direct messages a connection posts receives for ahead (1-16): the next one, "
              "and while the oldest posted receives have one tag and length, the following ones "
              "into the "
              "following receives (each with a bounce of UCCL_OFI_DIRECT_MAX, touched only by a "
              "message longer than its receive); 0 = the provider's row of the quirk table (16 "
              "for shm, 1 elsewhere: tests/perf/results/ofi/s13-README.md)", direct_depth,
              UCCL_CFG_INT),
    OFI_FIELD("STAGE_CHUNK", "1M",
              "GPU memory is staged through registered host buffers of this size (a window "
              "of a receive or read into GPU memory)", stage_chunk, UCCL_CFG_SIZE),
    OFI_FIELD("STAGE_DEPTH", "4",
              "staged chunks a GPU source copies ahead, and windows a GPU receive or read has "
              "out at once", stage_depth, UCCL_CFG_INT),
    {NULL, NULL, NULL, 0, 0},
};

const uccl_cfg_table_t uccl_ofi_config_table = {.prefix = "OFI_",
                                                .fields = ofi_fields,
                                                .struct_size = sizeof(tp_ofi_config_t),
                                                .aliases = NULL};

/* Providers we know something about; the first whose prefix matches wins.
 * Ranks: NICs only libfabric reaches first, then verbs through rxm, then
 * software providers; shm last (the shm transport serves this host).
 * Software providers (sockets over Ethernet, shared memory) are taken only
 * when UCCL_OFI_PROVIDER names them: the tcp and shm transports serve those
 * paths natively, so an engine left to choose does not route them through
 * libfabric. */
static const ofi_quirk_t ofi_quirks[] = {
    /* pack_below: software providers pay microseconds per operation, NICs
     * far less (measured here for tcp and shm: tests/perf/results/ofi) */
    {"cxi", 60, 0, 4096, 1, 64},
    {"efa", 55, 0, 8192, 1, 64},
    {"psm3", 50, 0, 8192, 1, 64},
    {"opx", 50, 0, 8192, 1, 64},
    {"verbs;ofi_rxm", 40, 0, 4096, 1, 64},
    {"tcp;ofi_rxm", 30, OFI_QUIRK_SOFTWARE, 65536, 1, 64},
    {"tcp", 25, OFI_QUIRK_SOFTWARE, 65536, 1, 64},
    {"sockets", 20, OFI_QUIRK_SOFTWARE, 65536, 1, 64},
    {"net", 15, OFI_QUIRK_SOFTWARE, 65536, 1, 64},
    {"udp;ofi_rxd", 10, OFI_QUIRK_SOFTWARE, 65536, 1, 64},
    /* no row has OFI_QUIRK_TAGGED: the tagged rendezvous measured no faster
     * than CTS + write on shm (64 KiB 0.74-0.78 against 0.75-0.79 of raw
     * send, 1-4 MiB below push) and slower on tcp;ofi_rxm
     * (tests/perf/results/ofi/s12-README.md) */
    /* shm has OFI_QUIRK_DIRECT: direct sends measured faster than push at
     * 64 KiB (0.84-0.91 of raw send against 0.71-0.79) and 256 KiB; on
     * tcp;ofi_rxm they measured slower (0.56 against 0.98 at 64 KiB):
     * tests/perf/results/ofi/s13-README.md; and their receives posted 16
     * ahead rather than 1 (0.90-0.93 of raw send at 64 KiB against
     * 0.81-0.83; on tcp;ofi_rxm 16 ahead lifts direct to 0.89-0.94 but not
     * past push's 0.94-0.96, so direct stays off there). OFI_QUIRK_EXACT_TAGS:
     * libfabric 1.17's shm matches unexpected tagged messages with a stale
     * ignore mask (ofi.h; tests/perf/results/ofi/ofi15-H200host/README.md
     * section 5); tcp;ofi_rxm matches them with the receive's own.
     * rx_depth 16: shm matches an incoming tagged message against its
     * posted receives in the order they were posted, and a connection's
     * control receives, posted first, stay ahead of its direct receives:
     * with 64 every 64 KiB direct message walked past 64 of them (~1,600
     * instructions per message in fi_cq_read, on the receiver that does the
     * copy: send 0.917 of raw; 16: 0.952; 4: 0.984, but eager sends of 1-4
     * KiB, which need control receives, fell from 0.74 to 0.61 of raw:
     * tests/perf/results/ofi/ofi17-H200host) */
    {"shm", 5,
     OFI_QUIRK_SAME_HOST | OFI_QUIRK_SOFTWARE | OFI_QUIRK_PID_NAME | OFI_QUIRK_DIRECT |
         OFI_QUIRK_EXACT_TAGS,
     32768, 16, 16},
    {"", 1, 0, 8192, 1, 64}, /* anything else */
};

const ofi_quirk_t *uccl_ofi_quirk(const char *prov)
{
    size_t n = sizeof(ofi_quirks) / sizeof(ofi_quirks[0]);

    for (size_t i = 0; i + 1 < n; i++)
        if (strncmp(prov, ofi_quirks[i].prefix, strlen(ofi_quirks[i].prefix)) == 0)
            return &ofi_quirks[i];
    return &ofi_quirks[n - 1];
}

/* What we need of a provider. */
#define OFI_CAPS                                                                                  \
    (FI_MSG | FI_TAGGED | FI_RMA | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE |      \
     FI_SEND | FI_RECV)
/* Control messages must stay in order. Writes need not: where the provider
 * does not order them by itself (FI_ORDER_WAW; asking for it makes shm
 * serialize every RMA operation, reads included, at a third of its speed),
 * a request's closing write waits for its earlier ones (ofi_data.c). */
#define OFI_ORDER FI_ORDER_SAS
#define OFI_MR_MODES                                                                             \
    (FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_ENDPOINT)

static struct fi_info *ofi_hints(const char *prov, bool full)
{
    struct fi_info *hints = fi_allocinfo();

    if (hints == NULL)
        return NULL;
    hints->ep_attr->type = FI_EP_RDM;
    if (full) {
        hints->caps = OFI_CAPS;
        hints->mode = FI_CONTEXT | FI_CONTEXT2;
        hints->domain_attr->mr_mode = OFI_MR_MODES;
        hints->domain_attr->threading = FI_THREAD_DOMAIN;
        hints->tx_attr->msg_order = OFI_ORDER;
        hints->rx_attr->msg_order = OFI_ORDER;
    }
    if (prov != NULL && prov[0] != '\0') {
        hints->fabric_attr->prov_name = strdup(prov);
        if (hints->fabric_attr->prov_name == NULL) {
            fi_freeinfo(hints);
            return NULL;
        }
    }
    return hints;
}

uccl_status_t uccl_ofi_check_info(const struct fi_info *info, char *why, size_t len)
{
    const char *prov = info->fabric_attr != NULL && info->fabric_attr->prov_name != NULL
                           ? info->fabric_attr->prov_name
                           : "?";

    why[0] = '\0';
    if (info->ep_attr == NULL || info->ep_attr->type != FI_EP_RDM) {
        snprintf(why, len, "provider %s: no reliable-datagram (FI_EP_RDM) endpoint", prov);
        return UCCL_ERR_UNSUPPORTED;
    }
    if ((info->caps & (FI_RMA | FI_READ | FI_WRITE)) != (FI_RMA | FI_READ | FI_WRITE)) {
        snprintf(why, len, "provider %s offers no RMA (FI_RMA with FI_READ and FI_WRITE): "
                 "one-sided reads and writes need it", prov);
        return UCCL_ERR_UNSUPPORTED;
    }
    if ((info->caps & (FI_MSG | FI_TAGGED)) != (FI_MSG | FI_TAGGED)) {
        snprintf(why, len, "provider %s offers no FI_MSG and FI_TAGGED messages", prov);
        return UCCL_ERR_UNSUPPORTED;
    }
    if (info->tx_attr == NULL || (info->tx_attr->msg_order & OFI_ORDER) != OFI_ORDER) {
        snprintf(why, len, "provider %s does not keep sends in order (FI_ORDER_SAS)", prov);
        return UCCL_ERR_UNSUPPORTED;
    }
    if (info->domain_attr == NULL || info->domain_attr->cq_data_size < 4) {
        snprintf(why, len, "provider %s carries %zu bytes of remote CQ data; immediates need 4",
                 prov, info->domain_attr ? info->domain_attr->cq_data_size : 0);
        return UCCL_ERR_UNSUPPORTED;
    }
    if (info->domain_attr->mr_mode & ~(uint64_t)OFI_MR_MODES) {
        snprintf(why, len, "provider %s needs memory registration modes 0x%llx we do not "
                 "support (FI_MR_RAW...)", prov, (unsigned long long)info->domain_attr->mr_mode);
        return UCCL_ERR_UNSUPPORTED;
    }
    return UCCL_OK;
}

/* The provider names fi_getinfo knows here, for an error message. */
static void ofi_known_providers(char *buf, size_t len)
{
    struct fi_info *list = NULL, *hints = ofi_hints(NULL, false);
    size_t used = 0;

    buf[0] = '\0';
    if (hints != NULL && fi_getinfo(OFI_API, NULL, NULL, 0, hints, &list) == 0) {
        for (struct fi_info *i = list; i != NULL && used + 1 < len; i = i->next) {
            const char *p = i->fabric_attr->prov_name;
            bool seen = false;

            for (struct fi_info *j = list; j != i; j = j->next)
                seen |= strcmp(j->fabric_attr->prov_name, p) == 0;
            if (!seen)
                used += (size_t)snprintf(buf + used, len - used, "%s\"%s\"", used ? ", " : "", p);
        }
    }
    if (buf[0] == '\0')
        snprintf(buf, len, "none");
    fi_freeinfo(list);
    fi_freeinfo(hints);
}

/* libfabric's provider names (core providers, then the utility providers
 * layered over one as "core;ofi_rxm"): a UCCL_OFI_PROVIDER with a part
 * outside these is a typo, refused whatever this host has. */
static const char *const ofi_names[] = {
    "cxi", "efa", "gni", "lpp", "lnx", "mlx", "net", "opx", "psm", "psm2", "psm3", "shm",
    "sm2", "sockets", "tcp", "ucx", "udp", "usnic", "verbs", "ofi_rxm", "ofi_rxd", "ofi_mrail",
};
#define OFI_NAMES_TEXT                                                                            \
    "cxi, efa, gni, lpp, lnx, mlx, net, opx, psm, psm2, psm3, shm, sm2, sockets, tcp, ucx, "   \
    "udp, usnic, verbs, layered as \"core;ofi_rxm\", \"core;ofi_rxd\" or \"core;ofi_mrail\""

bool uccl_ofi_provider_name_ok(const char *prov)
{
    const size_t n = sizeof(ofi_names) / sizeof(ofi_names[0]);

    for (const char *p = prov;;) {
        const char *end = strchr(p, ';');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        bool found = false;

        for (size_t i = 0; i < n && !found; i++)
            found = strlen(ofi_names[i]) == len && strncmp(ofi_names[i], p, len) == 0;
        if (!found)
            return false;
        if (end == NULL)
            return true;
        p = end + 1;
    }
}

/* Why nothing matched: the named provider is unknown, or lacks something. */
static uccl_status_t ofi_explain_nodata(const char *prov)
{
    struct fi_info *hints = ofi_hints(prov, false), *list = NULL;
    char known[512], why[256] = "";
    uccl_status_t st = UCCL_ERR_NOT_FOUND;

    if (hints != NULL && fi_getinfo(OFI_API, NULL, NULL, 0, hints, &list) == 0 && list != NULL) {
        st = UCCL_ERR_UNSUPPORTED;
        for (struct fi_info *i = list; i != NULL && why[0] == '\0'; i = i->next)
            uccl_ofi_check_info(i, why, sizeof(why));
    }
    fi_freeinfo(list);
    fi_freeinfo(hints);
    if (st == UCCL_ERR_UNSUPPORTED) {
        uccl_error("ofi: UCCL_OFI_PROVIDER=%s: %s", prov,
                   why[0] ? why : "no endpoint with FI_MSG, FI_TAGGED, FI_RMA, ordered sends and "
                                  "writes, 8 bytes of CQ data and memory modes we support");
        return st;
    }
    ofi_known_providers(known, sizeof(known));
    if (!uccl_ofi_provider_name_ok(prov)) { /* a typo: a bad setting, not a missing device */
        uccl_error("ofi: UCCL_OFI_PROVIDER=%s is not a libfabric provider name (accepted: "
                   OFI_NAMES_TEXT "); usable on this host: %s", prov, known);
        return UCCL_ERR_INVALID_PARAM;
    }
    uccl_error("ofi: UCCL_OFI_PROVIDER=%s names no libfabric provider of this host; known: %s",
               prov, known);
    return st;
}

uccl_status_t uccl_ofi_getinfo(tp_ofi_t *tp, struct fi_info **list)
{
    const char *prov = tp->cfg.provider;
    struct fi_info *hints = ofi_hints(prov, true);
    int rc;

    *list = NULL;
    if (hints == NULL)
        return UCCL_ERR_NO_MEMORY;
    /* libfabric's registration cache (verbs;ofi_rxm, efa) keeps a region
     * registered after fi_close: a peer holding its key could still write
     * into memory freed after uccl_mr_dereg (seen on rxe: the write landed).
     * Off unless the user set it; libfabric reads it at its first call here. */
    setenv("FI_MR_CACHE_MAX_COUNT", "0", 0);
    rc = fi_getinfo(OFI_API, NULL, NULL, 0, hints, list);
    fi_freeinfo(hints);
    if (rc == 0 && *list != NULL)
        return UCCL_OK;
    if (rc != -FI_ENODATA && rc != 0) {
        uccl_error("ofi: fi_getinfo: %s", fi_strerror(-rc));
        return UCCL_ERR_NO_DEVICE;
    }
    if (prov[0] != '\0')
        return ofi_explain_nodata(prov);
    uccl_info("ofi: no libfabric provider offers FI_EP_RDM with messages and RMA here");
    return UCCL_ERR_NO_DEVICE;
}

/* ------------------------------------------------------------------ objects */

static uccl_status_t ofi_fail(const char *what, int rc)
{
    uccl_error("ofi: %s: %s", what, fi_strerror(-rc));
    return rc == -FI_ENOMEM ? UCCL_ERR_NO_MEMORY : UCCL_ERR_TRANSPORT;
}

uccl_status_t uccl_ofi_fabric_open(tp_ofi_t *tp, const struct fi_info *info)
{
    struct fi_cq_attr cq_attr = {.format = FI_CQ_FORMAT_DATA, .wait_obj = FI_WAIT_NONE};
    struct fi_av_attr av_attr = {.type = FI_AV_TABLE};
    int rc;

    tp->info = fi_dupinfo(info);
    if (tp->info == NULL)
        return UCCL_ERR_NO_MEMORY;
    snprintf(tp->prov, sizeof(tp->prov), "%s", info->fabric_attr->prov_name);
    tp->quirk = uccl_ofi_quirk(tp->prov);
    if (tp->cfg.rx_depth == 0) /* the provider's: every use reads the setting */
        tp->cfg.rx_depth = tp->quirk->rx_depth;
    tp->mr_mode = info->domain_attr->mr_mode;
    tp->addr_format = info->addr_format;
    tp->iov_limit = info->tx_attr->iov_limit;
    tp->rma_iov_limit = info->tx_attr->rma_iov_limit;
    tp->max_msg = info->ep_attr->max_msg_size;
    tp->key_size = info->domain_attr->mr_key_size;
    tp->imm_msg = info->domain_attr->cq_data_size < 8 || strcmp(tp->cfg.imm, "msg") == 0;
    /* the closing write (or message) may go while the earlier writes of
     * its request are in flight only where the provider orders them */
    tp->rma_ordered = (info->tx_attr->msg_order & FI_ORDER_WAW) != 0 &&
                      (!tp->imm_msg || (info->tx_attr->msg_order & FI_ORDER_SAW) != 0);
    if ((rc = fi_fabric(info->fabric_attr, &tp->fabric, NULL)) != 0)
        return ofi_fail("fi_fabric", rc);
    if ((rc = fi_domain(tp->fabric, tp->info, &tp->domain, NULL)) != 0)
        return ofi_fail("fi_domain", rc);
    if ((rc = fi_av_open(tp->domain, &av_attr, &tp->av, NULL)) != 0)
        return ofi_fail("fi_av_open", rc);
    if ((rc = fi_cq_open(tp->domain, &cq_attr, &tp->cq, NULL)) != 0)
        return ofi_fail("fi_cq_open", rc);
    if ((rc = fi_endpoint(tp->domain, tp->info, &tp->ep, NULL)) != 0)
        return ofi_fail("fi_endpoint", rc);
    if ((rc = fi_ep_bind(tp->ep, &tp->av->fid, 0)) != 0)
        return ofi_fail("fi_ep_bind (AV)", rc);
    if ((rc = fi_ep_bind(tp->ep, &tp->cq->fid, FI_TRANSMIT | FI_RECV)) != 0)
        return ofi_fail("fi_ep_bind (CQ)", rc);
    if (tp->quirk->flags & OFI_QUIRK_PID_NAME) {
        char name[64];

        snprintf(name, sizeof(name), "uccl-%d-%016llx", (int)getpid(),
                 (unsigned long long)uccl_random_u64());
        if ((rc = fi_setname(&tp->ep->fid, name, strlen(name) + 1)) != 0)
            uccl_debug("ofi: fi_setname %s: %s; the provider names the endpoint", name,
                       fi_strerror(-rc));
    }
    if ((rc = fi_enable(tp->ep)) != 0)
        return ofi_fail("fi_enable", rc);
    tp->name_len = sizeof(tp->name);
    if ((rc = fi_getname(&tp->ep->fid, tp->name, &tp->name_len)) != 0)
        return ofi_fail("fi_getname", rc);
    return UCCL_OK;
}

static void ofi_close_fid(struct fid *fid, const char *what)
{
    int rc;

    if (fid == NULL)
        return;
    rc = fi_close(fid);
    if (rc != 0)
        uccl_warn("ofi: closing the %s: %s", what, fi_strerror(-rc));
}

void uccl_ofi_fabric_close(tp_ofi_t *tp)
{
    ofi_close_fid(tp->ep ? &tp->ep->fid : NULL, "endpoint");
    tp->ep = NULL;
    uccl_ofi_zombies_free(tp, true); /* nothing of theirs is posted any more */
    if (tp->bounce_free.next != NULL)
        uccl_ofi_pack_close(tp);
    uccl_ofi_gpu_close(tp); /* its buffers' memory regions close before the domain */
    ofi_close_fid(tp->av ? &tp->av->fid : NULL, "address vector");
    ofi_close_fid(tp->cq ? &tp->cq->fid : NULL, "completion queue");
    ofi_close_fid(tp->domain ? &tp->domain->fid : NULL, "domain");
    ofi_close_fid(tp->fabric ? &tp->fabric->fid : NULL, "fabric");
    tp->av = NULL;
    tp->cq = NULL;
    tp->domain = NULL;
    tp->fabric = NULL;
    fi_freeinfo(tp->info);
    tp->info = NULL;
}

void uccl_ofi_cq_error(tp_ofi_t *tp, const struct fi_cq_err_entry *err, char *buf, size_t len)
{
    const char *prov = fi_cq_strerror(tp->cq, err->prov_errno, err->err_data, NULL, 0);

    snprintf(buf, len, "%s (provider %s: %s, error %d)", fi_strerror(err->err), tp->prov,
             prov != NULL ? prov : "-", err->prov_errno);
}
