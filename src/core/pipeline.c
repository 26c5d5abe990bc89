/* The pipeline being planned (perseus/planner.h): names of schedules and cost models, the check
 * of a pipeline description, and each GPU's execution order of its computations under 1F1B,
 * GPipe and interleaved 1F1B (docs/planner.md, "Schedule DAG"). Used by the schedule DAG
 * (graph.c), evaluation and the client's order checks; the defaults and the check of the planner's
 * options. Depends on nothing else of the core. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "plan_int.h"

static const char *const schedule_names[] = {"1f1b", "gpipe", "interleaved"};

const char *prs_schedule_name(prs_schedule s)
{
    return (unsigned)s < 3 ? schedule_names[s] : "unknown";
}

int prs_schedule_parse(const char *name, prs_schedule *out)
{
    for (int i = 0; name && i < 3; i++)
        if (strcmp(name, schedule_names[i]) == 0) {
            *out = (prs_schedule)i;
            return 0;
        }
    return PRS_EINVAL;
}

const char *prs_cost_model_name(prs_cost_model m)
{
    return m == PRS_COST_EXP ? "exp" : m == PRS_COST_HULL ? "hull" : "unknown";
}

int prs_cost_model_parse(const char *name, prs_cost_model *out)
{
    if (!name) return PRS_EINVAL;
    if (strcmp(name, "exp") == 0)
        *out = PRS_COST_EXP;
    else if (strcmp(name, "hull") == 0)
        *out = PRS_COST_HULL;
    else
        return PRS_EINVAL;
    return 0;
}

const char *prs_option_filter_name(prs_option_filter f)
{
    return f == PRS_FILTER_ARTIFACT ? "artifact" : f == PRS_FILTER_ZEUS ? "zeus" : "unknown";
}

int prs_option_filter_parse(const char *name, prs_option_filter *out)
{
    if (!name) return PRS_EINVAL;
    if (strcmp(name, "artifact") == 0)
        *out = PRS_FILTER_ARTIFACT;
    else if (strcmp(name, "zeus") == 0)
        *out = PRS_FILTER_ZEUS;
    else
        return PRS_EINVAL;
    return 0;
}

const char *prs_frontier_kind_name(prs_frontier_kind k)
{
    return k == PRS_FRONTIER_AUTO    ? "auto"
           : k == PRS_FRONTIER_RAW   ? "raw"
           : k == PRS_FRONTIER_CLEAN ? "clean"
                                     : "unknown";
}

int prs_frontier_kind_parse(const char *name, prs_frontier_kind *out)
{
    if (!name) return PRS_EINVAL;
    if (strcmp(name, "auto") == 0)
        *out = PRS_FRONTIER_AUTO;
    else if (strcmp(name, "raw") == 0)
        *out = PRS_FRONTIER_RAW;
    else if (strcmp(name, "clean") == 0)
        *out = PRS_FRONTIER_CLEAN;
    else
        return PRS_EINVAL;
    return 0;
}

int prs_pipeline_check(const prs_pipeline *p, prs_error *err)
{
    if (p->stages < 1)
        return prs_error_set(err, PRS_EINVAL, "stages must be >= 1 (got %d)", p->stages);
    if (p->microbatches < 1)
        return prs_error_set(err, PRS_EINVAL, "microbatches must be >= 1 (got %d)",
                             p->microbatches);
    if ((long)p->stages * p->microbatches > PRS_MAX_PIPELINE_CELLS)
        return prs_error_set(err, PRS_EINVAL, "stages x microbatches = %ld is too large",
                             (long)p->stages * p->microbatches);
    if ((unsigned)p->schedule > PRS_SCHEDULE_INTERLEAVED)
        return prs_error_set(err, PRS_EINVAL, "unknown schedule %d", (int)p->schedule);
    if (p->virtual_stages < 0 || p->virtual_stages > PRS_MAX_VIRTUAL_STAGES)
        return prs_error_set(err, PRS_EINVAL, "virtual stages must be 1..%d (got %d)",
                             PRS_MAX_VIRTUAL_STAGES, p->virtual_stages);
    if (p->schedule == PRS_SCHEDULE_INTERLEAVED) {
        if (p->virtual_stages < 2)
            return prs_error_set(err, PRS_EINVAL,
                                 "the interleaved schedule needs at least 2 virtual stages per "
                                 "GPU (got %d)",
                                 p->virtual_stages);
        if (p->microbatches % p->stages != 0)
            return prs_error_set(err, PRS_EINVAL,
                                 "the interleaved schedule needs microbatches to be a multiple "
                                 "of stages (got %d microbatches, %d stages)",
                                 p->microbatches, p->stages);
    } else if (p->virtual_stages > 1) {
        return prs_error_set(err, PRS_EINVAL,
                             "virtual stages (%d) need the interleaved schedule, not %s",
                             p->virtual_stages, prs_schedule_name(p->schedule));
    }
    if ((long)p->stages * p->microbatches * (p->virtual_stages > 1 ? p->virtual_stages : 1) >
        PRS_MAX_PIPELINE_CELLS)
        return prs_error_set(err, PRS_EINVAL, "pipeline too large");
    if (!(p->unit_time_s > 0) || !isfinite(p->unit_time_s))
        return prs_error_set(err, PRS_EINVAL, "unit time must be a finite number > 0 s");
    if (!(p->blocking_power_w >= 0 && p->blocking_power_w <= PRS_MAX_BLOCKING_POWER_W))
        return prs_error_set(err, PRS_EINVAL,
                             "blocking power must be a number from 0 to %g W (got %g)",
                             PRS_MAX_BLOCKING_POWER_W, p->blocking_power_w);
    if (!(p->change_cost_s >= 0 && p->change_cost_s <= PRS_MAX_CHANGE_COST_S))
        return prs_error_set(err, PRS_EINVAL,
                             "clock change cost must be a number from 0 to %g s (got %g)",
                             PRS_MAX_CHANGE_COST_S, p->change_cost_s);
    return 0;
}

void prs_plan_opts_default(prs_plan_opts *o)
{
    memset(o, 0, sizeof *o);
    o->pipe.schedule = PRS_SCHEDULE_1F1B;
    o->pipe.unit_time_s = 0.001;
    o->cost_model = PRS_COST_EXP;
}

int prs__plan_opts_check(const prs_plan_opts *o, prs_error *err)
{
    int rc = prs_pipeline_check(&o->pipe, err);
    if (rc) return rc;
    if (o->cost_model != PRS_COST_EXP && o->cost_model != PRS_COST_HULL)
        return prs_error_set(err, PRS_EINVAL, "unknown cost model %d", (int)o->cost_model);
    if ((unsigned)o->frontier > PRS_FRONTIER_CLEAN)
        return prs_error_set(err, PRS_EINVAL, "unknown frontier kind %d", (int)o->frontier);
    if (o->threads < 0 || o->threads > PRS_PLAN_MAX_THREADS)
        return prs_error_set(err, PRS_EINVAL, "threads must be 0 (one per processor) to %d, got %d",
                             PRS_PLAN_MAX_THREADS, o->threads);
    if (o->max_points < 0)
        return prs_error_set(err, PRS_EINVAL, "max points must be >= 0 (0: the default), got %ld",
                             o->max_points);
    if ((unsigned)o->polish > PRS_POLISH_ALL)
        return prs_error_set(err, PRS_EINVAL, "unknown polish kind %d", (int)o->polish);
    return 0;
}

static int vstages(const prs_pipeline *pipe)
{
    return pipe->virtual_stages > 1 ? pipe->virtual_stages : 1;
}

int prs_pipeline_chunks(const prs_pipeline *pipe)
{
    return pipe->stages * vstages(pipe);
}

int prs_ops_per_stage(const prs_pipeline *pipe)
{
    return 2 * pipe->microbatches * vstages(pipe);
}

/* 1F1B (DeepSpeed TrainSchedule order, docs/planner.md): stage s runs w = min(S - s, M) warm-up
 * forwards, then alternates backward/forward until the forwards run out, then the backwards. */
