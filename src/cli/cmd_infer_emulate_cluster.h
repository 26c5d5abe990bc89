/* perseus infer emulate --cluster (cmd_infer_emulate_cluster.c). */
#ifndef PRS_CLI_CMD_INFER_EMULATE_CLUSTER_H
#define PRS_CLI_CMD_INFER_EMULATE_CLUSTER_H

#include "cli_fixed.h"

typedef struct prs_cli_emulate_cluster {
    const char *cluster_path, *trace_path;
    prs_cli_fixed fixed;
    int json;
} prs_cli_emulate_cluster;

/* Replay t (loaded and windowed) on the cluster: 0, or the exit status (message printed). */
int prs_cli_infer_emulate_cluster(const prs_cli_emulate_cluster *a, const prs_infer_trace *t);

#endif
