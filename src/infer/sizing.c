/* Exact pool sizing by dynamic programming (sizing.h). */
#include "sizing.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define UNITS_STRIDE (PRS_INFER_MAX_UNITS + 1)

int prs_infer_pool_model_build(const prs_infer_captable *t, int k, unsigned tp_mask, int clock_knob,
                               int units_top, double max_util, prs_infer_pool_model *m,
                               prs_error *err)
{
    memset(m, 0, sizeof *m);
    if (!(max_util > 0 && max_util <= 1))
        return prs_error_set(err, PRS_EINVAL, "utilisation bound must be in (0, 1]");
    if (units_top < 1 || units_top > PRS_INFER_MAX_UNITS)
        return prs_error_set(err, PRS_EINVAL, "units per instance must be in 1..%d",
                             PRS_INFER_MAX_UNITS);
    int f0 = clock_knob ? 0 : t->n_clocks - 1, top = t->n_clocks - 1;
    double best = 0;
    for (int a = 0; a < t->n_tps; a++)
        if (tp_mask & (1u << a))
            for (int f = f0; f <= top; f++)
                if (t->cap[k][a][f].rate_rps * max_util > best)
                    best = t->cap[k][a][f].rate_rps * max_util;
    if (!(best > 0))
        return prs_error_set(err, PRS_EINVAL,
                             "class %s: no configuration (TP, clock) allowed meets its SLOs",
                             prs_infer_class_name(k));
    m->unit_rps = best / units_top;
    for (int a = 0; a < t->n_tps; a++) {
        if (!(tp_mask & (1u << a))) continue;
        int n = m->n_types;
        m->tp[n] = t->tps[a];
        double cap = 0;
        for (int f = f0; f <= top; f++)
            if (t->cap[k][a][f].rate_rps * max_util > cap)
                cap = t->cap[k][a][f].rate_rps * max_util;
        m->units[n] = (int)floor(cap / m->unit_rps + 1e-9);
        if (m->units[n] > PRS_INFER_MAX_UNITS) m->units[n] = PRS_INFER_MAX_UNITS;
        for (int j = 0; j <= m->units[n]; j++) {
            double r = j * m->unit_rps, pw = INFINITY;
            int fi = top;
            for (int f = f0; f <= top; f++) {
                const prs_infer_cap *c = &t->cap[k][a][f];
                if (j > 0 && c->rate_rps * max_util < r * (1 - 1e-9)) continue;
                double p = prs_infer_cap_power(c, r);
                if (p < pw) {
                    pw = p;
                    fi = f;
                }
            }
            m->power_w[n][j] = pw;
            m->clock_of[n][j] = fi;
        }
        if (m->units[n] > 0) m->n_types++;
    }
    return PRS_OK;
}

static size_t cell(const prs_infer_pool_table *t, int g, int k)
{
    return (size_t)g * (size_t)(t->kmax + 1) + (size_t)k;
}

int prs_infer_pool_table_build(const prs_infer_pool_model *m, int gpus, prs_infer_pool_table *out,
                               prs_error *err)
{
    memset(out, 0, sizeof *out);
    if (gpus < 0 || gpus > 100000)
        return prs_error_set(err, PRS_EINVAL, "GPUs must be in 0..100000 (got %d)", gpus);
    out->m = *m;
    out->gpus = gpus;
    for (int a = 0; a < m->n_types; a++) {
        int k = gpus / m->tp[a] * m->units[a];
        if (k > out->kmax) out->kmax = k;
    }
    size_t n = (size_t)(gpus + 1) * (size_t)(out->kmax + 1);
    out->exact = malloc(n * sizeof *out->exact);
    out->atmost = malloc(n * sizeof *out->atmost);
    out->choice = malloc(n * sizeof *out->choice);
    out->atmost_g = malloc(n * sizeof *out->atmost_g);
    if (!out->exact || !out->atmost || !out->choice || !out->atmost_g) {
        prs_infer_pool_table_free(out);
        return prs_error_set(err, PRS_ENOMEM, "out of memory for the sizing table");
    }
    for (int g = 0; g <= gpus; g++)
        for (int k = 0; k <= out->kmax; k++) {
            double best = g == 0 && k == 0 ? 0 : INFINITY;
            int arg = -1;
            for (int a = 0; a < m->n_types; a++) {
                if (m->tp[a] > g) continue;
                for (int j = 0; j <= m->units[a] && j <= k; j++) {
                    double v = out->exact[cell(out, g - m->tp[a], k - j)] + m->power_w[a][j];
                    if (v < best) {
                        best = v;
                        arg = a * UNITS_STRIDE + j;
                    }
                }
            }
            out->exact[cell(out, g, k)] = best;
            out->choice[cell(out, g, k)] = arg;
            double prev = g > 0 ? out->atmost[cell(out, g - 1, k)] : INFINITY;
            int prev_g = g > 0 ? out->atmost_g[cell(out, g - 1, k)] : -1;
            out->atmost[cell(out, g, k)] = best <= prev ? best : prev;
            out->atmost_g[cell(out, g, k)] = best <= prev ? g : prev_g;
        }
    return PRS_OK;
}

