/* Baselines as planners (include/perseus/emulator.h): what a job does without Perseus.
 *
 *   all-max   every computation at the highest profiled clock of its type: the default of
 *             every training framework, and the reference the paper's savings are against;
 *   uniform   one clock for every computation: the least evaluated energy among the uniform
 *             clocks whose iteration time meets a target (e.g. "no slower than all-max"). Only
 *             clocks profiled for every computation type are candidates;
 *   EnvPipe   EnvPipe's idea (Choi et al., ATC'23) without its rescheduling: the last stage is
 *             taken as critical and kept at all-max, and every other stage's computations slow
 *             down into their slack. The greedy: one pass over GPUs stages-2 .. 0, computations
 *             in execution order, each given the cheapest clock (effective energy) whose time
 *             fits within its total float on the current critical path. Delaying one activity
 *             by at most its total float never lengthens a project (critical path method), and
 *             floats only shrink as durations grow, so one pass reaches a fixed point.
 *
 * Every figure comes from the core's evaluation context (perseus/evaluate.h): quantized times,
 * measured energies, blocking power while a GPU does not compute. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "emu_int.h"
#include "perseus/evaluate.h"

int prs__emu_plan_sums(const prs_profile *profile, const prs_pipeline *pipe, const int *clocks_mhz,
                       double *sum_energy_j, double *sum_time_s, prs_error *err)
{
    prs_eval *ev;
    int rc = prs_eval_open(profile, pipe, &ev, err);
    if (rc) return rc;
    int nops = prs_eval_nops(ev);
    int *idx = malloc(sizeof *idx * (size_t)nops);
    if (!idx) rc = prs__emu_error(err, PRS_ENOMEM, "out of memory");
    if (!rc) rc = prs_eval_lookup(ev, clocks_mhz, idx, err);
    double se = 0, st = 0;
    for (int op = 0; !rc && op < nops; op++) {
        prs_eval_clock c = prs_eval_clock_at(ev, op, idx[op]);
        se += c.energy_j;
        st += c.time_s;
    }
    free(idx);
    prs_eval_close(ev);
    if (rc) return rc;
    *sum_energy_j = se;
    *sum_time_s = st;
    return 0;
}

/* Every computation at its highest profiled clock (every computation has at least one). */
static void allmax(const prs_eval *ev, int *clocks_mhz)
{
    for (int op = 0; op < prs_eval_nops(ev); op++)
        clocks_mhz[op] = prs_eval_clock_at(ev, op, prs_eval_nclocks(ev, op) - 1).freq_mhz;
}

int prs_baseline_allmax(const prs_profile *profile, const prs_pipeline *pipe, int *clocks_mhz,
                        prs_error *err)
{
    prs_eval *ev;
    int rc = prs_eval_open(profile, pipe, &ev, err);
    if (rc) return rc;
    allmax(ev, clocks_mhz);
    prs_eval_close(ev);
    return 0;
}

int prs_uniform_sweep(const prs_profile *profile, const prs_pipeline *pipe, prs_uniform_point **out,
                      size_t *n, prs_error *err)
{
    prs_eval *ev;
    int rc = prs_eval_open(profile, pipe, &ev, err);
    if (rc) return rc;
    int nops = prs_eval_nops(ev), ncommon = prs_eval_common_clocks(ev, NULL, 0);
    prs_uniform_point *pts = malloc(sizeof *pts * (size_t)(ncommon ? ncommon : 1));
    int *common = malloc(sizeof *common * (size_t)(ncommon ? ncommon : 1));
    int *plan = malloc(sizeof *plan * (size_t)nops);
    if (!pts || !common || !plan) {
        rc = prs__emu_error(err, PRS_ENOMEM, "out of memory");
        goto out;
    }
    prs_eval_common_clocks(ev, common, ncommon);
    for (int i = 0; i < ncommon; i++) {
        for (int op = 0; op < nops; op++)
            plan[op] = common[i];
        pts[i].freq_mhz = common[i];
        if ((rc = prs_eval_run(ev, plan, NULL, &pts[i].time_s, &pts[i].energy_j, err))) goto out;
    }
    if (ncommon == 0)
        rc = prs__emu_error(err, PRS_EINVAL,
                            "no clock is profiled for every computation (a uniform clock needs "
                            "one profiled for every stage, forward and backward)");
out:
    free(plan);
    free(common);
    prs_eval_close(ev);
    if (rc) {
        free(pts);
        return rc;
    }
    *out = pts;
    *n = (size_t)ncommon;
    return 0;
}

