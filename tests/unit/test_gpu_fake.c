/* The test-only fake GPU backend (src/gpu/fake.c, fake_stream.c), which the
 * GPU tests run on in CI: devices, memory classification, IPC between
 * processes (a forked peer) with every kind of bad handle, the lazy stream
 * and event model, and the injected copy faults. Exits 77 on any other
 * backend. */
#include <CUnit/Basic.h>
#include <dirent.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gpu/gpu.h"
#include "unit.h"

#define LEN 8192

/* Objects of this process in /dev/shm (the backend names them /uccl-fakegpu-PID-...). */
static int shm_objects(void)
{
    char prefix[64];
    struct dirent *d;
    DIR *dir = opendir("/dev/shm");
    int n = 0;

    snprintf(prefix, sizeof(prefix), "uccl-fakegpu-%d-", (int)getpid());
    while (dir != NULL && (d = readdir(dir)) != NULL)
        n += strncmp(d->d_name, prefix, strlen(prefix)) == 0;
    if (dir != NULL)
        closedir(dir);
    return n;
}

/* Run fn in a child process; its return value (0 = all its checks held). */
static int in_child(int (*fn)(void))
{
    int st;
    pid_t pid;

    fflush(NULL);
    pid = fork();
    if (pid == 0)
        _exit(fn());
    return pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) ? WEXITSTATUS(st) : 255;
}

/* ------------------------------------------------------------ devices */

static void *thread_device(void *arg)
{
    uccl_gpu_get_device(arg);
    return NULL;
}

static void test_devices(void)
{
    char a[UCCL_GPU_BUS_ID_MAX], b[UCCL_GPU_BUS_ID_MAX];
    int n = 0, dev = -1, can = 0, nvlink = 0, other = -1;
    pthread_t t;

    UNIT_ASSERT_STATUS(uccl_gpu_count(&n), UCCL_OK);
    CU_ASSERT_EQUAL(n, 2);
    UNIT_ASSERT_STATUS(uccl_gpu_set_device(1), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_gpu_get_device(&dev), UCCL_OK);
    CU_ASSERT_EQUAL(dev, 1);
    CU_ASSERT_EQUAL_FATAL(pthread_create(&t, NULL, thread_device, &other), 0);
    pthread_join(t, NULL);
    CU_ASSERT_EQUAL(other, 0); /* the current device is per thread */
    UNIT_ASSERT_STATUS(uccl_gpu_set_device(2), UCCL_ERR_NO_DEVICE);
    UNIT_ASSERT_STATUS(uccl_gpu_pci_bus_id(0, a, sizeof(a)), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_gpu_pci_bus_id(1, b, sizeof(b)), UCCL_OK);
    CU_ASSERT(strcmp(a, b) != 0);
    UNIT_ASSERT_STATUS(uccl_gpu_device_by_bus_id(b, &dev), UCCL_OK);
    CU_ASSERT_EQUAL(dev, 1);
    UNIT_ASSERT_STATUS(uccl_gpu_device_by_bus_id("0000:19:00.0", &dev), UCCL_ERR_NOT_FOUND);
    UNIT_ASSERT_STATUS(uccl_gpu_pci_bus_id(0, a, 4), UCCL_ERR_BUFFER_TOO_SMALL);
    UNIT_ASSERT_STATUS(uccl_gpu_peer_query(0, 1, &can, &nvlink), UCCL_OK);
    CU_ASSERT(can == 1 && nvlink == 1);
    UNIT_ASSERT_STATUS(uccl_gpu_peer_query(0, 5, &can, &nvlink), UCCL_ERR_NO_DEVICE);
    UNIT_ASSERT_STATUS(uccl_gpu_set_device(0), UCCL_OK);
}

/* ------------------------------------------------------------ memory */

