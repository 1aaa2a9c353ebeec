/* The proxy thread of a device queue. Each round it
 *  1. retires the oldest vectored writes that completed, in order, and
 *     publishes the count of completed commands in the done word;
 *  2. takes the published commands at the tail (entry t when its sequence
 *     word is t + 1), up to batch_max commands or batch_bytes bytes and while
 *     they name the same peer,
 *     merges contiguous local and remote pieces, and posts them as one
 *     uccl_writemsg (uccl_write or uccl_write_notify when they merged into
 *     one piece; a command with a notification ends its batch: the
 *     notification goes with that write, after all of its data); the tail
 *     word then frees the entries for producers;
 *  3. with notification counters, pops the notifications of every bound peer
 *     and adds them to the counters (UCCL_DEVQ_NOTIF_INDEX / _ADD).
 * Any error (a write or connection that failed, a write in flight longer
 * than timeout_ms, a command naming an unbound peer or slot or reaching past
 * the local region, a notification naming no counter) sets the error word
 * and ends the thread: the kernel sees the word, uccl_devq_status reports
 * it. On stop the thread takes what is published, waits for its writes and
 * leaves. With writes in flight it never waits (every round progresses the
 * engine and polls the ring); idle, it spins for SPIN_NS after the last
 * activity (a kernel that issues again within that time is seen at once),
 * then yields until YIELD_NS, then sleeps 50 us a round. */
#include <sched.h>
#include <string.h>
#include <time.h>

#include "util/log.h"
#include "util/sys.h"
#include "gpu/gpu.h"
#include "proxy/devq.h"

#define SPIN_NS 500000ull   /* 0.5 ms */
#define YIELD_NS 5000000ull /* 5 ms */
#define CONN_CHECK_MS 20
#define NOTIF_POLL_MAX 256

static uint64_t load_acq(const volatile uint64_t *p)
{
    return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}

static void store_rel(volatile uint64_t *p, uint64_t v)
{
    __atomic_store_n(p, v, __ATOMIC_RELEASE);
}

