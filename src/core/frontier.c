/* Frontier storage and queries: points, compact plans, lookup by time (frontier_int.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "frontier_int.h"

prs_frontier *prs__frontier_new(const prs_pipeline *pipe, prs_cost_model model, const int *base)
{
    prs_frontier *f = calloc(1, sizeof *f);
    if (!f) return NULL;
    f->pipe = *pipe;
    f->model = model;
    f->nops = pipe->stages * prs_ops_per_stage(pipe);
    f->base = malloc(sizeof *f->base * (size_t)f->nops);
    f->dstart = malloc(sizeof *f->dstart);
    if (!f->base || !f->dstart) {
        prs_frontier_free(f);
        return NULL;
    }
    memcpy(f->base, base, sizeof *f->base * (size_t)f->nops);
    f->dstart[0] = 0;
    return f;
}

/* Grow the point arrays (pts, dstart) and the change arrays (dop, dfreq) in step. */
int prs__frontier_push(prs_frontier *f, const prs_frontier_point *pt, const int *ops,
                       const int *freqs, size_t nchanges)
{
    if (f->npoints + 1 > f->cap_points) {
        size_t nc = f->cap_points ? 2 * f->cap_points : 64;
        prs_frontier_point *p = realloc(f->pts, nc * sizeof *p);
        if (!p) return PRS_ENOMEM;
        f->pts = p;
        size_t *d = realloc(f->dstart, (nc + 1) * sizeof *d);
        if (!d) return PRS_ENOMEM;
        f->dstart = d;
        f->cap_points = nc;
    }
    if (f->ndelta + nchanges > f->cap_delta) {
        size_t nc = f->cap_delta ? 2 * f->cap_delta : 256;
        while (nc < f->ndelta + nchanges)
            nc *= 2;
        int *o = realloc(f->dop, nc * sizeof *o);
        if (!o) return PRS_ENOMEM;
        f->dop = o;
        int *q = realloc(f->dfreq, nc * sizeof *q);
        if (!q) return PRS_ENOMEM;
        f->dfreq = q;
        f->cap_delta = nc;
    }
    if (nchanges) {
        memcpy(f->dop + f->ndelta, ops, sizeof *ops * nchanges);
        memcpy(f->dfreq + f->ndelta, freqs, sizeof *freqs * nchanges);
    }
    f->ndelta += nchanges;
    f->pts[f->npoints++] = *pt;
    f->dstart[f->npoints] = f->ndelta;
    return 0;
}

void prs_frontier_free(prs_frontier *f)
{
    if (!f) return;
    free(f->base);
    free(f->pts);
    free(f->dstart);
    free(f->dop);
    free(f->dfreq);
    free(f);
}

size_t prs_frontier_size(const prs_frontier *f)
{
    return f ? f->npoints : 0;
}

const prs_frontier_point *prs_frontier_point_at(const prs_frontier *f, size_t k)
{
    return f && k < f->npoints ? &f->pts[k] : NULL;
}

const prs_pipeline *prs_frontier_pipeline(const prs_frontier *f)
{
    return &f->pipe;
}

prs_cost_model prs_frontier_cost_model(const prs_frontier *f)
{
    return f->model;
}

int prs_frontier_plan(const prs_frontier *f, size_t k, int *clocks_mhz, prs_error *err)
{
    if (k >= f->npoints)
        return prs_error_set(err, PRS_ERANGE, "plan index %zu out of range (the frontier has %zu)",
                             k, f->npoints);
    memcpy(clocks_mhz, f->base, sizeof *clocks_mhz * (size_t)f->nops);
    for (size_t i = 0; i < f->dstart[k + 1]; i++)
        clocks_mhz[f->dop[i]] = f->dfreq[i];
    return 0;
}

int prs_frontier_find_time(const prs_frontier *f, double time_s, size_t *k, prs_error *err)
{
    size_t best = (size_t)-1;
    for (size_t i = 0; i < f->npoints; i++) {
        const prs_frontier_point *p = &f->pts[i];
        if (p->eval_time_s > time_s + PRS_TIME_TOL_S) continue;
        if (best == (size_t)-1 || p->eval_energy_j < f->pts[best].eval_energy_j) best = i;
    }
    if (best == (size_t)-1) {
        double fastest = INFINITY;
        for (size_t i = 0; i < f->npoints; i++)
            if (f->pts[i].eval_time_s < fastest) fastest = f->pts[i].eval_time_s;
        return prs_error_set(err, PRS_ERANGE,
                             "no plan meets %.6g s (the fastest plan takes %.6g s)", time_s,
                             fastest);
    }
    *k = best;
    return 0;
}

int prs_frontier_lookup(const prs_frontier *f, double straggler_time_s, size_t *k)
{
    if (f->npoints == 0) return PRS_ERANGE;
    size_t fastest = 0;
    for (size_t i = 1; i < f->npoints; i++) {
        const prs_frontier_point *p = &f->pts[i], *b = &f->pts[fastest];
        if (p->eval_time_s < b->eval_time_s ||
            (p->eval_time_s == b->eval_time_s && p->eval_energy_j < b->eval_energy_j))
            fastest = i;
    }
    *k = fastest;
    if (!(straggler_time_s > f->pts[fastest].eval_time_s)) return 0;
    double block_w = (double)f->pipe.stages * f->pipe.blocking_power_w, best = INFINITY;
    for (size_t i = 0; i < f->npoints; i++) {
        const prs_frontier_point *p = &f->pts[i];
        if (p->eval_time_s > straggler_time_s + PRS_TIME_TOL_S) continue;
        double e = p->eval_energy_j + block_w * (straggler_time_s - p->eval_time_s);
        if (e < best) {
            best = e;
            *k = i;
        }
    }
    return 0;
}

