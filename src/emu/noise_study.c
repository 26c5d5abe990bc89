/* The noise study (include/perseus/noise.h, docs/noise.md): plan on noisy copies of a true
 * profile and judge every chosen plan on the truth.
 *
 * prs_noise_study runs in steps: plan_truth (the true profile's frontier: T_min, the reference
 * plans, all-max), then per seed draw a noisy profile and per planner judge (plan, choose the
 * fastest plan and the straggler plan, evaluate both on the truth and on the planned profile),
 * then summarise (medians and maxima over seeds). Seeds are independent: with o->threads > 1,
 * thread w runs seeds w, w + threads, ..., each with its own evaluation context and scratch. */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "emu_int.h"
#include "perseus/emulator.h"
#include "perseus/evaluate.h"
#include "perseus/noise.h"

typedef struct study {
    const prs_profile *truth;
    prs_plan_opts plan;
    prs_pipeline judge; /* plan.pipe at the unit plans are judged in on the truth */
    prs_robust_opts robust;
    prs_eval *ev; /* on the truth */
    int nops;
    int *clocks, *allmax;
    prs_noise_truth t;
    /* The truth's frontier judged on the truth: ref_t[k] (s) and ref_e[k] (J), nref points;
     * owned by the caller's study, read by the workers' copies. */
    double *ref_t, *ref_e;
    size_t nref;
} study;

static double energy_until(const prs_pipeline *pipe, double t, double e, double horizon)
{
    return e + pipe->stages * pipe->blocking_power_w * (horizon - t);
}

/* All-max on profile p, evaluated on p with pipe (its unit). */
static int allmax_energy(const study *s, const prs_profile *p, const prs_pipeline *pipe, double *e,
                         prs_error *err)
{
    double t;
    int rc = prs_baseline_allmax(p, pipe, s->allmax, err);
    if (!rc) rc = prs_evaluate_plan(p, pipe, s->allmax, &t, e, err);
    return rc;
}

/* Every plan of the truth's frontier f judged on the truth, into s->ref_t / s->ref_e. */
static int judge_truth_frontier(study *s, const prs_frontier *f, prs_error *err)
{
    size_t n = prs_frontier_size(f);
    s->ref_t = malloc(sizeof *s->ref_t * (n ? n : 1));
    s->ref_e = malloc(sizeof *s->ref_e * (n ? n : 1));
    if (!s->ref_t || !s->ref_e) return prs_error_set(err, PRS_ENOMEM, "out of memory");
    int rc = 0;
    for (size_t k = 0; k < n && !rc; k++) {
        rc = prs_frontier_plan(f, k, s->clocks, err);
        if (!rc) rc = prs_eval_run(s->ev, s->clocks, NULL, &s->ref_t[k], &s->ref_e[k], err);
    }
    s->nref = rc ? 0 : n;
    return rc;
}

/* The least energy, charged blocking power until h, of the truth's frontier plans finishing
 * within h (h >= the true T_min, whose plan is one of them). */
static double truth_best_until(const study *s, double h)
{
    const prs_pipeline *pipe = &s->plan.pipe;
    double best = INFINITY;
    for (size_t k = 0; k < s->nref; k++)
        if (s->ref_t[k] <= h) best = fmin(best, energy_until(pipe, s->ref_t[k], s->ref_e[k], h));
    return best;
}

/* prs_frontier_lookup, with a message when f (planned on `which`) has no plan. */
static int lookup(const prs_frontier *f, double time_s, const char *which, size_t *k,
                  prs_error *err)
{
    if (prs_frontier_lookup(f, time_s, k) == 0) return 0;
    return prs__emu_error(err, PRS_ERANGE,
                          "the frontier planned on %s is empty: no plan to judge (check the "
                          "profile's stages and clocks, or try a smaller unit time)",
                          which);
}

/* The truth's fastest plan takes some time: a unit time coarser than every computation rounds
 * them all to 0 units, and every figure relative to T_min would be 0/0. */
static int check_t_min(const study *s, prs_error *err)
{
    if (s->t.t_min_s > 0) return 0;
    return prs__emu_error(err, PRS_ERANGE,
                          "unit time %g s is coarser than the computations: every time rounds to 0 "
                          "units, so there is no frontier. Use a unit time well below the shortest "
                          "computation",
                          s->plan.pipe.unit_time_s);
}

