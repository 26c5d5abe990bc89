/* Energy attribution from coarse counters by linear least squares (attrib.h,
 * docs/measurement.md).
 *
 * The timeline is swept once, forward: cum[k] is the busy time of kind k in [t_start, sweep_t] and
 * integ[k] its integral, so the mean of cum[k] over a reading's time bracket costs O(1).
 * Busy intervals wait in a ring until the sweep passes their end; readings wait in another ring
 * until the known timeline reaches them. A counter row is the difference of cum between two
 * consecutive readings, so the sweep may run ahead of a reading that has not arrived yet only by
 * dropping that reading, never by corrupting a row (this is how a full interval ring is relieved).
 *
 * Rows go into a column-major buffer of max_rows rows. When it is full, qrfac (no pivoting)
 * factors it and the buffer is replaced by R and the first n entries of Q^T b: the remaining
 * entries of Q^T b are the residual the folded rows can never explain, kept as a number. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <stdio.h>

#include <cminpack-1/cminpack.h>

#include "attrib.h"

enum { MODE_NONE, MODE_ENERGY, MODE_POWER };

typedef struct attrib_iv {
    int kind;
    int lump; /* one piece of work somewhere in [t0, t1], idle otherwise */
    double t0, t1;
} attrib_iv;

enum { USE_NONE, USE_BUSY, USE_LUMP }; /* how a kind was fed */

typedef struct attrib_reading {
    double lo, hi, v; /* the value was taken at an unknown instant in [lo, hi] */
} attrib_reading;

struct prs__client_attrib {
    prs__client_attrib_opts o;
    int nk, n; /* kinds; columns = nk + 1 (the last is idle time) */
    int mode;
    int started;
    double t_start, known_t;

    /* Sweep over the timeline. */
    double sweep_t;
    double *cum;                   /* nk + 1, the last: time inside lumps */
    double *integ;                 /* nk + 1: integral of cum over [t_start, sweep_t] */
    double *c0, *i0, *avg, *share; /* nk + 2: scratch of bracket() */
    attrib_iv *ivs;
    int iv_head, iv_len;
    unsigned char *use; /* nk: USE_* */
    int hit_lump;       /* the last sweep crossed the inside of a lump */

    /* Readings waiting for the timeline. */
    attrib_reading *pend;
    int p_head, p_len;
    double last_hi;

    /* Counter reference: the previous reading that closed (or opened) a row. */
    int have_ref;
    double ref_e, ref_lo;

    /* The last span of unknown activity (prs__client_attrib_unknown); gap_hi < gap_lo: none. */
    double gap_lo, gap_hi;
    double *ref_avg; /* n + 1: mean of cum over the bracket: kinds, elapsed time, lump time */

    /* Rows. */
    double *A, *b; /* max_rows x n, column-major (lda = max_rows) */
    int m;
    long rows, used, dropped;
    double rss_folded;
    double *colsum; /* n: time (counter) or samples (power) per column, over every row */
    double lump_s;  /* of colsum[nk], the time inside lumps */
    double *row;    /* n: scratch */

    /* Solve work space. */
    double *W, *rdiag, *acnorm, *wa, *x, *sdiag, *cn, *qtb, *zero, *rinv;
    int *ipvt, *cols;
};

void prs__client_attrib_opts_init(prs__client_attrib_opts *o)
{
    memset(o, 0, sizeof *o);
    o->max_rows = 512;
    o->max_pending = 4096;
    o->max_intervals = 16384;
    o->min_row_s = 0;
    o->min_rows = 3;
    o->max_cond = 1e4;
    o->max_rel_se = 0.02;
}

