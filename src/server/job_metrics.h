/* Per-job series of perseusd's /metrics (docs/server.md, 'Observability').
 *
 * The server copies what it shows of each job under its lock (job_metric_row_of) and writes the
 * families after it let go (job_metrics_write), each family once with all jobs' series, in the
 * Prometheus text format and naming conventions (base units, _total on counters only). Counters
 * count since the server started. */
#ifndef PRS_SERVER_JOB_METRICS_H
#define PRS_SERVER_JOB_METRICS_H

#include <stddef.h>
#include <stdio.h>

#include "job.h"

/* The values of a row, one family each; NAN: not known (no sample). */
enum {
    JOB_METRIC_ITERATIONS,     /* running iterations evaluated, all pipelines */
    JOB_METRIC_ENERGY,         /* their planned energy, joules */
    JOB_METRIC_SAVED,          /* what they saved against all-max, joules */
    JOB_METRIC_LAST_ITERATION, /* the latest one's time, seconds */
    JOB_METRIC_PLANNED_SAVING, /* fastest plan against all-max, a fraction */
    JOB_METRIC_POWER_CAP,      /* watts, when set */
    JOB_METRIC_N
};

typedef struct job_metric_row {
    char id[SECURE_ID_LEN + 1];
    char model[SPEC_CAP_MODEL + 1];
    const char *phase;
    double value[JOB_METRIC_N];
} job_metric_row;

void job_metric_row_of(const job *j, job_metric_row *r);
void job_metrics_write(FILE *f, const job_metric_row *rows, size_t n);

#endif
