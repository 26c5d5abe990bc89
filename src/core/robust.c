/* The robust planner (include/perseus/noise.h, docs/noise.md, 'The robust planner'): plan on the
 * reconciled profile, then give the time budget its margin. The fitted times are uncertain by
 * about their standard error, and the frontier's last points buy their small time gains with
 * much energy, each gain smaller than that uncertainty: the points faster than the fastest
 * evaluated time times 1 + b, b = min(PRS_ROBUST_BUDGET_MAX, PRS_ROBUST_BUDGET_SE * se) with se
 * the median relative standard error of the fitted times, are dropped, so the plan looked up
 * for "as fast as possible" is one whose promised time holds. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "frontier_int.h"
#include "perseus/noise.h"

/* The points of f whose evaluated time is at least min_time_s, with their plans. */
static int keep_slower(const prs_frontier *f, double min_time_s, prs_frontier **out, prs_error *err)
{
    size_t nops = (size_t)f->nops;
    int *cur = malloc(sizeof *cur * nops), *prev = malloc(sizeof *prev * nops);
    int *chg_op = malloc(sizeof *chg_op * nops), *chg_freq = malloc(sizeof *chg_freq * nops);
    prs_frontier *t = prs__frontier_new(&f->pipe, f->model, f->base);
    int rc = cur && prev && chg_op && chg_freq && t ? 0 : PRS_ENOMEM;
    if (!rc) memcpy(prev, f->base, sizeof *prev * nops);
    for (size_t k = 0; k < f->npoints && !rc; k++) {
        if (!(f->pts[k].eval_time_s >= min_time_s)) continue;
        if ((rc = prs_frontier_plan(f, k, cur, err))) break;
        size_t nchg = 0;
        for (size_t op = 0; op < nops; op++)
            if (cur[op] != prev[op]) {
                chg_op[nchg] = (int)op;
                chg_freq[nchg++] = cur[op];
                prev[op] = cur[op];
            }
        rc = prs__frontier_push(t, &f->pts[k], chg_op, chg_freq, nchg);
    }
    free(cur);
    free(prev);
    free(chg_op);
    free(chg_freq);
    if (rc) {
        prs_frontier_free(t);
        return rc == PRS_ENOMEM ? prs_error_set(err, rc, "out of memory") : rc;
    }
    *out = t;
    return 0;
}

static double budget(double se_pct, double max)
{
    double b = PRS_ROBUST_BUDGET_SE * se_pct / 100.0;
    return b < max ? (b > 0 ? b : 0) : max;
}

double prs_robust_budget(double se_pct)
{
    return budget(se_pct, PRS_ROBUST_BUDGET_MAX);
}

void prs_robust_opts_default(prs_robust_opts *o)
{
    o->margin_sd = PRS_RECONCILE_MARGIN_SD;
    o->budget_max = PRS_ROBUST_BUDGET_MAX;
}

int prs_plan_robust(const prs_profile *measured, const prs_plan_opts *opts, prs_frontier **out,
                    prs_profile **fitted, prs_error *err)
{
    return prs_plan_robust_with(measured, opts, NULL, out, fitted, err);
}

int prs_plan_robust_with(const prs_profile *measured, const prs_plan_opts *opts,
                         const prs_robust_opts *robust, prs_frontier **out, prs_profile **fitted,
                         prs_error *err)
{
    if (!out) return prs_error_set(err, PRS_EINVAL, "robust planner: NULL output");
    *out = NULL;
    if (fitted) *fitted = NULL;
    prs_robust_opts ro;
    prs_robust_opts_default(&ro);
    if (robust) ro = *robust;
    if (!(ro.budget_max >= 0 && ro.budget_max <= 0.1))
        return prs_error_set(err, PRS_EINVAL, "robust planner: budget_max must be in [0, 0.1]");
    prs_profile *fit = NULL;
    prs_frontier *f = NULL;
    double se_pct = 0;
    int rc = prs_profile_reconcile(measured, ro.margin_sd, &fit, &se_pct, err);
    if (!rc) rc = prs_plan(fit, opts, &f, err);
    double fastest = INFINITY;
    for (size_t k = 0; !rc && k < prs_frontier_size(f); k++)
        fastest = fmin(fastest, prs_frontier_point_at(f, k)->eval_time_s);
    double limit = fastest * (1.0 + budget(se_pct, ro.budget_max));
    size_t slower = 0;
    for (size_t k = 0; !rc && k < prs_frontier_size(f); k++)
        slower += prs_frontier_point_at(f, k)->eval_time_s >= limit;
    if (!rc && slower > 0 && limit > fastest) {
        prs_frontier *t = NULL;
        rc = keep_slower(f, limit, &t, err);
        prs_frontier_free(f);
        f = t;
    }
    if (!rc && fitted) {
        *fitted = fit;
        fit = NULL;
    }
    prs_profile_free(fit);
    if (rc) {
        prs_frontier_free(f);
        return rc;
    }
    *out = f;
    return 0;
}
