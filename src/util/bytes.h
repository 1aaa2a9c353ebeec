/* Little-endian byte packing for wire formats and blobs (address, remote
 * descriptor, transport headers): explicit bytes, no struct overlays. */
#ifndef UCCL_UTIL_BYTES_H
#define UCCL_UTIL_BYTES_H

#include <stdint.h>
#include <string.h>

static inline void uccl_put_u16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); }
static inline uint16_t uccl_get_u16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }
/* A little-endian host (every target here) moves the whole value at once:
 * GCC -O2 compiles the byte loops below as loops (8 stores or loads per
 * u64, ~60 instructions), and control messages pack and parse several. */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
static inline void uccl_put_u32(uint8_t *p, uint32_t v) { memcpy(p, &v, 4); }
static inline void uccl_put_u64(uint8_t *p, uint64_t v) { memcpy(p, &v, 8); }
static inline uint32_t uccl_get_u32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}
static inline uint64_t uccl_get_u64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}
#else
static inline void uccl_put_u32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}
static inline void uccl_put_u64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}
static inline uint32_t uccl_get_u32(const uint8_t *p)
{
    uint32_t v = 0;
    for (int i = 3; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}
static inline uint64_t uccl_get_u64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}
#endif

#endif
