/* The job state machine (job.h): creation, loading, registration, the dispatch of results by
 * phase, profile uploads, straggler reports, the power cap, completion and the planner's result.
 * The profiling rounds are in job_profiling.c, the reports of running jobs and straggler
 * detection in job_straggler.c, the plan rules in job_assign.c, the views in job_view.c. */
#include "job.h"
#include "job_int.h"
#include "job_assign.h"

#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "perseus/clock.h"
#include "perseus/numfmt.h"
#include "perseus/server.h"

static int wrong_phase(api_err *e, const job *j, const char *what)
{
    return api_fail(e, 409, "wrong_phase", "%s is not possible while the job is %s", what,
                    job_phase_name(j->phase));
}

void job_config_key(const job_spec *s, char key[2 * SECURE_SHA256_LEN + 1])
{
    key[0] = '\0';
    if (!s->model[0] || !s->reuse_frontier || !s->reuse_key_sha256[0]) return;
    char buf[8192], a[PRS_NUMFMT_MAX], b[PRS_NUMFMT_MAX];
    int n = snprintf(buf, sizeof buf,
                     "perseus-config-v2\nreuse=%s\nmodel=%s\nstages=%d\nmicrobatches=%d\ntp=%d\n"
                     "schedule=%s\nvirtual_stages=%d\nmin_clock=%d\nunit_time=%s\n"
                     "blocking_power=%s\ncost_model=%s\nclocks=",
                     s->reuse_key_sha256, s->model, s->stages, s->microbatches, s->tp,
                     prs_schedule_name(s->schedule), s->virtual_stages, s->min_clock_mhz,
                     prs_num_fmt_double(a, sizeof a, s->unit_time_s),
                     s->has_blocking_power ? prs_num_fmt_double(b, sizeof b, s->blocking_power_w)
                                           : "measured",
                     prs_cost_model_name(s->cost_model));
    for (int i = 0; i < s->nclocks && n > 0 && (size_t)n < sizeof buf; i++)
        n += snprintf(buf + n, sizeof buf - (size_t)n, "%d,", s->clocks_mhz[i]);
    if (s->change_cost_us > 0 && n > 0 && (size_t)n < sizeof buf) /* none when free, as before */
        n += snprintf(buf + n, sizeof buf - (size_t)n, "\nchange_cost_us=%s",
                      prs_num_fmt_double(a, sizeof a, s->change_cost_us));
    if (n < 0 || (size_t)n >= sizeof buf) n = (int)sizeof buf - 1;
    secure_sha256_hex(buf, (size_t)n, key);
}

int job_plans_robust(const job *j)
{
    return j->profile && strcmp(j->profile_source, "measured") == 0;
}

static int slot_index(const job *j, int dp, int pp, int tp)
{
    return (dp * j->spec.stages + pp) * j->spec.tp + tp;
}

static job *job_alloc(const job_spec *spec)
{
    job *j = calloc(1, sizeof *j);
    if (!j) return NULL;
    j->spec = *spec;
    j->world = spec->dp * spec->stages * spec->tp;
    j->ops_per_stage = spec_ops_per_stage(spec);
    j->ranks = calloc((size_t)j->world, sizeof *j->ranks);
    j->slot = malloc(sizeof *j->slot * (size_t)j->world);
    j->round_iters = calloc((size_t)j->world, sizeof *j->round_iters);
    j->late_iters = calloc((size_t)j->world, sizeof *j->late_iters);
    j->pipes = calloc((size_t)spec->dp, sizeof *j->pipes);
    j->scratch = malloc(sizeof *j->scratch * (size_t)spec->dp);
    j->strag = malloc(sizeof *j->strag * (size_t)spec->dp);
    j->clock_se_pct = malloc(sizeof *j->clock_se_pct * (size_t)(spec->nclocks ? spec->nclocks : 1));
    j->clock_iters = calloc((size_t)(spec->nclocks ? spec->nclocks : 1), sizeof *j->clock_iters);
    if (!j->ranks || !j->slot || !j->round_iters || !j->late_iters || !j->pipes || !j->scratch ||
        !j->strag || !j->clock_se_pct || !j->clock_iters) {
        job_free(j);
        return NULL;
    }
    for (int i = 0; i < j->world; i++)
        j->slot[i] = -1;
    for (int i = 0; i < (spec->nclocks ? spec->nclocks : 1); i++)
        j->clock_se_pct[i] = NAN;
    for (int d = 0; d < spec->dp; d++) {
        j->pipes[d].last_iteration = -1;
        j->pipes[d].prev_plan_id = j->pipes[d].want_plan = j->pipes[d].newest = -1;
        pace_reset(&j->pipes[d].pace);
    }
    for (int i = 0; i < spec->nclocks; i++)
        if (spec->clocks_mhz[i] >= spec->min_clock_mhz) j->sweep[j->nsweep++] = spec->clocks_mhz[i];
    job_config_key(spec, j->config_key);
    j->bp_used_w = spec->has_blocking_power ? spec->blocking_power_w : 0;
    return j;
}

