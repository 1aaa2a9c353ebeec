/* libuccl public point-to-point API: engines, connections, memory regions,
 * two-sided send/recv, one-sided read/write, notifications and requests. */
#ifndef UCCL_UCCL_H
#define UCCL_UCCL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define UCCL_VERSION_MAJOR 0
#define UCCL_VERSION_MINOR 1
#define UCCL_VERSION_PATCH 0

#if defined(__GNUC__)
#define UCCL_API __attribute__((visibility("default")))
#else
#define UCCL_API
#endif

/* ---------------------------------------------------------------- status */

/* One list generates the enum, uccl_strerror() and uccl_status_name().
 * OK is 0, "in progress" is 1, errors are negative; errors caused by the
 * peer or the link sit in [-100, -199] (see UCCL_STATUS_IS_PEER_ERROR). */
#define UCCL_STATUS_MAP(X)                                                                   \
    X(OK, 0, "success")                                                                      \
    X(INPROGRESS, 1, "operation in progress")                                                \
    X(ERR_INVALID_PARAM, -1, "invalid parameter")                                            \
    X(ERR_NO_MEMORY, -2, "out of memory")                                                    \
    X(ERR_UNSUPPORTED, -3, "operation not supported")                                        \
    X(ERR_NOT_FOUND, -4, "not found")                                                        \
    X(ERR_TRUNCATED, -5, "message truncated: receive buffer smaller than message")           \
    X(ERR_OUT_OF_BOUNDS, -6, "access outside the registered or described range")             \
    X(ERR_TIMEOUT, -7, "timed out")                                                          \
    X(ERR_BUFFER_TOO_SMALL, -8, "output buffer too small")                                   \
    X(ERR_BAD_ADDRESS, -9, "malformed or truncated engine address")                          \
    X(ERR_BAD_DESC, -10, "malformed remote descriptor")                                      \
    X(ERR_VERSION, -11, "incompatible libuccl wire version")                                 \
    X(ERR_STALE, -12, "stale: the descriptor or address belongs to another engine incarnation") \
    X(ERR_INVALID_HANDLE, -13, "invalid or already released handle")                         \
    X(ERR_BUSY, -14, "resource busy: operations still in flight")                            \
    X(ERR_NO_DEVICE, -15, "no usable device")                                                \
    X(ERR_NO_TRANSPORT, -16, "no transport can reach this peer")                             \
    X(ERR_IO, -17, "I/O error")                                                              \
    X(ERR_CANCELED, -18, "operation canceled")                                               \
    X(ERR_TRANSPORT, -19, "transport error")                                                 \
    X(ERR_NOT_REGISTERED, -20, "memory region not registered for this transport")            \
    X(ERR_PEER_FAILED, -100, "peer failed or connection lost")                               \
    X(ERR_UNREACHABLE, -101, "peer unreachable")                                             \
    X(ERR_CONN_REFUSED, -102, "connection refused by peer")                                  \
    X(ERR_REMOTE_ACCESS, -103, "peer refused the remote access (region gone or out of range)") \
    X(ERR_DENIED, -104, "peer refused admission: wrong or missing secret (another job?)")

typedef enum {
#define UCCL_STATUS_ENUM_(name, value, text) UCCL_##name = value,
    UCCL_STATUS_MAP(UCCL_STATUS_ENUM_)
#undef UCCL_STATUS_ENUM_
} uccl_status_t;

#define UCCL_STATUS_IS_ERR(s) ((s) < 0)
#define UCCL_STATUS_IS_PEER_ERROR(s) ((s) <= -100 && (s) > -200)

/* Human-readable text of a status ("unknown status" for values not listed). */
UCCL_API const char *uccl_strerror(uccl_status_t status);
/* Symbolic name of a status, e.g. "UCCL_ERR_TIMEOUT". */
UCCL_API const char *uccl_status_name(uccl_status_t status);
/* Library version as "MAJOR.MINOR.PATCH". */
UCCL_API const char *uccl_version(void);

/* ---------------------------------------------------------------- handles */

typedef struct uccl_engine uccl_engine_t;
typedef struct uccl_conn uccl_conn_t;
typedef struct uccl_mr uccl_mr_t;
typedef struct uccl_req uccl_req_t;

