/* Unit test of GPUDirect RDMA on verbs (src/tp/verbs/verbs_gdr.c): the
 * decision over every input combination, the peer-memory probe on a fake
 * sysfs, UCCL_VERBS_GDR parsing, the registration path and the transport hook
 * where no GPU or RDMA NIC is present, and uccl_gpu_dmabuf_fd's errors. */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gpu/gpu.h"
#include "topo/topo.h"
#include "tp/verbs/verbs.h"
#include "tp/verbs/verbs_gdr.h"
#include "unit.h"

/* The decision for GPU memory, staging allowed, distance unknown. The
 * expected modes are written out, not computed. */
typedef struct gdr_row {
    int have_reg_dmabuf, runtime_dmabuf, peermem;
    verbs_gdr_want_t want;
    verbs_gdr_mode_t expect;
} gdr_row_t;

static const gdr_row_t gdr_rows[] = {
    {0, 0, 0, VERBS_GDR_WANT_AUTO, VERBS_GDR_STAGING},
    {0, 0, 0, VERBS_GDR_WANT_DMABUF, VERBS_GDR_UNSUPPORTED},
    {0, 0, 0, VERBS_GDR_WANT_PEERMEM, VERBS_GDR_UNSUPPORTED},
    {0, 0, 0, VERBS_GDR_WANT_OFF, VERBS_GDR_STAGING},
    {0, 0, 1, VERBS_GDR_WANT_AUTO, VERBS_GDR_PEERMEM},
    {0, 0, 1, VERBS_GDR_WANT_DMABUF, VERBS_GDR_UNSUPPORTED},
    {0, 0, 1, VERBS_GDR_WANT_PEERMEM, VERBS_GDR_PEERMEM},
    {0, 0, 1, VERBS_GDR_WANT_OFF, VERBS_GDR_STAGING},
    {0, 1, 0, VERBS_GDR_WANT_AUTO, VERBS_GDR_STAGING},
    {0, 1, 0, VERBS_GDR_WANT_DMABUF, VERBS_GDR_UNSUPPORTED},
    {0, 1, 0, VERBS_GDR_WANT_PEERMEM, VERBS_GDR_UNSUPPORTED},
    {0, 1, 0, VERBS_GDR_WANT_OFF, VERBS_GDR_STAGING},
    {0, 1, 1, VERBS_GDR_WANT_AUTO, VERBS_GDR_PEERMEM},
    {0, 1, 1, VERBS_GDR_WANT_DMABUF, VERBS_GDR_UNSUPPORTED},
    {0, 1, 1, VERBS_GDR_WANT_PEERMEM, VERBS_GDR_PEERMEM},
    {0, 1, 1, VERBS_GDR_WANT_OFF, VERBS_GDR_STAGING},
    {1, 0, 0, VERBS_GDR_WANT_AUTO, VERBS_GDR_STAGING},
    {1, 0, 0, VERBS_GDR_WANT_DMABUF, VERBS_GDR_UNSUPPORTED},
    {1, 0, 0, VERBS_GDR_WANT_PEERMEM, VERBS_GDR_UNSUPPORTED},
    {1, 0, 0, VERBS_GDR_WANT_OFF, VERBS_GDR_STAGING},
    {1, 0, 1, VERBS_GDR_WANT_AUTO, VERBS_GDR_PEERMEM},
    {1, 0, 1, VERBS_GDR_WANT_DMABUF, VERBS_GDR_UNSUPPORTED},
    {1, 0, 1, VERBS_GDR_WANT_PEERMEM, VERBS_GDR_PEERMEM},
    {1, 0, 1, VERBS_GDR_WANT_OFF, VERBS_GDR_STAGING},
    {1, 1, 0, VERBS_GDR_WANT_AUTO, VERBS_GDR_DMABUF},
    {1, 1, 0, VERBS_GDR_WANT_DMABUF, VERBS_GDR_DMABUF},
    {1, 1, 0, VERBS_GDR_WANT_PEERMEM, VERBS_GDR_UNSUPPORTED},
    {1, 1, 0, VERBS_GDR_WANT_OFF, VERBS_GDR_STAGING},
    {1, 1, 1, VERBS_GDR_WANT_AUTO, VERBS_GDR_DMABUF},
    {1, 1, 1, VERBS_GDR_WANT_DMABUF, VERBS_GDR_DMABUF},
    {1, 1, 1, VERBS_GDR_WANT_PEERMEM, VERBS_GDR_PEERMEM},
    {1, 1, 1, VERBS_GDR_WANT_OFF, VERBS_GDR_STAGING},
};

