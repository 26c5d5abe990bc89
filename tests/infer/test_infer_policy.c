/* The serving policies (src/infer/capacity.c, cluster.c, policy.c, plan.c) on a hand-written
 * backend (infer_hand.h) shaped like a 70B model on 8-GPU servers: prefill 20 ms + 0.12 ms a
 * token, decode 25 ms + 0.2 ms a sequence at TP 8 and the top clock; busy power falling with the
 * clock faster than time grows (a lower clock saves energy); TP 2 slower but, with times
 * scaling as (8/tp)^0.3, cheaper per request.
 *   - capacity: positive, non-decreasing with the clock, power points from idle upward; an
 *     SLO nothing meets gives capacity 0, and the replay names the class;
 *   - singlepool: sized for the trace's peak (instances = ceil(peak / (capacity x util))), no
 *     reconfiguration, GPU-hours = its GPUs over the replay; refused when the cluster is small;
 *   - instance level: at low load the clock policy lowers clocks and spends less than
 *     multipool, every request served;
 *   - cluster level: on a load that falls by 4x after a quarter, the instances policy
 *     provisions fewer GPU-hours than multipool;
 *   - pool level (plan): short requests at a small load get TP 2 instances;
 *   - the lower bound is below every policy; a poor output-length predictor re-routes;
 *   - power budget: a static policy under a budget below its peak lowers its clocks and spends
 *     less, its measured power above the budget a small share of the time; a budget below the
 *     idle power of its GPUs is reported unmet; dynamollm under a tight budget plans fewer GPUs
 *     and pays in late requests, which the result shows;
 *   - phase-aware clocks: with decode steps mostly bound by memory, the phase policy spends less
 *     than dynamollm within the SLOs; with no slack it is dynamollm exactly;
 *   - decode runs: replaying with runs of up to 64 decode steps as one event gives the results
 *     of one step at a time (counts exactly, energies to rounding) in a fraction of the events. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cluster.h"
#include "infer_hand.h"
#include "plan.h"

static hand_model model(void)
{
    return (hand_model){.pf_base_s = 0.02,
                        .pf_per_token_s = 0.00012,
                        .dc_base_s = 0.025,
                        .dc_per_seq_s = 0.0002,
                        .dc_per_ctx_s = 1e-7,
                        .busy_w = 1000,
                        .busy_w_per_mhz = 3,
                        .idle_w = 600,
                        .kv_tokens = 400000,
                        .max_batch = 128,
                        .clocks = {800, 1200, 1600, 1980},
                        .n_clocks = 4,
                        .tps = {2, 4, 8},
                        .n_tps = 3,
                        .tp_alpha = 0.3};
}

typedef struct world {
    hand_model m;
    prs_infer_perf perf;
    prs_infer_opts o;
    prs_infer_cap_opts co;
    prs_infer_captable caps;
    prs_infer_trace t;
} world;

/* Poisson segments: rate[i] req/s over 900 s each, lengths alternating short and medium. */
static world *world_new(const double *rates, int n)
{
    world *w = calloc(1, sizeof *w);
    assert_non_null(w);
    w->m = model();
    w->perf = hand_perf(&w->m);
    prs_infer_opts_default(&w->o);
    prs_infer_cap_opts_default(&w->co);
    w->co.probe_requests = 200;
    w->o.gpus = 64;
    w->o.cluster_period_s = 900;
    w->o.pool_period_s = 300;
    prs_infer_req lens[4] = {{0, 100, 50}, {0, 500, 200}, {0, 120, 60}, {0, 600, 150}};
    prs_infer_trace src = {lens, 4, 0};
    prs_error err = {0};
    size_t cap = 0;
    for (int i = 0; i < n; i++)
        cap += (size_t)(rates[i] * 900 * 1.5) + 100;
    w->t.reqs = malloc(cap * sizeof *w->t.reqs);
    for (int i = 0; i < n; i++) {
        prs_infer_trace seg;
        assert_int_equal(
            prs_infer_trace_poisson(rates[i], 900, &src, 0, 0, (uint64_t)i + 5, &seg, &err), 0);
        for (size_t k = 0; k < seg.n; k++) {
            w->t.reqs[w->t.n] = seg.reqs[k];
            w->t.reqs[w->t.n++].arrival_s += 900.0 * i;
        }
        prs_infer_trace_free(&seg);
    }
    assert_int_equal(
        prs_infer_captable_build(&w->perf, &w->o.classes, &w->co, &w->t, &w->caps, &err), 0);
    return w;
}

