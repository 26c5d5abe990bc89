/* The client's hooks (perseus/client.h), run on the training thread: which schedule an iteration
 * runs, which clock each computation gets, and whether the hooks follow the schedule's order.
 *
 * Schedules. The background thread publishes the newest schedule with a version number; the
 * training thread compares it with an atomic load at each iteration boundary and copies it only
 * when it changed, so every iteration runs one schedule (the profiling windows of an iteration
 * all belong to one round). A running plan comes with the iteration from which it holds
 * (from_iteration): every rank of a pipeline switches at that same iteration, so no iteration has
 * two stages running different plans. A plan that arrives after its iteration has passed is
 * adopted at once and counted in late_switches (also the first plan, replacing planning).
 *
 * Order. With the pipeline's geometry (sent with the schedule) the hooks know which (instruction,
 * microbatch, chunk) the k-th computation of the iteration must be; a hook that differs is an
 * error (PRS_EORDER), counted, and the iteration reports no windows, so a profile never gets a
 * window filed under the wrong computation.
 *
 * Measurement is in measure.c. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "client_int.h"

static int phase_is(const prs__client_schedule *s, const char *p)
{
    return strcmp(s->phase, p) == 0;
}

void prs__client_expect_free(prs_client *c)
{
    free(c->expect);
    c->expect = NULL;
}

/* The expected order of this rank's computations under c->cur (NULL without geometry). */
static void build_expect(prs_client *c)
{
    prs__client_expect_free(c);
    const prs__client_schedule *s = &c->cur;
    if (!s->has_pipe || c->opts.pp >= s->pipe.stages) return;
    int n = prs_ops_per_stage(&s->pipe);
    if (n <= 0 || (s->n && s->n != n)) return;
    c->expect = malloc(sizeof *c->expect * (size_t)n);
    if (!c->expect) return;
    for (int k = 0; k < n; k++) {
        prs__client_expect *e = &c->expect[k];
        if (prs_op_describe_chunk(&s->pipe, c->opts.pp, k, &e->instr, &e->microbatch, &e->chunk)) {
            prs__client_expect_free(c);
            return;
        }
    }
    c->n_expect = n;
}

static int copy_schedule(prs__client_schedule *dst, const prs__client_schedule *src)
{
    int *clocks = src->n ? malloc(sizeof(int) * (size_t)src->n) : NULL;
    if (src->n && !clocks) return PRS_ENOMEM;
    if (clocks) memcpy(clocks, src->clocks, sizeof(int) * (size_t)src->n);
    prs__client_schedule_free(dst);
    *dst = *src;
    dst->clocks = clocks;
    return 0;
}

/* Make s the schedule in effect (s is consumed). */
static void install(prs_client *c, prs__client_schedule *s)
{
    if (strcmp(c->cur.phase, s->phase) != 0 || c->cur.round != s->round) c->round_reported = 0;
    prs__client_schedule_free(&c->cur);
    c->cur = *s;
    memset(s, 0, sizeof *s);
    s->plan_id = -1;
    build_expect(c);
    pthread_mutex_lock(&c->mu);
    memcpy(c->stats.phase, c->cur.phase, sizeof c->stats.phase);
    c->stats.round = c->cur.round;
    c->stats.plan_id = c->cur.plan_id;
    pthread_mutex_unlock(&c->mu);
    /* The measurement path resets the clock in its own order (measure.c, devtime.c). */
    if (phase_is(&c->cur, "done") || phase_is(&c->cur, "failed")) c->reset_clock = 1;
}

/* A plan that holds from a later iteration waits in c->next while the current schedule runs. */
static int must_wait(const prs_client *c, const prs__client_schedule *s)
{
    return phase_is(s, "running") && s->from_iteration > c->iter_no &&
           (phase_is(&c->cur, "running") || phase_is(&c->cur, "planning"));
}

/* At an iteration boundary: copy the newest schedule when it changed (an atomic load
 * otherwise), and switch to a waiting plan whose iteration has come. */
