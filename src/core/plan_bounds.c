/* A planning problem's size and whether it has a frontier, from the profile alone, before any
 * planning (prs_plan_size, prs_plan_check in perseus/planner.h): the critical path with every
 * computation at its fastest and at its slowest clock, and the planner's per-duration tables. */
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "plan_int.h"

/* A planning problem's bounds, from the profile alone (prs_plan_size, prs_plan_check). */
typedef struct plan_bounds {
    long t_min, t_max;  /* critical path in units, every computation at its fastest / slowest */
    double table_bytes; /* as prs_plan_size */
    double time_lo_s, time_hi_s; /* the shortest and longest measured time */
} plan_bounds;

/* Per type of computation k: the fewest and most units of its clocks into qmin[k], qmax[k]; the
 * table's sizes and time range into *b. */
static void type_bounds(const prs__table_table *t, long *qmin, long *qmax, plan_bounds *b)
{
    b->time_lo_s = INFINITY;
    for (int k = 0; k < t->ntypes; k++) {
        qmin[k] = LONG_MAX;
        qmax[k] = 0;
        for (int j = t->start[k]; j < t->start[k + 1]; j++) {
            qmin[k] = t->q[j] < qmin[k] ? t->q[j] : qmin[k];
            qmax[k] = t->q[j] > qmax[k] ? t->q[j] : qmax[k];
            b->time_lo_s = fmin(b->time_lo_s, t->time_s[j]);
            b->time_hi_s = fmax(b->time_hi_s, t->time_s[j]);
        }
        if (qmin[k] > qmax[k]) qmin[k] = qmax[k];
        /* cost, up, down (double) and knob (int) per unit */
        b->table_bytes += (double)(qmax[k] - qmin[k] + 1) * (3 * sizeof(double) + sizeof(int));
    }
}

/* The bounds of a problem into *b, with set-up checkpoints (tick may be NULL; PRS_ECANCELED
 * when one asks to stop); the number of computations into *nops. */
static int bounds_of(const prs_profile *profile, const prs_pipeline *pipe, const prs__tick *tick,
                     plan_bounds *b, long *nops, prs_error *err)
{
    *b = (plan_bounds){0};
    int rc = prs_pipeline_check(pipe, err);
    if (rc || (rc = prs_profile_check_stages(profile, prs_pipeline_chunks(pipe), err))) return rc;
    prs_eval *ev = NULL;
    if ((rc = prs__eval_open_ticked(profile, pipe, tick, &ev, err))) return rc;
    *nops = ev->g.nops;
    int nt = ev->t.ntypes;
    long *qmin = malloc(sizeof *qmin * (size_t)nt * 2);
    if (!qmin) {
        prs_eval_close(ev);
        return prs_error_set(err, PRS_ENOMEM, "out of memory");
    }
    long *qmax = qmin + nt;
    type_bounds(&ev->t, qmin, qmax, b);
    for (int op = 0; op < ev->g.nops; op++)
        ev->dur[op] = qmax[ev->g.op_type[op]];
    b->t_max = prs__graph_cpm(&ev->g, ev->dur, ev->earliest, NULL);
    if (prs__tick_stop(tick)) {
        free(qmin);
        prs_eval_close(ev);
        return prs_error_set(err, PRS_ECANCELED, "canceled sizing the planning problem");
    }
    for (int op = 0; op < ev->g.nops; op++)
        ev->dur[op] = qmin[ev->g.op_type[op]];
    b->t_min = prs__graph_cpm(&ev->g, ev->dur, ev->earliest, NULL);
    free(qmin);
    prs_eval_close(ev);
    return 0;
}

int prs_plan_size(const prs_profile *profile, const prs_pipeline *pipe, long *span,
                  double *table_bytes, prs_error *err)
{
    plan_bounds b;
    long nops;
    int rc = bounds_of(profile, pipe, NULL, &b, &nops, err);
    *span = rc ? 0 : b.t_max - b.t_min;
    *table_bytes = rc ? 0 : b.table_bytes;
    return rc;
}

/* prs_plan_check's judgement of bounds b. */
static int check_bounds(const plan_bounds *b, const prs_pipeline *pipe, const char *unit_name,
                        prs_error *err)
{
    const char *u = unit_name ? unit_name : "unit time";
    if (b->t_min == 0)
        return prs_error_set(
            err, PRS_EINVAL,
            "%s %g s is coarser than the computations (%.3g s .. %.3g s): every time rounds to 0 "
            "units, so there is no frontier. Use a %s well below the shortest computation, e.g. "
            "%.2g",
            u, pipe->unit_time_s, b->time_lo_s, b->time_hi_s, u, b->time_lo_s / 20);
    return 0;
}

int prs_plan_check(const prs_profile *profile, const prs_pipeline *pipe, const char *unit_name,
                   prs_error *err)
{
    plan_bounds b;
    long nops;
    int rc = bounds_of(profile, pipe, NULL, &b, &nops, err);
    return rc ? rc : check_bounds(&b, pipe, unit_name, err);
}

int prs_plan_measure(const prs_profile *profile, const prs_plan_opts *o, const char *unit_name,
                     prs_plan_measures *out, prs_error *err)
{
    memset(out, 0, sizeof *out);
    prs__tick tick = {o->progress, o->ud};
    plan_bounds b;
    long nops = 0;
    int rc = prs__plan_opts_check(o, err);
    if (rc || (rc = bounds_of(profile, &o->pipe, &tick, &b, &nops, err)) ||
        (rc = check_bounds(&b, &o->pipe, unit_name, err)))
        return rc;
    out->ops = nops;
    out->span = b.t_max - b.t_min;
    out->table_bytes = b.table_bytes;
    out->peak_bytes = prs_plan_peak_bytes(o, out);
    return 0;
}
