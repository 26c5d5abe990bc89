/* The profiling rounds of a job (job_int.h).
 *
 * Profiling protocol. Round r sweeps clock sweep[r] (highest first). Every rank runs all its
 * computations at that clock and posts its iterations tagged with the round; the first
 * warmup_iterations of each rank in a round are stored but not used, the next
 * iterations_per_clock are. When every rank has posted warm-up + k iterations the round ends and
 * the next clock starts. With skip_dominated, a round whose clock turned out slower AND costlier
 * than the clock above it for every (stage, instruction) ends the sweep: on a U-shaped energy
 * curve every lower clock is dominated too. Windows are aggregated by the clock the client says
 * it actually applied, so a clock the GPU refused shows up under the clock it ran at. */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "job_int.h"

/* Whether a round that kept `kept` iterations per rank at precision se_pct asks for k more: the
 * spec's target is not reached and k more stay within max_iterations_per_clock. */
int job_wants_more(const job *j, double se_pct, int kept)
{
    return j->spec.target_se_pct > 0 && !(se_pct <= j->spec.target_se_pct) &&
           kept + j->spec.iterations_per_clock <= j->spec.max_iterations_per_clock;
}

/* Iterations each rank runs in the current profiling round: warm-up, k, and what was added for
 * precision (extend_round). */
int job_round_need(const job *j)
{
    return j->spec.warmup_iterations + j->spec.iterations_per_clock + j->round_extra;
}

void job_count_done_ranks(job *j)
{
    int need = job_round_need(j);
    j->ranks_done = 0;
    for (int r = 0; r < j->world; r++)
        if (j->round_iters[r] >= need) j->ranks_done++;
}

/* ---- profiling ---- */

typedef struct means_ctx {
    const job *j;
    prs_profile *p;
    int bad;
    prs_error err; /* why a row was refused, when bad */
} means_ctx;

static int add_mean(void *ud, int stage, int instr, int clock, double t, double en, long n)
{
    means_ctx *c = ud;
    prs_profile_row row = {stage, instr ? PRS_BACKWARD : PRS_FORWARD, clock, t, en, 0};
    int rc = prs_profile_add(c->p, &row, &c->err);
    if (rc) c->bad = 1;
    return rc;
}

/* Mean time/energy per (stage, instr) at one clock, from the used windows. */
typedef struct clock_means {
    int clock;
    int chunks;
    double *t, *e; /* chunks * 2, NAN when absent */
} clock_means;

static int collect_clock(void *ud, int stage, int instr, int clock, double t, double en, long n)
{
    clock_means *m = ud;
    if (clock == m->clock && stage >= 0 && stage < m->chunks) {
        m->t[stage * 2 + instr] = t;
        m->e[stage * 2 + instr] = en;
    }
    return 0;
}

/* 1 when clock lo is dominated by clock hi for every (chunk, instruction): no faster and no
 * cheaper. */
static int clock_dominated(job *j, store *st, int hi, int lo)
{
    prs_pipeline pipe;
    spec_pipeline(&j->spec, &pipe);
    int chunks = prs_pipeline_chunks(&pipe);
    double *buf = malloc(sizeof(double) * (size_t)chunks * 8);
    if (!buf) return 0;
    for (int i = 0; i < chunks * 8; i++)
        buf[i] = NAN;
    clock_means a = {hi, chunks, buf, buf + (ptrdiff_t)2 * chunks};
    clock_means b = {lo, chunks, buf + (ptrdiff_t)4 * chunks, buf + (ptrdiff_t)6 * chunks};
    int dom = store_profile_means(st, j->id, collect_clock, &a) == 0 &&
              store_profile_means(st, j->id, collect_clock, &b) == 0;
    for (int i = 0; dom && i < chunks * 2; i++)
        if (!(isfinite(a.e[i]) && isfinite(b.e[i]) && b.e[i] >= a.e[i] && b.t[i] >= a.t[i]))
            dom = 0;
    free(buf);
    return dom;
}

/* Blocking-power estimates of the used profiling iterations, ascending. */
typedef struct bp_list {
    double *v;
    size_t n, cap;
    int bad;
} bp_list;

static int add_bp(void *ud, double watts)
{
    bp_list *l = ud;
    if (l->n == l->cap) {
        size_t nc = l->cap ? 2 * l->cap : 64;
        double *nv = realloc(l->v, sizeof *nv * nc);
        if (!nv) {
            l->bad = 1;
            return PRS_ENOMEM;
        }
        l->v = nv;
        l->cap = nc;
    }
    l->v[l->n++] = watts;
    return 0;
}