#define NROWS (sizeof(gdr_rows) / sizeof(gdr_rows[0]))

static verbs_gdr_inputs_t row_inputs(const gdr_row_t *r, uccl_mem_type_t type, bool staging_ok,
                                     int dist)
{
    verbs_gdr_inputs_t in = {.mem_type = type, .have_reg_dmabuf = r->have_reg_dmabuf,
                             .runtime_dmabuf = r->runtime_dmabuf, .peermem = r->peermem,
                             .want = r->want, .staging_ok = staging_ok, .dist = dist};
    return in;
}

/* Run one decision, check the mode and that why is one non-empty line. */
static void check_choice(const verbs_gdr_inputs_t *in, verbs_gdr_mode_t expect, size_t row)
{
    char why[UCCL_TOPO_WHY_MAX];
    verbs_gdr_mode_t got;

    memset(why, 0, sizeof(why));
    got = uccl_verbs_gdr_choose(in, why, sizeof(why));
    if (got != expect)
        fprintf(stderr, "\n  row %zu type %d dmabuf %d fd %d peermem %d want %d staging %d dist %d: "
                "got %s (%s), expected %s\n", row, (int)in->mem_type, in->have_reg_dmabuf,
                in->runtime_dmabuf, in->peermem, (int)in->want, in->staging_ok, in->dist,
                uccl_verbs_gdr_mode_name(got), why, uccl_verbs_gdr_mode_name(expect));
    CU_ASSERT_EQUAL(got, expect);
    CU_ASSERT(why[0] != '\0');
    CU_ASSERT(strchr(why, '\n') == NULL);
}

static void test_choose_gpu_table(void)
{
    for (size_t i = 0; i < NROWS; i++) {
        verbs_gdr_inputs_t cuda = row_inputs(&gdr_rows[i], UCCL_MEM_CUDA, true, VERBS_GDR_DIST_UNKNOWN);
        verbs_gdr_inputs_t rocm = row_inputs(&gdr_rows[i], UCCL_MEM_ROCM, true, VERBS_GDR_DIST_UNKNOWN);

        check_choice(&cuda, gdr_rows[i].expect, i);
        check_choice(&rocm, gdr_rows[i].expect, i);
    }
}

/* Without staging, every STAGING of the table becomes UNSUPPORTED. */
static void test_choose_no_staging(void)
{
    for (size_t i = 0; i < NROWS; i++) {
        verbs_gdr_inputs_t in = row_inputs(&gdr_rows[i], UCCL_MEM_CUDA, false, VERBS_GDR_DIST_UNKNOWN);
        verbs_gdr_mode_t expect = gdr_rows[i].expect;

        check_choice(&in, expect == VERBS_GDR_STAGING ? VERBS_GDR_UNSUPPORTED : expect, i);
    }
}

/* Near pairs decide as if the distance were unknown; a pair across sockets
 * stages in auto mode when it may, and an override still wins. */
static void test_choose_distance(void)
{
    static const int near[] = {UCCL_TOPO_DIST_PIX, UCCL_TOPO_DIST_PXB, UCCL_TOPO_DIST_PHB,
                               UCCL_TOPO_DIST_NODE};

    for (size_t i = 0; i < NROWS; i++) {
        const gdr_row_t *r = &gdr_rows[i];
        verbs_gdr_inputs_t far_ok = row_inputs(r, UCCL_MEM_CUDA, true, UCCL_TOPO_DIST_SYS);
        verbs_gdr_inputs_t far_only = row_inputs(r, UCCL_MEM_CUDA, false, UCCL_TOPO_DIST_SYS);
        verbs_gdr_mode_t no_staging = r->expect == VERBS_GDR_STAGING ? VERBS_GDR_UNSUPPORTED : r->expect;

        for (size_t k = 0; k < sizeof(near) / sizeof(near[0]); k++) {
            verbs_gdr_inputs_t in = row_inputs(r, UCCL_MEM_CUDA, true, near[k]);
            check_choice(&in, r->expect, i);
        }
        check_choice(&far_ok, r->want == VERBS_GDR_WANT_AUTO ? VERBS_GDR_STAGING : r->expect, i);
        check_choice(&far_only, no_staging, i);
    }
}