void job_free(job *j)
{
    if (!j) return;
    free(j->clock_se_pct);
    free(j->clock_iters);
    free(j->ranks);
    free(j->slot);
    free(j->round_iters);
    free(j->late_iters);
    job_decoded_clear(j);
    free(j->decoded);
    free(j->pipes);
    free(j->scratch);
    free(j->strag);
    prs_profile_free(j->profile);
    prs_frontier_free(j->frontier);
    plan_powers_clear(&j->powers);
    free(j);
}

/* ---- frontier in memory ---- */

/* Evaluate the all-max baseline: every computation at the highest clock profiled for its
 * (chunk, instruction). */
static void compute_allmax(job *j)
{
    j->allmax_time_s = j->allmax_energy_j = 0;
    if (!j->profile || !j->frontier) return;
    const prs_pipeline *pipe = prs_frontier_pipeline(j->frontier);
    int chunks = prs_pipeline_chunks(pipe), per = prs_ops_per_stage(pipe);
    int *maxf = calloc((size_t)chunks * 2, sizeof *maxf);
    int *clocks = malloc(sizeof *clocks * (size_t)pipe->stages * (size_t)per);
    if (!maxf || !clocks) goto out;
    const prs_profile_row *rows = prs_profile_rows(j->profile);
    for (size_t i = 0; i < prs_profile_nrows(j->profile); i++)
        if (rows[i].stage < chunks && rows[i].freq_mhz > maxf[rows[i].stage * 2 + rows[i].instr])
            maxf[rows[i].stage * 2 + rows[i].instr] = rows[i].freq_mhz;
    for (int s = 0; s < pipe->stages; s++)
        for (int p = 0; p < per; p++) {
            prs_instr in = PRS_FORWARD;
            int mb = 0, chunk = s;
            prs_op_describe_chunk(pipe, s, p, &in, &mb, &chunk);
            clocks[s * per + p] = maxf[chunk * 2 + in];
        }
    double t, en;
    if (prs_evaluate_plan(j->profile, pipe, clocks, &t, &en, NULL) == 0) {
        j->allmax_time_s = t;
        j->allmax_energy_j = en;
    }
out:
    free(maxf);
    free(clocks);
}

/* Install a frontier (owned) and enter running. */
static int start_running(job *j, store *st, prs_frontier *f, api_err *e)
{
    if (f != j->frontier) {
        prs_frontier_free(j->frontier);
        j->frontier = f;
        job_decoded_clear(j);
    }
    if (prs_frontier_lookup(f, 0, &j->fastest) != 0) {
        job_set_failed(j, "the planner produced an empty frontier");
        return job_persist(j, st, e);
    }
    compute_allmax(j);
    j->phase = JOB_RUNNING;
    j->round = 0;
    if (job_assign_all(j, st, e)) return -1;
    return job_persist(j, st, e);
}

/* ---- create / load ---- */

/* Take over job `from`'s measured blocking power, and the one it planned with unless the spec
 * pins one. 1: go on; 0: nothing to reuse (*rc = 0); -1: store failure (*rc = -1). */
