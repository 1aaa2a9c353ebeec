/* The shm protocol's one parser of packets from the peer (shm.h): checks
 * the structure of a record read from the ring (its size against its type,
 * its pieces, its payload) and copies what it needs out of the shared
 * memory, which the peer can still scribble on. Nothing here looks at the
 * endpoint: what an id or a range names is shm_rx.c's to check. */
#include "shm.h"

#include <string.h>

const char *uccl_shm_pkt_name(uint32_t type)
{
    switch (type) {
    case SHM_PKT_EAGER: return "eager";
    case SHM_PKT_RTS: return "rts";
    case SHM_PKT_CTS: return "cts";
    case SHM_PKT_DATA: return "data";
    case SHM_PKT_FIN: return "fin";
    case SHM_PKT_RMA: return "rma";
    case SHM_PKT_WDATA: return "wdata";
    case SHM_PKT_OFFER: return "offer";
    case SHM_PKT_DONE: return "done";
    default: return "unknown";
    }
}

/* A fixed part of fixed bytes, then iovcnt pieces, and nothing else. */
static uccl_status_t shm_parse_iov(const uint8_t *p, uint32_t size, size_t fixed, void *dst,
                                   const uint32_t *iovcnt, shm_rx_pkt_t *pkt)
{
    if (size < fixed)
        return UCCL_ERR_TRANSPORT;
    memcpy(dst, p, fixed);
    if (*iovcnt > UCCL_IOV_MAX || size != fixed + (size_t)*iovcnt * sizeof(shm_wire_iov_t))
        return UCCL_ERR_TRANSPORT;
    memcpy(pkt->iov, p + fixed, (size_t)*iovcnt * sizeof(shm_wire_iov_t));
    return UCCL_OK;
}

/* A fixed part of fixed bytes, then exactly *len payload bytes. */
static uccl_status_t shm_parse_payload(const uint8_t *p, uint32_t size, size_t fixed, void *dst,
                                       const uint64_t *len, shm_rx_pkt_t *pkt)
{
    if (size < fixed)
        return UCCL_ERR_TRANSPORT;
    memcpy(dst, p, fixed);
    if (*len != size - fixed)
        return UCCL_ERR_TRANSPORT;
    pkt->payload = p + fixed;
    pkt->payload_len = size - fixed;
    return UCCL_OK;
}

uccl_status_t uccl_shm_pkt_parse(const uint8_t *p, const shm_pkt_hdr_t *hdr, shm_rx_pkt_t *pkt)
{
    uint32_t size = hdr->size;
    uccl_status_t st;

    pkt->payload = NULL;
    pkt->payload_len = 0;
    switch (hdr->type) {
    case SHM_PKT_EAGER:
        st = shm_parse_payload(p, size, sizeof(pkt->u.eager), &pkt->u.eager, &pkt->u.eager.len, pkt);
        break;
    case SHM_PKT_DATA:
        st = shm_parse_payload(p, size, sizeof(pkt->u.data), &pkt->u.data, &pkt->u.data.len, pkt);
        break;
    case SHM_PKT_WDATA:
        st = shm_parse_payload(p, size, sizeof(pkt->u.wdata), &pkt->u.wdata, &pkt->u.wdata.len, pkt);
        break;
    case SHM_PKT_RTS:
        st = shm_parse_iov(p, size, sizeof(pkt->u.rts), &pkt->u.rts, &pkt->u.rts.iovcnt, pkt);
        break;
    case SHM_PKT_RMA:
        st = shm_parse_iov(p, size, sizeof(pkt->u.rma), &pkt->u.rma, &pkt->u.rma.iovcnt, pkt);
        break;
    case SHM_PKT_OFFER:
        st = shm_parse_iov(p, size, sizeof(pkt->u.offer), &pkt->u.offer, &pkt->u.offer.iovcnt, pkt);
        break;
    case SHM_PKT_CTS:
    case SHM_PKT_FIN:
    case SHM_PKT_DONE:
        st = size == sizeof(pkt->u.ctl) ? UCCL_OK : UCCL_ERR_TRANSPORT;
        if (st == UCCL_OK)
            memcpy(&pkt->u.ctl, p, sizeof(pkt->u.ctl));
        break;
    default:
        st = UCCL_ERR_TRANSPORT;
    }
    pkt->u.hdr = *hdr; /* the checked header, whatever the ring holds now */
    return st;
}
