/* A host-only engine (no GPU given) must never touch a GPU, also on a GPU
 * machine: after engines are created, connected over each host transport
 * and have moved host memory both ways, no GPU has an active primary
 * context in this process. (Peers of UCCL/NIXL create contexts on every
 * GPU; docs/DESIGN.md promises we do not.) Without a GPU: "skipped: no GPU".
 * On the fake GPU backend it checks the backend's model of contexts, with
 * a control that the model notices a touched GPU. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/gpu.h"
#include "check1.h"
#include "../unit/unit_conn.h"

#define LEN (1u << 20)


/* send/recv then write, 1 MiB each, a -> b, bytes compared */
static void move_host_bytes(const char *transport)
{
    unit_pair_t p;
    uint8_t *src = malloc(LEN), *dst = calloc(1, LEN);
    uccl_mr_t *ms = NULL, *md = NULL;
    uccl_req_t *r[2] = {NULL, NULL};
    uccl_rdesc_t rd;

    if (unit_pair_open(transport, &p) != UCCL_OK) {
        printf("SKIP: host bytes over %s: transport not usable here\n", transport);
        free(src);
        free(dst);
        return;
    }
    for (size_t i = 0; i < LEN; i++)
        src[i] = (uint8_t)(i * 7 + 3);
    CHECK(uccl_mr_reg(p.a, src, LEN, 0, &ms) == UCCL_OK, "%s: mr_reg src", transport);
    CHECK(uccl_mr_reg(p.b, dst, LEN, 0, &md) == UCCL_OK, "%s: mr_reg dst", transport);
    CHECK(uccl_recv(p.ba, md, 0, LEN, 1, &r[1]) == UCCL_OK, "%s: recv", transport);
    CHECK(uccl_send(p.ab, ms, 0, LEN, 1, &r[0]) == UCCL_OK, "%s: send", transport);
    CHECK(unit_drive(&p, r, 2, 10000) == UCCL_OK, "%s: send/recv completes", transport);
    CHECK(memcmp(src, dst, LEN) == 0, "%s: received bytes differ", transport);
    uccl_req_free(r[0]);
    uccl_req_free(r[1]);
    memset(dst, 0, LEN);
    CHECK(uccl_mr_pack(md, 0, LEN, &rd) == UCCL_OK, "%s: pack", transport);
    r[0] = r[1] = NULL;
    CHECK(uccl_write(p.ab, ms, 0, LEN, &rd, 0, &r[0]) == UCCL_OK, "%s: write", transport);
    CHECK(unit_drive(&p, r, 1, 10000) == UCCL_OK, "%s: write completes", transport);
    CHECK(memcmp(src, dst, LEN) == 0, "%s: written bytes differ", transport);
    uccl_req_free(r[0]);
    uccl_mr_dereg(ms);
    uccl_mr_dereg(md);
    unit_pair_close(&p);
    free(src);
    free(dst);
    printf("ok: %s moved host memory both ways\n", transport);
}

/* On the fake backend the context state is the backend's own model: the
 * check can only fail if that model does, so show that it does (an
 * allocation on GPU 0 must mark it). */
static void fake_control(void)
{
    int active = 0;
    void *p = NULL;

    CHECK(uccl_gpu_set_device(0) == UCCL_OK && uccl_gpu_malloc(&p, 4096) == UCCL_OK,
          "control: allocation on GPU 0");
    CHECK(uccl_gpu_primary_ctx_active(0, &active) == UCCL_OK && active,
          "control: an allocation on GPU 0 did not mark its context active: the check above proves nothing");
    if (active)
        printf("ok: control: an allocation marks GPU 0 as touched\n");
    uccl_gpu_free(p);
}

int main(void)
{
    const char *transports[] = {"shm", "tcp", NULL};
    int fake = strcmp(uccl_gpu_backend(), "fake") == 0;
    int n = 0;

    if (uccl_gpu_count(&n) != UCCL_OK || n == 0) {
        printf("skipped: no GPU\n");
        return 77;
    }
    if (fake)
        printf("fake GPU backend: no real GPU; a context counts as created once a call that would "
               "create one in CUDA ran on its device\n");
    for (int i = 0; transports[i] != NULL; i++)
        move_host_bytes(transports[i]);
    for (int dev = 0; dev < n; dev++) {
        int active = 1;
        uccl_status_t st = uccl_gpu_primary_ctx_active(dev, &active);
        CHECK(st == UCCL_OK, "GPU %d: cannot read the primary context state: %s", dev,
              uccl_strerror(st));
        CHECK(st != UCCL_OK || !active, "GPU %d: a host-only engine created a context on it", dev);
        if (st == UCCL_OK && !active)
            printf("ok: GPU %d untouched\n", dev);
    }
    if (fake)
        fake_control();
    printf("%s: %d failures\n", failures ? "FAIL" : "PASS", failures);
    return failures ? 1 : 0;
}
