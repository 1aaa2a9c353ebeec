/* What a process holds, for the fault suite's leak checks (issue 20): bytes
 * of heap in use (open file descriptors: unit_fd_count, unit_proc.h).
 * Header-only, shared by t_fault and t_netfault. */
#ifndef UCCL_TESTS_FAULT_RES_H
#define UCCL_TESTS_FAULT_RES_H

#include <malloc.h>
#include <stddef.h>

#include "../unit/unit_proc.h"

#if defined(__SANITIZE_ADDRESS__)
#define FAULT_RES_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define FAULT_RES_ASAN 1
#endif
#endif
#ifdef FAULT_RES_ASAN
/* libasan's (sanitizer/allocator_interface.h, which gcc does not ship) */
size_t __sanitizer_get_current_allocated_bytes(void);
#endif

/* Bytes of heap in use: malloc's arena and mmap'd blocks (mallinfo2), or
 * under ASan its allocator's count (ASan replaces malloc). */
static inline size_t fault_heap_bytes(void)
{
#ifdef FAULT_RES_ASAN
    return __sanitizer_get_current_allocated_bytes();
#else
    struct mallinfo2 mi = mallinfo2();
    return mi.uordblks + mi.hblkhd;
#endif
}

#endif
