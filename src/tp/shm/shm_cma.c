/* Cross Memory Attach: single copy between this process and the peer with
 * process_vm_readv/writev, and the connect-time probe that tells whether
 * the kernel lets us (ptrace access mode; EPERM under Yama or in sandboxes). */
#include "shm.h"

#include <errno.h>
#include <string.h>

#define SHM_CMA_IOV_MAX 64 /* == UCCL_IOV_MAX: both sides hold at most this many */

bool shm_cma_probe(shm_ep_t *ep)
{
    uint64_t value = 0;
    struct iovec local = {&value, sizeof(value)};
    struct iovec remote = {(void *)(uintptr_t)ep->peer_probe_addr, sizeof(value)};
    ssize_t n = process_vm_readv(ep->peer_pid, &local, 1, &remote, 1, 0);

    if (n == (ssize_t)sizeof(value) && value == ep->peer_probe_value)
        return true;
    if (n < 0 && errno == EPERM)
        uccl_info("shm: CMA to pid %d not permitted (EPERM); pipelining through the ring",
                  ep->peer_pid);
    else
        uccl_warn("shm: CMA probe of pid %d failed (%s); pipelining through the ring", ep->peer_pid,
                  n < 0 ? strerror(errno) : "wrong value read");
    return false;
}

int shm_req_iovec(const uccl_req_t *req, struct iovec *iov)
{
    int n = 0;

    for (int i = 0; i < req->iovcnt; i++) {
        if (req->iov[i].len == 0)
            continue;
        iov[n].iov_base = req->iov[i].addr;
        iov[n].iov_len = req->iov[i].len;
        n++;
    }
    return n;
}

/* Drop the first done bytes of an iovec array (in place). */
static int shm_iov_advance(struct iovec *iov, int cnt, size_t done)
{
    int i = 0;

    while (i < cnt && done >= iov[i].iov_len)
        done -= iov[i++].iov_len;
    if (i < cnt) {
        iov[i].iov_base = (char *)iov[i].iov_base + done;
        iov[i].iov_len -= done;
    }
    memmove(iov, iov + i, (size_t)(cnt - i) * sizeof(*iov));
    return cnt - i;
}

/* Trim an iovec array to len bytes. */
static int shm_iov_trim(struct iovec *iov, int cnt, size_t len)
{
    int i;

    for (i = 0; i < cnt && len > 0; i++) {
        if (iov[i].iov_len > len)
            iov[i].iov_len = len;
        len -= iov[i].iov_len;
    }
    return i;
}

uccl_status_t shm_cma_copy(shm_ep_t *ep, bool write, const struct iovec *local, int lcnt,
                           const shm_wire_iov_t *remote, int rcnt, size_t len)
{
    struct iovec l[SHM_CMA_IOV_MAX], r[SHM_CMA_IOV_MAX];
    size_t done = 0;

    if (lcnt > SHM_CMA_IOV_MAX || rcnt > SHM_CMA_IOV_MAX)
        return UCCL_ERR_INVALID_PARAM;
    memcpy(l, local, (size_t)lcnt * sizeof(*l));
    for (int i = 0; i < rcnt; i++) {
        r[i].iov_base = (void *)(uintptr_t)remote[i].addr;
        r[i].iov_len = remote[i].len;
    }
    lcnt = shm_iov_trim(l, lcnt, len);
    rcnt = shm_iov_trim(r, rcnt, len);
    while (done < len) {
        ssize_t n = write ? process_vm_writev(ep->peer_pid, l, (unsigned long)lcnt, r,
                                              (unsigned long)rcnt, 0)
                          : process_vm_readv(ep->peer_pid, l, (unsigned long)lcnt, r,
                                             (unsigned long)rcnt, 0);
        if (n <= 0) {
            int err = n < 0 ? errno : EFAULT;
            if (err == EINTR)
                continue;
            if (err == ESRCH) {
                uccl_conn_fail(ep->base.conn, UCCL_ERR_PEER_FAILED);
                return UCCL_ERR_PEER_FAILED;
            }
            uccl_error("shm: process_vm_%s with pid %d: %s", write ? "writev" : "readv",
                       ep->peer_pid, strerror(err));
            return UCCL_ERR_TRANSPORT;
        }
        done += (size_t)n;
        lcnt = shm_iov_advance(l, lcnt, (size_t)n);
        rcnt = shm_iov_advance(r, rcnt, (size_t)n);
    }
    return UCCL_OK;
}