/* ---- The clean frontier (docs/planner.md, 'Clean frontier') ---- */

typedef struct clean_key {
    double time_s; /* evaluated */
    double adj_j;  /* evaluated energy - stages * P_block * time: what a faster plan is charged
                      less for the blocking until a slower one ends */
    double mag_j;  /* |energy| + |blocking term|, for the rounding tolerance */
    size_t src, k; /* frontier src's point k */
} clean_key;

static int by_time_adj_index(const void *x, const void *y)
{
    const clean_key *a = x, *b = y;
    if (a->time_s != b->time_s) return a->time_s < b->time_s ? -1 : 1;
    if (a->adj_j != b->adj_j) return a->adj_j < b->adj_j ? -1 : 1;
    if (a->src != b->src) return a->src < b->src ? -1 : 1;
    return a->k < b->k ? -1 : a->k > b->k;
}

/* Plan k of f into cur, from the plan at *at (-1: the base) when k is later, else from the base:
 * cleaning visits points mostly in order, so this is mostly one pass over the changes. */
static void seek_plan(const prs_frontier *f, long *at, size_t k, int *cur)
{
    if (*at >= 0 && (size_t)*at > k) *at = -1;
    if (*at < 0) memcpy(cur, f->base, sizeof *cur * (size_t)f->nops);
    size_t from = *at < 0 ? 0 : f->dstart[*at + 1];
    for (size_t i = from; i < f->dstart[k + 1]; i++)
        cur[f->dop[i]] = f->dfreq[i];
    *at = (long)k;
}

/* Every point of the nf frontiers as a key, sorted fastest first; n: how many. */
static clean_key *clean_keys(const prs_frontier *const *fs, size_t nf, size_t *n)
{
    *n = 0;
    for (size_t s = 0; s < nf; s++)
        *n += fs[s]->npoints;
    clean_key *key = malloc(sizeof *key * (*n ? *n : 1));
    if (!key) return NULL;
    double bw = (double)fs[0]->pipe.stages * fs[0]->pipe.blocking_power_w;
    size_t i = 0;
    for (size_t s = 0; s < nf; s++)
        for (size_t k = 0; k < fs[s]->npoints; k++, i++) {
            const prs_frontier_point *p = &fs[s]->pts[k];
            key[i].time_s = p->eval_time_s;
            key[i].adj_j = p->eval_energy_j - bw * p->eval_time_s;
            key[i].mag_j = fabs(p->eval_energy_j) + fabs(bw * p->eval_time_s);
            key[i].src = s;
            key[i].k = k;
        }
    qsort(key, *n, sizeof *key, by_time_adj_index);
    return key;
}

int prs__frontier_clean_union(const prs_frontier *const *fs, size_t nf, prs_frontier **out,
                              prs_error *err)
{
    *out = NULL;
    size_t n = 0, nops = (size_t)fs[0]->nops, nkeep = 0;
    clean_key *key = clean_keys(fs, nf, &n);
    int *cur = malloc(sizeof *cur * nops * nf), *prev = malloc(sizeof *prev * nops);
    int *chg_op = malloc(sizeof *chg_op * nops), *chg_freq = malloc(sizeof *chg_freq * nops);
    long *at = malloc(sizeof *at * nf);
    prs_frontier *c = prs__frontier_new(&fs[0]->pipe, fs[0]->model, fs[0]->base);
    int rc = PRS_ENOMEM;
    if (!key || !cur || !prev || !chg_op || !chg_freq || !at || !c) goto out;
    /* Fastest first: a plan stays when it beats every faster (or equally fast, earlier) plan by
     * more than rounding; keep[] gathers the survivors in place, fastest first. */
    double best = INFINITY, best_mag = 0;
    for (size_t i = 0; i < n; i++) {
        double tol = PRS_CLEAN_REL_TOL * (best_mag + key[i].mag_j);
        if (key[i].adj_j < best - tol) key[nkeep++] = key[i];
        if (key[i].adj_j < best) {
            best = key[i].adj_j;
            best_mag = key[i].mag_j;
        }
    }
    memcpy(prev, fs[0]->base, sizeof *prev * nops);
    for (size_t s = 0; s < nf; s++)
        at[s] = -1;
    for (size_t i = nkeep; i-- > 0;) { /* slowest first */
        size_t s = key[i].src, k = key[i].k, nchg = 0;
        int *plan = cur + s * nops;
        seek_plan(fs[s], &at[s], k, plan);
        for (size_t op = 0; op < nops; op++)
            if (plan[op] != prev[op]) {
                chg_op[nchg] = (int)op;
                chg_freq[nchg++] = plan[op];
                prev[op] = plan[op];
            }
        if (prs__frontier_push(c, &fs[s]->pts[k], chg_op, chg_freq, nchg)) goto out;
    }
    *out = c;
    c = NULL;
    rc = 0;
out:
    free(key);
    free(cur);
    free(prev);
    free(chg_op);
    free(chg_freq);
    free(at);
    prs_frontier_free(c);
    return rc ? prs_error_set(err, rc, "out of memory cleaning the frontier") : 0;
}

int prs_frontier_clean(const prs_frontier *f, prs_frontier **out, prs_error *err)
{
    return prs__frontier_clean_union(&f, 1, out, err);
}