/* Thread safety and lifetime (every call below follows these rules):
 * - Every handle of one engine (the engine, its connections, regions and
 *   requests) may be used from several threads at once: one recursive lock
 *   per engine serializes the calls, and no call holds it while it sleeps.
 *   Progress is never re-entered: a call made from inside progress (e.g. a
 *   generalized request's callback) runs but does not progress again.
 * - A request keeps its connection and the regions of its pieces in use:
 *   uccl_mr_dereg of a region with requests in flight fails with
 *   UCCL_ERR_BUSY. uccl_req_free of a request in flight detaches it; it
 *   still completes in the background.
 * - uccl_conn_close completes the connection's requests in flight with
 *   UCCL_ERR_CANCELED; the handle is invalid after the call.
 * - uccl_engine_destroy releases every connection, region and request of
 *   the engine. Any later call on one of those handles is a use after free
 *   (undefined behaviour): release or abandon them before destroying the
 *   engine. Bindings keep the engine alive while any handle of it lives.
 * - Handles of different engines are independent. */

/* ---------------------------------------------------------------- engine */

/* Which fields of uccl_engine_params_t are set; unset fields take defaults
 * from the configuration table (UCCL_* environment variables). */
enum {
    UCCL_ENGINE_PARAM_GPU_INDEX = 1u << 0,
    UCCL_ENGINE_PARAM_TRANSPORTS = 1u << 1,
    UCCL_ENGINE_PARAM_NET_DEVICES = 1u << 2,
    UCCL_ENGINE_PARAM_PROGRESS_THREAD = 1u << 3,
    UCCL_ENGINE_PARAM_SECRET = 1u << 4,
};

/* Bytes of an admission secret (uccl_engine_params_t.secret). */
#define UCCL_SECRET_SIZE 16

typedef struct uccl_engine_params {
    uint64_t field_mask;     /* UCCL_ENGINE_PARAM_* bits */
    int gpu_index;           /* local GPU ordinal, -1 = host memory only */
    const char *transports;  /* comma list ("shm,tcp"), overrides UCCL_TRANSPORTS */
    const char *net_devices; /* "mlx5_0:1,rxe0", overrides UCCL_NET_DEVICES */
    int progress_thread;     /* 1 = background progress thread */
    /* Admission secret (UCCL_ENGINE_PARAM_SECRET; not all zero): the
     * engine's address blob carries it, and an incoming connection that does
     * not prove it knows it is refused (UCCL_ERR_DENIED at the connecting
     * side) before any transport state is made for it. The proof is a
     * challenge-response (HMAC-SHA256 over fresh nonces, both ways): the
     * secret itself is never sent. Give every engine of a job
     * the same one (uccl_comm_init_mpi draws one per job); without it each
     * engine draws its own, so knowing the address blob is what admits. */
    uint8_t secret[UCCL_SECRET_SIZE];
} uccl_engine_params_t;

/* Engine capability bits (uccl_engine_caps). */
enum {
    UCCL_CAP_SHM = 1u << 0,
    UCCL_CAP_TCP = 1u << 1,
    UCCL_CAP_VERBS = 1u << 2,
    UCCL_CAP_OFI = 1u << 3,
    UCCL_CAP_GPU_IPC = 1u << 4,
    UCCL_CAP_CUDA = 1u << 8,
    UCCL_CAP_ROCM = 1u << 9,
    UCCL_CAP_HWLOC = 1u << 10,
    UCCL_CAP_MPI = 1u << 11,
};

/* Create an engine: opens every allowed transport that is usable on this
 * host (a transport whose probe fails is skipped and reported at info
 * level), a listening socket for connection setup, and draws a random
 * 64-bit incarnation id and (unless params give one) a random admission
 * secret. params may be NULL (all defaults).
 * Errors: UCCL_ERR_INVALID_PARAM (bad field, unknown transport name),
 * UCCL_ERR_NO_TRANSPORT (nothing usable), UCCL_ERR_NO_MEMORY, UCCL_ERR_IO. */
UCCL_API uccl_status_t uccl_engine_create(const uccl_engine_params_t *params,
                                          uccl_engine_t **engine);

/* Destroy an engine, closing its connections and releasing its regions and
 * requests. Outstanding requests complete with UCCL_ERR_CANCELED first. */
UCCL_API uccl_status_t uccl_engine_destroy(uccl_engine_t *engine);

/* Bitmask of UCCL_CAP_* for what this engine can use: transports opened
 * here, GPU runtime and libraries compiled in. */
UCCL_API uint64_t uccl_engine_caps(const uccl_engine_t *engine);

/* The engine's random incarnation id (also carried in its address and in
 * every remote descriptor it packs). */
UCCL_API uint64_t uccl_engine_id(const uccl_engine_t *engine);

/* The engine's host identity: equal values mean the same host (same
 * hostname and boot id, so shared memory and CMA work between the two).
 * UCCL_HOST_ID overrides it (test use: emulate several hosts on one
 * machine; engines with different values never use shm between them). */
