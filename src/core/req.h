/* The core's own request calls; the request itself is part of the
 * transport SPI (struct uccl_req in tp_api.h). */
#ifndef UCCL_CORE_REQ_H
#define UCCL_CORE_REQ_H

#include "tp_api.h"

#define UCCL_MAGIC_REQ 0x51455243u
#define UCCL_MAGIC_REQ_FREE 0x45455246u

uccl_req_t *uccl_req_alloc(uccl_engine_t *engine);
void uccl_req_release(uccl_req_t *req);
uccl_status_t uccl_req_check(const uccl_req_t *req);

#endif
