/* perf_ofi --phases 1: where a window's time goes, raw libfabric and uccl
 * side by side, per rank (perf_ofi.h). Each window of an op row's timed
 * runs is cut at marks: its posts (the sends, or the receives), the wait
 * for them, and (receiver of sends) what follows: the requests freed, the
 * ack sent. Per phase: wall time, and where the kernel lets a process
 * count its own user-space events (perf_event_open), instructions, cycles
 * and cache misses; raw's waits also count their empty CQ polls. The
 * marks read the clock and, with counters, one read() each: a diagnostic
 * run, not a timed comparison. */
#include <linux/perf_event.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "perf_ofi.h"

#define PH_EVENTS 3

int phase_on;
long phase_empty_polls; /* raw_wait's empty fi_cq_read calls */
long phase_eagain;      /* raw posts that met -FI_EAGAIN */
long raw_cq_reads;

static int leader = -1, nev;
static double acc_t[2][PH_N], last_t;
static double acc_ev[2][PH_N][PH_EVENTS], last_ev[PH_EVENTS];
static double acc_polls[2][PH_N], acc_again[2][PH_N];
static long last_polls, last_again, windows[2];

static int ev_open(uint64_t config, int group)
{
    struct perf_event_attr a;

    memset(&a, 0, sizeof(a));
    a.size = sizeof(a);
    a.type = PERF_TYPE_HARDWARE;
    a.config = config;
    a.exclude_kernel = 1;
    a.exclude_hv = 1;
    a.read_format = PERF_FORMAT_GROUP;
    return (int)syscall(SYS_perf_event_open, &a, 0, -1, group, 0);
}

/* Counters if the kernel allows them (none inside many containers). */
void phase_init(int on)
{
    static const uint64_t cfg[PH_EVENTS] = {PERF_COUNT_HW_INSTRUCTIONS, PERF_COUNT_HW_CPU_CYCLES,
                                            PERF_COUNT_HW_CACHE_MISSES};

    phase_on = on;
    if (!on)
        return;
    leader = ev_open(cfg[0], -1);
    nev = leader >= 0;
    for (int i = 1; i < PH_EVENTS && leader >= 0; i++)
        nev += ev_open(cfg[i], leader) >= 0;
    if (leader >= 0)
        ioctl(leader, PERF_EVENT_IOC_ENABLE, PERF_IOC_FLAG_GROUP);
}

static void read_now(double *t, double *ev)
{
    uint64_t v[1 + PH_EVENTS] = {0};

    if (leader >= 0 && read(leader, v, sizeof(v)) > 0)
        for (int i = 0; i < PH_EVENTS; i++)
            ev[i] = (double)v[1 + i];
    *t = now_s();
}

void phase_begin(int side)
{
    windows[side]++;
    read_now(&last_t, last_ev);
    last_polls = phase_empty_polls;
    last_again = phase_eagain;
}

void phase_mark(int side, int ph)
{
    double t, ev[PH_EVENTS] = {0};

    read_now(&t, ev);
    acc_t[side][ph] += t - last_t;
    for (int i = 0; i < PH_EVENTS; i++)
        acc_ev[side][ph][i] += ev[i] - last_ev[i];
    acc_polls[side][ph] += (double)(phase_empty_polls - last_polls);
    acc_again[side][ph] += (double)(phase_eagain - last_again);
    last_t = t;
    memcpy(last_ev, ev, sizeof(ev));
    last_polls = phase_empty_polls;
    last_again = phase_eagain;
}

/* One line per side and phase: per window us, and per message (window
 * messages) instructions, cycles, cache misses, raw's empty polls. Then
 * the sums are cleared for the next row. */
void phase_report(int rank, const char *op, size_t len, int window)
{
    static const char *side[2] = {"raw", "uccl"}, *ph[PH_N] = {"post", "wait", "tail"};

    for (int s = 0; s < 2; s++)
        for (int p = 0; p < PH_N && windows[s] > 0; p++) {
            double w = (double)windows[s], m = w * window;

            printf("#phase rank %d %-5s %7zu %-4s %-5s us/window %8.2f", rank, op, len, side[s],
                   ph[p], acc_t[s][p] / w * 1e6);
            if (nev == PH_EVENTS)
                printf("  per msg: instr %8.0f cycles %8.0f cmiss %6.1f", acc_ev[s][p][0] / m,
                       acc_ev[s][p][1] / m, acc_ev[s][p][2] / m);
            if (s == 0)
                printf("  empty polls/msg %6.1f eagain/msg %6.1f", acc_polls[s][p] / m,
                       acc_again[s][p] / m);
            printf("\n");
        }
    fflush(stdout);
    memset(acc_t, 0, sizeof(acc_t));
    memset(acc_ev, 0, sizeof(acc_ev));
    memset(acc_polls, 0, sizeof(acc_polls));
    memset(acc_again, 0, sizeof(acc_again));
    windows[0] = windows[1] = 0;
}
