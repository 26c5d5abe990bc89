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
        if (!p) ls_oom();
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

void ls_done_poll(gen *g, xfer *x)
{
    int failed = ls_request_failed(g, x);
    /* Back to back: due again now; paced: one interval after this request was handed over. */
    if (g->due_at) due_push(g, x->t0 + g->interval_s, x->id);
    if (!x->counted) return;
    record_latency(g, x->t1 - x->t0);
    /* Cheap check only (this is the measured loop): the answer is a running schedule. */
    if (!failed && !(x->resp.p && strstr(x->resp.p, "\"phase\":\"running\""))) {
        if (!g->poll_unexpected++)
            ls_show_error(g, "unexpected schedule: %.200s", x->resp.p ? x->resp.p : "");
    }
}

/* The CPU time of this generator and of the server at the start and the end of the measured
 * window. */
typedef struct poll_marks {
    struct rusage u0, u1;
    double s0, s1, tm0, tm1;
} poll_marks;

static void poll_mark(gen *g, struct rusage *u, double *s, double *tm)
{
    getrusage(RUSAGE_SELF, u);
    *s = ls_server_cpu_s(g->pid);
    *tm = ls_now_s();
}

/* Hand every poller due by t to curl (before tend), on the next of its ranks; a request handed
 * over from tw on counts. -1 when curl refuses one. */
static int start_due_polls(gen *g, int *next_rank, double t, double tw, double tend)
{
    int P = g->pollers;
    while (t < tend && g->ndue && g->due_at[0] <= t) {
        int i = due_pop(g);
        xfer *x = &g->pool[i];
        int r = next_rank[i];
        next_rank[i] = r + P < g->ranks ? r + P : i; /* poller i owns the ranks i mod P */
        snprintf(x->path, sizeof x->path, "/v1/jobs/%s/schedule?rank=%d", g->job, r);
        if (ls_xfer_start(g, x, K_POLL, i, M_GET)) return -1;
        x->counted = x->t0 >= tw;
    }
    return 0;
}

/* The polls from tw (the warm-up's end) to tend, the window marked in m; then until every
 * request in flight is answered. 0, or -1 (in-flight requests drained). */
static int poll_loop(gen *g, int *next_rank, double tw, double tend, poll_marks *m)
{
    int measuring = 0;
    for (;;) {
        double t = ls_now_s();
        if (!measuring && t >= tw) {
            measuring = 1;
            poll_mark(g, &m->u0, &m->s0, &m->tm0);
        }
        if (measuring == 1 && t >= tend) {
            measuring = 2;
            poll_mark(g, &m->u1, &m->s1, &m->tm1);
        }
        if (start_due_polls(g, next_rank, t, tw, tend)) break;
        if (t >= tend && g->inflight == 0) return 0;
        if (ls_over_time(g, tend + DEADLINE_DRAIN_S,
                         "poll requests still unanswered 30 s after the end"))
            break;
        double wait = 0.05;
        if (!measuring && tw - t < wait) wait = tw - t;
        if (measuring == 1 && tend - t < wait) wait = tend - t;
        if (t < tend && g->ndue && g->due_at[0] - t < wait) wait = g->due_at[0] - t;
        ls_step(g, wait); /* finished pollers go back on the heap */
    }
    ls_drain(g, 5);
    return -1;
}

static int run_polls(gen *g, poll_figures *pf)
{
    ls_phase_begin(g, "poll", &g->e_poll);
    int P = g->pollers;
    int *next_rank = ls_xcalloc((size_t)P, sizeof *next_rank);
    g->due_at = ls_xcalloc((size_t)P, sizeof *g->due_at);
    g->due_id = ls_xcalloc((size_t)P, sizeof *g->due_id);
    g->ndue = 0;
    double t0 = ls_now_s(), tw = t0 + g->poll_warm_s, tend = tw + g->poll_s;
    for (int i = 0; i < P; i++) {
        next_rank[i] = i;
        /* Paced pollers start spread over one interval, as ranks ending iterations would. */
        due_push(g, t0 + g->interval_s * (double)i / (double)P, i);
    }
    poll_marks m;
    memset(&m, 0, sizeof m);
    m.s0 = m.s1 = NAN;
    int rc = poll_loop(g, next_rank, tw, tend, &m);
    free(next_rank);
    free(g->due_at);
    free(g->due_id);
    g->due_at = NULL;
    g->due_id = NULL;
    if (rc) return -1;
    pf->measured_s = m.tm1 - m.tm0;
    pf->requests = g->nlat;
    pf->rate = pf->measured_s > 0 ? (double)g->nlat / pf->measured_s : 0;
    pf->gen_user = (double)(m.u1.ru_utime.tv_sec - m.u0.ru_utime.tv_sec) +
                   1e-6 * (double)(m.u1.ru_utime.tv_usec - m.u0.ru_utime.tv_usec);
    pf->gen_sys = (double)(m.u1.ru_stime.tv_sec - m.u0.ru_stime.tv_sec) +
                  1e-6 * (double)(m.u1.ru_stime.tv_usec - m.u0.ru_stime.tv_usec);
    pf->gen_cpu = ls_cpu_s(&m.u1) - ls_cpu_s(&m.u0);
    pf->srv_cpu = m.s1 - m.s0;
    return 0;
}

/* The poll phase, with the server's schedule-latency histogram read before and after it;
 * g->lat is sorted when it returns 0. */
int ls_poll_phase(gen *g, poll_figures *pf)
{
    double le2[MAX_BUCKETS];
    memset(pf, 0, sizeof *pf);
    pf->nh0 = ls_server_hist(g, pf->le, pf->h0);
    if (run_polls(g, pf)) return -1;
    pf->nh1 = ls_server_hist(g, le2, pf->h1);
    qsort(g->lat, (size_t)g->nlat, sizeof *g->lat, ls_cmp_double);
    return 0;
}
