/* The accessors of the transport SPI (tp_api.h): the little a transport may
 * read of a connection or a region, which stay opaque to it. */
#include "core.h"

uccl_status_t uccl_conn_status(const uccl_conn_t *conn)
{
    return conn->state;
}

const char *uccl_conn_peer_host(const uccl_conn_t *conn)
{
    return conn->peer_host;
}

int uccl_conn_peer_pid(const uccl_conn_t *conn)
{
    return conn->peer_pid;
}

void *uccl_region_addr(const uccl_region_t *region)
{
    return region->addr;
}

size_t uccl_region_len(const uccl_region_t *region)
{
    return region->len;
}

uccl_mem_type_t uccl_region_mem_type(const uccl_region_t *region)
{
    return region->mem_type;
}

uint64_t uccl_region_id(const uccl_region_t *region)
{
    return region->id;
}

uccl_tp_memh_t *uccl_region_memh(const uccl_region_t *region, const uccl_tp_t *tp)
{
    return region->memh[tp->index];
}

void uccl_region_hold(uccl_region_t *region)
{
    region->held++;
}

void uccl_region_unhold(uccl_region_t *region)
{
    region->held--;
}