static void world_free(world *w)
{
    prs_infer_trace_free(&w->t);
    free(w);
}

static prs_infer_result *replay(world *w, prs_infer_policy p)
{
    prs_infer_result *r = calloc(1, sizeof *r);
    prs_error err = {0};
    if (prs_infer_replay(&w->t, &w->perf, &w->caps, &w->o, p, r, &err))
        fail_msg("%s: %s", prs_infer_policy_name(p), err.msg);
    assert_int_equal(r->lat.done[PRS_INFER_ALL], w->t.n); /* nothing lost */
    assert_int_equal(r->requests, (long)w->t.n);
    return r;
}

static void result_free(prs_infer_result *r)
{
    prs_infer_result_free(r);
    free(r);
}

static void test_capacity(void **state)
{
    (void)state;
    double rate[1] = {4};
    world *w = world_new(rate, 1);
    const prs_infer_captable *c = &w->caps;
    assert_int_equal(c->n_tps, 3);
    assert_int_equal(c->n_clocks, 4);
    for (int k = 0; k < PRS_INFER_MIXES; k++) {
        if (!c->has_mix[k]) continue;
        for (int a = 0; a < c->n_tps; a++)
            for (int f = 0; f < c->n_clocks; f++) {
                const prs_infer_cap *x = &c->cap[k][a][f];
                if (f > 0) assert_true(x->rate_rps >= c->cap[k][a][f - 1].rate_rps * 0.97);
                if (x->rate_rps == 0) continue;
                assert_true(x->power_w[0] >= x->idle_w);
                for (int i = 1; i < PRS_INFER_POWER_POINTS; i++)
                    assert_true(x->power_w[i] >= x->power_w[i - 1]);
                assert_true(fabs(prs_infer_cap_power(x, 0) - x->idle_w) < 1e-9);
            }
        /* TP 8 at the top clock serves something. */
        assert_true(c->cap[k][2][3].rate_rps > 0);
    }
    /* An SLO nothing meets: capacity 0 everywhere, and the replay names the class. */
    w->o.classes.ttft_slo_s[0] = 1e-4;
    prs_infer_captable *tight = calloc(1, sizeof *tight);
    prs_error err = {0};
    assert_int_equal(prs_infer_captable_build(&w->perf, &w->o.classes, &w->co, &w->t, tight, &err),
                     0);
    assert_true(tight->cap[0][2][3].rate_rps == 0);
    prs_infer_result r;
    assert_int_equal(prs_infer_replay(&w->t, &w->perf, tight, &w->o, PRS_INFER_DYNAMOLLM, &r, &err),
                     PRS_EINVAL);
    assert_non_null(strstr(err.msg, "class SS: no configuration"));
    free(tight);
    world_free(w);
}

static void test_singlepool(void **state)
{
    (void)state;
    double rate[1] = {6};
    world *w = world_new(rate, 1);
    prs_infer_result *r = replay(w, PRS_INFER_SINGLEPOOL);
    double cap = w->caps.cap[PRS_INFER_NCLASS][2][3].rate_rps * w->o.max_util;
    double peak = prs_infer_trace_peak_rate(&w->t, w->o.peak_window_s);
    int inst = (int)ceil(peak / cap - 1e-9);
    /* Sizing is on units of capacity/24: at most one instance more than the exact count. */
    assert_true(r->peak_gpus == 8 * inst || r->peak_gpus == 8 * (inst + 1));
    for (int k = 0; k < PRS_INFER_NRECONF; k++)
        assert_int_equal(r->reconf[k], 0);
    assert_true(fabs(r->gpu_hours - r->peak_gpus * r->duration_s / 3600) < 1e-6);
    /* At least every GPU's idle power all along. */
    assert_true(r->energy_j >= r->peak_gpus * (600.0 / 8) * r->duration_s * (1 - 1e-9));
    assert_true(r->power_p99_w >= r->power_p50_w);
    assert_true((double)r->lat.late[PRS_INFER_ALL] <= 0.01 * (double)r->lat.done[PRS_INFER_ALL]);
    result_free(r);
    /* A cluster smaller than the peak needs: refused, saying how many GPUs it needs. */
    w->o.gpus = 8;
    prs_infer_result x;
    prs_error err = {0};
    if (inst > 1) {
        assert_int_equal(
            prs_infer_replay(&w->t, &w->perf, &w->caps, &w->o, PRS_INFER_SINGLEPOOL, &x, &err),
            PRS_EINVAL);
        assert_non_null(strstr(err.msg, "singlepool needs"));
    }
    world_free(w);
}