void prs__client_attrib_free(prs__client_attrib *a)
{
    if (!a) return;
    double *d[] = {a->cum, a->ref_avg, a->integ,  a->c0,  a->i0,  a->avg,   a->share,
                   a->A,   a->b,       a->colsum, a->row, a->W,   a->rdiag, a->acnorm,
                   a->wa,  a->x,       a->sdiag,  a->cn,  a->qtb, a->zero,  a->rinv};
    for (size_t i = 0; i < sizeof d / sizeof d[0]; i++)
        free(d[i]);
    free(a->ivs);
    free(a->use);
    free(a->pend);
    free(a->ipvt);
    free(a->cols);
    free(a);
}

static int opts_ok(const prs__client_attrib_opts *o, int n)
{
    return o->max_rows >= 2 * n && o->max_rows <= (1 << 20) && o->max_pending >= 1 &&
           o->max_intervals >= 1 && o->min_row_s >= 0 && o->min_rows >= 0 && o->max_cond > 1 &&
           !isnan(o->max_rel_se);
}

static int alloc_all(prs__client_attrib *a)
{
    size_t n = (size_t)a->n, r = (size_t)a->o.max_rows;
    a->cum = calloc(n + 1, sizeof(double));
    a->ref_avg = calloc(n + 1, sizeof(double));
    a->integ = calloc(n + 1, sizeof(double));
    a->c0 = calloc(n + 1, sizeof(double));
    a->i0 = calloc(n + 1, sizeof(double));
    a->avg = calloc(n + 1, sizeof(double));
    a->share = calloc(n + 1, sizeof(double));
    a->A = calloc(r * n, sizeof(double));
    a->b = calloc(r, sizeof(double));
    a->colsum = calloc(n, sizeof(double));
    a->row = calloc(n, sizeof(double));
    a->W = calloc(r * n, sizeof(double));
    a->qtb = calloc(r, sizeof(double));
    a->rinv = calloc(n * n, sizeof(double));
    double **v[] = {&a->rdiag, &a->acnorm, &a->wa, &a->x, &a->sdiag, &a->cn, &a->zero};
    int ok = a->cum && a->ref_avg && a->integ && a->c0 && a->i0 && a->avg && a->share && a->A &&
             a->b && a->colsum && a->row && a->W && a->qtb && a->rinv;
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
        ok = (*v[i] = calloc(n, sizeof(double))) != NULL && ok;
    a->ipvt = calloc(n, sizeof(int));
    a->cols = calloc(n, sizeof(int));
    a->ivs = calloc((size_t)a->o.max_intervals, sizeof(attrib_iv));
    a->use = calloc(n, 1);
    a->pend = calloc((size_t)a->o.max_pending, sizeof(attrib_reading));
    return ok && a->ipvt && a->cols && a->ivs && a->use && a->pend ? 0 : PRS_ENOMEM;
}

int prs__client_attrib_new(int n_kinds, const prs__client_attrib_opts *o, prs__client_attrib **out)
{
    *out = NULL;
    prs__client_attrib_opts def;
    if (!o) {
        prs__client_attrib_opts_init(&def);
        o = &def;
    }
    if (n_kinds < 1 || n_kinds > PRS__CLIENT_ATTRIB_MAX_KINDS || !opts_ok(o, n_kinds + 1))
        return PRS_EINVAL;
    prs__client_attrib *a = calloc(1, sizeof *a);
    if (!a) return PRS_ENOMEM;
    a->o = *o;
    a->nk = n_kinds;
    a->n = n_kinds + 1;
    a->last_hi = -INFINITY;
    if (alloc_all(a)) {
        prs__client_attrib_free(a);
        return PRS_ENOMEM;
    }
    *out = a;
    return 0;
}

/* ---- the timeline sweep ---- */

static void iv_pop(prs__client_attrib *a)
{
    a->iv_head = (a->iv_head + 1) % a->o.max_intervals;
    a->iv_len--;
}

/* Advance the sweep to t (<= known_t): busy time and its integral, retiring passed intervals. A
 * lump counts 1 from its end on (cum and integ alike), and crossing its inside sets hit_lump. */
