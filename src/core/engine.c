/* Engine: configuration, transports, the connection-setup listener, the
 * progress loop and the optional progress thread. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core.h"
#include "gpu/gpu.h"
#include "topo/topo.h"
#include "uccl_build.h"
#include "util/crypto.h"

/* How often progress looks at the setup listener and at peer liveness. */
#define UCCL_SLOW_PROGRESS_MS 1

uccl_status_t uccl_engine_check(const uccl_engine_t *engine)
{
    if (engine == NULL || engine->magic != UCCL_MAGIC_ENGINE)
        return UCCL_ERR_INVALID_HANDLE;
    return UCCL_OK;
}

/* Is name in the comma list? An empty list allows everything. */
static bool list_has(const char *list, const char *name)
{
    size_t n = strlen(name);

    if (list == NULL || *list == '\0')
        return true;
    for (const char *p = list; *p;) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len == n && strncmp(p, name, n) == 0)
            return true;
        p += len + (end ? 1 : 0);
    }
    return false;
}

/* Where the transport list came from, for messages. */
static const char *transports_src(const uccl_engine_params_t *params)
{
    if (params != NULL && (params->field_mask & UCCL_ENGINE_PARAM_TRANSPORTS) &&
        params->transports != NULL)
        return "engine param transports";
    return "UCCL_TRANSPORTS";
}

/* Every name in the list must be a transport compiled in. SRC names where
 * the list came from (the variable or the engine param), for the message. */
static uccl_status_t check_transport_list(const char *list, const char *src)
{
    char known[256] = "";
    char name[32];

    for (const struct uccl_tp_ops *const *ops = uccl_tp_list(); *ops; ops++) {
        strncat(known, known[0] ? "," : "", sizeof(known) - strlen(known) - 1);
        strncat(known, (*ops)->name, sizeof(known) - strlen(known) - 1);
    }
    if (list != NULL && *list != '\0' && list[strlen(list) - 1] == ',') {
        uccl_error("%s='%s': empty transport name at the end of the list", src, list);
        return UCCL_ERR_INVALID_PARAM;
    }
    for (const char *p = list; p && *p;) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);

        snprintf(name, sizeof(name), "%.*s", (int)(len < sizeof(name) ? len : 0), p);
        if (len == 0 || len >= sizeof(name) || !list_has(known, name)) {
            uccl_error("%s='%s': unknown transport '%.*s' (built in: %s)", src, list, (int)len, p,
                       known);
            return UCCL_ERR_INVALID_PARAM;
        }
        p += len + (end ? 1 : 0);
    }
    return UCCL_OK;
}

static uccl_status_t pick_oob_address(const uccl_config_t *cfg, struct in_addr *out)
{
    struct ifaddrs *ifs, *ifa;

    out->s_addr = htonl(INADDR_LOOPBACK);
    if (cfg->oob_ifaddr[0] != '\0') {
        if (inet_pton(AF_INET, cfg->oob_ifaddr, out) == 1)
            return UCCL_OK;
        uccl_error("UCCL_OOB_IFADDR=%s is not an IPv4 address", cfg->oob_ifaddr);
        return UCCL_ERR_INVALID_PARAM;
    }
    if (getifaddrs(&ifs) != 0)
        return UCCL_OK;
    for (ifa = ifs; ifa != NULL; ifa = ifa->ifa_next) {
        if (ifa->ifa_addr == NULL || ifa->ifa_addr->sa_family != AF_INET ||
            (ifa->ifa_flags & IFF_LOOPBACK) || !(ifa->ifa_flags & IFF_UP))
            continue;
        *out = ((struct sockaddr_in *)ifa->ifa_addr)->sin_addr;
        break;
    }
    freeifaddrs(ifs);
    return UCCL_OK;
}

/* The setup listener listens on the advertised address only (every
 * interface with UCCL_OOB_BIND_ANY=1), on UCCL_OOB_PORT when set. */