/* Host memory is plain ibv_reg_mr whatever else holds. */
static void test_choose_host(void)
{
    static const int dists[] = {VERBS_GDR_DIST_UNKNOWN, UCCL_TOPO_DIST_PIX, UCCL_TOPO_DIST_SYS};

    for (size_t i = 0; i < NROWS; i++)
        for (int staging = 0; staging < 2; staging++)
            for (size_t k = 0; k < sizeof(dists) / sizeof(dists[0]); k++) {
                verbs_gdr_inputs_t in = row_inputs(&gdr_rows[i], UCCL_MEM_HOST, staging, dists[k]);
                check_choice(&in, VERBS_GDR_HOST, i);
            }
}

static void test_choose_bad_inputs(void)
{
    verbs_gdr_inputs_t in = row_inputs(&gdr_rows[NROWS - 1], (uccl_mem_type_t)7, true,
                                       VERBS_GDR_DIST_UNKNOWN);
    char tiny[4] = "xxx";

    check_choice(&in, VERBS_GDR_UNSUPPORTED, 0); /* unknown memory type */
    in = row_inputs(&gdr_rows[NROWS - 1], UCCL_MEM_CUDA, true, VERBS_GDR_DIST_UNKNOWN);
    in.want = (verbs_gdr_want_t)42;
    check_choice(&in, VERBS_GDR_UNSUPPORTED, 0);
    /* no room for why: the decision still stands; a short buffer is cut, terminated */
    in.want = VERBS_GDR_WANT_AUTO;
    CU_ASSERT_EQUAL(uccl_verbs_gdr_choose(&in, NULL, 0), VERBS_GDR_DMABUF);
    CU_ASSERT_EQUAL(uccl_verbs_gdr_choose(&in, tiny, sizeof(tiny)), VERBS_GDR_DMABUF);
    CU_ASSERT_EQUAL(strlen(tiny), 3);
    CU_ASSERT_STRING_NOT_EQUAL(tiny, "xxx");
    CU_ASSERT_STRING_EQUAL(uccl_verbs_gdr_mode_name(VERBS_GDR_PEERMEM), "PEERMEM");
    CU_ASSERT_STRING_EQUAL(uccl_verbs_gdr_mode_name((verbs_gdr_mode_t)99), "?");
}

static void test_parse_want(void)
{
    static const struct {
        const char *text;
        verbs_gdr_want_t want;
    } good[] = {{"auto", VERBS_GDR_WANT_AUTO}, {"dmabuf", VERBS_GDR_WANT_DMABUF},
                {"peermem", VERBS_GDR_WANT_PEERMEM}, {"off", VERBS_GDR_WANT_OFF},
                {"DMABUF", VERBS_GDR_WANT_DMABUF}, {"Off", VERBS_GDR_WANT_OFF}};
    static const char *const bad[] = {"", "on", "dma-buf", "auto ", "peermem1", "0"};
    verbs_gdr_want_t want;

    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        want = (verbs_gdr_want_t)-1;
        UNIT_ASSERT_STATUS(uccl_verbs_gdr_parse_want(good[i].text, &want), UCCL_OK);
        CU_ASSERT_EQUAL(want, good[i].want);
    }
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        want = (verbs_gdr_want_t)-1;
        UNIT_ASSERT_STATUS(uccl_verbs_gdr_parse_want(bad[i], &want), UCCL_ERR_INVALID_PARAM);
        CU_ASSERT_EQUAL(want, (verbs_gdr_want_t)-1); /* untouched */
    }
    UNIT_ASSERT_STATUS(uccl_verbs_gdr_parse_want(NULL, &want), UCCL_ERR_INVALID_PARAM);
}

/* ------------------------------------------------------------------ fake sysfs */

static int make_path(const char *root, const char *rest, bool file)
{
    char path[512], *slash;

    snprintf(path, sizeof(path), "%s/%s", root, rest);
    for (slash = strchr(path + strlen(root) + 1, '/'); slash != NULL; slash = strchr(slash + 1, '/')) {
        *slash = '\0';
        if (mkdir(path, 0700) != 0 && access(path, F_OK) != 0)
            return -1;
        *slash = '/';
    }
    if (!file)
        return mkdir(path, 0700);
    FILE *f = fopen(path, "w");
    if (f == NULL)
        return -1;
    fputs("1.0\n", f);
    return fclose(f);
}