UCCL_API uint64_t uccl_engine_host_id(const uccl_engine_t *engine);

/* Largest address blob any engine produces. */
#define UCCL_ADDRESS_MAX 1024

/* Write this engine's address blob to buf. On entry *len is buf's size, on
 * return the blob's length. The blob is opaque, versioned and self-checking;
 * send it to peers by any means (MPI, a file, a socket).
 * Errors: UCCL_ERR_BUFFER_TOO_SMALL (then *len holds the size needed). */
UCCL_API uccl_status_t uccl_engine_address(uccl_engine_t *engine, void *buf, size_t *len);

/* Drive every transport once; returns the number of events handled (>= 0).
 * Other calls progress by themselves; this is for callers that poll. */
UCCL_API int uccl_engine_progress(uccl_engine_t *engine);

/* ---------------------------------------------------------------- connections */

/* Connect to the engine whose address blob is addr. Picks the transport
 * automatically (same host -> shm, else verbs > ofi > tcp; restricted by
 * UCCL_TRANSPORTS) and blocks up to UCCL_TIMEOUT_MS while progressing the
 * engine. The connection is bidirectional.
 * Errors: UCCL_ERR_BAD_ADDRESS / UCCL_ERR_VERSION (blob rejected, nothing
 * sent), UCCL_ERR_NO_TRANSPORT, UCCL_ERR_UNREACHABLE, UCCL_ERR_CONN_REFUSED,
 * UCCL_ERR_DENIED (the blob's secret is not the engine's: tampered, or of
 * another job), UCCL_ERR_STALE (the blob names an earlier incarnation of the
 * engine now listening at that address), UCCL_ERR_TIMEOUT. */
UCCL_API uccl_status_t uccl_connect(uccl_engine_t *engine, const void *addr, size_t len,
                                    uccl_conn_t **conn);

/* Wait up to timeout_ms (-1 = UCCL_TIMEOUT_MS; 0 = progress once and
 * look) for the next incoming connection and return it. Incoming
 * connections are set up by progress, so peers never block on us calling
 * accept.
 * Errors: UCCL_ERR_TIMEOUT. */
UCCL_API uccl_status_t uccl_accept(uccl_engine_t *engine, int timeout_ms, uccl_conn_t **conn);

/* Close a connection. Its outstanding requests complete with
 * UCCL_ERR_CANCELED; the peer's requests on it fail with UCCL_ERR_PEER_FAILED.
 * Sends that already completed are still delivered (tcp waits up to
 * UCCL_TIMEOUT_MS for the peer to take them), and once the call returns the
 * peer writes nothing more into this side's memory (shm: after the one
 * bounded copy it may have under way). */
UCCL_API uccl_status_t uccl_conn_close(uccl_conn_t *conn);

typedef struct uccl_conn_attr {
    uint64_t peer_id;      /* peer engine's incarnation id */
    const char *transport; /* moves host memory: "shm", "tcp", "verbs", ... or "none"
                            * (strings owned by the library) */
    const char *gpu_transport; /* moves GPU memory: "gpu_ipc", "shm", ... or "none" */
    int same_host;         /* 1 when the peer runs on this host */
    uccl_status_t state;   /* UCCL_OK, or the error that failed the connection */
    uint64_t host_id;      /* peer engine's host identity (uccl_engine_host_id) */
} uccl_conn_attr_t;

UCCL_API uccl_status_t uccl_conn_query(const uccl_conn_t *conn, uccl_conn_attr_t *attr);

/* ---------------------------------------------------------------- memory */

enum {
    UCCL_MR_LOCAL_ONLY = 1u << 0, /* never packed for remote access */
};

typedef enum {
    UCCL_MEM_HOST = 0,
    UCCL_MEM_CUDA = 1,
    UCCL_MEM_ROCM = 2,
} uccl_mem_type_t;

/* Register [ptr, ptr+len) with every transport of the engine. The memory
 * type is detected from the pointer. A cache makes registering the same range
 * (start, length, memory type) again cheap while an earlier registration of it
 * is alive (UCCL_RCACHE=0 turns it off). len > 0.
 * Errors: UCCL_ERR_INVALID_PARAM, UCCL_ERR_NO_MEMORY, UCCL_ERR_TRANSPORT. */
UCCL_API uccl_status_t uccl_mr_reg(uccl_engine_t *engine, void *ptr, size_t len,
                                   unsigned flags, uccl_mr_t **mr);