static uccl_status_t open_listener(uccl_engine_t *engine)
{
    struct sockaddr_in sa = {.sin_family = AF_INET};
    socklen_t salen = sizeof(sa);
    uccl_status_t st = pick_oob_address(&engine->cfg, &engine->oob_addr.sin_addr);
    int fd, one = 1;

    if (st != UCCL_OK)
        return st;
    sa.sin_addr.s_addr = engine->cfg.oob_bind_any ? htonl(INADDR_ANY) : engine->oob_addr.sin_addr.s_addr;
    sa.sin_port = htons((uint16_t)engine->cfg.oob_port);
    fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        uccl_error("socket: %s", strerror(errno));
        return UCCL_ERR_IO;
    }
    /* a fixed port is for restarting at the same address: TIME_WAIT must not stop it */
    if (engine->cfg.oob_port != 0)
        (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    /* UCCL_OOB_PORT, when set, wins over UCCL_PORT_RANGE */
    if (uccl_bind_port_range(fd, &sa, engine->cfg.oob_port != 0 ? 0 : engine->cfg.port_lo,
                             engine->cfg.port_hi) != 0 ||
        listen(fd, 128) != 0 || getsockname(fd, (struct sockaddr *)&sa, &salen) != 0) {
        uccl_error("setup listener on %s (UCCL_OOB_PORT=%d, UCCL_PORT_RANGE=%s): %s (see also "
                   "UCCL_OOB_IFADDR, UCCL_OOB_BIND_ANY)", inet_ntoa(sa.sin_addr),
                   engine->cfg.oob_port, engine->cfg.port_range[0] ? engine->cfg.port_range : "(any)",
                   strerror(errno));
        close(fd);
        return UCCL_ERR_IO;
    }
    engine->listen_fd = fd;
    engine->oob_addr.sin_family = AF_INET;
    engine->oob_addr.sin_port = sa.sin_port;
    return UCCL_OK;
}

/* What the transports are told at open (tp_api.h); stays with the engine. */
static void fill_tp_params(uccl_engine_t *engine)
{
    engine->tp_params = (uccl_tp_open_params_t){
        .gpu_index = engine->gpu_index,
        .engine_id = engine->id,
        .host_id = engine->host_id,
        .pid = engine->pid,
        .ifaddr = engine->oob_addr.sin_addr.s_addr,
        .bind_any = engine->cfg.oob_bind_any,
        .port_lo = engine->cfg.port_lo,
        .port_hi = engine->cfg.port_hi,
        .net_devices = engine->cfg.net_devices,
        .timeout_ms = engine->cfg.timeout_ms,
        .setup_max_pending = engine->cfg.setup_max_pending,
        .setup_timeout_ms = engine->cfg.setup_timeout_ms,
        .engine = engine,
    };
}

static void close_transports(uccl_engine_t *engine)
{
    for (int i = engine->ntp - 1; i >= 0; i--)
        engine->tp[i]->ops->close(engine->tp[i]);
    engine->ntp = 0;
}

/* Open the allowed transports; on an error none stays open. */
static uccl_status_t open_transports(uccl_engine_t *engine, const char *allowed)
{
    bool explicit_list = allowed[0] != '\0';

    fill_tp_params(engine);

    for (const struct uccl_tp_ops *const *ops = uccl_tp_list(); *ops; ops++) {
        uccl_tp_t *tp = NULL;
        uccl_status_t st;

        if (!list_has(allowed, (*ops)->name))
            continue;
        if (engine->ntp == UCCL_TP_MAX)
            break;
        st = (*ops)->open(&engine->tp_params, &tp);
        if (st == UCCL_ERR_INVALID_PARAM) { /* a malformed setting, logged: never skipped */
            uccl_error("transport %s: refused its settings; engine not created", (*ops)->name);
            close_transports(engine);
            return st;
        }
        if (st != UCCL_OK) {
            if (explicit_list) {
                uccl_error("transport %s was asked for but cannot be used here: %s", (*ops)->name,
                           uccl_strerror(st));
                close_transports(engine);
                return st;
            }
            uccl_info("transport %s not usable here (%s); going on without it", (*ops)->name,
                      uccl_strerror(st));
            continue;
        }
        tp->ops = *ops;
        tp->engine = engine;
        tp->params = &engine->tp_params;
        tp->index = engine->ntp;
        engine->tp[engine->ntp++] = tp;
        engine->caps |= (*ops)->engine_cap;
    }
    if (engine->ntp == 0) {
        uccl_error("no transport usable (allowed: '%s')", allowed[0] ? allowed : "all");
        return UCCL_ERR_NO_TRANSPORT;
    }
    return UCCL_OK;
}

