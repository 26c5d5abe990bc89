/* The power-cap options of plan and emulate (docs/power.md, 'Power caps'): --power-cap W,
 * --cap-on avg|peak, --window SEC, --cap-sweep N and --cap-plot FILE; the choice at one cap and
 * a sweep of caps, as a table or as JSON, and the SVG of throughput against the cap. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "perseus/plot.h"
#include "perseus/power.h"

void prs_cli_powercap_init(prs_cli_powercap *c)
{
    memset(c, 0, sizeof *c);
    c->on = PRS_CAP_AVG;
    c->window_s = PRS_POWER_WINDOW_S;
}

int prs_cli_powercap_option(const char *cmd, const char *name, const char *arg, prs_cli_powercap *c)
{
    c->given++;
    if (strcmp(name, "power-cap") == 0)
        return prs_cli_number(cmd, "--power-cap", arg, 0, 1, &c->cap_w);
    if (strcmp(name, "window") == 0)
        return prs_cli_number(cmd, "--window", arg, 0, 1, &c->window_s);
    if (strcmp(name, "cap-plot") == 0) {
        c->plot_path = arg;
        return 0;
    }
    if (strcmp(name, "cap-on") == 0) {
        if (prs_cap_on_parse(arg, &c->on) == 0) return 0;
        fprintf(stderr, "perseus %s: --cap-on: expected avg or peak, got '%s'\n", cmd, arg);
        return -1;
    }
    if (strcmp(name, "cap-sweep") == 0) {
        if (prs_cli_positive_int(cmd, "--cap-sweep", arg, &c->sweep)) return -1;
        if (c->sweep >= 2 && c->sweep <= 10000) return 0;
        fprintf(stderr, "perseus %s: --cap-sweep: expected 2..10000 caps, got '%s'\n", cmd, arg);
        return -1;
    }
    c->given--;
    return 1;
}

const char *prs_cli_powercap_check(const prs_cli_powercap *c)
{
    if (c->given && !c->cap_w && !c->sweep)
        return "--cap-on, --window and --cap-plot need --power-cap W or --cap-sweep N";
    if (c->plot_path && !c->sweep) return "--cap-plot needs --cap-sweep N";
    return NULL;
}

/* ---- JSON ---- */

static json_t *choice_json(const prs_cap_choice *c, prs_cap_strategy s)
{
    json_t *o = json_object();
    json_object_set_new(o, "feasible", json_boolean(c->feasible));
    prs_cli_json_set_real(o, "iteration_time_s", c->time_s);
    prs_cli_json_set_real(o, "throughput_per_s", c->throughput_per_s);
    prs_cli_json_set_real(o, "energy_j", c->energy_j);
    prs_cli_json_set_real(o, "avg_power_w", c->avg_power_w);
    prs_cli_json_set_real(o, "peak_power_w", c->peak_power_w);
    if (s == PRS_CAP_PERSEUS) json_object_set_new(o, "index", json_integer(c->index));
    if (s == PRS_CAP_PERSEUS && c->index < 0 && c->freq_mhz)
        json_object_set_new(o, "clock_ceiling_mhz", json_integer(c->freq_mhz));
    if (s == PRS_CAP_PERSEUS && c->index < 0 && !c->freq_mhz)
        prs_cli_json_set_real(o, "reclaimed_gpu_limit_w", c->gpu_limit_w);
    if (s == PRS_CAP_UNIFORM) json_object_set_new(o, "freq_mhz", json_integer(c->freq_mhz));
    if (s == PRS_CAP_POWER_LIMIT) prs_cli_json_set_real(o, "gpu_limit_w", c->gpu_limit_w);
    return o;
}

