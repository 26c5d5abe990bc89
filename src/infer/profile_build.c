/* Inference profile tables from the rows the reader kept (profile.c): the consistency rules of
 * profile.h, checked once, so the interpolation (profile_perf.c) never meets a hole.
 *
 * The rows are sorted by (tp, clock, phase, batch, tokens, line). Capacity rows carry clock 0,
 * so they open each tp's block; after them come the clocks in ascending order, each with its
 * prefill, decode and idle rows. Duplicates end up side by side; a full grid's rows come in
 * row-major order. */
#include <stdlib.h>
#include <string.h>

#include "profile_int.h"

static int cmp_row(const void *a, const void *b)
{
    const prs__infer_row *x = a, *y = b;
    if (x->tp != y->tp) return x->tp < y->tp ? -1 : 1;
    if (x->freq_mhz != y->freq_mhz) return x->freq_mhz < y->freq_mhz ? -1 : 1;
    if (x->phase != y->phase) return x->phase < y->phase ? -1 : 1;
    if (x->batch != y->batch) return x->batch < y->batch ? -1 : 1;
    if (x->tokens != y->tokens) return x->tokens < y->tokens ? -1 : 1;
    return (x->line > y->line) - (x->line < y->line);
}

static int same_key(const prs__infer_row *x, const prs__infer_row *y)
{
    return x->tp == y->tp && x->freq_mhz == y->freq_mhz && x->phase == y->phase &&
           x->batch == y->batch && x->tokens == y->tokens;
}

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

static int cmp_long(const void *a, const void *b)
{
    long x = *(const long *)a, y = *(const long *)b;
    return (x > y) - (x < y);
}

static int oom(prs_error *err, const char *name)
{
    return prs_error_set(err, PRS_ENOMEM, "%s: out of memory", name);
}

/* The duplicate whose second occurrence comes first in the file, reported at that line. */
static int check_duplicates(const char *name, const prs__infer_row *rows, size_t n, prs_error *err)
{
    const prs__infer_row *first = NULL, *second = NULL;
    for (size_t i = 1; i < n; i++)
        if (same_key(&rows[i - 1], &rows[i]) && (!second || rows[i].line < second->line)) {
            first = &rows[i - 1];
            second = &rows[i];
        }
    if (!second) return PRS_OK;
    return prs_error_set(err, PRS_EPARSE,
                         "%s:%d: duplicate %s row for tp %d at %d MHz, batch %d, tokens %ld "
                         "(first on line %d)",
                         name, second->line, prs__infer_phase_name(second->phase), second->tp,
                         second->freq_mhz, second->batch, second->tokens, first->line);
}

/* Distinct sorted values of tp (every row) and clock (every row but capacity rows). */
static int collect_axes(const char *name, const prs__infer_row *rows, size_t n,
                        prs_infer_profile *p, prs_error *err)
{
    p->tps = calloc(n, sizeof *p->tps);
    p->clocks = calloc(n, sizeof *p->clocks);
    if (!p->tps || !p->clocks) return oom(err, name);
    int nclk = 0;
    for (size_t i = 0; i < n; i++) {
        if (i == 0 || rows[i].tp != rows[i - 1].tp) p->tps[p->ntp++] = rows[i].tp;
        if (rows[i].phase != PRS__INFER_CAPACITY) p->clocks[nclk++] = rows[i].freq_mhz;
    }
    qsort(p->clocks, (size_t)nclk, sizeof *p->clocks, cmp_int);
    for (int i = 0; i < nclk; i++)
        if (p->nclk == 0 || p->clocks[p->nclk - 1] != p->clocks[i])
            p->clocks[p->nclk++] = p->clocks[i];
    if (p->nclk == 0)
        return prs_error_set(err, PRS_EPARSE, "%s: no prefill, decode or idle rows", name);
    p->kv_tokens = calloc((size_t)p->ntp, sizeof *p->kv_tokens);
    p->max_batch = calloc((size_t)p->ntp, sizeof *p->max_batch);
    p->pts = calloc((size_t)p->ntp * (size_t)p->nclk, sizeof *p->pts);
    if (!p->kv_tokens || !p->max_batch || !p->pts) return oom(err, name);
    return PRS_OK;
}

/* Fill grid g from the sorted rows of one (tp, clock, phase); they must form a full grid. */
static int build_grid(const char *name, const prs__infer_row *rows, size_t n, prs__infer_grid *g,
                      prs_error *err)
{
    long *tok = malloc(n * sizeof *tok);
    g->batch = malloc(n * sizeof *g->batch);
    if (!tok || !g->batch) {
        free(tok);
        return oom(err, name);
    }
    for (size_t i = 0; i < n; i++) {
        tok[i] = rows[i].tokens;
        if (i == 0 || rows[i].batch != rows[i - 1].batch) g->batch[g->nb++] = rows[i].batch;
    }
    qsort(tok, n, sizeof *tok, cmp_long);
    for (size_t i = 0; i < n; i++)
        if (g->ns == 0 || tok[g->ns - 1] != tok[i]) tok[g->ns++] = tok[i];
    g->tokens = tok;
    /* Walk the grid in row-major order beside the rows: the first mismatch is a hole. */
    size_t k = 0;
    for (int ib = 0; ib < g->nb; ib++)
        for (int is = 0; is < g->ns; is++, k++)
            if (k >= n || rows[k].batch != g->batch[ib] || rows[k].tokens != g->tokens[is])
                return prs_error_set(err, PRS_EPARSE,
                                     "%s: tp %d at %d MHz, %s: no row for batch %d, tokens %ld "
                                     "(every measured batch needs every measured tokens value)",
                                     name, rows[0].tp, rows[0].freq_mhz,
                                     prs__infer_phase_name(rows[0].phase), g->batch[ib],
                                     g->tokens[is]);
    size_t cells = (size_t)g->nb * (size_t)g->ns;
    g->time_s = malloc(cells * sizeof *g->time_s);
    g->energy_j = malloc(cells * sizeof *g->energy_j);
    if (!g->time_s || !g->energy_j) return oom(err, name);
    for (size_t i = 0; i < cells; i++) {
        g->time_s[i] = rows[i].time_s;
        g->energy_j[i] = rows[i].energy_j;
    }
    return PRS_OK;
}

