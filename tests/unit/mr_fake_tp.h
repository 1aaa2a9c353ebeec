/* test_mr.c's transports: one fake transport that counts mem_reg/mem_dereg
 * calls and holds sends and RMA until their endpoint goes, and a second one
 * that only registers and packs a key; uccl_tp_list() offers both instead of
 * src/tp/tp_list.c. Included by that program only. */
#ifndef UCCL_TESTS_UNIT_MR_FAKE_TP_H
#define UCCL_TESTS_UNIT_MR_FAKE_TP_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"

struct uccl_tp_memh {
    void *addr;
    size_t len;
};

typedef struct fake_ep {
    uccl_tp_ep_t base;
    uccl_list_t held; /* posted requests, completed only by ep_destroy */
} fake_ep_t;

static int fake_reg_calls, fake_dereg_calls, fake_live_memh;

static uccl_status_t fake_open(const uccl_tp_open_params_t *params, uccl_tp_t **tp)
{
    (void)params;
    *tp = calloc(1, sizeof(**tp));
    return *tp ? UCCL_OK : UCCL_ERR_NO_MEMORY;
}

static void fake_close(uccl_tp_t *tp) { free(tp); }

static uccl_status_t fake_address(uccl_tp_t *tp, void *buf, size_t *len)
{
    (void)tp;
    *(uint8_t *)buf = 1;
    *len = 1;
    return UCCL_OK;
}

static uccl_status_t fake_ep_create(uccl_tp_t *tp, uccl_conn_t *conn, const uccl_tp_peer_t *peer,
                                    bool is_initiator, uccl_tp_ep_t **ep)
{
    fake_ep_t *fep = calloc(1, sizeof(*fep));

    (void)tp, (void)conn, (void)peer, (void)is_initiator;
    if (fep == NULL)
        return UCCL_ERR_NO_MEMORY;
    uccl_list_init(&fep->held);
    *ep = &fep->base;
    return UCCL_OK;
}

static uccl_status_t fake_ep_pack(uccl_tp_ep_t *ep, void *buf, size_t *len)
{
    (void)ep, (void)buf;
    *len = 0;
    return UCCL_OK;
}

static uccl_status_t fake_ep_connect(uccl_tp_ep_t *ep, const void *info, size_t len)
{
    (void)ep, (void)info;
    return len == 0 ? UCCL_OK : UCCL_ERR_IO;
}

static void fake_ep_destroy(uccl_tp_ep_t *ep)
{
    fake_ep_t *fep = (fake_ep_t *)ep;

    while (!uccl_list_empty(&fep->held)) {
        uccl_req_t *req = uccl_list_first(&fep->held, uccl_req_t, tp_link);
        uccl_list_del(&req->tp_link);
        uccl_req_complete(req, UCCL_ERR_CANCELED, 0);
    }
    free(fep);
}

static uccl_status_t memh_new(void *addr, size_t len, uccl_tp_memh_t **memh)
{
    *memh = malloc(sizeof(**memh));
    if (*memh == NULL)
        return UCCL_ERR_NO_MEMORY;
    (*memh)->addr = addr;
    (*memh)->len = len;
    return UCCL_OK;
}

static uccl_status_t fake_mem_reg(uccl_tp_t *tp, void *addr, size_t len, uccl_mem_type_t type,
                                  int device, uccl_tp_memh_t **memh)
{
    uccl_status_t st = memh_new(addr, len, memh);

    (void)tp, (void)type, (void)device;
    if (st == UCCL_OK) {
        fake_reg_calls++;
        fake_live_memh++;
    }
    return st;
}

static void fake_mem_dereg(uccl_tp_t *tp, uccl_tp_memh_t *memh)
{
    (void)tp;
    free(memh);
    fake_dereg_calls++;
    fake_live_memh--;
}

static size_t fake_mem_pack(uccl_tp_t *tp, uccl_tp_memh_t *memh, uint8_t rkey[UCCL_TP_RKEY_MAX])
{
    (void)tp;
    memcpy(rkey, &memh, sizeof(memh));
    return sizeof(memh);
}

/* The second transport with remote keys: a 4-byte key, like verbs. */
static int keyed_live_memh;

static uccl_status_t keyed_mem_reg(uccl_tp_t *tp, void *addr, size_t len, uccl_mem_type_t type,
                                   int device, uccl_tp_memh_t **memh)
{
    uccl_status_t st = memh_new(addr, len, memh);

    (void)tp, (void)type, (void)device;
    if (st == UCCL_OK)
        keyed_live_memh++;
    return st;
}

static void keyed_mem_dereg(uccl_tp_t *tp, uccl_tp_memh_t *memh)
{
    (void)tp;
    free(memh);
    keyed_live_memh--;
}

static size_t keyed_mem_pack(uccl_tp_t *tp, uccl_tp_memh_t *memh, uint8_t rkey[UCCL_TP_RKEY_MAX])
{
    (void)tp;
    uccl_put_u32(rkey, (uint32_t)memh->len);
    return 4;
}

static uccl_status_t fake_post_hold(uccl_tp_ep_t *ep, uccl_req_t *req)
{
    uccl_list_push_back(&((fake_ep_t *)ep)->held, &req->tp_link);
    return UCCL_OK;
}

static int fake_progress(uccl_tp_t *tp)
{
    (void)tp;
    return 0;
}

static const struct uccl_tp_ops fake_ops = {
    .size = sizeof(struct uccl_tp_ops),
    .name = "fake",
    .priority = 1,
    .caps = UCCL_TP_CAP_HOST_MEM | UCCL_TP_CAP_RMA | UCCL_TP_CAP_MEM_REG | UCCL_TP_CAP_RKEY,
    .engine_cap = UCCL_CAP_TCP,
    .rkey_owner = UCCL_TP_KEY_OFI, /* any owner id */
    .open = fake_open,
    .close = fake_close,
    .address = fake_address,
    .ep_create = fake_ep_create,
    .ep_pack = fake_ep_pack,
    .ep_connect = fake_ep_connect,
    .ep_destroy = fake_ep_destroy,
    .mem_reg = fake_mem_reg,
    .mem_dereg = fake_mem_dereg,
    .mem_pack = fake_mem_pack,
    .post_send = fake_post_hold,
    .post_write = fake_post_hold,
    .post_read = fake_post_hold,
    .progress = fake_progress,
};

static const struct uccl_tp_ops keyed_ops = {
    .size = sizeof(struct uccl_tp_ops),
    .name = "keyed",
    .priority = 0,
    .caps = UCCL_TP_CAP_MEM_REG | UCCL_TP_CAP_RKEY,
    .engine_cap = UCCL_CAP_VERBS,
    .rkey_owner = UCCL_TP_KEY_VERBS,
    .open = fake_open,
    .close = fake_close,
    .address = fake_address,
    .ep_create = fake_ep_create,
    .ep_pack = fake_ep_pack,
    .ep_connect = fake_ep_connect,
    .ep_destroy = fake_ep_destroy,
    .mem_reg = keyed_mem_reg,
    .mem_dereg = keyed_mem_dereg,
    .mem_pack = keyed_mem_pack,
    .post_send = fake_post_hold,
    .post_write = fake_post_hold,
    .post_read = fake_post_hold,
    .progress = fake_progress,
};

/* Replaces src/tp/tp_list.c for this program (the static archive member
 * defining it is then never pulled in). */
const struct uccl_tp_ops *const *uccl_tp_list(void)
{
    static const struct uccl_tp_ops *const list[] = {&fake_ops, &keyed_ops, NULL};
    return list;
}

#endif
