/* The read-only views of a job, safe under its lock shared: a rank's schedule (built by hand,
 * not with jansson, because every rank polls it), the status and the frontier as JSON. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "perseus/clock.h"
#include "perseus/numfmt.h"
#include "perseus/server.h"

#include "job_assign.h"
#include "job.h"
#include "job_int.h"

/* ---- schedule ---- */

/* A growing text buffer for hand-built JSON; on allocation failure it is marked bad and
 * stops growing. */
typedef struct sbuf {
    char *p;
    size_t len, cap;
    int bad;
} sbuf;

/* Room for extra more bytes (and the NUL); 0, or -1 with the buffer marked bad. */
static int sb_reserve(sbuf *b, size_t extra)
{
    if (b->bad) return -1;
    if (b->len + extra < b->cap) return 0;
    size_t nc = b->cap ? b->cap : 256;
    while (nc <= b->len + extra)
        nc *= 2;
    char *np = realloc(b->p, nc);
    if (!np) {
        b->bad = 1;
        return -1;
    }
    b->p = np;
    b->cap = nc;
    return 0;
}

static void sb_printf(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_printf(sbuf *b, const char *fmt, ...)
{
    while (!b->bad) { /* format in place; grow and format again only when it did not fit */
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(b->p ? b->p + b->len : NULL, b->p ? b->cap - b->len : 0, fmt, ap);
        va_end(ap);
        if (n < 0) {
            b->bad = 1;
            return;
        }
        if (b->p && b->len + (size_t)n < b->cap) {
            b->len += (size_t)n;
            return;
        }
        sb_reserve(b, (size_t)n);
    }
}

/* "clocks_mhz": [...] from n clocks, or n copies of one clock when clocks is NULL. Digits are
 * written by hand: this list is most of every schedule poll's text. */
static void sb_clocks(sbuf *b, const int *clocks, int n, int same)
{
    sb_printf(b, "\"clocks_mhz\":[");
    if (sb_reserve(b, (size_t)n * 11 + 1)) return; /* up to 10 digits and a comma each, "]" */
    for (int i = 0; i < n; i++) {
        unsigned v = (unsigned)(clocks ? clocks[i] : same); /* clocks are positive */
        char digits[12];
        int nd = 0;
        do {
            digits[nd++] = (char)('0' + v % 10);
            v /= 10;
        } while (v);
        if (i) b->p[b->len++] = ',';
        while (nd)
            b->p[b->len++] = digits[--nd];
    }
    b->p[b->len++] = ']';
    b->p[b->len] = '\0';
}

/* The pipeline's geometry, so a client can check the order of its computations:
 * "schedule", "stages", "microbatches", "virtual_stages" and a trailing comma. */
static void sb_geometry(sbuf *b, const job_spec *s)
{
    sb_printf(b, "\"schedule\":\"%s\",\"stages\":%d,\"microbatches\":%d,\"virtual_stages\":%d,",
              prs_schedule_name(s->schedule), s->stages, s->microbatches, s->virtual_stages);
}

int job_schedule(const job *j, int rank, char **text, size_t *len, api_err *e)
{
    *text = NULL;
    *len = 0;
    if (rank < 0 || rank >= j->world || !j->ranks[rank].registered)
        return api_fail(e, 404, "not_registered", "rank %d is not registered", rank);
    const job_rank *k = &j->ranks[rank];
    sbuf b = {NULL, 0, 0, 0};
    sb_printf(&b, "{\"phase\":\"%s\",\"round\":%ld,", job_phase_name(j->phase), j->round);
    switch (j->phase) {
    case JOB_PROFILING: {
        int f = j->sweep[j->sweep_index];
        sb_printf(&b, "\"plan_id\":null,\"clock_mhz\":%d,", f);
        sb_geometry(&b, &j->spec);
        sb_clocks(&b, NULL, j->ops_per_stage, f);
        sb_printf(&b, ",\"warmup_iterations\":%d,\"iterations\":%d,\"iterations_reported\":%d}",
                  j->spec.warmup_iterations, job_round_need(j), j->round_iters[rank]);
        break;
    }
    case JOB_RUNNING: {
        job_pipe v; /* the pipeline with every plan rule applied */
        job_pipe_view(j, k->dp, &v);
        const int *clocks = job_plan_clocks(j, v.plan_id);
        if (!clocks) {
            free(b.p);
            return api_fail(e, 500, "internal", "plan %ld cannot be decoded", v.plan_id);
        }
        char t[PRS_NUMFMT_MAX];
        sb_printf(&b, "\"plan_id\":%ld,\"from_iteration\":%ld,", v.plan_id, v.from_iteration);
        sb_geometry(&b, &j->spec);
        sb_clocks(&b, clocks + (size_t)k->pp * (size_t)j->ops_per_stage, j->ops_per_stage, 0);
        sb_printf(&b, ",\"iteration_time_s\":%s,\"straggler\":%s}",
                  prs_num_fmt_double(t, sizeof t, job_plan_time(j, v.plan_id)),
                  v.straggler != STRAGGLER_NONE ? "true" : "false");
        break;
    }
    case JOB_PLANNING:
        /* Training goes on at the highest clock while the planner runs. */
        sb_printf(&b, "\"plan_id\":null,");
        sb_geometry(&b, &j->spec);
        sb_clocks(&b, NULL, j->ops_per_stage, j->spec.clocks_mhz[0]);
        sb_printf(&b, "}");
        break;
    default: /* registering: wait; done, failed: reset clocks */
        sb_printf(&b, "\"plan_id\":null,\"clocks_mhz\":[]}");
        break;
    }
    if (b.bad) {
        free(b.p);
        return api_fail(e, 500, "internal", "out of memory");
    }
    *text = b.p;
    *len = b.len;
    return 0;
}

/* ---- JSON views ---- */

static json_t *point_json(const job *j, long k)
{
    const prs_frontier_point *p = prs_frontier_point_at(j->frontier, (size_t)k);
    if (!p) return json_null();
    json_t *o = json_pack("{s:i, s:f, s:f, s:f, s:f}", "plan_id", (json_int_t)k, "time_s",
                          p->time_s, "energy_j", p->energy_j, "eval_time_s", p->eval_time_s,
                          "eval_energy_j", p->eval_energy_j);
    if (o && p->bound_j > 0) /* hull: the LP relaxation's lower bound at eval_time_s */
        json_object_set_new(o, "bound_j", json_real(p->bound_j));
    return o;
}

static json_t *watts_or_null(double w, int known)
{
    return known ? json_real(w) : json_null();
}

/* {"spec_w", "measured_w", "used_w"}: null when not given / not measured / not known yet. */
static json_t *blocking_power_json(const job *j)
{
    json_t *o = json_object();
    json_object_set_new(o, "spec_w",
                        watts_or_null(j->spec.blocking_power_w, j->spec.has_blocking_power));
    json_object_set_new(o, "measured_w", watts_or_null(j->bp_measured_w, j->bp_measured_w > 0));
    json_object_set_new(
        o, "used_w", watts_or_null(j->bp_used_w, j->spec.has_blocking_power || j->bp_used_w > 0));
    return o;
}

/* Registered and expected ranks, and the clock changes that did not take on any of them (with
 * the ranks that had some, at most RANKS_LISTED of them). */
#define RANKS_LISTED 16
static json_t *ranks_json(const job *j)
{
    json_t *o = json_pack("{s:i, s:i}", "registered", j->nregistered, "expected", j->world);
    json_t *bad = json_array();
    long total = 0;
    for (int r = 0; r < j->world; r++) {
        long n = j->ranks[r].clock_failures;
        total += n;
        if (n > 0 && json_array_size(bad) < RANKS_LISTED)
            json_array_append_new(bad, json_integer(r));
    }
    json_object_set_new(o, "clock_failures", json_integer(total));
    json_object_set_new(o, "clock_failure_ranks", bad);
    return o;
}

/* A number, or null when not known (<= 0). */
static json_t *real_or_null(double v)
{
    return v > 0 && isfinite(v) ? json_real(v) : json_null();
}

/* The ranks the current profiling round waits for (at most RANKS_LISTED): its iterations so far
 * against what the round asks, the attribution fit its last counted iteration came from (largest
 * relative standard error over its kinds, and the criterion the rank aims for), and what it waits
 * for: "fit" while it reported nothing this round (a rank reports once its fit meets the
 * criterion, or once the round's time bound passed), else "iterations". */
static json_t *waiting_json(const job *j)
{
    json_t *a = json_array();
    int need = job_round_need(j);
    for (int r = 0; r < j->world && json_array_size(a) < RANKS_LISTED; r++) {
        int n = j->round_iters[r];
        if (n >= need) continue;
        const job_rank *k = &j->ranks[r];
        int said = k->fit_round == j->round + 1;
        json_array_append_new(
            a, json_pack("{s:i, s:i, s:i, s:i, s:o, s:o, s:s, s:b}", "rank", r, "clock_mhz",
                         j->sweep[j->sweep_index], "iterations", n, "need", need, "fit_rel_se",
                         real_or_null(said ? k->fit_rel_se : 0), "criterion",
                         real_or_null(said ? k->fit_criterion : 0), "waiting_for",
                         n == 0 ? "fit" : "iterations", "fit_settled", !job_fit_unsettled(j, r)));
    }
    return a;
}

/* Per swept clock (stored, so across restarts): kept iterations per rank and the precision
 * reached. */
static json_t *precision_json(const job *j)
{
    json_t *a = json_array();
    for (int i = 0; i < j->nsweep; i++) {
        if (!j->clock_iters[i]) continue;
        double se = j->clock_se_pct[i];
        json_array_append_new(a, json_pack("{s:i, s:i, s:o}", "clock_mhz", j->sweep[i],
                                           "iterations", j->clock_iters[i], "se_pct",
                                           isfinite(se) ? json_real(se) : json_null()));
    }
    return a;
}

/* What a pipeline's ranks posted after profiling: how many iterations, the energy their GPUs
 * reported, and the mean iteration time (null before any). */
static json_t *reported_json(const job_pipe *p)
{
    double n = (double)p->reports;
    return json_pack("{s:I, s:f, s:o}", "iterations", (json_int_t)p->reports, "energy_j",
                     p->report_energy_j, "mean_time_s",
                     p->reports > 0 ? json_real(p->report_time_s / n) : json_null());
}

json_t *job_status_json(const job *j)
{
    json_t *o = json_object();
    if (!o) return NULL;
    json_object_set_new(o, "job_id", json_string(j->id));
    json_object_set_new(o, "phase", json_string(job_phase_name(j->phase)));
    if (j->phase == JOB_FAILED) json_object_set_new(o, "reason", json_string(j->reason));
    json_object_set_new(o, "round", json_integer(j->round));
    json_t *spec = spec_json(&j->spec);
    json_object_del(spec, "reuse_key_sha256"); /* a secret's hash: never shown */
    json_object_set_new(spec, "reuse_key_set", json_boolean(j->spec.reuse_key_sha256[0]));
    json_object_set_new(o, "spec", spec);
    json_object_set_new(o, "ranks", ranks_json(j));
    json_object_set_new(o, "measurements", json_integer(j->measurements));
    json_t *prof = json_pack("{s:i, s:I, s:i}", "clocks_total", j->nsweep, "clocks_done",
                             (json_int_t)(j->phase == JOB_PROFILING ? j->sweep_index : 0),
                             "ranks_done", j->phase == JOB_PROFILING ? j->ranks_done : 0);
    if (j->phase == JOB_PROFILING) {
        json_object_set_new(prof, "clock_mhz", json_integer(j->sweep[j->sweep_index]));
        json_object_set_new(prof, "waiting", waiting_json(j));
    }
    json_object_set_new(prof, "clocks", precision_json(j));
    json_object_set_new(o, "profiling", prof);
    double frac = j->plan_total > 0 ? (double)j->plan_done / (double)j->plan_total : 0;
    if (frac > 1) frac = 1;
    /* While planning: the time since the planner thread started (0 while it waits for one). */
    double started_s = 0, elapsed_s = j->planning_s;
    __atomic_load(&j->plan_started_s, &started_s, __ATOMIC_RELAXED);
    if (j->phase == JOB_PLANNING) elapsed_s = started_s > 0 ? prs_mono_s() - started_s : 0;
    if (j->frontier && j->phase != JOB_PLANNING) frac = 1;
    int waits_memory = __atomic_load_n(&j->plan_waits_memory, __ATOMIC_RELAXED);
    json_object_set_new(o, "planning",
                        json_pack("{s:I, s:I, s:f, s:f, s:b}", "done", (json_int_t)j->plan_done,
                                  "total", (json_int_t)j->plan_total, "done_pct", 100 * frac,
                                  "elapsed_s", elapsed_s, "waiting_for_memory", waits_memory));
    json_object_set_new(o, "profile_source",
                        j->profile ? json_string(j->profile_source) : json_null());
    json_object_set_new(o, "planner",
                        j->profile ? json_string(job_plans_robust(j) ? "robust" : "baseline")
                                   : json_null());
    json_object_set_new(o, "blocking_power", blocking_power_json(j));
    if (j->frontier) {
        json_t *fr = json_object();
        json_object_set_new(fr, "points", json_integer((json_int_t)prs_frontier_size(j->frontier)));
        json_object_set_new(fr, "fastest", point_json(j, (long)j->fastest));
        if (j->allmax_energy_j > 0)
            json_object_set_new(fr, "all_max",
                                json_pack("{s:f, s:f}", "eval_time_s", j->allmax_time_s,
                                          "eval_energy_j", j->allmax_energy_j));
        json_object_set_new(o, "frontier", fr);
        json_t *pipes = json_array();
        for (int d = 0; d < j->spec.dp; d++) {
            job_pipe v;
            job_pipe_view(j, d, &v);
            const job_pipe *p = &v;
            json_t *pj = json_pack(
                "{s:i, s:I, s:s, s:I}", "dp", d, "plan_id", (json_int_t)p->plan_id, "straggler",
                job_straggler_name(p->straggler), "iterations", (json_int_t)p->iterations);
            json_object_set_new(pj, "judged_iteration", json_integer(p->last_iteration));
            if (p->straggler)
                json_object_set_new(pj, "straggler_time_s", json_real(p->straggler_time_s));
            json_object_set_new(pj, "reported", reported_json(p));
            json_object_set_new(pj, "plan", point_json(j, p->plan_id));
            json_object_set_new(pj, "power", plan_powers_json(&j->powers, p->plan_id));
            json_array_append_new(pipes, pj);
        }
        json_object_set_new(o, "pipelines", pipes);
        json_object_set_new(
            o, "power_cap",
            plan_powers_cap_json(&j->powers, j->frontier, j->spec.power_cap_w, j->spec.dp));
        const prs_frontier_point *fp = prs_frontier_point_at(j->frontier, j->fastest);
        if (fp && j->allmax_energy_j > 0)
            json_object_set_new(
                o, "savings",
                json_pack("{s:f, s:f, s:I, s:f}", "per_iteration_j",
                          j->allmax_energy_j - fp->eval_energy_j, "saving_pct",
                          100 * (j->allmax_energy_j - fp->eval_energy_j) / j->allmax_energy_j,
                          "iterations", (json_int_t)j->run_iterations, "so_far_j",
                          j->run_saved_j * (j->spec.tp > 0 ? j->spec.tp : 1)));
    }
    return o;
}

json_t *job_frontier_json(const job *j, long offset, long limit)
{
    if (!j->frontier) return NULL;
    long n = (long)prs_frontier_size(j->frontier);
    json_t *o = json_pack("{s:s, s:I, s:I}", "cost_model",
                          prs_cost_model_name(prs_frontier_cost_model(j->frontier)), "fastest",
                          (json_int_t)j->fastest, "size", (json_int_t)n);
    if (!o) return NULL;
    if (limit <= 0) { /* the summary */
        json_object_set_new(o, "slowest_point", point_json(j, 0));
        json_object_set_new(o, "fastest_point", point_json(j, (long)j->fastest));
        return o;
    }
    json_t *pts = json_array();
    long end = offset < n ? (limit < n - offset ? offset + limit : n) : offset;
    for (long k = offset; k < end; k++)
        json_array_append_new(pts, point_json(j, k));
    json_object_set_new(o, "offset", json_integer(offset));
    json_object_set_new(o, "limit", json_integer(limit));
    json_object_set_new(o, "points", pts);
    json_object_set_new(o, "next_offset", end < n ? json_integer(end) : json_null());
    return o;
}
