/* Remote descriptors: 64 bytes, little-endian, self-checking, parsed here only.
 *
 * Every version keeps the frame: magic "UCRD" at 0, version at 4, fnv1a32 of
 * bytes 0..59 at 60, so that a sound descriptor of another version is told
 * apart (UCCL_ERR_VERSION) from a damaged one (UCCL_ERR_BAD_DESC).
 *
 * Version 2:
 *   0 magic "UCRD"   4 version (2)   5 mem_type   6 device (u16, 0xffff = none)
 *   8 engine_id     16 region_id    24 addr      32 len
 *  40 key slots (UCCL_RDESC_KEY_AREA = 20 bytes)  60 fnv1a32 of 0..59
 * Key slots, one per transport of the packing engine that needs remote keys
 * (verbs, later ofi: both may serve one region of one engine), back to back:
 *   owner (UCCL_TP_KEY_*, 1 byte)  len (1 byte, 1..16)  key (len bytes)
 * An owner byte 0 (or the end of the area) ends the slots; every byte after
 * the last slot is 0, and an owner appears at most once. Budget: verbs takes
 * 6 bytes (a 4-byte rkey); an ofi slot with an 8-byte provider key takes 10,
 * so verbs + ofi fit with 4 bytes to spare. An ofi provider that addresses
 * regions by offset (no FI_MR_VIRT_ADDR) also needs the region's base: it
 * carries it as addr - base in its key bytes (12 bytes: fits beside verbs
 * only while that difference fits in 4 bytes), or the layout grows a version.
 *
 * Version 1 (refused with UCCL_ERR_VERSION): one 16-byte key area at 40 with
 * no owner, flags at 6, a 4-byte device at 56. */
#include <string.h>

#include "core.h"

#define RDESC_MAGIC 0x44524355u
#define RDESC_SUM_OFF 60
#define RDESC_KEYS_OFF 40
#define RDESC_NO_DEVICE 0xffffu

uccl_status_t uccl_rdesc_encode(const uccl_rdesc_fields_t *f, uccl_rdesc_t *rdesc)
{
    uint8_t *p = rdesc->bytes, *k = p + RDESC_KEYS_OFF;
    size_t used = 0;

    if (f->nkeys < 0 || f->nkeys > UCCL_RDESC_MAX_KEYS || f->device > 0xfffe)
        return UCCL_ERR_INVALID_PARAM;
    memset(p, 0, UCCL_RDESC_SIZE);
    for (int i = 0; i < f->nkeys; i++) {
        const uccl_rdesc_key_t *key = &f->keys[i];

        if (key->owner == UCCL_TP_KEY_NONE || key->len == 0 || key->len > UCCL_TP_RKEY_MAX ||
            used + 2 + key->len > UCCL_RDESC_KEY_AREA)
            return UCCL_ERR_INVALID_PARAM;
        for (int j = 0; j < i; j++)
            if (f->keys[j].owner == key->owner)
                return UCCL_ERR_INVALID_PARAM;
        k[used] = key->owner;
        k[used + 1] = key->len;
        memcpy(k + used + 2, key->key, key->len);
        used += 2 + (size_t)key->len;
    }
    uccl_put_u32(p + 0, RDESC_MAGIC);
    p[4] = UCCL_RDESC_VERSION;
    p[5] = (uint8_t)f->mem_type;
    uccl_put_u16(p + 6, f->device < 0 ? RDESC_NO_DEVICE : (uint16_t)f->device);
    uccl_put_u64(p + 8, f->engine_id);
    uccl_put_u64(p + 16, f->region_id);
    uccl_put_u64(p + 24, f->addr);
    uccl_put_u64(p + 32, f->len);
    uccl_put_u32(p + RDESC_SUM_OFF, uccl_fnv1a32(p, RDESC_SUM_OFF));
    return UCCL_OK;
}

/* The key slots of a sealed version-2 descriptor. */
static uccl_status_t rdesc_decode_keys(const uint8_t *k, uccl_rdesc_fields_t *f)
{
    size_t pos = 0;

    f->nkeys = 0;
    while (pos + 2 <= UCCL_RDESC_KEY_AREA && k[pos] != UCCL_TP_KEY_NONE) {
        uccl_rdesc_key_t *key = &f->keys[f->nkeys];

        if (k[pos + 1] == 0 || k[pos + 1] > UCCL_TP_RKEY_MAX ||
            pos + 2 + k[pos + 1] > UCCL_RDESC_KEY_AREA || uccl_rdesc_key_find(f, k[pos]) != NULL)
            return UCCL_ERR_BAD_DESC;
        key->owner = k[pos];
        key->len = k[pos + 1];
        memset(key->key, 0, sizeof(key->key));
        memcpy(key->key, k + pos + 2, key->len);
        f->nkeys++;
        pos += 2 + (size_t)key->len;
    }
    for (; pos < UCCL_RDESC_KEY_AREA; pos++) /* one encoding per descriptor */
        if (k[pos] != 0)
            return UCCL_ERR_BAD_DESC;
    return UCCL_OK;
}

uccl_status_t uccl_rdesc_decode(const uccl_rdesc_t *rdesc, uccl_rdesc_fields_t *f)
{
    const uint8_t *p;
    uint16_t device;

    if (rdesc == NULL || f == NULL)
        return UCCL_ERR_INVALID_PARAM;
    p = rdesc->bytes;
    if (uccl_get_u32(p) != RDESC_MAGIC ||
        uccl_get_u32(p + RDESC_SUM_OFF) != uccl_fnv1a32(p, RDESC_SUM_OFF))
        return UCCL_ERR_BAD_DESC;
    if (p[4] != UCCL_RDESC_VERSION)
        return UCCL_ERR_VERSION;
    if (p[5] > UCCL_MEM_ROCM)
        return UCCL_ERR_BAD_DESC;
    f->mem_type = (uccl_mem_type_t)p[5];
    device = uccl_get_u16(p + 6);
    f->device = device == RDESC_NO_DEVICE ? -1 : (int)device;
    f->engine_id = uccl_get_u64(p + 8);
    f->region_id = uccl_get_u64(p + 16);
    f->addr = uccl_get_u64(p + 24);
    f->len = uccl_get_u64(p + 32);
    if (f->addr + f->len < f->addr) /* wraps around the address space */
        return UCCL_ERR_BAD_DESC;
    return rdesc_decode_keys(p + RDESC_KEYS_OFF, f);
}

const uccl_rdesc_key_t *uccl_rdesc_key_find(const uccl_rdesc_fields_t *f, uint8_t owner)
{
    for (int i = 0; i < f->nkeys; i++)
        if (f->keys[i].owner == owner)
            return &f->keys[i];
    return NULL;
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
