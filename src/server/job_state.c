/* The small operations of job_state.h. */
#include "job_state.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *const PHASES[JOB_NPHASES] = {"registering", "profiling", "planning",
                                                "running",     "done",      "failed"};

const char *job_phase_name(job_phase p)
{
    return p >= 0 && p < JOB_NPHASES ? PHASES[p] : "unknown";
}

int job_phase_parse(const char *name, job_phase *out)
{
    for (int i = 0; i < JOB_NPHASES; i++)
        if (strcmp(name, PHASES[i]) == 0) {
            *out = (job_phase)i;
            return 0;
        }
    return -1;
}

int api_fail(api_err *e, int http, const char *code, const char *fmt, ...)
{
    e->http = http;
    e->code = code;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    va_end(ap);
    return -1;
}

void job_pipeline(const job *j, prs_pipeline *pipe)
{
    spec_pipeline(&j->spec, pipe);
    pipe->blocking_power_w = j->bp_used_w;
}

int job_power_prepare(job *j)
{
    prs_pipeline pipe;
    job_pipeline(j, &pipe);
    return plan_powers_prepare(&j->powers, j->frontier, j->profile, &pipe, j->spec.tp,
                               j->ops_per_stage);
}

long job_cap_plan(const job *j, int *feasible)
{
    return plan_powers_cap_plan(&j->powers, j->frontier, j->spec.power_cap_w / j->spec.dp,
                                feasible);
}

int job_store_fail(api_err *e, store *st)
{
    return api_fail(e, 500, "storage", "database: %s", store_error(st)->msg);
}

store_job_row job_row(const job *j, const char *spec_json)
{
    return (store_job_row){.id = j->id,
                           .token_hash = j->token_hash,
                           .spec_json = spec_json,
                           .config_key = j->config_key,
                           .phase = job_phase_name(j->phase),
                           .reason = j->reason,
                           .sweep_index = j->sweep_index,
                           .round = j->round,
                           .planning_s = j->planning_s,
                           .created_unix = j->created_unix,
                           .bp_measured_w = j->bp_measured_w,
                           .bp_used_w = j->bp_used_w,
                           .finished_unix = j->finished_unix};
}

int job_persist(job *j, store *st, api_err *e)
{
    /* The retention clock (--retention) starts when the job is first stored finished. */
    if ((j->phase == JOB_DONE || j->phase == JOB_FAILED) && !j->finished_unix)
        j->finished_unix = (long long)time(NULL);
    store_job_row row = job_row(j, NULL);
    if (store_update_job(st, &row)) return job_store_fail(e, st);
    return 0;
}

/* Store pipeline d as it is in memory. */
int job_put_pipe(job *j, store *st, int d, api_err *e)
{
    const job_pipe *p = &j->pipes[d];
    store_pipe_row row = {.dp = d,
                          .straggler = p->straggler,
                          .straggler_time_s = p->straggler_time_s,
                          .plan_id = p->plan_id,
                          .prev_plan_id = p->prev_plan_id,
                          .from_iteration = p->from_iteration,
                          .pace_hz = p->pace.hz,
                          .newest = p->newest,
                          .reports = p->reports,
                          .report_time_s = p->report_time_s,
                          .report_energy_j = p->report_energy_j,
                          .epoch = p->epoch};
    if (store_put_pipeline(st, j->id, &row)) return job_store_fail(e, st);
    return 0;
}

void job_logf(const job *j, int level, const char *fmt, ...)
{
    if (!j->log) return;
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    j->log(j->log_ud, level, line);
}

void job_set_failed(job *j, const char *fmt, ...)
{
    j->phase = JOB_FAILED;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(j->reason, sizeof j->reason, fmt, ap);
    va_end(ap);
}

int job_profile_csv(const prs_profile *p, char **csv, size_t *len)
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
