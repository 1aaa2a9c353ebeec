/* The connection setup's challenge-response messages and proofs: see
 * setup_auth.h. */
#include <string.h>

#include "setup_auth.h"

#define LABEL_LEN 16
static const char label_listener[LABEL_LEN] = "uccl-setup-lsnr";
static const char label_connector[LABEL_LEN] = "uccl-setup-conn";

bool uccl_setup_proof(const uint8_t secret[UCCL_SECRET_SIZE], const uccl_setup_auth_t *a,
                      bool listener, uint8_t proof[UCCL_HMAC_SIZE])
{
    uint8_t m[LABEL_LEN + 8 + 8 + 2 * UCCL_SETUP_NONCE];

    memcpy(m, listener ? label_listener : label_connector, LABEL_LEN);
    uccl_put_u64(m + LABEL_LEN, a->to_id);
    uccl_put_u64(m + LABEL_LEN + 8, a->from_id);
    memcpy(m + LABEL_LEN + 16, a->nonce_c, UCCL_SETUP_NONCE);
    memcpy(m + LABEL_LEN + 16 + UCCL_SETUP_NONCE, a->nonce_a, UCCL_SETUP_NONCE);
    return uccl_hmac_sha256(secret, UCCL_SECRET_SIZE, m, sizeof(m), proof);
}

bool uccl_setup_proof_ok(const uint8_t secret[UCCL_SECRET_SIZE], const uccl_setup_auth_t *a,
                         bool listener, const uint8_t proof[UCCL_HMAC_SIZE])
{
    uint8_t want[UCCL_HMAC_SIZE];

    return uccl_setup_proof(secret, a, listener, want) &&
           uccl_crypto_equal(want, proof, UCCL_HMAC_SIZE);
}

static void put_head(oob_buf_t *b, uint32_t magic)
{
    uccl_oob_put_u32(b, magic);
    uccl_oob_put_u16(b, UCCL_SETUP_VERSION);
}

void uccl_setup_put_hello(oob_buf_t *b, const uccl_setup_auth_t *a)
{
    put_head(b, UCCL_SETUP_REQ_MAGIC);
    uccl_oob_put_u8(b, UCCL_SETUP_HELLO);
    uccl_oob_put_u64(b, a->to_id);
    uccl_oob_put_u64(b, a->from_id);
    uccl_oob_put_bytes(b, a->nonce_c, UCCL_SETUP_NONCE);
}

/* magic, version and type of a connector's message: false when another version or type */
static bool get_req_head(oob_reader_t *r, uint8_t *type)
{
    if (uccl_oob_get_u32(r) != UCCL_SETUP_REQ_MAGIC || uccl_oob_get_u16(r) != UCCL_SETUP_VERSION)
        return false;
    *type = uccl_oob_get_u8(r);
    return !r->bad;
}

uccl_status_t uccl_setup_get_hello(const uint8_t *msg, size_t len, uccl_setup_auth_t *a)
{
    oob_reader_t r = {msg, len, 0, false};
    uint8_t type = 0;

    memset(a, 0, sizeof(*a));
    if (!get_req_head(&r, &type) || type != UCCL_SETUP_HELLO)
        return r.bad ? UCCL_ERR_BAD_ADDRESS : UCCL_ERR_VERSION;
    a->to_id = uccl_oob_get_u64(&r);
    a->from_id = uccl_oob_get_u64(&r);
    if (!uccl_oob_get_bytes(&r, a->nonce_c, UCCL_SETUP_NONCE) || r.pos != len)
        return UCCL_ERR_BAD_ADDRESS;
    return UCCL_OK;
}

void uccl_setup_put_status(oob_buf_t *b, uccl_status_t st)
{
    put_head(b, UCCL_SETUP_REP_MAGIC);
    uccl_oob_put_u32(b, (uint32_t)(int32_t)st);
}

void uccl_setup_put_challenge(oob_buf_t *b, const uint8_t nonce_a[UCCL_SETUP_NONCE],
                              const uint8_t proof[UCCL_HMAC_SIZE])
{
    uccl_setup_put_status(b, UCCL_OK);
    uccl_oob_put_bytes(b, nonce_a, UCCL_SETUP_NONCE);
    uccl_oob_put_bytes(b, proof, UCCL_HMAC_SIZE);
}

uccl_status_t uccl_setup_get_status(oob_reader_t *r)
{
    uccl_status_t st;

    if (uccl_oob_get_u32(r) != UCCL_SETUP_REP_MAGIC || uccl_oob_get_u16(r) != UCCL_SETUP_VERSION)
        return r->bad ? UCCL_ERR_IO : UCCL_ERR_VERSION;
    st = (uccl_status_t)(int32_t)uccl_oob_get_u32(r);
    return r->bad ? UCCL_ERR_IO : st;
}

bool uccl_setup_get_challenge(oob_reader_t *r, uint8_t nonce_a[UCCL_SETUP_NONCE],
                              uint8_t proof[UCCL_HMAC_SIZE])
{
    return uccl_oob_get_bytes(r, nonce_a, UCCL_SETUP_NONCE) &&
           uccl_oob_get_bytes(r, proof, UCCL_HMAC_SIZE) && r->pos == r->len;
}

void uccl_setup_put_request_head(oob_buf_t *b, const uint8_t proof[UCCL_HMAC_SIZE])
{
    put_head(b, UCCL_SETUP_REQ_MAGIC);
    uccl_oob_put_u8(b, UCCL_SETUP_REQUEST);
    uccl_oob_put_bytes(b, proof, UCCL_HMAC_SIZE);
}

void uccl_setup_put_refuse(oob_buf_t *b, uccl_status_t st)
{
    put_head(b, UCCL_SETUP_REQ_MAGIC);
    uccl_oob_put_u8(b, UCCL_SETUP_REFUSE);
    uccl_oob_put_u32(b, (uint32_t)(int32_t)st);
}

uccl_status_t uccl_setup_get_request_head(oob_reader_t *r, uint8_t proof[UCCL_HMAC_SIZE],
                                          uccl_status_t *refused)
{
    uint8_t type = 0;

    *refused = UCCL_OK;
    if (!get_req_head(r, &type) || (type != UCCL_SETUP_REQUEST && type != UCCL_SETUP_REFUSE))
        return r->bad ? UCCL_ERR_BAD_ADDRESS : UCCL_ERR_VERSION;
    if (type == UCCL_SETUP_REFUSE) {
        *refused = (uccl_status_t)(int32_t)uccl_oob_get_u32(r);
        return r->bad ? UCCL_ERR_BAD_ADDRESS : UCCL_ERR_DENIED;
    }
    return uccl_oob_get_bytes(r, proof, UCCL_HMAC_SIZE) ? UCCL_OK : UCCL_ERR_BAD_ADDRESS;
}
