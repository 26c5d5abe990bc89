/* Starting the services of perseus demo --inference (demo_infer_int.h): perseusd with an
 * inference cluster declared in it, perseus-gpud on the fake NVML when it is at hand, the fake
 * instances, the router (reporting to the cluster) and the clock controllers. Every program runs
 * from the perseus binary's directory, every file lives in the demo's temporary directory. */
#define _GNU_SOURCE
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "cli_fixed.h"
#include "demo_infer_int.h"
#include "infer_synth.h"
#include "roofline.h"

static int write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    int rc = !f || fputs(text, f) < 0;
    if (f && fclose(f)) rc = 1;
    if (rc) fprintf(stderr, DEMO_CMD ": cannot write %s\n", path);
    return rc;
}

int demo_start_perseusd(demo_state *st)
{
    char dir[600], port[600];
    snprintf(dir, sizeof dir, "%s/perseusd", st->ps.tmp);
    snprintf(port, sizeof port, "%s/perseusd.port", st->ps.tmp);
    char *argv[] = {"perseusd", "--listen",    "127.0.0.1:0", "--data-dir",
                    dir,        "--port-file", port,          NULL};
    int idx = demo_spawn(&st->ps, "perseusd", "perseusd", argv, NULL);
    if (idx < 0) return 1;
    st->server_port = demo_wait_port(&st->ps, idx, "perseusd.port", 30);
    return st->server_port > 0 ? 0 : 1;
}

/* The cluster's instances: the fakes, with made-up GPU UUIDs (the demo's GPUs are fakes). */
static json_t *cluster_pools(const demo_state *st)
{
    json_t *pools = json_object();
    for (int i = 0; i < demo_ninst; i++) {
        const char *cls = inst_pool[i] == 0 ? "SS" : "LS";
        json_t *p = json_object_get(pools, cls);
        if (!p) {
            p = json_pack("{s:[]}", "instances");
            json_object_set_new(pools, cls, p);
        }
        json_t *gpus = json_array();
        for (int g = 0; g < inst_tp[i]; g++) {
            char uuid[64];
            snprintf(uuid, sizeof uuid, "GPU-demo-%s-%d", inst_names[i], g);
            json_array_append_new(gpus, json_string(uuid));
        }
        char url[64];
        snprintf(url, sizeof url, "http://127.0.0.1:%d", st->fake_port[i]);
        json_array_append_new(
            json_object_get(p, "instances"),
            json_pack("{s:s, s:i, s:o}", "url", url, "tp", inst_tp[i], "gpus", gpus));
    }
    return pools;
}

/* POST /v1/clusters: the cluster with a synthetic profile (TP 2 and 4, three clocks). */
int demo_declare_cluster(demo_state *st)
{
    prs_infer_roofline rf;
    prs_error err = {0};
    static const int tps[] = {2, 4}, mhz[] = {1980, 1455, 930};
    char *csv = NULL;
    size_t len = 0;
    if (prs_infer_roofline_init(&rf, prs_infer_llm_find(DEMO_MODEL), prs_infer_gpu_find(DEMO_GPU),
                                &err) != 0 ||
        prs_infer_synth_csv(&rf, tps, 2, mhz, 3, &csv, &len, &err) != 0) {
        fprintf(stderr, DEMO_CMD ": profile: %s\n", err.msg);
        return 1;
    }
    /* Periods of 0: every report planned at once (the demo shows the plan at the highest load;
     * the periodic levels' 30-min period outlasts a demo). */
    json_t *decl = json_pack("{s:s, s:i, s:s%, s:i, s:i, s:i, s:i, s:o}", "name", "perseus-demo",
                             "gpus", demo_ngpus > 32 ? demo_ngpus : 32, "profile_csv", csv, len,
                             "probe_requests", 200, "clocks", 3, "cluster_period_s", 0,
                             "pool_period_s", 0, "pools", cluster_pools(st));
    free(csv);
    char *body = json_dumps(decl, JSON_COMPACT), url[128], why[256] = "";
    json_decref(decl);
    snprintf(url, sizeof url, "http://127.0.0.1:%d/v1/clusters", st->server_port);
    prs_cli_http_req req = {url, "POST", NULL, body, NULL, 60};
    json_t *ans = NULL;
    long status = prs_cli_http(&req, &ans, why, sizeof why);
    free(body);
    const char *id = json_string_value(json_object_get(ans, "cluster_id"));
    const char *tok = json_string_value(json_object_get(ans, "token"));
    int rc = status != 201 || !id || !tok;
    if (rc)
        fprintf(stderr, DEMO_CMD ": declaring the cluster: HTTP %ld %s\n", status, why);
    else {
        snprintf(st->cluster_id, sizeof st->cluster_id, "%s", id);
        snprintf(st->cluster_token, sizeof st->cluster_token, "%s", tok);
    }
    json_decref(ans);
    char path[600];
    snprintf(path, sizeof path, "%s/cluster.token", st->ps.tmp);
    return rc || write_text(path, st->cluster_token);
}

