/* Remote descriptors: 64 bytes, little-endian, self-checking.
 *   0 magic "UCRD"  4 version  5 mem_type  6 flags(2)  8 engine_id
 *  16 region_id    24 addr    32 len      40 rkey[16] 56 device(4)  60 fnv1a32 of 0..59 */
#include <string.h>

#include "core.h"

#define RDESC_MAGIC 0x44524355u
#define RDESC_VERSION 1
#define RDESC_NO_DEVICE 0xffffffffu

void uccl_rdesc_encode(const uccl_rdesc_fields_t *f, uccl_rdesc_t *rdesc)
{
    uint8_t *p = rdesc->bytes;

    memset(p, 0, UCCL_RDESC_SIZE);
    uccl_put_u32(p + 0, RDESC_MAGIC);
    p[4] = RDESC_VERSION;
    p[5] = (uint8_t)f->mem_type;
    uccl_put_u64(p + 8, f->engine_id);
    uccl_put_u64(p + 16, f->region_id);
    uccl_put_u64(p + 24, f->addr);
    uccl_put_u64(p + 32, f->len);
    memcpy(p + 40, f->rkey, UCCL_TP_RKEY_SIZE);
    uccl_put_u32(p + 56, f->device < 0 ? RDESC_NO_DEVICE : (uint32_t)f->device);
    uccl_put_u32(p + 60, uccl_fnv1a32(p, 60));
}

uccl_status_t uccl_rdesc_decode(const uccl_rdesc_t *rdesc, uccl_rdesc_fields_t *f)
{
    const uint8_t *p;
    uint32_t device;

    if (rdesc == NULL || f == NULL)
        return UCCL_ERR_INVALID_PARAM;
    p = rdesc->bytes;
    if (uccl_get_u32(p) != RDESC_MAGIC || uccl_get_u32(p + 60) != uccl_fnv1a32(p, 60))
        return UCCL_ERR_BAD_DESC;
    if (p[4] != RDESC_VERSION)
        return UCCL_ERR_VERSION;
    if (p[5] > UCCL_MEM_ROCM || uccl_get_u16(p + 6) != 0)
        return UCCL_ERR_BAD_DESC;
    f->mem_type = (uccl_mem_type_t)p[5];
    f->engine_id = uccl_get_u64(p + 8);
    f->region_id = uccl_get_u64(p + 16);
    f->addr = uccl_get_u64(p + 24);
    f->len = uccl_get_u64(p + 32);
    memcpy(f->rkey, p + 40, UCCL_TP_RKEY_SIZE);
    device = uccl_get_u32(p + 56);
    f->device = device == RDESC_NO_DEVICE ? -1 : (int)(device & 0x7fffffff);
    if (f->addr + f->len < f->addr) /* wraps around the address space */
        return UCCL_ERR_BAD_DESC;
    return UCCL_OK;
}

uccl_status_t uccl_rdesc_info(const uccl_rdesc_t *rdesc, uccl_rdesc_info_t *info)
{
    uccl_rdesc_fields_t f;
    uccl_status_t st;

    if (info == NULL)
        return UCCL_ERR_INVALID_PARAM;
    st = uccl_rdesc_decode(rdesc, &f);
    if (st != UCCL_OK)
        return st;
    info->engine_id = f.engine_id;
    info->addr = f.addr;
    info->len = f.len;
    info->mem_type = f.mem_type;
    return UCCL_OK;
}