/* One (tp, clock) block of rows (sorted by phase): both grids and the idle power. */
static int build_point(const char *name, const prs__infer_row *rows, size_t n, prs__infer_point *pt,
                       prs_error *err)
{
    size_t start[5] = {0};
    for (int ph = 0, i = 0; ph < 4; ph++) {
        start[ph] = (size_t)i;
        while ((size_t)i < n && rows[i].phase == ph)
            i++;
        start[ph + 1] = (size_t)i;
    }
    for (int ph = 0; ph < 3; ph++)
        if (start[ph + 1] == start[ph])
            return prs_error_set(err, PRS_EPARSE, "%s: tp %d at %d MHz: no %s row", name,
                                 rows[0].tp, rows[0].freq_mhz, prs__infer_phase_name(ph));
    for (int ph = 0; ph < 2; ph++) {
        int rc = build_grid(name, rows + start[ph], start[ph + 1] - start[ph], &pt->phase[ph], err);
        if (rc != PRS_OK) return rc;
    }
    const prs__infer_row *idle = &rows[start[PRS__INFER_IDLE]];
    pt->idle_power_w = idle->energy_j / idle->time_s;
    return PRS_OK;
}

/* The capacity's batch against the largest measured batch of each phase at every clock. */
static int check_capacity(const char *name, const prs_infer_profile *p, int itp, int cap_line,
                          prs_error *err)
{
    for (int ic = 0; ic < p->nclk; ic++)
        for (int ph = 0; ph < 2; ph++) {
            const prs__infer_grid *g = &p->pts[itp * p->nclk + ic].phase[ph];
            if (p->max_batch[itp] > g->batch[g->nb - 1])
                return prs_error_set(err, PRS_EPARSE,
                                     "%s:%d: tp %d: capacity batch %d exceeds the largest "
                                     "measured %s batch %d at %d MHz",
                                     name, cap_line, p->tps[itp], p->max_batch[itp],
                                     prs__infer_phase_name(ph), g->batch[g->nb - 1], p->clocks[ic]);
        }
    return PRS_OK;
}

/* One tp's block of rows: its capacity row, then every clock's block. */
static int build_tp(const char *name, const prs__infer_row *rows, size_t n, int itp,
                    prs_infer_profile *p, prs_error *err)
{
    int tp = rows[0].tp;
    if (rows[0].phase != PRS__INFER_CAPACITY)
        return prs_error_set(err, PRS_EPARSE, "%s: tp %d: no capacity row", name, tp);
    p->kv_tokens[itp] = rows[0].tokens;
    p->max_batch[itp] = rows[0].batch;
    size_t i = 1;
    if (i < n && rows[i].phase == PRS__INFER_CAPACITY)
        return prs_error_set(err, PRS_EPARSE,
                             "%s:%d: tp %d: a second capacity row (first on line %d)", name,
                             rows[i].line, tp, rows[0].line);
    for (int ic = 0; ic < p->nclk; ic++) {
        size_t j = i;
        while (j < n && rows[j].freq_mhz == p->clocks[ic])
            j++;
        if (j == i)
            return prs_error_set(err, PRS_EPARSE,
                                 "%s: tp %d has no rows at %d MHz (every tp needs every clock "
                                 "of the file)",
                                 name, tp, p->clocks[ic]);
        int rc = build_point(name, rows + i, j - i, &p->pts[itp * p->nclk + ic], err);
        if (rc != PRS_OK) return rc;
        i = j;
    }
    return check_capacity(name, p, itp, rows[0].line, err);
}

int prs__infer_profile_build(const char *name, prs__infer_row *rows, size_t nrows,
                             prs_infer_profile *p, prs_error *err)
{
    qsort(rows, nrows, sizeof *rows, cmp_row);
    int rc = check_duplicates(name, rows, nrows, err);
    if (rc == PRS_OK) rc = collect_axes(name, rows, nrows, p, err);
    size_t i = 0;
    for (int itp = 0; rc == PRS_OK && itp < p->ntp; itp++) {
        size_t j = i;
        while (j < nrows && rows[j].tp == p->tps[itp])
            j++;
        rc = build_tp(name, rows + i, j - i, itp, p, err);
        i = j;
    }
    return rc;
}