static void test_peermem_probe(void)
{
    char root[] = "/tmp/uccl_gdr_sysXXXXXX";
    char cmd[64];

    CU_ASSERT_FATAL(mkdtemp(root) != NULL);
    CU_ASSERT_FALSE(uccl_verbs_gdr_peermem_loaded(root, UCCL_MEM_CUDA));
    CU_ASSERT_FALSE(uccl_verbs_gdr_peermem_loaded(root, UCCL_MEM_ROCM));
    CU_ASSERT_FALSE(uccl_verbs_gdr_peermem_loaded("/nonexistent/uccl", UCCL_MEM_CUDA));
    /* the GPU driver alone is no peer-memory module */
    CU_ASSERT_EQUAL(make_path(root, "module/nvidia", false), 0);
    CU_ASSERT_EQUAL(make_path(root, "module/amdgpu", false), 0);
    CU_ASSERT_FALSE(uccl_verbs_gdr_peermem_loaded(root, UCCL_MEM_CUDA));
    CU_ASSERT_FALSE(uccl_verbs_gdr_peermem_loaded(root, UCCL_MEM_ROCM));
    CU_ASSERT_EQUAL(make_path(root, "module/nvidia_peermem", false), 0);
    CU_ASSERT_TRUE(uccl_verbs_gdr_peermem_loaded(root, UCCL_MEM_CUDA));
    CU_ASSERT_FALSE(uccl_verbs_gdr_peermem_loaded(root, UCCL_MEM_ROCM));
    CU_ASSERT_FALSE(uccl_verbs_gdr_peermem_loaded(root, UCCL_MEM_HOST));
    CU_ASSERT_EQUAL(make_path(root, "kernel/mm/memory_peers/amdkfd/version", true), 0);
    CU_ASSERT_TRUE(uccl_verbs_gdr_peermem_loaded(root, UCCL_MEM_ROCM));
    snprintf(cmd, sizeof(cmd), "rm -rf %s", root);
    CU_ASSERT_EQUAL(system(cmd), 0);

    CU_ASSERT_FATAL(mkdtemp(strcpy(root, "/tmp/uccl_gdr_sysXXXXXX")) != NULL);
    CU_ASSERT_EQUAL(make_path(root, "module/nv_peer_mem", false), 0);
    CU_ASSERT_TRUE(uccl_verbs_gdr_peermem_loaded(root, UCCL_MEM_CUDA));
    CU_ASSERT_EQUAL(make_path(root, "module/amdp2p", false), 0);
    CU_ASSERT_TRUE(uccl_verbs_gdr_peermem_loaded(root, UCCL_MEM_ROCM));
    snprintf(cmd, sizeof(cmd), "rm -rf %s", root);
    CU_ASSERT_EQUAL(system(cmd), 0);
}

/* ------------------------------------------------------------------ runtime, registration */

static int gpu_count(void)
{
    int n = 0;

    return uccl_gpu_count(&n) == UCCL_OK ? n : 0;
}

static void test_dmabuf_fd_errors(void)
{
    bool none = strcmp(uccl_gpu_backend(), "none") == 0;
    char host[8192];
    uint64_t offset = 77;
    int fd = -77;

    /* bad arguments: the none backend says "no device" before anything else */
    UNIT_ASSERT_STATUS(uccl_gpu_dmabuf_fd(host, sizeof(host), NULL, &offset),
                       none ? UCCL_ERR_NO_DEVICE : UCCL_ERR_INVALID_PARAM);
    UNIT_ASSERT_STATUS(uccl_gpu_dmabuf_fd(host, sizeof(host), &fd, NULL),
                       none ? UCCL_ERR_NO_DEVICE : UCCL_ERR_INVALID_PARAM);
    UNIT_ASSERT_STATUS(uccl_gpu_dmabuf_fd(host, 0, &fd, &offset),
                       none ? UCCL_ERR_NO_DEVICE : UCCL_ERR_INVALID_PARAM);
    /* host memory: no device here, or not device memory where a GPU is */
    UNIT_ASSERT_STATUS(uccl_gpu_dmabuf_fd(host, sizeof(host), &fd, &offset),
                       gpu_count() == 0 ? UCCL_ERR_NO_DEVICE : UCCL_ERR_INVALID_PARAM);
    CU_ASSERT_EQUAL(fd, -77); /* nothing written on failure */
    CU_ASSERT_EQUAL(offset, 77);
    printf("\n    backend %s, %d GPU(s) ", uccl_gpu_backend(), gpu_count());
}

