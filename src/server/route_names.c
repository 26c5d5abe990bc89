/* The route ids' names (enum route, server_int.h), the labels of requests in the metrics and
 * the log: apart from the route table, so that what answers and counts requests (reply.c,
 * server_metrics.c) does not depend on what dispatches them (router.c). */
#include "http.h"

static const char *const ROUTE_NAMES[N_ROUTES] = {"healthz",
                                                  "metrics",
                                                  "create_job",
                                                  "get_job",
                                                  "register_rank",
                                                  "schedule",
                                                  "results",
                                                  "set_straggler",
                                                  "clear_straggler",
                                                  "set_power_cap",
                                                  "clear_power_cap",
                                                  "get_profile",
                                                  "upload_profile",
                                                  "get_frontier",
                                                  "complete",
                                                  "delete_job",
                                                  "list_jobs",
                                                  "create_cluster",
                                                  "get_cluster",
                                                  "delete_cluster",
                                                  "report_cluster_load",
                                                  "get_cluster_desired",
                                                  "upload_cluster_profile",
                                                  "unknown"};

const char *route_name(enum route r)
{
    return r >= 0 && r < N_ROUTES ? ROUTE_NAMES[r] : ROUTE_NAMES[R_UNKNOWN];
}