static void *progress_thread_main(void *arg)
{
    uccl_engine_t *engine = arg;

    while (!engine->progress_stop) {
        uccl_engine_lock(engine);
        uccl_engine_progress_locked(engine);
        uccl_engine_unlock(engine);
        sched_yield();
    }
    return NULL;
}

/* Pin the progress thread near the engine's GPU (its NUMA node's CPUs).
 * Best effort: without hwloc, a GPU or locality information it runs anywhere. */
static void progress_thread_affinity(uccl_engine_t *engine)
{
    char busid[UCCL_TOPO_BUSID_MAX];
    const uccl_topo_gpu_t *gpu;
    const uccl_topo_t *topo;
    cpu_set_t set;

    if (engine->gpu_index < 0 ||
        uccl_gpu_pci_bus_id(engine->gpu_index, busid, sizeof(busid)) != UCCL_OK ||
        (topo = uccl_engine_topo(engine, NULL)) == NULL)
        return;
    gpu = uccl_topo_gpu_by_busid(topo, busid);
    if (gpu != NULL && uccl_topo_cpuset(topo, gpu->index, -1, &set) == UCCL_OK &&
        pthread_setaffinity_np(engine->progress_thread, sizeof(set), &set) == 0)
        uccl_info("progress thread pinned to the CPUs of GPU %d (%s)", engine->gpu_index, busid);
}

static uccl_status_t apply_params(uccl_engine_t *engine, const uccl_engine_params_t *params,
                                  char *transports, size_t tlen, bool *net_devices_set)
{
    const uint64_t known = UCCL_ENGINE_PARAM_GPU_INDEX | UCCL_ENGINE_PARAM_TRANSPORTS |
                           UCCL_ENGINE_PARAM_NET_DEVICES | UCCL_ENGINE_PARAM_PROGRESS_THREAD |
                           UCCL_ENGINE_PARAM_SECRET;
    static const uint8_t zero[UCCL_SECRET_SIZE];

    snprintf(transports, tlen, "%s", engine->cfg.transports);
    engine->gpu_index = -1;
    if (params == NULL)
        return UCCL_OK;
    if (params->field_mask & ~known) {
        uccl_error("uccl_engine_create: unknown field_mask bits 0x%llx",
                   (unsigned long long)(params->field_mask & ~known));
        return UCCL_ERR_INVALID_PARAM;
    }
    if (params->field_mask & UCCL_ENGINE_PARAM_GPU_INDEX) {
        if (params->gpu_index < -1) {
            uccl_error("uccl_engine_create: gpu_index=%d (-1 = host memory only)", params->gpu_index);
            return UCCL_ERR_INVALID_PARAM;
        }
        engine->gpu_index = params->gpu_index;
    }
    if ((params->field_mask & UCCL_ENGINE_PARAM_TRANSPORTS) && params->transports != NULL) {
        if (strlen(params->transports) >= tlen) {
            uccl_error("uccl_engine_create: engine param transports is %zu characters long, "
                       "at most %zu", strlen(params->transports), tlen - 1);
            return UCCL_ERR_INVALID_PARAM;
        }
        snprintf(transports, tlen, "%s", params->transports);
    }
    if ((params->field_mask & UCCL_ENGINE_PARAM_NET_DEVICES) && params->net_devices != NULL) {
        if (strlen(params->net_devices) >= sizeof(engine->cfg.net_devices)) {
            uccl_error("uccl_engine_create: engine param net_devices is %zu characters long, "
                       "at most %zu", strlen(params->net_devices),
                       sizeof(engine->cfg.net_devices) - 1);
            return UCCL_ERR_INVALID_PARAM;
        }
        snprintf(engine->cfg.net_devices, sizeof(engine->cfg.net_devices), "%s", params->net_devices);
        *net_devices_set = true;
    }
    if (params->field_mask & UCCL_ENGINE_PARAM_PROGRESS_THREAD) {
        if (params->progress_thread != 0 && params->progress_thread != 1) {
            uccl_error("uccl_engine_create: progress_thread=%d (0 or 1)", params->progress_thread);
            return UCCL_ERR_INVALID_PARAM;
        }
        engine->cfg.progress_thread = params->progress_thread;
    }
    if (params->field_mask & UCCL_ENGINE_PARAM_SECRET) {
        if (memcmp(params->secret, zero, sizeof(zero)) == 0) {
            uccl_error("uccl_engine_create: the secret given is all zero");
            return UCCL_ERR_INVALID_PARAM;
        }
        memcpy(engine->secret, params->secret, sizeof(engine->secret));
    }
    return UCCL_OK;
}

