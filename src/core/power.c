/* The power of a plan over one iteration and its peak over a sliding window
 * (include/perseus/power.h; docs/power.md).
 *
 * The pipeline draws stages * P_block plus, for every computation running, its power above the
 * blocking power: energy / quantized duration - P_block. Sorting the computations' starts and
 * ends gives the step function. The mean over a window starting at a is a piecewise-linear
 * function of a whose slope changes only where the window's start or end crosses a step
 * boundary, so its maximum is at one of those 2n positions. Each is evaluated from the steps
 * it starts with, summed directly, then the steps' cumulative energy (O(log n)): a short window
 * keeps its precision, and a long one (whole iterations plus a remainder) never overflows. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "perseus/power.h"
#include "plan_int.h"

/* ---- The peak over a window ---- */

static int check_window(double window_s, prs_error *err)
{
    if (window_s > 0 && isfinite(window_s)) return 0;
    return FAIL(err, PRS_EINVAL, "power: the window must be a finite number of seconds > 0, got %g",
                window_s);
}

static int check_steps(const prs_power_step *s, size_t n, prs_error *err)
{
    if (!s || n == 0) return FAIL(err, PRS_EINVAL, "power: no steps");
    for (size_t i = 0; i < n; i++) {
        double prev_end = i ? s[i - 1].end_s : 0.0;
        if (!(s[i].start_s == prev_end) || !(s[i].end_s >= s[i].start_s) || !isfinite(s[i].end_s) ||
            !(s[i].power_w >= 0) || !isfinite(s[i].power_w) || !(s[i].energy_j >= 0) ||
            !isfinite(s[i].energy_j))
            return FAIL(err, PRS_EINVAL,
                        "power: step %zu (%g s .. %g s, %g W, %g J) is not contiguous, sorted "
                        "and non-negative",
                        i, s[i].start_s, s[i].end_s, s[i].power_w, s[i].energy_j);
    }
    if (!(s[n - 1].end_s > 0)) return FAIL(err, PRS_EINVAL, "power: the period is 0 s long");
    return 0;
}

/* Steps with start < x (with_edge: <= x): their count. */
static size_t count_before(const prs_power_step *s, size_t n, double x, int with_edge)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (s[mid].start_s < x || (with_edge && s[mid].start_s == x))
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Energy from 0 to x (0 <= x <= period); with_edge counts an impulse at x. cum[i] is the
 * energy of steps [0, i). */
static double energy_to(const prs_power_step *s, size_t n, const double *cum, double x,
                        int with_edge)
{
    size_t i = count_before(s, n, x, with_edge);
    if (i == 0) return 0;
    const prs_power_step *last = &s[i - 1];
    if (last->end_s == last->start_s) return cum[i];
    return cum[i - 1] + last->power_w * (fmin(x, last->end_s) - last->start_s);
}

/* Energy of the closed window [a, a + r] of the periodic signal, 0 <= a < T, 0 <= r < T. A
 * window reaching T wraps: an impulse at 0 is also one at T. A difference of cumulative
 * energies: exact only to a rounding of the iteration's energy, so used for windows over many
 * steps (mean_from). */
static double window_energy(const prs_power_step *s, size_t n, const double *cum, double a,
                            double r)
{
    double T = s[n - 1].end_s, b = a + r;
    if (b < T) return energy_to(s, n, cum, b, 1) - energy_to(s, n, cum, a, 0);
    return cum[n] - energy_to(s, n, cum, a, 0) + energy_to(s, n, cum, b - T, 1);
}

/* Steps a window's mean sums one by one before the rest comes from the cumulative energy. */
#define WALK_STEPS 8

/* Mean power of the closed window [a, a + r] of the periodic signal, a = s[j].start_s,
 * 0 <= r < T; for r = 0, the energy of the impulses at a. The first steps are summed directly,
 * each as its power times the share of the window it covers, from offsets that are differences
 * of step boundaries: a window far shorter than its step has exactly that step's power (a
 * difference of cumulative energies, or a + r rounded, would lose it). Past WALK_STEPS steps
 * (the window then spans several steps of width) the rest comes from window_energy. */
