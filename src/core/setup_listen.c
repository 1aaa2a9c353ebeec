/* The connection-setup listener's admission: incoming setups are accepted
 * within a cap (UCCL_SETUP_MAX_PENDING), the idle oldest dropped first (peers
 * under way never: newcomers then wait in the backlog), an
 * idle one giving its fd up when the fd table is full, and every drop
 * counted in a rate-limited warning. conn_setup.c reads and answers the setups. */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core.h"

/* Say how many incoming connections the listener dropped, at most once per
 * interval: a flood must not flood the log too. */
#define SETUP_LOG_INTERVAL_MS 5000

void uccl_setup_drop_note(uccl_engine_t *engine, const char *why)
{
    uint64_t now = uccl_time_ms();

    engine->setup_drops++;
    if (now < engine->setup_log_ms)
        return;
    uccl_warn("setup listener: dropped %llu incoming connection(s) (latest: %s; "
              "UCCL_SETUP_TIMEOUT_MS=%d, UCCL_SETUP_MAX_PENDING=%d)",
              (unsigned long long)engine->setup_drops, why, engine->cfg.setup_timeout_ms,
              engine->cfg.setup_max_pending);
    engine->setup_drops = 0;
    engine->setup_log_ms = now + SETUP_LOG_INTERVAL_MS;
}

void uccl_handshake_free(uccl_engine_t *engine, uccl_handshake_t *hs)
{
    uccl_list_del(&hs->link);
    engine->nhandshakes--;
    free(hs->buf);
    free(hs);
}

/* Whole bytes of a frame header wait in the kernel for a setup that we
 * have read nothing of: its first message arrived (a real peer sends it
 * at once), to be read this round. */
static bool handshake_header_waiting(const uccl_handshake_t *hs)
{
    uint8_t hdr[4];

    return recv(hs->fd, hdr, sizeof(hdr), MSG_PEEK | MSG_DONTWAIT) == (ssize_t)sizeof(hdr);
}

/* Make room: drop the oldest pending setup that has sent nothing for
 * SETUP_IDLE_GRACE_MS, else the oldest that began a frame and did not
 * finish it (a slow sender). A setup that said a valid hello, whose first
 * frame header is in, or that was accepted just now (a real peer's hello
 * follows its connect by a moment) is a peer under way and is not dropped:
 * false when there is no other. */
#define SETUP_IDLE_GRACE_MS 20

static bool handshake_evict(uccl_engine_t *engine, const char *why)
{
    uccl_handshake_t *victim = NULL, *slow = NULL;
    uint64_t now = uccl_time_ms();
    uccl_list_t *pos;

    uccl_list_for_each(pos, &engine->handshakes) {
        uccl_handshake_t *hs = uccl_container_of(pos, uccl_handshake_t, link);

        if (hs->challenged)
            continue;
        if (hs->need != 0 || hs->have != 0) {
            if (slow == NULL)
                slow = hs;
        } else if (now - hs->accepted_ms >= SETUP_IDLE_GRACE_MS &&
                   !handshake_header_waiting(hs)) {
            victim = hs; /* nothing, or a header cut short */
            break;
        }
    }
    if (victim == NULL)
        victim = slow;
    if (victim == NULL)
        return false;
    close(victim->fd);
    uccl_handshake_free(engine, victim);
    uccl_setup_drop_note(engine, why);
    return true;
}

/* A connection waits in the listener's backlog. */
static bool listener_ready(const uccl_engine_t *engine)
{
    struct pollfd pfd = {.fd = engine->listen_fd, .events = POLLIN};

    return poll(&pfd, 1, 0) > 0;
}

/* Accept what the listener has, at most setup_max_pending per call; the
 * pending setups stay within that cap and out of the fd table's last slots. */
void uccl_setup_accept(uccl_engine_t *engine)
{
    for (int n = 0; n < engine->cfg.setup_max_pending; n++) {
        uccl_handshake_t *hs;
        int fd;

        /* at the cap, room is made before the accept: when every pending
         * setup is a peer under way, newcomers wait in the backlog (their
         * turn comes as those finish, within milliseconds) */
        if (engine->nhandshakes >= engine->cfg.setup_max_pending &&
            (!listener_ready(engine) || !handshake_evict(engine, "too many pending setups")))
            return;
        fd = accept4(engine->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EMFILE || errno == ENFILE) {
                /* no fd for a real peer: an idle one gives its fd up */
                if (handshake_evict(engine, "out of file descriptors (EMFILE)"))
                    continue;
                uccl_setup_drop_note(engine, "accept: out of file descriptors (EMFILE), none of "
                                        "them held by an idle pending setup");
            } else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR &&
                       errno != ECONNABORTED) {
                uccl_warn("setup listener: accept: %s", strerror(errno));
            }
            return;
        }
        hs = calloc(1, sizeof(*hs));
        if (hs == NULL) {
            close(fd);
            return;
        }
        hs->fd = fd;
        hs->accepted_ms = uccl_time_ms();
        hs->deadline_ms = hs->accepted_ms + (uint64_t)engine->cfg.setup_timeout_ms;
        uccl_list_push_back(&engine->handshakes, &hs->link);
        engine->nhandshakes++;
    }
}