static void order_1f1b(int stages, int mbs, int s, prs_instr *instr, int *mb, int *chunk)
{
    int w = stages - s < mbs ? stages - s : mbs;
    int k = 0, nf = 0, nb = 0;
    for (; nf < w; nf++, k++)
        instr[k] = PRS_FORWARD, mb[k] = nf;
    while (nf < mbs) {
        instr[k] = PRS_BACKWARD, mb[k++] = nb++;
        instr[k] = PRS_FORWARD, mb[k++] = nf++;
    }
    while (nb < mbs)
        instr[k] = PRS_BACKWARD, mb[k++] = nb++;
    for (k = 0; k < 2 * mbs; k++)
        chunk[k] = s;
}

/* GPipe: every forward, then every backward, microbatches in increasing order. */
static void order_gpipe(int mbs, int s, prs_instr *instr, int *mb, int *chunk)
{
    for (int m = 0; m < mbs; m++) {
        instr[m] = PRS_FORWARD, mb[m] = m, chunk[m] = s;
        instr[mbs + m] = PRS_BACKWARD, mb[mbs + m] = m, chunk[mbs + m] = s;
    }
}

/* Megatron-LM interleaved 1F1B for GPU r of S with V chunks and M microbatches (M % S == 0):
 * the k-th forward runs local chunk (k mod SV) / S on microbatch (k / SV) S + k mod S; the k-th
 * backward the same microbatch of local chunk V - 1 - (k mod SV) / S. The GPU runs
 * min((S - r - 1) 2 + (V - 1) S, MV) warm-up forwards, then alternates one forward and one
 * backward, then drains the backwards. Local chunk j of GPU r is model chunk j S + r. */
