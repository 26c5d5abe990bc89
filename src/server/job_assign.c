/* Plan assignment of running jobs: announced switches, plan rules and their late application
 * (job_assign.h). */
#include "job_assign.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "perseus/server.h"

double job_plan_time(const job *j, long k)
{
    const prs_frontier_point *p =
        k >= 0 && j->frontier ? prs_frontier_point_at(j->frontier, (size_t)k) : NULL;
    return p ? p->eval_time_s : 0;
}

long job_plan_of(const job_pipe *p, long n)
{
    return n >= p->from_iteration || p->prev_plan_id < 0 ? p->plan_id : p->prev_plan_id;
}

/* ---- one pipeline: announced switches ---- */

/* Iterations between announcing plan `to` to pipeline p and running it (replacing `from`, -1:
 * none): at least 2, at least switch_lead_s at the shorter of the two plans' iteration times, and
 * at least switch_lead_s of wall-clock time at the pace the pipeline reports (pace.h). */
static long switch_lead(const job *j, const job_pipe *p, long from, long to)
{
    double t = job_plan_time(j, to), tf = from >= 0 ? job_plan_time(j, from) : 0;
    if (tf > 0 && (t <= 0 || tf < t)) t = tf;
    double n = t > 0 ? ceil(j->spec.switch_lead_s / t) : 2;
    long lead = n > 2 ? (n < 1e6 ? (long)n : 1000000) : 2;
    long wall = pace_iterations(&p->pace, j->spec.switch_lead_s);
    return wall > lead ? wall : lead;
}

/* Announce plan `want` for pipeline p: it holds from the pipeline's newest iteration plus the
 * lead; until then the pipeline runs its current plan. */
static void announce(const job *j, job_pipe *p, long want)
{
    p->from_iteration = p->newest + switch_lead(j, p, p->plan_id, want);
    p->prev_plan_id = p->plan_id;
    p->plan_id = want;
    p->want_plan = -1;
}

void job_reannounce(const job *j, job_pipe *p)
{
    p->from_iteration = p->newest + switch_lead(j, p, p->prev_plan_id, p->plan_id);
}

/* 1 when pipeline p announced a plan that not every rank runs yet. */
static int switch_pending(const job_pipe *p)
{
    return p->plan_id >= 0 && p->newest < p->from_iteration;
}

/* Give pipeline p plan want. With no switch pending it is announced from the newest iteration
 * plus the lead. While one is pending (some rank may already have it), the new plan replaces it
 * at the same iteration when that still leaves the lead; otherwise it waits until the pending
 * switch happened (job_apply_deferred). Either way no two ranks that follow the schedule run
 * different plans in one iteration. 1 when the announced plan changed. */
static int change_plan(const job *j, job_pipe *p, long want)
{
    if (p->plan_id == want) {
        p->want_plan = -1;
        return 0;
    }
    if (!switch_pending(p)) {
        announce(j, p, want);
        return 1;
    }
    if (p->from_iteration - p->newest >= switch_lead(j, p, p->prev_plan_id, want)) {
        p->plan_id = want;
        p->want_plan = -1;
        return 1;
    }
    p->want_plan = want;
    return 0;
}

/* ---- rules ---- */

/* The plan rule r gives a pipeline that is (straggler = 1) or is not a straggler: the fastest
 * plan for a straggler or when none straggles, the lookup's plan otherwise; the cap's plan when
 * that is slower. */
static long wanted_for(const job *j, int straggler, const job_rule *r)
{
    long want = straggler || r->tprime <= 0 ? (long)j->fastest : r->slow;
    return frontier_slower_plan(j->frontier, want, r->cap);
}

static long wanted(const job *j, const job_pipe *p, const job_rule *r)
{
    return wanted_for(j, p->straggler != STRAGGLER_NONE, r);
}

static const job_rule *current_rule(const job *j)
{
    return &j->rules[j->epoch % JOB_RULES];
}

