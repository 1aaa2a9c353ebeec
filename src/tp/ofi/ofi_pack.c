/* Packing of many small local pieces: a request whose next operation would
 * need more local pieces than the provider takes in one (iov_limit) and
 * whose pieces average less than the provider's pack threshold (the quirk
 * table, or UCCL_OFI_PACK_BELOW) moves through registered bounce buffers
 * instead: a write copies its pieces into one and posts one operation of up
 * to OFI_BOUNCE_SIZE bytes; a read lands in one and is scattered into the
 * pieces when it completes. On software providers an operation costs far
 * more than the copy (1,179,648 bytes in 128 pieces: 32 operations of four
 * pieces against 5 of 256 KiB). The remote side is untouched: one
 * contiguous remote range per operation, as without packing. */
#include <stdlib.h>
#include <string.h>

#include "ofi.h"

struct ofi_bounce {
    uccl_list_t link; /* tp->bounce_free */
    uint8_t *p;
    struct fid_mr *mr;
    void *desc;
};

uccl_status_t uccl_ofi_pack_setup(tp_ofi_t *tp)
{
    if (strcmp(tp->cfg.pack_below, "auto") == 0) {
        tp->pack_below = tp->quirk->pack_below;
        return UCCL_OK;
    }
    if (uccl_cfg_parse_value(UCCL_CFG_SIZE, tp->cfg.pack_below, &tp->pack_below) != UCCL_OK) {
        uccl_error("UCCL_OFI_PACK_BELOW=%s: a size (0 = never pack) or auto",
                   tp->cfg.pack_below);
        return UCCL_ERR_INVALID_PARAM;
    }
    return UCCL_OK;
}

void uccl_ofi_pack_close(tp_ofi_t *tp)
{
    while (!uccl_list_empty(&tp->bounce_free)) {
        ofi_bounce_t *b = uccl_container_of(tp->bounce_free.next, ofi_bounce_t, link);

        uccl_list_del(&b->link);
        fi_close(&b->mr->fid);
        free(b->p);
        free(b);
    }
    tp->nbounce = 0;
}

/* Should the operation of req at byte off (at most want bytes) be packed? */
bool uccl_ofi_pack_wanted(const tp_ofi_t *tp, const uccl_req_t *req, size_t off, size_t want)
{
    size_t bytes = 0;
    int pieces = 0;

    if (tp->pack_below == 0 || req->iovcnt <= tp->cfg.max_iov)
        return false;
    for (int i = 0; i < req->iovcnt && bytes < want; i++) {
        size_t piece = req->iov[i].len;

        if (off >= piece) {
            off -= piece;
            continue;
        }
        bytes += piece - off;
        off = 0;
        pieces++;
    }
    if (bytes > want)
        bytes = want;
    return pieces > tp->cfg.max_iov && bytes / (size_t)pieces < tp->pack_below;
}

/* A free bounce, or NULL: none left (retry once an operation completed). */
ofi_bounce_t *uccl_ofi_bounce_get(tp_ofi_t *tp)
{
    ofi_bounce_t *b;

    if (!uccl_list_empty(&tp->bounce_free)) {
        b = uccl_container_of(tp->bounce_free.next, ofi_bounce_t, link);
        uccl_list_del(&b->link);
        return b;
    }
    if (tp->nbounce >= OFI_BOUNCE_MAX)
        return NULL;
    b = calloc(1, sizeof(*b));
    if (b == NULL)
        return NULL;
    b->p = aligned_alloc(4096, OFI_BOUNCE_SIZE);
    if (b->p == NULL || uccl_ofi_reg_buf(tp, b->p, OFI_BOUNCE_SIZE, &b->mr, &b->desc) != UCCL_OK) {
        free(b->p);
        free(b);
        return NULL;
    }
    tp->nbounce++;
    return b;
}

void uccl_ofi_bounce_put(tp_ofi_t *tp, ofi_bounce_t *b)
{
    uccl_list_push_front(&tp->bounce_free, &b->link);
}

uint8_t *uccl_ofi_bounce_ptr(const ofi_bounce_t *b)
{
    return b->p;
}

void *uccl_ofi_bounce_desc(const ofi_bounce_t *b)
{
    return b->desc;
}