/* Release a region. Errors: UCCL_ERR_INVALID_HANDLE (already released),
 * UCCL_ERR_BUSY (requests on it still in flight, or, for the last handle of
 * a range, a peer's write or read of it that shm copies with both processes
 * at once still under way; nothing is released: progress and try again).
 * Once it returns UCCL_OK, no peer's write or read touches the memory. */
UCCL_API uccl_status_t uccl_mr_dereg(uccl_mr_t *mr);

typedef struct uccl_mr_attr {
    void *addr;
    size_t len;
    uccl_mem_type_t mem_type;
    int device; /* GPU ordinal, -1 for host memory */
} uccl_mr_attr_t;

/* Fills attr. Returns UCCL_ERR_STALE (attr filled) when the memory under
 * the region was released with uccl_mem_free since: deregister it; a new
 * registration of memory mapped there later never shares it. */
UCCL_API uccl_status_t uccl_mr_query(const uccl_mr_t *mr, uccl_mr_attr_t *attr);

/* A remote descriptor: 64 bytes, position independent, safe to send
 * anywhere. Describes [off, off+len) of a region for one-sided access. */
#define UCCL_RDESC_SIZE 64
typedef struct uccl_rdesc {
    uint8_t bytes[UCCL_RDESC_SIZE];
} uccl_rdesc_t;

/* Describe [off, off+len) of mr for peers. Errors: UCCL_ERR_OUT_OF_BOUNDS,
 * UCCL_ERR_INVALID_PARAM (LOCAL_ONLY region), UCCL_ERR_INVALID_HANDLE. */
UCCL_API uccl_status_t uccl_mr_pack(const uccl_mr_t *mr, size_t off, size_t len,
                                    uccl_rdesc_t *rdesc);

typedef struct uccl_rdesc_info {
    uint64_t engine_id; /* incarnation id of the engine that packed it */
    uint64_t addr;      /* remote virtual address of byte 0 */
    uint64_t len;
    uccl_mem_type_t mem_type;
} uccl_rdesc_info_t;

/* Check and decode a descriptor received from elsewhere.
 * Errors: UCCL_ERR_BAD_DESC, UCCL_ERR_VERSION. */
UCCL_API uccl_status_t uccl_rdesc_info(const uccl_rdesc_t *rdesc, uccl_rdesc_info_t *info);

/* Direct access to peer memory (UCX's ucp_rkey_ptr, MPI_Win_shared_query):
 * *ptr = an address in this process where the bytes of rdesc's range can be
 * reached without a transfer: loads and stores for host memory, kernels,
 * copies and stream operations of this process's GPU runtime for GPU
 * memory. Only where conn's transport maps peer memory (which ones do is
 * documented in the README's transport table); the caller orders its
 * accesses with the peer itself (e.g. flags in mapped memory, messages).
 * The mapping stays valid until conn is closed; the peer must keep the
 * region registered that long.
 * Errors: UCCL_ERR_UNSUPPORTED (this connection cannot map that memory: use
 * uccl_write/uccl_read), UCCL_ERR_BAD_DESC, UCCL_ERR_VERSION, UCCL_ERR_STALE
 * (a descriptor of another engine than conn's peer), UCCL_ERR_INVALID_PARAM,
 * UCCL_ERR_INVALID_HANDLE, the connection's error. gpu_ipc maps the peer's
 * GPU allocation over CUDA/HIP IPC after asking the peer for a grant: the
 * first call for a region progresses the engine until the peer answers (its
 * engine must progress meanwhile), up to UCCL_TIMEOUT_MS (UCCL_ERR_TIMEOUT);
 * UCCL_ERR_REMOTE_ACCESS when the peer refuses (not a registered GPU
 * region). Later calls for the region answer at once. The mapping ends
 * when the peer deregisters the region; it outlives a failure of the
 * connection (a stream may still write there) and is then closed with the
 * engine. */
UCCL_API uccl_status_t uccl_rdesc_ptr(uccl_conn_t *conn, const uccl_rdesc_t *rdesc, void **ptr);

/* ---------------------------------------------------------------- local memory and copies */

/* Memory type of a pointer (host, or a GPU allocation of the runtime this
 * build uses) and its device (-1 for host memory); device may be NULL.
 * Never fails for host pointers. Errors: UCCL_ERR_INVALID_PARAM (NULL type). */
UCCL_API uccl_status_t uccl_mem_query(const void *ptr, uccl_mem_type_t *type, int *device);