static uint64_t built_in_caps(void)
{
    uint64_t caps = 0;
#ifdef UCCL_HAVE_HWLOC
    caps |= UCCL_CAP_HWLOC;
#endif
#ifdef UCCL_HAVE_MPI
    caps |= UCCL_CAP_MPI;
#endif
#if defined(UCCL_HAVE_CUDA)
    caps |= UCCL_CAP_CUDA;
#elif defined(UCCL_HAVE_ROCM)
    caps |= UCCL_CAP_ROCM;
#endif
    return caps;
}

uccl_status_t uccl_engine_create(const uccl_engine_params_t *params, uccl_engine_t **engine_out)
{
    char transports[UCCL_CFG_STRING_MAX];
    bool net_devices_set = false;
    uccl_engine_t *engine;
    uccl_status_t st;

    if (engine_out == NULL)
        return UCCL_ERR_INVALID_PARAM;
    /* admission proofs need libcrypto: no engine rather than one that
     * would send its secret in clear (crypto.c logs what is missing) */
    if (uccl_crypto_init() != UCCL_OK)
        return UCCL_ERR_UNSUPPORTED;
    engine = calloc(1, sizeof(*engine));
    if (engine == NULL)
        return UCCL_ERR_NO_MEMORY;
    engine->listen_fd = -1;
    st = uccl_config_get(&engine->cfg);
    if (st != UCCL_OK)
        goto err_free;
    st = apply_params(engine, params, transports, sizeof(transports), &net_devices_set);
    if (st == UCCL_OK)
        st = check_transport_list(transports, transports_src(params));
    if (st == UCCL_OK)
        st = uccl_engine_check_settings(engine, net_devices_set);
    if (st != UCCL_OK)
        goto err_free;
    pthread_mutex_init(&engine->lock, NULL); /* made recursive by uccl_engine_lock */
    engine->magic = UCCL_MAGIC_ENGINE;
    engine->id = uccl_random_u64();
    if (!(params != NULL && (params->field_mask & UCCL_ENGINE_PARAM_SECRET)) &&
        !uccl_crypto_random(engine->secret, sizeof(engine->secret))) {
        uint64_t r[2] = {uccl_random_u64(), uccl_random_u64()}; /* getrandom */
        memcpy(engine->secret, r, sizeof(engine->secret));
    }
    engine->host_id = uccl_host_id(engine->hostname, sizeof(engine->hostname), engine->cfg.host_id);
    engine->pid = (int)getpid();
    engine->caps = built_in_caps();
    uccl_list_init(&engine->conns);
    uccl_list_init(&engine->accept_q);
    uccl_list_init(&engine->handshakes);
    uccl_list_init(&engine->user_reqs);
    uccl_list_init(&engine->msg_tails);
    /* chunks of 256: one chunk (~856 KiB) while at most 256 requests are
     * alive at once; never shrinks before uccl_engine_destroy (pool.h) */
    uccl_pool_init(&engine->req_pool, sizeof(uccl_req_t), offsetof(uccl_req_t, pool_link), 256);
    uccl_pool_init(&engine->mr_pool, sizeof(uccl_mr_t), offsetof(uccl_mr_t, pool_link), 256);
    uccl_pool_init(&engine->conn_pool, sizeof(uccl_conn_t), offsetof(uccl_conn_t, pool_link), 16);
    st = open_listener(engine);
    if (st != UCCL_OK)
        goto err_pools;
    st = open_transports(engine, transports);
    if (st != UCCL_OK)
        goto err_listener;
    if (engine->cfg.progress_thread) {
        if (pthread_create(&engine->progress_thread, NULL, progress_thread_main, engine) != 0) {
            uccl_error("cannot start the progress thread: %s", strerror(errno));
            st = UCCL_ERR_NO_MEMORY;
            goto err_transports;
        }
        engine->has_progress_thread = true;
        progress_thread_affinity(engine);
    }
    uccl_debug("engine %016llx created: %d transports, setup listener port %d",
               (unsigned long long)engine->id, engine->ntp, ntohs(engine->oob_addr.sin_port));
    *engine_out = engine;
    return UCCL_OK;

err_transports:
    close_transports(engine);
err_listener:
    uccl_engine_topo_free(engine);
    close(engine->listen_fd);
err_pools:
    uccl_pool_destroy(&engine->req_pool);
    uccl_pool_destroy(&engine->mr_pool);
    uccl_pool_destroy(&engine->conn_pool);
    pthread_mutex_destroy(&engine->lock);
err_free:
    free(engine);
    return st;
}

