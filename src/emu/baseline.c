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
 * Every figure comes from the core's evaluation model: quantized times, measured energies,
 * blocking power while a GPU does not compute. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "emu_int.h"
#include "plan_int.h"

/* Pipeline and profile checks shared by every entry point. */
static int check_inputs(const prs_profile *profile, const prs_pipeline *pipe, prs_error *err)
{
    if (!profile || !pipe) return prsU_error(err, PRS_EINVAL, "NULL argument");
    int rc = prs_pipeline_check(pipe, err);
    if (rc) return rc;
    return prs_profile_check_stages(profile, prs_pipeline_chunks(pipe), err);
}

int prsU_plan_sums(const prs_profile *profile, const prs_pipeline *pipe, const int *clocks_mhz,
                   double *sum_energy_j, double *sum_time_s, prs_error *err)
{
    int rc = check_inputs(profile, pipe, err);
    if (rc) return rc;
    prsG_graph g;
    prsE_table t;
    if ((rc = prsG_build(pipe, &g, err))) return rc;
    if ((rc = prsE_build(profile, pipe, &t, err))) {
        prsG_free(&g);
        return rc;
    }
    double se = 0, st = 0;
    for (int op = 0; op < g.nops; op++) {
        int k = prsE_find(&t, g.op_type[op], clocks_mhz[op]);
        if (k < 0) {
            rc = prsU_error(err, PRS_EINVAL,
                            "plan: stage %d position %d runs at %d MHz, which the profile has "
                            "no row for (stage %d %s)",
                            op / g.ops_per_stage, op % g.ops_per_stage, clocks_mhz[op],
                            g.op_chunk[op], prs_instr_name((prs_instr)(g.op_type[op] % 2)));
            break;
        }
        se += t.energy_j[k];
        st += t.time_s[k];
    }
    prsE_free(&t);
    prsG_free(&g);
    if (rc) return rc;
    *sum_energy_j = se;
    *sum_time_s = st;
    return 0;
}

int prs_baseline_allmax(const prs_profile *profile, const prs_pipeline *pipe, int *clocks_mhz,
                        prs_error *err)
{
    int rc = check_inputs(profile, pipe, err);
    if (rc) return rc;
    prsG_graph g;
    prsE_table t;
    if ((rc = prsG_build(pipe, &g, err))) return rc;
    if ((rc = prsE_build(profile, pipe, &t, err))) {
        prsG_free(&g);
        return rc;
    }
    /* every type has rows (check_inputs), so start[k+1] - 1 is its highest clock */
    for (int op = 0; op < g.nops; op++)
        clocks_mhz[op] = t.freq[t.start[g.op_type[op] + 1] - 1];
    prsE_free(&t);
    prsG_free(&g);
    return 0;
}

int prs_uniform_sweep(const prs_profile *profile, const prs_pipeline *pipe, prs_uniform_point **out,
                      size_t *n, prs_error *err)
{
    int rc = check_inputs(profile, pipe, err);
    if (rc) return rc;
    prsE_table t;
    if ((rc = prsE_build(profile, pipe, &t, err))) return rc;
    int nops = pipe->stages * prs_ops_per_stage(pipe);
    int cand = t.start[1] - t.start[0];
    prs_uniform_point *pts = malloc(sizeof *pts * (size_t)(cand ? cand : 1));
    int *plan = malloc(sizeof *plan * (size_t)nops);
    size_t np = 0;
    if (!pts || !plan) {
        rc = prsU_error(err, PRS_ENOMEM, "out of memory");
        goto out;
    }
    for (int i = t.start[0]; i < t.start[1]; i++) { /* type 0's clocks, ascending */
        int f = t.freq[i], everywhere = 1;
        for (int k = 1; k < t.ntypes && everywhere; k++)
            everywhere = prsE_find(&t, k, f) >= 0;
        if (!everywhere) continue;
        for (int op = 0; op < nops; op++)
            plan[op] = f;
        prs_uniform_point *p = &pts[np];
        p->freq_mhz = f;
        if ((rc = prs_evaluate_plan(profile, pipe, plan, &p->time_s, &p->energy_j, err))) goto out;
        np++;
    }
    if (np == 0) {
        rc = prsU_error(err, PRS_EINVAL,
                        "no clock is profiled for every computation (a uniform clock needs "
                        "one profiled for every stage, forward and backward)");
        goto out;
    }
out:
    free(plan);
    prsE_free(&t);
    if (rc) {
        free(pts);
        return rc;
    }
    *out = pts;
    *n = np;
    return 0;
}

int prs_uniform_pick(const prs_uniform_point *pts, size_t n, double target_time_s, size_t *k)
{
    size_t best = (size_t)-1;
    for (size_t i = 0; i < n; i++) {
        const prs_uniform_point *p = &pts[i];
        if (!(p->time_s <= target_time_s + 1e-9)) continue;
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
        if (!plan) rc = prsU_error(err, PRS_ENOMEM, "out of memory");
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
        return prsU_error(err, PRS_ERANGE,
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
    int rc = prs_baseline_allmax(profile, pipe, clocks_mhz, err);
    if (rc) return rc;
    prsG_graph g;
    prsE_table t;
    if ((rc = prsG_build(pipe, &g, err))) return rc;
    if ((rc = prsE_build(profile, pipe, &t, err))) {
        prsG_free(&g);
        return rc;
    }
    long *dur = malloc(sizeof *dur * (size_t)g.nops);
    long *earliest = malloc(sizeof *earliest * (size_t)g.nnodes);
    long *latest = malloc(sizeof *latest * (size_t)g.nnodes);
    if (!dur || !earliest || !latest) {
        rc = prsU_error(err, PRS_ENOMEM, "out of memory");
        goto out;
    }
    double pb_tau = pipe->blocking_power_w * pipe->unit_time_s;
    for (int op = 0; op < g.nops; op++)
        dur[op] = t.q[prsE_find(&t, g.op_type[op], clocks_mhz[op])];
    for (int s = pipe->stages - 2; s >= 0; s--) {
        for (int pos = 0; pos < g.ops_per_stage; pos++) {
            int op = s * g.ops_per_stage + pos, type = g.op_type[op];
            prsG_cpm(&g, dur, earliest, latest);
            const prsG_arc *a = &g.arcs[g.op_arc[op]];
            long limit = latest[a->to] - earliest[a->from]; /* duration + total float */
            int cur = prsE_find(&t, type, clocks_mhz[op]), best = cur;
            double best_cost = t.energy_j[cur] - pb_tau * (double)t.q[cur];
            for (int i = t.start[type]; i < t.start[type + 1]; i++) {
                double c = t.energy_j[i] - pb_tau * (double)t.q[i];
                if (t.q[i] <= limit && c < best_cost) {
                    best = i;
                    best_cost = c;
                }
            }
            clocks_mhz[op] = t.freq[best];
            dur[op] = t.q[best];
        }
    }
out:
    free(dur);
    free(earliest);
    free(latest);
    prsE_free(&t);
    prsG_free(&g);
    return rc;
}
