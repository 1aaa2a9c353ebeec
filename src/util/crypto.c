/* OpenSSL's libcrypto, linked or loaded: see crypto.h. The run-time path
 * declares the four functions it uses by their stable ABI (the same in
 * OpenSSL 1.1 and 3.x) so that a machine without libssl-dev headers still
 * builds; where neither path works the setup refuses to run rather than
 * send the admission secret in clear (docs/DESIGN.md, Decisions). */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "uccl_build.h"

#include "util/crypto.h"
#include "util/log.h"

#ifdef UCCL_HAVE_CRYPTO
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#else
#include <dlfcn.h>
typedef struct evp_md_st EVP_MD;
#endif

typedef unsigned char *(*hmac_fn)(const EVP_MD *, const void *, int, const unsigned char *, size_t,
                                  unsigned char *, unsigned int *);
typedef const EVP_MD *(*sha256_fn)(void);
typedef int (*rand_fn)(unsigned char *, int);

static struct {
    pthread_once_t once;
    uccl_status_t status;
    hmac_fn hmac;
    sha256_fn sha256;
    rand_fn rand;
    char source[96];
} crypto = {.once = PTHREAD_ONCE_INIT, .status = UCCL_ERR_UNSUPPORTED};

#ifdef UCCL_HAVE_CRYPTO
static void crypto_load(void)
{
    crypto.hmac = HMAC;
    crypto.sha256 = EVP_sha256;
    crypto.rand = RAND_bytes;
    snprintf(crypto.source, sizeof(crypto.source), "%s (linked)", OpenSSL_version(OPENSSL_VERSION));
    crypto.status = UCCL_OK;
}
#else
static void crypto_load(void)
{
    static const char *const names[] = {"libcrypto.so.3", "libcrypto.so.1.1"};

    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        void *h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);

        if (h == NULL)
            continue;
        /* POSIX: function pointers travel through void * from dlsym */
        *(void **)&crypto.hmac = dlsym(h, "HMAC");
        *(void **)&crypto.sha256 = dlsym(h, "EVP_sha256");
        *(void **)&crypto.rand = dlsym(h, "RAND_bytes");
        if (crypto.hmac != NULL && crypto.sha256 != NULL && crypto.rand != NULL) {
            snprintf(crypto.source, sizeof(crypto.source), "%s (loaded at run time)", names[i]);
            crypto.status = UCCL_OK;
            return; /* kept loaded for the life of the process */
        }
        dlclose(h);
    }
    uccl_error("the connection setup's challenge-response needs OpenSSL's libcrypto "
               "(HMAC-SHA256): this build has no libcrypto headers and neither libcrypto.so.3 "
               "nor libcrypto.so.1.1 loads (install libssl3, or libssl-dev and reconfigure); "
               "engines are refused rather than send the admission secret in clear");
}
#endif

uccl_status_t uccl_crypto_init(void)
{
    pthread_once(&crypto.once, crypto_load);
    return crypto.status;
}

const char *uccl_crypto_source(void)
{
    return uccl_crypto_init() == UCCL_OK ? crypto.source : NULL;
}

bool uccl_hmac_sha256(const void *key, size_t key_len, const void *msg, size_t len,
                      uint8_t mac[UCCL_HMAC_SIZE])
{
    unsigned int mac_len = 0;

    if (uccl_crypto_init() != UCCL_OK || key_len > 1024)
        return false;
    if (crypto.hmac(crypto.sha256(), key, (int)key_len, msg, len, mac, &mac_len) == NULL ||
        mac_len != UCCL_HMAC_SIZE) {
        memset(mac, 0, UCCL_HMAC_SIZE);
        return false;
    }
    return true;
}

bool uccl_crypto_random(void *buf, size_t n)
{
    return uccl_crypto_init() == UCCL_OK && n <= 4096 && crypto.rand(buf, (int)n) == 1;
}

bool uccl_crypto_equal(const void *a, const void *b, size_t n)
{
    const volatile uint8_t *x = a, *y = b;
    uint8_t diff = 0;

    for (size_t i = 0; i < n; i++)
        diff |= (uint8_t)(x[i] ^ y[i]);
    return diff == 0;
}