static void test_memory(void)
{
    int before = shm_objects(), fd = -1;
    uccl_gpu_ptr_attr_t attr;
    char host[64];
    uint64_t off;
    char *p = NULL;

    UNIT_ASSERT_STATUS(uccl_gpu_set_device(1), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_gpu_malloc((void **)&p, LEN), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_gpu_set_device(0), UCCL_OK);
    CU_ASSERT_EQUAL(shm_objects(), before + 1);
    UNIT_ASSERT_STATUS(uccl_gpu_ptr_attr(p + 100, &attr), UCCL_OK);
    CU_ASSERT(attr.type == UCCL_MEM_CUDA && attr.device == 1 && attr.base == p && attr.size == LEN);
    UNIT_ASSERT_STATUS(uccl_gpu_ptr_attr(host, &attr), UCCL_OK);
    CU_ASSERT(attr.type == UCCL_MEM_HOST && attr.device == -1);
    UNIT_ASSERT_STATUS(uccl_gpu_dmabuf_fd(p, LEN, &fd, &off), UCCL_ERR_UNSUPPORTED);
    UNIT_ASSERT_STATUS(uccl_gpu_dmabuf_fd(host, sizeof(host), &fd, &off), UCCL_ERR_INVALID_PARAM);
    UNIT_ASSERT_STATUS(uccl_gpu_free(p + 1), UCCL_ERR_INVALID_PARAM);
    UNIT_ASSERT_STATUS(uccl_gpu_free(p), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_gpu_free(p), UCCL_ERR_INVALID_PARAM);
    CU_ASSERT_EQUAL(shm_objects(), before); /* unlinked on free */
    UNIT_ASSERT_STATUS(uccl_gpu_ptr_attr(p, &attr), UCCL_OK);
    CU_ASSERT_EQUAL(attr.type, UCCL_MEM_HOST);
}

/* ------------------------------------------------------------ IPC */

/* Another process owning one allocation (forked before it touches the
 * backend, as a CUDA process must be). */
typedef struct peer {
    pid_t pid;
    int rd, wr; /* from and to it */
} peer_t;

/* The peer's side: allocate, fill the ends, send the handle; on the first
 * byte from the parent check that the parent's write arrived and free,
 * acknowledge, exit on the second byte. Returns the failed checks. */
static int peer_main(int rd, int wr)
{
    uccl_gpu_ipc_handle_t h;
    char *p = NULL, go = 0;
    int bad = 0;

    memset(&h, 0, sizeof(h));
    bad += uccl_gpu_malloc((void **)&p, LEN) != UCCL_OK;
    if (p != NULL) {
        p[0] = 'p';
        p[LEN - 1] = 'P';
        bad += uccl_gpu_ipc_get(p + 10, &h) != UCCL_OK; /* any pointer into it */
    }
    bad += write(wr, &h, sizeof(h)) != (ssize_t)sizeof(h);
    bad += read(rd, &go, 1) != 1;
    bad += p == NULL || p[0] != 'c';
    bad += uccl_gpu_free(p) != UCCL_OK;
    bad += write(wr, &go, 1) != 1;
    bad += read(rd, &go, 1) != 1;
    return bad;
}

static int peer_start(peer_t *pr, uccl_gpu_ipc_handle_t *h)
{
    int up[2], down[2];

    if (pipe(up) != 0)
        return -1;
    if (pipe(down) != 0) {
        close(up[0]);
        close(up[1]);
        return -1;
    }
    fflush(NULL);
    pr->pid = fork();
    if (pr->pid == 0) {
        close(up[0]);
        close(down[1]);
        _exit(peer_main(down[0], up[1]));
    }
    close(up[1]);
    close(down[0]);
    pr->rd = up[0];
    pr->wr = down[1];
    return pr->pid > 0 && read(pr->rd, h, sizeof(*h)) == (ssize_t)sizeof(*h) ? 0 : -1;
}

/* Tell the peer to go on one step (and wait for its answer when want_ack). */
static int peer_step(peer_t *pr, int want_ack)
{
    char b = 1;

    return write(pr->wr, &b, 1) == 1 && (!want_ack || read(pr->rd, &b, 1) == 1) ? 0 : -1;
}

static int peer_finish(peer_t *pr)
{
    int st;

    close(pr->rd);
    close(pr->wr);
    return waitpid(pr->pid, &st, 0) == pr->pid && WIFEXITED(st) ? WEXITSTATUS(st) : 255;
}