static int plan_truth(study *s, double straggler, prs_error *err)
{
    prs_frontier *f = NULL;
    size_t k;
    int rc = prs_plan(s->truth, &s->plan, &f, err);
    if (!rc) rc = lookup(f, 0, "the true profile", &k, err);
    if (!rc) rc = prs_frontier_plan(f, k, s->clocks, err);
    if (!rc) rc = prs_eval_run(s->ev, s->clocks, NULL, &s->t.t_min_s, &s->t.energy_j, err);
    if (!rc) rc = check_t_min(s, err);
    if (!rc) {
        s->t.straggler_time_s = straggler * s->t.t_min_s;
        rc = lookup(f, s->t.straggler_time_s, "the true profile", &k, err);
    }
    if (!rc) rc = prs_frontier_plan(f, k, s->clocks, err);
    if (!rc)
        rc = prs_eval_run(s->ev, s->clocks, NULL, &s->t.straggler_plan_s, &s->t.straggler_energy_j,
                          err);
    if (!rc) rc = allmax_energy(s, s->truth, &s->judge, &s->t.allmax_energy_j, err);
    if (!rc) s->t.saving_pct = prs_emu_intrinsic_saving(s->t.energy_j, s->t.allmax_energy_j);
    if (!rc) rc = judge_truth_frontier(s, f, err);
    prs_frontier_free(f);
    return rc;
}

/* The fastest plan of f (planned on p) judged on the truth and promised on p. */
static int judge_fastest(study *s, const prs_frontier *f, const prs_profile *p,
                         prs_noise_outcome *o, prs_error *err)
{
    const prs_pipeline *pipe = &s->plan.pipe;
    size_t k;
    double t, e, pt, pe, pa;
    int rc = lookup(f, 0, "a noisy profile", &k, err);
    if (!rc) rc = prs_frontier_plan(f, k, s->clocks, err);
    if (!rc) rc = prs_eval_run(s->ev, s->clocks, NULL, &t, &e, err);
    if (!rc) rc = prs_evaluate_plan(p, pipe, s->clocks, &pt, &pe, err);
    if (!rc) rc = allmax_energy(s, p, pipe, &pa, err);
    if (rc) return rc;
    double horizon = fmax(t, s->t.t_min_s), spent = energy_until(pipe, t, e, horizon);
    o->overshoot_pct = 100.0 * (t / s->t.t_min_s - 1.0);
    o->regret_pct =
        100.0 * (spent / energy_until(pipe, s->t.t_min_s, s->t.energy_j, horizon) - 1.0);
    o->waste_pct = 100.0 * (spent / truth_best_until(s, horizon) - 1.0);
    o->promised_saving_pct = prs_emu_intrinsic_saving(pe, pa);
    o->obtained_saving_pct = prs_emu_intrinsic_saving(e, s->t.allmax_energy_j);
    return 0;
}

/* The plan f's lookup picks for the straggler at T', judged on the truth. */
static int judge_straggler(study *s, const prs_frontier *f, prs_noise_outcome *o, prs_error *err)
{
    const prs_pipeline *pipe = &s->plan.pipe;
    double tp = s->t.straggler_time_s, t, e;
    size_t k;
    int rc = lookup(f, tp, "a noisy profile", &k, err);
    if (!rc) rc = prs_frontier_plan(f, k, s->clocks, err);
    if (!rc) rc = prs_eval_run(s->ev, s->clocks, NULL, &t, &e, err);
    if (rc) return rc;
    double horizon = fmax(t, tp);
    o->straggler_overshoot_pct = 100.0 * fmax(0.0, t - tp) / tp;
    o->straggler_regret_pct =
        100.0 * (energy_until(pipe, t, e, horizon) /
                     energy_until(pipe, s->t.straggler_plan_s, s->t.straggler_energy_j, horizon) -
                 1.0);
    return 0;
}

