/* Per-job series of /metrics (job_metrics.h). */
#include "job_metrics.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "perseus/numfmt.h"

void job_metric_row_of(const job *j, job_metric_row *r)
{
    memset(r, 0, sizeof *r);
    snprintf(r->id, sizeof r->id, "%s", j->id);
    snprintf(r->model, sizeof r->model, "%s", j->spec.model);
    r->phase = job_phase_name(j->phase);
    r->iterations = j->run_iterations;
    r->energy_j = j->run_energy_j;
    r->saved_j = j->run_saved_j;
    r->last_iteration_s = j->last_iteration_s;
    r->power_cap_w = j->spec.power_cap_w;
    r->planned_saving_ratio = NAN;
    const prs_frontier_point *fp =
        j->frontier ? prs_frontier_point_at(j->frontier, j->fastest) : NULL;
    if (fp && j->allmax_energy_j > 0)
        r->planned_saving_ratio = (j->allmax_energy_j - fp->eval_energy_j) / j->allmax_energy_j;
}

/* A label value: backslash, double quote and newline escaped (the model name is the client's). */
static void put_label(FILE *f, const char *v)
{
    for (; *v; v++) {
        if (*v == '\\' || *v == '"') fputc('\\', f);
        if (*v == '\n') {
            fputs("\\n", f);
            continue;
        }
        fputc(*v, f);
    }
}

static void labels(FILE *f, const job_metric_row *r)
{
    fputs("{job=\"", f);
    put_label(f, r->id);
    fputs("\",model=\"", f);
    put_label(f, r->model);
    fputc('"', f);
}

typedef enum { V_ITERS, V_ENERGY, V_SAVED, V_LAST, V_CAP, V_SAVING } value_kind;

static double value_of(const job_metric_row *r, value_kind k)
{
    switch (k) {
    case V_ITERS:
        return (double)r->iterations;
    case V_ENERGY:
        return r->energy_j;
    case V_SAVED:
        return r->saved_j;
    case V_LAST:
        return r->last_iteration_s > 0 ? r->last_iteration_s : NAN;
    case V_CAP:
        return r->power_cap_w > 0 ? r->power_cap_w : NAN;
    case V_SAVING:
        return r->planned_saving_ratio;
    }
    return NAN;
}

static void family(FILE *f, const job_metric_row *rows, size_t n, const char *name,
                   const char *type, const char *help, value_kind k)
{
    fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
    char num[PRS_NUMFMT_MAX];
    for (size_t i = 0; i < n; i++) {
        double v = value_of(&rows[i], k);
        if (!isfinite(v)) continue; /* not known: no sample */
        fputs(name, f);
        labels(f, &rows[i]);
        if (k == V_ITERS)
            fprintf(f, "} %lld\n", rows[i].iterations);
        else
            fprintf(f, "} %s\n", prs_num_fmt_double(num, sizeof num, v));
    }
}

void job_metrics_write(FILE *f, const job_metric_row *rows, size_t n)
{
    fputs("# HELP perseusd_job_phase The phase each job is in (1 for its phase).\n"
          "# TYPE perseusd_job_phase gauge\n",
          f);
    for (size_t i = 0; i < n; i++) {
        fputs("perseusd_job_phase", f);
        labels(f, &rows[i]);
        fprintf(f, ",phase=\"%s\"} 1\n", rows[i].phase);
    }
    family(f, rows, n, "perseusd_job_iterations_total", "counter",
           "Running iterations evaluated, summed over the job's pipelines.", V_ITERS);
    family(f, rows, n, "perseusd_job_energy_joules_total", "counter",
           "Planned energy of those iterations (one pipeline each).", V_ENERGY);
    family(f, rows, n, "perseusd_job_energy_saved_joules_total", "counter",
           "Energy those iterations saved against every GPU at its highest clock.", V_SAVED);
    family(f, rows, n, "perseusd_job_iteration_seconds", "gauge",
           "Time of the job's latest evaluated running iteration.", V_LAST);
    family(f, rows, n, "perseusd_job_planned_saving_ratio", "gauge",
           "Energy the fastest plan saves per iteration against all-max, as a fraction.", V_SAVING);
    family(f, rows, n, "perseusd_job_power_cap_watts", "gauge",
           "The job's power cap, when one is set.", V_CAP);
}