/* The open handle on device 1: the peer's bytes, counted reopen, closes. */
static void ipc_open_close(const uccl_gpu_ipc_handle_t *h)
{
    uccl_gpu_ptr_attr_t attr;
    char *p = NULL, *q = NULL;

    UNIT_ASSERT_STATUS(uccl_gpu_set_device(1), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_gpu_ipc_open(h, (void **)&p), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_gpu_set_device(0), UCCL_OK);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT(p[0] == 'p' && p[LEN - 1] == 'P');
    UNIT_ASSERT_STATUS(uccl_gpu_ptr_attr(p + 5, &attr), UCCL_OK);
    CU_ASSERT(attr.type == UCCL_MEM_CUDA && attr.device == 1 && attr.base == p && attr.size == LEN);
    UNIT_ASSERT_STATUS(uccl_gpu_set_device(1), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_gpu_ipc_open(h, (void **)&q), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_gpu_set_device(0), UCCL_OK);
    CU_ASSERT_PTR_EQUAL(q, p); /* the same mapping, one more reference */
    p[0] = 'c';
    UNIT_ASSERT_STATUS(uccl_gpu_free(p), UCCL_ERR_INVALID_PARAM); /* a mapping, not ours */
    UNIT_ASSERT_STATUS(uccl_gpu_ipc_close(p), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_gpu_ipc_close(p), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_gpu_ipc_close(p), UCCL_ERR_INVALID_PARAM); /* no reference left */
}

/* Closing a mapping waits for the device, as cudaIpcCloseMemHandle does
 * (tests/gpu/results/1xH200-rev14): a copy queued from it runs first. One
 * queued behind a stream wait not met would block a GPU's close; the fake
 * fails it instead, and the event after it says so. */
static void ipc_close_under_copy(const uccl_gpu_ipc_handle_t *h)
{
    uccl_gpu_stream_t s;
    uccl_gpu_event_t e;
    uint32_t *word = NULL, one = 1;
    char *p = NULL, dst[8] = "", want;

    UNIT_ASSERT_STATUS(uccl_gpu_ipc_open(h, (void **)&p), UCCL_OK);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    want = p[0];
    UNIT_ASSERT_STATUS(uccl_gpu_stream_create(&s), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_gpu_event_create(&e, 0), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_gpu_memcpy_async(dst, p, 4, s), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_gpu_event_record(e, s), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_gpu_ipc_close(p), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_gpu_event_sync(e), UCCL_OK);
    CU_ASSERT(want != '\0' && dst[0] == want);

    dst[0] = '\0';
    UNIT_ASSERT_STATUS(uccl_gpu_malloc((void **)&word, sizeof(*word)), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_gpu_memset(word, 0, sizeof(*word)), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_gpu_ipc_open(h, (void **)&p), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_gpu_stream_wait_geq(s, word, 1, 4), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_gpu_memcpy_async(dst, p, 4, s), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_gpu_event_record(e, s), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_gpu_ipc_close(p), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_gpu_memcpy(word, &one, sizeof(one)), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_gpu_event_sync(e), UCCL_ERR_IO);
    CU_ASSERT_EQUAL(dst[0], '\0');
    UNIT_ASSERT_STATUS(uccl_gpu_event_destroy(e), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_gpu_stream_destroy(s), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_gpu_free(word), UCCL_OK);
}

/* Handles that must be refused: garbage, a name not of this backend, no
 * terminating NUL, a size that is not the object's, our own allocation. */
static void ipc_bad_handles(const uccl_gpu_ipc_handle_t *h)
{
    uccl_gpu_ipc_handle_t bad, own;
    void *p = NULL, *q = NULL;

    memset(&bad, 0xa5, sizeof(bad));
    UNIT_ASSERT_STATUS(uccl_gpu_ipc_open(&bad, &q), UCCL_ERR_INVALID_PARAM);
    bad = *h;
    memcpy(bad.bytes + 16, "/etc-passwd", 12);
    UNIT_ASSERT_STATUS(uccl_gpu_ipc_open(&bad, &q), UCCL_ERR_INVALID_PARAM);
    bad = *h;
    memset(bad.bytes + 16, 'x', UCCL_GPU_IPC_HANDLE_SIZE - 16);
    UNIT_ASSERT_STATUS(uccl_gpu_ipc_open(&bad, &q), UCCL_ERR_INVALID_PARAM);
    bad = *h;
    bad.bytes[8] ^= 1;
    UNIT_ASSERT_STATUS(uccl_gpu_ipc_open(&bad, &q), UCCL_ERR_INVALID_PARAM);
    UNIT_ASSERT_STATUS(uccl_gpu_ipc_get(&bad, &own), UCCL_ERR_INVALID_PARAM); /* host memory */
    UNIT_ASSERT_STATUS(uccl_gpu_malloc(&p, LEN), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_gpu_ipc_get(p, &own), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_gpu_ipc_open(&own, &q), UCCL_ERR_INVALID_PARAM); /* CUDA refuses it too */
    UNIT_ASSERT_STATUS(uccl_gpu_ipc_close(p), UCCL_ERR_INVALID_PARAM);      /* not a mapping */
    UNIT_ASSERT_STATUS(uccl_gpu_free(p), UCCL_OK);
}