static void sweep_to(prs__client_attrib *a, double t)
{
    double s = a->sweep_t;
    if (t <= s) return;
    for (int k = 0; k <= a->nk; k++)
        a->integ[k] += a->cum[k] * (t - s);
    while (a->iv_len) {
        const attrib_iv *v = &a->ivs[a->iv_head];
        if (v->t0 >= t) break;
        double lo = v->t0 > s ? v->t0 : s;
        double hi = v->t1 < t ? v->t1 : t;
        if (hi > lo && v->lump) a->hit_lump = 1;
        if (hi > lo) {
            int k = v->lump ? a->nk : v->kind; /* a lump's span: idle, counted apart */
            a->cum[k] += hi - lo;
            a->integ[k] += (hi - lo) * (hi - lo) / 2 + (hi - lo) * (t - hi);
        }
        if (v->t1 > t) break;
        if (v->lump) {
            a->cum[v->kind] += 1;
            a->integ[v->kind] += t - v->t1;
        }
        iv_pop(a);
    }
    a->sweep_t = t;
}

/* Sweep over a reading's bracket [lo, hi]. avg: the mean over it of each kind's cumulated busy
 * time and, last, of the elapsed time; share: the fraction of it each kind ran and, last, idle.
 * Averaging over the bracket (rather than taking its midpoint) keeps the timing uncertainty out of
 * the regressors' correlation with the errors, so it adds noise but no bias. */
static void bracket(prs__client_attrib *a, double lo, double hi)
{
    int nk = a->nk;
    sweep_to(a, lo);
    memcpy(a->c0, a->cum, (size_t)(nk + 1) * sizeof(double));
    memcpy(a->i0, a->integ, (size_t)(nk + 1) * sizeof(double));
    a->hit_lump = 0;
    sweep_to(a, hi);
    double w = hi - lo, busy = 0;
    const attrib_iv *v = a->iv_len ? &a->ivs[a->iv_head] : NULL;
    int at = v && v->t0 <= lo && lo < v->t1 ? v->kind : -1; /* state at lo when w == 0 */
    if (w == 0 && v && v->lump && v->t0 < lo && lo < v->t1) a->hit_lump = 1;
    for (int k = 0; k < nk; k++) {
        int lump = a->use[k] == USE_LUMP; /* a count, no time */
        a->avg[k] = w > 0 ? (a->integ[k] - a->i0[k]) / w : a->cum[k];
        a->share[k] = lump ? 0 : w > 0 ? (a->cum[k] - a->c0[k]) / w : k == at;
        busy += a->share[k];
    }
    a->avg[nk] = 0.5 * (lo + hi) - a->t_start;
    a->avg[nk + 1] = w > 0 ? (a->integ[nk] - a->i0[nk]) / w : a->cum[nk];
    a->share[nk] = busy < 1 ? 1 - busy : 0;
}

/* ---- rows ---- */

/* Replace the full buffer by its R factor and the matching part of Q^T b. */
static void fold(prs__client_attrib *a)
{
    int m = a->m, n = a->n, ld = a->o.max_rows, dummy = 0;
    qrfac(m, n, a->A, ld, 0, &dummy, 1, a->rdiag, a->acnorm, a->wa);
    for (int j = 0; j < n; j++) {
        double *u = a->A + (size_t)j * ld;
        if (u[j] == 0) continue;
        double s = 0;
        for (int i = j; i < m; i++)
            s += u[i] * a->b[i];
        double f = -s / u[j];
        for (int i = j; i < m; i++)
            a->b[i] += u[i] * f;
    }
    for (int i = n; i < m; i++)
        a->rss_folded += a->b[i] * a->b[i];
    for (int j = 0; j < n; j++) {
        double *c = a->A + (size_t)j * ld;
        c[j] = a->rdiag[j];
        for (int i = j + 1; i < n; i++)
            c[i] = 0;
    }
    a->m = n;
}

