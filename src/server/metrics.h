/* Metrics of the perseusd process itself for /metrics (metrics.c): what the server and its
 * process are, in the Prometheus text format, named as Prometheus's conventions ask (base units,
 * _total only on counters, process_* as the client libraries write them). */
#ifndef PRS_SERVER_METRICS_H
#define PRS_SERVER_METRICS_H

#include <stdio.h>

/* perseusd_build_info{version="..."} 1. */
void prs__metrics_build_info(FILE *f);

/* process_cpu_seconds_total, process_resident_memory_bytes, process_virtual_memory_bytes,
 * process_open_fds, process_max_fds and process_start_time_seconds, read from /proc and
 * getrusage; a figure that cannot be read is left out. */
void prs__metrics_process(FILE *f);

#endif