/* Apply to p the rules after the last one it applied. 1 when it applied any. */
static int apply_rules(const job *j, job_pipe *p)
{
    if (p->epoch >= j->epoch) {
        p->epoch = j->epoch;
        return 0;
    }
    for (long e = p->epoch + 1; e <= j->epoch; e++)
        change_plan(j, p, wanted(j, p, &j->rules[e % JOB_RULES]));
    p->epoch = j->epoch;
    return 1;
}

void job_catch_up(const job *j, job_pipe *p)
{
    apply_rules(j, p);
}

void job_pipe_view(const job *j, int d, job_pipe *out)
{
    *out = j->pipes[d];
    apply_rules(j, out);
}

/* The rule the current stragglers (the slowest one's T') and power cap call for. */
static job_rule rule_now(job *j)
{
    job_rule r = {0, (long)j->fastest, -1};
    for (int i = 0; i < j->nstrag; i++) {
        double t = j->pipes[j->strag[i]].straggler_time_s;
        if (t > r.tprime) r.tprime = t;
    }
    size_t slow = j->fastest;
    if (r.tprime > 0 && prs_frontier_lookup(j->frontier, r.tprime, &slow) == 0) r.slow = (long)slow;
    if (j->spec.power_cap_w > 0) job_power_prepare(j);
    r.cap = job_cap_plan(j, NULL);
    return r;
}

void job_mark_straggler(job *j, int d, int kind, double time_s)
{
    job_pipe *p = &j->pipes[d];
    int was = p->straggler != STRAGGLER_NONE, is = kind != STRAGGLER_NONE;
    p->straggler = kind;
    p->straggler_time_s = is ? time_s : 0;
    if (is && !was) j->strag[j->nstrag++] = d;
    for (int i = 0; was && !is && i < j->nstrag; i++)
        if (j->strag[i] == d) {
            j->strag[i] = j->strag[--j->nstrag];
            break;
        }
}

/* ---- decoded plans ---- */

const int *job_plan_clocks(const job *j, long id)
{
    for (int i = 0; i < j->ndecoded; i++)
        if (j->decoded[i].id == id) return j->decoded[i].clocks;
    return NULL;
}

void job_decoded_clear(job *j)
{
    plan_powers_clear(&j->powers);
    for (int i = 0; i < j->ndecoded; i++)
        free(j->decoded[i].clocks);
    j->ndecoded = 0;
}

/* Decode frontier plan id unless it is already (or is no plan): 0, or -1 when out of memory. */
static int decode_plan(job *j, long id)
{
    if (id < 0 || !j->frontier || (size_t)id >= prs_frontier_size(j->frontier) ||
        job_plan_clocks(j, id))
        return 0;
    if (j->ndecoded == j->capdecoded) {
        int nc = j->capdecoded ? 2 * j->capdecoded : 4;
        job_decoded *nd = realloc(j->decoded, sizeof *nd * (size_t)nc);
        if (!nd) return -1;
        j->decoded = nd;
        j->capdecoded = nc;
    }
    size_t per = (size_t)j->spec.stages * (size_t)j->ops_per_stage;
    int *c = malloc(sizeof *c * per);
    if (!c || prs_frontier_plan(j->frontier, (size_t)id, c, NULL)) {
        free(c);
        return -1;
    }
    /* hull: the plan polished (prs_plan_polish: no slower, often cheaper; the fastest plan was
     * at planning time, a straggler's plan is here); kept as planned if that fails */
    if (j->profile && prs_frontier_cost_model(j->frontier) == PRS_COST_HULL)
        prs_plan_polish(j->profile, prs_frontier_pipeline(j->frontier), c, NULL, NULL, NULL);
    j->decoded[j->ndecoded++] = (job_decoded){id, c};
    return 0;
}

/* The plans rule r gives stragglers and the others. */
static int decode_rule(job *j, const job_rule *r)
{
    return decode_plan(j, wanted_for(j, 0, r)) || decode_plan(j, wanted_for(j, 1, r));
}

