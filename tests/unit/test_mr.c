/* Unit tests of memory registration and the registration cache
 * (src/core/mr.c). This program supplies its own transport list with one
 * fake transport that counts mem_reg/mem_dereg calls and holds sends and RMA
 * until their endpoint goes, so the cache is observed exactly and a request
 * can be kept in flight, and a second one that only registers and packs a
 * key (two key slots in one descriptor), both in mr_fake_tp.h; no real
 * transport is linked in. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/core.h"
#include "mr_fake_tp.h"
#include "unit.h"

/* ------------------------------------------------------------ fixtures */

static uccl_engine_t *engine;
static char buf[1 << 16];

static int suite_init(void)
{
    unsetenv("UCCL_RCACHE");
    unsetenv("UCCL_TRANSPORTS");
    return uccl_engine_create(NULL, &engine) == UCCL_OK ? 0 : 1;
}

static int suite_cleanup(void)
{
    uccl_status_t st = uccl_engine_destroy(engine);
    engine = NULL;
    /* the engine released every registration it still held */
    return st == UCCL_OK && fake_live_memh == 0 && keyed_live_memh == 0 ? 0 : 1;
}

static void counters_reset(void) { fake_reg_calls = fake_dereg_calls = 0; }

/* ------------------------------------------------------------ tests */

static void test_same_range_shares_region(void)
{
    uccl_mr_t *a, *b, *c;

    counters_reset();
    UNIT_ASSERT_STATUS(uccl_mr_reg(engine, buf, 4096, 0, &a), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_mr_reg(engine, buf, 4096, 0, &b), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_mr_reg(engine, buf, 4096, UCCL_MR_LOCAL_ONLY, &c), UCCL_OK);
    CU_ASSERT_PTR_NOT_EQUAL(a, b);
    CU_ASSERT_PTR_EQUAL(a->region, b->region);
    CU_ASSERT_PTR_EQUAL(a->region, c->region);
    CU_ASSERT_EQUAL(a->region->refcount, 3);
    CU_ASSERT_EQUAL(fake_reg_calls, 1);
    /* release in registration order: the region lives until the last handle */
    UNIT_ASSERT_STATUS(uccl_mr_dereg(a), UCCL_OK);
    CU_ASSERT_EQUAL(b->region->refcount, 2);
    UNIT_ASSERT_STATUS(uccl_mr_dereg(b), UCCL_OK);
    CU_ASSERT_EQUAL(fake_dereg_calls, 0);
    UNIT_ASSERT_STATUS(uccl_mr_dereg(c), UCCL_OK);
    CU_ASSERT_EQUAL(fake_dereg_calls, 1);
    /* registering again after the last release makes a fresh region */
    UNIT_ASSERT_STATUS(uccl_mr_reg(engine, buf, 4096, 0, &a), UCCL_OK);
    CU_ASSERT_EQUAL(fake_reg_calls, 2);
    CU_ASSERT_EQUAL(a->region->refcount, 1);
    UNIT_ASSERT_STATUS(uccl_mr_dereg(a), UCCL_OK);
}

static void test_reverse_dereg_order(void)
{
    uccl_mr_t *a, *b;

    counters_reset();
    UNIT_ASSERT_STATUS(uccl_mr_reg(engine, buf + 64, 100, 0, &a), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_mr_reg(engine, buf + 64, 100, 0, &b), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_mr_dereg(b), UCCL_OK);
    CU_ASSERT_EQUAL(fake_dereg_calls, 0);
    CU_ASSERT_EQUAL(a->region->refcount, 1);
    UNIT_ASSERT_STATUS(uccl_mr_dereg(a), UCCL_OK);
    CU_ASSERT_EQUAL(fake_dereg_calls, 1);
}