void prs__client_adopt_schedule(prs_client *c)
{
    if (atomic_load_explicit(&c->latest_version, memory_order_acquire) != c->cur_version) {
        prs__client_schedule s;
        memset(&s, 0, sizeof s);
        pthread_mutex_lock(&c->mu);
        long v = atomic_load_explicit(&c->latest_version, memory_order_relaxed);
        int rc = copy_schedule(&s, &c->latest);
        pthread_mutex_unlock(&c->mu);
        if (rc) return; /* out of memory: keep the old schedule, try again next iteration */
        c->cur_version = v;
        if (must_wait(c, &s)) {
            prs__client_schedule_free(&c->next);
            c->next = s;
        } else {
            if (phase_is(&s, "running") && s.from_iteration >= 0 && s.from_iteration < c->iter_no &&
                c->iter_no > 0 && (phase_is(&c->cur, "running") || phase_is(&c->cur, "planning")))
                atomic_fetch_add_explicit(&c->late_switches, 1, memory_order_relaxed);
            prs__client_schedule_free(&c->next);
            install(c, &s);
        }
    }
    if (c->next.phase[0] && c->iter_no >= c->next.from_iteration) install(c, &c->next);
}

/* The clock planned for the computation at position c->op (0: none, keep the default). */
int prs__client_planned_clock(const prs_client *c)
{
    if (c->cur.n <= 0) return 0;
    return c->cur.clocks[c->op < c->cur.n ? c->op : c->cur.n - 1];
}

/* A hook out of order: counted, and the iteration reports no windows. */
static int order_error(prs_client *c)
{
    c->bad_order = 1;
    atomic_fetch_add_explicit(&c->order_errors, 1, memory_order_relaxed);
    return PRS_EORDER;
}

/* Check a begin against the schedule's order and remember what it opened. Returns 0 or
 * PRS_EORDER. *chunk_out gets the global model chunk (-1: unknown). */
int prs__client_check_order(prs_client *c, prs_instr instr, int microbatch, int chunk,
                            int *chunk_out)
{
    c->open_instr = instr;
    c->open_microbatch = microbatch;
    c->open_chunk = chunk;
    *chunk_out = c->opts.measure_only ? chunk : -1;
    if (!c->expect) return 0;
    int global = chunk * c->cur.pipe.stages + c->opts.pp;
    const prs__client_expect *e = c->op < c->n_expect ? &c->expect[c->op] : NULL;
    if (e && chunk >= 0 && e->instr == instr && e->microbatch == microbatch && e->chunk == global) {
        *chunk_out = global;
        return 0;
    }
    return order_error(c);
}

/* An end must close the computation its begin opened. Returns 0 or PRS_EORDER. */
int prs__client_check_end(prs_client *c, prs_instr instr, int microbatch, int chunk)
{
    if (instr == c->open_instr && microbatch == c->open_microbatch && chunk == c->open_chunk)
        return 0;
    return order_error(c);
}

/* Whether an iteration that just ended is reported by its phase (and the process's warm-up). */
int prs__client_phase_reports(const prs_client *c)
{
    return c->iter_no >= c->opts.warmup_iterations &&
           (phase_is(&c->cur, "profiling") || phase_is(&c->cur, "planning") ||
            phase_is(&c->cur, "running"));
}

/* A profiling round needs warm-up + measured iterations from each rank; more would only load
 * the server while the other ranks finish the round. Takes one of the current round's reports:
 * 1 when the iteration of `round` is reported. */
int prs__client_take_quota(prs_client *c, long round)
{
    if (!phase_is(&c->cur, "profiling")) return 1;
    if (round != c->cur.round) return 0; /* the round is over */
    if (c->cur.quota > 0 && c->round_reported >= c->cur.quota) return 0;
    c->round_reported++;
    return 1;
}

/* Both, for an iteration measured at the hooks (reported as it ends). */
int prs__client_should_report(prs_client *c, double time_s, double energy_j)
{
    return prs__client_phase_reports(c) && time_s > 0 && isfinite(energy_j) &&
           prs__client_take_quota(c, c->cur.round);
}

int prs__client_profiling(const prs_client *c)
{
    return phase_is(&c->cur, "profiling");
}

/* Queue an ended iteration for the background thread (takes it->windows). */
void prs__client_enqueue(prs_client *c, prs__client_iteration *it, int report)
{
    pthread_mutex_lock(&c->mu);
    c->stats.iterations++;
    if (it->pace_s > 0) c->stats.pace_s = it->pace_s;
    if (it->blocking_power_w > 0) c->stats.blocking_power_w = it->blocking_power_w;
    if (report && c->opts.measure_only) {
        if (!c->dev) prs__client_local_add(c, it);
    } else if (report) {
        if (c->q_len < c->opts.max_queue) {
            c->queue[(c->q_head + c->q_len) % c->opts.max_queue] = *it;
            c->q_len++;
            it->windows = NULL;
        } else {
            c->stats.dropped++;
        }
    }
    pthread_mutex_unlock(&c->mu);
    free(it->windows);
    it->windows = NULL;
}