static int judge(study *s, const prs_profile *noisy, int planner, prs_noise_outcome *o,
                 prs_error *err)
{
    prs_profile *planned = NULL;
    prs_frontier *f = NULL;
    int rc = 0;
    if (planner == PRS_NOISE_ROBUST)
        rc = prs_plan_robust_with(noisy, &s->plan, &s->robust, &f, &planned, err);
    else
        rc = prs_plan(noisy, &s->plan, &f, err);
    const prs_profile *p = planned ? planned : noisy;
    if (!rc) rc = judge_fastest(s, f, p, o, err);
    if (!rc) rc = judge_straggler(s, f, o, err);
    prs_frontier_free(f);
    prs_profile_free(planned);
    return rc;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median and maximum of n values at stride (in doubles) from first; work holds n doubles. */
static void med_max(const double *first, size_t stride, int n, double *work, double *med,
                    double *max)
{
    for (int i = 0; i < n; i++)
        work[i] = first[(size_t)i * stride];
    qsort(work, (size_t)n, sizeof *work, cmp_double);
    *med = n % 2 ? work[n / 2] : 0.5 * (work[n / 2 - 1] + work[n / 2]);
    if (max) *max = work[n - 1];
}

static void summarise(const prs_noise_outcome *o, int n, double *work, prs_noise_summary *sm)
{
    const size_t st = sizeof *o / sizeof(double);
    med_max(&o->overshoot_pct, st, n, work, &sm->overshoot_median_pct, &sm->overshoot_max_pct);
    med_max(&o->regret_pct, st, n, work, &sm->regret_median_pct, &sm->regret_max_pct);
    med_max(&o->promised_saving_pct, st, n, work, &sm->promised_saving_median_pct, NULL);
    med_max(&o->obtained_saving_pct, st, n, work, &sm->obtained_saving_median_pct, NULL);
    med_max(&o->straggler_overshoot_pct, st, n, work, &sm->straggler_overshoot_median_pct,
            &sm->straggler_overshoot_max_pct);
    med_max(&o->straggler_regret_pct, st, n, work, &sm->straggler_regret_median_pct,
            &sm->straggler_regret_max_pct);
    med_max(&o->waste_pct, st, n, work, &sm->waste_median_pct, &sm->waste_max_pct);
}

/* s's evaluation context on the truth and its plan buffers (the caller's study and every
 * worker's own); non-zero with err set on failure, study_close frees what was made. */
static int study_open(study *s, prs_error *err)
{
    int rc = prs_eval_open(s->truth, &s->judge, &s->ev, err);
    if (rc) return rc;
    s->nops = prs_eval_nops(s->ev);
    s->clocks = malloc(sizeof *s->clocks * (size_t)s->nops);
    s->allmax = malloc(sizeof *s->allmax * (size_t)s->nops);
    return s->clocks && s->allmax ? 0 : prs_error_set(err, PRS_ENOMEM, "out of memory");
}

static void study_close(study *s)
{
    free(s->clocks);
    free(s->allmax);
    prs_eval_close(s->ev);
}

static int check_opts(const prs_noise_study_opts *o, prs_error *err)
{
    if (o->seeds < 1 || o->seeds > 1000000)
        return prs_error_set(err, PRS_EINVAL, "noise study: seeds must be in 1..1000000");
    if (o->threads < 0 || o->threads > PRS_NOISE_MAX_THREADS)
        return prs_error_set(err, PRS_EINVAL, "noise study: threads must be in 0..%d",
                             PRS_NOISE_MAX_THREADS);
    if (!isfinite(o->straggler) || o->straggler < 1 || o->straggler > 100)
        return prs_error_set(err, PRS_EINVAL, "noise study: straggler factor must be in [1, 100]");
    if (!(o->truth_unit_s >= 0) || o->truth_unit_s > o->plan.pipe.unit_time_s)
        return prs_error_set(err, PRS_EINVAL,
                             "noise study: the truth's unit must be 0 (the planning unit) or in "
                             "(0, %g] s, got %g",
                             o->plan.pipe.unit_time_s, o->truth_unit_s);
    if (o->oracle) return prs_noise_oracle_check(&o->model, o->oracle_margin, err);
    return prs_noise_model_check(&o->model, err);
}

/* The seeds done so far, shared by the threads, and whether the caller canceled. */
typedef struct tally {
    pthread_mutex_t mu;
    long done;
    int canceled;
} tally;

/* Count one seed done and report it; non-zero when the study is canceled (now or before). */
static int seed_done(tally *t, const prs_noise_study_opts *o)
{
    pthread_mutex_lock(&t->mu);
    t->done++;
    if (!t->canceled && o->progress && o->progress(o->ud, t->done, o->seeds)) t->canceled = 1;
    int canceled = t->canceled;
    pthread_mutex_unlock(&t->mu);
    return canceled;
}

/* Seeds first, first + step, ... on s, into out; stops at the first that fails (its index in
 * *failed, else o->seeds) or when the study is canceled. */
static int run_seeds(study *s, const prs_noise_study_opts *o, int first, int step, tally *t,
                     prs_noise_outcome *out, int *failed, prs_error *err)
{
    int rc = 0, k;
    for (k = first; k < o->seeds && !rc; k += step) {
        prs_profile *noisy = NULL;
        uint64_t seed = o->seed_base + (uint64_t)k;
        rc = o->oracle
                 ? prs_noise_oracle_apply(s->truth, &o->model, o->oracle_margin, seed, &noisy, err)
                 : prs_noise_apply(s->truth, &o->model, seed, &noisy, err);
        for (int pl = 0; pl < PRS_NOISE_NPLANNERS && !rc; pl++)
            rc = judge(s, noisy, pl, &out[(size_t)pl * (size_t)o->seeds + (size_t)k], err);
        prs_profile_free(noisy);
        if (!rc && seed_done(t, o)) rc = prs_error_set(err, PRS_ECANCELED, "noise study canceled");
    }
    *failed = rc ? k - step : o->seeds;
    return rc;
}

/* One thread's share of the seeds, with a study of its own sharing the truth's figures. */
typedef struct worker {
    study s;
    const prs_noise_study_opts *o;
    prs_noise_outcome *out;
    tally *t;
    int first, failed, rc;
    prs_error err;
    pthread_t tid;
} worker;

static void *worker_main(void *arg)
{
    worker *w = arg;
    w->rc = run_seeds(&w->s, w->o, w->first, w->o->threads, w->t, w->out, &w->failed, &w->err);
    return NULL;
}

/* The seeds on o->threads threads; the error reported is the failing seed's with the lowest
 * index, as when one thread runs them all in order. */
static int run_threads(study *s, const prs_noise_study_opts *o, tally *t, prs_noise_outcome *out,
                       prs_error *err)
{
    int n = o->threads, started = 0, start_rc = 0;
    worker *w = calloc((size_t)n, sizeof *w);
    if (!w) return prs_error_set(err, PRS_ENOMEM, "out of memory");
    while (started < n && !start_rc) {
        worker *x = &w[started];
        /* its own evaluation context and buffers; the truth's figures shared */
        *x = (worker){.s = *s, .o = o, .out = out, .t = t, .first = started};
        x->s.ev = NULL, x->s.clocks = x->s.allmax = NULL;
        if ((start_rc = study_open(&x->s, err)) == 0 &&
            pthread_create(&x->tid, NULL, worker_main, x) != 0)
            start_rc = prs_error_set(err, PRS_ENOMEM, "noise study: cannot start a thread");
        if (start_rc)
            study_close(&x->s);
        else
            started++;
    }
    int first_failed = -1; /* the worker whose failing seed comes first */
    for (int i = 0; i < started; i++) {
        pthread_join(w[i].tid, NULL);
        if (w[i].rc && (first_failed < 0 || w[i].failed < w[first_failed].failed)) first_failed = i;
    }
    int rc = start_rc;
    if (!rc && first_failed >= 0) {
        rc = w[first_failed].rc;
        if (err) *err = w[first_failed].err;
    }
    for (int i = 0; i < started; i++)
        study_close(&w[i].s);
    free(w);
    return rc;
}

int prs_noise_study(const prs_profile *truth, const prs_noise_study_opts *o,
                    prs_noise_truth *truth_out, prs_noise_outcome *outcomes,
                    prs_noise_summary summary[PRS_NOISE_NPLANNERS], prs_error *err)
{
    if (!truth || !o) return prs_error_set(err, PRS_EINVAL, "noise study: NULL argument");
    int rc = check_opts(o, err);
    if (rc) return rc;
    study s;
    memset(&s, 0, sizeof s);
    s.truth = truth;
    s.plan = o->plan;
    s.judge = o->plan.pipe;
    if (o->truth_unit_s > 0) s.judge.unit_time_s = o->truth_unit_s;
    s.robust = o->robust;
    if (o->threads > 1) s.plan.threads = 1; /* the seeds run in parallel already */
    s.plan.progress = NULL;
    s.plan.warn = NULL;
    s.plan.ud = NULL;
    size_t nout = (size_t)PRS_NOISE_NPLANNERS * (size_t)o->seeds;
    prs_noise_outcome *out = calloc(nout, sizeof *out); /* zeroed: threads fill it */
    double *work = malloc(sizeof *work * (size_t)o->seeds);
    rc = study_open(&s, err);
    if (!rc && (!out || !work)) rc = prs_error_set(err, PRS_ENOMEM, "out of memory");
    if (!rc) rc = plan_truth(&s, o->straggler, err);
    int failed;
    tally t = {.done = 0, .canceled = 0};
    if (!rc && pthread_mutex_init(&t.mu, NULL) != 0)
        rc = prs_error_set(err, PRS_ENOMEM, "noise study: cannot create a mutex");
    else if (!rc) {
        rc = o->threads > 1 ? run_threads(&s, o, &t, out, err)
                            : run_seeds(&s, o, 0, 1, &t, out, &failed, err);
        pthread_mutex_destroy(&t.mu);
    }
    if (!rc && out && work) {
        if (truth_out) *truth_out = s.t;
        if (outcomes) memcpy(outcomes, out, sizeof *out * nout);
        for (int pl = 0; summary && pl < PRS_NOISE_NPLANNERS; pl++)
            summarise(out + (size_t)pl * (size_t)o->seeds, o->seeds, work, &summary[pl]);
    }
    free(work);
    free(out);
    study_close(&s);
    free(s.ref_t);
    free(s.ref_e);
    return rc;
}