static void add_row(prs__client_attrib *a, const double *x, double y)
{
    if (a->m == a->o.max_rows) fold(a);
    for (int j = 0; j < a->n; j++) {
        a->A[(size_t)j * a->o.max_rows + (size_t)a->m] = x[j];
        a->colsum[j] += x[j];
    }
    a->b[a->m++] = y;
    a->rows++;
}

/* Does [lo, hi] overlap the last unknown span (more than touch it)? */
static int in_gap(const prs__client_attrib *a, double lo, double hi)
{
    return a->gap_hi > a->gap_lo && lo < a->gap_hi && hi > a->gap_lo;
}

static void take_energy(prs__client_attrib *a, const attrib_reading *r)
{
    bracket(a, r->lo, r->hi);
    int nk = a->nk;
    if (a->hit_lump) {
        a->dropped++; /* the energy inside a lump is unknown: the row runs on to the next */
        return;
    }
    if (a->have_ref && in_gap(a, a->ref_lo, r->hi)) {
        a->dropped++; /* the row would span work nobody tracked: start again after it */
        a->have_ref = 0;
        if (in_gap(a, r->lo, r->hi)) return;
    } else if (a->have_ref && r->v >= a->ref_e) {
        double dt = a->avg[nk] - a->ref_avg[nk];
        if (dt <= 0 || dt < a->o.min_row_s) {
            a->dropped++; /* merged into the next row */
            return;
        }
        double busy = 0;
        for (int k = 0; k < nk; k++) {
            a->row[k] = a->avg[k] - a->ref_avg[k];
            if (a->use[k] != USE_LUMP) busy += a->row[k];
        }
        a->row[nk] = dt > busy ? dt - busy : 0;
        a->lump_s += fmin(a->avg[nk + 1] - a->ref_avg[nk + 1], a->row[nk]);
        add_row(a, a->row, r->v - a->ref_e);
        a->used++;
    } else if (a->have_ref) {
        a->dropped++; /* the counter went backwards (driver reloaded): start again */
    } else if (in_gap(a, r->lo, r->hi)) {
        a->dropped++;
        return;
    } else {
        a->used++;
    }
    a->have_ref = 1;
    a->ref_e = r->v;
    a->ref_lo = r->lo;
    memcpy(a->ref_avg, a->avg, (size_t)(a->n + 1) * sizeof(double));
}

static void take_power(prs__client_attrib *a, const attrib_reading *r)
{
    bracket(a, r->lo, r->hi);
    if (in_gap(a, r->lo, r->hi) || a->hit_lump) {
        a->dropped++; /* a sample of work nobody tracked, or of a lump's unknown moment */
        return;
    }
    double top = 0;
    for (int j = 0; j < a->n; j++)
        top = fmax(top, a->share[j]);
    if (!a->o.power_averaged && top < 0.999) {
        a->dropped++; /* an instant near a state change: which state it saw is unknown */
        return;
    }
    add_row(a, a->share, r->v);
    a->used++;
}

/* Turn every reading the known timeline covers into rows. */
static void flush(prs__client_attrib *a)
{
    if (!a->started) return;
    while (a->p_len) {
        attrib_reading r = a->pend[a->p_head];
        if (r.hi > a->known_t) break;
        a->p_head = (a->p_head + 1) % a->o.max_pending;
        a->p_len--;
        if (r.lo < a->sweep_t)
            a->dropped++; /* before the timeline, or the sweep was forced past it */
        else if (a->mode == MODE_ENERGY)
            take_energy(a, &r);
        else
            take_power(a, &r);
    }
}

static void start_at(prs__client_attrib *a, double t)
{
    a->started = 1;
    a->t_start = a->known_t = a->sweep_t = t;
}

/* ---- inputs ---- */

