/* The emulation end to end on synthetic profiles (other GPUs, units, blocking powers and
 * schedules than the paper's): internal consistency of every figure with the recipe
 * (docs/emulator.md), recomputed here independently from the frontier and the profile.
 *   - intrinsic_saving_pp equals 100 (1 - E_intr / E_base), with T_min, E_intr read off the
 *     frontier and E_base summed from the profile's rows at their highest clock;
 *   - every straggler row: t* is a frontier point's time, the least-energy one within T', and
 *     tstar = round(t* / T_min, 2); t* grows with s until it reaches T* and then stays there;
 *     the job energies and savings follow the recipe's formulas; 0 <= intrinsic <= saving < 100;
 *     intrinsic falls with s; the extrinsic saving starts at 0 and is positive once s > 1;
 *   - the exact variant against prs_evaluate_plan; baselines: all-max is 0 everywhere in the
 *     paper recipe, static baselines have no extrinsic part, EnvPipe and uniform never cost more
 *     than all-max when evaluated exactly;
 *   - tp scales absolute energies and nothing else; N does not change the intrinsic saving, and
 *     with N = 1 there is nothing extrinsic to save;
 *   - bad jobs and an empty frontier are errors. */
#include <limits.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "perseus/emulator.h"
#include "perseus/gpumodel.h"
#include "perseus/limits.h"
#include "perseus/planner.h"
#include "perseus/profile.h"

#define NS 51 /* s = 1.00, 1.01, ..., 1.50 */

static void close_to(double a, double b, double rel, const char *what, const char *ctx, int line)
{
    if (!(fabs(a - b) <= rel * (1 + fabs(b))))
        fail_msg("%s, line %d: %s = %.17g, want %.17g", ctx, line, what, a, b);
}
#define CLOSE(a, b) close_to((a), (b), 1e-9, #a, ctx, __LINE__)

typedef struct emu_case {
    const char *name;
    const char *gpu;
    double last; /* last chunk's time multiplier */
    prs_pipeline pipe;
    int chunks; /* profile stages */
    prs_cost_model model;
    int pipelines, tp;
} emu_case;

/* clang-format off */
static const emu_case cases[] = {
    {.name = "a40 4x8 1f1b exp 0.1 ms", .gpu = "a40", .chunks = 4, .last = 1.07,
     .model = PRS_COST_EXP, .pipe = {4, 8, PRS_SCHEDULE_1F1B, 0.0001, 70.38, 0},
     .pipelines = 16, .tp = 8},
    {.name = "a40 4x4 1f1b hull light-last 0.1 ms", .gpu = "a40", .chunks = 4, .last = 0.9,
     .model = PRS_COST_HULL, .pipe = {4, 4, PRS_SCHEDULE_1F1B, 0.0001, 70.38, 0},
     .pipelines = 32, .tp = 4},
    {.name = "a100 8x12 1f1b exp", .gpu = "a100", .chunks = 8, .last = 1.07,
     .model = PRS_COST_EXP, .pipe = {8, 12, PRS_SCHEDULE_1F1B, 0.001, 83.64, 0},
     .pipelines = 128, .tp = 8},
    {.name = "h100 4x6 gpipe exp", .gpu = "h100", .chunks = 4, .last = 1.1,
     .model = PRS_COST_EXP, .pipe = {4, 6, PRS_SCHEDULE_GPIPE, 0.001, 60.0, 0},
     .pipelines = 8, .tp = 2},
    {.name = "a100 4x4 interleaved(2) hull", .gpu = "a100", .chunks = 8, .last = 1.07,
     .model = PRS_COST_HULL, .pipe = {4, 4, PRS_SCHEDULE_INTERLEAVED, 0.001, 83.64, 2},
     .pipelines = 16, .tp = 8},
};
/* clang-format on */

static prs_profile *synth(const emu_case *c)
{
    prs_synth_opts o;
    prs_synth_opts_init(&o);
    o.gpu = prs_gpu_preset_find(c->gpu);
    assert_non_null(o.gpu);
    o.stages = c->chunks;
    double imb[64];
    for (int s = 0; s < c->chunks; s++)
        imb[s] = s == c->chunks - 1 ? c->last : 1.0;
    o.imbalance = imb;
    o.n_imbalance = c->chunks;
    prs_profile *p = NULL;
    prs_error err = {0, ""};
    if (prs_synth_profile(&o, &p, &err)) fail_msg("synth: %s", err.msg);
    return p;
}

