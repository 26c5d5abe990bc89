/* Operation types: candidate options and their cost models (docs/planner.md, 'Options').
 *
 * All forwards of a stage share one option set and one cost model; so do all backwards. Two
 * models are built here:
 *   exp  - the reference's: filter options by raw (time, energy) dominance, keep the most
 *          expensive option per quantized time, fit C(d) = a exp(b d) + c to effective costs.
 *          With the Zeus filter (prs_plan_opts.option_filter), dominance is judged on effective
 *          cost instead, as Zeus master's planner does (it subtracts blocking power first).
 *   hull - ours: every profiled clock, effective cost e - P_block q tau, the lower convex hull
 *          over quantized time, linear in between. No fit, so nothing can fail to converge; and
 *          since it filters on effective rather than raw energy it keeps slow, low-clock options
 *          that are cheapest for computations with slack (the reference's main loss).
 * Either way the planner sees the same thing: integer durations d in [q_min, q_max] with tables
 * C(d), u(d) (shortening cost), l(d) (lengthening saving) and knob(d) (the clock to run). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "perseus/numfmt.h"
#include "plan_int.h"

long prs__model_quantize(double time_s, double unit_s)
{
    double q = prs_num_py_floordiv(time_s, unit_s);
    /* checked: a conversion of a double beyond the long range would be undefined */
    return q >= 0 && q <= PRS_MAX_TIME_UNITS ? (long)q : -1;
}

/* Stable merge sort of candidate indices by a key; order[] is permuted. */
typedef int (*cand_cmp)(const prs__model_cand *x, const prs__model_cand *y);

static void stable_sort(prs__model_cand *v, int n, cand_cmp cmp)
{
    if (n < 2) return;
    prs__model_cand *tmp = malloc(sizeof *tmp * (size_t)n);
    if (!tmp) { /* insertion sort fallback: still stable */
        for (int i = 1; i < n; i++) {
            prs__model_cand x = v[i];
            int j = i - 1;
            while (j >= 0 && cmp(&v[j], &x) > 0) {
                v[j + 1] = v[j];
                j--;
            }
            v[j + 1] = x;
        }
        return;
    }
    for (int width = 1; width < n; width *= 2) {
        for (int lo = 0; lo < n; lo += 2 * width) {
            int mid = lo + width < n ? lo + width : n;
            int hi = lo + 2 * width < n ? lo + 2 * width : n;
            int i = lo, j = mid, k = lo;
            while (i < mid && j < hi)
                tmp[k++] = cmp(&v[j], &v[i]) < 0 ? v[j++] : v[i++];
            while (i < mid)
                tmp[k++] = v[i++];
            while (j < hi)
                tmp[k++] = v[j++];
        }
        memcpy(v, tmp, sizeof *v * (size_t)n);
    }
    free(tmp);
}

static int by_time_desc(const prs__model_cand *x, const prs__model_cand *y)
{
    return (x->time_s < y->time_s) - (x->time_s > y->time_s);
}
static int by_energy_desc(const prs__model_cand *x, const prs__model_cand *y)
{
    return (x->energy_j < y->energy_j) - (x->energy_j > y->energy_j);
}
static int by_q_desc(const prs__model_cand *x, const prs__model_cand *y)
{
    return (x->q < y->q) - (x->q > y->q);
}
static int by_q_asc(const prs__model_cand *x, const prs__model_cand *y)
{
    return (x->q > y->q) - (x->q < y->q);
}

static double effective_cost(double energy_j, long q, double unit_s, double p_block_w)
{
    return energy_j - p_block_w * (double)q * unit_s;
}

/* The key the filter compares options by: measured energy (the artifact), or effective cost
 * (Zeus master, which subtracts blocking power from every option before filtering). */
static double filter_key(const prs__model_cand *c, prs_option_filter filter)
{
    return filter == PRS_FILTER_ZEUS ? c->cost_j : c->energy_j;
}

static int by_cost_desc(const prs__model_cand *x, const prs__model_cand *y)
{
    return (x->cost_j < y->cost_j) - (x->cost_j > y->cost_j);
}

static int filter_once(const prs__model_cand *all, int n, double nf, prs_option_filter filter,
                       prs__model_cand *out)
{
    prs__model_cand *v = malloc(sizeof *v * (size_t)n);
    if (!v) return -1;
    memcpy(v, all, sizeof *v * (size_t)n);
    stable_sort(v, n, by_time_desc);
    int kept = 0;
    for (int i = 0; i < n; i++) {
        int dominated = 0;
        double key = nf * filter_key(&v[i], filter);
        for (int j = 0; j < n && !dominated; j++)
            if (all[j].time_s < nf * v[i].time_s && filter_key(&all[j], filter) < key)
                dominated = 1;
        if (!dominated) v[kept++] = v[i];
    }
    stable_sort(v, kept, filter == PRS_FILTER_ZEUS ? by_cost_desc : by_energy_desc);
    int m = 0;
    for (int i = 0; i < kept; i++) {
        int seen = 0;
        for (int j = 0; j < m && !seen; j++)
            seen = out[j].q == v[i].q;
        if (!seen) out[m++] = v[i];
    }
    stable_sort(out, m, by_q_desc);
    free(v);
    return m;
}