static void test_different_ranges_separate(void)
{
    uccl_mr_t *a, *b, *c;

    counters_reset();
    UNIT_ASSERT_STATUS(uccl_mr_reg(engine, buf, 4096, 0, &a), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_mr_reg(engine, buf, 8192, 0, &b), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_mr_reg(engine, buf + 1, 4096, 0, &c), UCCL_OK);
    CU_ASSERT_PTR_NOT_EQUAL(a->region, b->region);
    CU_ASSERT_PTR_NOT_EQUAL(a->region, c->region);
    CU_ASSERT_NOT_EQUAL(a->region->id, b->region->id);
    CU_ASSERT_NOT_EQUAL(a->region->id, c->region->id);
    CU_ASSERT_EQUAL(fake_reg_calls, 3);
    UNIT_ASSERT_STATUS(uccl_mr_dereg(b), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_mr_dereg(a), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_mr_dereg(c), UCCL_OK);
    CU_ASSERT_EQUAL(fake_dereg_calls, 3);
}

static void test_rcache_off(void)
{
    uccl_engine_t *e;
    uccl_mr_t *a, *b;

    setenv("UCCL_RCACHE", "0", 1);
    UNIT_ASSERT_STATUS(uccl_engine_create(NULL, &e), UCCL_OK);
    unsetenv("UCCL_RCACHE");
    if (e == NULL)
        return;
    counters_reset();
    UNIT_ASSERT_STATUS(uccl_mr_reg(e, buf, 4096, 0, &a), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_mr_reg(e, buf, 4096, 0, &b), UCCL_OK);
    CU_ASSERT_PTR_NOT_EQUAL(a->region, b->region);
    CU_ASSERT_EQUAL(fake_reg_calls, 2);
    UNIT_ASSERT_STATUS(uccl_mr_dereg(a), UCCL_OK);
    CU_ASSERT_EQUAL(fake_dereg_calls, 1);
    UNIT_ASSERT_STATUS(uccl_mr_dereg(b), UCCL_OK);
    CU_ASSERT_EQUAL(fake_dereg_calls, 2);
    /* left registered on purpose: destroy releases it */
    UNIT_ASSERT_STATUS(uccl_mr_reg(e, buf, 4096, 0, &a), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_engine_destroy(e), UCCL_OK);
    CU_ASSERT_EQUAL(fake_dereg_calls, 3);
}

static void test_double_dereg(void)
{
    uccl_mr_t *a, *b;
    uccl_mr_attr_t attr;
    uccl_rdesc_t d;

    UNIT_ASSERT_STATUS(uccl_mr_reg(engine, buf, 512, 0, &a), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_mr_reg(engine, buf, 512, 0, &b), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_mr_dereg(a), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_mr_dereg(a), UCCL_ERR_INVALID_HANDLE);
    /* the second dereg of a must not have dropped b's reference */
    CU_ASSERT_EQUAL(b->region->refcount, 1);
    UNIT_ASSERT_STATUS(uccl_mr_query(a, &attr), UCCL_ERR_INVALID_HANDLE);
    UNIT_ASSERT_STATUS(uccl_mr_pack(a, 0, 1, &d), UCCL_ERR_INVALID_HANDLE);
    UNIT_ASSERT_STATUS(uccl_mr_dereg(b), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_mr_dereg(b), UCCL_ERR_INVALID_HANDLE);
    UNIT_ASSERT_STATUS(uccl_mr_dereg(NULL), UCCL_ERR_INVALID_HANDLE);
}

static void test_bad_reg_args(void)
{
    uccl_mr_t *mr = (uccl_mr_t *)0x1;

    counters_reset();
    UNIT_ASSERT_STATUS(uccl_mr_reg(engine, NULL, 16, 0, &mr), UCCL_ERR_INVALID_PARAM);
    UNIT_ASSERT_STATUS(uccl_mr_reg(engine, buf, 0, 0, &mr), UCCL_ERR_INVALID_PARAM);
    UNIT_ASSERT_STATUS(uccl_mr_reg(engine, (void *)(UINTPTR_MAX - 10), 100, 0, &mr),
                       UCCL_ERR_INVALID_PARAM);
    UNIT_ASSERT_STATUS(uccl_mr_reg(engine, buf, SIZE_MAX, 0, &mr), UCCL_ERR_INVALID_PARAM);
    UNIT_ASSERT_STATUS(uccl_mr_reg(engine, buf, 16, 0x80, &mr), UCCL_ERR_INVALID_PARAM);
    UNIT_ASSERT_STATUS(uccl_mr_reg(engine, buf, 16, 0, NULL), UCCL_ERR_INVALID_PARAM);
    UNIT_ASSERT_STATUS(uccl_mr_reg(NULL, buf, 16, 0, &mr), UCCL_ERR_INVALID_HANDLE);
    CU_ASSERT_PTR_EQUAL(mr, (uccl_mr_t *)0x1); /* nothing returned */
    CU_ASSERT_EQUAL(fake_reg_calls, 0);
}

