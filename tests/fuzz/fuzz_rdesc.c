/* libFuzzer harness: remote descriptors (src/core/rdesc.c), the one parser
 * of the 64 bytes peers hand us for one-sided access, through the public
 * uccl_rdesc_info and the core's decoder. A descriptor that decodes must
 * encode and decode again to the same fields. */
#include <stdlib.h>
#include <string.h>

#include "core/core.h"

static void check(const uccl_rdesc_t *d);

/* Every version keeps magic "UCRD" at 0 and fnv1a32 of bytes 0..59 at 60:
 * each input is tried as it is and with that frame made right, so that the
 * fuzzer gets past the checksum into the fields behind it. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uccl_rdesc_t d;

    memset(&d, 0, sizeof(d));
    memcpy(d.bytes, data, size < sizeof(d.bytes) ? size : sizeof(d.bytes));
    check(&d);
    uccl_put_u32(d.bytes, 0x44524355u);
    uccl_put_u32(d.bytes + 60, uccl_fnv1a32(d.bytes, 60));
    check(&d);
    return 0;
}

static void check(const uccl_rdesc_t *in)
{
    uccl_rdesc_t d = *in, again;
    uccl_rdesc_info_t info, info2;
    uccl_rdesc_fields_t f;
    uccl_status_t st;

    st = uccl_rdesc_info(&d, &info);
    if (st != UCCL_OK && st != UCCL_ERR_BAD_DESC && st != UCCL_ERR_VERSION)
        abort(); /* only the documented refusals */
    memset(&f, 0, sizeof(f));
    if (uccl_rdesc_decode(&d, &f) != UCCL_OK) {
        if (st == UCCL_OK)
            abort(); /* the two entry points must agree */
        return;
    }
    if (st != UCCL_OK || (info.mem_type != UCCL_MEM_HOST && info.mem_type != UCCL_MEM_CUDA &&
                          info.mem_type != UCCL_MEM_ROCM))
        abort();
    uccl_rdesc_encode(&f, &again);
    if (uccl_rdesc_info(&again, &info2) != UCCL_OK || info2.engine_id != info.engine_id ||
        info2.addr != info.addr || info2.len != info.len || info2.mem_type != info.mem_type)
        abort();
}
