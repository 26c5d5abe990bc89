/* The large-scale emulation (include/perseus/emulator.h; docs/emulator.md).
 *
 * One pipeline is planned once; N data-parallel copies of it, one straggling, are then pure
 * arithmetic on a handful of figures per strategy: its no-slowdown plan (time, energy), the plan
 * its non-stragglers run for a given T' (time, energy), and the all-max reference. This file
 * gathers those figures three ways:
 *
 *   paper   what the artifact computes: the frontier's predicted (time, energy) points, T_min =
 *           the fastest planned time, E_base = all-max measured energies plus blocking until
 *           T_min with measured busy times (even where all-max really takes longer: the Bloom
 *           quirk), non-stragglers on the least-energy point with t <= T'. Baselines are charged
 *           the same way as E_base, at T_min (as the artifact charges EnvPipe);
 *   exact   every plan's exact evaluation, on the clean frontier (prs_frontier_clean); the all-max
 * reference at its real critical path; each strategy's straggler slowed from its own no-slowdown
 * time; lookup  exact, with non-stragglers on the server's lookup rule (prs_frontier_lookup), which
 *           counts the blocking energy until T' and so prefers the slowest plan that fits.
 *
 * Static baselines (all-max, EnvPipe) do not react to a straggler: their non-stragglers finish
 * and block. The uniform baseline does: its non-stragglers take the uniform clock that would be
 * chosen for the target T' (never faster than its own no-slowdown clock).
 *
 * prs_emulate_frontier runs it in steps: check_opts, read_frontier (the paper's reading of the
 * frontier), baselines (exact and charged the paper's way), fill_paper, fill_exact. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "emu_int.h"

struct prs_emulation {
    prs_emu_job job;
    prs_frontier *owned;
    const prs_frontier *f;
    prs_frontier *clean; /* f cleaned: what exact and lookup choose from */
    prs_emu_info info;
    prs_emu_summary sum[PRS_EMU_NVARIANTS][PRS_EMU_NSTRATEGIES];
    unsigned char have[PRS_EMU_NVARIANTS][PRS_EMU_NSTRATEGIES];
    prs_emu_metrics *rows;
};

void prs_emulation_free(prs_emulation *e)
{
    if (!e) return;
    prs_frontier_free(e->owned);
    prs_frontier_free(e->clean);
    free(e->rows);
    free(e);
}

const prs_emu_summary *prs_emulation_get(const prs_emulation *e, prs_emu_variant v,
                                         prs_emu_strategy s)
{
    if (!e || (unsigned)v >= PRS_EMU_NVARIANTS || (unsigned)s >= PRS_EMU_NSTRATEGIES ||
        !e->have[v][s])
        return NULL;
    return &e->sum[v][s];
}

const prs_emu_info *prs_emulation_info(const prs_emulation *e)
{
    return &e->info;
}

const prs_frontier *prs_emulation_frontier(const prs_emulation *e)
{
    return e->f;
}

const prs_emu_job *prs_emulation_job(const prs_emulation *e)
{
    return &e->job;
}

/* What one strategy contributes in one variant: its no-slowdown figures, and how its
 * non-stragglers choose for a given T'. */
typedef struct strategy_in {
    double base_time_s, base_energy_j;
    double time_s, energy_j;
    int freq_mhz;
} strategy_in;

typedef int (*choose_fn)(void *ctx, double t_prime_s, double *time_s, double *energy_j);

static int fill(prs_emulation *e, prs_emu_variant v, prs_emu_strategy st, const strategy_in *in,
                const double *factors, size_t nf, choose_fn choose, void *ctx, prs_error *err)
{
    prs_emu_summary *sm = &e->sum[v][st];
    double tp = (double)e->job.tp;
    sm->base_time_s = in->base_time_s;
    sm->base_energy_j = in->base_energy_j * tp;
    sm->time_s = in->time_s;
    sm->energy_j = in->energy_j * tp;
    sm->freq_mhz = in->freq_mhz;
    sm->intrinsic_saving_pp = prs_emu_intrinsic_saving(in->energy_j, in->base_energy_j);
    prs_emu_metrics *rows =
        e->rows ? e->rows + ((size_t)v * PRS_EMU_NSTRATEGIES + (size_t)st) * nf : NULL;
    sm->rows = rows;
    sm->nrows = nf;
    for (size_t i = 0; i < nf; i++) {
        prs_emu_inputs x = {in->base_time_s, in->base_energy_j, in->time_s,
                            in->energy_j,    in->time_s,        in->energy_j};
        int rc = 0;
        if (choose &&
            (rc = choose(ctx, factors[i] * in->time_s, &x.choice_time_s, &x.choice_energy_j)))
            return prs__emu_error(err, rc, "%s %s: no plan for the non-stragglers at s = %g",
                                  prs_emu_variant_name(v), prs_emu_strategy_name(st), factors[i]);
        if ((rc = prs_emu_metrics_compute(&e->job, factors[i], &x, &rows[i], err))) return rc;
    }
    e->have[v][st] = 1;
    return 0;
}