static int reuse_blocking_power(job *j, store *st, const char *from, int *rc, api_err *e)
{
    double measured, used;
    if (store_job_blocking_power(st, from, &measured, &used)) return *rc = job_store_fail(e, st);
    if (!j->spec.has_blocking_power && !(used > 0)) return *rc = 0; /* none known: profile */
    j->bp_measured_w = measured;
    if (!j->spec.has_blocking_power) j->bp_used_w = used;
    return 1;
}

/* 0 when f's pipeline is this job's and its slowest and fastest plans use only clocks the spec
 * lists (one pipeline gives every plan its shape; two plans are checked for clocks, to stay
 * cheap under the lock). */
static int reused_plans_fit(const job *j, const prs_frontier *f)
{
    prs_pipeline pipe;
    spec_pipeline(&j->spec, &pipe);
    const prs_pipeline *fp = prs_frontier_pipeline(f);
    size_t nf = prs_frontier_size(f);
    if (nf == 0 || fp->stages != pipe.stages || fp->microbatches != pipe.microbatches ||
        fp->schedule != pipe.schedule || prs_pipeline_chunks(fp) != prs_pipeline_chunks(&pipe) ||
        prs_ops_per_stage(fp) != j->ops_per_stage)
        return -1;
    size_t n = (size_t)pipe.stages * (size_t)j->ops_per_stage;
    int *clocks = malloc(sizeof *clocks * (n ? n : 1));
    int rc = clocks ? 0 : -1;
    size_t check[2] = {0, nf - 1};
    for (int c = 0; !rc && c < 2; c++) {
        rc = prs_frontier_plan(f, check[c], clocks, NULL);
        for (size_t i = 0; !rc && i < n; i++) {
            int listed = 0;
            for (int k = 0; k < j->spec.nclocks && !listed; k++)
                listed = clocks[i] == j->spec.clocks_mhz[k];
            rc = listed ? 0 : -1;
        }
    }
    free(clocks);
    return rc;
}

static int adopt_frontier(job *j, store *st, const char *from, api_err *e)
{
    char *csv = NULL, src[16];
    size_t clen = 0, flen = 0;
    void *plans = NULL;
    prs_frontier *f = NULL;
    prs_profile *p = NULL;
    int rc = -1;
    if (store_get_profile(st, from, &csv, &clen, src) ||
        store_get_frontier(st, from, &plans, &flen)) {
        rc = job_store_fail(e, st);
        goto out;
    }
    if (!csv || !plans) { /* nothing to reuse after all */
        rc = 0;
        goto out;
    }
    if (reuse_blocking_power(j, st, from, &rc, e) <= 0) goto out;
    prs_pipeline pipe;
    spec_pipeline(&j->spec, &pipe);
    /* Checked again against this job's spec: the key says they match, the data must too. */
    if (prs_profile_parse("stored profile", csv, clen, &p, NULL) ||
        prs_profile_check_stages(p, prs_pipeline_chunks(&pipe), NULL) ||
        prs_frontier_from_plans("stored frontier", plans, flen, &f, NULL) ||
        reused_plans_fit(j, f)) {
        rc = 0; /* an unreadable old frontier is not this job's problem: profile afresh */
        j->bp_measured_w = 0;
        j->bp_used_w = j->spec.blocking_power_w;
        goto out;
    }
    if (store_put_profile(st, j->id, "reused", csv, clen) ||
        store_put_frontier(st, j->id, j->config_key, plans, flen, 0)) {
        rc = job_store_fail(e, st);
        goto out;
    }
    j->profile = p;
    p = NULL;
    snprintf(j->profile_source, sizeof j->profile_source, "reused");
    j->frontier = f;
    f = NULL;
    prs_frontier_lookup(j->frontier, 0, &j->fastest);
    compute_allmax(j);
    rc = job_persist(j, st, e);
out:
    free(csv);
    free(plans);
    prs_profile_free(p);
    prs_frontier_free(f);
    return rc;
}

