/* The fastest plan under a power cap, and the uniform-knob baselines at the same cap
 * (include/perseus/powercap.h; docs/power.md, 'Power caps').
 *
 * Opening evaluates the power of every frontier plan, every uniform clock and all-max once;
 * choosing for a cap is then a scan of those figures, except for the power limit, whose plan
 * depends on the cap and is built and evaluated for each. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "emu_int.h"
#include "perseus/evaluate.h"
#include "perseus/power.h"
#include "perseus/powercap.h"

struct prs_powercap {
    const prs_frontier *f;
    prs_eval *ev;
    prs_pipeline pipe;
    int tp, nops;
    double window_s;
    size_t npts, nuni;
    prs_plan_power *fp; /* per frontier point */
    int *ufreq;         /* uniform clocks, ascending */
    prs_plan_power *up; /* per uniform clock */
    prs_plan_power *rp; /* per uniform clock: that clock with the slack reclaimed */
    int *rplans;        /* their plans, nuni * nops */
    prs_plan_power allmax;
    int *plan;    /* scratch */
    long *window; /* scratch */
};

const char *prs_cap_on_name(prs_cap_on on)
{
    return on == PRS_CAP_PEAK ? "peak" : "avg";
}

int prs_cap_on_parse(const char *name, prs_cap_on *out)
{
    if (name && strcmp(name, "avg") == 0)
        *out = PRS_CAP_AVG;
    else if (name && strcmp(name, "peak") == 0)
        *out = PRS_CAP_PEAK;
    else
        return PRS_EINVAL;
    return 0;
}

const char *prs_cap_strategy_name(prs_cap_strategy s)
{
    static const char *const names[] = {"perseus", "uniform", "power_limit"};
    return (unsigned)s < PRS_CAP_NSTRATEGIES ? names[s] : "?";
}

void prs_powercap_free(prs_powercap *pc)
{
    if (!pc) return;
    prs_eval_close(pc->ev);
    free(pc->fp);
    free(pc->ufreq);
    free(pc->up);
    free(pc->rp);
    free(pc->rplans);
    free(pc->plan);
    free(pc->window);
    free(pc);
}

/* Each computation of plan, in turn, lowered to the clock of least effective energy (energy -
 * P_b * quantized time) below its own that keeps it within its window (duration plus total
 * float): the iteration keeps its length, at less energy, and the computations off the critical
 * path draw less. In place. */
static int reclaim(prs_powercap *pc, int *plan, prs_error *err)
{
    double pb_tau = pc->pipe.blocking_power_w * pc->pipe.unit_time_s;
    for (int op = 0; op < pc->nops; op++) {
        int rc = prs_eval_windows(pc->ev, plan, pc->window, err);
        if (rc) return rc;
        int f = plan[op];
        prs_eval_clock cur = prs_eval_clock_at(pc->ev, op, prs_eval_find(pc->ev, op, f));
        double best = cur.energy_j - pb_tau * (double)cur.units;
        for (int i = 0; i < prs_eval_nclocks(pc->ev, op); i++) {
            prs_eval_clock c = prs_eval_clock_at(pc->ev, op, i);
            double cost = c.energy_j - pb_tau * (double)c.units;
            if (c.freq_mhz < f && c.units <= pc->window[op] && cost < best) {
                plan[op] = c.freq_mhz;
                best = cost;
            }
        }
    }
    return 0;
}

/* The power of every frontier plan, every uniform clock (as it is and with the slack
 * reclaimed) and all-max. */