/* The measured blocking power: the median of the used profiling iterations' estimates (0 when
 * none); the job plans with it unless the spec pins one. */
static int measure_blocking_power(job *j, store *st, api_err *e)
{
    bp_list l = {NULL, 0, 0, 0};
    if (store_blocking_powers(st, j->id, add_bp, &l)) {
        free(l.v);
        return l.bad ? api_fail(e, 500, "internal", "out of memory") : job_store_fail(e, st);
    }
    size_t h = l.n / 2;
    j->bp_measured_w = l.n == 0 ? 0 : l.n % 2 ? l.v[h] : 0.5 * (l.v[h - 1] + l.v[h]);
    free(l.v);
    if (!j->spec.has_blocking_power) j->bp_used_w = j->bp_measured_w;
    return 0;
}

/* The job has its profile: measure the blocking power and plan, or fail when there is no
 * blocking power to plan with. */
int job_enter_planning(job *j, store *st, int *action, api_err *e)
{
    if (measure_blocking_power(j, st, e)) return -1;
    if (!j->spec.has_blocking_power && !(j->bp_used_w > 0)) {
        job_set_failed(j,
                       "no blocking power to plan with: the spec gives no blocking_power_w and no "
                       "rank reported blocking_power_w in a used profiling iteration");
        return job_persist(j, st, e);
    }
    j->phase = JOB_PLANNING;
    j->plan_done = j->plan_total = 0;
    *action = JOB_ACT_PLAN;
    return job_persist(j, st, e);
}

static int finish_profiling(job *j, store *st, int *action, api_err *e)
{
    means_ctx c = {j, prs_profile_new(), 0, {0, ""}};
    if (!c.p) return api_fail(e, 500, "internal", "out of memory");
    if (store_profile_means(st, j->id, add_mean, &c) && !c.bad) {
        prs_profile_free(c.p);
        return job_store_fail(e, st);
    }
    prs_pipeline pipe;
    spec_pipeline(&j->spec, &pipe);
    prs_error err = {0, ""};
    if (c.bad || prs_profile_nrows(c.p) == 0 ||
        prs_profile_check_stages(c.p, prs_pipeline_chunks(&pipe), &err)) {
        job_set_failed(j, "profile incomplete: %.*s", c.bad ? 200 : (int)sizeof err.msg,
                       c.bad                    ? c.err.msg
                       : prs_profile_nrows(c.p) ? err.msg
                                                : "no windows were reported");
        prs_profile_free(c.p);
        return job_persist(j, st, e);
    }
    char *csv;
    size_t len;
    if (job_profile_csv(c.p, &csv, &len)) {
        prs_profile_free(c.p);
        return api_fail(e, 500, "internal", "out of memory");
    }
    int rc = store_put_profile(st, j->id, "measured", csv, len);
    free(csv);
    if (rc) {
        prs_profile_free(c.p);
        return job_store_fail(e, st);
    }
    prs_profile_free(j->profile);
    j->profile = c.p;
    snprintf(j->profile_source, sizeof j->profile_source, "measured");
    return job_enter_planning(j, st, action, e);
}

static int advance_round(job *j, store *st, int *action, api_err *e)
{
    int stop = j->sweep_index + 1 >= j->nsweep;
    if (!stop && j->spec.skip_dominated && j->sweep_index > 0 &&
        clock_dominated(j, st, j->sweep[j->sweep_index - 1], j->sweep[j->sweep_index]))
        stop = 1;
    if (stop) return finish_profiling(j, st, action, e);
    j->sweep_index++;
    j->round = j->sweep_index;
    j->round_extra = 0;
    memset(j->round_iters, 0, sizeof *j->round_iters * (size_t)j->world);
    memset(j->late_iters, 0, sizeof *j->late_iters * (size_t)j->world);
    j->ranks_done = 0;
    return job_persist(j, st, e);
}