int job_create(store *st, const job_spec *spec, const char *id, const uint8_t *token_hash,
               long long now_unix, job **out, api_err *e)
{
    *out = NULL;
    job *j = job_alloc(spec);
    if (!j) return api_fail(e, 500, "internal", "out of memory");
    snprintf(j->id, sizeof j->id, "%s", id);
    memcpy(j->token_hash, token_hash, SECURE_SHA256_LEN);
    j->created_unix = now_unix;
    char *text = spec_to_stored(spec);
    if (!text) {
        job_free(j);
        return api_fail(e, 500, "internal", "out of memory");
    }
    store_job_row row = job_row(j, text);
    int rc = store_insert_job(st, &row);
    free(text);
    if (rc) {
        job_free(j);
        return job_store_fail(e, st);
    }
    if (j->config_key[0]) {
        char from[32];
        if (store_find_frontier(st, j->config_key, from) ||
            (from[0] && adopt_frontier(j, st, from, e))) {
            if (!from[0]) job_store_fail(e, st);
            job_free(j);
            return -1;
        }
    }
    *out = j;
    return 0;
}

static int load_rank(void *ud, int rank, int dp, int pp, int tp)
{
    job *j = ud;
    if (rank < 0 || rank >= j->world || dp < 0 || dp >= j->spec.dp || pp < 0 ||
        pp >= j->spec.stages || tp < 0 || tp >= j->spec.tp)
        return 0;
    j->ranks[rank] = (job_rank){.registered = 1, .dp = dp, .pp = pp, .tp = tp};
    j->slot[slot_index(j, dp, pp, tp)] = rank;
    j->nregistered++;
    return 0;
}

static int load_count(void *ud, int rank, long count)
{
    job *j = ud;
    if (rank < 0 || rank >= j->world) return 0;
    j->round_iters[rank] = (int)(count > 1000000 ? 1000000 : count);
    return 0;
}

static int load_pipe(void *ud, const store_pipe_row *r)
{
    job *j = ud;
    if (r->dp < 0 || r->dp >= j->spec.dp) return 0;
    job_pipe *p = &j->pipes[r->dp];
    p->straggler = r->straggler;
    p->straggler_time_s = r->straggler_time_s;
    p->plan_id = r->plan_id;
    p->prev_plan_id = r->prev_plan_id;
    p->from_iteration = r->from_iteration;
    p->epoch = r->epoch;
    pace_restore(&p->pace, r->pace_hz);
    /* Stored since version 5, and then newer than what the profiling rows say. */
    if (r->newest != STORE_NEWEST_UNKNOWN) p->newest = r->newest;
    p->reports = r->reports;
    p->report_time_s = r->report_time_s;
    p->report_energy_j = r->report_energy_j;
    j->measurements += r->reports;
    return 0;
}

/* A profiled clock's stored precision. */
static int load_precision(void *ud, long idx, double se_pct, int iters)
{
    job *j = ud;
    if (idx < 0 || idx >= j->nsweep) return 0;
    j->clock_se_pct[idx] = se_pct >= 0 ? se_pct : NAN;
    j->clock_iters[idx] = iters;
    return 0;
}

/* The iterations the current profiling round asks for beyond warm-up + k: what its last
 * decision (stored with its precision) asked for. */
static void load_round_extra(job *j)
{
    j->round_extra = 0;
    if (j->phase != JOB_PROFILING || j->sweep_index < 0 || j->sweep_index >= j->nsweep) return;
    int kept = j->clock_iters[j->sweep_index], k = j->spec.iterations_per_clock;
    if (kept <= 0) return;
    j->round_extra = kept - k + (job_wants_more(j, j->clock_se_pct[j->sweep_index], kept) ? k : 0);
    if (j->round_extra < 0) j->round_extra = 0;
}

/* A stored plan rule into the ring (oldest first: the newest JOB_RULES stay). */
static int load_rule(void *ud, const store_rule_row *r)
{
    job *j = ud;
    if (r->epoch < 0) return 0;
    j->rules[r->epoch % JOB_RULES] = (job_rule){r->tprime, r->slow, r->cap};
    if (r->epoch > j->epoch) j->epoch = r->epoch;
    return 0;
}