static prs_frontier *plan(const emu_case *c, const prs_profile *p)
{
    prs_plan_opts o;
    prs_plan_opts_default(&o);
    o.pipe = c->pipe;
    o.cost_model = c->model;
    prs_frontier *f = NULL;
    prs_error err = {0, ""};
    if (prs_plan(p, &o, &f, &err)) fail_msg("%s: plan: %s", c->name, err.msg);
    return f;
}

static prs_emulation *emulate(const emu_case *c, const prs_profile *p, const prs_frontier *f,
                              int pipelines, int tp, const double *factors)
{
    prs_emulate_opts eo;
    memset(&eo, 0, sizeof eo);
    eo.pipelines = pipelines;
    eo.tp = tp;
    eo.stragglers = factors;
    eo.nstragglers = NS;
    prs_emulation *e = NULL;
    prs_error err = {0, ""};
    if (prs_emulate_frontier(p, f, &eo, &e, &err)) fail_msg("%s: emulate: %s", c->name, err.msg);
    return e;
}

static void grid(double *factors)
{
    double *v = NULL;
    size_t n = 0;
    assert_int_equal(prs_straggler_parse("1.00:1.50:0.01", &v, &n, NULL), 0);
    assert_int_equal(n, NS);
    memcpy(factors, v, sizeof *v * NS);
    free(v);
}

/* Table 6's E_base straight from the profile rows: every computation of the iteration at its
 * (chunk, instruction)'s highest clock, measured time and energy, blocking until t_min. */
static double direct_e_base(const prs_profile *p, const prs_pipeline *pipe, double t_min)
{
    int chunks = prs_pipeline_chunks(pipe);
    double e = 0, busy = 0;
    for (int c = 0; c < chunks; c++)
        for (int in = 0; in < 2; in++) {
            const prs_profile_row *best = NULL;
            for (size_t i = 0; i < prs_profile_nrows(p); i++) {
                const prs_profile_row *r = &prs_profile_rows(p)[i];
                if (r->stage == c && (int)r->instr == in && (!best || r->freq_mhz > best->freq_mhz))
                    best = r;
            }
            if (!best) {
                fail_msg("chunk %d has no %s rows", c, in ? "backward" : "forward");
                return 0;
            }
            e += pipe->microbatches * best->energy_j;
            busy += pipe->microbatches * best->time_s;
        }
    return e + pipe->blocking_power_w * (pipe->stages * t_min - busy);
}

/* What the paper recipe's figures are recomputed from: T_min and its energy E_intr, T* (the
 * least-energy point's time) off the frontier, and E_base straight from the profile. */
typedef struct paper_ref {
    const emu_case *c;
    const prs_frontier *f;
    size_t n; /* frontier points */
    double t_min, e_intr, t_star, e_base;
} paper_ref;

/* T_min, E_intr, T* off the frontier */
static void frontier_extremes(paper_ref *ref)
{
    double t_min = INFINITY, e_intr = 0, t_star = 0, e_star = INFINITY;
    for (size_t k = 0; k < ref->n; k++) {
        const prs_frontier_point *q = prs_frontier_point_at(ref->f, k);
        if (q->time_s < t_min || (q->time_s == t_min && q->energy_j < e_intr)) {
            t_min = q->time_s;
            e_intr = q->energy_j;
        }
        if (q->energy_j < e_star) {
            e_star = q->energy_j;
            t_star = q->time_s;
        }
    }
    ref->t_min = t_min;
    ref->e_intr = e_intr;
    ref->t_star = t_star;
}

/* t*: a frontier point's time, the least energy within T' (brute force); returns that least
 * energy. */
static double check_choice(const paper_ref *ref, const prs_emu_metrics *r, double s, double T)
{
    const char *ctx = ref->c->name;
    int found = 0;
    double e_choice = INFINITY, t_min = ref->t_min;
    for (size_t k = 0; k < ref->n; k++) {
        const prs_frontier_point *q = prs_frontier_point_at(ref->f, k);
        if (q->time_s == r->choice_time_s) found = 1;
        if (q->time_s <= T + 1e-9 && q->energy_j < e_choice) e_choice = q->energy_j;
    }
    if (!found) fail_msg("%s s=%.2f: t* %.17g is no frontier time", ctx, s, r->choice_time_s);
    assert_true(r->choice_time_s <= T + 1e-9);
    assert_true(r->tstar == prs_emu_round2(r->choice_time_s / t_min));
    assert_true(fabs(r->tstar * t_min - r->choice_time_s) <= 0.005 * t_min + 1e-12);
    return e_choice;
}

