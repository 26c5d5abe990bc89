/* The router's load reports to perseusd (load_report.c): every period, the requests of each
 * DynamoLLM class counted since the last report, as requests per second (divided by the
 * configured rate scale), posted to the inference cluster's POST /v1/clusters/{id}/loads with
 * its token, so that perseusd's cluster level plans from the live load. docs/router.md. */
#ifndef PRS_ROUTER_LOAD_REPORT_H
#define PRS_ROUTER_LOAD_REPORT_H

#include <stddef.h>

#include "classes.h"
#include "perseus/error.h"
#include "router_config.h"

typedef struct prs_load_reporter prs_load_reporter;

/* The requests counted so far, by class (a snapshot taken under the caller's lock). */
typedef void (*prs_class_counts_fn)(void *ctx, unsigned long counts[PRS_INFER_NCLASS]);

/* The report's body: {"rates_rps": {"SS": r, ...}} with r = (now - prev) / elapsed_s / scale for
 * every class. Returns the length written (< n), or -1 when buf is too small. */
int prs__load_report_body(const unsigned long *prev, const unsigned long *now, double elapsed_s,
                          double scale, char *buf, size_t n);

/* Start the reporting thread (its first report one period from now). */
int prs__load_reporter_start(const prs_router_report *cfg, prs_class_counts_fn counts, void *ctx,
                             prs_load_reporter **out, prs_error *err);
/* Reports answered 2xx, answered 422 (taken, but perseusd cannot plan that load within the
 * cluster's budget) and those that failed (unreachable, or another status). */
void prs__load_reporter_counts(prs_load_reporter *l, unsigned long *ok, unsigned long *unplannable,
                               unsigned long *failed);
/* Stop the thread (a report in flight is abandoned within a second) and free. NULL is fine. */
void prs__load_reporter_stop(prs_load_reporter *l);

#endif
