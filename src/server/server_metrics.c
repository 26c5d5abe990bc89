/* perseusd's metrics: request counts and latencies by route and status, planner runs, jobs by
 * phase and the per-job series (job_metrics.c), rendered as Prometheus text for GET /metrics. */
#include "perseus/clock.h"
#include "perseus/numfmt.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster.h"
#include "http.h"
#include "job_metrics.h"
#include "metrics.h"

static const int CODES[] = {200, 201, 400, 401, 404, 405, 409, 413, 429, 500, 501, 503};
_Static_assert(SRV_N_CODES == (int)(sizeof CODES / sizeof CODES[0]) + 1, "+ \"other\"");
static const double BUCKETS[] = {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01,
                                 0.025,  0.05,    0.1,    0.25,  0.5,    1.0,   2.5};
_Static_assert(SRV_N_BUCKETS == (int)(sizeof BUCKETS / sizeof BUCKETS[0]), "buckets");

void srv_metrics_count(prs_server *s, enum route r, int status, double secs)
{
    int ci = SRV_N_CODES - 1;
    for (int i = 0; i < SRV_N_CODES - 1; i++)
        if (CODES[i] == status) ci = i;
    int b = SRV_N_BUCKETS;
    for (int i = 0; i < SRV_N_BUCKETS; i++)
        if (secs <= BUCKETS[i]) {
            b = i;
            break;
        }
    pthread_mutex_lock(&s->m.mu);
    s->m.count[r][ci]++;
    s->m.hist[r][b]++;
    s->m.sum_s[r] += secs;
    pthread_mutex_unlock(&s->m.mu);
}

/* The request counts by route and status, and the latency histograms by route. */
static void write_requests(FILE *f, const srv_metrics *m)
{
    fprintf(f, "# HELP perseusd_http_requests_total HTTP requests by route and status.\n"
               "# TYPE perseusd_http_requests_total counter\n");
    for (int r = 0; r < N_ROUTES; r++)
        for (int k = 0; k < SRV_N_CODES; k++)
            if (m->count[r][k]) {
                if (k < SRV_N_CODES - 1)
                    fprintf(f, "perseusd_http_requests_total{route=\"%s\",code=\"%d\"} %llu\n",
                            route_name(r), CODES[k], m->count[r][k]);
                else
                    fprintf(f, "perseusd_http_requests_total{route=\"%s\",code=\"other\"} %llu\n",
                            route_name(r), m->count[r][k]);
            }
    fprintf(f, "# HELP perseusd_http_request_duration_seconds Request latency by route.\n"
               "# TYPE perseusd_http_request_duration_seconds histogram\n");
    char num[PRS_NUMFMT_MAX];
    for (int r = 0; r < N_ROUTES; r++) {
        unsigned long long cum = 0;
        for (int b = 0; b <= SRV_N_BUCKETS; b++)
            cum += m->hist[r][b];
        if (!cum) continue;
        unsigned long long total = cum;
        cum = 0;
        for (int b = 0; b < SRV_N_BUCKETS; b++) {
            cum += m->hist[r][b];
            fprintf(f,
                    "perseusd_http_request_duration_seconds_bucket{route=\"%s\",le=\"%s\"} %llu\n",
                    route_name(r), prs_num_fmt_double(num, sizeof num, BUCKETS[b]), cum);
        }
        fprintf(f, "perseusd_http_request_duration_seconds_bucket{route=\"%s\",le=\"+Inf\"} %llu\n",
                route_name(r), total);
        fprintf(f, "perseusd_http_request_duration_seconds_sum{route=\"%s\"} %.9f\n", route_name(r),
                m->sum_s[r]);
        fprintf(f, "perseusd_http_request_duration_seconds_count{route=\"%s\"} %llu\n",
                route_name(r), total);
    }
}

/* GET /metrics (its token checked by the router): Prometheus text. The per-job series name job
 * ids and models, so they are given only with a metrics token or on loopback. */
enum MHD_Result handle_metrics(prs_server *s, struct MHD_Connection *c, conn_ctx *cc,
                               const route_match *route)
{
    (void)route;
    long phases[JOB_NPHASES] = {0};
    size_t nrows = 0, njobs = 0;
    job **pinned = table_pin_all(s, &njobs);
    job_metric_row *rows = calloc(njobs > 0 ? njobs : 1, sizeof *rows);
    for (size_t i = 0; rows && i < njobs; i++) {
        job *j = pinned[i];
        pthread_rwlock_rdlock(j->lock);
        if (!j->deleted && j->phase >= 0 && j->phase < JOB_NPHASES) phases[j->phase]++;
        if (!j->deleted) job_metric_row_of(j, &rows[nrows++]);
        pthread_rwlock_unlock(j->lock);
    }
    table_unpin_all(pinned, njobs);
    char *text = NULL;
    size_t len = 0;
    FILE *f = rows ? open_memstream(&text, &len) : NULL;
    if (!f) {
        free(rows);
        return reply_error(s, c, cc, 500, "internal", "out of memory");
    }
    fprintf(f, "# HELP perseusd_jobs Jobs by phase.\n# TYPE perseusd_jobs gauge\n");
    for (int p = 0; p < JOB_NPHASES; p++)
        fprintf(f, "perseusd_jobs{phase=\"%s\"} %ld\n", job_phase_name((job_phase)p), phases[p]);
    fprintf(f,
            "# HELP perseusd_jobs_loaded Jobs known to the server.\n"
            "# TYPE perseusd_jobs_loaded gauge\nperseusd_jobs_loaded %zu\n",
            nrows);
    /* The per-job series name job ids and models: not for anyone who can reach the port. */
    if (s->has_metrics_token || s->loopback) job_metrics_write(f, rows, nrows);
    if ((s->has_metrics_token || s->loopback) && s->clusters) cluster_metrics_write(f, s->clusters);
    free(rows);
    prs__metrics_build_info(f);
    prs__metrics_process(f);
    srv_metrics m;
    pthread_mutex_lock(&s->m.mu);
    memcpy(&m, &s->m, sizeof m);
    pthread_mutex_unlock(&s->m.mu);
    write_requests(f, &m);
    fprintf(
        f,
        "# HELP perseusd_planning_seconds Wall time of completed planner runs.\n"
        "# TYPE perseusd_planning_seconds summary\n"
        "perseusd_planning_seconds_sum %.6f\nperseusd_planning_seconds_count %llu\n"
        "# HELP perseusd_planning_last_seconds Wall time of the last planner run.\n"
        "# TYPE perseusd_planning_last_seconds gauge\nperseusd_planning_last_seconds %.6f\n"
        "# HELP perseusd_planning_failures_total Planner runs that failed.\n"
        "# TYPE perseusd_planning_failures_total counter\nperseusd_planning_failures_total %llu\n"
        "# HELP perseusd_uptime_seconds Seconds since the server started.\n"
        "# TYPE perseusd_uptime_seconds gauge\nperseusd_uptime_seconds %.3f\n",
        m.planning_sum_s, m.planning_count, m.planning_last_s, m.planning_failed,
        prs_mono_s() - s->started);
    if (fclose(f) != 0) {
        free(text);
        return reply_error(s, c, cc, 500, "internal", "out of memory");
    }
    return reply_text(c, cc, 200, "text/plain; version=0.0.4", text, len);
}
