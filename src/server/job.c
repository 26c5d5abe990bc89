/* The job state machine (job.h).
 *
 * Profiling protocol. Round r sweeps clock sweep[r] (highest first). Every rank runs all its
 * computations at that clock and posts its iterations tagged with the round; the first
 * warmup_iterations of each rank in a round are stored but not used, the next
 * iterations_per_clock are. When every rank has posted warm-up + k iterations the round ends and
 * the next clock starts. With skip_dominated, a round whose clock turned out slower AND costlier
 * than the clock above it for every (stage, instruction) ends the sweep: on a U-shaped energy
 * curve every lower clock is dominated too. Windows are aggregated by the clock the client says
 * it actually applied, so a clock the GPU refused shows up under the clock it ran at.
 *
 * Straggler detection. A pipeline's reported iteration time is first scaled to what it would be
 * on the fastest plan (time * T_fastest / T_its_plan), so a pipeline slowed down on purpose is not
 * mistaken for a straggler; it is a straggler when that exceeds factor times the median of the
 * other pipelines' latest scaled times for k consecutive iterations, and clears after k
 * consecutive iterations below. With straggler time T' (the slowest straggler's), every other
 * pipeline runs plan prs_frontier_lookup(T'); stragglers and everyone with no straggler run the
 * fastest plan. */
#include "job.h"
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

void job_config_key(const req_job_spec *s, char key[2 * SECURE_SHA256_LEN + 1])
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

