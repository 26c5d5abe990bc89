/* The paper's metrics (include/perseus/emulator.h; docs/emulator.md, 'The recipe') as plain
 * functions of a few figures, so they can be checked by hand on tiny frontiers, and the parser
 * of straggler factors.
 *
 * The straggler model: N pipelines, one of them slowed down by s. It runs its no-slowdown plan
 * s times longer and, as the artifact assumes, s times the energy. The others must wait for it
 * at the next gradient synchronisation, so they finish a plan of their choice at t* and block
 * until T' = s T0, every GPU at P_block. The baseline job does the same with every pipeline at
 * all-max. Every energy is per GPU of a tensor-parallel group times tp, blocking power times
 * tp and stages, so tp cancels out of every ratio. */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "emu_int.h"
#include "perseus/limits.h"
#include "perseus/numfmt.h"

#define PRS_STRAGGLER_MAX 100000

const char *prs_emu_variant_name(prs_emu_variant v)
{
    switch (v) {
    case PRS_EMU_PAPER:
        return "paper";
    case PRS_EMU_EXACT:
        return "exact";
    case PRS_EMU_LOOKUP:
        return "lookup";
    default:
        return "?";
    }
}

const char *prs_emu_strategy_name(prs_emu_strategy s)
{
    switch (s) {
    case PRS_EMU_PERSEUS:
        return "perseus";
    case PRS_EMU_ALLMAX:
        return "all-max";
    case PRS_EMU_UNIFORM:
        return "uniform";
    case PRS_EMU_ENVPIPE:
        return "envpipe";
    default:
        return "?";
    }
}

int prs_emu_paper_rule(const prs_emu_point *pts, size_t n, double t_prime_s, size_t *k)
{
    size_t best = (size_t)-1;
    for (size_t i = 0; i < n; i++) {
        if (!(pts[i].time_s <= t_prime_s + PRS_TIME_TOL_S)) continue;
        if (best == (size_t)-1 || pts[i].energy_j < pts[best].energy_j ||
            (pts[i].energy_j == pts[best].energy_j && pts[i].time_s < pts[best].time_s))
            best = i;
    }
    if (best == (size_t)-1) return PRS_ERANGE;
    *k = best;
    return 0;
}

double prs_emu_round2(double x)
{
    if (!isfinite(x) || fabs(x) > 1e15) return x;
    /* printf's %.2f rounds the exact binary value, ties to even: Python's round(x, 2) */
    char buf[64];
    snprintf(buf, sizeof buf, "%.2f", x);
    return strtod(buf, NULL);
}

double prs_emu_intrinsic_saving(double energy_j, double base_energy_j)
{
    return 100.0 * (1.0 - energy_j / base_energy_j);
}

static int positive(double x)
{
    return isfinite(x) && x > 0;
}

int prs__emu_check_job(int pipelines, int stages, int tp, prs_error *err)
{
    if (pipelines < 1)
        return prs__emu_error(err, PRS_EINVAL, "pipelines must be >= 1 (got %d)", pipelines);
    if (tp < 1) return prs__emu_error(err, PRS_EINVAL, "tp must be >= 1 (got %d)", tp);
    /* each factor is at most INT_MAX, so two of them multiply in long long without overflow */
    long long pt = (long long)pipelines * tp;
    if (pt > PRS_MAX_JOB_GPUS || (stages > 0 && pt * stages > PRS_MAX_JOB_GPUS))
        return prs__emu_error(err, PRS_EINVAL,
                              "pipelines x stages x tp (%d x %d x %d) exceeds %ld GPUs", pipelines,
                              stages, tp, PRS_MAX_JOB_GPUS);
    return 0;
}

