/* MAPPED's slot layout (coll/mapped.c): where a writer's block lies in its
 * segment, how it is published and how a reader finds it complete. */
#ifndef UCCL_COLL_MAPPED_SLOT_H
#define UCCL_COLL_MAPPED_SLOT_H

#include <stdatomic.h>
#include <string.h>

#include "mapped.h"

/* A small slot is SMALL_LINES cache lines; each line holds LINE_DATA bytes
 * of the block and, in its last 8 bytes, a flag: the call number and the
 * block's length (flag_word), stored with release after the line's bytes.
 * A block of up to LINE_DATA bytes is one line, flag included; a larger
 * one is as many lines, each published by its own flag, so that a reader
 * asks for all of them at once (their transfers overlap) instead of the
 * data's lines after the flag's (one transfer after the other: coll14
 * measured 64 B at 0.26-0.32 us a call against 0.16-0.20 at 8 B, header
 * and 64 B of data spanning two lines). A block above SMALL_CAP lies in
 * the slot's own region (the big slot); line 0 then holds its length in
 * bytes 0..7 and the flag says LEN_BIG. The small slots of one writer's
 * lane (the slot index k) lie side by side for consecutive calls (buffer
 * p, p + 1, ...), 128-byte aligned. */
#ifndef SMALL_LINES
#define SMALL_LINES 6 /* a small slot: 384 bytes, up to 336 of them data */
#endif
#define LINE_DATA (LINE - 8)
#define SMALL_STRIDE ((size_t)SMALL_LINES * LINE)
#define SMALL_CAP ((size_t)SMALL_LINES * LINE_DATA)
/* The flag: call number << LEN_BITS | length (LEN_BIG: in the big slot).
 * The call number keeps its low 48 bits: a slot's flag equals call m's
 * only for m itself (the slot last held m - depth, or zeros before its
 * first use, which a call of 0 bytes would match after 2^48 calls). */
#define LEN_BITS 16
#define LEN_BIG ((1u << LEN_BITS) - 1)
_Static_assert(SMALL_CAP < LEN_BIG, "a small slot's length fits the flag");
_Static_assert(SMALL_STRIDE % 128 == 0, "small slots keep 128-byte line pairs");
/* A reader waiting for a block loads its flags only: prefetching the big
 * slot's lines on each look (coll14's poll prefetch) took them from the
 * writer while it wrote them; without it np 4 allgather, bcast and
 * scatter took 0.75-0.81x the time (geomean over 8 B-4 KiB) and np 2
 * 0.92-1.05x (coll15-H200host, run 2). */
/* The writer, after a call, prefetches for writing the lines of the same
 * slots of the next buffer when every reader acked it (the local copy of
 * the acks says so): the readers' copies of those lines are invalidated
 * then, not when the next call's stores wait for them. */
#ifndef MAPPED_PREFETCHW
#define MAPPED_PREFETCHW 1
#endif
/* Bytes of a big block prefetched at most: by a reader, the same slot
 * MAPPED_PF_AHEAD buffers on (PF_READ_MAX); by the writer, for writing,
 * the next buffer's (PF_WRITE_MAX). The writer's was 1 KiB too: the
 * rest of a 2-4 KiB block then waited for ownership of its lines when
 * the call stored it, and a scatter root (which also copies its own
 * block each call: more work than a bcast root or a gather writer) fell
 * behind its reader: np 2 scatter 2 KiB took 0.64-0.67 us a call, bcast
 * 0.49-0.68, gather 0.21-0.41. With 4 KiB, in one run against main: np 2
 * scatter 0.67x / 0.69x main's time at 2 / 4 KiB, bcast 0.82x / 0.89x,
 * np 4 bcast 0.86x (coll18-H200host). A reader's 4 KiB measured worse:
 * np 2 gather 1.30x / 1.26x main's at 2 / 4 KiB. */
#ifndef PF_READ_MAX
#define PF_READ_MAX 1024
#endif
#ifndef PF_WRITE_MAX
#define PF_WRITE_MAX 4096
#endif

/* Prefetch for writing: the line comes owned. x86: PREFETCHW, used only
 * where CPUID has it (M->prefetchw; GCC's builtin emits it only for such
 * targets, the assembler takes it on any). */
static inline void prefetch_w(const void *p)
{
#if defined(__x86_64__) && defined(__GNUC__)
    __asm__ volatile("prefetchw %0" : : "m"(*(const char *)p));
#else
    __builtin_prefetch(p, 1, 3);
#endif
}

static inline uint64_t flag_word(uint64_t m, size_t len)
{
    return m << LEN_BITS | (len <= SMALL_CAP ? len : LEN_BIG);
}

static inline _Atomic uint64_t *line_flag(char *line)
{
    return (_Atomic uint64_t *)(line + LINE_DATA);
}

/* Lines of a small block of len bytes (a block of 0 bytes: the flag's). */
static inline size_t small_lines(size_t len)
{
    return len == 0 ? 1 : (len + LINE_DATA - 1) / LINE_DATA;
}

