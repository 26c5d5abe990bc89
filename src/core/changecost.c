/* What clock changes cost a plan (docs/planner.md, 'Clock changes'): counting a plan's changes,
 * and the planner's pass that merges the clocks of neighbouring computations on a GPU where a
 * change costs more time and energy than the different clock saves.
 *
 * A change adds pipe->change_cost_s before the computation that needs it (evaluate.c quantizes
 * the computation's measured time plus the cost); its time is spent at blocking power. The pass
 * works on runs: maximal sequences of consecutive computations of one GPU at one clock (cyclic:
 * the plan repeats every iteration). Merging a run into a neighbouring run's clock removes at
 * least one change. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "frontier_int.h"
#include "plan_int.h"

/* Merges are taken when the energy rises by no more than this fraction (rounding): a tie goes to
 * the plan with fewer changes. */
#define CHANGES_REL_TOL 1e-12

long prs_plan_count_changes(const prs_pipeline *pipe, const int *clocks_mhz)
{
    if (!pipe || !clocks_mhz || prs_pipeline_check(pipe, NULL)) return -1;
    int n = prs_ops_per_stage(pipe);
    long changes = 0;
    for (int s = 0; s < pipe->stages; s++) {
        const int *c = clocks_mhz + (size_t)s * (size_t)n;
        for (int pos = 0; pos < n; pos++)
            changes += c[pos] != c[pos ? pos - 1 : n - 1];
    }
    return changes;
}

/* A candidate merge: GPU stage's run of len computations from position start (cyclic) to the
 * clock freq. */
typedef struct merge {
    int stage, start, len, freq;
} merge;

/* Plan index of position pos (any integer, taken cyclically) of GPU stage. */
static int op_at(const prs_eval *ev, int stage, int pos)
{
    int n = ev->g.ops_per_stage;
    return stage * n + ((pos % n) + n) % n;
}

/* Duration in units of op under clocks (table entry k of its clock), with its change. */
static long dur_of(const prs_eval *ev, const int *clocks, int op, int k)
{
    return prs__op_changes(&ev->g, clocks, op) ? ev->t.qc[k] : ev->t.q[k];
}

/* Entry of op's clock under clocks; -1 when not profiled. */
static int entry(const prs_eval *ev, const int *clocks, int op)
{
    return prs__table_find(&ev->t, ev->g.op_type[op], clocks[op]);
}

/* Whether merge m could leave the plan no costlier, judged locally: the change of effective
 * energy (e - P_block * q * tau) of the run against the most the iteration can shorten (the
 * durations the run and the computation after it lose), at blocking power on every GPU.
 * clocks: the plan before the merge; new: the plan after it. 0 when a clock is not profiled. */
static int promising(const prs_eval *ev, const int *clocks, const int *next, const merge *m,
                     double tol)
{
    const prs_pipeline *p = &ev->pipe;
    double da = 0;
    long shorter = 0;
    for (int i = 0; i <= m->len; i++) { /* the run, then the computation after it */
        int op = op_at(ev, m->stage, m->start + i);
        int k0 = entry(ev, clocks, op), k1 = entry(ev, next, op);
        if (k0 < 0 || k1 < 0) return 0;
        shorter += dur_of(ev, clocks, op, k0) - dur_of(ev, next, op, k1);
        if (i == m->len) break;
        da += (ev->t.energy_j[k1] - ev->t.energy_j[k0]) -
              p->blocking_power_w * p->unit_time_s * (double)(ev->t.q[k1] - ev->t.q[k0]);
    }
    if (da <= tol) return 1;
    double bw = (double)p->stages * p->blocking_power_w * p->unit_time_s;
    return shorter > 0 && (double)shorter * bw >= da - tol;
}

/* Evaluate merge m on clocks (restored before returning): *T and *e its figures. 0 when it is
 * worth evaluating and was evaluated. */
static int try_merge(prs_eval *ev, int *clocks, int *scratch, const merge *m, double tol, long *T,
                     double *e)
{
    size_t nops = (size_t)ev->g.nops;
    memcpy(scratch, clocks, sizeof *scratch * nops);
    for (int i = 0; i < m->len; i++)
        scratch[op_at(ev, m->stage, m->start + i)] = m->freq;
    if (!promising(ev, clocks, scratch, m, tol)) return -1;
    if (prs__table_lookup(ev, scratch, NULL)) return -1;
    *T = prs__table_run(ev, e);
    return 0;
}

/* The runs of GPU stage: their first positions into starts (ascending); returns their count (0
 * when the GPU keeps one clock; never 1). */
static int runs_of(const prs_eval *ev, const int *clocks, int stage, int *starts)
{
    int n = ev->g.ops_per_stage, nr = 0;
    for (int pos = 0; pos < n; pos++) {
        int op = stage * n + pos;
        if (prs__op_changes(&ev->g, clocks, op)) starts[nr++] = pos;
    }
    return nr;
}

/* The first run of GPU stage that a merge improves (no slower than *T, no costlier than *E up
 * to rounding; the better of its two neighbours' clocks), merged into clocks with the figures
 * into *T and *E. 1 when a merge was taken. */
