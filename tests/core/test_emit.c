/* The ordered picking of points on worker threads (emit.c), in exp mode (a pick is the exact
 * evaluation of the point's clocks) on a small synthetic pipeline:
 *   - every point comes back once, in the order submitted, with its figures passed through, its
 *     predicted cost summed from its durations, and its plan evaluated as a direct evaluation
 *     says, whether its clocks changed or not;
 *   - a point's change list, where it has one, turns the point before's clocks into its own;
 *   - the same with 1, 2, 3 and 8 threads, and with a ring of two slots (a job of one point);
 *     the points say which ops changed (every 37th does not, and starts a job);
 *   - a deliver callback that fails stops the run with its code, and freeing then returns;
 *     later submits and flushes return the same code and deliver nothing; after a stop they
 *     return PRS_ECANCELED. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "emit.h"
#include "perseus/synth.h"

#define NPOINTS 300

typedef struct got {
    const int *freq; /* per table entry */
    int nops;
    int *clocks; /* the last point's clocks, as its change list or its plan says */
    long n;
    long planned[NPOINTS];
    double cost[NPOINTS], delta[NPOINTS], e[NPOINTS];
    long t[NPOINTS];
    long fail_at; /* deliver fails at this point (-1: never) */
} got;

static int on_point(void *ud, const prs__emit_point *p)
{
    got *g = ud;
    if (g->n == g->fail_at) return 7;
    assert_true(g->n < NPOINTS);
    g->planned[g->n] = p->planned;
    g->cost[g->n] = p->out->cost;
    g->delta[g->n] = p->delta;
    g->t[g->n] = p->out->t;
    if (p->chg_op) {
        assert_true(g->n > 0);
        for (int k = 0; k < p->nchg; k++)
            g->clocks[p->chg_op[k]] = p->chg_freq[k];
    } else {
        for (int op = 0; op < g->nops; op++)
            g->clocks[op] = g->freq[p->out->best[op]];
    }
    for (int op = 0; op < g->nops; op++)
        assert_int_equal(g->clocks[op], g->freq[p->out->best[op]]);
    g->e[g->n] = p->out->e;
    g->n++;
    return 0;
}

typedef struct fixture {
    prs_profile *profile;
    prs_eval *ev;
    prs__model_optype *types; /* per type: cost[d - q_min] = d / 2 + type */
    long *dur;                /* NPOINTS relaxed plans of nops durations */
    double cost[NPOINTS];     /* their predicted costs */
    int *idx;                 /* NPOINTS plans of nops entries */
    int *ch_op, nch[NPOINTS]; /* per point: the ops whose duration or entry changed */
    int changed[NPOINTS];
    long t[NPOINTS]; /* their direct evaluation */
    double e[NPOINTS];
} fixture;

/* Random plans; a point keeps the clocks of the point before about half the time. */
static void make(fixture *f)
{
    prs_synth_opts so;
    prs_synth_opts_init(&so);
    so.stages = 3;
    assert_int_equal(prs_synth_profile(&so, &f->profile, NULL), 0);
    prs_pipeline pipe = {0};
    pipe.stages = 3;
    pipe.microbatches = 5;
    pipe.unit_time_s = 0.001;
    pipe.blocking_power_w = 60;
    pipe.schedule = PRS_SCHEDULE_1F1B;
    assert_int_equal(prs_eval_open(f->profile, &pipe, &f->ev, NULL), 0);
    const prs__graph_graph *g = &f->ev->g;
    const prs__table_table *t = &f->ev->t;
    f->idx = malloc(sizeof(int) * (size_t)g->nops * NPOINTS);
    f->dur = malloc(sizeof(long) * (size_t)g->nops * NPOINTS);
    f->ch_op = malloc(sizeof(int) * (size_t)g->nops * NPOINTS);
    f->types = calloc((size_t)t->ntypes, sizeof *f->types);
    assert_true(f->idx && f->dur && f->ch_op && f->types);
    for (int k = 0; k < t->ntypes; k++) {
        prs__model_optype *ty = &f->types[k];
        ty->q_min = ty->q_max = t->q[t->start[k]];
        for (int j = t->start[k]; j < t->start[k + 1]; j++) {
            if (t->q[j] < ty->q_min) ty->q_min = t->q[j];
            if (t->q[j] > ty->q_max) ty->q_max = t->q[j];
        }
        ty->cost = malloc(sizeof(double) * (size_t)(ty->q_max - ty->q_min + 1));
        assert_non_null(ty->cost);
        for (long d = ty->q_min; d <= ty->q_max; d++)
            ty->cost[d - ty->q_min] = 0.5 * (double)d + k;
    }
    srand(11);
    for (int k = 0; k < NPOINTS; k++) {
        int *x = f->idx + (size_t)k * (size_t)g->nops;
        f->changed[k] = k == 0 || rand() % 2;
        for (int op = 0; op < g->nops; op++) {
            int type = g->op_type[op], lo = t->start[type], n = t->start[type + 1] - lo;
            x[op] = f->changed[k] ? lo + rand() % n : x[op - g->nops];
        }
        long *d = f->dur + (size_t)k * (size_t)g->nops;
        f->cost[k] = 0;
        for (int op = 0; op < g->nops; op++) {
            const prs__model_optype *ty = &f->types[g->op_type[op]];
            d[op] = k > 0 && rand() % 3 ? d[op - g->nops]
                                        : ty->q_min + rand() % (ty->q_max - ty->q_min + 1);
            f->cost[k] += ty->cost[d[op] - ty->q_min];
        }
        f->nch[k] = 0;
        for (int op = 0; op < g->nops && k > 0; op++)
            if (d[op] != d[op - g->nops] || x[op] != x[op - g->nops])
                f->ch_op[(size_t)k * (size_t)g->nops + (size_t)f->nch[k]++] = op;
        double sum_e = 0;
        long sum_q = 0;
        for (int op = 0; op < g->nops; op++) {
            f->ev->dur[op] = t->q[x[op]];
            sum_q += t->q[x[op]];
            sum_e += t->energy_j[x[op]];
        }
        f->t[k] = prs__graph_cpm(g, f->ev->dur, f->ev->earliest, NULL);
        f->e[k] = prs__table_energy(&f->ev->pipe, f->t[k], sum_e, sum_q);
    }
}