static json_t *result_json(const prs_cap_result *r)
{
    json_t *o = json_object();
    prs_cli_json_set_real(o, "cap_w", r->cap_w);
    json_object_set_new(o, "cap_on", json_string(prs_cap_on_name(r->on)));
    prs_cli_json_set_real(o, "window_s", r->window_s);
    for (int s = 0; s < PRS_CAP_NSTRATEGIES; s++)
        json_object_set_new(o, prs_cap_strategy_name((prs_cap_strategy)s),
                            choice_json(&r->s[s], (prs_cap_strategy)s));
    const prs_cap_choice *p = &r->s[PRS_CAP_PERSEUS];
    json_object_set_new(o, "speedup_vs_uniform",
                        prs_cli_json_real(prs_cap_ratio(p, &r->s[PRS_CAP_UNIFORM])));
    json_object_set_new(o, "speedup_vs_power_limit",
                        prs_cli_json_real(prs_cap_ratio(p, &r->s[PRS_CAP_POWER_LIMIT])));
    return o;
}

/* ---- Tables ---- */

static void print_one(const prs_cap_result *r)
{
    printf("\npower cap  %g W per pipeline, on the %s power", r->cap_w,
           r->on == PRS_CAP_AVG ? "average" : "peak");
    printf(" (peak: over %g s, iterations back to back)\n", r->window_s);
    printf("  %-12s  %8s  %10s  %10s  %12s  %10s  %10s  %s\n", "strategy", "holds", "iter (s)",
           "iter/s", "energy (J)", "avg (W)", "peak (W)", "plan");
    for (int s = 0; s < PRS_CAP_NSTRATEGIES; s++) {
        const prs_cap_choice *c = &r->s[s];
        printf("  %-12s  %8s  %10.6g  %10.6g  %12.6g  %10.6g  %10.6g  ",
               prs_cap_strategy_name((prs_cap_strategy)s), c->feasible ? "yes" : "no", c->time_s,
               c->throughput_per_s, c->energy_j, c->avg_power_w, c->peak_power_w);
        if (s == PRS_CAP_PERSEUS && c->index >= 0) printf("frontier point %ld\n", c->index);
        if (s == PRS_CAP_PERSEUS && c->index < 0 && c->freq_mhz)
            printf("%d MHz, slack reclaimed below it\n", c->freq_mhz);
        if (s == PRS_CAP_PERSEUS && c->index < 0 && !c->freq_mhz)
            printf("%.6g W per GPU's clocks, slack reclaimed\n", c->gpu_limit_w);
        if (s == PRS_CAP_UNIFORM) printf("%d MHz everywhere\n", c->freq_mhz);
        if (s == PRS_CAP_POWER_LIMIT) printf("%.6g W per GPU\n", c->gpu_limit_w);
    }
    printf("  Perseus throughput: x%.4f the uniform clock's, x%.4f the power limit's\n",
           prs_cap_ratio(&r->s[0], &r->s[1]), prs_cap_ratio(&r->s[0], &r->s[2]));
}

static void print_sweep_row(const prs_cap_result *r)
{
    printf("  %10.6g", r->cap_w);
    for (int s = 0; s < PRS_CAP_NSTRATEGIES; s++) {
        if (r->s[s].feasible)
            printf("  %12.6g", r->s[s].throughput_per_s);
        else
            printf("  %12s", "-");
    }
    printf("  %10.4f  %10.4f\n", prs_cap_ratio(&r->s[0], &r->s[1]),
           prs_cap_ratio(&r->s[0], &r->s[2]));
}

/* ---- The plot ---- */

