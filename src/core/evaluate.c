/* Exact evaluation of a frequency plan: the evaluation context (include/perseus/evaluate.h)
 * and the one-shot calls of include/perseus/planner.h built on it.
 *
 * The planner's frontier is a model prediction: durations come from a continuous relaxation and
 * energies from the cost model. Here a plan is judged by what its clocks really do: each
 * computation takes its clock's measured time, quantized to units of tau exactly as the planner
 * quantizes, and its measured energy; the iteration time is the critical path of those times;
 * each stage burns blocking power whenever it is not computing, i.e. for stages * T - sum(q)
 * units. Same accounting as the planner's, so predicted and evaluated figures are comparable. */
#include <stdlib.h>
#include <string.h>

#include "plan_int.h"

void prs__table_free(prs__table_table *t)
{
    if (!t) return;
    free(t->start);
    free(t->freq);
    free(t->q);
    free(t->qc);
    free(t->time_s);
    free(t->energy_j);
    memset(t, 0, sizeof *t);
}

int prs__table_build(const prs_profile *p, const prs_pipeline *pipe, prs__table_table *t,
                     prs_error *err)
{
    memset(t, 0, sizeof *t);
    size_t n = prs_profile_nrows(p);
    const prs_profile_row *rows = prs_profile_rows(p);
    int chunks = prs_pipeline_chunks(pipe);
    t->ntypes = chunks * 2;
    t->start = calloc((size_t)t->ntypes + 1, sizeof *t->start);
    t->freq = malloc(sizeof *t->freq * (n ? n : 1));
    t->q = malloc(sizeof *t->q * (n ? n : 1));
    t->qc = malloc(sizeof *t->qc * (n ? n : 1));
    t->time_s = malloc(sizeof *t->time_s * (n ? n : 1));
    t->energy_j = malloc(sizeof *t->energy_j * (n ? n : 1));
    if (!t->start || !t->freq || !t->q || !t->qc || !t->time_s || !t->energy_j) {
        prs__table_free(t);
        return FAIL(err, PRS_ENOMEM, "out of memory");
    }
    for (size_t i = 0; i < n; i++)
        if (rows[i].stage < chunks) t->start[rows[i].stage * 2 + (int)rows[i].instr + 1]++;
    for (int k = 0; k < t->ntypes; k++)
        t->start[k + 1] += t->start[k];
    int *fill = malloc(sizeof *fill * (size_t)(t->ntypes ? t->ntypes : 1));
    if (!fill) {
        prs__table_free(t);
        return FAIL(err, PRS_ENOMEM, "out of memory");
    }
    memcpy(fill, t->start, sizeof *fill * (size_t)t->ntypes);
    for (size_t i = 0; i < n; i++) {
        if (rows[i].stage >= chunks) continue;
        int k = rows[i].stage * 2 + (int)rows[i].instr;
        int j = fill[k]++;
        /* insertion into the type's slice, ascending frequency */
        while (j > t->start[k] && t->freq[j - 1] > rows[i].freq_mhz) {
            t->freq[j] = t->freq[j - 1];
            t->q[j] = t->q[j - 1];
            t->qc[j] = t->qc[j - 1];
            t->time_s[j] = t->time_s[j - 1];
            t->energy_j[j] = t->energy_j[j - 1];
            j--;
        }
        t->freq[j] = rows[i].freq_mhz;
        t->q[j] = prs__model_quantize(rows[i].time_s, pipe->unit_time_s);
        t->qc[j] =
            pipe->change_cost_s > 0
                ? prs__model_quantize(rows[i].time_s + pipe->change_cost_s, pipe->unit_time_s)
                : t->q[j];
        t->time_s[j] = rows[i].time_s;
        t->energy_j[j] = rows[i].energy_j;
        if (t->q[j] < 0 || t->qc[j] < 0) {
            free(fill);
            prs__table_free(t);
            return FAIL(err, PRS_EINVAL,
                        "stage %d %s at %d MHz: %g s is too many units of %g s to count; use "
                        "a larger unit time",
                        rows[i].stage, prs_instr_name(rows[i].instr), rows[i].freq_mhz,
                        rows[i].time_s, pipe->unit_time_s);
        }
    }
    free(fill);
    return 0;
}

/* Critical paths and the blocking-energy term count units in long: refuse a unit time so small
 * that the longest conceivable iteration (every computation one after another at its slowest
 * clock), times the stages, could overflow. */
static int check_path_range(const prs_eval *ev, prs_error *err)
{
    const prs__table_table *t = &ev->t;
    double sum = 0;
    for (int op = 0; op < ev->g.nops; op++) {
        int k = ev->g.op_type[op];
        long qmax = 0;
        for (int j = t->start[k]; j < t->start[k + 1]; j++)
            if (t->qc[j] > qmax) qmax = t->qc[j]; /* qc >= q */
        sum += (double)qmax;
    }
    if (sum * (double)ev->pipe.stages > PRS_MAX_PATH_UNITS)
        return FAIL(err, PRS_EINVAL,
                    "an iteration could take %.3g units of %g s, too many to count; use a "
                    "larger unit time",
                    sum, ev->pipe.unit_time_s);
    return 0;
}