static int evaluate_all(prs_powercap *pc, prs_error *err)
{
    int rc = 0;
    for (size_t u = 0; u < pc->nuni && !rc; u++) {
        int *plan = pc->rplans + u * (size_t)pc->nops;
        for (int op = 0; op < pc->nops; op++)
            plan[op] = pc->ufreq[u];
        if (!(rc = reclaim(pc, plan, err)))
            rc = prs_eval_power(pc->ev, plan, pc->window_s, &pc->rp[u], NULL, NULL, err);
    }
    for (size_t k = 0; k < pc->npts && !rc; k++)
        if (!(rc = prs_frontier_plan(pc->f, k, pc->plan, err)))
            rc = prs_eval_power(pc->ev, pc->plan, pc->window_s, &pc->fp[k], NULL, NULL, err);
    for (size_t u = 0; u < pc->nuni && !rc; u++) {
        for (int op = 0; op < pc->nops; op++)
            pc->plan[op] = pc->ufreq[u];
        rc = prs_eval_power(pc->ev, pc->plan, pc->window_s, &pc->up[u], NULL, NULL, err);
    }
    for (int op = 0; op < pc->nops && !rc; op++)
        pc->plan[op] = prs_eval_clock_at(pc->ev, op, prs_eval_nclocks(pc->ev, op) - 1).freq_mhz;
    if (!rc) rc = prs_eval_power(pc->ev, pc->plan, pc->window_s, &pc->allmax, NULL, NULL, err);
    return rc;
}

int prs_powercap_open(const prs_profile *profile, const prs_frontier *f, int tp, double window_s,
                      prs_powercap **out, prs_error *err)
{
    *out = NULL;
    if (!profile || !f) return prs__emu_error(err, PRS_EINVAL, "power cap: NULL argument");
    if (tp < 1) return prs__emu_error(err, PRS_EINVAL, "power cap: tp must be >= 1, got %d", tp);
    if (!(window_s > 0) || !isfinite(window_s))
        return prs__emu_error(err, PRS_EINVAL,
                              "power cap: the window must be a finite number of seconds > 0, "
                              "got %g",
                              window_s);
    prs_powercap *pc = calloc(1, sizeof *pc);
    if (!pc) return prs__emu_error(err, PRS_ENOMEM, "out of memory");
    pc->f = f;
    pc->pipe = *prs_frontier_pipeline(f);
    pc->tp = tp;
    pc->window_s = window_s;
    int rc = prs_eval_open(profile, &pc->pipe, &pc->ev, err);
    if (rc) {
        prs_powercap_free(pc);
        return rc;
    }
    pc->nops = prs_eval_nops(pc->ev);
    pc->npts = prs_frontier_size(f);
    pc->nuni = (size_t)prs_eval_common_clocks(pc->ev, NULL, 0);
    pc->fp = malloc(sizeof *pc->fp * (pc->npts ? pc->npts : 1));
    pc->ufreq = malloc(sizeof *pc->ufreq * (pc->nuni ? pc->nuni : 1));
    pc->up = malloc(sizeof *pc->up * (pc->nuni ? pc->nuni : 1));
    pc->rp = malloc(sizeof *pc->rp * (pc->nuni ? pc->nuni : 1));
    pc->rplans = malloc(sizeof *pc->rplans * (size_t)pc->nops * (pc->nuni ? pc->nuni : 1));
    pc->plan = malloc(sizeof *pc->plan * (size_t)pc->nops);
    pc->window = malloc(sizeof *pc->window * (size_t)pc->nops);
    if (!pc->fp || !pc->ufreq || !pc->up || !pc->rp || !pc->rplans || !pc->plan || !pc->window)
        rc = prs__emu_error(err, PRS_ENOMEM, "out of memory");
    if (!rc) {
        prs_eval_common_clocks(pc->ev, pc->ufreq, (int)pc->nuni);
        rc = evaluate_all(pc, err);
    }
    if (rc) {
        prs_powercap_free(pc);
        return rc;
    }
    *out = pc;
    return 0;
}

/* The pipeline's power of a plan, on what the cap holds. */
static double power_on(const prs_powercap *pc, const prs_plan_power *p, prs_cap_on on)
{
    return pc->tp * (on == PRS_CAP_PEAK ? p->peak_power_w : p->avg_power_w);
}

void prs_powercap_range(const prs_powercap *pc, prs_cap_on on, double *allmax_w, double *lowest_w)
{
    *allmax_w = power_on(pc, &pc->allmax, on);
    double lo = INFINITY;
    for (size_t k = 0; k < pc->npts; k++)
        lo = fmin(lo, power_on(pc, &pc->fp[k], on));
    for (size_t u = 0; u < pc->nuni; u++)
        lo = fmin(lo, power_on(pc, &pc->rp[u], on));
    *lowest_w = lo;
}

