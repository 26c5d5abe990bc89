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
