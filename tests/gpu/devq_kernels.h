/* C launchers of the b_devq kernels (devq_kernels.cu); each returns a
 * cudaError_t as int (0 = launched). */
#ifndef UCCL_TESTS_GPU_DEVQ_KERNELS_H
#define UCCL_TESTS_GPU_DEVQ_KERNELS_H

#include <stdint.h>
#include <uccl/uccl_devq.h>

#ifdef __cplusplus
extern "C" {
#endif

int dqk_mixed(const uccl_devq_handle_t *qs_dev, uint32_t nrings, uint32_t per, uint32_t maxlen,
              uint64_t mark_off, int *rc_dev);
int dqk_wait_counters(uccl_devq_handle_t q, uint32_t n, int *rc_dev);
int dqk_verify(const uint8_t *dst, uint32_t nthreads, uint32_t per, uint32_t maxlen, uint64_t mark_off,
               unsigned long long *bad_dev);
int dqk_bench(uccl_devq_handle_t q, uint64_t n, uint64_t size, uint64_t stride, uint64_t local,
              uint64_t span, int use_warp, int wait, unsigned long long *out_dev);
int dqk_latency(uccl_devq_handle_t q, uint64_t size, uint32_t iters, unsigned long long *ts_dev,
                int *rc_dev);
int dqk_endless(uccl_devq_handle_t q, uint64_t span, int *rc_dev, unsigned long long *puts_dev);
int dqk_sync(void);
int dqk_busy(void);

#ifdef __cplusplus
}
#endif

#endif