/* Trace timestamps: CLOCK_REALTIME, the clock a GPU's global timer follows. */
static uint64_t trace_ns(const uccl_devq_t *q)
{
    struct timespec ts;
    if (q->trace == NULL)
        return 0;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static bool failed(const uccl_devq_t *q)
{
    return __atomic_load_n(&q->ctrl->error, __ATOMIC_ACQUIRE) != 0;
}

/* Record f (not yet visible to uccl_devq_trace_read: trace_done). */
static void trace_put(uccl_devq_t *q, const uccl_devq_flight_t *f, uint64_t done_ns)
{
    uccl_devq_trace_rec_t *r;

    if (q->trace_fill >= q->trace_cap)
        return;
    r = &q->trace[q->trace_fill++];
    r->first = f->first;
    r->ncmds = f->ncmds;
    r->seen_ns = f->seen_ns;
    r->posted_ns = f->posted_ns;
    r->done_ns = done_ns;
}

/* The done word was stored: stamp the records since the last call, show them. */
static void trace_done(uccl_devq_t *q)
{
    uint64_t pub_ns = trace_ns(q);

    for (uint32_t k = q->trace_count; k < q->trace_fill; k++)
        q->trace[k].published_ns = pub_ns;
    __atomic_store_n(&q->trace_count, q->trace_fill, __ATOMIC_RELEASE);
}

/* 1. Retire completed writes in order and publish their count with one store
 * of the done word per pass; returns how many writes. */
static int retire(uccl_devq_t *q, bool *fail)
{
    int n = 0;
    uint64_t cmds = 0, bytes = 0, done_ns = 0;

    while (q->fifo_count > 0) {
        uccl_devq_flight_t *f = &q->fifo[q->fifo_head];
        int done = 0;
        uccl_status_t st = uccl_test(f->req, &done);

        if (!done) {
            if (n > 0)
                break; /* publish what finished; the next round looks again */
            if (st != UCCL_INPROGRESS && UCCL_STATUS_IS_ERR(st)) {
                uccl_devq_set_error(q, st);
                *fail = true;
            } else if (uccl_time_ms() - f->posted_ms > (uint64_t)q->p.timeout_ms) {
                uccl_error("device queue %p: a write of %u commands is in flight for more than %d ms",
                           (void *)q, f->ncmds, q->p.timeout_ms);
                uccl_devq_set_error(q, UCCL_ERR_TIMEOUT);
                *fail = true;
            }
            break;
        }
        uccl_req_free(f->req);
        f->req = NULL;
        q->fifo_head = (q->fifo_head + 1) % q->fifo_cap;
        q->fifo_count--;
        if (st != UCCL_OK) {
            uccl_devq_set_error(q, st);
            *fail = true;
            break;
        }
        if (q->trace != NULL) {
            if (done_ns == 0)
                done_ns = trace_ns(q);
            trace_put(q, f, done_ns);
        }
        bytes += f->bytes;
        cmds += f->ncmds;
        n++;
    }
    if (cmds > 0) {
        store_rel(&q->ctrl->done, q->done + cmds);
        q->done += cmds;
        if (q->trace != NULL)
            trace_done(q); /* before the stats: a reader that saw them finds the records */
        atomic_fetch_add(&q->n_bytes, bytes);
        atomic_fetch_add(&q->n_completed, cmds);
    }
    return n;
}

/* Is command c well formed? */
static uccl_status_t check_cmd(const uccl_devq_t *q, const uccl_devq_cmd_t *c, uint64_t ticket)
{
    if (c->peer >= q->p.npeers || q->peers[c->peer] == NULL || c->slot >= q->p.nslots ||
        !q->slot_bound[c->slot] || c->len == 0 || c->local_off > q->local_len ||
        c->len > q->local_len - c->local_off || (c->flags & ~(uint32_t)UCCL_DEVQ_CMD_NOTIFY)) {
        uccl_error("device queue %p: command %llu is malformed (peer %u, slot %u, local offset %llu, "
                   "length %llu, flags 0x%x; %u peers, %u slots, local region %zu bytes)",
                   (void *)q, (unsigned long long)ticket, c->peer, c->slot,
                   (unsigned long long)c->local_off, (unsigned long long)c->len, c->flags,
                   q->p.npeers, q->p.nslots, q->local_len);
        return UCCL_ERR_INVALID_PARAM;
    }
    return UCCL_OK;
}

/* Copy entry ticket when published. */
static bool take_entry(const uccl_devq_t *q, uint64_t ticket, uccl_devq_cmd_t *c)
{
    const volatile uccl_devq_cmd_t *e = &q->cmds[ticket & (q->p.entries - 1)];

    if (__atomic_load_n(&e->seq, __ATOMIC_ACQUIRE) != (uint32_t)(ticket + 1))
        return false;
    c->local_off = e->local_off;
    c->remote_off = e->remote_off;
    c->notif = e->notif;
    c->len = e->len;
    c->peer = e->peer;
    c->slot = e->slot;
    c->flags = e->flags;
    return true;
}

/* 2. Take one batch and post it; returns commands taken. */
static int issue(uccl_devq_t *q, bool *fail)
{
    uccl_rma_msg_t m = {.iov = q->iov, .riov = q->riov};
    uint32_t n = 0, peer = 0;
    uint64_t bytes = 0;
    uccl_devq_cmd_t c;
    uccl_devq_flight_t *f;
    uccl_status_t st;
    uint64_t seen_ns = 0;

    if (q->fifo_count == q->fifo_cap)
        return 0;
    while (n < q->p.batch_max && take_entry(q, q->tail + n, &c)) {
        uccl_iov_t *li = m.iovcnt > 0 ? &q->iov[m.iovcnt - 1] : NULL;
        uccl_riov_t *ri = m.riovcnt > 0 ? &q->riov[m.riovcnt - 1] : NULL;
        bool lmerge, rmerge;

        if (check_cmd(q, &c, q->tail + n) != UCCL_OK) {
            uccl_devq_set_error(q, UCCL_ERR_INVALID_PARAM);
            *fail = true;
            return 0;
        }
        if (n > 0 && c.peer != peer)
            break;
        if (n == 0)
            seen_ns = trace_ns(q);
        lmerge = li != NULL && li->off + li->len == c.local_off;
        rmerge = ri != NULL && ri->rdesc == &q->slots[c.slot] && ri->roff + ri->len == c.remote_off;
        if ((!lmerge && m.iovcnt == UCCL_IOV_MAX) || (!rmerge && m.riovcnt == UCCL_RIOV_MAX))
            break;
        if (lmerge)
            li->len += c.len;
        else
            q->iov[m.iovcnt++] = (uccl_iov_t){q->local, c.local_off, c.len};
        if (rmerge)
            ri->len += c.len;
        else
            q->riov[m.riovcnt++] = (uccl_riov_t){&q->slots[c.slot], c.remote_off, c.len};
        peer = c.peer;
        bytes += c.len;
        n++;
        if (c.flags & UCCL_DEVQ_CMD_NOTIFY) {
            m.flags = UCCL_RMA_NOTIFY;
            m.notif = c.notif;
            break;
        }
        if (bytes >= q->p.batch_bytes)
            break;
    }
    if (n == 0)
        return 0;
    f = &q->fifo[(q->fifo_head + q->fifo_count) % q->fifo_cap];
    if (m.iovcnt == 1 && m.riovcnt == 1) /* one piece: the plain call, without writemsg's walk */
        st = m.flags & UCCL_RMA_NOTIFY
                 ? uccl_write_notify(q->peers[peer], q->iov[0].mr, q->iov[0].off, q->iov[0].len,
                                     q->riov[0].rdesc, q->riov[0].roff, m.notif, &f->req)
                 : uccl_write(q->peers[peer], q->iov[0].mr, q->iov[0].off, q->iov[0].len, q->riov[0].rdesc,
                              q->riov[0].roff, &f->req);
    else
        st = uccl_writemsg(q->peers[peer], &m, &f->req);
    if (st != UCCL_OK) {
        uccl_error("device queue %p: uccl_writemsg of commands %llu..%llu to peer %u: %s", (void *)q,
                   (unsigned long long)q->tail, (unsigned long long)(q->tail + n - 1), peer,
                   uccl_strerror(st));
        uccl_devq_set_error(q, st);
        *fail = true;
        return 0;
    }
    f->ncmds = n;
    f->bytes = bytes;
    f->first = q->tail;
    f->seen_ns = seen_ns;
    f->posted_ns = trace_ns(q);
    f->posted_ms = uccl_time_ms();
    q->fifo_count++;
    q->tail += n;
    store_rel(&q->ctrl->tail, q->tail); /* the entries are free again */
    atomic_fetch_add(&q->n_commands, n);
    atomic_fetch_add(&q->n_writes, 1);
    return (int)n;
}

/* 3. Count notifications of the bound peers; returns how many. */
static int poll_notifs(uccl_devq_t *q, bool *fail)
{
    int n = 0;

    for (uint32_t p = 0; p < q->p.npeers && !*fail; p++) {
        uint64_t v;

        if (q->peers[p] == NULL)
            continue;
        for (int k = 0; k < NOTIF_POLL_MAX; k++) {
            uccl_status_t st = uccl_notif_poll(q->peers[p], &v);
            uint32_t idx;

            if (st == UCCL_ERR_NOT_FOUND)
                break;
            if (st != UCCL_OK) {
                uccl_devq_set_error(q, st);
                *fail = true;
                break;
            }
            idx = UCCL_DEVQ_NOTIF_INDEX(v);
            if (idx >= q->p.ncounters) {
                uccl_error("device queue %p: notification 0x%llx from peer %u names counter %u of %u",
                           (void *)q, (unsigned long long)v, p, idx, q->p.ncounters);
                uccl_devq_set_error(q, UCCL_ERR_INVALID_PARAM);
                *fail = true;
                break;
            }
            store_rel(&q->counters[idx], load_acq(&q->counters[idx]) + UCCL_DEVQ_NOTIF_ADD(v));
            atomic_fetch_add(&q->n_notifs, 1);
            n++;
        }
    }
    return n;
}

/* A connection that failed while idle fails the ring (progress finds it). */
static void check_conns(uccl_devq_t *q, bool *fail)
{
    uccl_engine_progress(q->engine);
    for (uint32_t p = 0; p < q->p.npeers && !*fail; p++) {
        uccl_conn_attr_t a;

        if (q->peers[p] == NULL || uccl_conn_query(q->peers[p], &a) != UCCL_OK)
            continue;
        if (a.state != UCCL_OK) {
            uccl_error("device queue %p: the connection of peer %u failed: %s", (void *)q, p,
                       uccl_strerror(a.state));
            uccl_devq_set_error(q, a.state);
            *fail = true;
        }
    }
}

/* Nothing to do this round; idle_ns: since the last activity. */
static void idle_wait(uint64_t idle_ns)
{
    if (idle_ns < SPIN_NS)
        return;
    if (idle_ns < YIELD_NS) {
        sched_yield();
        return;
    }
    struct timespec ts = {0, 50000};
    nanosleep(&ts, NULL);
}

/* The sentinel: a second thread per running ring that, every SENTINEL_MS,
 * reads the state of the bound connections and sets the error word when one
 * failed. The proxy thread checks them too, but it can be held up inside
 * the engine: the progress call that fails a connection also tears its
 * endpoints down, and a transport may synchronize the device there
 * (gpu_ipc's cudaIpcCloseMemHandle), which waits for the very kernel that
 * waits for this ring; only that kernel's timeout would end it. The state
 * word is set before the teardown starts, so the sentinel sees it at once.
 * uccl_conn_query takes no lock: it reads a word the engine's thread writes. */
#define SENTINEL_MS 2

void *uccl_devq_sentinel_main(void *arg)
{
    uccl_devq_t *q = arg;

    while (!atomic_load(&q->sentinel_stop) && !failed(q)) {
        struct timespec ts = {0, SENTINEL_MS * 1000000L};

        nanosleep(&ts, NULL);
        for (uint32_t p = 0; p < q->p.npeers; p++) {
            uccl_conn_attr_t a;

            if (q->peers[p] == NULL || uccl_conn_query(q->peers[p], &a) != UCCL_OK || a.state == UCCL_OK)
                continue;
            uccl_error("device queue %p: the connection of peer %u failed: %s", (void *)q, p,
                       uccl_strerror(a.state));
            uccl_devq_set_error(q, a.state);
            break;
        }
    }
    return NULL;
}

void *uccl_devq_proxy_main(void *arg)
{
    uccl_devq_t *q = arg;
    uint64_t last_check = uccl_time_ms(), drain_start = 0, last_active = uccl_time_ns();
    uint32_t rounds = 0;
    bool fail = failed(q);

    if (q->device >= 0)
        uccl_gpu_set_device(q->device); /* transports' GPU calls from this thread */
    q->tail = load_acq(&q->ctrl->tail);
    q->done = load_acq(&q->ctrl->done);
    while (!fail) {
        int work = retire(q, &fail);
        bool stopping = atomic_load(&q->stop_req) != 0;

        if (!fail)
            work += issue(q, &fail);
        if (!fail && q->p.ncounters > 0)
            work += poll_notifs(q, &fail);
        if (stopping && work == 0 && q->fifo_count == 0 && !take_entry(q, q->tail, &(uccl_devq_cmd_t){0}))
            break; /* drained */
        if (stopping) {
            if (drain_start == 0)
                drain_start = uccl_time_ms();
            else if (uccl_time_ms() - drain_start > (uint64_t)q->p.timeout_ms) {
                uccl_devq_set_error(q, UCCL_ERR_TIMEOUT);
                fail = true;
            }
        }
        if (!fail && uccl_time_ms() - last_check >= CONN_CHECK_MS) {
            check_conns(q, &fail);
            last_check = uccl_time_ms();
        }
        if (!fail)
            fail = failed(q); /* set from outside (uccl_devq_fail) */
        if (!fail && __atomic_load_n(&q->ctrl->lost, __ATOMIC_ACQUIRE)) {
            /* a put canceled by the stop before this start gave up its
             * tickets after the start's check: nothing passes them */
            uccl_error("device queue %p: a producer gave up tickets it had taken at %llu or later",
                       (void *)q, (unsigned long long)q->tail);
            uccl_devq_set_error(q, UCCL_ERR_CANCELED);
            fail = true;
        }
        /* with writes in flight (or work just done) go round again at once;
         * the clock is read on idle rounds only (every 64th at first) */
        if (work > 0 || q->fifo_count > 0)
            rounds = 0;
        else if (rounds++ == 0)
            last_active = uccl_time_ns();
        else if (rounds > 4096 || (rounds & 63u) == 0)
            idle_wait(uccl_time_ns() - last_active);
    }
    /* a failed ring: writes still in flight are abandoned (they complete or
     * fail in the background); the kernel has the error word */
    while (q->fifo_count > 0) {
        uccl_req_free(q->fifo[q->fifo_head].req);
        q->fifo[q->fifo_head].req = NULL;
        q->fifo_head = (q->fifo_head + 1) % q->fifo_cap;
        q->fifo_count--;
    }
    return NULL;
}
