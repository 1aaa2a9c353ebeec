/* Engine address blobs: versioned, self-describing, checksummed.
 *   0 magic "UCAD"  4 version(2)  6 total_len(2)  8 engine_id  16 host_id
 *  24 pid(4)  28 oob ipv4(4, network order)  32 oob port(2, host order)
 *  34 hostname_len(1)  35 ntp(1)  36 hostname
 *  then ntp x { name_len(1) name addr_len(2) addr }
 *  then the admission secret (UCCL_SECRET_SIZE; all zero in the copy a
 *  connecting engine sends of its own blob)
 *  then fnv1a32 of everything before (4). */
#include <arpa/inet.h>
#include <string.h>

#include "core.h"

#define ADDR_MAGIC 0x44414355u
#define ADDR_VERSION 2 /* 2: the admission secret */
#define ADDR_HEADER 36
#define ADDR_TP_ENTRY_MAX 256

static uccl_status_t address_pack(const uccl_engine_t *engine, void *buf, size_t *len,
                                  bool with_secret)
{
    uint8_t tmp[UCCL_ADDRESS_MAX];
    size_t host_len = strlen(engine->hostname);
    size_t pos;

    if (len == NULL)
        return UCCL_ERR_INVALID_PARAM;
    uccl_put_u32(tmp, ADDR_MAGIC);
    uccl_put_u16(tmp + 4, ADDR_VERSION);
    uccl_put_u64(tmp + 8, engine->id);
    uccl_put_u64(tmp + 16, engine->host_id);
    uccl_put_u32(tmp + 24, (uint32_t)engine->pid);
    memcpy(tmp + 28, &engine->oob_addr.sin_addr.s_addr, 4);
    uccl_put_u16(tmp + 32, ntohs(engine->oob_addr.sin_port));
    tmp[34] = (uint8_t)host_len;
    tmp[35] = (uint8_t)engine->ntp;
    memcpy(tmp + ADDR_HEADER, engine->hostname, host_len);
    pos = ADDR_HEADER + host_len;
    for (int i = 0; i < engine->ntp; i++) {
        const uccl_tp_t *tp = engine->tp[i];
        size_t name_len = strlen(tp->ops->name);
        size_t tp_len = ADDR_TP_ENTRY_MAX;
        uint8_t entry[ADDR_TP_ENTRY_MAX];
        uccl_status_t st = tp->ops->address((uccl_tp_t *)tp, entry, &tp_len);

        if (st != UCCL_OK)
            return st;
        if (pos + 1 + name_len + 2 + tp_len + 4 > sizeof(tmp))
            return UCCL_ERR_NO_MEMORY;
        tmp[pos++] = (uint8_t)name_len;
        memcpy(tmp + pos, tp->ops->name, name_len);
        pos += name_len;
        uccl_put_u16(tmp + pos, (uint16_t)tp_len);
        pos += 2;
        memcpy(tmp + pos, entry, tp_len);
        pos += tp_len;
    }
    if (pos + UCCL_SECRET_SIZE + 4 > sizeof(tmp))
        return UCCL_ERR_NO_MEMORY;
    if (with_secret)
        memcpy(tmp + pos, engine->secret, UCCL_SECRET_SIZE);
    else
        memset(tmp + pos, 0, UCCL_SECRET_SIZE);
    pos += UCCL_SECRET_SIZE;
    uccl_put_u16(tmp + 6, (uint16_t)(pos + 4));
    uccl_put_u32(tmp + pos, uccl_fnv1a32(tmp, pos));
    pos += 4;
    if (buf == NULL || *len < pos) {
        *len = pos;
        return UCCL_ERR_BUFFER_TOO_SMALL;
    }
    memcpy(buf, tmp, pos);
    *len = pos;
    return UCCL_OK;
}

uccl_status_t uccl_address_pack(const uccl_engine_t *engine, void *buf, size_t *len)
{
    return address_pack(engine, buf, len, true);
}

uccl_status_t uccl_address_pack_public(const uccl_engine_t *engine, void *buf, size_t *len)
{
    return address_pack(engine, buf, len, false);
}

uccl_status_t uccl_address_parse(const void *buf, size_t len, uccl_address_t *out)
{
    const uint8_t *p = buf;
    size_t total, pos, host_len;

    if (buf == NULL || out == NULL)
        return UCCL_ERR_INVALID_PARAM;
    if (len < ADDR_HEADER + 4 || uccl_get_u32(p) != ADDR_MAGIC)
        return UCCL_ERR_BAD_ADDRESS;
    out->version = uccl_get_u16(p + 4);
    if (out->version != ADDR_VERSION)
        return UCCL_ERR_VERSION;
    total = uccl_get_u16(p + 6);
    if (total < ADDR_HEADER + 4 || total > len || uccl_get_u32(p + total - 4) != uccl_fnv1a32(p, total - 4))
        return UCCL_ERR_BAD_ADDRESS;
    total -= 4; /* parse only what the checksum covers */
    out->engine_id = uccl_get_u64(p + 8);
    out->host_id = uccl_get_u64(p + 16);
    out->pid = uccl_get_u32(p + 24);
    memset(&out->oob, 0, sizeof(out->oob));
    out->oob.sin_family = AF_INET;
    memcpy(&out->oob.sin_addr.s_addr, p + 28, 4);
    out->oob.sin_port = htons(uccl_get_u16(p + 32));
    host_len = p[34];
    out->ntp = p[35];
    if (host_len >= UCCL_HOSTNAME_MAX || out->ntp > UCCL_TP_MAX || ADDR_HEADER + host_len > total ||
        out->oob.sin_port == 0)
        return UCCL_ERR_BAD_ADDRESS;
    memcpy(out->hostname, p + ADDR_HEADER, host_len);
    out->hostname[host_len] = '\0';
    pos = ADDR_HEADER + host_len;
    for (int i = 0; i < out->ntp; i++) {
        size_t name_len, tp_len;

        if (pos + 1 > total)
            return UCCL_ERR_BAD_ADDRESS;
        name_len = p[pos++];
        if (name_len == 0 || name_len >= sizeof(out->tp[i].name) || pos + name_len + 2 > total)
            return UCCL_ERR_BAD_ADDRESS;
        memcpy(out->tp[i].name, p + pos, name_len);
        out->tp[i].name[name_len] = '\0';
        pos += name_len;
        tp_len = uccl_get_u16(p + pos);
        pos += 2;
        if (tp_len > ADDR_TP_ENTRY_MAX || pos + tp_len > total)
            return UCCL_ERR_BAD_ADDRESS;
        out->tp[i].addr = p + pos;
        out->tp[i].len = tp_len;
        pos += tp_len;
    }
    if (pos + UCCL_SECRET_SIZE != total)
        return UCCL_ERR_BAD_ADDRESS;
    memcpy(out->secret, p + pos, UCCL_SECRET_SIZE);
    return UCCL_OK;
}