static void test_ipc(void)
{
    uccl_gpu_ipc_handle_t h;
    peer_t peer = {.pid = -1, .rd = -1, .wr = -1};
    void *q = NULL;

    CU_ASSERT_EQUAL_FATAL(peer_start(&peer, &h), 0);
    ipc_open_close(&h);
    ipc_close_under_copy(&h);
    ipc_bad_handles(&h);
    CU_ASSERT_EQUAL(peer_step(&peer, 1), 0); /* the peer checks our write and frees */
    UNIT_ASSERT_STATUS(uccl_gpu_ipc_open(&h, &q), UCCL_ERR_NOT_FOUND);
    CU_ASSERT_EQUAL(peer_step(&peer, 0), 0);
    CU_ASSERT_EQUAL(peer_finish(&peer), 0);
}

/* ------------------------------------------------------------ streams, events */

static void test_stream_order(void)
{
    uccl_gpu_stream_t s, s2;
    uccl_gpu_event_t e, e2;
    char src1[16] = "first", src2[16] = "second", dst[16] = "", other[16] = "";

    UNIT_ASSERT_STATUS(uccl_gpu_stream_create(&s), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_gpu_stream_create(&s2), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_gpu_event_create(&e, 0), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_gpu_event_create(&e2, 0), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_gpu_event_query(e), UCCL_OK); /* never recorded */
    UNIT_ASSERT_STATUS(uccl_gpu_memcpy_async(dst, src1, sizeof(dst), s), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_gpu_memcpy_async(other, src1, sizeof(other), s2), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_gpu_event_record(e, s), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_gpu_memcpy_async(dst, src2, sizeof(dst), s), UCCL_OK);
    CU_ASSERT_STRING_EQUAL(dst, ""); /* queued, not run */
    UNIT_ASSERT_STATUS(uccl_gpu_event_query(e), UCCL_INPROGRESS);
    CU_ASSERT_STRING_EQUAL(dst, "");
    UNIT_ASSERT_STATUS(uccl_gpu_event_query(e), UCCL_OK);
    CU_ASSERT_STRING_EQUAL(dst, "first"); /* the copy before the record, not the one after */
    CU_ASSERT_STRING_EQUAL(other, "");    /* another stream's copy still waits */
    UNIT_ASSERT_STATUS(uccl_gpu_event_record(e2, s), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_gpu_event_sync(e2), UCCL_OK);
    CU_ASSERT_STRING_EQUAL(dst, "second");
    UNIT_ASSERT_STATUS(uccl_gpu_event_record(e, s), UCCL_OK); /* nothing queued: done at once */
    UNIT_ASSERT_STATUS(uccl_gpu_event_query(e), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_gpu_memcpy_async(dst, src1, sizeof(dst), s), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_gpu_event_record(e, s2), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_gpu_stream_destroy(s2), UCCL_OK); /* runs it, completes e */
    CU_ASSERT_STRING_EQUAL(other, "first");
    UNIT_ASSERT_STATUS(uccl_gpu_event_query(e), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_gpu_memcpy(src2, "sync", 5), UCCL_OK); /* device sync runs s */
    CU_ASSERT_STRING_EQUAL(dst, "first");
    UNIT_ASSERT_STATUS(uccl_gpu_stream_sync(s), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_gpu_event_destroy(e), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_gpu_event_destroy(e2), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_gpu_stream_destroy(s), UCCL_OK);
}

/* ------------------------------------------------------------ injected faults */