static int add_interval(prs__client_attrib *a, int kind, int lump, double t0, double t1)
{
    if (kind < 0 || kind >= a->nk || !isfinite(t0) || !isfinite(t1) || t1 < t0) return PRS_EINVAL;
    int use = lump ? USE_LUMP : USE_BUSY;
    if (a->use[kind] != USE_NONE && a->use[kind] != use) return PRS_EINVAL;
    a->use[kind] = (unsigned char)use;
    if (!a->started) start_at(a, t0);
    if (t0 < a->known_t) {
        if (a->known_t - t0 > 1e-9) return PRS_EINVAL;
        t0 = a->known_t;
        if (t1 < t0) t1 = t0;
    }
    if (t1 > t0) {
        if (a->iv_len == a->o.max_intervals) sweep_to(a, a->ivs[a->iv_head].t1);
        int at = (a->iv_head + a->iv_len) % a->o.max_intervals;
        a->ivs[at] = (attrib_iv){kind, lump, t0, t1};
        a->iv_len++;
    }
    a->known_t = t1;
    flush(a);
    return 0;
}

int prs__client_attrib_busy(prs__client_attrib *a, int kind, double t0, double t1)
{
    return add_interval(a, kind, 0, t0, t1);
}

int prs__client_attrib_lump(prs__client_attrib *a, int kind, double t0, double t1)
{
    return add_interval(a, kind, 1, t0, t1);
}

int prs__client_attrib_known(prs__client_attrib *a, double t)
{
    if (!isfinite(t)) return PRS_EINVAL;
    if (!a->started) start_at(a, t);
    if (t > a->known_t) a->known_t = t;
    flush(a);
    return 0;
}

int prs__client_attrib_unknown(prs__client_attrib *a, double t0, double t1)
{
    if (!isfinite(t0) || !isfinite(t1) || t1 < t0) return PRS_EINVAL;
    prs__client_attrib_known(a, t0); /* the readings before it, with the span before it */
    if (t0 < a->known_t) t0 = a->known_t;
    if (t1 < t0) t1 = t0;
    a->gap_lo = t0;
    a->gap_hi = t1;
    return prs__client_attrib_known(a, t1);
}

static int add_reading(prs__client_attrib *a, int mode, double lo, double hi, double v)
{
    if (!isfinite(lo) || !isfinite(hi) || !isfinite(v) || hi < lo || lo < a->last_hi)
        return PRS_EINVAL;
    if (a->mode != MODE_NONE && a->mode != mode) return PRS_EINVAL;
    a->mode = mode;
    a->last_hi = hi;
    if (a->p_len == a->o.max_pending) {
        a->p_head = (a->p_head + 1) % a->o.max_pending;
        a->p_len--;
        a->dropped++;
    }
    a->pend[(a->p_head + a->p_len) % a->o.max_pending] = (attrib_reading){lo, hi, v};
    a->p_len++;
    flush(a);
    return 0;
}

int prs__client_attrib_energy(prs__client_attrib *a, double t_lo, double t_hi, double energy_j)
{
    return add_reading(a, MODE_ENERGY, t_lo, t_hi, energy_j);
}

int prs__client_attrib_power(prs__client_attrib *a, double t_lo, double t_hi, double power_w)
{
    return add_reading(a, MODE_POWER, t_lo, t_hi, power_w);
}

/* ---- the solve ---- */

static void quality_init(const prs__client_attrib *a, prs__client_attrib_quality *q)
{
    memset(q, 0, sizeof *q);
    q->rows = a->rows;
    q->samples_used = a->used;
    q->samples_dropped = a->dropped;
    q->cond = NAN;
    q->rms = NAN;
    q->max_rel_se = NAN;
    for (int k = 0; k < PRS__CLIENT_ATTRIB_MAX_KINDS; k++) {
        q->kind_se_w[k] = NAN;
        q->kind_busy_s[k] = k < a->nk ? a->colsum[k] : 0;
    }
    q->idle_se_w = NAN;
    q->lump_power_w = NAN;
    q->idle_s = a->colsum[a->nk];
    q->lump_s = a->lump_s;
    q->pending = a->p_len;
    q->intervals = a->iv_len;
}

