/* Building a schedule: its ops, in phases (coll/sched.c runs them), and
 * freeing it with what a kept (persistent or cached) schedule holds; the
 * comm's running list, a request's status without progress, and the
 * stream form's gate and hold (sched.c uses them). */
#include <stdlib.h>

#include "coll.h"

uccl_status_t uccl_coll_sched_op(coll_sched_t *s, coll_op_t op)
{
    if (s->nops == s->capops) {
        int cap = s->capops ? 2 * s->capops : 16;
        coll_op_t *grown = realloc(s->ops, (size_t)cap * sizeof(*grown));
        if (grown == NULL)
            return UCCL_ERR_NO_MEMORY;
        s->ops = grown;
        s->capops = cap;
    }
    /* One tag per collective: between two ranks, messages in one direction
     * are matched in posting order, and every schedule posts them in the
     * same order on both sides. */
    op.step = 0;
    op.state = 0;
    op.req = op.req2 = op.preq = NULL;
    op.scratch = -1;
    op.helper_slot = -1;
    s->ops[s->nops++] = op;
    return UCCL_OK;
}

uccl_status_t uccl_coll_sched_phase(coll_sched_t *s)
{
    int start = s->nphases ? s->phase_end[s->nphases - 1] : 0;

    if (s->nops == start)
        return UCCL_OK; /* nothing in it */
    if (s->nphases == s->capphases) {
        int cap = s->capphases ? 2 * s->capphases : 8;
        int *grown = realloc(s->phase_end, (size_t)cap * sizeof(*grown));
        if (grown == NULL)
            return UCCL_ERR_NO_MEMORY;
        s->phase_end = grown;
        s->capphases = cap;
    }
    s->phase_end[s->nphases++] = s->nops;
    return UCCL_OK;
}

void uccl_coll_sched_free(coll_sched_t *s)
{
    if (s == NULL)
        return;
    if (s->keep && s->pinned) {
        for (int b = 0; b < COLL_BUF_COUNT; b++)
            uccl_coll_buf_unpin(s->cs, s->slot[b]);
        uccl_coll_scratch_put(s->cs, s->tmp_scratch);
    }
    for (int i = 0; i < s->nops; i++)
        if (s->ops[i].preq != NULL)
            uccl_req_free(s->ops[i].preq);
    uccl_coll_mapped_run_free(s->mapped);
    free(s->ops);
    free(s->phase_end);
    free(s);
}

/* The comm's list of running schedules (sched.c). */
void uccl_coll_sched_link(coll_sched_t *s)
{
    s->next_inflight = s->cs->inflight;
    s->cs->inflight = s;
}

void uccl_coll_sched_unlink(coll_sched_t *s)
{
    for (coll_sched_t **p = &s->cs->inflight; *p != NULL; p = &(*p)->next_inflight) {
        if (*p == s) {
            *p = s->next_inflight;
            return;
        }
    }
}

/* Status of a request without progressing: INPROGRESS, or its final status
 * (then bytes is set). uccl_req_bytes answers INPROGRESS for a request not
 * done, without running progress; uccl_test of a done one does not either. */
uccl_status_t uccl_coll_req_status(uccl_req_t *req, size_t *bytes)
{
    int done = 0;
    uccl_status_t st = uccl_req_bytes(req, bytes);

    if (st != UCCL_OK)
        return st;
    st = uccl_test(req, &done);
    return done ? st : UCCL_INPROGRESS;
}

uccl_status_t uccl_coll_sched_stream(coll_sched_t *s, void *stream)
{
    /* the event first: the hold's wait comes after it on the stream */
    uccl_status_t st = uccl_stream_event(s->cs->engine, stream, &s->gate);

    if (st == UCCL_OK && (st = uccl_stream_hold(s->cs->engine, stream, &s->hold)) != UCCL_OK) {
        uccl_req_free(s->gate);
        s->gate = NULL;
    }
    if (st != UCCL_OK)
        coll_error("stream-ordered collective on stream %p: %s", stream, uccl_strerror(st));
    return st;
}
