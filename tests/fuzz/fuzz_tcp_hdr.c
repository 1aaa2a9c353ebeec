/* libFuzzer harness: tcp frame headers (src/tp/tcp/tcp_wire.h), the one
 * parser of what a tcp peer sends ahead of every chunk. A header that
 * decodes must describe a chunk inside its operation, and encode and decode
 * again to the same fields. */
#include <stdlib.h>
#include <string.h>

#include "tp/tcp/tcp_wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t buf[TCP_HDR_LEN] = {0}, again[TCP_HDR_LEN];
    tcp_hdr_t h, h2;

    memset(&h, 0, sizeof(h)); /* padding too: the structs are compared whole */
    memset(&h2, 0, sizeof(h2));
    memcpy(buf, data, size < sizeof(buf) ? size : sizeof(buf));
    if (!tcp_hdr_decode(buf, &h))
        return 0;
    if (h.off > h.total || h.clen > h.total - h.off)
        abort();
    tcp_hdr_encode(&h, again);
    if (!tcp_hdr_decode(again, &h2) || memcmp(&h, &h2, sizeof(h)) != 0)
        abort();
    return 0;
}