/* Allocate len > 0 bytes of type: UCCL_MEM_HOST (page-aligned host memory:
 * shared memory, a memfd mapped MAP_SHARED, that a peer on this host may map
 * with uccl_rdesc_ptr; it stays shared with a child after fork; over shm a
 * large send from it is copied by the receiver straight out of its mapping,
 * without CMA: UCCL_SHM_MAP_MAX) or GPU
 * memory on the engine's GPU (its gpu_index, else the calling thread's
 * current device). Release with uccl_mem_free. For tests, examples and
 * layers built on this API that need device scratch.
 * Errors: UCCL_ERR_INVALID_PARAM, UCCL_ERR_NO_DEVICE (no GPU runtime or
 * device), UCCL_ERR_UNSUPPORTED (a GPU type this build does not run),
 * UCCL_ERR_NO_MEMORY. */
UCCL_API uccl_status_t uccl_mem_alloc(uccl_engine_t *engine, uccl_mem_type_t type, size_t len,
                                      void **ptr);
/* Free memory of uccl_mem_alloc. Registrations over it (the caller's, the
 * collectives' cached ones) become stale: see uccl_mr_query. Errors:
 * UCCL_ERR_BUSY (host memory: a peer's write or read of a registration over
 * it is still being copied outside this engine's checks, as uccl_mr_dereg
 * says; nothing is freed: progress and try again). */
UCCL_API uccl_status_t uccl_mem_free(uccl_engine_t *engine, void *ptr);

/* Copy len bytes from src to dst on this process, any memory types (host,
 * GPU, mixed; both detected from the pointers). Host to host is a memmove;
 * anything touching GPU memory goes through the GPU runtime on a stream of
 * the engine (not the caller's streams). uccl_copy returns when the bytes
 * are in dst; uccl_copy_post returns a request that completes then (GPU:
 * an event on the engine's copy stream, polled by progress; host: already
 * complete). Overlapping ranges: host to host only. len 0 is allowed.
 * Errors: UCCL_ERR_INVALID_PARAM (NULL pointer with len > 0), the GPU
 * runtime's errors (UCCL_ERR_IO, UCCL_ERR_NO_DEVICE). */
UCCL_API uccl_status_t uccl_copy(uccl_engine_t *engine, void *dst, const void *src, size_t len);
UCCL_API uccl_status_t uccl_copy_post(uccl_engine_t *engine, void *dst, const void *src,
                                      size_t len, uccl_req_t **req);

/* GPU stream ordering (uccl_stream_event, uccl_stream_hold, and the
 * stream operations uccl_stream_copy / _write_value / _wait_value):
 * include/uccl/uccl_stream.h, which this header includes at its end. */

/* ---------------------------------------------------------------- transfers */

/* One piece of a vectored transfer. */
typedef struct uccl_iov {
    uccl_mr_t *mr;
    size_t off;
    size_t len;
} uccl_iov_t;

/* Most pieces one vectored call accepts. */
#define UCCL_IOV_MAX 64

/* Tags. The top 8 bits of a tag (UCCL_TAG_LIB_MASK) are reserved for the
 * library's own traffic on a connection (collectives, bootstrap); an
 * application keeps them 0 so that its messages never match the library's.
 * They are not checked: code built on this API (coll/) uses them. */
#define UCCL_TAG_LIB_SHIFT 56
#define UCCL_TAG_LIB_MASK (0xffull << UCCL_TAG_LIB_SHIFT)
#define UCCL_TAG_USER_MAX (~UCCL_TAG_LIB_MASK)

/* Two-sided. A message is matched to the first receive posted on the same
 * conn with the same tag, in posting order. A receive larger than the
 * message completes with the message's length (uccl_req_bytes), its bytes
 * past that length left as they were; a smaller one fails with
 * UCCL_ERR_TRUNCATED (its bytes may have been written) and the message
 * stays for the next receive with that tag. Zero-length messages are allowed.
 * A send above its transport's eager size (UCCL_SHM_EAGER_THRESHOLD,
 * UCCL_VERBS_EAGER, UCCL_OFI_EAGER, UCCL_TCP_RNDV_MIN; uccl_info -c prints
 * them) completes only once the peer has posted its receive, as a large
 * MPI_Send does: post receives before waiting on sends in an exchange.
 * On success *req is a new request (free it with uccl_req_free).
 * Errors (immediate): UCCL_ERR_INVALID_PARAM, UCCL_ERR_OUT_OF_BOUNDS (off+len
 * past the region), UCCL_ERR_INVALID_HANDLE, UCCL_ERR_PEER_FAILED. */
UCCL_API uccl_status_t uccl_send(uccl_conn_t *conn, uccl_mr_t *mr, size_t off, size_t len,
                                 uint64_t tag, uccl_req_t **req);
UCCL_API uccl_status_t uccl_recv(uccl_conn_t *conn, uccl_mr_t *mr, size_t off, size_t len,
                                 uint64_t tag, uccl_req_t **req);
