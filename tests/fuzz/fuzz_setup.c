/* libFuzzer harness: the connection-setup listener (src/core/conn_setup.c,
 * oob.c). One engine lives for the whole run; each input is written to it
 * over a fresh loopback socket, as a stranger (or a broken peer) would, and
 * the engine is progressed until it has dropped the socket. It must never
 * crash, leak or stop answering: every 1000 inputs a real engine connects
 * to it and must succeed. */
#include <arpa/inet.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/core.h"

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

/* Half the inputs (odd first byte) are made to look sound up to the
 * endpoint list, so that the fuzzer reaches what lies behind the checks of
 * the frame: [u32 frame len][magic][u16 version][u64 to_id][secret]
 * [u16 blob_len][address blob, checksummed]: the right engine id and
 * admission secret, so that inputs get past admission. */
static uint8_t *fix_up(const uint8_t *data, size_t size)
{
    uint8_t *m = malloc(size ? size : 1);
    size_t blob_len;

    if (m == NULL)
        return NULL;
    memcpy(m, data, size);
    if (size < 36)
        return m;
    uccl_put_u32(m, (uint32_t)(size - 4));
    uccl_put_u64(m + 10, uccl_engine_id(target));
    memcpy(m + 18, target->secret, UCCL_SECRET_SIZE);
    blob_len = uccl_get_u16(m + 34);
    if (blob_len >= 12 && 36 + blob_len <= size) {
        uccl_put_u16(m + 36 + 6, (uint16_t)blob_len);
        uccl_put_u32(m + 36 + blob_len - 4, uccl_fnv1a32(m + 36, blob_len - 4));
    }
    return m;
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
    uint8_t *fixed = NULL;
    int fd;
    char sink[256];

    if (target == NULL)
        setup_once();
    if (size > 0 && (data[0] & 1)) {
        fixed = fix_up(data, size);
        if (fixed == NULL)
            return 0;
        data = fixed;
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
        free(fixed);
        return 0;
    }
    for (size_t off = 0; off < size;) {
        ssize_t n = send(fd, data + off, size - off, MSG_NOSIGNAL);
        if (n <= 0)
            break; /* the engine closed it: fine */
        off += (size_t)n;
        uccl_engine_progress(target);
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
    free(fixed);
    for (int i = 0; i < 10; i++)
        uccl_engine_progress(target);
    drain_accepted();
    if (++inputs % 1000 == 0)
        check_still_serving();
    return 0;
}
