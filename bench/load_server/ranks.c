/* load_server: the simulated ranks: register, get a schedule, post profiling results from the
 * simulated GPU until the job plans. */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "load_server.h"

static void enqueue(gen *g, int r)
{
    int lo = g->rk[r].have_schedule;
    g->q[lo].r[(g->q[lo].head + g->q[lo].len) % g->ranks] = r;
    g->q[lo].len++;
    g->qlen++;
}

static int dequeue(gen *g)
{
    int lo = g->q[0].len == 0;
    int r = g->q[lo].r[g->q[lo].head];
    g->q[lo].head = (g->q[lo].head + 1) % g->ranks;
    g->q[lo].len--;
    g->qlen--;
    return r;
}

static void park(gen *g, int r, long long seen)
{
    rank_st *k = &g->rk[r];
    if (seen < g->key) { /* an answer that crossed ours shows the job moved on already */
        k->state = R_SCHEDULE;
        enqueue(g, r);
        return;
    }
    k->state = R_PARKED;
    k->seen = seen;
    k->wake_at = ls_now_s() + g->wait_s;
    if (k->wake_at < g->next_wake) g->next_wake = k->wake_at;
    g->parked[g->nparked++] = r;
}

static void note_key(gen *g, long long key)
{
    if (key > g->key) g->key = key;
}

/* Parked ranks re-poll their schedule when any answer showed that the job moved on (as they
 * would at their next iteration boundary), or after --wait-ms at the latest. */
static void wake_parked(gen *g)
{
    double t = ls_now_s();
    if (!g->nparked || (g->key == g->key_at_scan && t < g->next_wake)) return;
    g->key_at_scan = g->key;
    g->next_wake = INFINITY;
    int keep = 0;
    for (int i = 0; i < g->nparked; i++) {
        int r = g->parked[i];
        rank_st *k = &g->rk[r];
        if (k->seen < g->key || t >= k->wake_at) {
            k->state = R_SCHEDULE;
            enqueue(g, r);
        } else {
            g->parked[keep++] = r;
            if (k->wake_at < g->next_wake) g->next_wake = k->wake_at;
        }
    }
    g->nparked = keep;
}

/* ---- results from the simulated GPU ---- */

/* Window of computation op of stage pp at clock mhz: the model's time and energy, and its JSON
 * text (cached: every rank of a stage runs the same computations at the same clocks). */
static const win_cache *window(gen *g, int pp, int op, int mhz)
{
    win_cache *c = &g->wc[pp * g->ops + op];
    if (c->text.len && c->clock == mhz) return c;
    prs_instr in = PRS_FORWARD;
    int mb = 0;
    prs_op_describe(&g->pipe, pp, op, &in, &mb);
    prs_gpu_work w = g->gpu->work[in];
    /* The last stage also runs the LM head and the loss (gpumodel.h). */
    if (g->stages > 1 && pp == g->stages - 1) w.t_ref_s *= PRS_SYNTH_LAST_STAGE_DEFAULT;
    c->clock = mhz;
    c->t = prs_gpu_time_s(g->gpu, &w, mhz);
    c->e = prs_gpu_energy_j(g->gpu, &w, mhz);
    ls_buf_clear(&c->text);
    ls_buf_printf(&c->text,
                  "{\"instruction\":\"%s\",\"microbatch\":%d,\"clock_mhz\":%d,\"time_s\":%.9g,"
                  "\"energy_j\":%.9g}",
                  prs_instr_name(in), mb, mhz, c->t, c->e);
    return c;
}

/* The body of rank r's post: its k->todo iterations of round k->round at its schedule's clocks. */
static void build_results(gen *g, int r, buf *b)
{
    rank_st *k = &g->rk[r];
    const int *clocks = g->clk + (size_t)r * (size_t)g->ops;
    int pp = r % g->stages;
    ls_buf_clear(b);
    ls_buf_printf(b, "{\"rank\":%d,\"round\":%ld,\"iterations\":[", r, k->round);
    for (int it = 0; it < k->todo; it++) {
        double t = 0, e = 0;
        for (int op = 0; op < g->ops; op++) {
            const win_cache *c = window(g, pp, op, clocks[op]);
            t += c->t;
            e += c->e;
        }
        ls_buf_printf(b,
                      "%s{\"iteration\":%ld,\"time_s\":%.9g,\"energy_j\":%.9g,\"clock_mhz\":%d,"
                      "\"windows\":[",
                      it ? "," : "", k->next_iteration++, t, e, clocks[0]);
        for (int op = 0; op < g->ops; op++) {
            const win_cache *c = window(g, pp, op, clocks[op]);
            if (op) ls_buf_add(b, ",", 1);
            ls_buf_add(b, c->text.p, c->text.len);
        }
        ls_buf_add(b, "]}", 2);
    }
    ls_buf_add(b, "]}", 2);
    g->posts++;
    g->iterations_posted += k->todo;
    g->windows_posted += (long)k->todo * g->ops;
    g->bytes_posted += (long)b->len;
}