/* Gather iov into one message / scatter one message into iov (1..UCCL_IOV_MAX). */
UCCL_API uccl_status_t uccl_sendv(uccl_conn_t *conn, const uccl_iov_t *iov, int iovcnt,
                                  uint64_t tag, uccl_req_t **req);
UCCL_API uccl_status_t uccl_recvv(uccl_conn_t *conn, const uccl_iov_t *iov, int iovcnt,
                                  uint64_t tag, uccl_req_t **req);

/* One-sided. Write [off, off+len) of mr to the start of rdesc's range plus
 * roff / read into it from there. rdesc must come from the engine at the
 * other end of conn (else UCCL_ERR_STALE); roff+len past the described range
 * is refused locally with UCCL_ERR_OUT_OF_BOUNDS. A region deregistered by
 * the peer fails the request with UCCL_ERR_REMOTE_ACCESS. */
UCCL_API uccl_status_t uccl_write(uccl_conn_t *conn, uccl_mr_t *mr, size_t off, size_t len,
                                  const uccl_rdesc_t *rdesc, size_t roff, uccl_req_t **req);
UCCL_API uccl_status_t uccl_read(uccl_conn_t *conn, uccl_mr_t *mr, size_t off, size_t len,
                                 const uccl_rdesc_t *rdesc, size_t roff, uccl_req_t **req);
/* Vectored: local pieces are gathered (write) / scattered (read) to/from the
 * contiguous remote range starting at roff. */
UCCL_API uccl_status_t uccl_writev(uccl_conn_t *conn, const uccl_iov_t *iov, int iovcnt,
                                   const uccl_rdesc_t *rdesc, size_t roff, uccl_req_t **req);
UCCL_API uccl_status_t uccl_readv(uccl_conn_t *conn, const uccl_iov_t *iov, int iovcnt,
                                  const uccl_rdesc_t *rdesc, size_t roff, uccl_req_t **req);

/* One remote piece of a vectored one-sided transfer: [roff, roff+len) of
 * the range rdesc describes. */
typedef struct uccl_riov {
    const uccl_rdesc_t *rdesc;
    size_t roff;
    size_t len;
} uccl_riov_t;

/* Most remote pieces one uccl_writemsg / uccl_readmsg accepts. */
#define UCCL_RIOV_MAX 1024

enum {
    UCCL_RMA_NOTIFY = 1u << 0, /* deliver msg->notif after all the data landed */
};

/* The general one-sided call (libfabric's writemsg shape): the local pieces
 * (gathered in order) go to the remote pieces (filled in order); both lists
 * must carry the same number of bytes. Remote pieces may name different
 * descriptors of the same peer engine (a paged KV cache, alltoallv
 * displacements). With UCCL_RMA_NOTIFY the notification is delivered after
 * every byte of every piece has landed. The request completes when all
 * pieces are done; its status is the first error of any piece.
 * Errors: those of uccl_writev, UCCL_ERR_INVALID_PARAM (counts out of range,
 * totals differ, unknown flags). */
typedef struct uccl_rma_msg {
    const uccl_iov_t *iov; /* 1..UCCL_IOV_MAX local pieces */
    int iovcnt;
    const uccl_riov_t *riov; /* 1..UCCL_RIOV_MAX remote pieces */
    int riovcnt;
    uint64_t flags; /* UCCL_RMA_* */
    uint64_t notif; /* with UCCL_RMA_NOTIFY */
} uccl_rma_msg_t;

UCCL_API uccl_status_t uccl_writemsg(uccl_conn_t *conn, const uccl_rma_msg_t *msg,
                                     uccl_req_t **req);
UCCL_API uccl_status_t uccl_readmsg(uccl_conn_t *conn, const uccl_rma_msg_t *msg,
                                    uccl_req_t **req);

/* Write, then deliver notif to the peer once the data has landed there;
 * the peer reads it with uccl_notif_poll / uccl_notif_wait in delivery order. */
UCCL_API uccl_status_t uccl_write_notify(uccl_conn_t *conn, uccl_mr_t *mr, size_t off,
                                         size_t len, const uccl_rdesc_t *rdesc, size_t roff,
                                         uint64_t notif, uccl_req_t **req);

/* Progress the engine once and pop the oldest notification of conn.
 * Returns UCCL_OK with *value set, UCCL_ERR_NOT_FOUND when none is pending,
 * or the connection's error. */
UCCL_API uccl_status_t uccl_notif_poll(uccl_conn_t *conn, uint64_t *value);