/* Issue 20: unmapped host memory is refused at registration, before any
 * copy (ours, or one a peer's write makes) can touch it. */
static void test_unmapped_rejected(void)
{
    long page = sysconf(_SC_PAGESIZE);
    uint8_t *small = malloc(1u << 20);
    uint8_t *map = mmap(NULL, (size_t)page * 3, PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    uccl_mr_t *mr = (uccl_mr_t *)0x1;

    CU_ASSERT_FATAL(small != NULL && map != MAP_FAILED);
    counters_reset();
    UNIT_ASSERT_STATUS(uccl_mr_reg(engine, (void *)0x1000, 4096, 0, &mr), UCCL_ERR_INVALID_PARAM);
    UNIT_ASSERT_STATUS(uccl_mr_reg(engine, small, (size_t)64 << 30, 0, &mr), UCCL_ERR_INVALID_PARAM);
    /* a hole in the middle of a range */
    CU_ASSERT_FATAL(munmap(map + page, (size_t)page) == 0);
    UNIT_ASSERT_STATUS(uccl_mr_reg(engine, map, (size_t)page * 3, 0, &mr), UCCL_ERR_INVALID_PARAM);
    UNIT_ASSERT_STATUS(uccl_mr_reg(engine, map + page - 1, 2, 0, &mr), UCCL_ERR_INVALID_PARAM);
    CU_ASSERT_PTR_EQUAL(mr, (uccl_mr_t *)0x1);
    CU_ASSERT_EQUAL(fake_reg_calls, 0);
    /* the mapped parts, unaligned ends included, are fine */
    UNIT_ASSERT_STATUS(uccl_mr_reg(engine, map + 1, (size_t)page - 1, 0, &mr), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_mr_dereg(mr), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_mr_reg(engine, map + 2 * page, (size_t)page, 0, &mr), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_mr_dereg(mr), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_mr_reg(engine, small + 3, (1u << 20) - 3, 0, &mr), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_mr_dereg(mr), UCCL_OK);
    /* memory unmapped since: refused too */
    CU_ASSERT_FATAL(munmap(map + 2 * page, (size_t)page) == 0);
    UNIT_ASSERT_STATUS(uccl_mr_reg(engine, map + 2 * page, (size_t)page, 0, &mr), UCCL_ERR_INVALID_PARAM);
    munmap(map, (size_t)page);
    free(small);
}

static void test_query(void)
{
    uccl_mr_attr_t attr;
    uccl_mr_t *mr;

    UNIT_ASSERT_STATUS(uccl_mr_reg(engine, buf + 8, 1000, 0, &mr), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_mr_query(mr, &attr), UCCL_OK);
    CU_ASSERT_PTR_EQUAL(attr.addr, buf + 8);
    CU_ASSERT_EQUAL(attr.len, 1000);
    CU_ASSERT_EQUAL(attr.mem_type, UCCL_MEM_HOST);
    CU_ASSERT_EQUAL(attr.device, -1);
    UNIT_ASSERT_STATUS(uccl_mr_query(mr, NULL), UCCL_ERR_INVALID_PARAM);
    UNIT_ASSERT_STATUS(uccl_mr_query(NULL, &attr), UCCL_ERR_INVALID_HANDLE);
    UNIT_ASSERT_STATUS(uccl_mr_dereg(mr), UCCL_OK);
}

/* uccl_mem_free makes registrations over the memory stale; one of memory
 * allocated there later (40 MiB: above glibc's mmap threshold, so most
 * often at the same address) is a region of its own, never the stale one. */
static void test_mem_free_stale(void)
{
    size_t len = (size_t)40 << 20;
    uccl_mr_attr_t attr;
    uccl_mr_t *old, *mr;
    void *p, *q;

    UNIT_ASSERT_STATUS(uccl_mem_alloc(engine, UCCL_MEM_HOST, len, &p), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_mr_reg(engine, p, 4096, 0, &old), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_mr_query(old, &attr), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_mem_free(engine, p), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_mr_query(old, &attr), UCCL_ERR_STALE);
    CU_ASSERT_PTR_EQUAL(attr.addr, p);
    UNIT_ASSERT_STATUS(uccl_mem_alloc(engine, UCCL_MEM_HOST, len, &q), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_mr_reg(engine, q, 4096, 0, &mr), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_mr_query(mr, &attr), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_mr_dereg(mr), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_mr_dereg(old), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_mem_free(engine, q), UCCL_OK);
}

static void test_pack_bounds(void)
{
    uccl_rdesc_info_t info;
    uccl_rdesc_t d;
    uccl_mr_t *mr, *local;

    UNIT_ASSERT_STATUS(uccl_mr_reg(engine, buf, 1000, 0, &mr), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_mr_pack(mr, 100, 900, &d), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_rdesc_info(&d, &info), UCCL_OK);
    CU_ASSERT_EQUAL(info.engine_id, uccl_engine_id(engine));
    CU_ASSERT_EQUAL(info.addr, (uint64_t)(uintptr_t)(buf + 100));
    CU_ASSERT_EQUAL(info.len, 900);
    CU_ASSERT_EQUAL(info.mem_type, UCCL_MEM_HOST);
    UNIT_ASSERT_STATUS(uccl_mr_pack(mr, 0, 1000, &d), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_mr_pack(mr, 1000, 0, &d), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_mr_pack(mr, 0, 1001, &d), UCCL_ERR_OUT_OF_BOUNDS);
    UNIT_ASSERT_STATUS(uccl_mr_pack(mr, 1001, 0, &d), UCCL_ERR_OUT_OF_BOUNDS);
    UNIT_ASSERT_STATUS(uccl_mr_pack(mr, 999, 2, &d), UCCL_ERR_OUT_OF_BOUNDS);
    UNIT_ASSERT_STATUS(uccl_mr_pack(mr, 1, SIZE_MAX, &d), UCCL_ERR_OUT_OF_BOUNDS);
    UNIT_ASSERT_STATUS(uccl_mr_pack(mr, SIZE_MAX, 2, &d), UCCL_ERR_OUT_OF_BOUNDS);
    UNIT_ASSERT_STATUS(uccl_mr_pack(mr, 0, 1, NULL), UCCL_ERR_INVALID_PARAM);
    UNIT_ASSERT_STATUS(uccl_mr_pack(NULL, 0, 1, &d), UCCL_ERR_INVALID_HANDLE);
    UNIT_ASSERT_STATUS(uccl_mr_reg(engine, buf, 1000, UCCL_MR_LOCAL_ONLY, &local), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_mr_pack(local, 0, 1, &d), UCCL_ERR_INVALID_PARAM);
    /* the shared region does not make the LOCAL_ONLY handle packable, nor
     * the other handle unpackable */
    UNIT_ASSERT_STATUS(uccl_mr_pack(mr, 0, 1, &d), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_mr_dereg(local), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_mr_dereg(mr), UCCL_OK);
}

/* Each transport with remote keys gets its own slot, under its owner id. */
static void test_pack_key_slots(void)
{
    const uccl_rdesc_key_t *k;
    uccl_rdesc_fields_t f;
    uccl_rdesc_t d;
    uccl_mr_t *mr;
    uccl_tp_memh_t *memh;

    UNIT_ASSERT_STATUS(uccl_mr_reg(engine, buf, 3000, 0, &mr), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_mr_pack(mr, 10, 20, &d), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_rdesc_decode(&d, &f), UCCL_OK);
    CU_ASSERT_EQUAL(f.nkeys, 2);
    k = uccl_rdesc_key_find(&f, UCCL_TP_KEY_OFI); /* fake_ops: its memh pointer */
    CU_ASSERT_PTR_NOT_NULL_FATAL(k);
    CU_ASSERT_EQUAL_FATAL(k->len, sizeof(memh));
    memcpy(&memh, k->key, sizeof(memh));
    CU_ASSERT_PTR_NOT_NULL_FATAL(memh);
    CU_ASSERT_PTR_EQUAL(memh->addr, buf);
    k = uccl_rdesc_key_find(&f, UCCL_TP_KEY_VERBS); /* keyed_ops: the region length */
    CU_ASSERT_PTR_NOT_NULL_FATAL(k);
    CU_ASSERT_EQUAL(k->len, 4);
    CU_ASSERT_EQUAL(uccl_get_u32(k->key), 3000);
    UNIT_ASSERT_STATUS(uccl_mr_dereg(mr), UCCL_OK);
}

/* The target-side check transports use for incoming one-sided accesses. */
static void test_region_find(void)
{
    uint64_t base = (uint64_t)(uintptr_t)buf;
    uccl_region_t *region = NULL;
    uccl_mr_t *mr;
    uint64_t id;

    UNIT_ASSERT_STATUS(uccl_mr_reg(engine, buf, 1000, 0, &mr), UCCL_OK);
    id = mr->region->id;
    UNIT_ASSERT_STATUS(uccl_engine_region_find(engine, id, base, 1000, &region), UCCL_OK);
    CU_ASSERT_PTR_EQUAL(region, mr->region);
    UNIT_ASSERT_STATUS(uccl_engine_region_find(engine, id, base + 999, 1, &region), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_engine_region_find(engine, id, base + 999, 2, &region),
                       UCCL_ERR_REMOTE_ACCESS);
    UNIT_ASSERT_STATUS(uccl_engine_region_find(engine, id, base - 1, 1, &region),
                       UCCL_ERR_REMOTE_ACCESS);
    UNIT_ASSERT_STATUS(uccl_engine_region_find(engine, id, base + 1, UINT64_MAX, &region),
                       UCCL_ERR_REMOTE_ACCESS);
    UNIT_ASSERT_STATUS(uccl_engine_region_find(engine, id + 1000, base, 1, &region),
                       UCCL_ERR_REMOTE_ACCESS);
    UNIT_ASSERT_STATUS(uccl_mr_dereg(mr), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_engine_region_find(engine, id, base, 1, &region), UCCL_ERR_REMOTE_ACCESS);
}

/* Many distinct registrations, released in an interleaved order. */
static void test_churn(void)
{
    enum { N = 512 };
    static uccl_mr_t *mrs[N];

    counters_reset();
    for (int i = 0; i < N; i++)
        CU_ASSERT_EQUAL_FATAL(uccl_mr_reg(engine, buf + i, 64 + (size_t)i, 0, &mrs[i]), UCCL_OK);
    CU_ASSERT_EQUAL(fake_reg_calls, N);
    for (int step = 0; step < 2; step++)
        for (int i = step; i < N; i += 2)
            CU_ASSERT_EQUAL(uccl_mr_dereg(mrs[i]), UCCL_OK);
    CU_ASSERT_EQUAL(fake_dereg_calls, N);
}

/* A region used by a request in flight cannot be released; once the request
 * is gone it can. The request is a receive on a connection of the engine to
 * itself that no message ever matches. */
static void test_dereg_busy(void)
{
    uint8_t blob[UCCL_ADDRESS_MAX];
    size_t blob_len = sizeof(blob);
    uccl_conn_t *out = NULL, *in = NULL;
    uccl_req_t *req = NULL;
    uccl_mr_attr_t attr;
    uccl_mr_t *mr;

    UNIT_ASSERT_STATUS(uccl_engine_address(engine, blob, &blob_len), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_connect(engine, blob, blob_len, &out), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_accept(engine, 2000, &in), UCCL_OK);
    if (out == NULL || in == NULL)
        return;
    UNIT_ASSERT_STATUS(uccl_mr_reg(engine, buf, 256, 0, &mr), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_recv(in, mr, 0, 256, 7, &req), UCCL_OK);
    CU_ASSERT_PTR_NOT_NULL_FATAL(req);
    UNIT_ASSERT_STATUS(uccl_mr_dereg(mr), UCCL_ERR_BUSY);
    /* nothing was released: the handle still works */
    UNIT_ASSERT_STATUS(uccl_mr_query(mr, &attr), UCCL_OK);
    CU_ASSERT_EQUAL(mr->region->refcount, 1);
    UNIT_ASSERT_STATUS(uccl_wait(req, 0), UCCL_ERR_TIMEOUT);
    /* closing the connection cancels the receive and frees the region */
    UNIT_ASSERT_STATUS(uccl_conn_close(in), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_wait(req, 0), UCCL_ERR_CANCELED);
    UNIT_ASSERT_STATUS(uccl_req_free(req), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_mr_dereg(mr), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_conn_close(out), UCCL_OK);
}

/* A vectored request counts each piece: the region is busy until it ends,
 * also when the user freed the request while it was in flight. */
static void test_dereg_busy_detached(void)
{
    uint8_t blob[UCCL_ADDRESS_MAX];
    size_t blob_len = sizeof(blob);
    uccl_conn_t *out = NULL, *in = NULL;
    uccl_req_t *req = NULL;
    uccl_iov_t iov[3];
    uccl_mr_t *a, *b;

    UNIT_ASSERT_STATUS(uccl_engine_address(engine, blob, &blob_len), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_connect(engine, blob, blob_len, &out), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_accept(engine, 2000, &in), UCCL_OK);
    if (out == NULL || in == NULL)
        return;
    UNIT_ASSERT_STATUS(uccl_mr_reg(engine, buf, 256, 0, &a), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_mr_reg(engine, buf + 1024, 256, 0, &b), UCCL_OK);
    iov[0] = (uccl_iov_t){a, 0, 16};
    iov[1] = (uccl_iov_t){b, 16, 16};
    iov[2] = (uccl_iov_t){a, 100, 16};
    UNIT_ASSERT_STATUS(uccl_sendv(out, iov, 3, 1, &req), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_req_free(req), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_mr_dereg(a), UCCL_ERR_BUSY);
    UNIT_ASSERT_STATUS(uccl_mr_dereg(b), UCCL_ERR_BUSY);
    UNIT_ASSERT_STATUS(uccl_conn_close(out), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_mr_dereg(a), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_mr_dereg(b), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_conn_close(in), UCCL_OK);
}

static CU_TestInfo mr_tests[] = {
    {"same range twice shares one region", test_same_range_shares_region},
    {"dereg in reverse order", test_reverse_dereg_order},
    {"different ranges get separate regions", test_different_ranges_separate},
    {"UCCL_RCACHE=0 gives separate regions", test_rcache_off},
    {"double dereg", test_double_dereg},
    {"NULL, zero-length, overflowing ranges, bad flags", test_bad_reg_args},
    {"unmapped host memory refused", test_unmapped_rejected},
    {"query", test_query},
    {"uccl_mem_free: registrations over it stale", test_mem_free_stale},
    {"pack bounds and LOCAL_ONLY", test_pack_bounds},
    {"pack: one key slot per transport", test_pack_key_slots},
    {"target-side region lookup", test_region_find},
    {"churn of distinct ranges", test_churn},
    {"dereg while a request uses it", test_dereg_busy},
    {"dereg while a freed vectored request uses it", test_dereg_busy_detached},
    CU_TEST_INFO_NULL,
};

static CU_SuiteInfo suites[] = {
    {"mr", suite_init, suite_cleanup, NULL, NULL, mr_tests},
    CU_SUITE_INFO_NULL,
};

int main(void)
{
    return unit_main(suites);
}
