/* What clock changes cost a plan (docs/planner.md, 'Clock changes'): counting a plan's changes,
 * and the planner's passes over every plan of a frontier: merging the clocks of neighbouring
 * computations on a GPU where a change costs more time and energy than the different clock
 * saves, slack reclaiming with the costs (changereclaim.c) and, where the changes made a plan
 * slower, a sped-up copy.
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

/* Effective energy (e - P_block * q * tau) of table entry k. */
static double effective(const prs_eval *ev, int k)
{
    const prs_pipeline *p = &ev->pipe;
    return ev->t.energy_j[k] - p->blocking_power_w * p->unit_time_s * (double)ev->t.q[k];
}

/* What a merge changes: the run's computations and the one after it (len + 1), their table
 * entries and durations after the merge, and the sums of the changes. */
typedef struct delta {
    int n;
    int *op, *k;
    long *d, *save;
    double da, de; /* effective and measured energy */
    long dq, shorter;
} delta;

/* The delta of merge m on the plan ev holds (clocks): -1 when a clock is not profiled. */
static int delta_of(const prs_eval *ev, const int *clocks, const merge *m, delta *x)
{
    const prs__table_table *t = &ev->t;
    int before = clocks[op_at(ev, m->stage, m->start - 1)];
    x->n = m->len + 1;
    x->da = x->de = 0;
    x->dq = x->shorter = 0;
    for (int i = 0; i < x->n; i++) {
        int op = op_at(ev, m->stage, m->start + i), k0 = ev->idx[op];
        int k = i < m->len ? prs__table_find(t, ev->g.op_type[op], m->freq) : k0;
        if (k < 0) return -1;
        int change = i == 0 ? m->freq != before : i == m->len ? clocks[op] != m->freq : 0;
        x->op[i] = op;
        x->k[i] = k;
        x->d[i] = change ? t->qc[k] : t->q[k];
        x->shorter += ev->dur[op] - x->d[i];
        x->da += effective(ev, k) - effective(ev, k0);
        x->de += t->energy_j[k] - t->energy_j[k0];
        x->dq += t->q[k] - t->q[k0];
    }
    return 0;
}

/* Whether the delta fits the schedule of the plan ev holds (its earliest and latest times):
 * each changed computation, started when the one before it on its GPU ends (as changed) or at
 * its earliest time, ends by its latest. Then the iteration is no longer. */
static int fits(const prs_eval *ev, const delta *x)
{
    const prs__graph_graph *g = &ev->g;
    long end = 0;
    for (int i = 0; i < x->n; i++) {
        const prs__graph_arc *a = &g->arcs[g->op_arc[x->op[i]]];
        long start = ev->earliest[a->from];
        if (i && end > start) start = end;
        end = start + x->d[i];
        if (end > ev->latest[a->to]) return 0;
    }
    return 1;
}

/* Judge merge m on the plan ev holds (clocks, with its critical path T and energy E): 0 when
 * the plan after it is no slower and no costlier (up to tol), with its energy (or a bound on
 * it, where the merge fits the schedule as it is) in *e. Only merges that fit, or that save
 * the iteration enough time to pay for their energy, are evaluated in full. */