static double mean_from(const prs_power_step *s, size_t n, const double *cum, size_t j, double r)
{
    double T = s[n - 1].end_s, a = s[j].start_s, per = r > 0 ? r : 1, mean = 0;
    for (size_t walked = 0, k = j; walked < n; walked++, k = (k + 1) % n) {
        double shift = k < j ? T - a : -a; /* past T, the next iteration's steps */
        double lo = s[k].start_s + shift, hi = s[k].end_s + shift;
        if (lo > r) break;
        const prs_power_step *prev = &s[(k + n - 1) % n];
        if (walked >= WALK_STEPS && prev->end_s > prev->start_s) /* no impulse at s[k] walked */
            return mean + window_energy(s, n, cum, s[k].start_s, r - lo) / per;
        if (hi > lo)
            mean += s[k].power_w * ((fmin(hi, r) - lo) / per);
        else
            mean += s[k].energy_j / per;
    }
    return mean;
}

/* x folded into [0, T). */
static double fold(double x, double T)
{
    double y = fmod(x, T);
    if (y < 0) y += T;
    return y >= T ? 0 : y;
}

/* The steps of the signal run backwards in time (t -> T - t) into rev, their cumulative
 * energies into rcum: a window ending at a boundary of s starts at one of rev. */
static void reverse_steps(const prs_power_step *s, size_t n, prs_power_step *rev, double *rcum)
{
    double T = s[n - 1].end_s;
    rcum[0] = 0;
    for (size_t i = 0; i < n; i++) {
        const prs_power_step *o = &s[n - 1 - i];
        rev[i] = (prs_power_step){T - o->end_s, T - o->start_s, o->power_w, o->energy_j};
        rcum[i + 1] = rcum[i] + rev[i].energy_j;
    }
}

/* The busiest window of r seconds (0 <= r < T): its mean (as mean_from) and start. Every
 * window starting and every window ending at a step boundary is tried. */
static void busiest(const prs_power_step *s, const prs_power_step *rev, size_t n, const double *cum,
                    const double *rcum, double r, double *mean, double *at)
{
    double T = s[n - 1].end_s;
    *mean = -1;
    *at = 0;
    for (size_t j = 0; j < n; j++) {
        double fwd = mean_from(s, n, cum, j, r), bwd = mean_from(rev, n, rcum, (n - j) % n, r);
        if (fwd > *mean) {
            *mean = fwd;
            *at = s[j].start_s;
        }
        if (bwd > *mean) {
            *mean = bwd;
            *at = fold(s[j].start_s - r, T);
        }
    }
}

int prs_power_peak(const prs_power_step *steps, size_t n, double window_s, double *peak_w,
                   double *start_s, prs_error *err)
{
    if (check_window(window_s, err)) return PRS_EINVAL;
    int rc = check_steps(steps, n, err);
    if (rc) return rc;
    double *cum = malloc(sizeof *cum * 2 * (n + 1)), *rcum = cum ? cum + n + 1 : NULL;
    prs_power_step *rev = malloc(sizeof *rev * n);
    if (!cum || !rev) {
        free(cum);
        free(rev);
        return FAIL(err, PRS_ENOMEM, "out of memory");
    }
    cum[0] = 0;
    for (size_t i = 0; i < n; i++)
        cum[i + 1] = cum[i] + steps[i].energy_j;
    reverse_steps(steps, n, rev, rcum);
    /* window_s = whole periods (w - r) + the busiest r seconds; fmod is exact, and the whole
     * periods weigh in by their share of the window (never whole * E, which overflows) */
    double T = steps[n - 1].end_s, r = fmod(window_s, T), mean, at;
    busiest(steps, rev, n, cum, rcum, r, &mean, &at);
    double peak = cum[n] / T * ((window_s - r) / window_s) + mean * ((r > 0 ? r : 1) / window_s);
    free(cum);
    free(rev);
    if (!isfinite(peak))
        return FAIL(err, PRS_EINVAL,
                    "power: the peak over a window of %g s is not a finite number of watts "
                    "(an impulse of energy in a window that short); use a longer --window",
                    window_s);
    *peak_w = peak;
    if (start_s) *start_s = at;
    return 0;
}

/* ---- The power over one iteration ---- */

/* A change of the pipeline's power at time t: delta_w while a computation runs, or an impulse
 * of impulse_j (a computation of zero duration). */
typedef struct power_event {
    double t;
    double delta_w;
    double impulse_j;
} power_event;

static int event_cmp(const void *x, const void *y)
{
    const power_event *a = x, *b = y;
    return (a->t > b->t) - (a->t < b->t);
}

/* Events of the laid-out computations into ev (2 per computation at most); returns the count.
 * An impulse at T belongs to the next iteration's start: it is folded to 0. */