/* Drop the decoded plans that no pipeline runs or waits for and the current rule does not give
 * (every pipeline has applied every rule). */
static void decoded_gc(job *j)
{
    const job_rule *r = current_rule(j);
    long keep0 = wanted_for(j, 0, r), keep1 = wanted_for(j, 1, r);
    int keep = 0;
    for (int i = 0; i < j->ndecoded; i++) {
        long id = j->decoded[i].id;
        int used = id == keep0 || id == keep1;
        for (int d = 0; d < j->spec.dp && !used; d++)
            used = j->pipes[d].plan_id == id || j->pipes[d].want_plan == id;
        if (used)
            j->decoded[keep++] = j->decoded[i];
        else
            free(j->decoded[i].clocks);
    }
    j->ndecoded = keep;
}

/* Every pipeline applies every rule and is stored; the rules before the current one go. */
static int sweep(job *j, store *st, api_err *e)
{
    for (int d = 0; d < j->spec.dp; d++)
        if (apply_rules(j, &j->pipes[d]) && job_put_pipe(j, st, d, e)) return -1;
    j->swept = j->epoch;
    decoded_gc(j);
    if (store_delete_rules(st, j->id, j->swept - 1)) return job_store_fail(e, st);
    return 0;
}

/* Store rule e of the ring. */
static int put_rule(job *j, store *st, long e, api_err *e_out)
{
    const job_rule *r = &j->rules[e % JOB_RULES];
    store_rule_row row = {e, r->tprime, r->slow, r->cap};
    return store_put_rule(st, j->id, &row) ? job_store_fail(e_out, st) : 0;
}

int job_assign_all(job *j, store *st, api_err *e)
{
    j->epoch = j->swept = 0;
    j->rules[0] = rule_now(j);
    if (decode_rule(j, &j->rules[0]))
        return api_fail(e, 500, "internal", "out of memory decoding plans");
    if (store_delete_rules(st, j->id, LONG_MAX)) return job_store_fail(e, st);
    if (put_rule(j, st, 0, e)) return -1;
    for (int d = 0; d < j->spec.dp; d++) {
        job_pipe *p = &j->pipes[d];
        p->plan_id = p->prev_plan_id = p->want_plan = -1;
        p->from_iteration = 0;
        p->epoch = -1;
        apply_rules(j, p);
        if (job_put_pipe(j, st, d, e)) return -1;
    }
    decoded_gc(j);
    const job_rule *r = current_rule(j);
    job_logf(j, PRS_LOG_INFO,
             "msg=plan_switch job=%s pipelines=%d plan=%ld epoch=0 straggler_time_s=%.6g "
             "cap_plan=%ld fastest=%ld",
             j->id, j->spec.dp, wanted_for(j, 0, r), r->tprime, r->cap, (long)j->fastest);
    return 0;
}

/* Pipeline d applies the current rule again: its own straggler state changed. A change of its
 * announced plan bumps the round, as any plan change does. */
static int reassign(job *j, store *st, int d, int bumped, api_err *e)
{
    job_pipe *p = &j->pipes[d];
    apply_rules(j, p);
    if (change_plan(j, p, wanted(j, p, current_rule(j))) && !bumped) {
        j->round++;
        if (job_persist(j, st, e)) return -1;
    }
    return job_put_pipe(j, st, d, e);
}

