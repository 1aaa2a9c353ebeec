/* libfabric memory registration as the provider's mr_mode asks: keys we
 * choose unless FI_MR_PROV_KEY, binding to the endpoint under
 * FI_MR_ENDPOINT, local descriptors (FI_MR_LOCAL), and virtual or offset
 * addressing (FI_MR_VIRT_ADDR); the key slot of remote descriptors and its
 * one parser. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ofi.h"

#define OFI_ACCESS (FI_SEND | FI_RECV | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE)

static unsigned ofi_bytes_of(uint64_t v)
{
    unsigned n = 1;

    while (n < 8 && (v >> (8 * n)) != 0)
        n++;
    return n;
}

size_t uccl_ofi_rkey_encode(uint64_t key, bool with_base, uint64_t base,
                            uint8_t rkey[UCCL_TP_RKEY_MAX])
{
    unsigned kb = ofi_bytes_of(key), bb = with_base ? ofi_bytes_of(base) : 0;

    if (1 + kb + bb > UCCL_TP_RKEY_MAX)
        return 0;
    rkey[0] = (uint8_t)(kb | bb << 4);
    for (unsigned i = 0; i < kb; i++)
        rkey[1 + i] = (uint8_t)(key >> (8 * i));
    for (unsigned i = 0; i < bb; i++)
        rkey[1 + kb + i] = (uint8_t)(base >> (8 * i));
    return 1 + kb + bb;
}

uccl_status_t uccl_ofi_rkey_parse(const uint8_t *rkey, size_t len, uint64_t *key, uint64_t *base)
{
    unsigned kb, bb;

    *key = 0;
    *base = 0;
    if (len < 2)
        return UCCL_ERR_BAD_DESC;
    kb = rkey[0] & 15u;
    bb = rkey[0] >> 4;
    if (kb < 1 || kb > 8 || bb > 8 || len != 1 + (size_t)kb + bb)
        return UCCL_ERR_BAD_DESC;
    for (unsigned i = 0; i < kb; i++)
        *key |= (uint64_t)rkey[1 + i] << (8 * i);
    for (unsigned i = 0; i < bb; i++)
        *base |= (uint64_t)rkey[1 + kb + i] << (8 * i);
    return UCCL_OK;
}

/* Register [addr, addr+len) with the domain; bound to our endpoint and
 * enabled when the provider keeps memory regions per endpoint. */
static uccl_status_t ofi_mr_reg(tp_ofi_t *tp, void *addr, size_t len, uint64_t key,
                                struct fid_mr **mr)
{
    struct iovec iov = {.iov_base = addr, .iov_len = len};
    struct fi_mr_attr attr = {
        .mr_iov = &iov,
        .iov_count = 1,
        .access = OFI_ACCESS,
        .requested_key = key,
        .iface = FI_HMEM_SYSTEM,
    };
    int rc = fi_mr_regattr(tp->domain, &attr, 0, mr);

    if (rc != 0) {
        uccl_error("ofi (%s): fi_mr_regattr(%p, %zu bytes): %s", tp->prov, addr, len,
                   fi_strerror(-rc));
        *mr = NULL;
        return rc == -FI_ENOMEM ? UCCL_ERR_NO_MEMORY : UCCL_ERR_TRANSPORT;
    }
    if (tp->mr_mode & FI_MR_ENDPOINT) {
        rc = fi_mr_bind(*mr, &tp->ep->fid, 0);
        if (rc == 0)
            rc = fi_mr_enable(*mr);
        if (rc != 0) {
            uccl_error("ofi (%s): binding a memory region to the endpoint: %s", tp->prov,
                       fi_strerror(-rc));
            fi_close(&(*mr)->fid);
            *mr = NULL;
            return UCCL_ERR_TRANSPORT;
        }
    }
    return UCCL_OK;
}

static uint64_t ofi_next_key(tp_ofi_t *tp)
{
    uint64_t key = ++tp->next_key;

    if (tp->key_size < 8)
        key &= (1ull << (8 * tp->key_size)) - 1;
    return key;
}

uccl_status_t uccl_ofi_reg_buf(tp_ofi_t *tp, void *addr, size_t len, struct fid_mr **mr,
                               void **desc)
{
    uccl_status_t st = ofi_mr_reg(tp, addr, len, ofi_next_key(tp), mr);

    *desc = st == UCCL_OK ? fi_mr_desc(*mr) : NULL;
    return st;
}

uccl_status_t uccl_ofi_mem_reg(uccl_tp_t *base, void *addr, size_t len, uccl_mem_type_t type,
                               int device, uccl_tp_memh_t **out)
{
    tp_ofi_t *tp = (tp_ofi_t *)base;
    uccl_tp_memh_t *memh;
    uccl_status_t st;

    (void)device;
    if (type != UCCL_MEM_HOST) /* staged (ofi_stage.c) */
        return uccl_ofi_gpu_mem_reg(tp, out);
    memh = calloc(1, sizeof(*memh));
    if (memh == NULL)
        return UCCL_ERR_NO_MEMORY;
    st = ofi_mr_reg(tp, addr, len, ofi_next_key(tp), &memh->mr);
    if (st != UCCL_OK) {
        free(memh);
        return st;
    }
    memh->desc = fi_mr_desc(memh->mr);
    memh->key = fi_mr_key(memh->mr);
    memh->base = (uint64_t)(uintptr_t)addr;
    if (memh->key == FI_KEY_NOTAVAIL) {
        uccl_error("ofi (%s): the provider gives no key for a memory region (FI_MR_RAW?)",
                   tp->prov);
        uccl_ofi_mem_dereg(base, memh);
        return UCCL_ERR_UNSUPPORTED;
    }
    *out = memh;
    return UCCL_OK;
}

void uccl_ofi_mem_dereg(uccl_tp_t *base, uccl_tp_memh_t *memh)
{
    tp_ofi_t *tp = (tp_ofi_t *)base;
    int rc;

    if (memh == NULL)
        return;
    if (memh->mr != NULL && (rc = fi_close(&memh->mr->fid)) != 0)
        uccl_warn("ofi (%s): closing a memory region: %s", tp->prov, fi_strerror(-rc));
    free(memh);
}

size_t uccl_ofi_mem_pack(uccl_tp_t *base, uccl_tp_memh_t *memh, uint8_t rkey[UCCL_TP_RKEY_MAX])
{
    tp_ofi_t *tp = (tp_ofi_t *)base;
    size_t n;

    if (memh == NULL || memh->mr == NULL)
        return 0;
    n = uccl_ofi_rkey_encode(memh->key, !(tp->mr_mode & FI_MR_VIRT_ADDR), memh->base, rkey);
    if (n == 0)
        uccl_warn("ofi (%s): key 0x%llx and base do not fit a descriptor slot: this region is "
                  "not reachable one-sided through ofi", tp->prov, (unsigned long long)memh->key);
    return n;
}