static int write_plot(const char *cmd, const char *path, prs_cap_on on, const prs_cap_result *rs,
                      size_t n)
{
    double *xy = malloc(sizeof *xy * 2 * n * PRS_CAP_NSTRATEGIES);
    if (!xy) return fprintf(stderr, "perseus %s: out of memory\n", cmd), 1;
    static const char *const labels[] = {"Perseus (frontier)", "Uniform clock",
                                         "Per-GPU power limit"};
    prs_plot_series ser[PRS_CAP_NSTRATEGIES];
    for (int s = 0; s < PRS_CAP_NSTRATEGIES; s++) {
        double *x = xy + (size_t)s * 2 * n, *y = x + n;
        size_t k = 0;
        for (size_t i = 0; i < n; i++)
            if (rs[i].s[s].feasible) {
                x[k] = rs[i].cap_w;
                y[k++] = rs[i].s[s].throughput_per_s;
            }
        ser[s] = (prs_plot_series){labels[s], x, y, k};
    }
    char sub[96];
    snprintf(sub, sizeof sub, "cap on the %s power%s", on == PRS_CAP_AVG ? "average" : "peak",
             on == PRS_CAP_AVG ? "" : " over the window");
    prs_savings_plot p = {
        "Throughput under a power cap", sub, "Throughput (iterations/s)", ser, PRS_CAP_NSTRATEGIES,
        "Power cap per pipeline (W)"};
    prs_error err = {0, ""};
    FILE *f = fopen(path, "w");
    int rc = f ? prs_plot_savings(f, &p, &err) : prs_error_set(&err, PRS_EIO, "cannot write");
    if (f && fclose(f) != 0 && !rc) rc = prs_error_set(&err, PRS_EIO, "cannot write");
    free(xy);
    if (rc) fprintf(stderr, "perseus %s: --cap-plot %s: %s\n", cmd, path, err.msg);
    return rc ? 1 : 0;
}

/* ---- Running ---- */

static int sweep(const char *cmd, const prs_cli_powercap *c, prs_powercap *pc, json_t *json)
{
    double hi, lo;
    prs_powercap_range(pc, c->on, &hi, &lo);
    prs_cap_result *rs = malloc(sizeof *rs * (size_t)c->sweep);
    if (!rs) return fprintf(stderr, "perseus %s: out of memory\n", cmd), 1;
    json_t *arr = json ? json_array() : NULL;
    if (!json)
        printf("\npower-cap sweep  %d caps from all-max (%.6g W) to the lowest plan (%.6g W), "
               "on the %s power\n  %10s  %12s  %12s  %12s  %10s  %10s\n",
               c->sweep, hi, lo, prs_cap_on_name(c->on), "cap (W)", "perseus it/s", "uniform it/s",
               "limit it/s", "vs unif.", "vs limit");
    prs_error err = {0, ""};
    int rc = 0;
    for (int i = 0; i < c->sweep && !rc; i++) {
        double cap = hi - (hi - lo) * i / (c->sweep - 1);
        if ((rc = prs_powercap_choose(pc, cap, c->on, &rs[i], &err))) break;
        if (arr)
            json_array_append_new(arr, result_json(&rs[i]));
        else
            print_sweep_row(&rs[i]);
    }
    if (rc) fprintf(stderr, "perseus %s: %s\n", cmd, err.msg);
    if (arr) json_object_set_new(json, "power_cap_sweep", arr);
    if (!rc && c->plot_path) rc = write_plot(cmd, c->plot_path, c->on, rs, (size_t)c->sweep);
    free(rs);
    return rc ? 1 : 0;
}

int prs_cli_powercap_run(const char *cmd, const prs_cli_powercap *c, const prs_profile *profile,
                         const prs_frontier *f, int tp, json_t *json)
{
    if (!c->cap_w && !c->sweep) return 0;
    prs_error err = {0, ""};
    prs_powercap *pc = NULL;
    int rc = prs_powercap_open(profile, f, tp, c->window_s, &pc, &err);
    if (!rc && c->cap_w) {
        prs_cap_result r;
        rc = prs_powercap_choose(pc, c->cap_w, c->on, &r, &err);
        if (!rc && json)
            json_object_set_new(json, "power_cap", result_json(&r));
        else if (!rc)
            print_one(&r);
    }
    if (rc) {
        fprintf(stderr, "perseus %s: %s\n", cmd, err.msg);
        prs_powercap_free(pc);
        return rc == PRS_EINVAL ? 2 : 1;
    }
    rc = c->sweep ? sweep(cmd, c, pc, json) : 0;
    prs_powercap_free(pc);
    return rc;
}