/* Whether the lumps are fitted as one power over their spans, without their own unknowns: when
 * (nearly) all the idle time lies inside them, a lump's energy and the idle power can only be
 * told apart by how much the spans vary, and the blocking power is not measured. */
#define LUMPS_ONLY_SHARE 0.99
static int lumps_as_power(const prs__client_attrib *a)
{
    int any = 0;
    for (int k = 0; k < a->nk; k++)
        any |= a->use[k] == USE_LUMP;
    return any && a->lump_s > LUMPS_ONLY_SHARE * a->colsum[a->nk];
}

/* Columns some row saw, with their norms in cn (the lump kinds left out when skip_lumps:
 * lumps_as_power); returns how many (listed in cols). */
static int observed_columns(prs__client_attrib *a, int skip_lumps)
{
    double top = 0;
    for (int j = 0; j < a->n; j++) {
        const double *c = a->A + (size_t)j * a->o.max_rows;
        double s = 0;
        for (int i = 0; i < a->m; i++)
            s += c[i] * c[i];
        a->cn[j] = sqrt(s);
        if (a->cn[j] > top) top = a->cn[j];
    }
    int n = 0;
    for (int j = 0; j < a->n; j++)
        if (a->cn[j] > 0 && a->cn[j] > 1e-9 * top &&
            !(skip_lumps && j < a->nk && a->use[j] == USE_LUMP))
            a->cols[n++] = j;
    return n;
}

/* QR with pivoting of the unit-norm observed columns, then qrsolv: x gets the solution in the
 * scaled variables (unpermuted), the upper triangle of W keeps R. Returns |r_11| / |r_nn|. */
static double factor_solve(prs__client_attrib *a, int no)
{
    int m = a->m;
    for (int j = 0; j < no; j++) {
        const double *c = a->A + (size_t)a->cols[j] * a->o.max_rows;
        for (int i = 0; i < m; i++)
            a->W[(size_t)j * m + i] = c[i] / a->cn[a->cols[j]];
    }
    memcpy(a->qtb, a->b, (size_t)m * sizeof(double));
    qrfac(m, no, a->W, m, 1, a->ipvt, no, a->rdiag, a->acnorm, a->wa);
    for (int j = 0; j < no; j++) {
        double *u = a->W + (size_t)j * m;
        if (u[j] != 0) {
            double s = 0;
            for (int i = j; i < m; i++)
                s += u[i] * a->qtb[i];
            for (int i = j; i < m; i++)
                a->qtb[i] -= u[i] * s / u[j];
        }
        u[j] = a->rdiag[j];
    }
    qrsolv(no, a->W, m, a->ipvt, a->zero, a->qtb, a->x, a->sdiag, a->wa);
    double lo = fabs(a->rdiag[no - 1]);
    return lo > 0 ? fabs(a->rdiag[0]) / lo : INFINITY;
}

/* Residual sum of squares of the buffered rows at the solution p (per column, unscaled). */
static double buffer_rss(const prs__client_attrib *a, const double *p)
{
    double rss = 0;
    for (int i = 0; i < a->m; i++) {
        double r = -a->b[i];
        for (int j = 0; j < a->n; j++)
            if (!isnan(p[j])) r += a->A[(size_t)j * a->o.max_rows + i] * p[j];
        rss += r * r;
    }
    return rss;
}

/* Standard errors: sigma * sqrt(diag((R^T R)^-1)), R from factor_solve, back to columns. */
static void std_errors(prs__client_attrib *a, int no, double sigma, double *se)
{
    int m = a->m;
    double *ri = a->rinv; /* R^-1, upper triangular, row-major no x no */
    for (int j = 0; j < no; j++) {
        for (int i = j + 1; i < no; i++)
            ri[i * no + j] = 0;
        ri[j * no + j] = 1 / a->W[(size_t)j * m + j];
        for (int i = j - 1; i >= 0; i--) {
            double s = 0;
            for (int k = i + 1; k <= j; k++)
                s += a->W[(size_t)k * m + i] * ri[k * no + j];
            ri[i * no + j] = -s / a->W[(size_t)i * m + i];
        }
    }
    for (int i = 0; i < no; i++) {
        double v = 0;
        for (int j = i; j < no; j++)
            v += ri[i * no + j] * ri[i * no + j];
        int col = a->cols[a->ipvt[i] - 1];
        se[col] = sigma * sqrt(v) / a->cn[col];
    }
}

