/* load_server: the schedule polls: P pollers, back to back or paced, and their latencies. */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "load_server.h"

/* ---- polls ---- */

static void record_latency(gen *g, double secs)
{
    if (g->nlat == g->cap_lat) {
        long cap = g->cap_lat ? 2 * g->cap_lat : 1L << 16;
        double *p = realloc(g->lat, sizeof *p * (size_t)cap);
        if (!p) oom();
        g->lat = p;
        g->cap_lat = cap;
    }
    g->lat[g->nlat++] = secs;
}

static void due_push(gen *g, double t, int id)
{
    int i = g->ndue++;
    while (i > 0 && g->due_at[(i - 1) / 2] > t) {
        g->due_at[i] = g->due_at[(i - 1) / 2];
        g->due_id[i] = g->due_id[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    g->due_at[i] = t;
    g->due_id[i] = id;
}

static int due_pop(gen *g)
{
    int top = g->due_id[0];
    double t = g->due_at[--g->ndue];
    int id = g->due_id[g->ndue], i = 0;
    for (;;) {
        int c = 2 * i + 1;
        if (c >= g->ndue) break;
        if (c + 1 < g->ndue && g->due_at[c + 1] < g->due_at[c]) c++;
        if (g->due_at[c] >= t) break;
        g->due_at[i] = g->due_at[c];
        g->due_id[i] = g->due_id[c];
        i = c;
    }
    g->due_at[i] = t;
    g->due_id[i] = id;
    return top;
}

void done_poll(gen *g, xfer *x)
{
    int failed = request_failed(g, x);
    /* Back to back: due again now; paced: one interval after this request was handed over. */
    if (g->due_at) due_push(g, x->t0 + g->interval_s, x->id);
    if (!x->counted) return;
    record_latency(g, x->t1 - x->t0);
    /* Cheap check only (this is the measured loop): the answer is a running schedule. */
    if (!failed && !(x->resp.p && strstr(x->resp.p, "\"phase\":\"running\""))) {
        if (!g->poll_unexpected++)
            show_error(g, "unexpected schedule: %.200s", x->resp.p ? x->resp.p : "");
    }
}

static int run_polls(gen *g, poll_figures *pf)
{
    phase_begin(g, "poll", &g->e_poll);
    int P = g->pollers;
    int *next_rank = xcalloc((size_t)P, sizeof *next_rank);
    g->due_at = xcalloc((size_t)P, sizeof *g->due_at);
    g->due_id = xcalloc((size_t)P, sizeof *g->due_id);
    g->ndue = 0;
    double t0 = now_s(), tw = t0 + g->poll_warm_s, tend = tw + g->poll_s;
    for (int i = 0; i < P; i++) {
        next_rank[i] = i;
        /* Paced pollers start spread over one interval, as ranks ending iterations would. */
        due_push(g, t0 + g->interval_s * (double)i / (double)P, i);
    }
    struct rusage u0, u1;
    double s0 = NAN, s1 = NAN, tm0 = 0, tm1 = 0;
    int measuring = 0, rc = 0;
    memset(&u0, 0, sizeof u0);
    memset(&u1, 0, sizeof u1);
    for (;;) {
        double t = now_s();
        if (!measuring && t >= tw) {
            measuring = 1;
            getrusage(RUSAGE_SELF, &u0);
            s0 = server_cpu_s(g->pid);
            tm0 = now_s();
        }
        if (measuring == 1 && t >= tend) {
            measuring = 2;
            getrusage(RUSAGE_SELF, &u1);
            s1 = server_cpu_s(g->pid);
            tm1 = now_s();
        }
        while (t < tend && g->ndue && g->due_at[0] <= t) {
            int i = due_pop(g);
            xfer *x = &g->pool[i];
            int r = next_rank[i];
            next_rank[i] = r + P < g->ranks ? r + P : i; /* poller i owns the ranks i mod P */
            snprintf(x->path, sizeof x->path, "/v1/jobs/%s/schedule?rank=%d", g->job, r);
            if (xfer_start(g, x, K_POLL, i, M_GET)) {
                rc = -1;
                break;
            }
            x->counted = x->t0 >= tw;
        }
        if (rc) break;
        if (t >= tend && g->inflight == 0) break;
        if (over_time(g, tend + DEADLINE_DRAIN_S,
                      "poll requests still unanswered 30 s after the end")) {
            rc = -1;
            break;
        }
        double wait = 0.05;
        if (!measuring && tw - t < wait) wait = tw - t;
        if (measuring == 1 && tend - t < wait) wait = tend - t;
        if (t < tend && g->ndue && g->due_at[0] - t < wait) wait = g->due_at[0] - t;
        step(g, wait); /* finished pollers go back on the heap */
    }
    if (rc) drain(g, 5);
    free(next_rank);
    free(g->due_at);
    free(g->due_id);
    g->due_at = NULL;
    g->due_id = NULL;
    if (rc) return -1;
    pf->measured_s = tm1 - tm0;
    pf->requests = g->nlat;
    pf->rate = pf->measured_s > 0 ? (double)g->nlat / pf->measured_s : 0;
    pf->gen_user = (double)(u1.ru_utime.tv_sec - u0.ru_utime.tv_sec) +
                   1e-6 * (double)(u1.ru_utime.tv_usec - u0.ru_utime.tv_usec);
    pf->gen_sys = (double)(u1.ru_stime.tv_sec - u0.ru_stime.tv_sec) +
                  1e-6 * (double)(u1.ru_stime.tv_usec - u0.ru_stime.tv_usec);
    pf->gen_cpu = cpu_s(&u1) - cpu_s(&u0);
    pf->srv_cpu = s1 - s0;
    return 0;
}

/* The poll phase, with the server's schedule-latency histogram read before and after it;
 * g->lat is sorted when it returns 0. */
int poll_phase(gen *g, poll_figures *pf)
{
    double le2[MAX_BUCKETS];
    memset(pf, 0, sizeof *pf);
    pf->nh0 = server_hist(g, pf->le, pf->h0);
    if (run_polls(g, pf)) return -1;
    pf->nh1 = server_hist(g, le2, pf->h1);
    qsort(g->lat, (size_t)g->nlat, sizeof *g->lat, cmp_double);
    return 0;
}
