/* Engine creation refuses malformed settings, each with a message naming
 * it: every transport's variables (parsed whether that transport is usable
 * here or not), network device names, the topology file, the GPU index and
 * the progress thread flag. A transport that is merely unusable here is
 * skipped at info level elsewhere; a malformed setting is always an error. */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core.h"
#include "gpu/gpu.h"
#include "topo/topo.h"

/* Parse every transport's table into scratch space. */
static uccl_status_t check_tp_tables(void)
{
    const uccl_cfg_table_t *const *tables = uccl_cfg_tables();

    for (size_t i = 0; tables[i] != NULL; i++) {
        void *scratch;
        uccl_status_t st;

        if (tables[i] == &uccl_core_config_table)
            continue; /* parsed already */
        scratch = calloc(1, tables[i]->struct_size);
        if (scratch == NULL)
            return UCCL_ERR_NO_MEMORY;
        st = uccl_cfg_parse(tables[i], scratch); /* logs the variable it refuses */
        free(scratch);
        if (st != UCCL_OK)
            return st;
    }
    return UCCL_OK;
}

/* Is name an RDMA device or a network interface of this host? */
static bool net_device_exists(const char *name)
{
    static const char *const classes[] = {"/sys/class/infiniband", "/sys/class/net"};
    char path[128];

    for (size_t i = 0; i < sizeof(classes) / sizeof(classes[0]); i++) {
        snprintf(path, sizeof(path), "%s/%s", classes[i], name);
        if (access(path, F_OK) == 0)
            return true;
    }
    return false;
}

/* One "name[:port]" entry of a device list. */
static uccl_status_t check_net_device(const char *entry, size_t len, const char *what,
                                      const char *list)
{
    const char *colon = memchr(entry, ':', len);
    size_t name_len = colon ? (size_t)(colon - entry) : len;
    char name[64];
    long port = 0;

    if (name_len == 0 || name_len >= sizeof(name)) {
        uccl_error("%s=%s: empty or overlong device name", what, list);
        return UCCL_ERR_INVALID_PARAM;
    }
    for (size_t i = 0; i < name_len; i++) {
        if (!isalnum((unsigned char)entry[i]) && strchr("_-.", entry[i]) == NULL) {
            uccl_error("%s=%s: '%.*s' is not a device name", what, list, (int)name_len, entry);
            return UCCL_ERR_INVALID_PARAM;
        }
    }
    if (colon != NULL) {
        const char *d = colon + 1, *stop = entry + len;

        for (; d < stop && isdigit((unsigned char)*d) && port <= 255; d++)
            port = port * 10 + (*d - '0');
        if (d != stop || colon + 1 == stop || port < 1 || port > 255) {
            uccl_error("%s=%s: the port of '%.*s' must be a number in 1..255", what, list, (int)len, entry);
            return UCCL_ERR_INVALID_PARAM;
        }
    }
    memcpy(name, entry, name_len);
    name[name_len] = '\0';
    /* "." and ".." are the class directory and its parent, no device */
    if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0 || !net_device_exists(name)) {
        uccl_error("%s=%s: '%s' is no RDMA device or network interface of this host", what, list, name);
        return UCCL_ERR_INVALID_PARAM;
    }
    return UCCL_OK;
}

static uccl_status_t check_net_devices(const char *list, const char *what)
{
    for (const char *p = list; *p != '\0';) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        uccl_status_t st = check_net_device(p, len, what, list);

        if (st != UCCL_OK)
            return st;
        p += len;
        if (end != NULL && *++p == '\0') {
            uccl_error("%s=%s: empty device name at the end", what, list);
            return UCCL_ERR_INVALID_PARAM;
        }
    }
    return UCCL_OK;
}

/* The file must be there; with hwloc it must also load. */
static uccl_status_t check_topo_xml(const char *path)
{
    uccl_topo_t *topo = NULL;
    uccl_status_t st;

    if (path[0] == '\0')
        return UCCL_OK;
    if (access(path, R_OK) != 0) {
        uccl_error("UCCL_TOPO_XML=%s: %s", path, strerror(errno));
        return UCCL_ERR_INVALID_PARAM;
    }
    st = uccl_topo_load(path, &topo);
    if (st == UCCL_OK) {
        uccl_topo_free(topo);
        return UCCL_OK;
    }
    if (st == UCCL_ERR_UNSUPPORTED) {
        uccl_info("UCCL_TOPO_XML=%s is not used: built without hwloc", path);
        return UCCL_OK;
    }
    uccl_error("UCCL_TOPO_XML=%s: not a topology hwloc can load (%s)", path, uccl_strerror(st));
    return UCCL_ERR_INVALID_PARAM;
}

static uccl_status_t check_gpu_index(int gpu_index)
{
    int n = 0;

    if (gpu_index < 0)
        return UCCL_OK;
    if (uccl_gpu_count(&n) != UCCL_OK)
        n = 0;
    if (gpu_index >= n) {
        uccl_error("uccl_engine_create: gpu_index=%d, but this host has %d GPU%s", gpu_index, n,
                   n == 1 ? "" : "s");
        return UCCL_ERR_INVALID_PARAM;
    }
    return UCCL_OK;
}

uccl_status_t uccl_engine_check_settings(const uccl_engine_t *engine, bool net_devices_from_params)
{
    uccl_status_t st = check_tp_tables();

    if (st == UCCL_OK)
        st = check_net_devices(engine->cfg.net_devices,
                               net_devices_from_params ? "net_devices (engine params)" : "UCCL_NET_DEVICES");
    if (st == UCCL_OK)
        st = check_topo_xml(engine->cfg.topo_xml);
    if (st == UCCL_OK)
        st = check_gpu_index(engine->gpu_index);
    return st;
}
