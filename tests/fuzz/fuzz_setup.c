/* libFuzzer harness: the connection-setup listener (src/core/conn_setup.c,
 * oob.c). One engine lives for the whole run; each input is written to it
 * over a fresh loopback socket, as a stranger (or a broken peer) would, and
 * the engine is progressed until it has dropped the socket. It must never
 * crash, leak or stop answering: every 1000 inputs a real engine connects
 * to it and must succeed. */
#include <arpa/inet.h>
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/core.h"
#include "core/setup_auth.h"

static uccl_engine_t *target, *peer;
static struct sockaddr_in target_addr;
static unsigned long inputs;

static void setup_once(void)
{
    uccl_engine_params_t p = {.field_mask = UCCL_ENGINE_PARAM_TRANSPORTS, .transports = "tcp"};
    uint8_t blob[UCCL_ADDRESS_MAX];
    size_t len = sizeof(blob);
    uccl_address_t a;

    setenv("UCCL_LOG_LEVEL", "error", 0);
    setenv("UCCL_TIMEOUT_MS", "2000", 0);
    if (uccl_engine_create(&p, &target) != UCCL_OK || uccl_engine_create(&p, &peer) != UCCL_OK ||
        uccl_engine_address(target, blob, &len) != UCCL_OK ||
        uccl_address_parse(blob, len, &a) != UCCL_OK) {
        fprintf(stderr, "fuzz_setup: cannot create the engines\n");
        abort();
    }
    target_addr = a.oob; /* the listener listens on the advertised address only */
}

static void *accept_main(void *arg)
{
    uccl_conn_t **in = arg;
    if (uccl_accept(target, 5000, in) != UCCL_OK)
        *in = NULL;
    return NULL;
}

/* A real peer still gets through. */
static void check_still_serving(void)
{
    uint8_t blob[UCCL_ADDRESS_MAX];
    size_t len = sizeof(blob);
    uccl_conn_t *c = NULL, *in = NULL;
    pthread_t t;

    if (uccl_engine_address(target, blob, &len) != UCCL_OK ||
        pthread_create(&t, NULL, accept_main, &in) != 0)
        abort();
    if (uccl_connect(peer, blob, len, &c) != UCCL_OK)
        abort();
    pthread_join(t, NULL);
    if (in == NULL)
        abort();
    uccl_conn_close(c);
    uccl_conn_close(in);
}

/* Half the inputs (odd first byte) play the connector's part of the
 * challenge-response (src/core/setup_auth.h), so that the fuzzer reaches
 * what lies behind admission: the input is [hello frame, its length fixed
 * to UCCL_SETUP_HELLO_LEN][request frame, the rest]. The hello gets the
 * target's engine id; after the target's challenge, the request gets the
 * right proof for this setup's nonces, its frame length, and a blob of the
 * hello's engine id with its length and checksum fixed:
 * [u32 len][magic][u16 version][u8 type][proof 32][u16 blob_len][blob]... */
#define HELLO_FRAME (4 + UCCL_SETUP_HELLO_LEN)
#define REQ_PROOF (4 + 7)
#define REQ_BLOB (REQ_PROOF + UCCL_HMAC_SIZE + 2)

static void fix_hello(uint8_t *m)
{
    uccl_put_u32(m, UCCL_SETUP_HELLO_LEN);
    uccl_put_u64(m + 4 + 7, uccl_engine_id(target));
}

/* Read the target's answer to the hello (progressing it); true with the
 * setup's values in auth when it is a challenge. */
