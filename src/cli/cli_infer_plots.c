/* perseus infer emulate --plots DIR (cli_infer.h): the replay's pictures, drawn with the
 * project's line plot (include/perseus/plot.h, docs/plots.md):
 *   power.svg         the cluster's power over time, one line per policy (means over at most
 *                     PLOT_POINTS spans: a week of 1-s bins would make a file of megabytes);
 *   ttft-cdf.svg      the distribution of time to first token, one line per policy, from the
 *                     latency histograms (one point per non-empty bin, within 1.2 %), up to the
 *                     largest P99.9 among the policies;
 *   tbt-cdf.svg       the same for every inter-token gap;
 *   pools-POLICY.svg  the GPUs each pool holds over time (at every instance period);
 *   tp-POLICY.svg     the instances of each TP degree over time;
 *   clocks-POLICY.svg each pool's mean SM clock over time (weighted by GPUs; 0: no GPUs).
 * The same replay gives the same bytes: nothing depends on the clock or on the machine. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cli_infer.h"
#include "perseus/plot.h"

#define PLOT_POINTS 1000

typedef struct plot_out {
    const char *cmd, *dir;
} plot_out;

/* Draw p into DIR/name: 0, or 1 with a message. */
static int write_plot(const plot_out *o, const char *name, const prs_savings_plot *p)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", o->dir, name);
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "perseus %s: cannot write %s: %s\n", o->cmd, path, strerror(errno));
        return 1;
    }
    prs_error err = {0};
    int rc = prs_plot_savings(f, p, &err);
    if (fclose(f) && !rc) rc = PRS_EIO;
    if (rc) {
        fprintf(stderr, "perseus %s: %s: %s\n", o->cmd, path, err.msg[0] ? err.msg : "write error");
        return 1;
    }
    return 0;
}

/* Time axis: hours for a replay of 3 h or more, minutes below. */
static double time_unit(const prs_infer_result *res, int n, const char **label)
{
    double end = 0;
    for (int i = 0; i < n; i++)
        end = fmax(end, res[i].duration_s);
    *label = end >= 3 * 3600 ? "Time (h)" : "Time (min)";
    return end >= 3 * 3600 ? 3600 : 60;
}

/* A result's power in kW, as means over at most PLOT_POINTS spans of whole bins. */
static size_t power_points(const prs_infer_result *r, double unit_s, double *x, double *y)
{
    const prs_infer_meter *m = &r->meter;
    size_t bins = (size_t)ceil(r->duration_s / m->bin_s);
    if (bins > m->n) bins = m->n;
    size_t per = (bins + PLOT_POINTS - 1) / PLOT_POINTS, k = 0;
    for (size_t b = 0; per > 0 && b < bins; b += per, k++) {
        size_t e = b + per < bins ? b + per : bins;
        double j = 0;
        for (size_t q = b; q < e; q++)
            j += m->energy_j[q];
        x[k] = ((double)b + (double)(e - b) / 2) * m->bin_s / unit_s;
        y[k] = j / ((double)(e - b) * m->bin_s) / 1e3;
    }
    return k;
}

static int plot_power(const plot_out *o, const prs_infer_result *res, int n)
{
    const char *xl;
    double unit = time_unit(res, n, &xl);
    double *buf = malloc(sizeof *buf * 2 * PLOT_POINTS * (size_t)n);
    prs_plot_series ser[PRS_INFER_NPOLICY];
    if (!buf) {
        fprintf(stderr, "perseus %s: out of memory\n", o->cmd);
        return 1;
    }
    for (int i = 0; i < n; i++) {
        double *x = buf + (size_t)i * 2 * PLOT_POINTS, *y = x + PLOT_POINTS;
        ser[i] = (prs_plot_series){prs_infer_policy_name(res[i].policy), x, y,
                                   power_points(&res[i], unit, x, y)};
    }
    prs_savings_plot p = {.title = "Cluster power over time",
                          .y_label = "Cluster power (kW)",
                          .x_label = xl,
                          .series = ser,
                          .nseries = (size_t)n};
    int rc = write_plot(o, "power.svg", &p);
    free(buf);
    return rc;
}