int prs_uniform_pick(const prs_uniform_point *pts, size_t n, double target_time_s, size_t *k)
{
    size_t best = (size_t)-1;
    for (size_t i = 0; i < n; i++) {
        const prs_uniform_point *p = &pts[i];
        if (!(p->time_s <= target_time_s + PRS_TIME_TOL_S)) continue;
        if (best != (size_t)-1) {
            const prs_uniform_point *b = &pts[best];
            if (p->energy_j > b->energy_j) continue;
            if (p->energy_j == b->energy_j &&
                (p->time_s > b->time_s || (p->time_s == b->time_s && p->freq_mhz < b->freq_mhz)))
                continue;
        }
        best = i;
    }
    if (best == (size_t)-1) return PRS_ERANGE;
    *k = best;
    return 0;
}

int prs_baseline_uniform(const prs_profile *profile, const prs_pipeline *pipe, double target_time_s,
                         int *clocks_mhz, prs_uniform_point *pt, prs_error *err)
{
    prs_uniform_point *pts = NULL;
    size_t n = 0, k = 0;
    int rc = prs_uniform_sweep(profile, pipe, &pts, &n, err);
    if (rc) return rc;
    int nops = pipe->stages * prs_ops_per_stage(pipe);
    if (!(target_time_s > 0)) { /* no slower than all-max */
        int *plan = malloc(sizeof *plan * (size_t)nops);
        double e;
        if (!plan) rc = prs__emu_error(err, PRS_ENOMEM, "out of memory");
        if (!rc) rc = prs_baseline_allmax(profile, pipe, plan, err);
        if (!rc) rc = prs_evaluate_plan(profile, pipe, plan, &target_time_s, &e, err);
        free(plan);
        if (rc) {
            free(pts);
            return rc;
        }
    }
    if (prs_uniform_pick(pts, n, target_time_s, &k)) {
        double fastest = INFINITY;
        for (size_t i = 0; i < n; i++)
            if (pts[i].time_s < fastest) fastest = pts[i].time_s;
        free(pts);
        return prs__emu_error(err, PRS_ERANGE,
                              "no uniform clock meets %.6g s (the fastest uniform clock takes "
                              "%.6g s)",
                              target_time_s, fastest);
    }
    *pt = pts[k];
    free(pts);
    if (clocks_mhz)
        for (int op = 0; op < nops; op++)
            clocks_mhz[op] = pt->freq_mhz;
    return 0;
}

int prs_baseline_envpipe(const prs_profile *profile, const prs_pipeline *pipe, int *clocks_mhz,
                         prs_error *err)
{
    prs_eval *ev;
    int rc = prs_eval_open(profile, pipe, &ev, err);
    if (rc) return rc;
    allmax(ev, clocks_mhz);
    int nops = prs_eval_nops(ev), per = prs_ops_per_stage(pipe);
    long *window = malloc(sizeof *window * (size_t)nops);
    if (!window) {
        prs_eval_close(ev);
        return prs__emu_error(err, PRS_ENOMEM, "out of memory");
    }
    double pb_tau = pipe->blocking_power_w * pipe->unit_time_s;
    for (int s = pipe->stages - 2; s >= 0 && !rc; s--) {
        for (int pos = 0; pos < per && !rc; pos++) {
            int op = s * per + pos;
            if ((rc = prs_eval_windows(ev, clocks_mhz, window, err))) break;
            long limit = window[op]; /* duration + total float */
            prs_eval_clock cur = prs_eval_clock_at(ev, op, prs_eval_find(ev, op, clocks_mhz[op]));
            double best_cost = cur.energy_j - pb_tau * (double)cur.units;
            for (int i = 0; i < prs_eval_nclocks(ev, op); i++) {
                prs_eval_clock c = prs_eval_clock_at(ev, op, i);
                double cost = c.energy_j - pb_tau * (double)c.units;
                if (c.units <= limit && cost < best_cost) {
                    clocks_mhz[op] = c.freq_mhz;
                    best_cost = cost;
                }
            }
        }
    }
    free(window);
    prs_eval_close(ev);
    return rc;
}