static int load_latest(void *ud, int rank, long it)
{
    job *j = ud;
    if (rank < 0 || rank >= j->world || !j->ranks[rank].registered) return 0;
    job_pipe *p = &j->pipes[j->ranks[rank].dp];
    if (it > p->newest) p->newest = it;
    return 0;
}

/* The job's rows besides its own: ranks, profile and frontier text, latest iterations (from the
 * profiling rows; a pipeline row that stores its newest iteration overrides them), pipelines,
 * and the current profiling round's counts. The results: the stored rows plus what the
 * pipelines folded. */
static int load_rows(job *j, store *st, char **csv, size_t *clen, void **plans, size_t *flen,
                     prs_error *err)
{
    long long rows = store_count_measurements(st, j->id);
    j->measurements = rows > 0 ? rows : 0;
    j->epoch = -1; /* no rule stored yet (load_rule) */
    if (rows < 0 || store_each_rank(st, j->id, load_rank, j) ||
        store_get_profile(st, j->id, csv, clen, j->profile_source) ||
        store_get_frontier(st, j->id, plans, flen) || store_each_rule(st, j->id, load_rule, j) ||
        store_each_precision(st, j->id, load_precision, j) ||
        store_latest_iterations(st, j->id, load_latest, j) ||
        store_each_pipeline(st, j->id, load_pipe, j) ||
        (j->phase == JOB_PROFILING && store_round_counts(st, j->id, j->round, load_count, j)))
        return prs_error_set(err, store_error(st)->code, "%s", store_error(st)->msg);
    load_round_extra(j);
    job_count_done_ranks(j);
    return 0;
}

/* The stored profile and frontier, parsed into the job. */
static int load_parsed(job *j, const char *csv, size_t clen, const void *plans, size_t flen,
                       prs_error *err)
{
    if (csv && prs_profile_parse("stored profile", csv, clen, &j->profile, NULL))
        return prs_error_set(err, PRS_EPARSE, "stored profile does not parse");
    if (plans) {
        int rc = prs_frontier_from_plans("stored frontier", plans, flen, &j->frontier, err);
        if (rc) return rc;
    }
    return 0;
}

/* A loaded job's derived state: the fastest plan, each pipeline's decoded plan, and the phase
 * checks a restart needs (a planning job plans again). */
static void load_derive(job *j, int *action)
{
    if (j->frontier) {
        prs_frontier_lookup(j->frontier, 0, &j->fastest);
        compute_allmax(j);
        for (int d = 0; d < j->spec.dp; d++)
            if (j->pipes[d].plan_id < 0 ||
                (size_t)j->pipes[d].plan_id >= prs_frontier_size(j->frontier))
                j->pipes[d].plan_id = (long)j->fastest;
        if (j->phase == JOB_RUNNING && job_assign_loaded(j))
            job_set_failed(j, "out of memory decoding its plans");
    }
    if (j->phase == JOB_PLANNING) {
        if (!j->profile)
            job_set_failed(j, "planning without a profile");
        else if (!j->spec.has_blocking_power && !(j->bp_used_w > 0))
            job_set_failed(j, "planning without a blocking power");
        else
            *action = JOB_ACT_PLAN;
    }
    if (j->phase == JOB_RUNNING && !j->frontier) job_set_failed(j, "running without a frontier");
    if (j->epoch < 0) j->epoch = 0;
}