/* The recipe's job energies of row r (straggler factor s, T' = T), recomputed. */
static void check_job_energies(const paper_ref *ref, const prs_emu_metrics *r, double s, double T,
                               double e_choice)
{
    const char *ctx = ref->c->name;
    double tp = ref->c->tp, N = ref->c->pipelines;
    double pw = ref->c->pipe.blocking_power_w * tp * ref->c->pipe.stages;
    double B = pw * (T - ref->t_min);
    double eb = tp * ref->e_base, ei = tp * ref->e_intr;
    double np = tp * e_choice + pw * (T - r->choice_time_s);
    double job_base = s * eb + (N - 1) * (eb + B), job_intr = s * ei + (N - 1) * (ei + B),
           job_p = s * ei + (N - 1) * np;
    CLOSE(r->job_base_energy_j, job_base);
    CLOSE(r->job_intr_energy_j, job_intr);
    CLOSE(r->job_energy_j, job_p);
    CLOSE(r->saving, 100 * (1 - job_p / job_base));
    CLOSE(r->intrinsic_saving, 100 * (1 - job_intr / job_base));
    CLOSE(r->extrinsic_saving, 100 * (1 - job_p / job_intr));
    CLOSE(r->saving_pp, 100 * (1 - np / (eb + B)));
    if (!(r->intrinsic_saving >= 0 && r->intrinsic_saving <= r->saving + 1e-9 && r->saving < 100 &&
          r->saving_pp >= 0 && r->saving_pp < 100 && r->extrinsic_saving >= -1e-9))
        fail_msg("%s s=%.2f: saving %.6f intrinsic %.6f extrinsic %.6f pp %.6f", ctx, s, r->saving,
                 r->intrinsic_saving, r->extrinsic_saving, r->saving_pp);
}

/* The paper recipe's rows of Perseus, one per straggler factor. */
static void check_paper_rows(const paper_ref *ref, const prs_emu_summary *ps, const double *factors)
{
    const char *ctx = ref->c->name;
    double prev_t = 0, prev_int = INFINITY, t_min = ref->t_min, t_star = ref->t_star;
    for (size_t i = 0; i < NS; i++) {
        const prs_emu_metrics *r = &ps->rows[i];
        double s = factors[i], T = s * t_min;
        CLOSE(r->s, s);
        CLOSE(r->t_prime_s, T);
        double e_choice = check_choice(ref, r, s, T);
        assert_true(r->choice_time_s >= prev_t);          /* t* grows with s ... */
        if (T >= t_star) CLOSE(r->choice_time_s, t_star); /* ... up to T*, then stays */
        prev_t = r->choice_time_s;
        check_job_energies(ref, r, s, T, e_choice);
        if (i == 0) {
            CLOSE(r->saving, ps->intrinsic_saving_pp);
            CLOSE(r->extrinsic_saving, 0);
            assert_true(r->tstar == 1.0);
        } else {
            assert_true(r->intrinsic_saving < prev_int); /* more blocking dilutes it */
            if (!(r->extrinsic_saving > 0)) fail_msg("%s s=%.2f: no extrinsic saving", ctx, s);
        }
        prev_int = r->intrinsic_saving;
        /* while T' has not reached T*, a longer straggler lets the others save more */
        if (i > 0 && T < t_star && !(r->saving > ps->rows[i - 1].saving))
            fail_msg("%s s=%.2f: saving %.6f %% not above %.6f %% at s=%.2f (T* %.6g s)", ctx, s,
                     r->saving, ps->rows[i - 1].saving, factors[i - 1], t_star);
    }
}

/* exact: the all-max reference and Perseus's fastest plan, evaluated. Returns the all-max
 * plan's time. */