/* Distribution of TTFT (tbt = 0) or of inter-token gaps, every policy, up to the largest P99.9. */
static int plot_cdf(const plot_out *o, const prs_infer_result *res, int n, int tbt)
{
    double *buf = malloc(sizeof *buf * 2 * PRS_INFER_HIST_BINS * (size_t)n);
    prs_plot_series ser[PRS_INFER_NPOLICY];
    if (!buf) {
        fprintf(stderr, "perseus %s: out of memory\n", o->cmd);
        return 1;
    }
    double xmax = 0;
    for (int i = 0; i < n; i++) {
        const prs_infer_hist *h =
            tbt ? &res[i].lat.tbt[PRS_INFER_ALL] : &res[i].lat.ttft[PRS_INFER_ALL];
        xmax = fmax(xmax, prs__infer_hist_quantile(h, 0.999));
    }
    for (int i = 0; i < n; i++) {
        const prs_infer_hist *h =
            tbt ? &res[i].lat.tbt[PRS_INFER_ALL] : &res[i].lat.ttft[PRS_INFER_ALL];
        double *x = buf + (size_t)i * 2 * PRS_INFER_HIST_BINS, *y = x + PRS_INFER_HIST_BINS;
        size_t k = prs__infer_hist_cdf(h, x, y);
        while (k > 1 && x[k - 1] > xmax)
            k--;
        for (size_t q = 0; q < k; q++)
            y[q] *= 100;
        ser[i] = (prs_plot_series){prs_infer_policy_name(res[i].policy), x, y, k};
    }
    prs_savings_plot p = {
        .title = tbt ? "Inter-token gaps: distribution" : "Time to first token: distribution",
        .subtitle = "every request of the trace; up to the largest P99.9 of the policies",
        .y_label = "Share at or below (%)",
        .x_label = tbt ? "Inter-token gap (s)" : "Time to first token (s)",
        .series = ser,
        .nseries = (size_t)n};
    int rc = write_plot(o, tbt ? "tbt-cdf.svg" : "ttft-cdf.svg", &p);
    free(buf);
    return rc;
}

enum { CONF_POOLS, CONF_TP, CONF_CLOCKS };

static const char *const CONF_FILE[] = {"pools", "tp", "clocks"};
static const char *const CONF_WHAT[] = {"GPUs per pool", "instances per TP degree",
                                        "mean SM clock per pool"};
static const char *const CONF_Y[] = {"GPUs held", "Instances", "SM clock (MHz, 0: no GPUs)"};

/* Series k of a configuration plot at tick t. */
static double conf_value(const prs_infer_config_log *g, int what, size_t t, int k)
{
    if (what == CONF_TP) return g->tp_insts[t * PRS_INFER_MAX_TPS + (size_t)k];
    if (what == CONF_CLOCKS) return g->pool_mhz[t * PRS_INFER_NCLASS + (size_t)k];
    return g->pool_gpus[t * PRS_INFER_NCLASS + (size_t)k];
}

/* One policy's configuration over time: GPUs per pool, instances per TP degree or clocks. */
static int plot_config(const plot_out *o, const prs_infer_result *r, double unit_s, const char *xl,
                       int what)
{
    const prs_infer_config_log *g = &r->conf;
    int tp = what == CONF_TP;
    int ns = tp ? g->n_tps : g->npools;
    size_t n = g->n ? g->n : 1;
    double *buf = malloc(sizeof *buf * n * (size_t)(ns + 1));
    if (!buf) {
        fprintf(stderr, "perseus %s: out of memory\n", o->cmd);
        return 1;
    }
    double *x = buf + n * (size_t)ns;
    prs_plot_series ser[PRS_INFER_NCLASS];
    char labels[PRS_INFER_NCLASS][24];
    for (size_t t = 0; t < g->n; t++)
        x[t] = g->t_s[t] / unit_s;
    for (int k = 0; k < ns; k++) {
        double *y = buf + n * (size_t)k;
        for (size_t t = 0; t < g->n; t++)
            y[t] = conf_value(g, what, t, k);
        if (tp)
            snprintf(labels[k], sizeof labels[k], "TP %d", g->tps[k]);
        else
            snprintf(labels[k], sizeof labels[k], "%s",
                     g->npools == 1 ? "one pool" : prs_infer_class_name(k));
        ser[k] = (prs_plot_series){labels[k], x, y, g->n};
    }
    char title[96], name[96];
    const char *pol = prs_infer_policy_name(r->policy);
    snprintf(title, sizeof title, "%s: %s over time", pol, CONF_WHAT[what]);
    snprintf(name, sizeof name, "%s-%s.svg", CONF_FILE[what], pol);
    prs_savings_plot p = {.title = title,
                          .subtitle = tp ? NULL : "pools by input and output class (S, M, L)",
                          .y_label = CONF_Y[what],
                          .x_label = xl,
                          .series = ser,
                          .nseries = (size_t)ns};
    int rc = write_plot(o, name, &p);
    free(buf);
    return rc;
}

int prs_cli_infer_plots(const char *cmd, const char *dir, const prs_infer_result *res, int n)
{
    if (prs_cli_make_dir(cmd, dir)) return 1;
    plot_out o = {cmd, dir};
    int rc = plot_power(&o, res, n);
    if (!rc) rc = plot_cdf(&o, res, n, 0);
    if (!rc) rc = plot_cdf(&o, res, n, 1);
    const char *xl;
    double unit = time_unit(res, n, &xl);
    for (int i = 0; !rc && i < n; i++) {
        if (res[i].conf.n == 0) continue;
        for (int what = CONF_POOLS; !rc && what <= CONF_CLOCKS; what++)
            rc = plot_config(&o, &res[i], unit, xl, what);
    }
    return rc;
}
