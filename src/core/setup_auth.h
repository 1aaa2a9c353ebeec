/* The connection setup's mutual challenge-response (setup_auth.c): both
 * engines prove they know the admission secret without sending it.
 *
 *   connector -> listener  HELLO     magic(4) version(2) type=1(1) to_id(8) from_id(8) nonce_c(16)
 *   listener  -> connector CHALLENGE magic(4) version(2) status(4) [nonce_a(16) proof_a(32) when OK]
 *   connector -> listener  REQUEST   magic(4) version(2) type=2(1) proof_c(32) then the request
 *                                    (conn_setup.c: blob_len(2) blob n(1) n x endpoint)
 *                       or REFUSE    magic(4) version(2) type=3(1) status(4): proof_a was wrong
 *   listener  -> connector REPLY     magic(4) version(2) status(4) [n(1) n x endpoint when OK]
 *
 * proof = HMAC-SHA256(secret, label || to_id || from_id || nonce_c || nonce_a), the label
 * differing by direction, so that neither proof can be reflected or replayed: each side's
 * nonce is fresh per setup. Pure functions of bytes; the fuzzers and unit tests call them. */
#ifndef UCCL_CORE_SETUP_AUTH_H
#define UCCL_CORE_SETUP_AUTH_H

#include "core.h"
#include "oob.h"
#include "util/crypto.h"

#define UCCL_SETUP_REQ_MAGIC 0x51434355u /* "UCCQ" */
#define UCCL_SETUP_REP_MAGIC 0x50434355u /* "UCCP" */
/* 2: the admission secret, in clear; 3: challenge-response, the secret stays home */
#define UCCL_SETUP_VERSION 3
#define UCCL_SETUP_HELLO_LEN (4 + 2 + 1 + 8 + 8 + UCCL_SETUP_NONCE)

enum { UCCL_SETUP_HELLO = 1, UCCL_SETUP_REQUEST = 2, UCCL_SETUP_REFUSE = 3 };

/* The listener's proof (listener = true) or the connector's; false when libcrypto failed. */
bool uccl_setup_proof(const uint8_t secret[UCCL_SECRET_SIZE], const uccl_setup_auth_t *a,
                      bool listener, uint8_t proof[UCCL_HMAC_SIZE]);
bool uccl_setup_proof_ok(const uint8_t secret[UCCL_SECRET_SIZE], const uccl_setup_auth_t *a,
                         bool listener, const uint8_t proof[UCCL_HMAC_SIZE]);

/* Message builders (append to b) and parsers (of one frame's body). */
void uccl_setup_put_hello(oob_buf_t *b, const uccl_setup_auth_t *a);
/* UCCL_OK (to_id, from_id, nonce_c filled), UCCL_ERR_VERSION (not a hello of
 * this version: an older peer), UCCL_ERR_BAD_ADDRESS (truncated or too long). */
uccl_status_t uccl_setup_get_hello(const uint8_t *msg, size_t len, uccl_setup_auth_t *a);
/* A reply header: magic version status; the challenge adds nonce_a and proof when st is OK. */
void uccl_setup_put_status(oob_buf_t *b, uccl_status_t st);
void uccl_setup_put_challenge(oob_buf_t *b, const uint8_t nonce_a[UCCL_SETUP_NONCE],
                              const uint8_t proof[UCCL_HMAC_SIZE]);
/* The reply header of r (challenge or reply): UCCL_ERR_VERSION (another
 * version), UCCL_ERR_IO (truncated), else the status the peer sent. */
uccl_status_t uccl_setup_get_status(oob_reader_t *r);
/* After a UCCL_OK status: nonce_a and proof; false when truncated. */
bool uccl_setup_get_challenge(oob_reader_t *r, uint8_t nonce_a[UCCL_SETUP_NONCE],
                              uint8_t proof[UCCL_HMAC_SIZE]);
void uccl_setup_put_request_head(oob_buf_t *b, const uint8_t proof[UCCL_HMAC_SIZE]);
void uccl_setup_put_refuse(oob_buf_t *b, uccl_status_t st);
/* The head of the connector's second message: UCCL_OK with proof filled (a
 * request; r is then past its head), UCCL_ERR_DENIED with *refused set (a
 * refuse: the connector found the listener's proof wrong), UCCL_ERR_VERSION,
 * UCCL_ERR_BAD_ADDRESS (truncated). */
uccl_status_t uccl_setup_get_request_head(oob_reader_t *r, uint8_t proof[UCCL_HMAC_SIZE],
                                          uccl_status_t *refused);

#endif