static void unmake(fixture *f)
{
    for (int k = 0; k < f->ev->t.ntypes; k++)
        free(f->types[k].cost);
    free(f->types);
    free(f->dur);
    free(f->ch_op);
    free(f->idx);
    prs_eval_close(f->ev);
    prs_profile_free(f->profile);
}

/* Submit every point with threads and a ring of max_bytes; the deliver callback's code. */
static int run(const fixture *f, int threads, long max_bytes, got *g)
{
    prs__pick_shared sh = {&f->ev->g, &f->ev->t, &f->ev->pipe, f->types, 0, 0, 0};
    prs__emit *e = prs__emit_new(&sh, threads, max_bytes, on_point, g);
    assert_non_null(e);
    int rc = 0, nops = f->ev->g.nops;
    g->freq = f->ev->t.freq;
    g->nops = nops;
    g->clocks = malloc(sizeof(int) * (size_t)nops);
    assert_non_null(g->clocks);
    for (int k = 0; k < NPOINTS && !rc; k++) {
        size_t at = (size_t)k * (size_t)nops;
        const int *ch = k % 37 == 0 ? NULL : f->ch_op + at;
        rc = prs__emit_submit(e, f->idx + at, f->changed[k], f->dur + at, f->nch[k], ch, 1000 - k,
                              0.25 * k);
    }
    if (!rc) rc = prs__emit_flush(e);
    prs_plan_stats st = {0};
    prs__emit_stop(e); /* a failed run may have points in flight */
    prs__emit_count(e, &st);
    if (!rc) assert_true(st.evaluations >= 1 && st.evaluations <= NPOINTS);
    prs__emit_free(e);
    free(g->clocks);
    return rc;
}

static void in_order_and_exact(void **state)
{
    (void)state;
    fixture f;
    make(&f);
    static const int threads[] = {1, 2, 3, 8};
    static const long bytes[] = {0, 1}; /* the default ring, and two slots */
    for (size_t i = 0; i < sizeof threads / sizeof *threads; i++)
        for (size_t j = 0; j < 2; j++) {
            got *g = calloc(1, sizeof *g);
            assert_non_null(g);
            g->fail_at = -1;
            assert_int_equal(run(&f, threads[i], bytes[j], g), 0);
            assert_int_equal(g->n, NPOINTS);
            for (int k = 0; k < NPOINTS; k++) {
                assert_int_equal(g->planned[k], 1000 - k);
                assert_true(g->cost[k] == f.cost[k] && g->delta[k] == 0.25 * k);
                assert_int_equal(g->t[k], f.t[k]);
                assert_true(g->e[k] == f.e[k]);
            }
            free(g);
        }
    unmake(&f);
}

/* After a failed delivery, submit and flush return its code and deliver nothing more (the
 * points of the failed job before the failure are not delivered twice); after a stop they
 * return PRS_ECANCELED. */
static void failure_sticks(const fixture *f, int threads, got *g)
{
    g->fail_at = 40;
    g->n = 0;
    g->nops = f->ev->g.nops;
    g->freq = f->ev->t.freq;
    g->clocks = malloc(sizeof(int) * (size_t)g->nops);
    prs__pick_shared sh = {&f->ev->g, &f->ev->t, &f->ev->pipe, f->types, 0, 0, 0};
    prs__emit *e = prs__emit_new(&sh, threads, 0, on_point, g);
    assert_true(e && g->clocks);
    int rc = 0;
    for (int k = 0; k < 100 && !rc; k++)
        rc = prs__emit_submit(e, f->idx + (size_t)k * (size_t)g->nops, f->changed[k],
                              f->dur + (size_t)k * (size_t)g->nops, 0, NULL, 1000 - k, 0);
    if (!rc) rc = prs__emit_flush(e);
    assert_int_equal(rc, 7);
    g->fail_at = -1; /* the callback would now take every point */
    assert_int_equal(prs__emit_submit(e, f->idx, 1, f->dur, 0, NULL, 1, 0), 7);
    assert_int_equal(prs__emit_flush(e), 7);
    assert_int_equal(g->n, 40);
    prs__emit_free(e);
    e = prs__emit_new(&sh, threads, 0, on_point, g);
    assert_non_null(e);
    prs__emit_stop(e);
    assert_int_equal(prs__emit_submit(e, f->idx, 1, f->dur, 0, NULL, 1, 0), PRS_ECANCELED);
    assert_int_equal(prs__emit_flush(e), PRS_ECANCELED);
    prs__emit_free(e);
    free(g->clocks);
}

static void deliver_failure_stops(void **state)
{
    (void)state;
    fixture f;
    make(&f);
    for (int threads = 1; threads <= 4; threads += 3) {
        got *g = calloc(1, sizeof *g);
        assert_non_null(g);
        g->fail_at = 123;
        assert_int_equal(run(&f, threads, 0, g), 7);
        assert_int_equal(g->n, 123);
        failure_sticks(&f, threads, g);
        free(g);
    }
    unmake(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(in_order_and_exact),
        cmocka_unit_test(deliver_failure_stops),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
