/* The fakes' Prometheus pages in perseus demo --inference (demo_infer.h): a metric summed over
 * its series, a sampler thread that reads every instance's clock file (the clock its controller
 * chose, which the fake runs its next iteration at) at a fixed period, and the plots (the project's
 * line plot, docs/plots.md): clocks.svg, each instance's clock over model time under the instance
 * level; ttft-cdf.svg and tbt-cdf.svg, the distributions of time to first token and of the gaps
 * between tokens per pool and run. */
#define _GNU_SOURCE
#include <curl/curl.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "demo_infer.h"
#include "perseus/plot.h"

#define PAGE_MAX (4u << 20)
#define CDF_POINTS 200

typedef struct page {
    char *text;
    size_t len;
} page;

static size_t on_body(char *data, size_t size, size_t n, void *cls)
{
    page *p = cls;
    size_t k = size * n;
    if (p->len + k > PAGE_MAX) return 0;
    char *t = realloc(p->text, p->len + k + 1);
    if (!t) return 0;
    memcpy(t + p->len, data, k);
    p->text = t;
    p->len += k;
    t[p->len] = '\0';
    return k;
}

int demo_scrape(const char *url, const char *metric, double *value)
{
    page p = {0};
    CURL *c = curl_easy_init();
    if (!c) return -1;
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &p);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 10L);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_FAILONERROR, 1L);
    int rc = curl_easy_perform(c) == CURLE_OK && p.text ? 0 : -1;
    curl_easy_cleanup(c);
    size_t ml = strlen(metric);
    int found = 0;
    double sum = 0;
    for (char *line = p.text; !rc && line && *line;) {
        char *nl = strchr(line, '\n');
        if (nl) *nl = '\0';
        if (strncmp(line, metric, ml) == 0 && (line[ml] == '{' || line[ml] == ' ')) {
            char *sp = strrchr(line, ' ');
            sum += sp ? strtod(sp + 1, NULL) : 0;
            found = 1;
        }
        line = nl ? nl + 1 : NULL;
    }
    free(p.text);
    if (rc || !found) return -1;
    *value = sum;
    return 0;
}

static void *sample(void *arg)
{
    demo_sampler *s = arg;
    for (;;) {
        pthread_mutex_lock(&s->mu);
        int stop = s->stop;
        pthread_mutex_unlock(&s->mu);
        if (stop) break;
        double mhz[DEMO_MAX_INST], t = (demo_now() - s->t0) * s->time_scale;
        for (int i = 0; i < s->ninst; i++) {
            FILE *f = fopen(s->files[i], "r");
            if (!f || fscanf(f, "%lf", &mhz[i]) != 1) mhz[i] = NAN;
            if (f) fclose(f);
        }
        pthread_mutex_lock(&s->mu);
        if (s->n == s->cap) {
            size_t cap = s->cap ? 2 * s->cap : 256;
            double *nt = realloc(s->t, cap * sizeof *nt);
            if (nt) s->t = nt;
            double *nm = nt ? realloc(s->mhz, cap * (size_t)s->ninst * sizeof *nm) : NULL;
            if (nm) s->mhz = nm;
            if (nt && nm) s->cap = cap;
        }
        if (s->n < s->cap) {
            s->t[s->n] = t;
            memcpy(&s->mhz[s->n * (size_t)s->ninst], mhz, (size_t)s->ninst * sizeof *mhz);
            s->n++;
        }
        size_t n = s->n;
        pthread_mutex_unlock(&s->mu);
        if (s->tick && s->tick_every > 0 && n % (size_t)s->tick_every == 0) s->tick(s->ctx);
        demo_sleep(s->period_s);
    }
    return NULL;
}

int demo_sampler_start(demo_sampler *s)
{
    pthread_mutex_init(&s->mu, NULL);
    s->t0 = demo_now();
    s->stop = 0;
    s->running = pthread_create(&s->th, NULL, sample, s) == 0;
    return s->running ? 0 : -1;
}

void demo_sampler_stop(demo_sampler *s)
{
    if (!s->running) return;
    pthread_mutex_lock(&s->mu);
    s->stop = 1;
    pthread_mutex_unlock(&s->mu);
    pthread_join(s->th, NULL);
    s->running = 0;
}