static double check_exact(const emu_case *c, const prs_profile *p, const prs_frontier *f,
                          const prs_emulation *e, const double *factors)
{
    const char *ctx = c->name;
    double tp = c->tp;
    const prs_emu_summary *xs = prs_emulation_get(e, PRS_EMU_EXACT, PRS_EMU_PERSEUS);
    const prs_pipeline *pipe = &c->pipe;
    int nops = pipe->stages * prs_ops_per_stage(pipe);
    int *clk = malloc(sizeof *clk * (size_t)nops);
    assert_non_null(clk);
    double t_am, e_am;
    assert_int_equal(prs_baseline_allmax(p, pipe, clk, NULL), 0);
    assert_int_equal(prs_evaluate_plan(p, pipe, clk, &t_am, &e_am, NULL), 0);
    CLOSE(xs->base_time_s, t_am);
    CLOSE(xs->base_energy_j, tp * e_am);
    size_t k0;
    assert_int_equal(prs_frontier_lookup(f, 0, &k0), 0);
    CLOSE(xs->time_s, prs_frontier_point_at(f, k0)->eval_time_s);
    CLOSE(xs->intrinsic_saving_pp, 100 * (1 - prs_frontier_point_at(f, k0)->eval_energy_j / e_am));
    assert_true(xs->time_s <= t_am + 1e-9);
    for (size_t i = 0; i < NS; i++) {
        size_t k;
        assert_int_equal(prs_frontier_find_time(f, factors[i] * xs->time_s, &k, NULL), 0);
        CLOSE(xs->rows[i].choice_time_s, prs_frontier_point_at(f, k)->eval_time_s);
        assert_true(xs->rows[i].saving >= xs->rows[i].intrinsic_saving - 1e-9);
    }
    free(clk);
    return t_am;
}

/* baselines (t_am: the all-max plan's time) */
static void check_baselines(const emu_case *c, const prs_emulation *e, double t_am)
{
    const char *ctx = c->name;
    double tp = c->tp;
    const prs_emu_info *info = prs_emulation_info(e);
    for (size_t v = 0; v < 2; v++) {
        prs_emu_variant var = v ? PRS_EMU_EXACT : PRS_EMU_PAPER;
        const prs_emu_summary *am = prs_emulation_get(e, var, PRS_EMU_ALLMAX);
        const prs_emu_summary *ep = prs_emulation_get(e, var, PRS_EMU_ENVPIPE);
        const prs_emu_summary *un = prs_emulation_get(e, var, PRS_EMU_UNIFORM);
        assert_true(am && ep && un);
        assert_true(am->intrinsic_saving_pp == 0);
        for (size_t i = 0; i < NS; i++) {
            const prs_emu_metrics *a = &am->rows[i], *b = &ep->rows[i], *u = &un->rows[i];
            assert_true(a->saving == 0 && a->intrinsic_saving == 0 && a->saving_pp == 0 &&
                        a->extrinsic_saving == 0 && a->tstar == 1.0);
            CLOSE(b->extrinsic_saving, 0); /* static: nothing to gain from the straggler */
            CLOSE(b->saving, b->intrinsic_saving);
            assert_true(u->saving >= u->intrinsic_saving - 1e-9); /* adapts to T' */
            assert_true(u->saving < 100 && b->saving < 100);
        }
        if (var == PRS_EMU_EXACT) {
            assert_true(ep->intrinsic_saving_pp >= 0);
            assert_true(un->intrinsic_saving_pp >= 0);
            CLOSE(ep->energy_j, tp * info->envpipe_energy_j);
            assert_true(info->envpipe_time_s <= t_am + 1e-9);
        }
    }
}

/* One summary at 8 tp times the energies of another (b against a, o: one pipeline). */
static void check_scaled(const emu_case *c, const prs_emu_summary *a, const prs_emu_summary *b,
                         const prs_emu_summary *o, int st)
{
    const char *ctx = c->name;
    double k = 8.0 * c->tp;
    CLOSE(b->energy_j, k * a->energy_j);
    CLOSE(b->base_energy_j, k * a->base_energy_j);
    CLOSE(b->intrinsic_saving_pp, a->intrinsic_saving_pp);
    CLOSE(o->intrinsic_saving_pp, a->intrinsic_saving_pp);
    for (size_t i = 0; i < NS; i++) {
        CLOSE(b->rows[i].job_energy_j, k * a->rows[i].job_energy_j);
        CLOSE(b->rows[i].saving, a->rows[i].saving);
        CLOSE(b->rows[i].intrinsic_saving, a->rows[i].intrinsic_saving);
        CLOSE(b->rows[i].extrinsic_saving, a->rows[i].extrinsic_saving);
        CLOSE(b->rows[i].saving_pp, a->rows[i].saving_pp);
        assert_true(b->rows[i].tstar == a->rows[i].tstar);
        /* one pipeline: the straggler is the whole job */
        if (st == PRS_EMU_PERSEUS) CLOSE(o->rows[i].saving, o->intrinsic_saving_pp);
    }
}