uccl_status_t uccl_engine_destroy(uccl_engine_t *engine)
{
    uccl_status_t st = uccl_engine_check(engine);
    uccl_list_t *pos, *tmp;

    if (st != UCCL_OK)
        return st;
    if (engine->has_progress_thread) {
        engine->progress_stop = 1;
        pthread_join(engine->progress_thread, NULL);
    }
    uccl_copy_hold_thread_stop(engine);
    uccl_engine_lock(engine);
    uccl_greq_cancel_all(engine);
    uccl_copy_ctx_destroy(engine);
    uccl_rma_msg_cancel_all(engine);
    uccl_list_for_each_safe(pos, tmp, &engine->accept_q)
        uccl_conn_destroy(uccl_container_of(pos, uccl_conn_t, link), UCCL_ERR_CANCELED);
    uccl_list_for_each_safe(pos, tmp, &engine->conns)
        uccl_conn_destroy(uccl_container_of(pos, uccl_conn_t, link), UCCL_ERR_CANCELED);
    uccl_list_for_each_safe(pos, tmp, &engine->handshakes) {
        uccl_handshake_t *hs = uccl_container_of(pos, uccl_handshake_t, link);
        close(hs->fd);
        free(hs->buf);
        uccl_list_del(&hs->link);
        free(hs);
    }
    uccl_mr_release_all(engine);
    close_transports(engine);
    uccl_engine_topo_free(engine);
    close(engine->listen_fd);
    engine->magic = UCCL_MAGIC_DEAD;
    uccl_pool_destroy(&engine->req_pool);
    uccl_pool_destroy(&engine->mr_pool);
    uccl_pool_destroy(&engine->conn_pool);
    uccl_engine_unlock(engine);
    pthread_mutex_destroy(&engine->lock);
    free(engine);
    return UCCL_OK;
}

int uccl_engine_progress_locked(uccl_engine_t *engine)
{
    int events = 0;
    uint64_t now;

    if (engine->in_progress)
        return 0;
    engine->in_progress = true;
    for (int i = 0; i < engine->ntp; i++)
        events += engine->tp[i]->ops->progress(engine->tp[i]);
    /* each with its own first test inline: nearly every round has neither */
    if (!uccl_list_empty(&engine->msg_tails))
        events += uccl_rma_msg_progress(engine);
    if (!uccl_list_empty(&engine->user_reqs))
        events += uccl_greq_progress(engine);
    now = uccl_time_ms_coarse(); /* every round: the cheap clock */
    if (now >= engine->next_liveness_ms) {
        uccl_conn_progress_setup(engine);
        uccl_conn_progress_liveness(engine);
        engine->next_liveness_ms = now + UCCL_SLOW_PROGRESS_MS;
    }
    uccl_conn_progress_teardown(engine);
    engine->in_progress = false;
    return events;
}

int uccl_engine_progress(uccl_engine_t *engine)
{
    int events;

    if (uccl_engine_check(engine) != UCCL_OK)
        return 0;
    uccl_engine_lock(engine);
    events = uccl_engine_progress_locked(engine);
    uccl_engine_unlock(engine);
    return events;
}

uint64_t uccl_engine_caps(const uccl_engine_t *engine)
{
    return uccl_engine_check(engine) == UCCL_OK ? engine->caps : 0;
}

uint64_t uccl_engine_host_id(const uccl_engine_t *engine)
{
    return uccl_engine_check(engine) == UCCL_OK ? engine->host_id : 0;
}

uint64_t uccl_engine_id(const uccl_engine_t *engine)
{
    return uccl_engine_check(engine) == UCCL_OK ? engine->id : 0;
}

uccl_status_t uccl_engine_address(uccl_engine_t *engine, void *buf, size_t *len)
{
    uccl_status_t st = uccl_engine_check(engine);

    if (st != UCCL_OK)
        return st;
    uccl_engine_lock(engine);
    st = uccl_address_pack(engine, buf, len);
    uccl_engine_unlock(engine);
    return st;
}
