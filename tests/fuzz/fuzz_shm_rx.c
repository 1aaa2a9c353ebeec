/* libFuzzer harness: what an shm peer puts in our ring (src/tp/shm): the
 * ring's own record headers and counter (uccl_spsc_peek, spsc_ring.c) and
 * every packet type (uccl_shm_pkt_parse, shm_wire.c), read as the receiving
 * side reads them. Input: a mode byte, then with bit 0 clear the ring's
 * bytes, all of them published (head = their length, aligned); with bit 0
 * set the producer's head counter (8 bytes: a wrapped or bogus counter)
 * and then the ring's bytes. A record peek hands out must lie inside the
 * ring, and a packet that parses must describe only bytes of its record. */
#include <stdlib.h>
#include <string.h>

#include "tp/shm/shm.h"

#define RING_CAP 4096

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static _Alignas(64) uint8_t mem[sizeof(uccl_spsc_ctl_t) + RING_CAP];
    uccl_spsc_ctl_t *ctl = (uccl_spsc_ctl_t *)mem;
    uint8_t *ring = mem + sizeof(uccl_spsc_ctl_t);
    uint64_t head = 0;
    uccl_spsc_t rx;
    shm_rx_pkt_t pkt;

    if (size < 1)
        return 0;
    if ((data[0] & 1) && size >= 9) {
        memcpy(&head, data + 1, 8);
        data += 9;
        size -= 9;
    } else {
        data++;
        size--;
        head = ((size < RING_CAP ? size : RING_CAP) + SHM_RING_ALIGN - 1) & ~(uint64_t)(SHM_RING_ALIGN - 1);
    }
    memset(ring, 0, RING_CAP);
    memcpy(ring, data, size < RING_CAP ? size : RING_CAP);
    uccl_spsc_attach(&rx, mem, RING_CAP, SHM_RING_ALIGN, false, true);
    atomic_store(&ctl->head, head);
    uccl_spsc_attach(&rx, mem, RING_CAP, SHM_RING_ALIGN, false, false);
    for (int n = 0; n < 2 * RING_CAP / SHM_RING_ALIGN; n++) {
        shm_pkt_hdr_t hdr;
        bool bad;
        const uint8_t *p = uccl_spsc_peek(&rx, &hdr, &bad);

        if (p == NULL)
            break;
        if (p < ring || hdr.size < sizeof(hdr) || hdr.size > (size_t)(ring + RING_CAP - p))
            abort(); /* the ring handed out bytes outside itself */
        if (uccl_shm_pkt_parse(p, &hdr, &pkt) == UCCL_OK) {
            if (pkt.u.hdr.type != hdr.type || pkt.u.hdr.size != hdr.size)
                abort();
            if (pkt.payload != NULL &&
                (pkt.payload < p || pkt.payload_len > hdr.size ||
                 pkt.payload + pkt.payload_len != p + hdr.size))
                abort(); /* a payload must end the record, inside it */
            switch (hdr.type) {
            case SHM_PKT_EAGER:
                if (pkt.payload_len != pkt.u.eager.len)
                    abort();
                break;
            case SHM_PKT_RTS:
            case SHM_PKT_RMA:
            case SHM_PKT_OFFER: {
                uint32_t cnt = hdr.type == SHM_PKT_RTS   ? pkt.u.rts.iovcnt
                               : hdr.type == SHM_PKT_RMA ? pkt.u.rma.iovcnt
                                                         : pkt.u.offer.iovcnt;
                if (cnt > UCCL_IOV_MAX || pkt.payload != NULL)
                    abort();
                /* the pieces are the record's last bytes, copied out */
                if (cnt > 0 &&
                    memcmp(pkt.iov, p + hdr.size - cnt * sizeof(shm_wire_iov_t),
                           cnt * sizeof(shm_wire_iov_t)) != 0)
                    abort();
                break;
            }
            case SHM_PKT_CTS:
            case SHM_PKT_FIN:
            case SHM_PKT_DONE:
                if (hdr.size != sizeof(shm_pkt_ctl_t))
                    abort();
                break;
            case SHM_PKT_DATA:
            case SHM_PKT_WDATA:
                if (pkt.payload == NULL)
                    abort();
                break;
            default:
                abort(); /* an unknown type never parses */
            }
        }
        uccl_spsc_release(&rx, hdr.size);
    }
    return 0;
}