/* The acks' lines, rounded up to 128 bytes. */
static inline size_t ack_area(int n)
{
    return (size_t)((n + 1) & ~1) * LINE;
}

/* A big slot's stride: the slot, plus two lines so that the slots of one
 * buffer do not all start in the same cache set. */
static inline size_t big_stride(size_t slot)
{
    return slot + 2 * LINE;
}

static inline size_t seg_bytes(int n, int depth, size_t slot)
{
    return ack_area(n) + (size_t)depth * (size_t)n * (SMALL_STRIDE + big_stride(slot));
}

static inline char *slot_hdr(const coll_mapped_t *M, char *seg, int n, int p, int k)
{
    return seg + ack_area(n) + ((size_t)k * (size_t)M->depth + (size_t)p) * SMALL_STRIDE;
}

static inline char *slot_big(const coll_mapped_t *M, char *seg, int n, int p, int k)
{
    return seg + ack_area(n) + (size_t)M->depth * (size_t)n * SMALL_STRIDE +
           ((size_t)p * (size_t)n + (size_t)k) * big_stride(M->slot);
}

/* Call m's block of len bytes into small slot h (its big slot big). */
static inline void slot_write(char *h, char *big, const char *src, size_t len, uint64_t m)
{
    uint64_t w = flag_word(m, len);
    size_t off = 0;

    if (len > SMALL_CAP) {
        memcpy(big, src, len);
        *(uint64_t *)h = len;
        atomic_store_explicit(line_flag(h), w, memory_order_release);
        return;
    }
    for (; len - off > LINE_DATA; off += LINE_DATA, h += LINE) {
        memcpy(h, src + off, LINE_DATA);
        atomic_store_explicit(line_flag(h), w, memory_order_release);
    }
    if (len > off)
        memcpy(h, src + off, len - off);
    atomic_store_explicit(line_flag(h), w, memory_order_release);
}

/* Has call m's block in small slot h come whole? *len: the writer's
 * length. The flags of the lines a block of want bytes has are all loaded
 * before any is tested, so that their misses overlap; where line 0 says
 * call m with another length, the writer's lines are waited for. */
static inline bool slot_ready(char *h, uint64_t m, size_t want, size_t *len)
{
    uint64_t w = flag_word(m, want), w0;
    size_t nl = want <= SMALL_CAP ? small_lines(want) : 1, l;
    bool all = true;

    for (size_t i = 0; i < nl; i++)
        all &= atomic_load_explicit(line_flag(h + i * LINE), memory_order_acquire) == w;
    if (all) { /* a big block's flag says LEN_BIG whatever its length */
        *len = want > SMALL_CAP ? *(const uint64_t *)h : want;
        return true;
    }
    w0 = atomic_load_explicit(line_flag(h), memory_order_acquire);
    if (w0 >> LEN_BITS != (m << LEN_BITS) >> LEN_BITS)
        return false; /* not published yet */
    l = w0 & LEN_BIG;
    if (l == LEN_BIG) {
        *len = *(const uint64_t *)h;
        return true;
    }
    for (size_t i = 1; i < small_lines(l); i++)
        if (atomic_load_explicit(line_flag(h + i * LINE), memory_order_acquire) != w0)
            return false;
    *len = l;
    return true;
}

/* The first len bytes of a published block of wlen bytes (len <= wlen). */
static inline void slot_read(char *dst, const char *h, const char *big, size_t wlen, size_t len)
{
    size_t off = 0;

    if (wlen > SMALL_CAP) {
        memcpy(dst, big, len);
        return;
    }
    for (; len - off > LINE_DATA; off += LINE_DATA, h += LINE)
        memcpy(dst + off, h, LINE_DATA);
    if (len > off)
        memcpy(dst + off, h, len - off);
}

/* Prefetch the lines of slot (p, k) that a block of len bytes takes (up
 * to PF_WRITE_MAX or PF_READ_MAX bytes of it): its small slot's lines, or
 * the flag's line and the big slot's; for writing (MAPPED_PREFETCHW) or
 * for reading. */
static inline void slot_prefetch(const coll_mapped_t *M, char *seg, int n, int p, int k,
                                 size_t len, bool write)
{
    char *h = slot_hdr(M, seg, n, p, k), *d = h, *end;

    if (len > SMALL_CAP) {
        write ? prefetch_w(h) : __builtin_prefetch(h, 0, 3);
        d = slot_big(M, seg, n, p, k);
        size_t cap = write ? PF_WRITE_MAX : PF_READ_MAX;
        end = d + (len < cap ? len : cap);
    } else {
        end = h + small_lines(len) * LINE;
    }
    for (char *l = d - (uintptr_t)d % LINE; l < end; l += LINE)
        write ? prefetch_w(l) : __builtin_prefetch(l, 0, 3);
}

#endif