static job *job_alloc(const req_job_spec *spec)
{
    job *j = calloc(1, sizeof *j);
    if (!j) return NULL;
    j->spec = *spec;
    j->world = spec->dp * spec->stages * spec->tp;
    j->ops_per_stage = req_spec_ops_per_stage(spec);
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

static void set_failed(job *j, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void set_failed(job *j, const char *fmt, ...)
{
    j->phase = JOB_FAILED;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(j->reason, sizeof j->reason, fmt, ap);
    va_end(ap);
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

static const char *straggler_name(int kind)
{
    static const char *const names[] = {"none", "explicit", "automatic"};
    return names[kind >= 0 && kind <= 2 ? kind : 0];
}

/* A pipeline's straggler state changed (why: "detected", "reported", "cleared", "recovered"). */
static void log_straggler(const job *j, int d, const char *why)
{
    const job_pipe *p = &j->pipes[d];
    job_logf(j, PRS_LOG_INFO, "msg=straggler job=%s dp=%d state=%s why=%s time_s=%.6g", j->id, d,
             straggler_name(p->straggler), why, p->straggler_time_s);
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
        set_failed(j, "the planner produced an empty frontier");
        return job_persist(j, st, e);
    }
    compute_allmax(j);
    j->phase = JOB_RUNNING;
    j->round = 0;
    if (job_assign_all(j, st, e)) return -1;
    return job_persist(j, st, e);
}

/* ---- create / load ---- */

static int profile_to_csv(const prs_profile *p, char **csv, size_t *len)
{
    *csv = NULL;
    *len = 0;
    FILE *f = open_memstream(csv, len);
    if (!f) return -1;
    int rc = prs_profile_write_csv(p, f);
    if (fclose(f) != 0 || rc != 0) {
        free(*csv);
        *csv = NULL;
        return -1;
    }
    return 0;
}

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
    req_spec_pipeline(&j->spec, &pipe);
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
    req_spec_pipeline(&j->spec, &pipe);
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

int job_create(store *st, const req_job_spec *spec, const char *id, const uint8_t *token_hash,
               long long now_unix, job **out, api_err *e)
{
    *out = NULL;
    job *j = job_alloc(spec);
    if (!j) return api_fail(e, 500, "internal", "out of memory");
    snprintf(j->id, sizeof j->id, "%s", id);
    memcpy(j->token_hash, token_hash, SECURE_SHA256_LEN);
    j->created_unix = now_unix;
    json_t *sj = req_job_spec_json(spec);
    char *text = sj ? json_dumps(sj, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    json_decref(sj);
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
    j->ranks[rank] = (job_rank){1, dp, pp, tp, 0};
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

/* Whether a round that kept `kept` iterations per rank at precision se_pct asks for k more: the
 * spec's target is not reached and k more stay within max_iterations_per_clock. */
static int wants_more(const job *j, double se_pct, int kept)
{
    return j->spec.target_se_pct > 0 && !(se_pct <= j->spec.target_se_pct) &&
           kept + j->spec.iterations_per_clock <= j->spec.max_iterations_per_clock;
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
    j->round_extra = kept - k + (wants_more(j, j->clock_se_pct[j->sweep_index], kept) ? k : 0);
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

/* Iterations each rank runs in the current profiling round: warm-up, k, and what was added for
 * precision (extend_round). */
static int round_need(const job *j)
{
    return j->spec.warmup_iterations + j->spec.iterations_per_clock + j->round_extra;
}

static void count_done_ranks(job *j)
{
    int need = round_need(j);
    j->ranks_done = 0;
    for (int r = 0; r < j->world; r++)
        if (j->round_iters[r] >= need) j->ranks_done++;
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
    count_done_ranks(j);
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
            set_failed(j, "out of memory decoding its plans");
    }
    if (j->phase == JOB_PLANNING) {
        if (!j->profile)
            set_failed(j, "planning without a profile");
        else if (!j->spec.has_blocking_power && !(j->bp_used_w > 0))
            set_failed(j, "planning without a blocking power");
        else
            *action = JOB_ACT_PLAN;
    }
    if (j->phase == JOB_RUNNING && !j->frontier) set_failed(j, "running without a frontier");
    if (j->epoch < 0) j->epoch = 0;
}

int job_load(store *st, const store_job_row *row, job **out, int *action, prs_error *err)
{
    *out = NULL;
    *action = JOB_ACT_NONE;
    req_job_spec spec;
    int rc = req_parse_job_spec(row->spec_json, strlen(row->spec_json), &spec, err);
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
    *k = (job_rank){1, r->dp, r->pp, r->tp, 0};
    j->slot[s] = r->rank;
    j->nregistered++;
    *created = 1;
    if (j->nregistered == j->world && j->phase == JOB_REGISTERING)
        return enter_after_registration(j, st, e);
    return 0;
}

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
static void sb_geometry(sbuf *b, const req_job_spec *s)
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
                  j->spec.warmup_iterations, round_need(j), j->round_iters[rank]);
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

/* ---- profiling ---- */

typedef struct means_ctx {
    const job *j;
    prs_profile *p;
    int bad;
    prs_error err; /* why a row was refused, when bad */
} means_ctx;

static int add_mean(void *ud, int stage, int instr, int clock, double t, double en, long n)
{
    means_ctx *c = ud;
    prs_profile_row row = {stage, instr ? PRS_BACKWARD : PRS_FORWARD, clock, t, en, 0};
    int rc = prs_profile_add(c->p, &row, &c->err);
    if (rc) c->bad = 1;
    return rc;
}

/* Mean time/energy per (stage, instr) at one clock, from the used windows. */
typedef struct clock_means {
    int clock;
    int chunks;
    double *t, *e; /* chunks * 2, NAN when absent */
} clock_means;

static int collect_clock(void *ud, int stage, int instr, int clock, double t, double en, long n)
{
    clock_means *m = ud;
    if (clock == m->clock && stage >= 0 && stage < m->chunks) {
        m->t[stage * 2 + instr] = t;
        m->e[stage * 2 + instr] = en;
    }
    return 0;
}

/* 1 when clock lo is dominated by clock hi for every (chunk, instruction): no faster and no
 * cheaper. */
static int clock_dominated(job *j, store *st, int hi, int lo)
{
    prs_pipeline pipe;
    req_spec_pipeline(&j->spec, &pipe);
    int chunks = prs_pipeline_chunks(&pipe);
    double *buf = malloc(sizeof(double) * (size_t)chunks * 8);
    if (!buf) return 0;
    for (int i = 0; i < chunks * 8; i++)
        buf[i] = NAN;
    clock_means a = {hi, chunks, buf, buf + (ptrdiff_t)2 * chunks};
    clock_means b = {lo, chunks, buf + (ptrdiff_t)4 * chunks, buf + (ptrdiff_t)6 * chunks};
    int dom = store_profile_means(st, j->id, collect_clock, &a) == 0 &&
              store_profile_means(st, j->id, collect_clock, &b) == 0;
    for (int i = 0; dom && i < chunks * 2; i++)
        if (!(isfinite(a.e[i]) && isfinite(b.e[i]) && b.e[i] >= a.e[i] && b.t[i] >= a.t[i]))
            dom = 0;
    free(buf);
    return dom;
}

/* Blocking-power estimates of the used profiling iterations, ascending. */
typedef struct bp_list {
    double *v;
    size_t n, cap;
    int bad;
} bp_list;

static int add_bp(void *ud, double watts)
{
    bp_list *l = ud;
    if (l->n == l->cap) {
        size_t nc = l->cap ? 2 * l->cap : 64;
        double *nv = realloc(l->v, sizeof *nv * nc);
        if (!nv) {
            l->bad = 1;
            return PRS_ENOMEM;
        }
        l->v = nv;
        l->cap = nc;
    }
    l->v[l->n++] = watts;
    return 0;
}

/* The measured blocking power: the median of the used profiling iterations' estimates (0 when
 * none); the job plans with it unless the spec pins one. */
static int measure_blocking_power(job *j, store *st, api_err *e)
{
    bp_list l = {NULL, 0, 0, 0};
    if (store_blocking_powers(st, j->id, add_bp, &l)) {
        free(l.v);
        return l.bad ? api_fail(e, 500, "internal", "out of memory") : job_store_fail(e, st);
    }
    size_t h = l.n / 2;
    j->bp_measured_w = l.n == 0 ? 0 : l.n % 2 ? l.v[h] : 0.5 * (l.v[h - 1] + l.v[h]);
    free(l.v);
    if (!j->spec.has_blocking_power) j->bp_used_w = j->bp_measured_w;
    return 0;
}

/* The job has its profile: measure the blocking power and plan, or fail when there is no
 * blocking power to plan with. */
static int enter_planning(job *j, store *st, int *action, api_err *e)
{
    if (measure_blocking_power(j, st, e)) return -1;
    if (!j->spec.has_blocking_power && !(j->bp_used_w > 0)) {
        set_failed(j, "no blocking power to plan with: the spec gives no blocking_power_w and no "
                      "rank reported blocking_power_w in a used profiling iteration");
        return job_persist(j, st, e);
    }
    j->phase = JOB_PLANNING;
    j->plan_done = j->plan_total = 0;
    *action = JOB_ACT_PLAN;
    return job_persist(j, st, e);
}

static int finish_profiling(job *j, store *st, int *action, api_err *e)
{
    means_ctx c = {j, prs_profile_new(), 0, {0, ""}};
    if (!c.p) return api_fail(e, 500, "internal", "out of memory");
    if (store_profile_means(st, j->id, add_mean, &c) && !c.bad) {
        prs_profile_free(c.p);
        return job_store_fail(e, st);
    }
    prs_pipeline pipe;
    req_spec_pipeline(&j->spec, &pipe);
    prs_error err = {0, ""};
    if (c.bad || prs_profile_nrows(c.p) == 0 ||
        prs_profile_check_stages(c.p, prs_pipeline_chunks(&pipe), &err)) {
        set_failed(j, "profile incomplete: %.*s", c.bad ? 200 : (int)sizeof err.msg,
                   c.bad                    ? c.err.msg
                   : prs_profile_nrows(c.p) ? err.msg
                                            : "no windows were reported");
        prs_profile_free(c.p);
        return job_persist(j, st, e);
    }
    char *csv;
    size_t len;
    if (profile_to_csv(c.p, &csv, &len)) {
        prs_profile_free(c.p);
        return api_fail(e, 500, "internal", "out of memory");
    }
    int rc = store_put_profile(st, j->id, "measured", csv, len);
    free(csv);
    if (rc) {
        prs_profile_free(c.p);
        return job_store_fail(e, st);
    }
    prs_profile_free(j->profile);
    j->profile = c.p;
    snprintf(j->profile_source, sizeof j->profile_source, "measured");
    return enter_planning(j, st, action, e);
}

static int advance_round(job *j, store *st, int *action, api_err *e)
{
    int stop = j->sweep_index + 1 >= j->nsweep;
    if (!stop && j->spec.skip_dominated && j->sweep_index > 0 &&
        clock_dominated(j, st, j->sweep[j->sweep_index - 1], j->sweep[j->sweep_index]))
        stop = 1;
    if (stop) return finish_profiling(j, st, action, e);
    j->sweep_index++;
    j->round = j->sweep_index;
    j->round_extra = 0;
    memset(j->round_iters, 0, sizeof *j->round_iters * (size_t)j->world);
    memset(j->late_iters, 0, sizeof *j->late_iters * (size_t)j->world);
    j->ranks_done = 0;
    return job_persist(j, st, e);
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

/* A profiling iteration: one measurement row, with its windows. */
static int store_iteration(job *j, store *st, int rank, const req_iteration *it, long round,
                           int used, api_err *e)
{
    const job_rank *k = &j->ranks[rank];
    long long mid;
    store_meas_row m = {rank,          "profiling",          round,        it->iteration,
                        it->clock_mhz, it->time_s,           it->energy_j, it->pace_s,
                        it->plan_id,   it->blocking_power_w, used};
    if (store_insert_measurement(st, j->id, &m, &mid)) return job_store_fail(e, st);
    for (size_t w = 0; w < it->nwindows; w++) {
        const req_window *win = &it->windows[w];
        int stage = win->chunk >= 0 ? win->chunk : k->pp;
        if (store_insert_window(st, j->id, mid, stage, win->instr, win->microbatch, win->clock_mhz,
                                win->time_s, win->energy_j, used))
            return job_store_fail(e, st);
    }
    j->measurements++;
    job_pipe *p = &j->pipes[k->dp];
    if (it->iteration > p->newest) p->newest = it->iteration;
    pace_note(&p->pace, it->wall_s);
    return 0;
}

/* An iteration posted after profiling (planning, running): no row of its own; counted in its
 * pipeline's aggregates, which the caller stores with the pipeline (one row write per post,
 * however many iterations and ranks). Windows are dropped. */
static void fold_iteration(job *j, int rank, const req_iteration *it)
{
    job_pipe *p = &j->pipes[j->ranks[rank].dp];
    p->reports++;
    p->report_time_s += it->time_s;
    p->report_energy_j += it->energy_j;
    j->measurements++;
    if (it->iteration > p->newest) p->newest = it->iteration;
    pace_note(&p->pace, it->wall_s);
}

/* k-th smallest of v[0..n) (v is reordered): Hoare's selection, expected O(n). */
static double select_kth(double *v, int n, int k)
{
    int lo = 0, hi = n - 1;
    while (lo < hi) {
        double pivot = v[lo + (hi - lo) / 2];
        int i = lo, j = hi;
        while (i <= j) {
            while (v[i] < pivot)
                i++;
            while (v[j] > pivot)
                j--;
            if (i <= j) {
                double t = v[i];
                v[i++] = v[j];
                v[j--] = t;
            }
        }
        if (k <= j)
            hi = j;
        else if (k >= i)
            lo = i;
        else
            return v[k];
    }
    return v[k];
}

/* Median of v[0..n), n > 0 (v is reordered). Linear: detection runs for every pipeline's
 * iteration, over all the other pipelines. */
static double median(double *v, int n)
{
    double hi = select_kth(v, n, n / 2);
    if (n % 2) return hi;
    double lo = v[0];
    for (int i = 1; i < n / 2; i++) /* after selection, v[0..n/2) holds the smaller half */
        if (v[i] > lo) lo = v[i];
    return 0.5 * (lo + hi);
}

/* Pipelines up to which the detector compares with the exact median of the others. */
#define JOB_MEDIAN_EXACT 64

/* The median of the latest scaled paces of the pipelines other than d (0: none yet). Up to
 * JOB_MEDIAN_EXACT pipelines exactly, at O(dp) per evaluation. Above, that would make every
 * training iteration cost O(dp^2) over the job: the median of all pipelines' paces is kept
 * instead and recomputed once dp / 16 evaluations happened since, O(1) per evaluation on
 * average. Leaving out one pipeline, or paces at most dp / 16 evaluations old, moves the median
 * of so many pipelines by a few ranks at most. */
static double others_median(job *j, int d)
{
    int n = 0, all = j->spec.dp > JOB_MEDIAN_EXACT;
    if (all && j->median_s > 0 && j->median_stale++ < j->spec.dp / 16) return j->median_s;
    for (int o = 0; o < j->spec.dp; o++)
        if ((all || o != d) && j->pipes[o].last_norm_s > 0)
            j->scratch[n++] = j->pipes[o].last_norm_s;
    double m = n ? median(j->scratch, n) : 0;
    if (all) {
        j->median_s = m;
        j->median_stale = 0;
    }
    return m;
}

/* Compare pipeline d's newest scaled pace with the median of the other pipelines' and count
 * consecutive iterations above / below the threshold. pace_s: unscaled (T' when it becomes a
 * straggler). Returns 1 when its straggler state changed. */
static int judge(job *j, int d, double pace_s)
{
    job_pipe *p = &j->pipes[d];
    double m = others_median(j, d);
    if (!(m > 0)) return 0;
    int k = j->spec.straggler_iterations;
    if (p->last_norm_s > j->spec.straggler_factor * m) {
        p->over++;
        p->under = 0;
        if (p->over >= k && p->straggler == STRAGGLER_NONE) {
            job_mark_straggler(j, d, STRAGGLER_AUTO, pace_s);
            log_straggler(j, d, "detected");
            return 1;
        }
    } else {
        p->under++;
        p->over = 0;
        if (p->under >= k && p->straggler == STRAGGLER_AUTO) {
            job_mark_straggler(j, d, STRAGGLER_NONE, 0);
            log_straggler(j, d, "recovered");
            return 1;
        }
    }
    return 0;
}

/* Evaluate pipeline d's oldest pending iteration: its pace is the slowest reported pace (the
 * slowest reported time when no rank sent one), scaled to the fastest plan by the plan the
 * iteration ran. Returns 1 when the pipeline's straggler state changed. */
static int evaluate_oldest(job *j, int d)
{
    job_pipe *p = &j->pipes[d];
    job_pending it = p->pend[0];
    memmove(p->pend, p->pend + 1, sizeof *p->pend * (size_t)--p->npend);
    p->last_iteration = it.iteration;
    p->iterations++;
    long ran = it.plan_id >= 0 && (size_t)it.plan_id < prs_frontier_size(j->frontier)
                   ? it.plan_id
                   : job_plan_of(p, it.iteration);
    const prs_frontier_point *pt = ran >= 0 ? prs_frontier_point_at(j->frontier, (size_t)ran) : 0;
    j->run_iterations++;
    if (pt) j->run_energy_j += pt->eval_energy_j;
    if (pt && j->allmax_energy_j > 0) j->run_saved_j += j->allmax_energy_j - pt->eval_energy_j;
    j->last_iteration_s = it.time_s;
    double tp = pt ? pt->eval_time_s : 0, tf = job_plan_time(j, (long)j->fastest);
    double pace = it.pace_s > 0 ? it.pace_s : it.time_s;
    p->last_norm_s = tp > 0 ? pace * tf / tp : pace;
    return j->spec.dp < 2 ? 0 : judge(j, d, pace);
}

/* The pending entry of iteration n of pipeline d, added in order; when the ring is full the
 * oldest is evaluated first (NULL when that was n's successor: n comes too late). */
static job_pending *pending_slot(job *j, int d, long n, int *changed)
{
    job_pipe *p = &j->pipes[d];
    int at = 0;
    while (at < p->npend && p->pend[at].iteration < n)
        at++;
    if (at < p->npend && p->pend[at].iteration == n) return &p->pend[at];
    if (p->npend == JOB_PENDING) {
        *changed |= evaluate_oldest(j, d);
        if (at-- == 0) return NULL;
    }
    memmove(p->pend + at + 1, p->pend + at, sizeof *p->pend * (size_t)(p->npend - at));
    p->npend++;
    p->pend[at] = (job_pending){n, 0, -1, 0, 0};
    return &p->pend[at];
}

/* Automatic straggler detection on one reported iteration of pipeline d. Iteration n of a
 * pipeline is evaluated once all its ranks (stages x tp) reported it, or once any rank reported
 * n + JOB_PACE_LAG; a report for an evaluated iteration comes too late and is ignored. At most a
 * few iterations per pipeline are pending, so a report costs O(1) besides the median over the
 * pipelines when one is evaluated. Returns 1 when a straggler state changed. */
static int detect(job *j, int d, const req_iteration *r)
{
    job_pipe *p = &j->pipes[d];
    if (r->iteration <= p->last_iteration) return 0;
    int changed = 0;
    while (p->npend > 0 && p->pend[0].iteration <= r->iteration - JOB_PACE_LAG)
        changed |= evaluate_oldest(j, d);
    job_pending *it = pending_slot(j, d, r->iteration, &changed);
    if (!it) return changed;
    it->reports++;
    if (r->pace_s > it->pace_s) it->pace_s = r->pace_s;
    if (r->time_s > it->time_s) it->time_s = r->time_s;
    if (r->plan_id >= 0) it->plan_id = r->plan_id;
    if (it->reports < j->spec.stages * j->spec.tp) return changed;
    while (p->npend > 0 && p->pend[0].iteration <= r->iteration)
        changed |= evaluate_oldest(j, d);
    return changed;
}

/* Every rank has run the round's iterations: record the precision reached at its clock (the
 * largest relative standard error of a type's mean time or energy) and, while that is above the
 * spec's target and k more iterations stay within max_iterations_per_clock, ask for k more
 * (*more = 1). */
static int extend_round(job *j, store *st, int *more, api_err *e)
{
    double se = 0;
    int k = j->spec.iterations_per_clock, kept = k + j->round_extra;
    if (store_clock_spread(st, j->id, j->sweep[j->sweep_index], &se)) return job_store_fail(e, st);
    j->clock_se_pct[j->sweep_index] = 100.0 * se;
    j->clock_iters[j->sweep_index] = kept;
    /* Stored, so that a restart resumes the round with the iterations it asked for. */
    if (store_put_precision(st, j->id, j->sweep_index, isfinite(se) ? 100.0 * se : -1, kept))
        return job_store_fail(e, st);
    *more = wants_more(j, j->clock_se_pct[j->sweep_index], kept);
    if (*more) {
        j->round_extra += k;
        count_done_ranks(j);
    }
    return 0;
}

/* Results in profiling: count the rank's iterations of the round; the round ends when every
 * rank has warm-up + k. What a rank may make the store hold is bounded: iterations of the
 * current round past what it asks (warm-up + k, with any extension) are acknowledged but not
 * stored, and so are late iterations of earlier rounds past as many during one round. */
static int results_profiling(job *j, store *st, const req_results *r, int *action, api_err *e)
{
    long round = r->round < 0 ? j->round : r->round;
    if (round > j->round)
        return api_fail(e, 409, "wrong_round", "round %ld has not started (current %ld)", round,
                        j->round);
    int need = round_need(j);
    for (size_t i = 0; i < r->niterations; i++) {
        int used = 1;
        if (round == j->round) {
            int idx = j->round_iters[r->rank];
            if (idx >= need) continue; /* the round has all it asks of this rank */
            j->round_iters[r->rank]++;
            used = idx >= j->spec.warmup_iterations;
            if (idx + 1 == need) j->ranks_done++;
        } else if (j->late_iters[r->rank] >= need) {
            continue;
        } else {
            j->late_iters[r->rank]++;
        }
        /* A late iteration of an earlier round: that rank was past warm-up there. */
        if (store_iteration(j, st, r->rank, &r->iterations[i], round, used, e)) return -1;
    }
    if (j->ranks_done < j->world) return 0;
    int more = 0;
    if (extend_round(j, st, &more, e)) return -1;
    return more ? 0 : advance_round(j, st, action, e);
}

/* Results in planning and running: folded into the rank's pipeline, whose row is stored once
 * for the post; while running they feed the straggler detector and may let a deferred plan
 * change go out. */
static int results_other(job *j, store *st, const req_results *r, api_err *e)
{
    int d = j->ranks[r->rank].dp, changed = 0;
    /* The plan rules the pipeline has not applied come first: they were made before these
     * iterations arrived (job_assign.h). */
    job_catch_up(j, &j->pipes[d]);
    for (size_t i = 0; i < r->niterations; i++) {
        fold_iteration(j, r->rank, &r->iterations[i]);
        if (j->phase == JOB_RUNNING) changed |= detect(j, d, &r->iterations[i]);
    }
    if (j->phase == JOB_RUNNING) {
        if (changed && job_rules_update(j, st, d, e)) return -1;
        if (job_apply_deferred(j, st, d, e)) return -1;
    }
    /* Stored with every post, one row: the folded results, the newest iteration, the pace and
     * the last plan rule applied, so that after a restart the pipeline applies later rules
     * exactly as it would have. */
    return job_put_pipe(j, st, d, e);
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
    if (j->phase == JOB_PROFILING) return results_profiling(j, st, r, action, e);
    return results_other(j, st, r, e);
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
    req_spec_pipeline(&j->spec, &pipe);
    if (prs_profile_check_stages(p, prs_pipeline_chunks(&pipe), &err)) {
        prs_profile_free(p);
        return api_fail(e, 400, "bad_profile", "%s", err.msg);
    }
    char *text;
    size_t tlen;
    if (profile_to_csv(p, &text, &tlen)) {
        prs_profile_free(p);
        return api_fail(e, 500, "internal", "out of memory");
    }
    int rc = job_install_profile(j, st, p, text, tlen, action, e);
    free(text);
    return rc;
}

int job_profile_csv(const prs_profile *p, char **csv, size_t *len)
{
    return profile_to_csv(p, csv, len);
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
    return enter_planning(j, st, action, e);
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
    log_straggler(j, r->dp, "reported");
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
    log_straggler(j, dp, "cleared");
    return job_rules_update(j, st, dp, e);
}

int job_set_power_cap(job *j, store *st, double watts, api_err *e)
{
    if (j->phase == JOB_DONE || j->phase == JOB_FAILED)
        return wrong_phase(e, j, watts > 0 ? "setting a power cap" : "lifting a power cap");
    j->spec.power_cap_w = watts;
    json_t *sj = req_job_spec_json(&j->spec);
    char *text = sj ? json_dumps(sj, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    json_decref(sj);
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
        set_failed(j, "planning failed: %s", why ? why : "unknown error");
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
    json_t *spec = req_job_spec_json(&j->spec);
    json_object_del(spec, "reuse_key_sha256"); /* a secret's hash: never shown */
    json_object_set_new(spec, "reuse_key_set", json_boolean(j->spec.reuse_key_sha256[0]));
    json_object_set_new(o, "spec", spec);
    json_object_set_new(o, "ranks", ranks_json(j));
    json_object_set_new(o, "measurements", json_integer(j->measurements));
    json_t *prof = json_pack("{s:i, s:I, s:i}", "clocks_total", j->nsweep, "clocks_done",
                             (json_int_t)(j->phase == JOB_PROFILING ? j->sweep_index : 0),
                             "ranks_done", j->phase == JOB_PROFILING ? j->ranks_done : 0);
    if (j->phase == JOB_PROFILING)
        json_object_set_new(prof, "clock_mhz", json_integer(j->sweep[j->sweep_index]));
    json_object_set_new(prof, "clocks", precision_json(j));
    json_object_set_new(o, "profiling", prof);
    double frac = j->plan_total > 0 ? (double)j->plan_done / (double)j->plan_total : 0;
    if (frac > 1) frac = 1;
    /* While planning: the time since the planner thread started (0 while it waits for one). */
    double started_s = 0, elapsed_s = j->planning_s;
    __atomic_load(&j->plan_started_s, &started_s, __ATOMIC_RELAXED);
    if (j->phase == JOB_PLANNING) elapsed_s = started_s > 0 ? prs_mono_s() - started_s : 0;
    if (j->frontier && j->phase != JOB_PLANNING) frac = 1;
    json_object_set_new(o, "planning",
                        json_pack("{s:I, s:I, s:f, s:f}", "done", (json_int_t)j->plan_done, "total",
                                  (json_int_t)j->plan_total, "done_pct", 100 * frac, "elapsed_s",
                                  elapsed_s));
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
                straggler_name(p->straggler), "iterations", (json_int_t)p->iterations);
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