/* Progress the engine until a notification of conn is pending or
 * timeout_ms passes (-1 = UCCL_TIMEOUT_MS, 0 = poll once), and pop the
 * oldest. Returns UCCL_OK with *value set, UCCL_ERR_TIMEOUT when none came
 * in time, or the connection's error (e.g. UCCL_ERR_PEER_FAILED: the
 * notifications that arrived before the failure are still popped first).
 * Errors: UCCL_ERR_INVALID_HANDLE, UCCL_ERR_INVALID_PARAM (NULL value). */
UCCL_API uccl_status_t uccl_notif_wait(uccl_conn_t *conn, uint64_t *value, int timeout_ms);

/* ---------------------------------------------------------------- requests */

/* Progress once, then report: *done = 1 when finished. Returns the request's
 * status when done (UCCL_OK or its error), UCCL_INPROGRESS otherwise.
 * Errors: UCCL_ERR_INVALID_HANDLE (freed or never valid). */
UCCL_API uccl_status_t uccl_test(uccl_req_t *req, int *done);

/* Progress until req finishes or timeout_ms passes (-1 = UCCL_TIMEOUT_MS,
 * 0 = poll once). Returns the request's final status or UCCL_ERR_TIMEOUT
 * (the request stays valid and may still complete). A timeout is never
 * reported before timeout_ms has passed; from 100 ms on it is kept on the
 * kernel's coarse clock, so it may come up to two ticks (2-20 ms) late
 * (the same in uccl_wait_all and uccl_notif_wait). */
UCCL_API uccl_status_t uccl_wait(uccl_req_t *req, int timeout_ms);

/* Wait for all n requests (NULL entries are skipped), which must all belong to
 * one engine (else UCCL_ERR_INVALID_PARAM). Returns UCCL_OK when all
 * succeeded, else the first error in array order; UCCL_ERR_TIMEOUT when the
 * time ran out first. */
UCCL_API uccl_status_t uccl_wait_all(uccl_req_t **reqs, size_t n, int timeout_ms);

/* Bytes moved by a finished request (for a receive: the message length). */
UCCL_API uccl_status_t uccl_req_bytes(const uccl_req_t *req, size_t *bytes);

/* Generalized requests (MPI_Grequest_start's idea), for layers built on this
 * API (collectives, bindings): a request whose work is done by the caller's
 * progress callback. The engine calls progress(req, arg) from every round of
 * progress until the request is finished with uccl_req_finish; the callback
 * may post and test other requests of the engine (it runs under the engine
 * lock; progress is not re-entered from it) and returns the number of events
 * it handled (>= 0). The request is tested, waited for and freed like any
 * other. uccl_engine_destroy finishes a pending one with UCCL_ERR_CANCELED
 * without calling progress again; the library never frees arg.
 * Errors: UCCL_ERR_INVALID_HANDLE, UCCL_ERR_INVALID_PARAM (NULL progress),
 * UCCL_ERR_NO_MEMORY. */
typedef int (*uccl_req_progress_fn_t)(uccl_req_t *req, void *arg);
UCCL_API uccl_status_t uccl_req_create(uccl_engine_t *engine, uccl_req_progress_fn_t progress,
                                       void *arg, uccl_req_t **req);
/* Finish a generalized request with status and a byte count (reported by
 * uccl_req_bytes). Once only; may be called from its progress callback, and
 * by its creator even after the user freed (detached) the request, which is
 * then recycled.
 * Errors: UCCL_ERR_INVALID_HANDLE, UCCL_ERR_INVALID_PARAM (not a
 * generalized request, or finished already). */
UCCL_API uccl_status_t uccl_req_finish(uccl_req_t *req, uccl_status_t status, size_t bytes);

/* Release a request. A request still in flight is detached: it completes in
 * the background and is then recycled. Errors: UCCL_ERR_INVALID_HANDLE. */
UCCL_API uccl_status_t uccl_req_free(uccl_req_t *req);

/* Persistent two-sided requests (MPI_Send_init / MPI_Recv_init and
 * MPI_Start / MPI_Startall): uccl_send_init / uccl_recv_init check their
 * arguments as uccl_send / uccl_recv do (same errors) and return an
 * inactive request, nothing posted. Each uccl_start_all then posts the n
 * requests under one engine lock, as uccl_send / uccl_recv would, in array
 * order (which is matching order), with no argument checks and no request
 * allocation: the lean path for small repeated messages (the collectives'
 * cached plans use it). tags: NULL keeps each request's tag, else tags[i]
 * is request i's tag from this start on. A started request is tested,
 * waited for and its bytes read like any other; once finished it is
 * inactive again (uccl_test / uccl_wait of an inactive request return its
 * last status at once). Its region stays in use (uccl_mr_dereg: BUSY)
 * until uccl_req_free, which releases it (a started one when it finishes).
 * Free persistent requests before closing their connection.
 * Errors: UCCL_ERR_INVALID_HANDLE, UCCL_ERR_INVALID_PARAM (not a persistent
 * request, requests of several engines, or one request listed twice: none
 * starts), UCCL_ERR_BUSY (one is still
 * active: none starts), or the connection's error (e.g. PEER_FAILED), in
 * which case the requests before the failing one have started and the
 * failing one and those after have not. */