static void test_instance_level(void **state)
{
    (void)state;
    double rate[1] = {1.5};
    world *w = world_new(rate, 1);
    prs_infer_result *multi = replay(w, PRS_INFER_MULTIPOOL);
    prs_infer_result *clock = replay(w, PRS_INFER_CLOCK);
    assert_true(clock->reconf[PRS_INFER_RECONF_CLOCK] > 0);
    assert_int_equal(multi->reconf[PRS_INFER_RECONF_CLOCK], 0);
    assert_true(clock->energy_j < multi->energy_j);
    /* The same instances. */
    assert_int_equal(clock->peak_gpus, multi->peak_gpus);
    double lb;
    prs_error err = {0};
    assert_int_equal(prs_infer_lower_bound(&w->t, &w->caps, &w->o, &lb, &err), 0);
    assert_true(lb > 0 && lb < clock->energy_j);
    result_free(multi);
    result_free(clock);
    world_free(w);
}

static void test_cluster_level(void **state)
{
    (void)state;
    double rate[4] = {40, 6, 6, 6};
    world *w = world_new(rate, 4);
    w->o.headroom = 1;
    prs_infer_result *multi = replay(w, PRS_INFER_MULTIPOOL);
    prs_infer_result *inst = replay(w, PRS_INFER_INSTANCES);
    prs_infer_result *dyn = replay(w, PRS_INFER_DYNAMOLLM);
    assert_true(inst->gpu_hours < multi->gpu_hours);
    assert_true(inst->reconf[PRS_INFER_RECONF_STOP] > 0);
    assert_int_equal(multi->reconf[PRS_INFER_RECONF_STOP], 0);
    assert_true(inst->energy_j < multi->energy_j);
    assert_true(dyn->energy_j < multi->energy_j);
    double lb;
    prs_error err = {0};
    assert_int_equal(prs_infer_lower_bound(&w->t, &w->caps, &w->o, &lb, &err), 0);
    assert_true(lb < dyn->energy_j && lb < inst->energy_j);
    result_free(multi);
    result_free(inst);
    result_free(dyn);
    world_free(w);
}

static void test_pool_level(void **state)
{
    (void)state;
    double rate[1] = {2};
    world *w = world_new(rate, 1);
    double load[PRS_INFER_NCLASS] = {0};
    load[0] = 1.0; /* SS: 100 + 50 tokens and 120 + 60 */
    prs_infer_plan *p = calloc(1, sizeof *p);
    prs_error err = {0};
    assert_int_equal(prs_infer_plan_load(&w->caps, &w->o, load, p, &err), 0);
    assert_true(p->pool[0].n_inst >= 1);
    for (int i = 0; i < p->pool[0].n_inst; i++)
        assert_int_equal(p->pool[0].inst[i].tp, 2);
    assert_true(p->gpus == p->pool[0].gpus && p->gpus <= 8);
    assert_true(p->power_w < p->single_power_w);
    /* A load beyond the cluster is refused. */
    load[0] = 1e5;
    assert_int_equal(prs_infer_plan_load(&w->caps, &w->o, load, p, &err), PRS_ERANGE);
    free(p);
    world_free(w);
}

static void test_predictor(void **state)
{
    (void)state;
    double rate[1] = {3};
    world *w = world_new(rate, 1);
    w->o.predictor_accuracy = 0.5;
    prs_infer_result *r = replay(w, PRS_INFER_DYNAMOLLM);
    w->o.predictor_accuracy = 1;
    prs_infer_result *o = replay(w, PRS_INFER_DYNAMOLLM);
    assert_true(r->energy_j != o->energy_j);
    result_free(r);
    result_free(o);
    world_free(w);
}

