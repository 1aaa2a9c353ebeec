/* Status strings, generated from UCCL_STATUS_MAP. */
#include <uccl/uccl.h>

#include "uccl_build.h"

const char *uccl_strerror(uccl_status_t status)
{
    switch (status) {
#define UCCL_STATUS_TEXT_(name, value, text) \
    case UCCL_##name:                        \
        return text;
        UCCL_STATUS_MAP(UCCL_STATUS_TEXT_)
#undef UCCL_STATUS_TEXT_
    }
    return "unknown status";
}

const char *uccl_status_name(uccl_status_t status)
{
    switch (status) {
#define UCCL_STATUS_NAME_(name, value, text) \
    case UCCL_##name:                        \
        return "UCCL_" #name;
        UCCL_STATUS_MAP(UCCL_STATUS_NAME_)
#undef UCCL_STATUS_NAME_
    }
    return "UCCL_UNKNOWN";
}

const char *uccl_version(void)
{
    return PACKAGE_VERSION;
}