int job_load(store *st, const store_job_row *row, job **out, int *action, prs_error *err)
{
    *out = NULL;
    *action = JOB_ACT_NONE;
    job_spec spec;
    int rc = spec_from_stored(row->spec_json, strlen(row->spec_json), &spec, err);
    if (rc) return rc;
    job *j = job_alloc(&spec);
    if (!j) return prs_error_set(err, PRS_ENOMEM, "out of memory");
    snprintf(j->id, sizeof j->id, "%s", row->id);
    memcpy(j->token_hash, row->token_hash, SECURE_SHA256_LEN);
    snprintf(j->reason, sizeof j->reason, "%s", row->reason);
    j->sweep_index = row->sweep_index;
    j->round = row->round;
    j->planning_s = row->planning_s;
    j->created_unix = row->created_unix;
    j->finished_unix = row->finished_unix;
    j->bp_measured_w = row->bp_measured_w;
    if (!spec.has_blocking_power) j->bp_used_w = row->bp_used_w;
    if (job_phase_parse(row->phase, &j->phase)) {
        job_free(j);
        return prs_error_set(err, PRS_EPARSE, "unknown phase '%.32s'", row->phase);
    }
    char *csv = NULL;
    size_t clen = 0, flen = 0;
    void *plans = NULL;
    rc = load_rows(j, st, &csv, &clen, &plans, &flen, err);
    if (!rc) rc = load_parsed(j, csv, clen, plans, flen, err);
    free(csv);
    free(plans);
    if (rc) {
        job_free(j);
        return rc;
    }
    load_derive(j, action);
    /* Finished before the column existed (or found unusable now): count from its creation. */
    if (!j->finished_unix && (j->phase == JOB_DONE || j->phase == JOB_FAILED))
        j->finished_unix = j->created_unix;
    *out = j;
    return 0;
}

/* ---- registering ---- */

static int enter_after_registration(job *j, store *st, api_err *e)
{
    if (j->frontier) return start_running(j, st, j->frontier, e);
    j->phase = JOB_PROFILING;
    j->sweep_index = 0;
    j->round = 0;
    memset(j->round_iters, 0, sizeof *j->round_iters * (size_t)j->world);
    memset(j->late_iters, 0, sizeof *j->late_iters * (size_t)j->world);
    j->ranks_done = 0;
    return job_persist(j, st, e);
}

/* A rank of pipeline d registered again: its client restarted and numbers its iterations from
 * 0 again (a restart is expected to restart the whole pipeline, as launchers do). The detector
 * forgets the numbers it saw and, while running, the current plan is announced again as if now:
 * from the lead's iteration, so the restarted ranks do not wait for the old numbers to come
 * round. Ranks that did not restart already run it, since the plan itself does not change. */
static int pipeline_restarted(job *j, store *st, int d, api_err *e)
{
    job_pipe *p = &j->pipes[d];
    job_catch_up(j, p); /* the rules made before the restart */
    p->last_iteration = -1;
    p->npend = 0;
    p->over = p->under = 0;
    p->newest = -1;
    /* After profiling the newest iteration is stored with the pipeline, not in rows. */
    if (j->phase == JOB_PLANNING) return job_put_pipe(j, st, d, e);
    if (j->phase != JOB_RUNNING || p->plan_id < 0) return 0;
    job_reannounce(j, p);
    if (job_put_pipe(j, st, d, e)) return -1;
    j->round++;
    return job_persist(j, st, e);
}

int job_register(job *j, store *st, const req_rank *r, int *created, int *action, api_err *e)
{
    *created = 0;
    *action = JOB_ACT_NONE;
    if (j->phase == JOB_DONE || j->phase == JOB_FAILED) return wrong_phase(e, j, "registering");
    if (r->rank >= j->world)
        return api_fail(e, 400, "bad_request", "rank: %d is not below the world size %d", r->rank,
                        j->world);
    if (r->dp >= j->spec.dp || r->pp >= j->spec.stages || r->tp >= j->spec.tp)
        return api_fail(e, 400, "bad_request",
                        "coordinates (dp %d, pp %d, tp %d) outside (%d, %d, %d)", r->dp, r->pp,
                        r->tp, j->spec.dp, j->spec.stages, j->spec.tp);
    job_rank *k = &j->ranks[r->rank];
    int s = slot_index(j, r->dp, r->pp, r->tp);
    if (k->registered) {
        if (k->dp == r->dp && k->pp == r->pp && k->tp == r->tp)
            return pipeline_restarted(j, st, k->dp, e);
        return api_fail(e, 409, "conflict", "rank %d is registered as (dp %d, pp %d, tp %d)",
                        r->rank, k->dp, k->pp, k->tp);
    }
    if (j->slot[s] >= 0)
        return api_fail(e, 409, "conflict", "(dp %d, pp %d, tp %d) is taken by rank %d", r->dp,
                        r->pp, r->tp, j->slot[s]);
    if (j->phase != JOB_REGISTERING && j->phase != JOB_PLANNING)
        return wrong_phase(e, j, "registering a new rank");
    if (store_insert_rank(st, j->id, r->rank, r->dp, r->pp, r->tp, r->gpu))
        return job_store_fail(e, st);
    *k = (job_rank){.registered = 1, .dp = r->dp, .pp = r->pp, .tp = r->tp};
    j->slot[s] = r->rank;
    j->nregistered++;
    *created = 1;
    if (j->nregistered == j->world && j->phase == JOB_REGISTERING)
        return enter_after_registration(j, st, e);
    return 0;
}