static void order_interleaved(int S, int V, int M, int r, prs_instr *instr, int *mb, int *chunk)
{
    int total = M * V, sv = S * V;
    int warm = (S - r - 1) * 2 + (V - 1) * S;
    if (warm > total) warm = total;
    int k = 0, nf = 0, nb = 0;
#define FWD()                                                                                      \
    (instr[k] = PRS_FORWARD, mb[k] = (nf / sv) * S + nf % S, chunk[k] = ((nf % sv) / S) * S + r,   \
     k++, nf++)
#define BWD()                                                                                      \
    (instr[k] = PRS_BACKWARD, mb[k] = (nb / sv) * S + nb % S,                                      \
     chunk[k] = (V - 1 - (nb % sv) / S) * S + r, k++, nb++)
    while (nf < warm)
        FWD();
    while (nf < total) {
        FWD();
        BWD();
    }
    while (nb < total)
        BWD();
#undef FWD
#undef BWD
}

void prs__sched_stage_order(const prs_pipeline *pipe, int s, prs_instr *instr, int *mb, int *chunk)
{
    switch (pipe->schedule) {
    case PRS_SCHEDULE_GPIPE:
        order_gpipe(pipe->microbatches, s, instr, mb, chunk);
        break;
    case PRS_SCHEDULE_INTERLEAVED:
        order_interleaved(pipe->stages, vstages(pipe), pipe->microbatches, s, instr, mb, chunk);
        break;
    default:
        order_1f1b(pipe->stages, pipe->microbatches, s, instr, mb, chunk);
        break;
    }
}

int prs_op_describe_chunk(const prs_pipeline *pipe, int stage, int pos, prs_instr *instr,
                          int *microbatch, int *chunk)
{
    int n = prs_ops_per_stage(pipe);
    if (stage < 0 || stage >= pipe->stages || pos < 0 || pos >= n) return PRS_ERANGE;
    /* zeroed although the order fills all n: static analysis cannot follow that */
    prs_instr *in = calloc((size_t)n, sizeof *in);
    int *mb = calloc((size_t)n, sizeof *mb), *ch = calloc((size_t)n, sizeof *ch);
    if (!in || !mb || !ch) {
        free(in);
        free(mb);
        free(ch);
        return PRS_ENOMEM;
    }
    prs__sched_stage_order(pipe, stage, in, mb, ch);
    *instr = in[pos];
    *microbatch = mb[pos];
    if (chunk) *chunk = ch[pos];
    free(in);
    free(mb);
    free(ch);
    return 0;
}

int prs_op_describe(const prs_pipeline *pipe, int stage, int pos, prs_instr *instr, int *microbatch)
{
    return prs_op_describe_chunk(pipe, stage, pos, instr, microbatch, NULL);
}