int job_rules_update(job *j, store *st, int d, api_err *e)
{
    if (j->phase != JOB_RUNNING || !j->frontier) return 0;
    job_rule r = rule_now(j);
    const job_rule *cur = current_rule(j);
    long others = wanted_for(j, 0, &r), strag = wanted_for(j, 1, &r);
    int others_move = others != wanted_for(j, 0, cur), strag_move = strag != wanted_for(j, 1, cur);
    int moved = (others_move ? j->spec.dp - j->nstrag : 0) + (strag_move ? j->nstrag : 0);
    int bumped = others_move || strag_move;
    if (bumped) {
        if (decode_rule(j, &r)) return api_fail(e, 500, "internal", "out of memory decoding plans");
        if (j->epoch - j->swept >= JOB_RULES - 1 && sweep(j, st, e)) return -1;
        j->epoch++;
        j->rules[j->epoch % JOB_RULES] = r;
        if (put_rule(j, st, j->epoch, e)) return -1;
        /* One line however many pipelines: they switch as each next reports. */
        job_logf(j, PRS_LOG_INFO,
                 "msg=plan_switch job=%s pipelines=%d plan=%ld epoch=%ld straggler_time_s=%.6g "
                 "cap_plan=%ld fastest=%ld",
                 j->id, moved, others, j->epoch, r.tprime, r.cap, (long)j->fastest);
        j->round++;
        if (job_persist(j, st, e)) return -1;
    }
    return d >= 0 ? reassign(j, st, d, bumped, e) : 0;
}

int job_apply_deferred(job *j, store *st, int d, api_err *e)
{
    job_pipe *p = &j->pipes[d];
    if (p->want_plan < 0 || switch_pending(p)) return 0;
    announce(j, p, p->want_plan);
    job_logf(j, PRS_LOG_INFO,
             "msg=plan_switch job=%s pipelines=1 dp=%d plan=%ld from_iteration=%ld held_back=1",
             j->id, d, p->plan_id, p->from_iteration);
    if (job_put_pipe(j, st, d, e)) return -1;
    j->round++;
    return job_persist(j, st, e);
}

int job_assign_loaded(job *j)
{
    if (j->epoch < 0) { /* no rule stored (a database from before rules): the rule of now */
        j->epoch = 0;
        j->rules[0] = rule_now(j);
    }
    j->nstrag = 0;
    long oldest = j->epoch;
    for (int d = 0; d < j->spec.dp; d++) {
        job_pipe *p = &j->pipes[d];
        if (p->straggler != STRAGGLER_NONE) j->strag[j->nstrag++] = d;
        if (p->epoch > j->epoch) p->epoch = j->epoch;
        if (p->epoch < oldest) oldest = p->epoch;
    }
    /* Rules older than the ring holds are lost: such a pipeline starts from the oldest kept. */
    if (oldest < j->epoch - (JOB_RULES - 1)) oldest = j->epoch - (JOB_RULES - 1);
    j->swept = oldest < 0 ? 0 : oldest;
    for (int d = 0; d < j->spec.dp; d++) {
        job_pipe *p = &j->pipes[d];
        if (p->epoch < j->swept) p->epoch = j->swept;
        if (decode_plan(j, p->plan_id)) return -1;
        /* A caught-up pipeline whose plan is not its rule's had its change held back behind a
         * pending switch: take it up again. */
        long want = wanted(j, p, current_rule(j));
        if (p->epoch == j->epoch && want != p->plan_id) p->want_plan = want;
        if (decode_plan(j, p->want_plan)) return -1;
    }
    for (long e = j->swept; e <= j->epoch; e++)
        if (decode_rule(j, &j->rules[e % JOB_RULES])) return -1;
    return 0;
}

json_t *job_rule_json(const job *j)
{
    if (!j->frontier || j->phase != JOB_RUNNING) return json_null();
    const job_rule *r = current_rule(j);
    json_t *strag = json_array();
    for (int i = 0; i < j->nstrag; i++)
        json_array_append_new(strag, json_integer(j->strag[i]));
    return json_pack("{s:I, s:o, s:I, s:I, s:o, s:o}", "epoch", (json_int_t)j->epoch,
                     "straggler_time_s", r->tprime > 0 ? json_real(r->tprime) : json_null(),
                     "plan_id", (json_int_t)wanted_for(j, 0, r), "straggler_plan_id",
                     (json_int_t)wanted_for(j, 1, r), "cap_plan_id",
                     r->cap >= 0 ? json_integer(r->cap) : json_null(), "stragglers", strag);
}