/* Child with UCCL_FAKE_GPU_FAIL_COPY=2: copy 2 is accepted but writes
 * nothing; the event after it says so once; the stream goes on. */
static int child_fail_copy(void)
{
    char dst[8] = "", dst2[8] = "";
    uccl_gpu_stream_t s;
    uccl_gpu_event_t e;
    int bad = 0;

    setenv("UCCL_FAKE_GPU_FAIL_COPY", "2", 1);
    bad += uccl_gpu_stream_create(&s) != UCCL_OK || uccl_gpu_event_create(&e, 0) != UCCL_OK;
    bad += uccl_gpu_memcpy_async(dst, "one", 4, s) != UCCL_OK;
    bad += uccl_gpu_event_record(e, s) != UCCL_OK || uccl_gpu_event_sync(e) != UCCL_OK;
    bad += uccl_gpu_memcpy_async(dst2, "two", 4, s) != UCCL_OK; /* copy 2 */
    bad += uccl_gpu_event_record(e, s) != UCCL_OK;
    bad += uccl_gpu_event_query(e) != UCCL_INPROGRESS;
    bad += uccl_gpu_event_query(e) != UCCL_ERR_IO || dst2[0] != '\0';
    bad += uccl_gpu_memcpy_async(dst2, "three", 6, s) != UCCL_OK;
    bad += uccl_gpu_event_record(e, s) != UCCL_OK || uccl_gpu_event_sync(e) != UCCL_OK;
    bad += strcmp(dst2, "three") != 0;
    bad += uccl_gpu_stream_sync(s) != UCCL_ERR_IO; /* once, for the sync that saw it */
    bad += uccl_gpu_stream_sync(s) != UCCL_OK;
    uccl_gpu_event_destroy(e);
    uccl_gpu_stream_destroy(s);
    return bad;
}

/* Child with UCCL_FAKE_GPU_FAIL_COPY=2: a store right behind the failed copy
 * is dropped (on CUDA the fault stops the stream: gpu_ipc's FLAG_DONE must
 * not take the word for the copy's end), a later one lands. */
static int child_fail_copy_store(void)
{
    char dst[8] = "";
    uint32_t *host = NULL;
    void *dev = NULL;
    uccl_gpu_stream_t s;
    int bad = 0;

    setenv("UCCL_FAKE_GPU_FAIL_COPY", "2", 1);
    bad += uccl_gpu_stream_create(&s) != UCCL_OK || uccl_gpu_flags_alloc(1, &host, &dev) != UCCL_OK;
    if (bad)
        return bad;
    bad += uccl_gpu_memcpy_async(dst, "one", 4, s) != UCCL_OK;
    bad += uccl_gpu_stream_write(s, dev, 1, 4) != UCCL_OK;
    bad += uccl_gpu_memcpy_async(dst, "two", 4, s) != UCCL_OK; /* copy 2: fails */
    bad += uccl_gpu_stream_write(s, dev, 2, 4) != UCCL_OK;
    uccl_gpu_flags_poll();
    bad += __atomic_load_n(host, __ATOMIC_ACQUIRE) != 1 || strcmp(dst, "one") != 0;
    bad += uccl_gpu_memcpy_async(dst, "three", 6, s) != UCCL_OK;
    bad += uccl_gpu_stream_write(s, dev, 3, 4) != UCCL_OK;
    uccl_gpu_flags_poll();
    bad += __atomic_load_n(host, __ATOMIC_ACQUIRE) != 3 || strcmp(dst, "three") != 0;
    bad += uccl_gpu_stream_query(s) != UCCL_ERR_IO; /* the fault, as an event would say */
    uccl_gpu_stream_sync(s);
    uccl_gpu_flags_free(host);
    uccl_gpu_stream_destroy(s);
    return bad;
}

/* Child with UCCL_FAKE_GPU_FAIL_ISSUE=1: the first copy is refused. */
static int child_fail_issue(void)
{
    char dst[8] = "";
    uccl_gpu_stream_t s;
    int bad = 0;

    setenv("UCCL_FAKE_GPU_FAIL_ISSUE", "1", 1);
    bad += uccl_gpu_stream_create(&s) != UCCL_OK;
    bad += uccl_gpu_memcpy_async(dst, "one", 4, s) != UCCL_ERR_IO;
    bad += uccl_gpu_memcpy_async(dst, "two", 4, s) != UCCL_OK;
    bad += uccl_gpu_stream_sync(s) != UCCL_OK || strcmp(dst, "two") != 0;
    uccl_gpu_stream_destroy(s);
    return bad;
}