UCCL_API uccl_status_t uccl_send_init(uccl_conn_t *conn, uccl_mr_t *mr, size_t off, size_t len,
                                      uint64_t tag, uccl_req_t **req);
UCCL_API uccl_status_t uccl_recv_init(uccl_conn_t *conn, uccl_mr_t *mr, size_t off, size_t len,
                                      uint64_t tag, uccl_req_t **req);
UCCL_API uccl_status_t uccl_start(uccl_req_t *req);
UCCL_API uccl_status_t uccl_start_all(uccl_req_t **reqs, size_t n, const uint64_t *tags);

/* ---------------------------------------------------------------- logging and configuration */

/* Log levels, as UCCL_LOG_LEVEL names them (error, warn, info, debug, trace). */
typedef enum {
    UCCL_LOG_ERROR = 0,
    UCCL_LOG_WARN,
    UCCL_LOG_INFO,
    UCCL_LOG_DEBUG,
    UCCL_LOG_TRACE,
} uccl_log_level_t;

/* Receives each log line that passes UCCL_LOG_LEVEL instead of stderr: the
 * level, the source file's base name and line, the message (no prefix, no
 * newline), and the arg given to uccl_log_set_sink. It may be called from any
 * thread that calls into the library (and from the progress thread), at
 * times with an engine's lock held: it must not call back into libuccl. */
typedef void (*uccl_log_sink_t)(void *arg, uccl_log_level_t level, const char *file, int line,
                                const char *msg);

/* Route log lines to sink (NULL = back to stderr, the default, where lines
 * read "[uccl host:pid file:line] level message"). Process-wide. Thread-safe;
 * a line being written while the sink changes may still reach the previous
 * one, so keep the previous arg valid until no libuccl call is running. */
UCCL_API void uccl_log_set_sink(uccl_log_sink_t sink, void *arg);

/* One line from a layer built on this API (the collectives, a binding),
 * written as the library's own: to the sink, else to stderr with the
 * prefix above. file is a path or base name; the caller decides whether
 * level passes UCCL_LOG_LEVEL. */
UCCL_API void uccl_log_write(uccl_log_level_t level, const char *file, int line, const char *msg);

/* Flags of uccl_config_dump. */
enum {
    UCCL_CONFIG_DUMP_JSON = 1u << 0,     /* a JSON array instead of text */
    UCCL_CONFIG_DUMP_DEFAULTS = 1u << 1, /* built-in defaults; the environment is ignored */
};

/* Describe every UCCL_* setting of this build (core, transports, GPU layer)
 * with the value the environment gives it now, and every UCCL_* variable of
 * the environment that this build does not know (named with the closest
 * legal name when one is close). Text: per variable "UCCL_NAME=value" and
 * indented "    # ..." lines (its doc; a malformed value shows the default
 * and a line saying the value was ignored). JSON: an array of objects
 * {"name", "value", "default" (known ones), "state", "doc", and "raw" for a
 * malformed value, "hint" for an unknown name}, state being "default" (not
 * set), "env" (set and valid), "invalid" (set, malformed: default used),
 * "unknown" (no such setting) or "unused" (a setting of a part this build
 * left out, e.g. UCCL_VERBS_* without verbs).
 * buf receives NUL-terminated text; on entry *len is its size (buf may be
 * NULL when *len is 0), on return *len is the size the text needs, NUL
 * included, whatever the result: call once with *len = 0 to size the buffer.
 * The environment never makes it fail. Thread-safe (the environment must not
 * change meanwhile). Errors: UCCL_ERR_BUFFER_TOO_SMALL (nothing written),
 * UCCL_ERR_INVALID_PARAM (len NULL, buf NULL with *len > 0, unknown flags),
 * UCCL_ERR_NO_MEMORY. */
UCCL_API uccl_status_t uccl_config_dump(unsigned flags, char *buf, size_t *len);

#ifdef __cplusplus
}
#endif

#include "uccl_stream.h" /* GPU stream ordering: part of this API */

#endif /* UCCL_UCCL_H */
