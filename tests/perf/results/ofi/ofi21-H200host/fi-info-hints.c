/* fi_getinfo for shm with perf_ofi raw's hints and with uccl's (ofi_fabric.c) */
#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <stdio.h>
#include <string.h>
static void show(const char *who, int uccl)
{
    struct fi_info *h = fi_allocinfo(), *info;
    h->ep_attr->type = FI_EP_RDM;
    h->caps = FI_MSG | FI_TAGGED | FI_RMA;
    if (uccl) h->caps |= FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE | FI_SEND | FI_RECV;
    h->mode = FI_CONTEXT | FI_CONTEXT2;
    h->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_ENDPOINT;
    if (uccl) {
        h->domain_attr->threading = FI_THREAD_DOMAIN;
        h->tx_attr->msg_order = h->rx_attr->msg_order = FI_ORDER_SAS;
    }
    h->fabric_attr->prov_name = strdup("shm");
    if (fi_getinfo(FI_VERSION(1, 10), NULL, NULL, 0, h, &info) != 0) { printf("%s: none\n", who); return; }
    printf("== %s\ncaps %s\n", who, fi_tostr(&info->caps, FI_TYPE_CAPS));
    printf("threading %s\n", fi_tostr(&info->domain_attr->threading, FI_TYPE_THREADING));
    printf("tx op_flags %s\n", fi_tostr(&info->tx_attr->op_flags, FI_TYPE_OP_FLAGS));
    printf("rx op_flags %s\n", fi_tostr(&info->rx_attr->op_flags, FI_TYPE_OP_FLAGS));
    printf("tx msg_order %s\n", fi_tostr(&info->tx_attr->msg_order, FI_TYPE_MSG_ORDER));
    printf("tx comp_order %s\n", fi_tostr(&info->tx_attr->comp_order, FI_TYPE_MSG_ORDER));
    printf("mr_mode %s\n", fi_tostr(&info->domain_attr->mr_mode, FI_TYPE_MR_MODE));
    printf("inject_size %zu iov_limit %zu rma_iov_limit %zu cq_data_size %zu\n", info->tx_attr->inject_size,
           info->tx_attr->iov_limit, info->tx_attr->rma_iov_limit, info->domain_attr->cq_data_size);
    printf("progress data %s ctrl %s\n", fi_tostr(&info->domain_attr->data_progress, FI_TYPE_PROGRESS),
           fi_tostr(&info->domain_attr->control_progress, FI_TYPE_PROGRESS));
    fi_freeinfo(info); fi_freeinfo(h);
}
int main(void) { show("perf_ofi raw (tools/perf_ofi_raw.c raw_open)", 0); show("uccl (src/tp/ofi/ofi_fabric.c ofi_hints)", 1); return 0; }
