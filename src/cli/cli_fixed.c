/* Emulating a live cluster from its router configuration (cli_fixed.h): the router's choice
 * and perseus-instclock's clock rule, called as they are by the live programs. */
#include "cli_fixed.h"

#include <stdlib.h>

#include "roofline_perf.h"
#include "router_pick.h"

void prs_cli_fixed_default(prs_cli_fixed *o)
{
    *o = (prs_cli_fixed){.max_batched_tokens = 8192, .instance_period_s = 0, .headroom = 0.6};
}

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

/* The 99th percentile prompt of the trace's requests of input class in (0 when none). */
static int prompt_p99(const prs_infer_trace *t, const prs_infer_classes *c, int in)
{
    int *v = malloc(sizeof *v * (t->n ? t->n : 1)), n = 0;
    for (size_t i = 0; v && i < t->n; i++)
        if (prs_infer_class_of(c, t->reqs[i].in_tokens, t->reqs[i].out_tokens) / 3 == in)
            v[n++] = t->reqs[i].in_tokens;
    int p = 0;
    if (n) {
        qsort(v, (size_t)n, sizeof *v, cmp_int);
        p = v[(int)(0.99 * (n - 1))];
    }
    free(v);
    return p;
}

int prs_cli_pool_slo(const prs_infer_trace *t, const prs_infer_classes *c, const int *pool_of_class,
                     int pool, double headroom, prs_instclock_slo *slo)
{
    /* perseus-instclock's defaults, for a pool that serves no class */
    *slo = (prs_instclock_slo){
        .ttft_s = 0.5, .tbt_s = c->tbt_slo_s, .headroom = headroom, .prompt_tokens = 512};
    int n = 0;
    for (int in = 0; in < 3; in++) {
        int served = 0;
        for (int out = 0; out < 3; out++)
            served |= pool_of_class[3 * in + out] == pool;
        if (!served) continue;
        int p = prompt_p99(t, c, in);
        if (p == 0) p = in < 2 ? c->in_limit[in] : 2 * c->in_limit[1]; /* none in the trace */
        if (n == 0) {
            slo->prompt_tokens = p;
            slo->ttft_s = c->ttft_slo_s[in];
        } else {
            slo->target_tokens[slo->ntargets] = p;
            slo->target_ttft_s[slo->ntargets++] = c->ttft_slo_s[in];
        }
        n++;
    }
    return n;
}

typedef struct hooks_ctx {
    const prs_router_config *cfg;
    prs_instclock_slo slo[PRS_ROUTER_MAX_POOLS];
} hooks_ctx;

static int route(void *ud, const int *inflight, int klass, long in_tokens, long out_tokens,
                 int *rerouted)
{
    const hooks_ctx *h = ud;
    prs_router_load load[PRS_INFER_FIXED_MAX_INST] = {{0}};
    for (int i = 0; i < h->cfg->ninst; i++)
        load[i].inflight = inflight[i];
    return prs__router_pick(h->cfg, load, NULL, 0, klass, in_tokens, out_tokens, rerouted);
}

static int clock(void *ud, int i, const prs_infer_fixed_load *l, int *mhz, prs_error *err)
{
    const hooks_ctx *h = ud;
    const prs_router_instance *in = &h->cfg->inst[i];
    prs_instclock_load load = {l->running, l->waiting, l->kv_usage, -1, l->prompt_rate};
    return prs__instclock_pick(&h->cfg->cost, in->tp, &h->slo[in->pool], &load, mhz, err);
}

int prs_cli_fixed_run(const prs_router_config *cfg, const prs_infer_trace *t,
                      const prs_cli_fixed *o, prs_infer_fixed_result *out, prs_error *err)
{
    if (cfg->ninst > PRS_INFER_FIXED_MAX_INST)
        return prs_error_set(err, PRS_EINVAL, "the cluster has %d instances; at most %d",
                             cfg->ninst, PRS_INFER_FIXED_MAX_INST);
    hooks_ctx h = {.cfg = cfg};
    for (int p = 0; p < cfg->npools; p++)
        prs_cli_pool_slo(t, &cfg->classes, cfg->pool_of_class, p, o->headroom, &h.slo[p]);
    prs_infer_fixed_cfg *fc = calloc(1, sizeof *fc);
    prs_infer_roofline_perf *rp = calloc((size_t)cfg->ninst, sizeof *rp);
    prs_infer_perf *perf = calloc((size_t)cfg->ninst, sizeof *perf);
    if (!fc || !rp || !perf) {
        free(fc);
        free(rp);
        free(perf);
        return prs_error_set(err, PRS_ENOMEM, "out of memory");
    }
    int rc = 0;
    fc->n_inst = cfg->ninst;
    for (int i = 0; i < cfg->ninst && !rc; i++) {
        /* the router's in-flight limit is the instance's batch (the demo gives its fakes the
         * same --max-running) */
        rc = prs_infer_roofline_perf_init(&rp[i], &cfg->cost, cfg->inst[i].max_running,
                                          PRS_INSTCLOCK_STEP_MHZ, &perf[i], err);
        fc->perf[i] = &perf[i];
        fc->tp[i] = cfg->inst[i].tp;
        fc->mhz[i] = cfg->inst[i].mhz;
    }
    fc->max_batched_tokens = o->max_batched_tokens;
    fc->classes = cfg->classes;
    fc->instance_period_s = o->instance_period_s;
    fc->run_steps = 64;
    fc->hooks = (prs_infer_fixed_hooks){&h, route, o->instance_period_s > 0 ? clock : NULL};
    if (!rc) rc = prs_infer_fixed_replay(t, fc, out, err);
    free(fc);
    free(rp);
    free(perf);
    return rc;
}

double prs_cli_fixed_slo_pct(const prs_infer_fixed_result *r)
{
    return r->requests ? 100.0 * (double)r->on_time / (double)r->requests : 0;
}