/* tp changes absolute energies only; N leaves the intrinsic saving alone */
static void check_tp_and_pipelines(const emu_case *c, const prs_profile *p, const prs_frontier *f,
                                   const double *factors)
{
    prs_emulation *e1 = emulate(c, p, f, c->pipelines, 1, factors);
    prs_emulation *e8 = emulate(c, p, f, c->pipelines, 8 * c->tp, factors);
    prs_emulation *n1 = emulate(c, p, f, 1, c->tp, factors);
    for (int v = 0; v < PRS_EMU_NVARIANTS; v++)
        for (int st = 0; st < PRS_EMU_NSTRATEGIES; st++) {
            const prs_emu_summary *a =
                prs_emulation_get(e1, (prs_emu_variant)v, (prs_emu_strategy)st);
            const prs_emu_summary *b =
                prs_emulation_get(e8, (prs_emu_variant)v, (prs_emu_strategy)st);
            const prs_emu_summary *o =
                prs_emulation_get(n1, (prs_emu_variant)v, (prs_emu_strategy)st);
            if (!a) {
                assert_null(b);
                continue;
            }
            check_scaled(c, a, b, o, st);
        }
    prs_emulation_free(e1);
    prs_emulation_free(e8);
    prs_emulation_free(n1);
}

static void check_case(const emu_case *c)
{
    const char *ctx = c->name;
    double factors[NS];
    grid(factors);
    prs_profile *p = synth(c);
    prs_frontier *f = plan(c, p);
    size_t n = prs_frontier_size(f);
    assert_true(n > 5);
    prs_emulation *e = emulate(c, p, f, c->pipelines, c->tp, factors);
    const prs_emu_info *info = prs_emulation_info(e);
    const prs_emu_summary *ps = prs_emulation_get(e, PRS_EMU_PAPER, PRS_EMU_PERSEUS);
    assert_non_null(ps);
    assert_int_equal(ps->nrows, NS);
    double tp = c->tp;

    paper_ref ref = {c, f, n, 0, 0, 0, 0};
    frontier_extremes(&ref);
    CLOSE(info->t_min_s, ref.t_min);
    CLOSE(info->t_energy_min_s, ref.t_star);
    ref.e_base = direct_e_base(p, &c->pipe, ref.t_min);
    CLOSE(ps->base_energy_j, tp * ref.e_base);
    CLOSE(ps->energy_j, tp * ref.e_intr);
    CLOSE(ps->intrinsic_saving_pp, 100 * (1 - ref.e_intr / ref.e_base));
    if (!(ps->intrinsic_saving_pp > 0 && ps->intrinsic_saving_pp < 100))
        fail_msg("%s: intrinsic saving %.6f %%", ctx, ps->intrinsic_saving_pp);
    check_paper_rows(&ref, ps, factors);

    double t_am = check_exact(c, p, f, e, factors);
    check_baselines(c, e, t_am);
    prs_emulation_free(e);
    check_tp_and_pipelines(c, p, f, factors);
    prs_frontier_free(f);
    prs_profile_free(p);
}

static void test_case0(void **state)
{
    (void)state;
    check_case(&cases[0]);
}
static void test_case1(void **state)
{
    (void)state;
    check_case(&cases[1]);
}
static void test_case2(void **state)
{
    (void)state;
    check_case(&cases[2]);
}
static void test_case3(void **state)
{
    (void)state;
    check_case(&cases[3]);
}
static void test_case4(void **state)
{
    (void)state;
    check_case(&cases[4]);
}