static int check_windows(const job *j, const job_rank *k, const req_results *r, api_err *e)
{
    int chunks = j->spec.stages *
                 (j->spec.schedule == PRS_SCHEDULE_INTERLEAVED ? j->spec.virtual_stages : 1);
    for (size_t i = 0; i < r->niterations; i++)
        for (size_t w = 0; w < r->iterations[i].nwindows; w++) {
            const req_window *win = &r->iterations[i].windows[w];
            if (win->chunk < 0 && chunks != j->spec.stages)
                return api_fail(e, 400, "bad_request",
                                "iterations[%zu].windows[%zu].chunk: required with model chunks", i,
                                w);
            if (win->chunk >= 0 && (win->chunk >= chunks || win->chunk % j->spec.stages != k->pp))
                return api_fail(e, 400, "bad_request",
                                "iterations[%zu].windows[%zu].chunk: %d is not a chunk of stage %d",
                                i, w, win->chunk, k->pp);
            if (win->microbatch >= j->spec.microbatches)
                return api_fail(e, 400, "bad_request",
                                "iterations[%zu].windows[%zu].microbatch: not below %d", i, w,
                                j->spec.microbatches);
        }
    return 0;
}

int job_results(job *j, store *st, const req_results *r, int *action, api_err *e)
{
    *action = JOB_ACT_NONE;
    if (j->phase != JOB_PROFILING && j->phase != JOB_PLANNING && j->phase != JOB_RUNNING)
        return wrong_phase(e, j, "posting results");
    if (r->rank >= j->world || !j->ranks[r->rank].registered)
        return api_fail(e, 404, "not_registered", "rank %d is not registered", r->rank);
    if (check_windows(j, &j->ranks[r->rank], r, e)) return -1;
    if (r->clock_failures > j->ranks[r->rank].clock_failures)
        j->ranks[r->rank].clock_failures = r->clock_failures;
    if (j->phase == JOB_PROFILING) return job_results_profiling(j, st, r, action, e);
    return job_results_running(j, st, r, e);
}

/* ---- profile upload, stragglers, completion ---- */

int job_upload_profile(job *j, store *st, const char *csv, size_t len, int *action, api_err *e)
{
    *action = JOB_ACT_NONE;
    if (j->phase != JOB_REGISTERING && j->phase != JOB_PROFILING)
        return wrong_phase(e, j, "uploading a profile");
    prs_profile *p = NULL;
    prs_error err = {0, ""};
    if (prs_profile_parse("profile", csv, len, &p, &err))
        return api_fail(e, 400, "bad_profile", "%s", err.msg);
    prs_pipeline pipe;
    spec_pipeline(&j->spec, &pipe);
    if (prs_profile_check_stages(p, prs_pipeline_chunks(&pipe), &err)) {
        prs_profile_free(p);
        return api_fail(e, 400, "bad_profile", "%s", err.msg);
    }
    char *text;
    size_t tlen;
    if (job_profile_csv(p, &text, &tlen)) {
        prs_profile_free(p);
        return api_fail(e, 500, "internal", "out of memory");
    }
    int rc = job_install_profile(j, st, p, text, tlen, action, e);
    free(text);
    return rc;
}

