/* Unit tests of the iov cursor (uccl_req_cur_*, src/core/req.h) and of the
 * scatter/gather copies built on it (uccl_req_iov_copy_in/out): every start
 * offset and bound over pieces with empty ones among them, compared with a
 * byte-by-byte model of the flat message. */
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "unit.h"

static uint8_t mem[4][64];
static const size_t lens[] = {5, 0, 17, 0, 1, 40, 0};
#define NPIECES ((int)(sizeof(lens) / sizeof(lens[0])))
static uint8_t *piece_addr(int i) { return mem[i % 4] + (i / 4) * 8; }

static void req_init(uccl_req_t *req)
{
    memset(req, 0, sizeof(*req));
    req->iovcnt = NPIECES;
    for (int i = 0; i < NPIECES; i++) {
        req->iov[i].addr = piece_addr(i);
        req->iov[i].len = lens[i];
        req->len += lens[i];
    }
}

/* The address of flat byte k of the message, by a plain model. */
static uint8_t *model_addr(const uccl_req_t *req, size_t k, int *index)
{
    for (int i = 0; i < req->iovcnt; i++) {
        if (k < req->iov[i].len) {
            *index = i;
            return (uint8_t *)req->iov[i].addr + k;
        }
        k -= req->iov[i].len;
    }
    return NULL;
}

/* From every offset, in steps of every bound: each piece returned is
 * contiguous, in one non-empty iov entry, and where the model says. */
static void test_walk(void)
{
    uccl_req_t req;
    bool ok = true;

    req_init(&req);
    for (size_t off = 0; off <= req.len + 2; off++) {
        for (size_t max = 1; max <= req.len + 1; max++) {
            uccl_req_cur_t cur;
            size_t pos = off, n;
            uint8_t *addr;
            int i, mi = -1;

            uccl_req_cur_init(&cur, &req, off);
            while ((n = uccl_req_cur_next(&cur, max, &addr, &i)) > 0) {
                ok = ok && n <= max && req.iov[i].len > 0 && model_addr(&req, pos, &mi) == addr &&
                     mi == i && model_addr(&req, pos + n - 1, &mi) == addr + n - 1 && mi == i;
                pos += n;
            }
            ok = ok && pos == (off > req.len ? off : req.len);
        }
    }
    CU_ASSERT(ok);
}

static void test_bounds(void)
{
    uccl_req_t req;
    uccl_req_cur_t cur;
    uint8_t *addr = NULL;
    int i = -1;

    req_init(&req);
    uccl_req_cur_init(&cur, &req, 0);
    CU_ASSERT_EQUAL(uccl_req_cur_next(&cur, 0, &addr, &i), 0); /* max 0: nothing, no move */
    CU_ASSERT_EQUAL(uccl_req_cur_next(&cur, 100, &addr, &i), 5);
    CU_ASSERT(addr == piece_addr(0) && i == 0);
    CU_ASSERT_EQUAL(uccl_req_cur_next(&cur, 100, &addr, NULL), 17); /* skips the empty piece 1 */
    CU_ASSERT(addr == piece_addr(2));
    uccl_req_cur_init(&cur, &req, req.len);
    CU_ASSERT_EQUAL(uccl_req_cur_next(&cur, 100, &addr, &i), 0);
    req.iovcnt = 0;
    req.len = 0;
    uccl_req_cur_init(&cur, &req, 0);
    CU_ASSERT_EQUAL(uccl_req_cur_next(&cur, 100, &addr, &i), 0);
}

/* copy_out then copy_in of every [off, off + len) against the model. */
static void test_copy(void)
{
    uccl_req_t req;
    uint8_t flat[80], back[80];
    bool ok = true;

    req_init(&req);
    for (size_t off = 0; off <= req.len; off++) {
        for (size_t len = 0; off + len <= req.len; len++) {
            int idx;

            for (int p = 0; p < 4; p++)
                for (int b = 0; b < 64; b++)
                    mem[p][b] = (uint8_t)(p * 64 + b);
            memset(flat, 0xee, sizeof(flat));
            uccl_req_iov_copy_out(&req, off, flat, len);
            for (size_t k = 0; k < len; k++)
                ok = ok && flat[k] == *model_addr(&req, off + k, &idx);
            ok = ok && flat[len] == 0xee;
            for (size_t k = 0; k < len; k++)
                back[k] = (uint8_t)(k + 1);
            uccl_req_iov_copy_in(&req, off, back, len);
            for (size_t k = 0; k < req.len; k++) {
                uint8_t *a = model_addr(&req, k, &idx);
                uint8_t want = k >= off && k < off + len ? (uint8_t)(k - off + 1)
                                                         : (uint8_t)((a - mem[0]) / 64 * 64 + (a - mem[0]) % 64);
                ok = ok && *a == want;
            }
        }
    }
    CU_ASSERT(ok);
}

int main(void)
{
    CU_TestInfo tests[] = {
        {"walk from every offset, every bound", test_walk},
        {"bounds and empty pieces", test_bounds},
        {"copy in/out against the model", test_copy},
        CU_TEST_INFO_NULL,
    };
    CU_SuiteInfo suites[] = {{"req_cur", NULL, NULL, NULL, NULL, tests}, CU_SUITE_INFO_NULL};

    return unit_main(suites);
}