static int within(double power_w, double cap_w)
{
    return power_w <= cap_w * (1 + 1e-12);
}

static void fill(const prs_powercap *pc, const prs_plan_power *p, int feasible, prs_cap_choice *c)
{
    c->feasible = feasible;
    c->time_s = p->time_s;
    c->throughput_per_s = 1 / p->time_s;
    c->energy_j = pc->tp * p->energy_j;
    c->avg_power_w = pc->tp * p->avg_power_w;
    c->peak_power_w = pc->tp * p->peak_power_w;
    c->index = -1;
    c->freq_mhz = 0;
    c->gpu_limit_w = 0;
}

/* Among n plans' powers, the fastest within the cap (ties: least energy); when none is, the
 * least power. *feasible says which. */
static size_t fastest_within(const prs_powercap *pc, const prs_plan_power *p, size_t n,
                             double cap_w, prs_cap_on on, int *feasible)
{
    size_t best = (size_t)-1, lowest = 0;
    for (size_t i = 0; i < n; i++) {
        if (power_on(pc, &p[i], on) < power_on(pc, &p[lowest], on)) lowest = i;
        if (!within(power_on(pc, &p[i], on), cap_w)) continue;
        if (best == (size_t)-1 || p[i].time_s < p[best].time_s ||
            (p[i].time_s == p[best].time_s && p[i].energy_j < p[best].energy_j))
            best = i;
    }
    *feasible = best != (size_t)-1;
    return *feasible ? best : lowest;
}

/* The power-limit plan for a per-GPU limit into pc->plan. */
static void limit_plan(prs_powercap *pc, double limit_w)
{
    double tau = pc->pipe.unit_time_s;
    for (int op = 0; op < pc->nops; op++) {
        int n = prs_eval_nclocks(pc->ev, op), pick = 0;
        for (int i = 0; i < n; i++) {
            prs_eval_clock c = prs_eval_clock_at(pc->ev, op, i);
            double d = c.units > 0 ? (double)c.units * tau : c.time_s;
            if (within(c.energy_j / d, limit_w)) pick = i;
        }
        pc->plan[op] = prs_eval_clock_at(pc->ev, op, pick).freq_mhz;
    }
}

/* 1 when plan a (feasible fa) is a better choice than b (fb): feasible first, then faster,
 * then less energy; among infeasible plans, less power. */
static int better(const prs_powercap *pc, prs_cap_on on, const prs_plan_power *a, int fa,
                  const prs_plan_power *b, int fb)
{
    if (fa != fb) return fa;
    if (!fa) return power_on(pc, a, on) < power_on(pc, b, on);
    return a->time_s < b->time_s || (a->time_s == b->time_s && a->energy_j < b->energy_j);
}

/* Perseus: the best of the frontier's plans, the uniform clocks with their slack reclaimed and
 * the per-GPU limit's plan with its slack reclaimed (the last two: plans slower than the
 * frontier's least energy, for caps under its power). */
static int choose_perseus(prs_powercap *pc, double cap_w, prs_cap_on on, prs_cap_choice *c,
                          prs_error *err)
{
    int fk = 0, fr = 0;
    size_t k = pc->npts ? fastest_within(pc, pc->fp, pc->npts, cap_w, on, &fk) : 0;
    size_t r = pc->nuni ? fastest_within(pc, pc->rp, pc->nuni, cap_w, on, &fr) : 0;
    const prs_plan_power *best = NULL;
    int fb = 0;
    if (pc->npts) {
        best = &pc->fp[k];
        fb = fk;
        fill(pc, best, fb, c);
        c->index = (long)k;
    }
    if (pc->nuni && (!best || better(pc, on, &pc->rp[r], fr, best, fb))) {
        best = &pc->rp[r];
        fb = fr;
        fill(pc, best, fb, c);
        c->freq_mhz = pc->ufreq[r];
    }
    double limit = cap_w / ((double)pc->pipe.stages * pc->tp), t, e;
    prs_plan_power lp;
    limit_plan(pc, limit);
    int rc = prs_eval_run(pc->ev, pc->plan, NULL, &t, &e, err);
    if (rc || (best && fb && best->time_s <= t)) return rc; /* reclaiming keeps the time t */
    rc = reclaim(pc, pc->plan, err);
    if (!rc) rc = prs_eval_power(pc->ev, pc->plan, pc->window_s, &lp, NULL, NULL, err);
    if (rc) return rc;
    int fl = within(power_on(pc, &lp, on), cap_w);
    if (!best || better(pc, on, &lp, fl, best, fb)) {
        fill(pc, &lp, fl, c);
        c->gpu_limit_w = limit;
    }
    return 0;
}