int prs_emu_metrics_compute(const prs_emu_job *job, double s, const prs_emu_inputs *in,
                            prs_emu_metrics *out, prs_error *err)
{
    if (!job || !in || !out) return prs__emu_error(err, PRS_EINVAL, "NULL argument");
    if (job->stages < 1)
        return prs__emu_error(err, PRS_EINVAL, "stages must be >= 1 (got %d)", job->stages);
    int rc = prs__emu_check_job(job->pipelines, job->stages, job->tp, err);
    if (rc) return rc;
    if (!(job->blocking_power_w >= 0) || !isfinite(job->blocking_power_w))
        return prs__emu_error(err, PRS_EINVAL, "blocking power must be a finite number >= 0 W");
    if (!(s >= 1) || !isfinite(s))
        return prs__emu_error(err, PRS_EINVAL, "straggler factor must be a finite number >= 1");
    if (!positive(in->base_time_s) || !positive(in->base_energy_j) || !positive(in->time_s) ||
        !positive(in->energy_j) || !positive(in->choice_time_s) || !positive(in->choice_energy_j))
        return prs__emu_error(err, PRS_EINVAL, "times and energies must be finite and > 0");
    double tp = (double)job->tp, n1 = (double)(job->pipelines - 1);
    double pw = job->blocking_power_w * tp * (double)job->stages; /* one blocked pipeline */
    double e_base = in->base_energy_j * tp, e0 = in->energy_j * tp;
    double t_prime = s * in->time_s;
    double b_base = pw * (s * in->base_time_s - in->base_time_s);
    double b0 = pw * (t_prime - in->time_s);
    double e_choice = in->choice_energy_j * tp + pw * (t_prime - in->choice_time_s);
    double job_base = s * e_base + n1 * (e_base + b_base);
    double job_intr = s * e0 + n1 * (e0 + b0);
    double job_x = s * e0 + n1 * e_choice;
    out->s = s;
    out->t_prime_s = t_prime;
    out->choice_time_s = in->choice_time_s;
    out->choice_energy_j = e_choice;
    out->job_energy_j = job_x;
    out->job_base_energy_j = job_base;
    out->job_intr_energy_j = job_intr;
    out->saving = 100.0 * (1.0 - job_x / job_base);
    out->intrinsic_saving = 100.0 * (1.0 - job_intr / job_base);
    out->extrinsic_saving = 100.0 * (1.0 - job_x / job_intr);
    out->saving_pp = 100.0 * (1.0 - e_choice / (e_base + b_base));
    out->tstar = prs_emu_round2(in->choice_time_s / in->time_s);
    return 0;
}

int prs_emu_plan_energy_at(const prs_profile *profile, const prs_pipeline *pipe,
                           const int *clocks_mhz, double time_s, double *energy_j, prs_error *err)
{
    double se, st;
    int rc = prs__emu_plan_sums(profile, pipe, clocks_mhz, &se, &st, err);
    if (rc) return rc;
    *energy_j = se + pipe->blocking_power_w * ((double)pipe->stages * time_s - st);
    return 0;
}

int prs_emu_allmax_energy(const prs_profile *profile, const prs_pipeline *pipe, double time_s,
                          double *energy_j, prs_error *err)
{
    if (!profile || !pipe) return prs__emu_error(err, PRS_EINVAL, "NULL argument");
    int rc = prs_pipeline_check(pipe, err);
    if (rc) return rc;
    int *plan = malloc(sizeof *plan * (size_t)(pipe->stages * prs_ops_per_stage(pipe)));
    if (!plan) return prs__emu_error(err, PRS_ENOMEM, "out of memory");
    rc = prs_baseline_allmax(profile, pipe, plan, err);
    if (!rc) rc = prs_emu_plan_energy_at(profile, pipe, plan, time_s, energy_j, err);
    free(plan);
    return rc;
}

/* ---- Straggler factors ---- */

/* Digits after the decimal point of a plain decimal ("1.50" -> 2); -1 for exponent forms. */
static int decimals(const char *s)
{
    if (strpbrk(s, "eE")) return -1;
    const char *dot = strchr(s, '.');
    if (!dot) return 0;
    int d = 0;
    for (const char *p = dot + 1; isdigit((unsigned char)*p); p++)
        d++;
    return d;
}

