/* dma-buf export of GPU memory (uccl_gpu_dmabuf_fd, what verbs registers
 * with ibv_reg_dmabuf_mr): on a real GPU, for a pointer into the middle of
 * an allocation, the fd covers the page-aligned range that holds the bytes
 * (its size, from lseek, reaches offset + len) and offset is where the
 * pointer lies in it; host memory, a length of 0 and NULL outputs are
 * refused with INVALID_PARAM. Runs on a GPU machine with no RDMA NIC: the
 * export needs none. Prints "skipped: no GPU" (77) without a GPU, and says
 * so when the driver or kernel cannot export dma-bufs. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gpu/gpu.h"
#include "check1.h"

#define ALLOC (8u << 20)
#define OFF 4099u /* not page aligned */
#define LEN (3u << 20)


static void check_refusals(char *dev)
{
    static char host[4096];
    uint64_t off = 0;
    int fd = -1;

    CHECK(uccl_gpu_dmabuf_fd(host, sizeof(host), &fd, &off) == UCCL_ERR_INVALID_PARAM,
          "host memory is refused");
    CHECK(uccl_gpu_dmabuf_fd(dev, 0, &fd, &off) == UCCL_ERR_INVALID_PARAM, "length 0 is refused");
    CHECK(uccl_gpu_dmabuf_fd(dev, LEN, NULL, &off) == UCCL_ERR_INVALID_PARAM, "NULL fd is refused");
    CHECK(uccl_gpu_dmabuf_fd(dev, LEN, &fd, NULL) == UCCL_ERR_INVALID_PARAM,
          "NULL offset is refused");
    CHECK(fd == -1, "a refused export wrote an fd");
}

/* Export [base + OFF, + LEN); 1 when it ran, 0 when the platform cannot. */
static int check_export(char *base)
{
    long page = sysconf(_SC_PAGESIZE);
    uint64_t off = 0;
    off_t size;
    int fd = -1;
    uccl_status_t st = uccl_gpu_dmabuf_fd(base + OFF, LEN, &fd, &off);

    if (st == UCCL_ERR_UNSUPPORTED) {
        printf("SKIP: dma-buf export: this %s driver or kernel cannot export dma-bufs (UNSUPPORTED)\n",
               uccl_gpu_backend());
        return 0;
    }
    CHECK(st == UCCL_OK, "export of %u bytes at offset %u: %s", LEN, OFF, uccl_status_name(st));
    if (st != UCCL_OK)
        return 1;
    CHECK(fd >= 0, "fd %d", fd);
    CHECK(off == OFF % (uint64_t)page, "offset %llu, want %llu", (unsigned long long)off,
          (unsigned long long)(OFF % (uint64_t)page));
    size = lseek(fd, 0, SEEK_END);
    CHECK(size >= (off_t)(off + LEN) && size % page == 0,
          "the dma-buf holds %lld bytes, want a page multiple of at least %llu", (long long)size,
          (unsigned long long)(off + LEN));
    close(fd);
    printf("ok dma-buf export: %u bytes at offset %u -> fd of %lld bytes, data at %llu\n", LEN,
           OFF, (long long)size, (unsigned long long)off);
    return 1;
}

int main(void)
{
    void *dev = NULL;
    int n = 0, ran;

    setvbuf(stdout, NULL, _IOLBF, 0);
    if (uccl_gpu_count(&n) != UCCL_OK || n == 0) {
        printf("skipped: no GPU\n");
        return 77;
    }
    if (uccl_gpu_set_device(0) != UCCL_OK || uccl_gpu_malloc(&dev, ALLOC) != UCCL_OK) {
        printf("FAIL: cannot allocate %u bytes on GPU 0\n", ALLOC);
        return 1;
    }
    check_refusals(dev);
    ran = check_export(dev);
    uccl_gpu_free(dev);
    printf("t_gpu_dmabuf (%s backend): %s\n", uccl_gpu_backend(),
           failures ? "FAIL" : ran ? "PASS" : "refusals PASS, export skipped");
    return failures ? 1 : 0; /* an export that could not run said SKIP above */
}
