/* libfabric shm (1.17): a tagged receive posted after its message arrived
 * (the unexpected queue) is matched with the ignore mask left in the
 * message's receive entry by that entry's previous use, not the receive's.
 *   cc -o shm-unexp-ignore shm-unexp-ignore.c -lfabric
 *   [PROV=tcp\;ofi_rxm] ./shm-unexp-ignore STALE RECV_TAG RECV_IGNORE
 * Two processes (fork). The sender sends tag 0x305; the receiver lets it
 * arrive unexpected, then posts trecv(RECV_TAG, RECV_IGNORE). STALE 1: the
 * receiver first takes one message (tag 0x1177) with a receive posted
 * before it, of ignore 0xff00, so that the entry the next unexpected
 * message gets last held ignore 0xff00. Exit 0: the late receive matched.
 * By the tag rules: (0x5, 0xff00) must match, (0x105, 0) must not. */
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/wait.h>

#define C(x) do { long r_ = (long)(x); if (r_) { fprintf(stderr, "%s: %ld %s\n", #x, r_, fi_strerror((int)-r_)); exit(2);} } while (0)
struct fid_fabric *fab; struct fid_domain *dom; struct fid_av *av; struct fid_cq *cq; struct fid_ep *ep;
static struct fi_info *info;
static void open_ep(void) {
    struct fi_info *h = fi_allocinfo();
    struct fi_cq_attr ca = {.format = FI_CQ_FORMAT_TAGGED};
    struct fi_av_attr aa = {.type = FI_AV_TABLE};
    h->ep_attr->type = FI_EP_RDM; h->caps = FI_MSG | FI_TAGGED; h->mode = FI_CONTEXT | FI_CONTEXT2;
    h->fabric_attr->prov_name = strdup(getenv("PROV") ? getenv("PROV") : "shm");
    C(fi_getinfo(FI_VERSION(1, 10), NULL, NULL, 0, h, &info));
    C(fi_fabric(info->fabric_attr, &fab, NULL)); C(fi_domain(fab, info, &dom, NULL));
    C(fi_av_open(dom, &aa, &av, NULL)); C(fi_cq_open(dom, &ca, &cq, NULL));
    C(fi_endpoint(dom, info, &ep, NULL)); C(fi_ep_bind(ep, &av->fid, 0));
    C(fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV)); C(fi_enable(ep));
}
static int poll_for(double sec, struct fi_cq_tagged_entry *e) {
    struct timespec t0, t; clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        ssize_t n = fi_cq_read(cq, e, 1);
        if (n == 1) return 1;
        if (n == -FI_EAVAIL) { struct fi_cq_err_entry er = {0}; fi_cq_readerr(cq, &er, 0); e->op_context = er.op_context; e->tag = er.tag; return -er.err; }
        clock_gettime(CLOCK_MONOTONIC, &t);
        if ((t.tv_sec - t0.tv_sec) + (t.tv_nsec - t0.tv_nsec) * 1e-9 > sec) return 0;
    }
}
int main(int argc, char **argv) {
    int p2c[2], c2p[2]; char name[256], pname[256]; size_t len = sizeof(name);
    int stale = argc > 1 ? atoi(argv[1]) : 0; /* 1: first use the rx entry with a wide ignore */
    uint64_t rtag = argc > 2 ? strtoull(argv[2], 0, 0) : 0x5;
    uint64_t rign = argc > 3 ? strtoull(argv[3], 0, 0) : 0xff00;
    size_t sz = 65536;
    pipe(p2c); pipe(c2p);
    pid_t pid = fork();
    open_ep(); C(fi_getname(&ep->fid, name, &len));
    int wr = pid ? p2c[1] : c2p[1], rd = pid ? c2p[0] : p2c[0];
    write(wr, name, sizeof(name)); read(rd, pname, sizeof(pname));
    fi_addr_t peer; if (fi_av_insert(av, pname, 1, &peer, 0, NULL) != 1) exit(3);
    char *buf = calloc(1, sz); struct fi_context2 ctx[8]; struct fi_cq_tagged_entry e; char b;
    const uint64_t IGN = 0xff00;
    if (pid == 0) { /* sender */
        read(rd, &b, 1);
        if (stale) { /* message the receiver takes with a posted wide-ignore receive */
            while (fi_tsend(ep, buf, sz, NULL, peer, 0x77 | 0x1100, &ctx[0]) == -FI_EAGAIN) fi_cq_read(cq, &e, 0);
            while (poll_for(5, &e) != 1) ;
        }
        long rc; while ((rc = fi_tsend(ep, buf, sz, NULL, peer, 0x5 | 0x0300, &ctx[1])) == -FI_EAGAIN) fi_cq_read(cq, &e, 0);
        C(rc); /* bits under IGN set */
        int r = poll_for(5, &e);
        (void)r;
        write(wr, "x", 1); read(rd, &b, 1);
        _exit(0);
    }
    if (stale) { C(fi_trecv(ep, buf, sz, NULL, FI_ADDR_UNSPEC, 0x77, IGN, &ctx[2])); }
    write(wr, "g", 1);
    if (stale) { while (poll_for(5, &e) != 1) ; }
    /* let message 0x305 arrive unexpected */
    poll_for(0.5, &e);
    C(fi_trecv(ep, buf, sz, NULL, FI_ADDR_UNSPEC, rtag, rign, &ctx[3]));
    int r = poll_for(3, &e);
    printf("stale %d: message tag 0x305 waited; trecv(tag 0x%llx, ignore 0x%llx) posted after: %s\n",
           stale, (unsigned long long)rtag, (unsigned long long)rign,
           r == 1 ? "MATCHED" : "no match (3 s)");
    read(rd, &b, 1); write(wr, "x", 1); waitpid(pid, NULL, 0);
    return r == 1 ? 0 : 1;
}