/* ---- How non-stragglers choose ---- */

typedef struct paper_ctx {
    const prs_emu_point *pts;
    size_t n;
} paper_ctx;

static int choose_paper(void *ctx, double t_prime, double *t, double *en)
{
    paper_ctx *c = ctx;
    size_t k;
    if (prs_emu_paper_rule(c->pts, c->n, t_prime, &k)) return PRS_ERANGE;
    *t = c->pts[k].time_s;
    *en = c->pts[k].energy_j;
    return 0;
}

static int choose_exact(void *ctx, double t_prime, double *t, double *en)
{
    const prs_frontier *f = ctx;
    size_t k;
    if (prs_frontier_find_time(f, t_prime, &k, NULL)) return PRS_ERANGE;
    *t = prs_frontier_point_at(f, k)->eval_time_s;
    *en = prs_frontier_point_at(f, k)->eval_energy_j;
    return 0;
}

static int choose_lookup(void *ctx, double t_prime, double *t, double *en)
{
    const prs_frontier *f = ctx;
    size_t k;
    if (prs_frontier_lookup(f, t_prime, &k)) return PRS_ERANGE;
    *t = prs_frontier_point_at(f, k)->eval_time_s;
    *en = prs_frontier_point_at(f, k)->eval_energy_j;
    return 0;
}

typedef struct uniform_ctx {
    const prs_uniform_point *pts;
    const double *charge_energy_j; /* paper: measured accounting at the point's own time */
    size_t n;
    double min_target_s; /* never faster than the no-slowdown clock's time */
} uniform_ctx;

static int choose_uniform(void *ctx, double t_prime, double *t, double *en)
{
    uniform_ctx *c = ctx;
    size_t k;
    if (prs_uniform_pick(c->pts, c->n, t_prime > c->min_target_s ? t_prime : c->min_target_s, &k))
        return PRS_ERANGE;
    *t = c->pts[k].time_s;
    *en = c->charge_energy_j ? c->charge_energy_j[k] : c->pts[k].energy_j;
    return 0;
}

/* ---- The driver ---- */

/* What one emulation computes on its way, freed when it ends. */
typedef struct work {
    size_t np, nu, k_uni;
    prs_emu_point *pred;          /* the frontier's predicted points */
    int *allmax, *envpipe, *plan; /* clocks, one per computation */
    prs_uniform_point *upts;      /* the uniform-clock sweep */
    double *ucharge;              /* each sweep point's energy charged the paper's way */
    double t_min, e_base, e_env_paper, e_uni_paper;
} work;

static void work_free(work *w)
{
    free(w->pred);
    free(w->allmax);
    free(w->envpipe);
    free(w->plan);
    free(w->upts);
    free(w->ucharge);
}

static int check_opts(const prs_frontier *f, const prs_emulate_opts *o, prs_error *err)
{
    int rc = prs__emu_check_job(o->pipelines, prs_frontier_pipeline(f)->stages, o->tp, err);
    if (rc) return rc;
    for (size_t i = 0; i < o->nstragglers; i++)
        if (!(o->stragglers[i] >= 1) || !isfinite(o->stragglers[i]))
            return prs__emu_error(err, PRS_EINVAL,
                                  "straggler factor %g is below 1 (a straggler is slower: s >= 1)",
                                  o->stragglers[i]);
    if (prs_frontier_size(f) == 0)
        return prs__emu_error(err, PRS_ERANGE,
                              "the frontier is empty (the iteration cannot be shortened): nothing "
                              "to emulate");
    return 0;
}

/* The frontier as the paper reads it: predicted points; T_min and E_intr; T*. */
static int read_frontier(prs_emulation *e, const prs_frontier *f, work *w, prs_error *err)
{
    prs_emu_info *info = &e->info;
    prs_emu_point *pred = w->pred;
    size_t np = w->np;
    for (size_t k = 0; k < np; k++) {
        pred[k].time_s = prs_frontier_point_at(f, k)->time_s;
        pred[k].energy_j = prs_frontier_point_at(f, k)->energy_j;
    }
    double t_min = INFINITY;
    for (size_t k = 0; k < np; k++)
        if (pred[k].time_s < t_min) t_min = pred[k].time_s;
    w->t_min = t_min;
    size_t k_intr = 0, k_star = 0, k_eval = 0;
    if (prs_emu_paper_rule(pred, np, t_min, &k_intr) ||
        prs_emu_paper_rule(pred, np, INFINITY, &k_star) ||
        prs_frontier_lookup(e->clean, 0, &k_eval))
        return prs__emu_error(err, PRS_ERANGE, "the frontier has no usable point");
    info->t_min_s = pred[k_intr].time_s;
    info->e_intr_j = pred[k_intr].energy_j;
    info->t_energy_min_s = pred[k_star].time_s;
    info->e_energy_min_j = pred[k_star].energy_j;
    info->eval_t_min_s = prs_frontier_point_at(e->clean, k_eval)->eval_time_s;
    info->eval_e_intr_j = prs_frontier_point_at(e->clean, k_eval)->eval_energy_j;
    return 0;
}