int prs__table_find(const prs__table_table *t, int type, int freq_mhz)
{
    int lo = t->start[type], hi = t->start[type + 1] - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        if (t->freq[mid] == freq_mhz) return mid;
        if (t->freq[mid] < freq_mhz)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return -1;
}

double prs__table_energy(const prs_pipeline *pipe, long T, double sum_energy_j, long sum_q)
{
    return sum_energy_j +
           pipe->blocking_power_w * (double)((long)pipe->stages * T - sum_q) * pipe->unit_time_s;
}

/* ---- The evaluation context (perseus/evaluate.h) ---- */

void prs_eval_close(prs_eval *ev)
{
    if (!ev) return;
    prs__graph_free(&ev->g);
    prs__table_free(&ev->t);
    free(ev->dur);
    free(ev->earliest);
    free(ev->latest);
    free(ev->idx);
    free(ev);
}

int prs_eval_open(const prs_profile *profile, const prs_pipeline *pipe, prs_eval **out,
                  prs_error *err)
{
    return prs__eval_open_ticked(profile, pipe, NULL, out, err);
}

int prs__eval_open_ticked(const prs_profile *profile, const prs_pipeline *pipe,
                          const prs__tick *tick, prs_eval **out, prs_error *err)
{
    *out = NULL;
    if (!profile || !pipe) return FAIL(err, PRS_EINVAL, "NULL argument");
    int rc = prs_pipeline_check(pipe, err);
    if (rc) return rc;
    if ((rc = prs_profile_check_stages(profile, prs_pipeline_chunks(pipe), err))) return rc;
    prs_eval *ev = calloc(1, sizeof *ev);
    if (!ev) return FAIL(err, PRS_ENOMEM, "out of memory");
    ev->pipe = *pipe;
    if ((rc = prs__graph_build_ticked(pipe, tick, &ev->g, err)) ||
        (rc =
             prs__tick_stop(tick) ? FAIL(err, PRS_ECANCELED, "canceled opening the problem") : 0) ||
        (rc = prs__table_build(profile, pipe, &ev->t, err)) || (rc = check_path_range(ev, err)) ||
        (rc =
             prs__tick_stop(tick) ? FAIL(err, PRS_ECANCELED, "canceled opening the problem") : 0)) {
        prs_eval_close(ev);
        return rc;
    }
    size_t ops = (size_t)ev->g.nops, nodes = (size_t)ev->g.nnodes;
    ev->dur = malloc(sizeof *ev->dur * ops);
    ev->idx = malloc(sizeof *ev->idx * ops);
    ev->earliest = malloc(sizeof *ev->earliest * nodes);
    ev->latest = malloc(sizeof *ev->latest * nodes);
    if (!ev->dur || !ev->idx || !ev->earliest || !ev->latest) {
        prs_eval_close(ev);
        return FAIL(err, PRS_ENOMEM, "out of memory");
    }
    *out = ev;
    return 0;
}

int prs_eval_nops(const prs_eval *ev)
{
    return ev->g.nops;
}

int prs_eval_nclocks(const prs_eval *ev, int op)
{
    int type = ev->g.op_type[op];
    return ev->t.start[type + 1] - ev->t.start[type];
}

prs_eval_clock prs_eval_clock_at(const prs_eval *ev, int op, int i)
{
    int k = ev->t.start[ev->g.op_type[op]] + i;
    prs_eval_clock c = {ev->t.freq[k], ev->t.q[k], ev->t.time_s[k], ev->t.energy_j[k]};
    return c;
}

int prs_eval_find(const prs_eval *ev, int op, int freq_mhz)
{
    int type = ev->g.op_type[op], k = prs__table_find(&ev->t, type, freq_mhz);
    return k < 0 ? -1 : k - ev->t.start[type];
}

int prs_eval_common_clocks(const prs_eval *ev, int *out, int cap)
{
    const prs__table_table *t = &ev->t;
    int n = 0;
    for (int i = t->start[0]; i < t->start[1]; i++) { /* type 0's clocks, ascending */
        int everywhere = 1;
        for (int k = 1; k < t->ntypes && everywhere; k++)
            everywhere = prs__table_find(t, k, t->freq[i]) >= 0;
        if (!everywhere) continue;
        if (n < cap) out[n] = t->freq[i];
        n++;
    }
    return n;
}

/* The one message for a plan clock the profile has no row for. */
static int unprofiled(const prs_eval *ev, int op, int freq_mhz, prs_error *err)
{
    const prs__graph_graph *g = &ev->g;
    return FAIL(err, PRS_EINVAL,
                "plan: stage %d position %d runs at %d MHz, which the profile has no row "
                "for (stage %d %s)",
                op / g->ops_per_stage, op % g->ops_per_stage, freq_mhz, g->op_chunk[op],
                prs_instr_name((prs_instr)(g->op_type[op] % 2)));
}