/* Parse one item (number or START:STOP:STEP) into buf, growing it. */
static int parse_item(const char *item, double **buf, size_t *n, size_t *cap, prs_error *err)
{
    const char *c1 = strchr(item, ':');
    double a, b, step;
    long count;
    int dec = -1;
    if (!c1) {
        if (prs_num_parse_double(item, &a))
            return prs__emu_error(err, PRS_EINVAL, "straggler factor '%s' is not a number", item);
        b = a;
        step = 1;
        count = 1;
    } else {
        char part[3][64];
        const char *c2 = strchr(c1 + 1, ':');
        if (!c2 || strchr(c2 + 1, ':'))
            return prs__emu_error(
                err, PRS_EINVAL, "malformed straggler range '%s' (expected START:STOP:STEP)", item);
        size_t l0 = (size_t)(c1 - item), l1 = (size_t)(c2 - c1 - 1), l2 = strlen(c2 + 1);
        if (l0 >= sizeof part[0] || l1 >= sizeof part[1] || l2 >= sizeof part[2])
            return prs__emu_error(err, PRS_EINVAL, "malformed straggler range '%s'", item);
        memcpy(part[0], item, l0);
        part[0][l0] = '\0';
        memcpy(part[1], c1 + 1, l1);
        part[1][l1] = '\0';
        memcpy(part[2], c2 + 1, l2 + 1);
        if (prs_num_parse_double(part[0], &a) || prs_num_parse_double(part[1], &b) ||
            prs_num_parse_double(part[2], &step))
            return prs__emu_error(err, PRS_EINVAL,
                                  "malformed straggler range '%s' (expected START:STOP:STEP, "
                                  "three numbers)",
                                  item);
        if (!(step > 0))
            return prs__emu_error(err, PRS_EINVAL, "straggler range '%s': the step must be > 0",
                                  item);
        if (b < a)
            return prs__emu_error(err, PRS_EINVAL, "straggler range '%s': STOP is below START",
                                  item);
        double steps = floor((b - a) / step + PRS_RANGE_STEP_TOL);
        if (!(steps < (double)PRS_STRAGGLER_MAX))
            return prs__emu_error(err, PRS_EINVAL,
                                  "straggler range '%s' has too many values (at most %d)", item,
                                  PRS_STRAGGLER_MAX);
        count = (long)steps + 1;
        int d0 = decimals(part[0]), d1 = decimals(part[1]), d2 = decimals(part[2]);
        if (d0 >= 0 && d1 >= 0 && d2 >= 0) {
            dec = d0 > d1 ? d0 : d1;
            if (d2 > dec) dec = d2;
            if (dec > 15) dec = -1;
        }
    }
    if (!(a >= 1))
        return prs__emu_error(err, PRS_EINVAL,
                              c1 ? "straggler range '%s' starts below 1 (a straggler is slower: "
                                   "s >= 1)"
                                 : "straggler factor '%s' is below 1 (a straggler is slower: "
                                   "s >= 1)",
                              item);
    if (*n + (size_t)count > PRS_STRAGGLER_MAX)
        return prs__emu_error(err, PRS_EINVAL, "too many straggler factors (at most %d)",
                              PRS_STRAGGLER_MAX);
    if (*n + (size_t)count > *cap) {
        size_t nc = *cap ? *cap : 16;
        while (nc < *n + (size_t)count)
            nc *= 2;
        double *p = realloc(*buf, nc * sizeof *p);
        if (!p) return prs__emu_error(err, PRS_ENOMEM, "out of memory");
        *buf = p;
        *cap = nc;
    }
    for (long i = 0; i < count; i++) {
        double v = a + (double)i * step;
        if (dec >= 0) { /* the decimal the user meant: 1.07, not 1.0700000000000003 */
            char t[64];
            snprintf(t, sizeof t, "%.*f", dec, v);
            v = strtod(t, NULL);
        }
        if (v > b && i > 0) v = b; /* never past STOP through rounding */
        (*buf)[(*n)++] = v;
    }
    return 0;
}

int prs_straggler_parse(const char *spec, double **vals, size_t *n, prs_error *err)
{
    if (!spec || !vals || !n) return prs__emu_error(err, PRS_EINVAL, "NULL argument");
    size_t cap = *n, count = *n;
    double *buf = malloc(sizeof *buf * (cap ? cap : 16));
    if (!buf) return prs__emu_error(err, PRS_ENOMEM, "out of memory");
    if (!cap) cap = 16;
    if (*n) memcpy(buf, *vals, *n * sizeof(double));
    int rc = 0, items = 0;
    const char *p = spec;
    int after_comma = 0;
    for (;;) {
        while (*p == ' ' || *p == '\t')
            p++;
        if (*p == '\0') {
            if (after_comma)
                rc = prs__emu_error(err, PRS_EINVAL, "empty straggler factor in '%s'", spec);
            break;
        }
        if (*p == ',') {
            if (!items || after_comma) {
                rc = prs__emu_error(err, PRS_EINVAL, "empty straggler factor in '%s'", spec);
                break;
            }
            after_comma = 1;
            p++;
            continue;
        }
        size_t len = strcspn(p, ", \t");
        char item[128];
        if (len >= sizeof item) {
            rc = prs__emu_error(err, PRS_EINVAL, "straggler factor too long in '%s'", spec);
            break;
        }
        memcpy(item, p, len);
        item[len] = '\0';
        if ((rc = parse_item(item, &buf, &count, &cap, err))) break;
        items++;
        after_comma = 0;
        p += len;
    }
    if (!rc && !items) rc = prs__emu_error(err, PRS_EINVAL, "no straggler factor in '%s'", spec);
    if (rc) {
        free(buf);
        return rc;
    }
    free(*vals);
    *vals = buf;
    *n = count;
    return 0;
}