/* Baselines, evaluated exactly, and charged the paper's way at T_min. */
static int baselines(const prs_profile *profile, const prs_pipeline *pipe, prs_emulation *e,
                     work *w, prs_error *err)
{
    prs_emu_info *info = &e->info;
    int rc, nops = pipe->stages * prs_ops_per_stage(pipe);
    double t_min = w->t_min;
    if ((rc = prs_baseline_allmax(profile, pipe, w->allmax, err)) ||
        (rc = prs_evaluate_plan(profile, pipe, w->allmax, &info->allmax_time_s,
                                &info->allmax_energy_j, err)) ||
        (rc = prs_emu_plan_energy_at(profile, pipe, w->allmax, t_min, &w->e_base, err)) ||
        (rc = prs_baseline_envpipe(profile, pipe, w->envpipe, err)) ||
        (rc = prs_evaluate_plan(profile, pipe, w->envpipe, &info->envpipe_time_s,
                                &info->envpipe_energy_j, err)) ||
        (rc = prs_emu_plan_energy_at(profile, pipe, w->envpipe, t_min, &w->e_env_paper, err)) ||
        (rc = prs_uniform_sweep(profile, pipe, &w->upts, &w->nu, err)))
        return rc;
    if (!(w->ucharge = malloc(sizeof *w->ucharge * w->nu)))
        return prs__emu_error(err, PRS_ENOMEM, "out of memory");
    for (size_t i = 0; i < w->nu; i++) {
        for (int op = 0; op < nops; op++)
            w->plan[op] = w->upts[i].freq_mhz;
        if ((rc = prs_emu_plan_energy_at(profile, pipe, w->plan, w->upts[i].time_s, &w->ucharge[i],
                                         err)))
            return rc;
    }
    if (prs_uniform_pick(w->upts, w->nu, info->allmax_time_s, &w->k_uni)) {
        /* all-max's clocks differ per computation type, and no uniform clock is as fast */
        return prs__emu_error(err, PRS_ERANGE,
                              "no uniform clock is as fast as all-max (%.6g s): the profile's "
                              "highest clocks differ between computations",
                              info->allmax_time_s);
    }
    const prs_uniform_point *u = &w->upts[w->k_uni];
    info->uniform_freq_mhz = u->freq_mhz;
    info->uniform_time_s = u->time_s;
    info->uniform_energy_j = u->energy_j;
    w->e_uni_paper =
        w->ucharge[w->k_uni] + pipe->blocking_power_w * (double)pipe->stages * (t_min - u->time_s);
    return 0;
}

/* The paper variant of every strategy. */
static int fill_paper(prs_emulation *e, const prs_emulate_opts *o, work *w, prs_error *err)
{
    size_t nf = o->nstragglers;
    double t_min = w->t_min, e_base = w->e_base;
    paper_ctx pc = {w->pred, w->np};
    strategy_in in = {t_min, e_base, t_min, e->info.e_intr_j, 0};
    int rc;
    if ((rc = fill(e, PRS_EMU_PAPER, PRS_EMU_PERSEUS, &in, o->stragglers, nf, choose_paper, &pc,
                   err)))
        return rc;
    in.energy_j = e_base;
    if ((rc = fill(e, PRS_EMU_PAPER, PRS_EMU_ALLMAX, &in, o->stragglers, nf, NULL, NULL, err)))
        return rc;
    in.energy_j = w->e_env_paper;
    if ((rc = fill(e, PRS_EMU_PAPER, PRS_EMU_ENVPIPE, &in, o->stragglers, nf, NULL, NULL, err)))
        return rc;
    uniform_ctx uc = {w->upts, w->ucharge, w->nu, w->upts[w->k_uni].time_s};
    in.energy_j = w->e_uni_paper;
    in.freq_mhz = w->upts[w->k_uni].freq_mhz;
    return fill(e, PRS_EMU_PAPER, PRS_EMU_UNIFORM, &in, o->stragglers, nf, choose_uniform, &uc,
                err);
}