int prs_powercap_choose(prs_powercap *pc, double cap_w, prs_cap_on on, prs_cap_result *out,
                        prs_error *err)
{
    if (!(cap_w > 0) || !isfinite(cap_w))
        return prs__emu_error(err, PRS_EINVAL,
                              "power cap: expected a finite number of watts > 0, got %g", cap_w);
    memset(out, 0, sizeof *out);
    out->cap_w = cap_w;
    out->on = on;
    out->window_s = pc->window_s;
    int ok = 0, rc = choose_perseus(pc, cap_w, on, &out->s[PRS_CAP_PERSEUS], err);
    if (rc) return rc;
    if (pc->nuni) {
        size_t u = fastest_within(pc, pc->up, pc->nuni, cap_w, on, &ok);
        fill(pc, &pc->up[u], ok, &out->s[PRS_CAP_UNIFORM]);
        out->s[PRS_CAP_UNIFORM].freq_mhz = pc->ufreq[u];
    }
    double limit = cap_w / ((double)pc->pipe.stages * pc->tp);
    limit_plan(pc, limit);
    prs_plan_power p;
    if ((rc = prs_eval_power(pc->ev, pc->plan, pc->window_s, &p, NULL, NULL, err))) return rc;
    fill(pc, &p, within(power_on(pc, &p, on), cap_w), &out->s[PRS_CAP_POWER_LIMIT]);
    out->s[PRS_CAP_POWER_LIMIT].gpu_limit_w = limit;
    return 0;
}

int prs_powercap_plan(prs_powercap *pc, const prs_cap_result *r, prs_cap_strategy s,
                      int *clocks_mhz, prs_error *err)
{
    const prs_cap_choice *c = &r->s[(unsigned)s < PRS_CAP_NSTRATEGIES ? s : 0];
    switch (s) {
    case PRS_CAP_PERSEUS:
        if (c->index >= 0) return prs_frontier_plan(pc->f, (size_t)c->index, clocks_mhz, err);
        if (c->gpu_limit_w > 0) {
            limit_plan(pc, c->gpu_limit_w);
            int rc = reclaim(pc, pc->plan, err);
            if (!rc) memcpy(clocks_mhz, pc->plan, sizeof *clocks_mhz * (size_t)pc->nops);
            return rc;
        }
        for (size_t u = 0; u < pc->nuni; u++)
            if (pc->ufreq[u] == c->freq_mhz) {
                memcpy(clocks_mhz, pc->rplans + u * (size_t)pc->nops,
                       sizeof *clocks_mhz * (size_t)pc->nops);
                return 0;
            }
        break;
    case PRS_CAP_UNIFORM:
        if (!c->freq_mhz) break;
        for (int op = 0; op < pc->nops; op++)
            clocks_mhz[op] = c->freq_mhz;
        return 0;
    case PRS_CAP_POWER_LIMIT:
        limit_plan(pc, c->gpu_limit_w);
        memcpy(clocks_mhz, pc->plan, sizeof *clocks_mhz * (size_t)pc->nops);
        return 0;
    default:
        break;
    }
    return prs__emu_error(err, PRS_EINVAL, "power cap: no such plan");
}

double prs_cap_ratio(const prs_cap_choice *a, const prs_cap_choice *b)
{
    return a->feasible && b->feasible ? a->throughput_per_s / b->throughput_per_s : NAN;
}