void demo_sampler_free(demo_sampler *s)
{
    demo_sampler_stop(s);
    free(s->t);
    free(s->mhz);
    s->t = s->mhz = NULL;
    s->n = s->cap = 0;
}

static int write_plot(const char *dir, const char *name, const prs_savings_plot *p)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, DEMO_CMD ": cannot write %s: %s\n", path, strerror(errno));
        return 1;
    }
    prs_error err = {0};
    int rc = prs_plot_savings(f, p, &err);
    if (fclose(f) && !rc) rc = PRS_EIO;
    if (rc) fprintf(stderr, DEMO_CMD ": %s: %s\n", path, err.msg[0] ? err.msg : "write error");
    return rc ? 1 : 0;
}

/* The CDF of s (sorted) as at most CDF_POINTS points into x, y; the count. */
static size_t cdf(demo_stats *s, double *x, double *y)
{
    if (s->n == 0) return 0;
    demo_quantile(s, 0.5); /* sorts */
    size_t k = 0;
    for (size_t j = 1; j <= CDF_POINTS; j++) {
        size_t i = (size_t)ceil((double)j / CDF_POINTS * (double)s->n);
        i = i > 0 ? i - 1 : 0;
        if (k > 0 && x[k - 1] == s->v[i]) {
            y[k - 1] = (double)(i + 1) / (double)s->n;
            continue;
        }
        x[k] = s->v[i];
        y[k++] = (double)(i + 1) / (double)s->n;
    }
    return k;
}

static int plot_cdfs(const char *dir, const char *name, const char *title, const char *xl,
                     const char *yl, int tbt, demo_run *runs, const char *const *run_names,
                     int nruns, const char *const *pool_names)
{
    enum { MAXS = 2 * DEMO_NPOOLS };
    double x[MAXS][CDF_POINTS], y[MAXS][CDF_POINTS];
    char labels[MAXS][96];
    prs_plot_series ser[MAXS];
    size_t ns = 0;
    for (int r = 0; r < nruns && r < 2; r++)
        for (int p = 0; p < DEMO_NPOOLS; p++) {
            demo_stats *s = tbt ? &runs[r].pool[p].tbt : &runs[r].pool[p].ttft;
            size_t k = cdf(s, x[ns], y[ns]);
            if (k == 0) continue;
            snprintf(labels[ns], sizeof labels[ns], "%s, pool %s", run_names[r], pool_names[p]);
            ser[ns] = (prs_plot_series){labels[ns], x[ns], y[ns], k};
            ns++;
        }
    if (ns == 0) return 0;
    prs_savings_plot sp = {title, "perseus demo --inference (model seconds)", yl, ser, ns, xl};
    return write_plot(dir, name, &sp);
}

int demo_plots(const char *dir, const char *const *inst_names, const demo_sampler *clocks,
               demo_run *runs, const char *const *run_names, int nruns,
               const char *const *pool_names)
{
    if (prs_cli_make_dir("demo", dir)) return 1;
    int rc = 0;
    if (clocks->n > 0) {
        int ni = clocks->ninst;
        double *y = malloc(clocks->n * (size_t)ni * sizeof *y);
        if (!y) return 1;
        prs_plot_series ser[DEMO_MAX_INST];
        for (int i = 0; i < ni; i++) {
            for (size_t j = 0; j < clocks->n; j++)
                y[i * clocks->n + j] = clocks->mhz[j * (size_t)ni + i];
            ser[i] = (prs_plot_series){inst_names[i], clocks->t, &y[i * clocks->n], clocks->n};
        }
        prs_savings_plot sp = {"SM clock of each instance under the instance level",
                               "perseus demo --inference: perseus-instclock on each fake instance",
                               "SM clock (MHz)",
                               ser,
                               ni,
                               "Time (model s)"};
        rc |= write_plot(dir, "clocks.svg", &sp);
        free(y);
    }
    rc |= plot_cdfs(dir, "ttft-cdf.svg", "Time to first token", "TTFT (s)", "Share of the requests",
                    0, runs, run_names, nruns, pool_names);
    rc |= plot_cdfs(dir, "tbt-cdf.svg", "Time between tokens", "Gap between tokens (s)",
                    "Share of the gaps", 1, runs, run_names, nruns, pool_names);
    return rc;
}
