/* Polishing applied: one plan (prs_plan_polish), the plan a lookup chooses
 * (prs_frontier_lookup_plan), and the plans of a planned frontier (prs__polish_frontier, called by
 * the planner for its polish option). docs/planner.md, 'Polishing'. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "frontier_int.h"
#include "polish.h"

const char *prs_polish_kind_name(prs_polish_kind k)
{
    return k == PRS_POLISH_AUTO   ? "auto"
           : k == PRS_POLISH_NONE ? "none"
           : k == PRS_POLISH_RUNS ? "runs"
           : k == PRS_POLISH_ALL  ? "all"
                                  : "unknown";
}

int prs_polish_kind_parse(const char *name, prs_polish_kind *out)
{
    static const prs_polish_kind all[] = {PRS_POLISH_AUTO, PRS_POLISH_NONE, PRS_POLISH_RUNS,
                                          PRS_POLISH_ALL};
    for (size_t i = 0; name && i < sizeof all / sizeof all[0]; i++)
        if (strcmp(name, prs_polish_kind_name(all[i])) == 0) {
            *out = all[i];
            return 0;
        }
    return PRS_EINVAL;
}

/* With clock changes that cost time (docs/planner.md, 'Clock changes'): the polished plan in
 * ev->idx, its changes merged, replaces clocks (merged already, figures t0 and e0) when it is
 * no slower and cheaper, judged with the costs; else *T and *energy_j get t0 and e0. */
static int polish_costly(prs_eval *ev, int *clocks, long t0, double e0, long *T, double *energy_j,
                         prs_error *err)
{
    int *plan = malloc(sizeof *plan * (size_t)ev->g.nops);
    if (!plan) return prs_error_set(err, PRS_ENOMEM, "out of memory");
    for (int op = 0; op < ev->g.nops; op++)
        plan[op] = ev->t.freq[ev->idx[op]];
    int rc = prs__changes_merge(ev, plan, T, energy_j, err);
    if (!rc && *T <= t0 && *energy_j < e0)
        memcpy(clocks, plan, sizeof *plan * (size_t)ev->g.nops);
    else if (!rc) {
        *T = t0;
        *energy_j = e0;
    }
    free(plan);
    return rc;
}

/* Polish clocks (one per op) through ev and p: budget, its own evaluated time. */
static int polish_clocks(prs_eval *ev, prs__polish *p, int *clocks, long *T, double *energy_j,
                         prs_error *err)
{
    int costly = ev->pipe.change_cost_s > 0;
    int rc = costly ? prs__changes_merge(ev, clocks, NULL, NULL, err)
                    : prs__table_lookup(ev, clocks, err);
    if (rc) return rc;
    double e0;
    long t0 = prs__table_run(ev, &e0);
    if ((rc = prs__polish_run(p, ev->idx, t0, T, energy_j)))
        return prs_error_set(err, rc,
                             rc == PRS_ECANCELED ? "planning canceled while polishing plans"
                                                 : "plan exceeds its own time");
    if (costly) return polish_costly(ev, clocks, t0, e0, T, energy_j, err);
    if (*energy_j >= e0) { /* nothing gained: the plan as it was */
        *T = t0;
        *energy_j = e0;
        return 0;
    }
    for (int op = 0; op < ev->g.nops; op++)
        clocks[op] = ev->t.freq[ev->idx[op]];
    return 0;
}

int prs_plan_polish(const prs_profile *profile, const prs_pipeline *pipe, int *clocks_mhz,
                    double *time_s, double *energy_j, prs_error *err)
{
    prs_eval *ev = NULL;
    int rc = prs_eval_open(profile, pipe, &ev, err);
    if (rc) return rc;
    prs__polish *p = prs__polish_new(&ev->g, &ev->t, &ev->pipe);
    long T = 0;
    double e = 0;
    if (!p)
        rc = prs_error_set(err, PRS_ENOMEM, "out of memory");
    else
        rc = polish_clocks(ev, p, clocks_mhz, &T, &e, err);
    if (!rc && time_s) *time_s = (double)T * pipe->unit_time_s;
    if (!rc && energy_j) *energy_j = e;
    prs__polish_free(p);
    prs_eval_close(ev);
    return rc;
}