int job_install_profile(job *j, store *st, prs_profile *p, const char *csv, size_t len, int *action,
                        api_err *e)
{
    *action = JOB_ACT_NONE;
    if (j->phase != JOB_REGISTERING && j->phase != JOB_PROFILING) {
        prs_profile_free(p);
        return wrong_phase(e, j, "uploading a profile");
    }
    if (store_put_profile(st, j->id, "uploaded", csv, len)) {
        prs_profile_free(p);
        return job_store_fail(e, st);
    }
    prs_profile_free(j->profile);
    j->profile = p;
    prs_frontier_free(j->frontier); /* a reused frontier belongs to another profile */
    j->frontier = NULL;
    job_decoded_clear(j);
    snprintf(j->profile_source, sizeof j->profile_source, "uploaded");
    return job_enter_planning(j, st, action, e);
}

int job_set_straggler(job *j, store *st, const req_straggler *r, api_err *e)
{
    if (j->phase != JOB_RUNNING) return wrong_phase(e, j, "reporting a straggler");
    if (r->dp >= j->spec.dp)
        return api_fail(e, 400, "bad_request", "dp: %d is not below %d", r->dp, j->spec.dp);
    job_pipe *p = &j->pipes[r->dp];
    job_catch_up(j, p);
    job_mark_straggler(j, r->dp, STRAGGLER_EXPLICIT,
                       r->time_s > 0 ? r->time_s
                                     : r->slowdown * job_plan_time(j, (long)j->fastest));
    p->over = p->under = 0;
    job_log_straggler(j, r->dp, "reported");
    return job_rules_update(j, st, r->dp, e);
}

int job_clear_straggler(job *j, store *st, int dp, api_err *e)
{
    if (j->phase != JOB_RUNNING) return wrong_phase(e, j, "clearing a straggler");
    if (dp < 0 || dp >= j->spec.dp)
        return api_fail(e, 404, "not_found", "no data-parallel pipeline %d", dp);
    job_pipe *p = &j->pipes[dp];
    job_catch_up(j, p);
    job_mark_straggler(j, dp, STRAGGLER_NONE, 0);
    p->over = p->under = 0;
    job_log_straggler(j, dp, "cleared");
    return job_rules_update(j, st, dp, e);
}

int job_set_power_cap(job *j, store *st, double watts, api_err *e)
{
    if (j->phase == JOB_DONE || j->phase == JOB_FAILED)
        return wrong_phase(e, j, watts > 0 ? "setting a power cap" : "lifting a power cap");
    j->spec.power_cap_w = watts;
    char *text = spec_to_stored(&j->spec);
    if (!text) return api_fail(e, 500, "internal", "out of memory");
    int rc = store_set_job_spec(st, j->id, text);
    free(text);
    if (rc) return job_store_fail(e, st);
    return job_rules_update(j, st, -1, e);
}

int job_complete(job *j, store *st, api_err *e)
{
    if (j->phase == JOB_DONE || j->phase == JOB_FAILED) return wrong_phase(e, j, "completing");
    j->phase = JOB_DONE;
    return job_persist(j, st, e);
}

int job_plan_finished(job *j, store *st, prs_frontier *f, const void *plans, size_t plans_len,
                      double planning_s, const char *why, api_err *e)
{
    if (j->phase != JOB_PLANNING) { /* completed meanwhile: drop the result */
        prs_frontier_free(f);
        return 0;
    }
    j->planning_s = planning_s;
    if (!f) {
        job_set_failed(j, "planning failed: %s", why ? why : "unknown error");
        return job_persist(j, st, e);
    }
    if (store_put_frontier(st, j->id, j->config_key, plans, plans_len, planning_s)) {
        prs_frontier_free(f);
        return job_store_fail(e, st);
    }
    if (j->nregistered < j->world) { /* profile uploaded early: keep the frontier, wait */
        prs_frontier_free(j->frontier);
        j->frontier = f;
        job_decoded_clear(j);
        prs_frontier_lookup(f, 0, &j->fastest);
        compute_allmax(j);
        j->phase = JOB_REGISTERING;
        return job_persist(j, st, e);
    }
    return start_running(j, st, f, e);
}
