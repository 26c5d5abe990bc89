/* Results of planning and running jobs, and automatic straggler detection (job_int.h).
 *
 * Straggler detection. A pipeline's reported iteration time is first scaled to what it would be
 * on the fastest plan (time * T_fastest / T_its_plan), so a pipeline slowed down on purpose is not
 * mistaken for a straggler; it is a straggler when that exceeds factor times the median of the
 * other pipelines' latest scaled times for k consecutive iterations, and clears after k
 * consecutive iterations below. With straggler time T' (the slowest straggler's), every other
 * pipeline runs plan prs_frontier_lookup(T'); stragglers and everyone with no straggler run the
 * fastest plan.
 * A report goes one way: folded into its pipeline, judged here, and the rule it calls for made
 * by job_assign.c. */
#include <string.h>

#include "perseus/server.h"

#include "job_assign.h"
#include "job_int.h"
#include "prs_assert.h"

const char *job_straggler_name(int kind)
{
    static const char *const names[] = {"none", "explicit", "automatic"};
    return names[kind >= 0 && kind <= 2 ? kind : 0];
}

/* A pipeline's straggler state changed (why: "detected", "reported", "cleared", "recovered"). */
void job_log_straggler(const job *j, int d, const char *why)
{
    const job_pipe *p = &j->pipes[d];
    job_logf(j, PRS_LOG_INFO, "msg=straggler job=%s dp=%d state=%s why=%s time_s=%.6g", j->id, d,
             job_straggler_name(p->straggler), why, p->straggler_time_s);
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
    PRS_ASSERT(n > 0);
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
            job_log_straggler(j, d, "detected");
            return 1;
        }
    } else {
        p->under++;
        p->over = 0;
        if (p->under >= k && p->straggler == STRAGGLER_AUTO) {
            job_mark_straggler(j, d, STRAGGLER_NONE, 0);
            job_log_straggler(j, d, "recovered");
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
    PRS_ASSERT(p->npend < JOB_PENDING); /* a full ring was evaluated from first */
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

/* Results in planning and running: folded into the rank's pipeline, whose row is stored once
 * for the post; while running they feed the straggler detector and may let a deferred plan
 * change go out. */
int job_results_running(job *j, store *st, const req_results *r, api_err *e)
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