/* GPU memory claimed on a host buffer: no GPU runtime can export it, so the
 * outcome depends only on the override and on a peer-memory module being
 * loaded here. pd is never touched on these paths. */
static void test_reg_no_direct_path(void)
{
    bool peermem = uccl_verbs_gdr_peermem_loaded("/sys", UCCL_MEM_CUDA);
    char buf[4096], why[UCCL_TOPO_WHY_MAX];
    struct ibv_mr *mr = (struct ibv_mr *)buf;
    verbs_gdr_mode_t mode;
    int access = IBV_ACCESS_LOCAL_WRITE;

    if (peermem) {
        printf("\n    a peer-memory module is loaded here: auto and peermem not checked ");
    } else {
        UNIT_ASSERT_STATUS(uccl_verbs_gdr_reg("/sys", NULL, buf, sizeof(buf), access, UCCL_MEM_CUDA, 0,
                                         VERBS_GDR_WANT_AUTO, &mr, &mode, why, sizeof(why)),
                           UCCL_ERR_UNSUPPORTED);
        CU_ASSERT_EQUAL(mode, VERBS_GDR_STAGING);
        CU_ASSERT_PTR_NULL(mr);
        CU_ASSERT(strncmp(why, "staging: ", 9) == 0);
        UNIT_ASSERT_STATUS(uccl_verbs_gdr_reg("/sys", NULL, buf, sizeof(buf), access, UCCL_MEM_CUDA, 0,
                                         VERBS_GDR_WANT_PEERMEM, &mr, &mode, why, sizeof(why)),
                           UCCL_ERR_UNSUPPORTED);
        CU_ASSERT_EQUAL(mode, VERBS_GDR_UNSUPPORTED);
    }
    UNIT_ASSERT_STATUS(uccl_verbs_gdr_reg("/sys", NULL, buf, sizeof(buf), access, UCCL_MEM_CUDA, 0,
                                     VERBS_GDR_WANT_DMABUF, &mr, &mode, why, sizeof(why)),
                       UCCL_ERR_UNSUPPORTED);
    CU_ASSERT_EQUAL(mode, VERBS_GDR_UNSUPPORTED);
    CU_ASSERT(strstr(why, "UCCL_VERBS_GDR=dmabuf") != NULL);
    UNIT_ASSERT_STATUS(uccl_verbs_gdr_reg("/sys", NULL, buf, sizeof(buf), access, UCCL_MEM_ROCM, 0,
                                     VERBS_GDR_WANT_OFF, &mr, &mode, why, sizeof(why)),
                       UCCL_ERR_UNSUPPORTED);
    CU_ASSERT_EQUAL(mode, VERBS_GDR_STAGING);
    CU_ASSERT_PTR_NULL(mr);
    /* bad arguments */
    UNIT_ASSERT_STATUS(uccl_verbs_gdr_reg("/sys", NULL, buf, 0, access, UCCL_MEM_CUDA, 0, VERBS_GDR_WANT_AUTO,
                                     &mr, &mode, why, sizeof(why)), UCCL_ERR_INVALID_PARAM);
    UNIT_ASSERT_STATUS(uccl_verbs_gdr_reg("/sys", NULL, buf, sizeof(buf), access, UCCL_MEM_CUDA, 0,
                                     VERBS_GDR_WANT_AUTO, NULL, &mode, why, sizeof(why)),
                       UCCL_ERR_INVALID_PARAM);
    UNIT_ASSERT_STATUS(uccl_verbs_gdr_reg("/sys", NULL, buf, sizeof(buf), access, UCCL_MEM_CUDA, 0,
                                     VERBS_GDR_WANT_AUTO, &mr, &mode, why, 0), UCCL_ERR_INVALID_PARAM);
}

/* The transport hook: no direct path leaves no handle and succeeds (the
 * region goes to a GPU-capable transport), an impossible override fails, a
 * bad UCCL_VERBS_GDR value fails. */