/* The exact variant of every strategy, and Perseus by the lookup rule. */
static int fill_exact(prs_emulation *e, const prs_frontier *f, const prs_emulate_opts *o,
                      const work *w, prs_error *err)
{
    const prs_emu_info *info = &e->info;
    size_t nf = o->nstragglers;
    strategy_in ex = {info->allmax_time_s, info->allmax_energy_j, info->eval_t_min_s,
                      info->eval_e_intr_j, 0};
    int rc;
    if ((rc = fill(e, PRS_EMU_EXACT, PRS_EMU_PERSEUS, &ex, o->stragglers, nf, choose_exact,
                   (void *)f, err)) ||
        (rc = fill(e, PRS_EMU_LOOKUP, PRS_EMU_PERSEUS, &ex, o->stragglers, nf, choose_lookup,
                   (void *)f, err)))
        return rc;
    ex.time_s = info->allmax_time_s;
    ex.energy_j = info->allmax_energy_j;
    if ((rc = fill(e, PRS_EMU_EXACT, PRS_EMU_ALLMAX, &ex, o->stragglers, nf, NULL, NULL, err)))
        return rc;
    ex.time_s = info->envpipe_time_s;
    ex.energy_j = info->envpipe_energy_j;
    if ((rc = fill(e, PRS_EMU_EXACT, PRS_EMU_ENVPIPE, &ex, o->stragglers, nf, NULL, NULL, err)))
        return rc;
    uniform_ctx ucx = {w->upts, NULL, w->nu, w->upts[w->k_uni].time_s};
    ex.time_s = info->uniform_time_s;
    ex.energy_j = info->uniform_energy_j;
    ex.freq_mhz = info->uniform_freq_mhz;
    return fill(e, PRS_EMU_EXACT, PRS_EMU_UNIFORM, &ex, o->stragglers, nf, choose_uniform, &ucx,
                err);
}

int prs_emulate_frontier(const prs_profile *profile, const prs_frontier *f,
                         const prs_emulate_opts *o, prs_emulation **out, prs_error *err)
{
    if (!profile || !f || !o || !out) return prs__emu_error(err, PRS_EINVAL, "NULL argument");
    *out = NULL;
    const prs_pipeline *pipe = prs_frontier_pipeline(f);
    int rc = check_opts(f, o, err);
    if (rc) return rc;
    size_t nf = o->nstragglers, nops = (size_t)pipe->stages * (size_t)prs_ops_per_stage(pipe);
    work w;
    memset(&w, 0, sizeof w);
    w.np = prs_frontier_size(f);
    prs_emulation *e = calloc(1, sizeof *e);
    w.pred = calloc(w.np, sizeof *w.pred);
    w.allmax = malloc(sizeof *w.allmax * nops);
    w.envpipe = malloc(sizeof *w.envpipe * nops);
    w.plan = malloc(sizeof *w.plan * nops);
    if (!e || !w.pred || !w.allmax || !w.envpipe || !w.plan ||
        (nf && !(e->rows = calloc((size_t)PRS_EMU_NVARIANTS * PRS_EMU_NSTRATEGIES * nf,
                                  sizeof *e->rows)))) {
        rc = prs__emu_error(err, PRS_ENOMEM, "out of memory");
        goto fail;
    }
    e->f = f;
    e->job.pipelines = o->pipelines;
    e->job.stages = pipe->stages;
    e->job.tp = o->tp;
    e->job.blocking_power_w = pipe->blocking_power_w;
    e->info.frontier_points = w.np;
    if ((rc = prs_frontier_clean(f, &e->clean, err))) goto fail;
    e->info.clean_points = prs_frontier_size(e->clean);
    if ((rc = read_frontier(e, f, &w, err)) || (rc = baselines(profile, pipe, e, &w, err)) ||
        (rc = fill_paper(e, o, &w, err)) || (rc = fill_exact(e, e->clean, o, &w, err)))
        goto fail;
    work_free(&w);
    *out = e;
    return 0;
fail:
    work_free(&w);
    prs_emulation_free(e);
    return rc;
}

int prs_emulate(const prs_profile *profile, const prs_emulate_opts *o, prs_emulation **out,
                prs_error *err)
{
    if (!profile || !o || !out) return prs__emu_error(err, PRS_EINVAL, "NULL argument");
    *out = NULL;
    int rc = prs__emu_check_job(o->pipelines, o->plan.pipe.stages, o->tp, err);
    if (rc) return rc;
    prs_frontier *f = NULL;
    rc = prs_plan(profile, &o->plan, &f, err);
    if (rc) return rc;
    rc = prs_emulate_frontier(profile, f, o, out, err);
    if (rc) {
        prs_frontier_free(f);
        return rc;
    }
    (*out)->owned = f;
    return 0;
}
