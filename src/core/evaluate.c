/* Exact evaluation of a frequency plan (include/perseus/planner.h).
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

void prsE_free(prsE_table *t)
{
    if (!t) return;
    free(t->start);
    free(t->freq);
    free(t->q);
    free(t->time_s);
    free(t->energy_j);
    memset(t, 0, sizeof *t);
}

int prsE_build(const prs_profile *p, const prs_pipeline *pipe, prsE_table *t, prs_error *err)
{
    memset(t, 0, sizeof *t);
    size_t n = prs_profile_nrows(p);
    const prs_profile_row *rows = prs_profile_rows(p);
    int chunks = prs_pipeline_chunks(pipe);
    t->ntypes = chunks * 2;
    t->start = calloc((size_t)t->ntypes + 1, sizeof *t->start);
    t->freq = malloc(sizeof *t->freq * (n ? n : 1));
    t->q = malloc(sizeof *t->q * (n ? n : 1));
    t->time_s = malloc(sizeof *t->time_s * (n ? n : 1));
    t->energy_j = malloc(sizeof *t->energy_j * (n ? n : 1));
    if (!t->start || !t->freq || !t->q || !t->time_s || !t->energy_j) {
        prsE_free(t);
        return prs_error_set(err, PRS_ENOMEM, "out of memory");
    }
    for (size_t i = 0; i < n; i++)
        if (rows[i].stage < chunks) t->start[rows[i].stage * 2 + (int)rows[i].instr + 1]++;
    for (int k = 0; k < t->ntypes; k++)
        t->start[k + 1] += t->start[k];
    int *fill = malloc(sizeof *fill * (size_t)(t->ntypes ? t->ntypes : 1));
    if (!fill) {
        prsE_free(t);
        return prs_error_set(err, PRS_ENOMEM, "out of memory");
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
            t->time_s[j] = t->time_s[j - 1];
            t->energy_j[j] = t->energy_j[j - 1];
            j--;
        }
        t->freq[j] = rows[i].freq_mhz;
        t->q[j] = prsO_quantize(rows[i].time_s, pipe->unit_time_s);
        t->time_s[j] = rows[i].time_s;
        t->energy_j[j] = rows[i].energy_j;
    }
    free(fill);
    return 0;
}

int prsE_find(const prsE_table *t, int type, int freq_mhz)
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

double prsE_energy(const prs_pipeline *pipe, long T, double sum_energy_j, long sum_q)
{
    return sum_energy_j +
           pipe->blocking_power_w * (double)((long)pipe->stages * T - sum_q) * pipe->unit_time_s;
}

/* Shared by prs_evaluate_plan and prs_plan_timeline: quantized times and energies of every
 * computation at its clock, the critical path, and (if ops) the timeline. */
static int evaluate(const prs_profile *profile, const prs_pipeline *pipe, const int *clocks_mhz,
                    prs_timeline_op *ops, double *time_s, double *energy_j, prs_error *err)
{
    int rc = prs_pipeline_check(pipe, err);
    if (rc) return rc;
    if ((rc = prs_profile_check_stages(profile, prs_pipeline_chunks(pipe), err))) return rc;
    prsG_graph g;
    prsE_table t;
    if ((rc = prsG_build(pipe, &g, err))) return rc;
    if ((rc = prsE_build(profile, pipe, &t, err))) {
        prsG_free(&g);
        return rc;
    }
    long *dur = malloc(sizeof *dur * (size_t)g.nops);
    long *earliest = malloc(sizeof *earliest * (size_t)g.nnodes);
    int *idx = malloc(sizeof *idx * (size_t)g.nops);
    if (!dur || !earliest || !idx) {
        rc = prs_error_set(err, PRS_ENOMEM, "out of memory");
        goto out;
    }
    double sum_e = 0;
    long sum_q = 0;
    for (int op = 0; op < g.nops; op++) {
        int k = prsE_find(&t, g.op_type[op], clocks_mhz[op]);
        if (k < 0) {
            rc = prs_error_set(err, PRS_EINVAL,
                               "plan: stage %d position %d runs at %d MHz, which the profile has "
                               "no row for (stage %d %s)",
                               op / g.ops_per_stage, op % g.ops_per_stage, clocks_mhz[op],
                               g.op_chunk[op], prs_instr_name((prs_instr)(g.op_type[op] % 2)));
            goto out;
        }
        idx[op] = k;
        dur[op] = t.q[k];
        sum_q += t.q[k];
        sum_e += t.energy_j[k];
    }
    long T = prsG_cpm(&g, dur, earliest, NULL);
    *time_s = (double)T * pipe->unit_time_s;
    *energy_j = prsE_energy(pipe, T, sum_e, sum_q);
    for (int op = 0; ops && op < g.nops; op++) {
        const prsG_arc *a = &g.arcs[g.op_arc[op]];
        prs_timeline_op *o = &ops[op];
        o->stage = op / g.ops_per_stage;
        o->pos = op % g.ops_per_stage;
        o->chunk = g.op_chunk[op];
        o->instr = (prs_instr)(g.op_type[op] % 2);
        o->microbatch = g.op_mb[op];
        o->freq_mhz = clocks_mhz[op];
        o->start_s = (double)earliest[a->from] * pipe->unit_time_s;
        o->end_s = (double)(earliest[a->from] + dur[op]) * pipe->unit_time_s;
        o->energy_j = t.energy_j[idx[op]];
    }
out:
    free(dur);
    free(earliest);
    free(idx);
    prsE_free(&t);
    prsG_free(&g);
    return rc;
}

int prs_evaluate_plan(const prs_profile *profile, const prs_pipeline *pipe, const int *clocks_mhz,
                      double *time_s, double *energy_j, prs_error *err)
{
    return evaluate(profile, pipe, clocks_mhz, NULL, time_s, energy_j, err);
}

int prs_plan_timeline(const prs_profile *profile, const prs_pipeline *pipe, const int *clocks_mhz,
                      prs_timeline_op *ops, double *time_s, double *energy_j, prs_error *err)
{
    return evaluate(profile, pipe, clocks_mhz, ops, time_s, energy_j, err);
}