/* perseus-gpud on the fake NVML ($PRS_FAKE_NVML), when both are there; its environment goes to
 * the controllers too. 0 (not started is fine), or 1 when it failed to start. */
int demo_start_gpud(demo_state *st)
{
    const char *lib = getenv("PRS_FAKE_NVML");
    char gpud[1100];
    snprintf(gpud, sizeof gpud, "%s/perseus-gpud", st->ps.bindir);
    if (!lib || !*lib || access(lib, R_OK) != 0 || access(gpud, X_OK) != 0) return 0;
    snprintf(st->env[0], sizeof st->env[0], "PRS_FAKE_GPU_DIR=%s", st->ps.tmp);
    snprintf(st->env[1], sizeof st->env[1], "PRS_NVML_LIBRARY=%s", lib);
    snprintf(st->env[2], sizeof st->env[2], "PRS_FAKE_GPU_COUNT=%d", demo_ngpus);
    for (int i = 0; i < 3; i++)
        st->envp[i] = st->env[i];
    st->envp[3] = NULL;
    char sock[600], conf[600], sdir[600];
    snprintf(sock, sizeof sock, "%s/gpud.sock", st->ps.tmp);
    snprintf(conf, sizeof conf, "%s/gpud.conf", st->ps.tmp);
    snprintf(sdir, sizeof sdir, "%s", st->ps.tmp);
    if (write_text(conf, "# root only\n")) return 1;
    char *argv[] = {"perseus-gpud", "--socket", sock,          "--state-dir", sdir,
                    "--config",     conf,       "--log-level", "info",        NULL};
    int idx = demo_spawn(&st->ps, "gpud", "perseus-gpud", argv, st->envp);
    if (idx < 0) return 1;
    char log[600], line[512];
    snprintf(log, sizeof log, "%s/gpud.log", st->ps.tmp);
    for (double end = demo_now() + 30; !prs_demo_stop && demo_now() < end; demo_sleep(0.02)) {
        FILE *f = fopen(log, "r");
        int up = 0;
        while (f && !up && fgets(line, sizeof line, f))
            up = strstr(line, "msg=serving") != NULL;
        if (f) fclose(f);
        if (up) {
            st->gpud = 1;
            return 0;
        }
    }
    fprintf(stderr, DEMO_CMD ": perseus-gpud did not start (%s)\n", log);
    return 1;
}