/* P99 of the cluster's power, and the energy, of p with and without a budget of cap_w. */
static void capped_pair(world *w, prs_infer_policy p, double cap_w, prs_infer_result **free_r,
                        prs_infer_result **cap_r)
{
    w->o.power_cap_w = 0;
    *free_r = replay(w, p);
    w->o.power_cap_w = cap_w;
    *cap_r = replay(w, p);
    w->o.power_cap_w = 0;
}

static void test_power_cap_static(void **state)
{
    (void)state;
    double rate[2] = {6, 3};
    world *w = world_new(rate, 2);
    prs_infer_result *f, *c;
    capped_pair(w, PRS_INFER_MULTIPOOL, 0, &f, &c);
    /* No budget: no trace of one. */
    assert_int_equal(c->cap_lowered + c->cap_unmet + c->cap_short, 0);
    assert_true(c->over_cap_s == 0 && c->energy_j == f->energy_j);
    result_free(f);
    result_free(c);
    /* A budget between the GPUs' idle power and the uncapped P99. */
    prs_infer_result *base = replay(w, PRS_INFER_MULTIPOOL);
    double idle_w = base->peak_gpus * 600.0 / 8;
    double cap_w = idle_w + 0.6 * (base->power_p99_w - idle_w);
    result_free(base);
    capped_pair(w, PRS_INFER_MULTIPOOL, cap_w, &f, &c);
    assert_true(c->cap_lowered > 0);
    assert_true(c->energy_j < f->energy_j);
    assert_true(c->power_p99_w < f->power_p99_w);
    assert_true(c->over_cap_s < 0.05 * c->duration_s);
    assert_int_equal(c->peak_gpus, f->peak_gpus); /* multipool cannot drop instances */
    result_free(f);
    result_free(c);
    /* Below the idle power of its GPUs no clock helps: reported, not hidden. */
    capped_pair(w, PRS_INFER_MULTIPOOL, 0.5 * idle_w, &f, &c);
    assert_true(c->cap_unmet > 0);
    assert_true(c->over_cap_s > 0.5 * c->duration_s && c->over_cap_max_w > 0);
    result_free(f);
    result_free(c);
    world_free(w);
}

static void test_power_cap_dynamic(void **state)
{
    (void)state;
    double rate[2] = {20, 20};
    world *w = world_new(rate, 2);
    prs_infer_result *f, *c;
    prs_infer_result *base = replay(w, PRS_INFER_DYNAMOLLM);
    double cap_w = 0.5 * base->power_p50_w;
    result_free(base);
    capped_pair(w, PRS_INFER_DYNAMOLLM, cap_w, &f, &c);
    assert_true(c->cap_short > 0);
    assert_true(c->peak_gpus < f->peak_gpus);
    assert_true(c->power_p99_w <= cap_w * (1 + 1e-9));
    assert_true(c->over_cap_s == 0);
    assert_true(c->energy_j < f->energy_j);
    /* Half the power cannot carry the load within the SLOs: the late requests show it. */
    assert_true(c->lat.late[PRS_INFER_ALL] > f->lat.late[PRS_INFER_ALL]);
    result_free(f);
    result_free(c);
    world_free(w);
}