static void test_hook(void)
{
    bool peermem = uccl_verbs_gdr_peermem_loaded("/sys", UCCL_MEM_CUDA);
    uccl_tp_memh_t *memh = (uccl_tp_memh_t *)&peermem;
    tp_verbs_t v;
    char buf[4096];

    memset(&v, 0, sizeof(v));
    strcpy(v.dev_name, "fake0");
    strcpy(v.cfg.gdr, "off");
    UNIT_ASSERT_STATUS(uccl_verbs_gdr_mem_reg(&v, buf, sizeof(buf), UCCL_MEM_CUDA, 0, &memh), UCCL_OK);
    CU_ASSERT_PTR_NULL(memh);
    if (!peermem) {
        strcpy(v.cfg.gdr, "auto");
        memh = (uccl_tp_memh_t *)&peermem;
        UNIT_ASSERT_STATUS(uccl_verbs_gdr_mem_reg(&v, buf, sizeof(buf), UCCL_MEM_CUDA, 0, &memh), UCCL_OK);
        CU_ASSERT_PTR_NULL(memh);
    }
    strcpy(v.cfg.gdr, "dmabuf");
    UNIT_ASSERT_STATUS(uccl_verbs_gdr_mem_reg(&v, buf, sizeof(buf), UCCL_MEM_CUDA, 0, &memh),
                       UCCL_ERR_UNSUPPORTED);
    CU_ASSERT_PTR_NULL(memh);
    strcpy(v.cfg.gdr, "yes");
    UNIT_ASSERT_STATUS(uccl_verbs_gdr_mem_reg(&v, buf, sizeof(buf), UCCL_MEM_CUDA, 0, &memh),
                       UCCL_ERR_INVALID_PARAM);
    CU_ASSERT_PTR_NULL(memh);
}

/* Host memory through uccl_verbs_gdr_reg on a real device when there is one
 * (Soft-RoCE counts): a plain ibv_reg_mr. */
static void test_reg_host_on_device(void)
{
    struct ibv_device **list;
    struct ibv_context *ctx = NULL;
    struct ibv_pd *pd = NULL;
    struct ibv_mr *mr = NULL;
    char why[UCCL_TOPO_WHY_MAX];
    verbs_gdr_mode_t mode;
    static char buf[65536];
    int n = 0;

    list = ibv_get_device_list(&n);
    if (list != NULL && n > 0)
        ctx = ibv_open_device(list[0]);
    if (ctx != NULL)
        pd = ibv_alloc_pd(ctx);
    if (pd == NULL) {
        unit_skip_note("no usable RDMA device here (tests/rxe/check.sh runs it in the Soft-RoCE VM)");
        goto out;
    }
    UNIT_ASSERT_STATUS(uccl_verbs_gdr_reg("/sys", pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE, UCCL_MEM_HOST,
                                     -1, VERBS_GDR_WANT_DMABUF, &mr, &mode, why, sizeof(why)),
                       UCCL_OK);
    CU_ASSERT_EQUAL(mode, VERBS_GDR_HOST);
    CU_ASSERT_FATAL(mr != NULL);
    CU_ASSERT_EQUAL(mr->length, sizeof(buf));
    CU_ASSERT_EQUAL(ibv_dereg_mr(mr), 0);
out:
    if (pd != NULL)
        ibv_dealloc_pd(pd);
    if (ctx != NULL)
        ibv_close_device(ctx);
    if (list != NULL)
        ibv_free_device_list(list);
}

static CU_TestInfo choose_tests[] = {
    {"GPU memory: every dmabuf/fd/peermem/override combination", test_choose_gpu_table},
    {"staging not allowed", test_choose_no_staging},
    {"NIC-GPU distance", test_choose_distance},
    {"host memory", test_choose_host},
    {"bad inputs, short why", test_choose_bad_inputs},
    {"UCCL_VERBS_GDR values", test_parse_want},
    {"peer-memory probe on a fake sysfs", test_peermem_probe},
    CU_TEST_INFO_NULL,
};

static CU_TestInfo reg_tests[] = {
    {"uccl_gpu_dmabuf_fd errors", test_dmabuf_fd_errors},
    {"no direct path", test_reg_no_direct_path},
    {"transport hook", test_hook},
    {"host memory on a device", test_reg_host_on_device},
    CU_TEST_INFO_NULL,
};

static CU_SuiteInfo suites[] = {
    {"uccl_verbs_gdr_choose", NULL, NULL, NULL, NULL, choose_tests},
    {"uccl_verbs_gdr_reg", NULL, NULL, NULL, NULL, reg_tests},
    CU_SUITE_INFO_NULL,
};

int main(void)
{
    return unit_main(suites);
}
