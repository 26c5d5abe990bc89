/* perseus infer emulate --cluster FILE: the trace replayed on the fixed cluster of a router
 * configuration (cli_fixed.h), every instance at its configured clock or, with
 * --instance-level S, at the clock perseus-instclock's rule chooses every S seconds; printed as
 * a short table or one JSON object (docs/inference.md, "A fixed cluster"). */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>

#include "cli.h"
#include "cli_fixed.h"
#include "cmd_infer_emulate_cluster.h"

#define CMD "infer emulate"

static json_t *result_json(const prs_cli_emulate_cluster *a, const prs_router_config *cfg,
                           const prs_infer_trace *t, const prs_infer_fixed_result *r)
{
    const prs_infer_latency *l = &r->lat;
    json_t *inst = json_array();
    for (int i = 0; i < cfg->ninst; i++)
        json_array_append_new(
            inst,
            json_pack("{s:s, s:s, s:i, s:I, s:f, s:f, s:i, s:i}", "name", cfg->inst[i].name, "pool",
                      cfg->pools[cfg->inst[i].pool].name, "tp", cfg->inst[i].tp, "served",
                      (json_int_t)r->served[i], "energy_j", r->energy_inst_j[i], "mhz_mean",
                      r->mhz_mean[i], "mhz_min", r->mhz_min[i], "mhz_max", r->mhz_max[i]));
    return json_pack(
        "{s:s, s:{s:s, s:I, s:f}, s:i, s:f, s:f, s:I, s:I, s:I, s:I, s:f, s:f, s:f, s:f, "
        "s:f, s:f, s:f, s:o}",
        "cluster", a->cluster_path, "trace", "path", a->trace_path, "requests", (json_int_t)t->n,
        "span_s", t->n ? t->reqs[t->n - 1].arrival_s : 0.0, "instances_n", cfg->ninst,
        "instance_period_s", a->fixed.instance_period_s, "headroom", a->fixed.headroom, "requests",
        (json_int_t)r->requests, "rejected", (json_int_t)r->rejected, "rerouted",
        (json_int_t)r->rerouted, "clock_changes", (json_int_t)r->clock_changes, "slo_attainment",
        prs_cli_fixed_slo_pct(r) / 100, "energy_j", r->energy_j, "duration_s", r->duration_s,
        "ttft_p50_s", prs__infer_hist_quantile(&l->ttft[PRS_INFER_ALL], 0.5), "ttft_p99_s",
        prs__infer_hist_quantile(&l->ttft[PRS_INFER_ALL], 0.99), "tbt_p50_s",
        prs__infer_hist_quantile(&l->tbt[PRS_INFER_ALL], 0.5), "tbt_p99_s",
        prs__infer_hist_quantile(&l->tbt[PRS_INFER_ALL], 0.99), "instances", inst);
}

static void print_table(const prs_cli_emulate_cluster *a, const prs_router_config *cfg,
                        const prs_infer_trace *t, const prs_infer_fixed_result *r)
{
    const prs_infer_latency *l = &r->lat;
    printf("fixed cluster %s: %d instances in %d pools, %s on %s\n", a->cluster_path, cfg->ninst,
           cfg->npools, cfg->cost.llm->name, cfg->cost.gpu->name);
    if (a->fixed.instance_period_s > 0)
        printf("clocks: the instance level every %g s (headroom %g)\n", a->fixed.instance_period_s,
               a->fixed.headroom);
    else
        printf("clocks: as configured\n");
    printf("trace: %s, %zu requests\n\n", a->trace_path, t->n);
    printf("requests             %ld (rejected %ld, re-routed %ld)\n", r->requests, r->rejected,
           r->rerouted);
    printf("SLO attainment       %.2f %%\n", prs_cli_fixed_slo_pct(r));
    printf("energy (kJ)          %.1f\n", r->energy_j / 1e3);
    printf("duration (s)         %.1f\n", r->duration_s);
    printf("TTFT p50 / p99 (s)   %.3f / %.3f\n",
           prs__infer_hist_quantile(&l->ttft[PRS_INFER_ALL], 0.5),
           prs__infer_hist_quantile(&l->ttft[PRS_INFER_ALL], 0.99));
    printf("TBT  p50 / p99 (s)   %.3f / %.3f\n",
           prs__infer_hist_quantile(&l->tbt[PRS_INFER_ALL], 0.5),
           prs__infer_hist_quantile(&l->tbt[PRS_INFER_ALL], 0.99));
    printf("clock changes        %ld\n", r->clock_changes);
    printf("per instance: requests, energy (kJ), clock MHz mean / min / max\n");
    for (int i = 0; i < cfg->ninst; i++)
        printf("  %s (pool %s, TP %d, batch %d): %ld, %.1f, %.0f / %d / %d\n", cfg->inst[i].name,
               cfg->pools[cfg->inst[i].pool].name, cfg->inst[i].tp, cfg->inst[i].max_running,
               r->served[i], r->energy_inst_j[i] / 1e3, r->mhz_mean[i], r->mhz_min[i],
               r->mhz_max[i]);
}

int prs_cli_infer_emulate_cluster(const prs_cli_emulate_cluster *a, const prs_infer_trace *t)
{
    prs_router_config cfg = {0};
    prs_error err = {0};
    if (prs__router_config_load(a->cluster_path, &cfg, &err)) {
        fprintf(stderr, "perseus %s: %s\n", CMD, err.msg);
        return 2;
    }
    prs_infer_fixed_result *r = calloc(1, sizeof *r);
    int rc = r ? 0 : 1;
    if (!rc && prs_cli_fixed_run(&cfg, t, &a->fixed, r, &err)) {
        fprintf(stderr, "perseus %s: %s: %s\n", CMD, a->cluster_path, err.msg);
        rc = 2;
    }
    if (!rc && a->json) {
        if (prs_cli_json_print(result_json(a, &cfg, t, r), JSON_INDENT(2))) rc = 1;
    } else if (!rc) {
        print_table(a, &cfg, t, r);
    }
    free(r);
    prs__router_config_free(&cfg);
    return rc;
}
