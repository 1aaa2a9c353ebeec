/* Where one RMA operation's bytes come from and go to: the local pieces of
 * a request from a byte offset (up to the provider's iov_limit), and its
 * remote ranges (one, a writemsg request's several, a rendezvous send's
 * receive pieces from the CTS, or granted windows), several per operation
 * up to the provider's rma_iov_limit. */
#include "ofi.h"

/* Remote address (as the provider addresses it), key and bytes left in that
 * remote range at byte off of req. */
uccl_status_t uccl_ofi_remote_at(const uccl_req_t *req, size_t off, uint64_t *addr, uint64_t *key,
                                 uint64_t *left)
{
    const ofi_xfer_t *s = req->tp_ptr;
    uint64_t base;
    uccl_status_t st;

    *addr = *key = *left = 0;
    if (s != NULL && s->staged.grants != NULL) { /* a send on granted windows: the oldest */
        uccl_rndv_grants_at(s->staged.grants, off, addr, key, left);
        return UCCL_OK;
    }
    if (s == NULL || s->nseg == 0) {
        st = uccl_ofi_rkey_parse(req->remote.rkey, req->remote.rkey_len, key, &base);
        for (int i = 0; i < req->nrseg; i++) { /* several ranges of one region */
            if (off < req->rseg[i].len) {
                *addr = req->rseg[i].addr - base + off;
                *left = req->rseg[i].len - off;
                return st;
            }
            off -= req->rseg[i].len;
        }
        if (req->nrseg <= 1) {
            *addr = req->remote.addr - base + off;
            *left = req->len - off;
        }
        return st;
    }
    for (uint64_t i = 0; i < s->nseg; i++) {
        if (off < s->segs[i].len) {
            *addr = s->segs[i].addr + off;
            *key = s->segs[i].key;
            *left = s->segs[i].len - off;
            return UCCL_OK;
        }
        off -= s->segs[i].len;
    }
    return UCCL_OK;
}

/* Local pieces of req from byte off: up to max pieces and want bytes. */
size_t uccl_ofi_gather(const tp_ofi_ep_t *ep, const uccl_req_t *req, size_t off, size_t want,
                       struct iovec *iov, void **desc, int max, int *n)
{
    size_t got = 0;

    *n = 0;
    if (req->iovcnt == 1 && off < req->iov[0].len && want > 0 && max > 0) {
        /* one piece (nearly every message): what the loop below does, without the loop */
        got = req->iov[0].len - off < want ? req->iov[0].len - off : want;
        iov[0] = (struct iovec){(uint8_t *)req->iov[0].addr + off, got};
        desc[0] = uccl_ofi_iov_memh(ep->tp, req, 0)->desc;
        *n = 1;
        return got;
    }
    for (int i = 0; i < req->iovcnt && got < want && *n < max; i++) {
        size_t piece = req->iov[i].len, take;

        if (off >= piece) {
            off -= piece;
            continue;
        }
        take = piece - off < want - got ? piece - off : want - got;
        iov[*n].iov_base = (uint8_t *)req->iov[i].addr + off;
        iov[*n].iov_len = take;
        desc[*n] = uccl_ofi_iov_memh(ep->tp, req, i)->desc;
        (*n)++;
        got += take;
        off = 0;
    }
    return got;
}

/* More remote ranges for one operation that starts at byte off of req with
 * rma[0] (*nrma 1), up to the provider's rma_iov_limit and cap bytes in
 * all (UCCL_OFI_CHUNK at most): a request with several remote ranges (a
 * writemsg request's, a rendezvous send into several receive pieces), not
 * staged. Returns the operation's bytes. */
size_t uccl_ofi_remote_more(const tp_ofi_t *tp, const uccl_req_t *req, size_t off, size_t cap,
                            struct fi_rma_iov *rma, size_t *nrma)
{
    const ofi_xfer_t *x = req->tp_ptr;
    size_t lim = tp->rma_iov_limit < OFI_IOV_MAX ? tp->rma_iov_limit : OFI_IOV_MAX;
    size_t total = rma[0].len;

    if (cap > tp->cfg.chunk)
        cap = tp->cfg.chunk;
    if (x != NULL && (x->staged.src != NULL || x->staged.sink != NULL || x->staged.grants != NULL))
        return total;
    while (*nrma < lim && total < cap) {
        uint64_t addr, key, left;

        if (uccl_ofi_remote_at(req, off + total, &addr, &key, &left) != UCCL_OK || left == 0)
            break;
        if (left > cap - total)
            left = cap - total;
        rma[(*nrma)++] = (struct fi_rma_iov){.addr = addr, .len = left, .key = key};
        total += left;
    }
    return total;
}

/* The remote ranges cut to the got bytes the local side took. */
void uccl_ofi_remote_trim(struct fi_rma_iov *rma, size_t *nrma, size_t got)
{
    size_t i = 0;

    for (; i < *nrma && got > 0; i++) {
        if (rma[i].len > got)
            rma[i].len = got;
        got -= rma[i].len;
    }
    *nrma = i > 0 ? i : 1;
}