static size_t make_events(const prs_timeline_op *ops, int nops, double pb, double T,
                          power_event *ev)
{
    size_t n = 0;
    for (int i = 0; i < nops; i++) {
        const prs_timeline_op *o = &ops[i];
        double d = o->end_s - o->start_s;
        if (d > 0) {
            double p = o->energy_j / d - pb;
            ev[n++] = (power_event){o->start_s, p, 0};
            ev[n++] = (power_event){o->end_s, -p, 0};
        } else {
            ev[n++] = (power_event){o->start_s >= T ? 0 : o->start_s, 0, o->energy_j};
        }
    }
    qsort(ev, n, sizeof *ev, event_cmp);
    return n;
}

/* Append a step, merging it into the previous one when both have width and the same power. */
static void push_step(prs_power_step *s, size_t *n, double a, double b, double p, double e)
{
    if (b == a && e == 0) return;
    if (b > a && *n > 0 && s[*n - 1].end_s > s[*n - 1].start_s && s[*n - 1].power_w == p) {
        s[*n - 1].end_s = b;
        s[*n - 1].energy_j = p * (b - s[*n - 1].start_s);
        return;
    }
    s[(*n)++] = (prs_power_step){a, b, b > a ? p : 0, b > a ? p * (b - a) : e};
}

/* Sweep the sorted events into steps from 0 to T, base power base_w; returns the count. */
static size_t sweep(const power_event *ev, size_t nev, double base_w, double T, prs_power_step *s)
{
    size_t n = 0, i = 0;
    double now = 0, p = base_w;
    while (i < nev) {
        double t = ev[i].t, impulse = 0, delta = 0;
        for (; i < nev && ev[i].t == t; i++) {
            impulse += ev[i].impulse_j;
            delta += ev[i].delta_w;
        }
        push_step(s, &n, now, t, p, 0);
        push_step(s, &n, t, t, 0, impulse);
        now = t;
        p += delta;
        if (p < 0) p = 0; /* rounding of the running sum, never a real negative power */
    }
    push_step(s, &n, now, T, p, 0);
    return n;
}

static void fill_figures(const prs_power_step *s, size_t n, double T, double energy_j,
                         double window_s, prs_plan_power *out)
{
    out->time_s = T;
    out->energy_j = energy_j;
    out->avg_power_w = energy_j / T;
    out->window_s = window_s;
    out->max_power_w = 0;
    for (size_t i = 0; i < n; i++)
        if (s[i].end_s > s[i].start_s && s[i].power_w > out->max_power_w)
            out->max_power_w = s[i].power_w;
}

int prs_eval_power(prs_eval *ev, const int *clocks_mhz, double window_s, prs_plan_power *out,
                   prs_power_step **steps, size_t *nsteps, prs_error *err)
{
    if (check_window(window_s, err)) return PRS_EINVAL;
    int nops = prs_eval_nops(ev);
    prs_timeline_op *ops = malloc(sizeof *ops * (size_t)nops);
    power_event *evs = malloc(sizeof *evs * 2 * (size_t)nops);
    prs_power_step *s = malloc(sizeof *s * (4 * (size_t)nops + 2));
    double T = 0, E = 0;
    size_t n = 0;
    int rc = !ops || !evs || !s ? FAIL(err, PRS_ENOMEM, "out of memory") : 0;
    if (!rc) rc = prs_eval_run(ev, clocks_mhz, ops, &T, &E, err);
    if (!rc && !(T > 0)) rc = FAIL(err, PRS_EINVAL, "power: the plan takes 0 s (unit too large)");
    if (!rc) {
        double pb = ev->pipe.blocking_power_w;
        size_t nev = make_events(ops, nops, pb, T, evs);
        n = sweep(evs, nev, pb * ev->pipe.stages, T, s);
        fill_figures(s, n, T, E, window_s, out);
        rc = prs_power_peak(s, n, window_s, &out->peak_power_w, &out->peak_start_s, err);
    }
    free(ops);
    free(evs);
    if (rc || !steps) {
        free(s);
        return rc;
    }
    *steps = s;
    *nsteps = n;
    return 0;
}

int prs_plan_power_of(const prs_profile *profile, const prs_pipeline *pipe, const int *clocks_mhz,
                      double window_s, prs_plan_power *out, prs_error *err)
{
    prs_eval *ev;
    int rc = prs_eval_open(profile, pipe, &ev, err);
    if (rc) return rc;
    rc = prs_eval_power(ev, clocks_mhz, window_s, out, NULL, NULL, err);
    prs_eval_close(ev);
    return rc;
}