/* Judge the solution p (n columns, NAN where unsolved); fills q->why. */
static int verdict(const prs__client_attrib *a, const double *p, const double *se,
                   prs__client_attrib_quality *q)
{
    if (!(q->cond < a->o.max_cond)) {
        snprintf(q->why, sizeof q->why, "ill-conditioned (condition %.3g)", q->cond);
        return PRS__CLIENT_ATTRIB_POOR;
    }
    int worst = -1;
    for (int j = 0; j < a->n; j++) {
        if (isnan(p[j]) || (j < a->nk && a->use[j] == USE_LUMP)) continue;
        if (!(p[j] > 0)) {
            if (j < a->nk)
                snprintf(q->why, sizeof q->why, "kind %d's power came out %.3g W", j, p[j]);
            else
                snprintf(q->why, sizeof q->why, "the idle power came out %.3g W", p[j]);
            return PRS__CLIENT_ATTRIB_POOR;
        }
        double r = se[j] / p[j];
        if (worst < 0 || r > q->max_rel_se) {
            q->max_rel_se = r;
            worst = j;
        }
    }
    if (a->o.max_rel_se > 0 && !(q->max_rel_se <= a->o.max_rel_se)) {
        snprintf(q->why, sizeof q->why, "standard error %.2g%% of %s power", 100 * q->max_rel_se,
                 worst < a->nk ? "a kind's" : "the idle");
        return PRS__CLIENT_ATTRIB_MORE;
    }
    return 0;
}

int prs__client_attrib_solve(prs__client_attrib *a, double *kind_power_w, double *idle_power_w,
                             prs__client_attrib_quality *q)
{
    prs__client_attrib_quality qq;
    if (!q) q = &qq;
    quality_init(a, q);
    for (int k = 0; k < a->nk; k++)
        kind_power_w[k] = NAN;
    *idle_power_w = NAN;
    int lumps_only = lumps_as_power(a);
    int no = a->rows ? observed_columns(a, lumps_only) : 0;
    if (no == 0 || a->rows < no + a->o.min_rows) {
        snprintf(q->why, sizeof q->why, "%ld rows, need %d", a->rows, no + a->o.min_rows);
        return PRS__CLIENT_ATTRIB_MORE;
    }
    q->unknowns = no;
    q->cond = factor_solve(a, no);
    double p[PRS__CLIENT_ATTRIB_MAX_KINDS + 1], se[PRS__CLIENT_ATTRIB_MAX_KINDS + 1];
    for (int j = 0; j < PRS__CLIENT_ATTRIB_MAX_KINDS + 1; j++) /* all of them: a->n = nk + 1 */
        p[j] = se[j] = NAN;
    for (int j = 0; j < no; j++)
        p[a->cols[j]] = a->x[j] / a->cn[a->cols[j]];
    double rss = a->rss_folded + buffer_rss(a, p);
    long dof = a->rows - no;
    q->rms = sqrt(rss / (double)a->rows);
    if (isfinite(q->cond)) std_errors(a, no, sqrt(rss / (double)dof), se);
    for (int k = 0; k < a->nk; k++) {
        kind_power_w[k] = p[k];
        q->kind_se_w[k] = se[k];
    }
    *idle_power_w = p[a->nk];
    q->idle_se_w = se[a->nk];
    if (lumps_only) { /* the idle column is the lumps' power: no blocking power */
        q->lump_power_w = *idle_power_w;
        *idle_power_w = q->idle_se_w = NAN;
    }
    return verdict(a, p, se, q);
}