/* ---- the ranks' state machine (register, schedule, profiling) ---- */

static int start_rank(gen *g, xfer *x, int r)
{
    rank_st *k = &g->rk[r];
    switch (k->state) {
    case R_REGISTER:
        if (g->t_reg0 == 0) g->t_reg0 = ls_now_s();
        ls_buf_clear(&x->body);
        ls_buf_printf(&x->body, "{\"rank\":%d,\"dp\":%d,\"pp\":%d,\"gpu\":\"simulated %s\"}", r,
                      r / g->stages, r % g->stages, g->gpu->name);
        snprintf(x->path, sizeof x->path, "/v1/jobs/%s/ranks", g->job);
        return ls_xfer_start(g, x, K_REGISTER, r, M_POST);
    case R_SCHEDULE:
        snprintf(x->path, sizeof x->path, "/v1/jobs/%s/schedule?rank=%d", g->job, r);
        g->sched_requests++;
        return ls_xfer_start(g, x, K_SCHEDULE, r, M_GET);
    case R_RESULTS:
        build_results(g, r, &x->body);
        snprintf(x->path, sizeof x->path, "/v1/jobs/%s/results", g->job);
        return ls_xfer_start(g, x, K_RESULTS, r, M_POST);
    default:
        return -1;
    }
}

static void rank_failed(gen *g)
{
    g->aborted = 1; /* the job cannot move on without this rank */
}

static void done_register(gen *g, xfer *x, json_t *o)
{
    int r = x->id;
    int ph = ls_json_phase(o);
    if (ph != PH_REGISTERING && ph != PH_PROFILING && ph != PH_PLANNING && ph != PH_RUNNING) {
        ls_check_failed(g, "rank %d registered, but the job is %s", r,
                        ph == PH_UNKNOWN ? "in no known phase" : phase_names[ph]);
        rank_failed(g);
        return;
    }
    note_key(g, ls_job_key(ph, 0));
    if (x->t1 > g->t_reg_last) g->t_reg_last = x->t1;
    g->rk[r].state = R_SCHEDULE;
    enqueue(g, r);
}

static void done_schedule(gen *g, xfer *x, json_t *o)
{
    int r = x->id;
    rank_st *k = &g->rk[r];
    int ph = ls_json_phase(o);
    long long round = ls_json_int(o, "round", -1);
    if (ph == PH_UNKNOWN || round < 0) {
        ls_check_failed(g, "rank %d: schedule without a known phase and round: %.200s", r,
                        x->resp.p);
        rank_failed(g);
        return;
    }
    note_key(g, ls_job_key(ph, round));
    if (ph == PH_REGISTERING) {
        park(g, r, ls_job_key(ph, round));
        return;
    }
    if (!k->have_schedule) {
        k->have_schedule = 1;
        if (++g->nsched == g->ranks) g->t_sched_all = x->t1;
    }
    if (ph == PH_PLANNING || ph == PH_RUNNING) {
        k->state = R_DONE;
        g->ndone++;
        return;
    }
    if (ph != PH_PROFILING) {
        ls_check_failed(g, "rank %d: the job is %s during profiling", r, phase_names[ph]);
        rank_failed(g);
        return;
    }
    long long total = ls_json_int(o, "iterations", -1),
              reported = ls_json_int(o, "iterations_reported", -1);
    json_t *cl = json_object_get(o, "clocks_mhz");
    if (total < 1 || total > 2LL * MAX_ITERS || reported < 0 || !json_is_array(cl) ||
        json_array_size(cl) != (size_t)g->ops) {
        ls_check_failed(g,
                        "rank %d: a profiling schedule without iterations, iterations_reported "
                        "or %d clocks: %.200s",
                        r, g->ops, x->resp.p);
        rank_failed(g);
        return;
    }
    if (round + 1 > g->rounds_seen) g->rounds_seen = (int)round + 1;
    if (reported >= total) { /* its part of this round is in: wait for the others */
        park(g, r, ls_job_key(ph, round));
        return;
    }
    int *clocks = g->clk + (size_t)r * (size_t)g->ops;
    for (int i = 0; i < g->ops; i++) {
        json_t *v = json_array_get(cl, (size_t)i);
        long long f = json_is_integer(v) ? (long long)json_integer_value(v) : 0;
        if (f < 1 || f > 100000) {
            ls_check_failed(g, "rank %d: clocks_mhz[%d] is not a clock", r, i);
            rank_failed(g);
            return;
        }
        clocks[i] = (int)f;
    }
    k->round = (long)round;
    k->todo = (int)(total - reported);
    k->state = R_RESULTS;
    enqueue(g, r);
}