static bool read_challenge(int fd, const uint8_t *hello, uccl_setup_auth_t *auth)
{
    uint8_t m[256], proof[UCCL_HMAC_SIZE];
    size_t have = 0, need = 4;
    oob_reader_t r;

    for (int round = 0; round < 200 && have < need; round++) {
        ssize_t n;
        target->next_liveness_ms = 0; /* look at the setup listener now */
        uccl_engine_progress(target);
        n = recv(fd, m + have, need - have, MSG_DONTWAIT);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK))
            return false;
        if (n > 0)
            have += (size_t)n;
        if (have == 4 && need == 4 && (need = 4 + uccl_get_u32(m)) > sizeof(m))
            return false;
    }
    if (have < need || uccl_setup_get_hello(hello + 4, UCCL_SETUP_HELLO_LEN, auth) != UCCL_OK)
        return false;
    r = (oob_reader_t){m + 4, need - 4, 0, false};
    return uccl_setup_get_status(&r) == UCCL_OK && uccl_setup_get_challenge(&r, auth->nonce_a, proof);
}

static void fix_request(uint8_t *m, size_t size, const uccl_setup_auth_t *auth)
{
    size_t blob_len;

    uccl_put_u32(m, (uint32_t)(size - 4));
    if (size < REQ_PROOF + UCCL_HMAC_SIZE)
        return;
    if (!uccl_setup_proof(target->secret, auth, false, m + REQ_PROOF))
        abort();
    if (size < REQ_BLOB)
        return;
    blob_len = uccl_get_u16(m + REQ_BLOB - 2);
    if (blob_len >= 20 && REQ_BLOB + blob_len <= size) {
        uccl_put_u16(m + REQ_BLOB + 6, (uint16_t)blob_len);
        uccl_put_u64(m + REQ_BLOB + 8, auth->from_id);
        uccl_put_u32(m + REQ_BLOB + blob_len - 4, uccl_fnv1a32(m + REQ_BLOB, blob_len - 4));
    }
}

static bool send_all(int fd, const uint8_t *p, size_t size)
{
    for (size_t off = 0; off < size;) {
        ssize_t n = send(fd, p + off, size - off, MSG_NOSIGNAL);
        if (n <= 0)
            return false; /* the engine closed it: fine */
        off += (size_t)n;
        uccl_engine_progress(target);
    }
    return true;
}

/* Connections a sound-looking request made: the engine may accept them;
 * close them so that they do not pile up. */
static void drain_accepted(void)
{
    uccl_conn_t *in = NULL;

    while (uccl_accept(target, 0, &in) == UCCL_OK)
        uccl_conn_close(in);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    bool guided = size >= HELLO_FRAME + 4 && (data[0] & 1);
    uint8_t *m = NULL;
    int fd;
    char sink[256];

    if (target == NULL)
        setup_once();
    if (guided) {
        m = malloc(size);
        if (m == NULL)
            return 0;
        memcpy(m, data, size);
        fix_hello(m);
        data = m;
    }
    /* Closed with a reset (linger 0): no TIME_WAIT on this side, so a long
     * run does not use up the loopback's ephemeral ports. A connect that
     * fails anyway (the host short of ports or memory) skips the input; an
     * engine that stopped serving is caught by check_still_serving. */
    fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        abort();
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &(struct linger){.l_onoff = 1, .l_linger = 0},
               sizeof(struct linger));
    if (connect(fd, (struct sockaddr *)&target_addr, sizeof(target_addr)) != 0) {
        close(fd);
        free(m);
        return 0;
    }
    if (guided) {
        uccl_setup_auth_t auth;
        if (send_all(fd, m, HELLO_FRAME) && read_challenge(fd, m, &auth)) {
            fix_request(m + HELLO_FRAME, size - HELLO_FRAME, &auth);
            send_all(fd, m + HELLO_FRAME, size - HELLO_FRAME);
        }
    } else {
        send_all(fd, data, size);
    }
    shutdown(fd, SHUT_WR);
    /* until the engine has answered or dropped us, or a few rounds: the
     * engine then finds the end of the stream on its own, with others pending */
    for (int round = 0; round < 50; round++) {
        ssize_t n;
        uccl_engine_progress(target);
        n = recv(fd, sink, sizeof(sink), MSG_DONTWAIT);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK))
            break;
    }
    close(fd);
    free(m);
    for (int i = 0; i < 10; i++)
        uccl_engine_progress(target);
    drain_accepted();
    if (++inputs % 1000 == 0)
        check_still_serving();
    return 0;
}