int demo_start_fakes(demo_state *st)
{
    char mhz[16];
    snprintf(mhz, sizeof mhz, "%d\n", prs_infer_gpu_find(DEMO_GPU)->f_max_mhz);
    char maxrun[16];
    snprintf(maxrun, sizeof maxrun, "%d", st->a.max_running);
    for (int i = 0; i < demo_ninst; i++) {
        char clock[600], port[600], name[32], tp[8], speed[32];
        snprintf(clock, sizeof clock, "%s/%s.mhz", st->ps.tmp, inst_names[i]);
        snprintf(name, sizeof name, "fake-%s", inst_names[i]);
        snprintf(port, sizeof port, "%s/%s.port", st->ps.tmp, name);
        snprintf(tp, sizeof tp, "%d", inst_tp[i]);
        snprintf(speed, sizeof speed, "%g", st->a.time_scale);
        if (write_text(clock, mhz)) return 1;
        char *argv[] = {"perseus-fakeserve",
                        "--listen",
                        "127.0.0.1:0",
                        "--port-file",
                        port,
                        "--model",
                        DEMO_MODEL,
                        "--gpu",
                        DEMO_GPU,
                        "--tp",
                        tp,
                        "--speedup",
                        speed,
                        "--clock-file",
                        clock,
                        st->a.max_running ? "--max-running" : NULL,
                        maxrun,
                        NULL};
        int idx = demo_spawn(&st->ps, name, "perseus-fakeserve", argv, NULL);
        snprintf(port, sizeof port, "%s.port", name);
        if (idx < 0 || (st->fake_port[i] = demo_wait_port(&st->ps, idx, port, 30)) < 0) return 1;
    }
    return 0;
}

int demo_start_router(demo_state *st)
{
    json_t *pools = json_array();
    for (int p = 0; p < DEMO_NPOOLS; p++) {
        json_t *inst = json_array();
        for (int i = 0; i < demo_ninst; i++) {
            char url[64];
            snprintf(url, sizeof url, "http://127.0.0.1:%d", st->fake_port[i]);
            if (inst_pool[i] != p) continue;
            json_t *x =
                json_pack("{s:s, s:s, s:i}", "name", inst_names[i], "url", url, "tp", inst_tp[i]);
            if (st->a.max_running) /* the fake's batch: the router sends no more at once */
                json_object_set_new(x, "max_running", json_integer(st->a.max_running));
            json_array_append_new(inst, x);
        }
        json_t *classes = json_array();
        for (int k = 0; k < PRS_INFER_NCLASS; k++)
            if (pool_of_class[k] == p)
                json_array_append_new(classes, json_string(prs_infer_class_name(k)));
        json_array_append_new(pools, json_pack("{s:s, s:o, s:o}", "name", pool_names[p], "classes",
                                               classes, "instances", inst));
    }
    char server[64], token[600], cfg[600], port[600];
    snprintf(server, sizeof server, "http://127.0.0.1:%d", st->server_port);
    snprintf(token, sizeof token, "%s/cluster.token", st->ps.tmp);
    /* a report every 30 s of the trace's time, the trace's own rates */
    json_t *c =
        json_pack("{s:s, s:{s:s, s:s}, s:{s:s, s:s, s:s, s:f, s:f}, s:o}", "model", DEMO_MODEL,
                  "cost_model", "model", DEMO_MODEL, "gpu", DEMO_GPU, "perseusd", "url", server,
                  "cluster", st->cluster_id, "token_file", token, "period_s", 30 / st->a.time_scale,
                  "rate_scale", st->a.time_scale, "pools", pools);
    snprintf(cfg, sizeof cfg, "%s/router.json", st->ps.tmp);
    snprintf(port, sizeof port, "%s/router.port", st->ps.tmp);
    int rc = json_dump_file(c, cfg, JSON_INDENT(1));
    json_decref(c);
    if (rc) return fprintf(stderr, DEMO_CMD ": cannot write %s\n", cfg), 1;
    char *argv[] = {"perseus-router", "--config",    cfg,  "--listen",
                    "127.0.0.1:0",    "--port-file", port, NULL};
    int idx = demo_spawn(&st->ps, "router", "perseus-router", argv, NULL);
    return idx < 0 || (st->router_port = demo_wait_port(&st->ps, idx, "router.port", 30)) < 0;
}

