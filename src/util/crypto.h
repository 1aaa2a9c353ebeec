/* HMAC-SHA256, random bytes and a constant-time compare for the connection
 * setup's challenge-response (src/core/setup_auth.c), from OpenSSL's
 * libcrypto: linked where configure found it, else loaded at run time
 * (libcrypto.so.3, then libcrypto.so.1.1). No cryptography of our own. */
#ifndef UCCL_UTIL_CRYPTO_H
#define UCCL_UTIL_CRYPTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "uccl/uccl.h"

#define UCCL_HMAC_SIZE 32

/* UCCL_OK when the functions below work; else UCCL_ERR_UNSUPPORTED, after
 * one error line saying what is missing. Thread-safe, cheap after the first. */
uccl_status_t uccl_crypto_init(void);
/* Where the functions come from ("libcrypto 3.0.19 (linked)", ...), or NULL. */
const char *uccl_crypto_source(void);
/* HMAC-SHA256(key, msg) into mac; false when libcrypto failed. */
bool uccl_hmac_sha256(const void *key, size_t key_len, const void *msg, size_t len,
                      uint8_t mac[UCCL_HMAC_SIZE]);
/* n bytes from libcrypto's CSPRNG; false when it failed. */
bool uccl_crypto_random(void *buf, size_t n);
/* a[0..n) == b[0..n), in time that depends on n only. */
bool uccl_crypto_equal(const void *a, const void *b, size_t n);

#endif