int prs__model_reference_candidates(const prs_profile_row *const *rows, int nrows, double unit_s,
                                    double p_block_w, int always_noise, prs_option_filter filter,
                                    prs__model_cand *out)
{
    prs__model_cand *all = malloc(sizeof *all * (size_t)(nrows > 0 ? nrows : 1));
    if (!all) return -1;
    for (int i = 0; i < nrows; i++) {
        all[i].time_s = rows[i]->time_s;
        all[i].energy_j = rows[i]->energy_j;
        all[i].freq_mhz = rows[i]->freq_mhz;
        all[i].q = prs__model_quantize(rows[i]->time_s, unit_s);
        all[i].cost_j = effective_cost(all[i].energy_j, all[i].q, unit_s, p_block_w);
    }
    int m = filter_once(all, nrows, always_noise ? 0.95 : 1.0, filter, out);
    if (m >= 0 && m <= 3 && !always_noise) m = filter_once(all, nrows, 0.95, filter, out);
    free(all);
    return m;
}

/* Lower convex hull of (q, cost) over all options, cut at the cheapest vertex (anything slower
 * than that is slower and costlier in effective energy). out: ascending q. */
static int hull_candidates(const prs_profile_row *const *rows, int nrows, double unit_s,
                           double p_block_w, prs__model_cand *out)
{
    prs__model_cand *v = malloc(sizeof *v * (size_t)(nrows > 0 ? nrows : 1));
    if (!v) return -1;
    for (int i = 0; i < nrows; i++) {
        v[i].time_s = rows[i]->time_s;
        v[i].energy_j = rows[i]->energy_j;
        v[i].freq_mhz = rows[i]->freq_mhz;
        v[i].q = prs__model_quantize(rows[i]->time_s, unit_s);
        v[i].cost_j = effective_cost(v[i].energy_j, v[i].q, unit_s, p_block_w);
    }
    stable_sort(v, nrows, by_q_asc);
    /* Cheapest option per quantized time (ties: the faster measured time). */
    int m = 0;
    for (int i = 0; i < nrows; i++) {
        if (m > 0 && v[m - 1].q == v[i].q) {
            if (v[i].cost_j < v[m - 1].cost_j ||
                (v[i].cost_j == v[m - 1].cost_j && v[i].time_s < v[m - 1].time_s))
                v[m - 1] = v[i];
        } else {
            v[m++] = v[i];
        }
    }
    /* Monotone-chain lower hull, left (fast) to right (slow). */
    int h = 0;
    for (int i = 0; i < m; i++) {
        while (h >= 2) {
            const prs__model_cand *p0 = &out[h - 2], *p1 = &out[h - 1];
            double cross = (double)(p1->q - p0->q) * (v[i].cost_j - p0->cost_j) -
                           (p1->cost_j - p0->cost_j) * (double)(v[i].q - p0->q);
            if (cross <= 0)
                h--; /* p1 on or above the chord p0 -> v[i] */
            else
                break;
        }
        out[h++] = v[i];
    }
    int best = 0;
    for (int i = 1; i < h; i++)
        if (out[i].cost_j < out[best].cost_j) best = i;
    free(v);
    return best + 1;
}

/* Tables for the hull model: slopes are computed once per segment so that u(d) and l(d) are
 * bit-identical inside a segment (the min cut relies on exact ties there). */
static void fill_hull_tables(prs__model_optype *t)
{
    long span = t->q_max - t->q_min;
    for (int k = 0; k + 1 < t->ncand; k++) {
        const prs__model_cand *f = &t->cand[k], *s = &t->cand[k + 1];
        double slope = (f->cost_j - s->cost_j) / (double)(s->q - f->q); /* >= 0 */
        for (long d = f->q; d <= s->q; d++) {
            long i = d - t->q_min;
            t->cost[i] = f->cost_j - slope * (double)(d - f->q);
            if (d > f->q) t->up[i] = slope;
            if (d < s->q) t->down[i] = slope;
        }
        t->cost[s->q - t->q_min] = s->cost_j;
        t->cost[f->q - t->q_min] = f->cost_j;
    }
    if (t->ncand == 1) t->cost[0] = t->cand[0].cost_j;
    t->up[0] = 0;
    t->down[span] = 0;
}

static void fill_exp_tables(prs__model_optype *t)
{
    long span = t->q_max - t->q_min;
    for (long i = 0; i <= span; i++) {
        double d = (double)(t->q_min + i);
        t->cost[i] = t->a * exp(t->b * d) + t->c;
    }
    for (long i = 0; i <= span; i++) {
        double d = (double)(t->q_min + i);
        double below = t->a * exp(t->b * (d - 1)) + t->c;
        double above = t->a * exp(t->b * (d + 1)) + t->c;
        t->up[i] = fabs(below - t->cost[i]);
        t->down[i] = fabs(t->cost[i] - above);
    }
}

