/* Linked statically against libuccl.a by check-static.sh: creates an engine
 * (which loads the topology, so hwloc must be linked in too) and prints its
 * address size. */
#include <stdio.h>
#include <uccl/uccl.h>

int main(void)
{
    uccl_engine_params_t params = {.field_mask = UCCL_ENGINE_PARAM_TRANSPORTS, .transports = "tcp"};
    uint8_t blob[UCCL_ADDRESS_MAX];
    size_t len = sizeof(blob);
    uccl_engine_t *engine;
    uccl_status_t st = uccl_engine_create(&params, &engine);

    if (st != UCCL_OK) {
        fprintf(stderr, "uccl_engine_create: %s\n", uccl_strerror(st));
        return 1;
    }
    st = uccl_engine_address(engine, blob, &len);
    uccl_engine_destroy(engine);
    if (st != UCCL_OK) {
        fprintf(stderr, "uccl_engine_address: %s\n", uccl_strerror(st));
        return 1;
    }
    printf("static libuccl: engine created, address of %zu bytes\n", len);
    return 0;
}