static void test_phase_clocks(void **state)
{
    (void)state;
    double rate[1] = {6};
    world *w = world_new(rate, 1);
    w->m.dc_mem_share = 0.8;
    prs_error err = {0};
    assert_int_equal(
        prs_infer_captable_build(&w->perf, &w->o.classes, &w->co, &w->t, &w->caps, &err), 0);
    prs_infer_result *dyn = replay(w, PRS_INFER_DYNAMOLLM);
    prs_infer_result *ph = replay(w, PRS_INFER_PHASE);
    assert_true(ph->energy_j < 0.99 * dyn->energy_j);
    assert_true((double)ph->lat.late[PRS_INFER_ALL] <= 0.01 * (double)ph->lat.done[PRS_INFER_ALL]);
    /* Decode steps at most phase_slack longer (the histograms' bins are 1.2 % wide). */
    double g_dyn = prs__infer_hist_quantile(&dyn->lat.tbt[PRS_INFER_ALL], 0.5);
    double g_ph = prs__infer_hist_quantile(&ph->lat.tbt[PRS_INFER_ALL], 0.5);
    assert_true(g_ph > g_dyn * 1.01 && g_ph <= g_dyn * (1 + w->o.phase_slack) * 1.03);
    result_free(ph);
    /* No slack: no lower clock keeps a decode step as fast, and phase is dynamollm. */
    w->o.phase_slack = 0;
    ph = replay(w, PRS_INFER_PHASE);
    assert_true(ph->energy_j == dyn->energy_j);
    result_free(ph);
    result_free(dyn);
    world_free(w);
}

static void same_results(const prs_infer_result *a, const prs_infer_result *b)
{
    assert_true(fabs(a->energy_j - b->energy_j) <= 1e-9 * a->energy_j);
    assert_int_equal(a->requests, b->requests);
    assert_int_equal(a->rerouted, b->rerouted);
    assert_int_equal(a->emergencies, b->emergencies);
    assert_int_equal(a->preemptions, b->preemptions);
    assert_int_equal(a->peak_gpus, b->peak_gpus);
    assert_int_equal(a->cap_lowered, b->cap_lowered);
    assert_int_equal(a->cap_floor_iters, b->cap_floor_iters);
    assert_memory_equal(a->reconf, b->reconf, sizeof a->reconf);
    assert_true(a->duration_s == b->duration_s);
    for (int k = 0; k <= PRS_INFER_NCLASS; k++) {
        assert_memory_equal(a->lat.ttft[k].bins, b->lat.ttft[k].bins, sizeof a->lat.ttft[k].bins);
        assert_memory_equal(a->lat.tbt[k].bins, b->lat.tbt[k].bins, sizeof a->lat.tbt[k].bins);
        assert_int_equal(a->lat.late[k], b->lat.late[k]);
        assert_int_equal(a->lat.done[k], b->lat.done[k]);
    }
    assert_int_equal(a->meter.n, b->meter.n);
    for (size_t k = 0; k < a->meter.n; k++)
        assert_true(fabs(a->meter.energy_j[k] - b->meter.energy_j[k]) <=
                    1e-9 * (1 + a->meter.energy_j[k]));
}

static void test_decode_runs(void **state)
{
    (void)state;
    double rate[2] = {8, 2};
    world *w = world_new(rate, 2);
    w->m.dc_mem_share = 0.8; /* the phase policy lowers decode clocks */
    w->m.kv_tokens = 12000;  /* some preemption */
    prs_error err = {0};
    assert_int_equal(
        prs_infer_captable_build(&w->perf, &w->o.classes, &w->co, &w->t, &w->caps, &err), 0);
    static const prs_infer_policy pol[] = {PRS_INFER_SINGLEPOOL, PRS_INFER_PHASE};
    long preempted = 0;
    for (int cap = 0; cap < 2; cap++)
        for (size_t p = 0; p < sizeof pol / sizeof pol[0]; p++) {
            w->o.power_cap_w = cap ? 4000 : 0;
            w->o.run_steps = 1;
            prs_infer_result *one = replay(w, pol[p]);
            w->o.run_steps = 64;
            prs_infer_result *run = replay(w, pol[p]);
            same_results(one, run);
            /* Under the budget the queues are long: runs are cut by arrivals more often. */
            assert_true(run->events * (cap ? 1 : 3) < one->events);
            preempted += one->preemptions;
            result_free(one);
            result_free(run);
        }
    assert_true(preempted > 0);
    world_free(w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_capacity),         cmocka_unit_test(test_singlepool),
        cmocka_unit_test(test_instance_level),   cmocka_unit_test(test_cluster_level),
        cmocka_unit_test(test_pool_level),       cmocka_unit_test(test_predictor),
        cmocka_unit_test(test_power_cap_static), cmocka_unit_test(test_power_cap_dynamic),
        cmocka_unit_test(test_phase_clocks),     cmocka_unit_test(test_decode_runs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