static int try_merge(prs_eval *ev, const int *clocks, const merge *m, long T, double E, double tol,
                     delta *x, long *scratch, double *e)
{
    const prs_pipeline *p = &ev->pipe;
    if (delta_of(ev, clocks, m, x)) return -1;
    int fit = fits(ev, x);
    if (fit && x->da <= tol) {
        *e = E + x->da; /* the iteration is no longer: at most this */
        return 0;
    }
    double bw = (double)p->stages * p->blocking_power_w * p->unit_time_s;
    if (x->da <= tol || x->shorter <= 0 || (double)x->shorter * bw < x->da - tol) return -1;
    for (int i = 0; i < x->n; i++) {
        x->save[i] = ev->dur[x->op[i]];
        ev->dur[x->op[i]] = x->d[i];
    }
    long t = prs__graph_cpm(&ev->g, ev->dur, scratch, NULL);
    for (int i = x->n - 1; i >= 0; i--)
        ev->dur[x->op[i]] = x->save[i];
    *e = prs__table_energy(p, t, ev->sum_energy_j + x->de, ev->sum_q + x->dq);
    return t <= T && *e <= E + tol ? 0 : -1;
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

/* Scratch of prs__changes_merge. */
typedef struct mscratch {
    int *starts;
    long *earliest;
    delta x;
} mscratch;

/* The first run of GPU stage that a merge improves (no slower, no costlier up to rounding; the
 * better of its two neighbours' clocks), merged into clocks. ev holds the plan's evaluation
 * with its critical-path times, T and E its figures. 1 when a merge was taken. */
static int merge_one(prs_eval *ev, int *clocks, mscratch *w, int stage, long T, double E)
{
    int n = ev->g.ops_per_stage, nr = runs_of(ev, clocks, stage, w->starts);
    double tol = CHANGES_REL_TOL * fabs(E);
    for (int r = 0; r < nr; r++) {
        int start = w->starts[r], end = r + 1 < nr ? w->starts[r + 1] : w->starts[0] + n;
        int side[2] = {clocks[op_at(ev, stage, start - 1)], clocks[op_at(ev, stage, end)]};
        int best = -1;
        double be = 0;
        for (int j = 0; j < 2; j++) {
            if (j == 1 && side[1] == side[0]) break;
            merge m = {stage, start, end - start, side[j]};
            double e;
            if (try_merge(ev, clocks, &m, T, E, tol, &w->x, w->earliest, &e)) continue;
            if (best < 0 || e < be) {
                best = side[j];
                be = e;
            }
        }
        if (best < 0) continue;
        for (int i = start; i < end; i++)
            clocks[op_at(ev, stage, i)] = best;
        return 1;
    }
    return 0;
}

/* Evaluate clocks into ev with its critical-path times; *T, *E its figures. */
static int evaluate(prs_eval *ev, const int *clocks, long *T, double *E, prs_error *err)
{
    int rc = prs__table_lookup(ev, clocks, err);
    if (rc) return rc;
    *T = prs__graph_cpm(&ev->g, ev->dur, ev->earliest, ev->latest);
    *E = prs__table_energy(&ev->pipe, *T, ev->sum_energy_j, ev->sum_q);
    return 0;
}

int prs__changes_merge(prs_eval *ev, int *clocks, long *T, double *energy_j, prs_error *err)
{
    long t;
    double e;
    int rc = evaluate(ev, clocks, &t, &e, err);
    if (!rc && ev->pipe.change_cost_s > 0) {
        size_t n = (size_t)ev->g.ops_per_stage + 1;
        mscratch w = {malloc(sizeof(int) * n),
                      malloc(sizeof(long) * (size_t)ev->g.nnodes),
                      {0, malloc(sizeof(int) * n), malloc(sizeof(int) * n),
                       malloc(sizeof(long) * n), malloc(sizeof(long) * n), 0, 0, 0, 0}};
        if (!w.starts || !w.earliest || !w.x.op || !w.x.k || !w.x.d || !w.x.save)
            rc = FAIL(err, PRS_ENOMEM, "out of memory");
        /* every merge removes a change: the sweeps end */
        for (int more = !rc; more && !rc;) {
            more = 0;
            for (int s = 0; s < ev->pipe.stages && !rc; s++)
                while (!rc && merge_one(ev, clocks, &w, s, t, e)) {
                    rc = evaluate(ev, clocks, &t, &e, err);
                    more = 1;
                }
        }
        free(w.starts);
        free(w.earliest);
        free(w.x.op);
        free(w.x.k);
        free(w.x.d);
        free(w.x.save);
    }
    if (!rc && T) *T = t;
    if (!rc && energy_j) *energy_j = e;
    return rc;
}

/* The runs of GPU stage around position pos, where a change is (cyclic): the run that starts
 * there (*rs, *rlen) and the run before it (*ls, *llen). */
static void runs_around(const prs_eval *ev, const int *clocks, int stage, int pos, int *ls,
                        int *llen, int *rlen)
{
    int n = ev->g.ops_per_stage, i = 1, j = 1;
    while (i < n && !prs__op_changes(&ev->g, clocks, op_at(ev, stage, pos + i)))
        i++;
    while (j < n && !prs__op_changes(&ev->g, clocks, op_at(ev, stage, pos - j)))
        j++;
    *rlen = i;
    *ls = pos - j;
    *llen = j;
}

/* Set len computations of GPU stage from position start to freq, where every one of them has it
 * profiled: 1 when set. */
static int set_run(const prs_eval *ev, int *clocks, int stage, int start, int len, int freq)
{
    for (int i = 0; i < len; i++) {
        int op = op_at(ev, stage, start + i);
        if (prs__table_find(&ev->t, ev->g.op_type[op], freq) < 0) return 0;
    }
    for (int i = 0; i < len; i++)
        clocks[op_at(ev, stage, start + i)] = freq;
    return 1;
}

/* One round of merges toward speed on the plan ev evaluated last (clocks): at every change on
 * the critical path, the slower of the two runs it separates (by clock) takes the faster's
 * clock. Returns the merges made. crit: scratch, one per op. */
static int speed_round(prs_eval *ev, int *clocks, unsigned char *crit)
{
    const prs__graph_graph *g = &ev->g;
    prs__graph_cpm(g, ev->dur, ev->earliest, ev->latest);
    for (int op = 0; op < g->nops; op++) {
        const prs__graph_arc *a = &g->arcs[g->op_arc[op]];
        crit[op] = ev->earliest[a->from] + ev->dur[op] == ev->latest[a->to];
    }
    int n = g->ops_per_stage, merges = 0;
    for (int op = 0; op < g->nops; op++) {
        if (!crit[op] || !prs__op_changes(g, clocks, op)) continue;
        int stage = op / n, pos = op % n, ls, llen, rlen;
        runs_around(ev, clocks, stage, pos, &ls, &llen, &rlen);
        int fl = clocks[op_at(ev, stage, pos - 1)], fr = clocks[op];
        merges += fl > fr ? set_run(ev, clocks, stage, pos, rlen, fl)
                          : set_run(ev, clocks, stage, ls, llen, fr);
    }
    return merges;
}

/* Shorten a plan toward target units by rounds of speed_round while each shortens it (energy
 * may rise), then prs__changes_merge. save and crit: scratch, one per op. */
static int speed_up(prs_eval *ev, int *clocks, long target, int *save, unsigned char *crit, long *T,
                    double *E, prs_error *err)
{
    size_t nops = (size_t)ev->g.nops;
    int rc = prs__table_lookup(ev, clocks, err);
    if (rc) return rc;
    double e;
    long t = prs__table_run(ev, &e);
    while (t > target) {
        memcpy(save, clocks, sizeof *save * nops);
        long t1 = speed_round(ev, clocks, crit) == 0 || prs__table_lookup(ev, clocks, NULL)
                      ? t
                      : prs__table_run(ev, &e);
        if (t1 >= t) {
            memcpy(clocks, save, sizeof *save * nops);
            break;
        }
        t = t1;
    }
    return prs__changes_merge(ev, clocks, T, E, err);
}

/* A frontier being written: its plans are stored as changes from the last one (prev). */
typedef struct sink {
    prs_frontier *f;
    int *prev;
} sink;

static int sink_open(sink *k, const prs_frontier *like)
{
    size_t nops = (size_t)like->nops;
    k->f = prs__frontier_new(&like->pipe, like->model, like->base);
    k->prev = malloc(sizeof *k->prev * nops);
    if (!k->f || !k->prev) return PRS_ENOMEM;
    memcpy(k->prev, like->base, sizeof *k->prev * nops);
    return 0;
}

static void sink_close(sink *k)
{
    prs_frontier_free(k->f);
    free(k->prev);
    k->f = NULL;
    k->prev = NULL;
}

/* Scratch of merged(): per op. */
typedef struct work {
    int *cur, *a, *b, *save, *chg_op, *chg_freq;
    unsigned char *crit;
    int same;          /* the point's plan and time are the last point's: its results stand */
    long last, ta, tb; /* the last point's time without costs, and its results' */
    double ea, eb;
} work;

static void work_free(work *w)
{
    free(w->cur);
    free(w->a);
    free(w->b);
    free(w->save);
    free(w->chg_op);
    free(w->chg_freq);
    free(w->crit);
}

static int work_alloc(work *w, size_t nops)
{
    int **arr[] = {&w->cur, &w->a, &w->b, &w->save, &w->chg_op, &w->chg_freq};
    memset(w, 0, sizeof *w);
    for (size_t i = 0; i < sizeof arr / sizeof arr[0]; i++)
        if (!(*arr[i] = malloc(sizeof(int) * nops))) return PRS_ENOMEM;
    return (w->crit = malloc(nops)) ? 0 : PRS_ENOMEM;
}

/* plan into k as point pt, stored as its changes from k's last plan. */
static int push_diff(sink *k, work *w, const prs_frontier_point *pt, const int *plan)
{
    size_t nchg = 0;
    for (int op = 0; op < k->f->nops; op++)
        if (plan[op] != k->prev[op]) {
            w->chg_op[nchg] = op;
            w->chg_freq[nchg++] = plan[op];
            k->prev[op] = plan[op];
        }
    return prs__frontier_push(k->f, pt, w->chg_op, w->chg_freq, nchg);
}

/* Point pt's plan w->cur, merged (A), and, where the changes made it slower than pt's evaluated
 * time without costs, also sped up toward that time (B, speed_up): the one no faster
 * plan beats (B when it is no slower and, charged blocking power up to A's time, no costlier)
 * into c, the other into x (NULL: none). */
static int merge_point(prs_eval *ev, work *w, prs_frontier_point pt, sink *c, sink *x,
                       prs_error *err)
{
    const prs_pipeline *p = &ev->pipe;
    size_t nops = (size_t)ev->g.nops;
    long target = lround(pt.eval_time_s / p->unit_time_s), ta = w->ta, tb = w->tb;
    double ea = w->ea, eb = w->eb;
    int rc = 0;
    if (!w->same || target != w->last) {
        memcpy(w->a, w->cur, sizeof *w->a * nops);
        if ((rc = prs__changes_merge(ev, w->a, &ta, &ea, err))) return rc;
        memcpy(w->b, w->a, sizeof *w->b * nops);
        if ((rc = prs__changes_reclaim(ev, w->a, &ta, &ea, err))) return rc;
        if (ta > target && ((rc = speed_up(ev, w->b, target, w->save, w->crit, &tb, &eb, err)) ||
                            (rc = prs__changes_reclaim(ev, w->b, &tb, &eb, err))))
            return rc;
        w->last = target;
        w->ta = ta;
        w->tb = tb;
        w->ea = ea;
        w->eb = eb;
    }
    int two = ta > target && memcmp(w->a, w->b, sizeof *w->a * nops) != 0;
    double bw = (double)p->stages * p->blocking_power_w * p->unit_time_s;
    int b_first = two && tb <= ta && eb + bw * (double)(ta - tb) <= ea + CHANGES_REL_TOL * ea;
    prs_frontier_point pa = pt, pb = pt;
    pa.eval_time_s = (double)ta * p->unit_time_s;
    pa.eval_energy_j = ea;
    pb.eval_time_s = (double)tb * p->unit_time_s;
    pb.eval_energy_j = eb;
    if ((rc = push_diff(c, w, b_first ? &pb : &pa, b_first ? w->b : w->a))) return rc;
    if (two && x) rc = push_diff(x, w, b_first ? &pa : &pb, b_first ? w->a : w->b);
    return rc;
}

/* Points between two calls of the progress callback (a point costs a few passes over the
 * schedule graph). */
#define CHANGES_TICK_POINTS 32

/* Every plan of f through merge_point into c and x (may be NULL); the progress callback of tick
 * called with (total, total) every CHANGES_TICK_POINTS points: PRS_ECANCELED when it asks to
 * stop. */
static int merged(prs_eval *ev, const prs_frontier *f, sink *c, sink *x, const prs__tick *tick,
                  long total, prs_error *err)
{
    size_t nops = (size_t)f->nops;
    work w;
    int rc = work_alloc(&w, nops);
    if (!rc) memcpy(w.cur, f->base, sizeof *w.cur * nops);
    for (size_t k = 0; !rc && k < f->npoints; k++) {
        for (size_t i = f->dstart[k]; i < f->dstart[k + 1]; i++)
            w.cur[f->dop[i]] = f->dfreq[i];
        w.same = k > 0 && f->dstart[k] == f->dstart[k + 1];
        rc = merge_point(ev, &w, f->pts[k], c, x, err);
        if (!rc && tick && tick->fn && k % CHANGES_TICK_POINTS == CHANGES_TICK_POINTS - 1 &&
            tick->fn(tick->ud, total, total))
            rc = FAIL(err, PRS_ECANCELED, "planning canceled charging clock changes");
    }
    work_free(&w);
    return rc;
}

int prs__changes_frontiers(prs_eval *ev, prs_frontier **f, prs_frontier **tracks, int clean,
                           const prs__tick *tick, long total, prs_error *err)
{
    if (ev->pipe.change_cost_s <= 0) return 0;
    sink c = {NULL, NULL}, x = {NULL, NULL};
    int rc = sink_open(&c, *f);
    if (!rc && clean) rc = sink_open(&x, *f);
    if (!rc) rc = merged(ev, *f, &c, clean ? &x : NULL, tick, total, err);
    if (!rc && clean && *tracks) rc = merged(ev, *tracks, &x, &x, tick, total, err);
    if (!rc) {
        prs_frontier_free(*f);
        *f = c.f;
        c.f = NULL;
        if (clean) {
            prs_frontier_free(*tracks);
            *tracks = x.f;
            x.f = NULL;
        }
    }
    sink_close(&c);
    sink_close(&x);
    return rc == PRS_ENOMEM ? FAIL(err, rc, "out of memory charging clock changes") : rc;
}
