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

typedef struct job_metric_row {
    char id[SECURE_ID_LEN + 1];
    char model[REQ_MAX_MODEL + 1];
    const char *phase;
    long long iterations;        /* running iterations evaluated, all pipelines */
    double energy_j, saved_j;    /* their planned energy; saved against all-max */
    double last_iteration_s;     /* the latest one's time (0: none yet) */
    double power_cap_w;          /* 0: none */
    double planned_saving_ratio; /* fastest plan against all-max (NAN: not planned yet) */
} job_metric_row;

void job_metric_row_of(const job *j, job_metric_row *r);
void job_metrics_write(FILE *f, const job_metric_row *rows, size_t n);

#endif
