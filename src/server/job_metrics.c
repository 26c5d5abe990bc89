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
    double *v = r->value;
    v[JOB_METRIC_ITERATIONS] = (double)j->run_iterations;
    /* The plan's energies are one pipeline's with one GPU per stage; every stage runs on tp
     * GPUs, each at the stage's clocks: the job's GPUs spend tp times as much. */
    int tp = j->spec.tp > 0 ? j->spec.tp : 1;
    v[JOB_METRIC_ENERGY] = j->run_energy_j * tp;
    v[JOB_METRIC_SAVED] = j->run_saved_j * tp;
    v[JOB_METRIC_LAST_ITERATION] = j->last_iteration_s > 0 ? j->last_iteration_s : NAN;
    v[JOB_METRIC_PLANNED_SAVING] = NAN;
    v[JOB_METRIC_POWER_CAP] = j->spec.power_cap_w > 0 ? j->spec.power_cap_w : NAN;
    const prs_frontier_point *fp =
        j->frontier ? prs_frontier_point_at(j->frontier, j->fastest) : NULL;
    if (fp && j->allmax_energy_j > 0)
        v[JOB_METRIC_PLANNED_SAVING] =
            (j->allmax_energy_j - fp->eval_energy_j) / j->allmax_energy_j;
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

/* job_id, not job: Prometheus sets job itself (the scrape job) and would rename ours. */
static void labels(FILE *f, const job_metric_row *r)
{
    fputs("{job_id=\"", f);
    put_label(f, r->id);
    fputs("\",model=\"", f);
    put_label(f, r->model);
    fputc('"', f);
}

/* One family per value of a row (job_metrics.h: JOB_METRIC_*), in that order. */
static const struct {
    const char *name, *type, *help;
    int integer; /* written as an integer */
} FAMILIES[JOB_METRIC_N] = {
    {"perseusd_job_iterations_total", "counter",
     "Running iterations evaluated, summed over the job's pipelines.", 1},
    {"perseusd_job_energy_joules_total", "counter",
     "Predicted, not measured: the energy of those iterations on all the job's GPUs "
     "(stages x tensor-parallel degree of each pipeline), by the plan each ran.",
     0},
    {"perseusd_job_energy_saved_joules_total", "counter",
     "Predicted, not measured: the energy those iterations saved on all the job's GPUs against "
     "every GPU at its highest clock.",
     0},
    {"perseusd_job_iteration_seconds", "gauge",
     "Measured: the time of the job's latest evaluated running iteration, as its ranks reported "
     "it.",
     0},
    {"perseusd_job_planned_saving_ratio", "gauge",
     "Predicted: the energy the fastest plan saves per iteration against all-max, as a "
     "fraction.",
     0},
    {"perseusd_job_power_cap_watts", "gauge", "The job's power cap, when one is set.", 0},
};

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
    char num[PRS_NUMFMT_MAX];
    for (int k = 0; k < JOB_METRIC_N; k++) {
        fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", FAMILIES[k].name, FAMILIES[k].help,
                FAMILIES[k].name, FAMILIES[k].type);
        for (size_t i = 0; i < n; i++) {
            double v = rows[i].value[k];
            if (!isfinite(v)) continue; /* not known: no sample */
            fputs(FAMILIES[k].name, f);
            labels(f, &rows[i]);
            if (FAMILIES[k].integer)
                fprintf(f, "} %.0f\n", v);
            else
                fprintf(f, "} %s\n", prs_num_fmt_double(num, sizeof num, v));
        }
    }
}
