/* libFuzzer harness: engine address blobs (src/core/address.c), the one
 * parser of the blobs peers send. Each input is parsed as it is, then with
 * its length field and checksum made right, so that the fuzzer gets past
 * the checksum into the fields behind it. A parse that succeeds must leave
 * a result that keeps every promise the parser makes. */
#include <stdlib.h>
#include <string.h>

#include "core/core.h"

static void check_parsed(const uint8_t *buf, size_t len, const uccl_address_t *a)
{
    if (a->ntp < 0 || a->ntp > UCCL_TP_MAX)
        abort();
    if (memchr(a->hostname, '\0', sizeof(a->hostname)) == NULL)
        abort();
    for (int i = 0; i < a->ntp; i++) {
        const uint8_t *p = a->tp[i].addr;
        if (memchr(a->tp[i].name, '\0', sizeof(a->tp[i].name)) == NULL)
            abort();
        if (a->tp[i].len > 0 && (p < buf || p + a->tp[i].len > buf + len))
            abort(); /* an entry must point inside the blob it came from */
    }
}

static void parse(const uint8_t *buf, size_t len)
{
    uccl_address_t a;

    if (uccl_address_parse(buf, len, &a) == UCCL_OK)
        check_parsed(buf, len, &a);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t *fixed;

    parse(data, size);
    if (size < 12 || size > UCCL_ADDRESS_MAX)
        return 0;
    fixed = malloc(size);
    if (fixed == NULL)
        return 0;
    memcpy(fixed, data, size);
    uccl_put_u16(fixed + 6, (uint16_t)size);
    uccl_put_u32(fixed + size - 4, uccl_fnv1a32(fixed, size - 4));
    parse(fixed, size);
    free(fixed);
    return 0;
}