int prs_frontier_lookup_plan(const prs_frontier *f, const prs_profile *profile,
                             double straggler_time_s, prs_polish_kind polish, int *clocks_mhz,
                             size_t *k, double *time_s, double *energy_j, prs_error *err)
{
    size_t at = 0;
    if (prs_frontier_lookup(f, straggler_time_s, &at))
        return prs_error_set(err, PRS_ERANGE, "empty frontier");
    int rc = prs_frontier_plan(f, at, clocks_mhz, err);
    if (rc) return rc;
    if (k) *k = at;
    const prs_frontier_point *pt = prs_frontier_point_at(f, at);
    if (polish == PRS_POLISH_NONE) {
        if (time_s) *time_s = pt->eval_time_s;
        if (energy_j) *energy_j = pt->eval_energy_j;
        return 0;
    }
    return prs_plan_polish(profile, &f->pipe, clocks_mhz, time_s, energy_j, err);
}

/* The plans of f, those selected in sel[] polished, into a new frontier *out (same points
 * otherwise); *changed: some plan got cheaper. */
static int rebuild(const prs_frontier *f, prs_eval *ev, prs__polish *p, const unsigned char *sel,
                   const prs__tick *tick, long total, prs_frontier **out, int *changed,
                   prs_error *err)
{
    size_t nops = (size_t)f->nops;
    int *cur = malloc(sizeof *cur * nops), *plan = malloc(sizeof *plan * nops);
    int *prev = malloc(sizeof *prev * nops), *chg_op = malloc(sizeof *chg_op * nops);
    int *chg_freq = malloc(sizeof *chg_freq * nops);
    prs_frontier *c = prs__frontier_new(&f->pipe, f->model, f->base);
    int rc = PRS_ENOMEM;
    *changed = 0;
    if (!cur || !plan || !prev || !chg_op || !chg_freq || !c) goto out;
    memcpy(cur, f->base, sizeof *cur * nops);
    memcpy(prev, f->base, sizeof *prev * nops);
    for (size_t k = 0; k < f->npoints; k++) {
        for (size_t i = f->dstart[k]; i < f->dstart[k + 1]; i++)
            cur[f->dop[i]] = f->dfreq[i];
        prs_frontier_point pt = f->pts[k];
        memcpy(plan, cur, sizeof *plan * nops);
        long T;
        double e;
        /* a plan that fails to polish (over its own time: never, by the fit tests) stays */
        int prc = sel[k] ? polish_clocks(ev, p, plan, &T, &e, NULL) : -1;
        if (prc == PRS_ECANCELED ||
            (sel[k] && tick && tick->fn && tick->fn(tick->ud, total, total))) {
            rc = prs_error_set(err, PRS_ECANCELED, "planning canceled while polishing plans");
            goto out;
        }
        if (prc == 0 && e < pt.eval_energy_j) {
            pt.eval_time_s = (double)T * f->pipe.unit_time_s;
            pt.eval_energy_j = e;
            *changed = 1;
        } else {
            memcpy(plan, cur, sizeof *plan * nops);
        }
        size_t nchg = 0;
        for (size_t op = 0; op < nops; op++)
            if (plan[op] != prev[op]) {
                chg_op[nchg] = (int)op;
                chg_freq[nchg++] = plan[op];
                prev[op] = plan[op];
            }
        if (prs__frontier_push(c, &pt, chg_op, chg_freq, nchg)) goto out;
    }
    *out = c;
    c = NULL;
    rc = 0;
out:
    free(cur);
    free(plan);
    free(prev);
    free(chg_op);
    free(chg_freq);
    prs_frontier_free(c);
    return rc;
}

int prs__polish_frontier(prs_eval *ev, prs_frontier **f, int all, int clean, const prs__tick *tick,
                         long total, long *moves, prs_error *err)
{
    size_t n = (*f)->npoints, k = 0;
    if (n == 0) return 0;
    unsigned char *sel = calloc(n, 1);
    prs__polish *p = prs__polish_new(&ev->g, &ev->t, &ev->pipe);
    prs_frontier *c = NULL;
    int changed = 0, rc = PRS_ENOMEM;
    if (!sel || !p) goto out;
    if (all)
        memset(sel, 1, n);
    else if (prs_frontier_lookup(*f, 0, &k) == 0)
        sel[k] = 1;
    prs__polish_set_tick(p, tick, total);
    if ((rc = rebuild(*f, ev, p, sel, tick, total, &c, &changed, err))) goto out;
    *moves += prs__polish_moves(p);
    if (changed && clean) {
        prs_frontier *d = NULL;
        const prs_frontier *one = c;
        if ((rc = prs__frontier_clean_union(&one, 1, &d, err))) goto out;
        prs_frontier_free(c);
        c = d;
    }
    prs_frontier_free(*f);
    *f = c;
    c = NULL;
    rc = 0;
out:
    free(sel);
    prs__polish_free(p);
    prs_frontier_free(c);
    return rc == PRS_ENOMEM ? prs_error_set(err, rc, "out of memory polishing plans") : rc;
}