/* The controller of instance i: every second of model time, from the fake's page, to its clock file
 * (and its GPUs through perseus-gpud when it runs). */
int demo_start_ctl(demo_state *st, int i, int first_gpu)
{
    char metrics[96], clock[600], name[32], tp[8], period[32], ttft[32],
        gpus[128] = "", sock[600], prompt[16], headroom[32], scale[32];
    /* the emulator's instance level (infer emulate --cluster) plans each pool the same way */
    prs_infer_classes cls;
    prs_infer_classes_default(&cls);
    prs_instclock_slo slo;
    prs_cli_pool_slo(&st->trace, &cls, pool_of_class, inst_pool[i], st->a.headroom, &slo);
    char target[PRS_INSTCLOCK_MAX_TARGETS][32];
    for (int t = 0; t < slo.ntargets; t++)
        snprintf(target[t], sizeof target[t], "%ld:%g", slo.target_tokens[t], slo.target_ttft_s[t]);
    snprintf(prompt, sizeof prompt, "%ld", slo.prompt_tokens);
    snprintf(headroom, sizeof headroom, "%g", st->a.headroom);
    snprintf(metrics, sizeof metrics, "http://127.0.0.1:%d/metrics", st->fake_port[i]);
    snprintf(clock, sizeof clock, "%s/%s.mhz", st->ps.tmp, inst_names[i]);
    snprintf(name, sizeof name, "instclock-%s", inst_names[i]);
    snprintf(tp, sizeof tp, "%d", inst_tp[i]);
    snprintf(period, sizeof period, "%g", 1 / st->a.time_scale);
    snprintf(scale, sizeof scale, "%g", st->a.time_scale);
    snprintf(ttft, sizeof ttft, "%g", slo.ttft_s);
    snprintf(sock, sizeof sock, "%s/gpud.sock", st->ps.tmp);
    for (int g = 0; g < inst_tp[i]; g++)
        snprintf(gpus + strlen(gpus), sizeof gpus - strlen(gpus), "%snvml:%d", g ? "," : "",
                 first_gpu + g);
    char *argv[48] = {"perseus-instclock",
                      "--metrics",
                      metrics,
                      "--model",
                      DEMO_MODEL,
                      "--gpu",
                      DEMO_GPU,
                      "--tp",
                      tp,
                      "--ttft-slo",
                      ttft,
                      "--prompt-tokens",
                      prompt,
                      "--headroom",
                      headroom,
                      "--period",
                      period,
                      "--time-scale",
                      scale,
                      "--clock-file",
                      clock};
    int n = 21;
    for (int t = 0; t < slo.ntargets; t++) {
        argv[n++] = "--target";
        argv[n++] = target[t];
    }
    if (st->gpud) {
        argv[n++] = "--gpus";
        argv[n++] = gpus;
        argv[n++] = "--gpud-socket";
        argv[n++] = sock;
    }
    argv[n] = NULL;
    st->ctl[i] = demo_spawn(&st->ps, name, "perseus-instclock", argv, st->gpud ? st->envp : NULL);
    return st->ctl[i] < 0;
}

/* The fake GPUs' clocks as perseus-gpud --list shows them (column 4) into mhz[]: the count,
 * or -1. */
int demo_gpu_clocks(const demo_state *st, int *mhz, int max)
{
    char cmd[3000];
    snprintf(cmd, sizeof cmd, "%s %s %s '%s/perseus-gpud' --list 2>/dev/null", st->env[0],
             st->env[1], st->env[2], st->ps.bindir);
    FILE *f = popen(cmd, "r");
    if (!f) return -1;
    char line[512];
    int n = 0, idx, clock;
    while (fgets(line, sizeof line, f))
        if (n < max && sscanf(line, "%d %*s %*s %d", &idx, &clock) == 2) mhz[n++] = clock;
    return pclose(f) == 0 ? n : -1;
}