void prs_infer_pool_table_free(prs_infer_pool_table *t)
{
    free(t->exact);
    free(t->atmost);
    free(t->choice);
    free(t->atmost_g);
    memset(t, 0, sizeof *t);
}

int prs_infer_pool_units(const prs_infer_pool_table *t, double rate_rps)
{
    if (!(rate_rps > 0)) return 0;
    double k = ceil(rate_rps / t->m.unit_rps - 1e-9);
    return k > 1e9 ? 1000000000 : (int)k;
}

double prs_infer_pool_atmost(const prs_infer_pool_table *t, int g, int k)
{
    if (g < 0 || k < 0 || k > t->kmax) return INFINITY;
    if (g > t->gpus) g = t->gpus;
    return t->atmost[cell(t, g, k)];
}

double prs_infer_pool_exact(const prs_infer_pool_table *t, int g, int k)
{
    if (g < 0 || g > t->gpus || k < 0 || k > t->kmax) return INFINITY;
    return t->exact[cell(t, g, k)];
}

int prs_infer_pool_instances(const prs_infer_pool_table *t, int g, int k, int count[],
                             int loads_type[], int loads_units[], int cap)
{
    for (int a = 0; a < t->m.n_types; a++)
        count[a] = 0;
    if (!isfinite(prs_infer_pool_exact(t, g, k))) return -1;
    int n = 0;
    while (g > 0) {
        int c = t->choice[cell(t, g, k)];
        if (c < 0) return -1;
        int a = c / UNITS_STRIDE, j = c % UNITS_STRIDE;
        count[a]++;
        if (n < cap) {
            loads_type[n] = a;
            loads_units[n] = j;
        }
        n++;
        g -= t->m.tp[a];
        k -= j;
    }
    return n;
}

double prs_infer_cluster_split(const prs_infer_pool_table *const *tables, const int *k, int npools,
                               int gpus, int *g)
{
    size_t w = (size_t)gpus + 1;
    double *f = malloc((size_t)(npools + 1) * w * sizeof *f);
    int *arg = calloc((size_t)(npools + 1) * w, sizeof *arg);
    if (!f || !arg) {
        free(f);
        free(arg);
        return INFINITY;
    }
    for (size_t x = 0; x < w; x++)
        f[x] = 0;
    for (int c = 0; c < npools; c++)
        for (int x = 0; x <= gpus; x++) {
            double best = INFINITY;
            int bg = -1;
            for (int gc = 0; gc <= x; gc++) {
                double v = f[(size_t)c * w + (size_t)(x - gc)] +
                           prs_infer_pool_atmost(tables[c], gc, k[c]);
                if (v < best) {
                    best = v;
                    bg = gc;
                }
            }
            f[(size_t)(c + 1) * w + (size_t)x] = best;
            arg[(size_t)(c + 1) * w + (size_t)x] = bg;
        }
    double total = f[(size_t)npools * w + (size_t)gpus];
    int x = gpus;
    for (int c = npools - 1; c >= 0; c--) {
        int gc = isfinite(total) ? arg[(size_t)(c + 1) * w + (size_t)x] : 0;
        /* The pool takes only the GPUs its optimum uses (atmost_g), not the slack. */
        g[c] = isfinite(total) ? tables[c]->atmost_g[cell(tables[c], gc, k[c])] : 0;
        x -= gc;
    }
    free(f);
    free(arg);
    return total;
}