static int merge_one(prs_eval *ev, int *clocks, int *scratch, int *starts, int stage, long *T,
                     double *E)
{
    int n = ev->g.ops_per_stage, nr = runs_of(ev, clocks, stage, starts);
    double tol = CHANGES_REL_TOL * fabs(*E);
    for (int r = 0; r < nr; r++) {
        int start = starts[r], end = r + 1 < nr ? starts[r + 1] : starts[0] + n;
        int side[2] = {clocks[op_at(ev, stage, start - 1)], clocks[op_at(ev, stage, end)]};
        merge best = {-1, 0, 0, 0};
        long bt = 0;
        double be = 0;
        for (int j = 0; j < 2; j++) {
            if (j == 1 && side[1] == side[0]) break;
            merge m = {stage, start, end - start, side[j]};
            long t;
            double e;
            if (try_merge(ev, clocks, scratch, &m, tol, &t, &e) || t > *T || e > *E + tol) continue;
            if (best.stage < 0 || e < be || (e == be && t < bt)) {
                best = m;
                bt = t;
                be = e;
            }
        }
        if (best.stage < 0) continue;
        for (int i = 0; i < best.len; i++)
            clocks[op_at(ev, stage, best.start + i)] = best.freq;
        *T = bt;
        *E = be;
        return 1;
    }
    return 0;
}

int prs__changes_merge(prs_eval *ev, int *clocks, long *T, double *energy_j, prs_error *err)
{
    int rc = prs__table_lookup(ev, clocks, err);
    if (rc) return rc;
    double e;
    long t = prs__table_run(ev, &e);
    if (ev->pipe.change_cost_s > 0) {
        int *scratch = malloc(sizeof *scratch * (size_t)ev->g.nops);
        int *starts = malloc(sizeof *starts * (size_t)ev->g.ops_per_stage);
        if (!scratch || !starts) rc = prs_error_set(err, PRS_ENOMEM, "out of memory");
        /* every merge removes a change: the sweeps end */
        for (int more = !rc; more;) {
            more = 0;
            for (int s = 0; s < ev->pipe.stages; s++)
                while (merge_one(ev, clocks, scratch, starts, s, &t, &e))
                    more = 1;
        }
        free(scratch);
        free(starts);
        /* leave the context with the result's evaluation, as after prs__table_run */
        if (!rc && !(rc = prs__table_lookup(ev, clocks, err))) t = prs__table_run(ev, &e);
    }
    if (!rc && T) *T = t;
    if (!rc && energy_j) *energy_j = e;
    return rc;
}

/* Every plan of f through prs__changes_merge into a new frontier *out. */
static int merged(prs_eval *ev, const prs_frontier *f, prs_frontier **out, prs_error *err)
{
    size_t nops = (size_t)f->nops, nchg;
    int *cur = malloc(sizeof *cur * nops), *plan = malloc(sizeof *plan * nops);
    int *prev = malloc(sizeof *prev * nops), *chg_op = malloc(sizeof *chg_op * nops);
    int *chg_freq = malloc(sizeof *chg_freq * nops);
    prs_frontier *c = prs__frontier_new(&f->pipe, f->model, f->base);
    int rc = PRS_ENOMEM;
    if (!cur || !plan || !prev || !chg_op || !chg_freq || !c) goto out;
    memcpy(cur, f->base, sizeof *cur * nops);
    memcpy(prev, f->base, sizeof *prev * nops);
    for (size_t k = 0; k < f->npoints; k++) {
        for (size_t i = f->dstart[k]; i < f->dstart[k + 1]; i++)
            cur[f->dop[i]] = f->dfreq[i];
        prs_frontier_point pt = f->pts[k];
        memcpy(plan, cur, sizeof *plan * nops);
        long T;
        if ((rc = prs__changes_merge(ev, plan, &T, &pt.eval_energy_j, err))) goto out;
        pt.eval_time_s = (double)T * f->pipe.unit_time_s;
        nchg = 0;
        for (size_t op = 0; op < nops; op++)
            if (plan[op] != prev[op]) {
                chg_op[nchg] = (int)op;
                chg_freq[nchg++] = plan[op];
                prev[op] = plan[op];
            }
        if ((rc = prs__frontier_push(c, &pt, chg_op, chg_freq, nchg))) goto out;
    }
    *out = c;
    c = NULL;
out:
    free(cur);
    free(plan);
    free(prev);
    free(chg_op);
    free(chg_freq);
    prs_frontier_free(c);
    return rc == PRS_ENOMEM ? prs_error_set(err, rc, "out of memory charging clock changes") : rc;
}

int prs__changes_frontiers(prs_eval *ev, prs_frontier **f, prs_frontier **tracks, prs_error *err)
{
    prs_frontier *c = NULL, *t = NULL;
    int rc;
    if (ev->pipe.change_cost_s <= 0) return 0;
    if ((rc = merged(ev, *f, &c, err))) return rc;
    if (tracks && *tracks && (rc = merged(ev, *tracks, &t, err))) {
        prs_frontier_free(c);
        return rc;
    }
    prs_frontier_free(*f);
    *f = c;
    if (t) {
        prs_frontier_free(*tracks);
        *tracks = t;
    }
    return 0;
}