/* prs_emulate plans by itself and agrees with planning first. */
static void test_plans_itself(void **state)
{
    (void)state;
    const emu_case *c = &cases[2];
    const char *ctx = c->name;
    double factors[NS];
    grid(factors);
    prs_profile *p = synth(c);
    prs_frontier *f = plan(c, p);
    prs_emulation *a = emulate(c, p, f, 4, 8, factors);
    prs_emulate_opts eo;
    memset(&eo, 0, sizeof eo);
    prs_plan_opts_default(&eo.plan);
    eo.plan.pipe = c->pipe;
    eo.plan.cost_model = c->model;
    eo.pipelines = 4;
    eo.tp = 8;
    eo.stragglers = factors;
    eo.nstragglers = NS;
    prs_emulation *b = NULL;
    assert_int_equal(prs_emulate(p, &eo, &b, NULL), 0);
    assert_int_equal(prs_frontier_size(prs_emulation_frontier(b)), prs_frontier_size(f));
    const prs_emu_summary *x = prs_emulation_get(a, PRS_EMU_PAPER, PRS_EMU_PERSEUS),
                          *y = prs_emulation_get(b, PRS_EMU_PAPER, PRS_EMU_PERSEUS);
    CLOSE(y->intrinsic_saving_pp, x->intrinsic_saving_pp);
    for (size_t i = 0; i < NS; i++)
        CLOSE(y->rows[i].saving, x->rows[i].saving);
    assert_int_equal(prs_emulation_job(b)->stages, c->pipe.stages);
    prs_emulation_free(a);
    prs_emulation_free(b);
    prs_frontier_free(f);
    prs_profile_free(p);
}

static void test_errors(void **state)
{
    (void)state;
    const emu_case *c = &cases[3];
    prs_profile *p = synth(c);
    prs_frontier *f = plan(c, p);
    prs_emulate_opts eo;
    memset(&eo, 0, sizeof eo);
    double bad[] = {1.1, 0.99};
    eo.pipelines = 0;
    eo.tp = 1;
    prs_emulation *e = NULL;
    prs_error err = {0, ""};
    assert_int_equal(prs_emulate_frontier(p, f, &eo, &e, &err), PRS_EINVAL);
    assert_non_null(strstr(err.msg, "pipelines"));
    assert_null(e);
    eo.pipelines = 2;
    eo.tp = 0;
    assert_int_equal(prs_emulate_frontier(p, f, &eo, &e, &err), PRS_EINVAL);
    assert_non_null(strstr(err.msg, "tp"));
    /* more than PRS_MAX_JOB_GPUS GPUs: refused, never multiplied out in int */
    eo.pipelines = INT_MAX;
    eo.tp = INT_MAX;
    assert_int_equal(prs_emulate_frontier(p, f, &eo, &e, &err), PRS_EINVAL);
    assert_non_null(strstr(err.msg, "exceeds 10000000 GPUs"));
    eo.pipelines = (int)(PRS_MAX_JOB_GPUS / c->pipe.stages) + 1;
    eo.tp = 1;
    assert_int_equal(prs_emulate_frontier(p, f, &eo, &e, &err), PRS_EINVAL);
    assert_null(e);
    eo.pipelines = 2;
    eo.tp = 1;
    eo.stragglers = bad;
    eo.nstragglers = 2;
    assert_int_equal(prs_emulate_frontier(p, f, &eo, &e, &err), PRS_EINVAL);
    assert_non_null(strstr(err.msg, "0.99"));
    prs_frontier_free(f);
    prs_profile_free(p);

    /* one clock per computation: the iteration cannot be shortened; its one plan is the frontier
     * and the emulation runs on it (every strategy at that plan's figures) */
    prs_profile *one = prs_profile_new();
    for (int s = 0; s < 2; s++)
        for (int in = 0; in < 2; in++) {
            prs_profile_row r = {s, (prs_instr)in, 1410, 0.05 * (in + 1), 20.0 * (in + 1), 0};
            assert_int_equal(prs_profile_add(one, &r, NULL), 0);
        }
    memset(&eo, 0, sizeof eo);
    prs_plan_opts_default(&eo.plan);
    eo.plan.pipe.stages = 2;
    eo.plan.pipe.microbatches = 2;
    eo.plan.pipe.blocking_power_w = 50;
    eo.pipelines = 2;
    eo.tp = 1;
    double s12 = 1.2;
    eo.stragglers = &s12;
    eo.nstragglers = 1;
    assert_int_equal(prs_emulate(one, &eo, &e, &err), 0);
    assert_int_equal(prs_frontier_size(prs_emulation_frontier(e)), 1);
    assert_int_equal(prs_emulation_info(e)->clean_points, 1);
    prs_emulation_free(e);
    prs_profile_free(one);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_case0),  cmocka_unit_test(test_case1),
        cmocka_unit_test(test_case2),  cmocka_unit_test(test_case3),
        cmocka_unit_test(test_case4),  cmocka_unit_test(test_plans_itself),
        cmocka_unit_test(test_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