/* A profiling iteration: one measurement row, with its windows. */
static int store_iteration(job *j, store *st, int rank, const req_iteration *it, long round,
                           int used, api_err *e)
{
    const job_rank *k = &j->ranks[rank];
    long long mid;
    store_meas_row m = {rank,          "profiling",          round,        it->iteration,
                        it->clock_mhz, it->time_s,           it->energy_j, it->pace_s,
                        it->plan_id,   it->blocking_power_w, used};
    if (store_insert_measurement(st, j->id, &m, &mid)) return job_store_fail(e, st);
    for (size_t w = 0; w < it->nwindows; w++) {
        const req_window *win = &it->windows[w];
        int stage = win->chunk >= 0 ? win->chunk : k->pp;
        if (store_insert_window(st, j->id, mid, stage, win->instr, win->microbatch, win->clock_mhz,
                                win->time_s, win->energy_j, used))
            return job_store_fail(e, st);
    }
    j->measurements++;
    job_pipe *p = &j->pipes[k->dp];
    if (it->iteration > p->newest) p->newest = it->iteration;
    pace_note(&p->pace, it->wall_s);
    return 0;
}

/* A counted iteration of the current round: what its rank's attribution fit said. */
static void note_fit(job_rank *k, const req_iteration *it, long round)
{
    k->fit_rel_se = it->fit_rel_se;
    k->fit_criterion = it->fit_criterion;
    k->fit_round = round + 1;
}

/* A rank's last counted iteration of this round came from a fit short of its criterion (the rank
 * reported it past the round's time bound): more iterations at this clock let the fit settle. */
int job_fit_unsettled(const job *j, int rank)
{
    const job_rank *k = &j->ranks[rank];
    return k->fit_round == j->round + 1 && k->fit_criterion > 0 && k->fit_rel_se > k->fit_criterion;
}

/* Every rank has run the round's iterations: record the precision reached at its clock (the
 * largest relative standard error of a type's mean time or energy) and, while that is above the
 * spec's target and k more iterations stay within max_iterations_per_clock, ask for k more
 * (*more = 1). */
static int extend_round(job *j, store *st, int *more, api_err *e)
{
    double se = 0;
    int k = j->spec.iterations_per_clock, kept = k + j->round_extra;
    if (store_clock_spread(st, j->id, j->sweep[j->sweep_index], &se)) return job_store_fail(e, st);
    j->clock_se_pct[j->sweep_index] = 100.0 * se;
    j->clock_iters[j->sweep_index] = kept;
    /* Stored, so that a restart resumes the round with the iterations it asked for. */
    if (store_put_precision(st, j->id, j->sweep_index, isfinite(se) ? 100.0 * se : -1, kept))
        return job_store_fail(e, st);
    *more = job_wants_more(j, j->clock_se_pct[j->sweep_index], kept);
    for (int r = 0; r < j->world && !*more; r++)
        *more = job_fit_unsettled(j, r) && kept + k <= j->spec.max_iterations_per_clock;
    if (*more) {
        j->round_extra += k;
        job_count_done_ranks(j);
    }
    return 0;
}

/* Results in profiling: count the rank's iterations of the round; the round ends when every
 * rank has warm-up + k. What a rank may make the store hold is bounded: iterations of the
 * current round past what it asks (warm-up + k, with any extension) are acknowledged but not
 * stored, and so are late iterations of earlier rounds past as many during one round. */
int job_results_profiling(job *j, store *st, const req_results *r, int *action, api_err *e)
{
    long round = r->round < 0 ? j->round : r->round;
    if (round > j->round)
        return api_fail(e, 409, "wrong_round", "round %ld has not started (current %ld)", round,
                        j->round);
    int need = job_round_need(j);
    for (size_t i = 0; i < r->niterations; i++) {
        int used = 1;
        if (round == j->round) {
            int idx = j->round_iters[r->rank];
            if (idx >= need) continue; /* the round has all it asks of this rank */
            j->round_iters[r->rank]++;
            used = idx >= j->spec.warmup_iterations;
            note_fit(&j->ranks[r->rank], &r->iterations[i], round);
            if (idx + 1 == need) j->ranks_done++;
        } else if (j->late_iters[r->rank] >= need) {
            continue;
        } else {
            j->late_iters[r->rank]++;
        }
        /* A late iteration of an earlier round: that rank was past warm-up there. */
        if (store_iteration(j, st, r->rank, &r->iterations[i], round, used, e)) return -1;
    }
    if (j->ranks_done < j->world) return 0;
    int more = 0;
    if (extend_round(j, st, &more, e)) return -1;
    return more ? 0 : advance_round(j, st, action, e);
}