int prs__table_lookup(prs_eval *ev, const int *clocks_mhz, prs_error *err)
{
    const prs__graph_graph *g = &ev->g;
    double sum_e = 0;
    long sum_q = 0;
    int costly = ev->pipe.change_cost_s > 0;
    for (int op = 0; op < g->nops; op++) {
        int k = prs__table_find(&ev->t, g->op_type[op], clocks_mhz[op]);
        if (k < 0) return unprofiled(ev, op, clocks_mhz[op], err);
        ev->idx[op] = k;
        ev->dur[op] = costly && prs__op_changes(g, clocks_mhz, op) ? ev->t.qc[k] : ev->t.q[k];
        sum_q += ev->t.q[k];
        sum_e += ev->t.energy_j[k];
    }
    ev->sum_energy_j = sum_e;
    ev->sum_q = sum_q;
    return 0;
}

long prs__table_run(prs_eval *ev, double *energy_j)
{
    long T = prs__graph_cpm(&ev->g, ev->dur, ev->earliest, NULL);
    *energy_j = prs__table_energy(&ev->pipe, T, ev->sum_energy_j, ev->sum_q);
    return T;
}

int prs_eval_lookup(const prs_eval *ev, const int *clocks_mhz, int *idx, prs_error *err)
{
    for (int op = 0; op < ev->g.nops; op++) {
        int k = prs_eval_find(ev, op, clocks_mhz[op]);
        if (k < 0) return unprofiled(ev, op, clocks_mhz[op], err);
        if (idx) idx[op] = k;
    }
    return 0;
}

/* The timeline of the last evaluation (earliest starts in ev->earliest). */
static void fill_timeline(const prs_eval *ev, const int *clocks_mhz, prs_timeline_op *ops)
{
    const prs__graph_graph *g = &ev->g;
    double tau = ev->pipe.unit_time_s;
    for (int op = 0; op < g->nops; op++) {
        const prs__graph_arc *a = &g->arcs[g->op_arc[op]];
        prs_timeline_op *o = &ops[op];
        o->stage = op / g->ops_per_stage;
        o->pos = op % g->ops_per_stage;
        o->chunk = g->op_chunk[op];
        o->instr = (prs_instr)(g->op_type[op] % 2);
        o->microbatch = g->op_mb[op];
        o->freq_mhz = clocks_mhz[op];
        o->start_s = (double)ev->earliest[a->from] * tau;
        o->end_s = (double)(ev->earliest[a->from] + ev->dur[op]) * tau;
        o->energy_j = ev->t.energy_j[ev->idx[op]];
    }
}

int prs_eval_run(prs_eval *ev, const int *clocks_mhz, prs_timeline_op *ops, double *time_s,
                 double *energy_j, prs_error *err)
{
    int rc = prs__table_lookup(ev, clocks_mhz, err);
    if (rc) return rc;
    long T = prs__table_run(ev, energy_j);
    *time_s = (double)T * ev->pipe.unit_time_s;
    if (ops) fill_timeline(ev, clocks_mhz, ops);
    return 0;
}

int prs_eval_windows(prs_eval *ev, const int *clocks_mhz, long *window_units, prs_error *err)
{
    int rc = prs__table_lookup(ev, clocks_mhz, err);
    if (rc) return rc;
    const prs__graph_graph *g = &ev->g;
    prs__graph_cpm(g, ev->dur, ev->earliest, ev->latest);
    for (int op = 0; op < g->nops; op++) {
        const prs__graph_arc *a = &g->arcs[g->op_arc[op]];
        window_units[op] = ev->latest[a->to] - ev->earliest[a->from];
    }
    return 0;
}

/* ---- One-shot evaluation (perseus/planner.h) ---- */

static int evaluate_once(const prs_profile *profile, const prs_pipeline *pipe,
                         const int *clocks_mhz, prs_timeline_op *ops, double *time_s,
                         double *energy_j, prs_error *err)
{
    prs_eval *ev;
    int rc = prs_eval_open(profile, pipe, &ev, err);
    if (rc) return rc;
    rc = prs_eval_run(ev, clocks_mhz, ops, time_s, energy_j, err);
    prs_eval_close(ev);
    return rc;
}

int prs_evaluate_plan(const prs_profile *profile, const prs_pipeline *pipe, const int *clocks_mhz,
                      double *time_s, double *energy_j, prs_error *err)
{
    return evaluate_once(profile, pipe, clocks_mhz, NULL, time_s, energy_j, err);
}

int prs_plan_timeline(const prs_profile *profile, const prs_pipeline *pipe, const int *clocks_mhz,
                      prs_timeline_op *ops, double *time_s, double *energy_j, prs_error *err)
{
    return evaluate_once(profile, pipe, clocks_mhz, ops, time_s, energy_j, err);
}