/* Runs before any async copy of this process: the knobs are read at the
 * first one, so each child reads its own. */
/* Stream memory operations (the direct stream collectives' flags): a
 * store and a wait queued in stream order, the wait compared cyclically
 * (a sequence number that wrapped is still >= the one before it), the
 * store after the copies before it, bad widths and alignment refused. */
static void test_stream_memops(void)
{
    uccl_gpu_stream_t s, s2;
    uint32_t *w = NULL;
    uint64_t *d = NULL;
    char src[8] = "bytes", dst[8] = "";

    UNIT_ASSERT_STATUS(uccl_gpu_stream_create(&s), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_gpu_stream_create(&s2), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_gpu_malloc((void **)&w, 64), UCCL_OK);
    d = (uint64_t *)(w + 2);
    w[0] = 0xfffffff0u;
    w[1] = 0;
    /* s2 waits for w[0] >= 0xfffffff8, then copies; s copies, then stores
     * 0x00000003 (wrapped past it): the store lets s2 go */
    UNIT_ASSERT_STATUS(uccl_gpu_stream_wait_geq(s2, w, 0xfffffff8u, 4), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_gpu_memcpy_async(dst, src, sizeof(dst), s2), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_gpu_stream_query(s2), UCCL_INPROGRESS);
    UNIT_ASSERT_STATUS(uccl_gpu_memcpy_async(&w[1], &w[0], 4, s), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_gpu_stream_write(s, w, 3, 4), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_gpu_stream_write(s, d, 0x100000000ull, 8), UCCL_OK);
    CU_ASSERT_EQUAL(w[0], 0xfffffff0u); /* queued, not run */
    UNIT_ASSERT_STATUS(uccl_gpu_stream_sync(s), UCCL_OK);
    CU_ASSERT_EQUAL(w[1], 0xfffffff0u); /* the copy ran before the store */
    CU_ASSERT_EQUAL(w[0], 3u);
    CU_ASSERT_EQUAL(*d, 0x100000000ull);
    UNIT_ASSERT_STATUS(uccl_gpu_stream_sync(s2), UCCL_OK);
    CU_ASSERT_STRING_EQUAL(dst, "bytes");
    /* waits already met: 64-bit, and 32-bit for 2 where 3 is */
    UNIT_ASSERT_STATUS(uccl_gpu_stream_wait_geq(s2, d, 0xffffffffull, 8), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_gpu_stream_wait_geq(s2, w, 2, 4), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_gpu_stream_sync(s2), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_gpu_stream_write(s, w, 1, 2), UCCL_ERR_INVALID_PARAM);
    UNIT_ASSERT_STATUS(uccl_gpu_stream_write(s, (char *)w + 2, 1, 4), UCCL_ERR_INVALID_PARAM);
    UNIT_ASSERT_STATUS(uccl_gpu_stream_wait_geq(s, (char *)w + 4, 1, 8), UCCL_ERR_INVALID_PARAM);
    UNIT_ASSERT_STATUS(uccl_gpu_stream_write(NULL, w, 1, 4), UCCL_ERR_INVALID_PARAM);
    UNIT_ASSERT_STATUS(uccl_gpu_stream_destroy(s), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_gpu_stream_destroy(s2), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_gpu_free(w), UCCL_OK);
}

/* The copy kernel's batch call: argument checks, then 3 copies (one with a
 * tail below 16 bytes, one empty) queued as one call, in stream order. */