static void fill_knobs(prs__model_optype *t)
{
    long span = t->q_max - t->q_min;
    int k = 0; /* candidates ascending in q: largest q <= d */
    for (long i = 0; i <= span; i++) {
        long d = t->q_min + i;
        while (k + 1 < t->ncand && t->cand[k + 1].q <= d)
            k++;
        t->knob[i] = t->cand[k].freq_mhz;
    }
}

void prs__model_free(prs__model_optype *t)
{
    if (!t) return;
    free(t->cand);
    free(t->cost);
    free(t->up);
    free(t->down);
    free(t->knob);
    memset(t, 0, sizeof *t);
}

static int same_candidates(const prs__model_optype *x, const prs__model_cand *cand, int n)
{
    if (x->kind != PRS__MODEL_EXP || x->ncand != n) return 0;
    for (int i = 0; i < n; i++)
        if (x->cand[i].q != cand[i].q || x->cand[i].cost_j != cand[i].cost_j) return 0;
    return 1;
}

int prs__model_build(const prs_profile *p, int stage, prs_instr instr, const prs_plan_opts *o,
                     prs__model_optype *t, int *fallback, prs_error *err)
{
    return prs__model_build_memo(p, stage, instr, o, NULL, 0, t, fallback, err);
}

int prs__model_build_memo(const prs_profile *p, int stage, prs_instr instr, const prs_plan_opts *o,
                          const prs__model_optype *done, int ndone, prs__model_optype *t,
                          int *fallback, prs_error *err)
{
    memset(t, 0, sizeof *t);
    *fallback = 0;
    t->stage = stage;
    t->instr = instr;
    size_t nrows_all = prs_profile_nrows(p);
    const prs_profile_row *all = prs_profile_rows(p);
    const prs_profile_row **rows =
        malloc(sizeof(const prs_profile_row *) * (nrows_all ? nrows_all : 1));
    t->cand = malloc(sizeof *t->cand * (nrows_all ? nrows_all : 1));
    if (!rows || !t->cand) {
        free(rows);
        return prs_error_set(err, PRS_ENOMEM, "out of memory building options");
    }
    int n = 0;
    for (size_t i = 0; i < nrows_all; i++)
        if (all[i].stage == stage && all[i].instr == instr) rows[n++] = &all[i];
    if (n == 0) {
        free(rows);
        return prs_error_set(err, PRS_EINVAL, "%s: stage %d has no %s rows", prs_profile_name(p),
                             stage, prs_instr_name(instr));
    }
    double unit = o->pipe.unit_time_s, pb = o->pipe.blocking_power_w;
    int m = -1;
    t->kind = o->cost_model == PRS_COST_EXP ? PRS__MODEL_EXP : PRS__MODEL_HULL;
    if (t->kind == PRS__MODEL_EXP) {
        m = prs__model_reference_candidates(rows, n, unit, pb, o->always_noise_factor,
                                            o->option_filter, t->cand);
        if (m < 0) goto nomem;
        /* ascending q for the tables */
        for (int i = 0, j = m - 1; i < j; i++, j--) {
            prs__model_cand x = t->cand[i];
            t->cand[i] = t->cand[j];
            t->cand[j] = x;
        }
        const prs__model_optype *twin = NULL;
        for (int k = 0; k < ndone && !twin; k++)
            if (same_candidates(&done[k], t->cand, m)) twin = &done[k];
        if (twin) {
            t->a = twin->a, t->b = twin->b, t->c = twin->c;
        } else if (m <= 3 || prs__model_fit_exp(t->cand, m, unit, &t->a, &t->b, &t->c) != 0) {
            *fallback = 1;
            prs_error_set(err, PRS_OK,
                          "stage %d %s: %s; using the hull cost model for this computation", stage,
                          prs_instr_name(instr),
                          m <= 3 ? "3 or fewer usable options, too few to fit a curve"
                                 : "no acceptable exponential fit");
            t->kind = PRS__MODEL_HULL;
        }
    }
    if (t->kind == PRS__MODEL_HULL) {
        m = hull_candidates(rows, n, unit, pb, t->cand);
        if (m < 0) goto nomem;
    }
    free(rows);
    rows = NULL;
    t->ncand = m;
    t->q_min = t->cand[0].q;
    t->q_max = t->cand[m - 1].q;
    if (t->q_min < 0 || t->q_max - t->q_min > PRS_MAX_UNIT_SPAN)
        return prs_error_set(err, PRS_EINVAL,
                             "stage %d %s: quantized times %ld..%ld units are out of range; use "
                             "a larger unit time",
                             stage, prs_instr_name(instr), t->q_min, t->q_max);
    size_t span = (size_t)(t->q_max - t->q_min + 1);
    t->cost = calloc(span, sizeof *t->cost);
    t->up = calloc(span, sizeof *t->up);
    t->down = calloc(span, sizeof *t->down);
    t->knob = calloc(span, sizeof *t->knob);
    if (!t->cost || !t->up || !t->down || !t->knob) goto nomem;
    if (t->kind == PRS__MODEL_EXP)
        fill_exp_tables(t);
    else
        fill_hull_tables(t);
    fill_knobs(t);
    return 0;
nomem:
    free(rows);
    return prs_error_set(err, PRS_ENOMEM, "out of memory building options");
}