static void done_results(gen *g, xfer *x, json_t *o)
{
    int r = x->id;
    rank_st *k = &g->rk[r];
    int ph = ls_json_phase(o);
    long long round = ls_json_int(o, "round", -1);
    if (ph == PH_UNKNOWN || round < 0 || ls_json_int(o, "accepted", -1) != k->todo) {
        ls_check_failed(g,
                        "rank %d: results answer without phase, round or the %d accepted: %.200s",
                        r, k->todo, x->resp.p);
        rank_failed(g);
        return;
    }
    note_key(g, ls_job_key(ph, round));
    if (ph == PH_PROFILING && round == k->round) {
        park(g, r, ls_job_key(ph, round));
    } else { /* the job moved on: ask what now */
        k->state = R_SCHEDULE;
        enqueue(g, r);
    }
}

void ls_on_done(gen *g, xfer *x)
{
    if (x->kind == K_CTL) return; /* ls_ctl() reads it */
    if (x->kind == K_POLL) {
        ls_done_poll(g, x);
        return;
    }
    json_t *o = NULL;
    if (!ls_request_failed(g, x)) {
        o = json_loadb(x->resp.p ? x->resp.p : "", x->resp.len, 0, NULL);
        if (!o)
            ls_check_failed(g, "%s %s: the answer is not JSON", ls_method_name(x->method), x->path);
    }
    if (!o) {
        if (x->kind != K_CHECK) rank_failed(g);
    } else if (x->kind == K_REGISTER) {
        done_register(g, x, o);
    } else if (x->kind == K_SCHEDULE) {
        done_schedule(g, x, o);
    } else if (x->kind == K_RESULTS) {
        done_results(g, x, o);
    } else {
        ls_done_check(g, x, o);
    }
    json_decref(o);
    ls_pool_put(g, x);
}

/* Hand queued ranks to free easy handles. */
static int pump(gen *g)
{
    while (g->qlen) {
        xfer *x = ls_pool_get(g);
        if (!x) return 0;
        int r = dequeue(g);
        if (start_rank(g, x, r)) {
            ls_pool_put(g, x);
            return -1;
        }
    }
    return 0;
}

/* Register every rank, get its schedule, profile until the job plans. */
int ls_run_ranks(gen *g)
{
    for (int r = 0; r < g->ranks; r++) {
        g->rk[r].state = R_REGISTER;
        enqueue(g, r);
    }
    g->next_wake = INFINITY;
    ls_phase_begin(g, "register", &g->e_reg);
    ls_cpu_mark_now(g->pid, &g->cpu_reg0);
    double reg_deadline = ls_now_s() + DEADLINE_REGISTER_S;
    double prof_deadline = 0;
    while (g->ndone < g->ranks) {
        if (g->aborted) break;
        if (g->nsched == g->ranks && !prof_deadline) {
            prof_deadline = ls_now_s() + DEADLINE_PROFILE_S;
            ls_cpu_mark_now(g->pid, &g->cpu_reg1);
            g->reg_sched_requests = g->sched_requests;
            ls_phase_begin(g, "profiling", &g->e_prof);
        }
        if (!prof_deadline
                ? ls_over_time(g, reg_deadline, "not every rank has a schedule after 60 s")
                : ls_over_time(g, prof_deadline, "profiling is not over after 120 s")) {
            fprintf(stderr,
                    "load_server: %d of %d ranks have a schedule, %d are past profiling (%d "
                    "waiting, %d queued, %d requests in flight)\n",
                    g->nsched, g->ranks, g->ndone, g->nparked, g->qlen, g->inflight);
            g->aborted = 1;
            break;
        }
        wake_parked(g);
        if (pump(g)) {
            g->aborted = 1;
            break;
        }
        double wait = 0.05;
        if (g->nparked && g->next_wake - ls_now_s() < wait) wait = g->next_wake - ls_now_s();
        ls_step(g, wait);
    }
    if (g->aborted) {
        ls_drain(g, 5);
        return -1;
    }
    if (!prof_deadline) { /* every rank went past registration at once (an uploaded profile) */
        ls_cpu_mark_now(g->pid, &g->cpu_reg1);
        g->reg_sched_requests = g->sched_requests;
    }
    g->t_prof_done = ls_now_s();
    ls_cpu_mark_now(g->pid, &g->cpu_prof1);
    return 0;
}