static void test_sm_batch(void)
{
    char *d, *sr;
    void *dst[UCCL_GPU_SM_BATCH_MAX + 1];
    const void *src[UCCL_GPU_SM_BATCH_MAX + 1];
    size_t len[UCCL_GPU_SM_BATCH_MAX + 1] = {4096, 100, 0};
    uccl_gpu_stream_t s;
    char want[4096];

    UNIT_ASSERT_STATUS(uccl_gpu_malloc((void **)&d, 3 * 4096), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_gpu_malloc((void **)&sr, 3 * 4096), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_gpu_stream_create(&s), UCCL_OK);
    for (int i = 0; i < 3 * 4096; i++)
        sr[i] = (char)(i * 7 + 1);
    memset(d, 0, 3 * 4096);
    for (int i = 0; i <= UCCL_GPU_SM_BATCH_MAX; i++) {
        dst[i] = d + (i % 3) * 4096;
        src[i] = sr + (i % 3) * 4096;
    }
    UNIT_ASSERT_STATUS(uccl_gpu_sm_copy_load(0), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_gpu_sm_copy_batch_async(1, dst, src, len, 3, 64, s), UCCL_ERR_UNSUPPORTED);
    UNIT_ASSERT_STATUS(uccl_gpu_sm_copy_batch_async(0, dst, src, len, 0, 64, s), UCCL_ERR_INVALID_PARAM);
    UNIT_ASSERT_STATUS(uccl_gpu_sm_copy_batch_async(0, dst, src, len, UCCL_GPU_SM_BATCH_MAX + 1, 64, s),
                       UCCL_ERR_INVALID_PARAM);
    UNIT_ASSERT_STATUS(uccl_gpu_sm_copy_batch_async(0, dst, src, len, 3, 0, s), UCCL_ERR_INVALID_PARAM);
    UNIT_ASSERT_STATUS(uccl_gpu_sm_copy_batch_async(0, dst, src, NULL, 3, 64, s), UCCL_ERR_INVALID_PARAM);
    dst[1] = d + 4096 + 8; /* not 16-byte aligned */
    UNIT_ASSERT_STATUS(uccl_gpu_sm_copy_batch_async(0, dst, src, len, 3, 64, s), UCCL_ERR_INVALID_PARAM);
    dst[1] = d + 4096;
    UNIT_ASSERT_STATUS(uccl_gpu_sm_copy_batch_async(0, dst, src, len, 3, 64, s), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_gpu_stream_sync(s), UCCL_OK);
    CU_ASSERT_EQUAL(memcmp(d, sr, 4096), 0);
    CU_ASSERT_EQUAL(memcmp(d + 4096, sr + 4096, 100), 0);
    memset(want, 0, sizeof(want));
    CU_ASSERT_EQUAL(memcmp(d + 4096 + 100, want, 4096 - 100), 0); /* nothing past len */
    CU_ASSERT_EQUAL(memcmp(d + 2 * 4096, want, 4096), 0);         /* the empty copy */
    UNIT_ASSERT_STATUS(uccl_gpu_stream_destroy(s), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_gpu_free(d), UCCL_OK);
    UNIT_ASSERT_STATUS(uccl_gpu_free(sr), UCCL_OK);
}

static void test_faults(void)
{
    CU_ASSERT_EQUAL(in_child(child_fail_copy), 0);
    CU_ASSERT_EQUAL(in_child(child_fail_copy_store), 0);
    CU_ASSERT_EQUAL(in_child(child_fail_issue), 0);
}

int main(void)
{
    CU_TestInfo faults[] = {{"injected copy faults (first: no copy before)", test_faults},
                            CU_TEST_INFO_NULL};
    CU_TestInfo tests[] = {
        {"devices", test_devices},
        {"memory", test_memory},
        {"IPC handles across processes, bad handles", test_ipc},
        {"stream order, lazy copies, events", test_stream_order},
        {"stream memory operations: stores, cyclic waits", test_stream_memops},
        {"copy kernel batch: arguments, copies with tails", test_sm_batch},
        CU_TEST_INFO_NULL,
    };
    CU_SuiteInfo suites[] = {
        {"fake_gpu_faults", NULL, NULL, NULL, NULL, faults},
        {"fake_gpu", NULL, NULL, NULL, NULL, tests},
        CU_SUITE_INFO_NULL,
    };

    if (strcmp(uccl_gpu_backend(), "fake") != 0) {
        printf("skipped: tests the fake GPU backend (configure --without-cuda --without-rocm "
               "--enable-fake-gpu); this one is %s\n", uccl_gpu_backend());
        return UNIT_EXIT_SKIP;
    }
    return unit_main(suites);
}
