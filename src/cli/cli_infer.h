/* The serving emulator's subcommands of `perseus infer` (cmd_infer_emulate.c, cmd_infer_plan.c)
 * and what they share (cli_infer.c): the options every one of them takes (the profile, the
 * cluster, classes and SLOs, periods, reconfiguration costs), loading the trace with its
 * transforms, and building the capacity table. */
#ifndef PRS_CLI_INFER_H
#define PRS_CLI_INFER_H

#include <getopt.h>

#include "capacity.h"
#include "cluster.h"
#include "profile.h"
#include "sizing.h"
#include "trace.h"

int prs_cmd_infer_emulate(int argc, char **argv); /* cmd_infer_emulate.c */
int prs_cmd_infer_plan(int argc, char **argv);    /* cmd_infer_plan.c */

/* The options shared by emulate and plan (getopt_long codes from PRS_CLI_INFER_OPT0 up). */
#define PRS_CLI_INFER_OPT0 1000
extern const struct option prs_cli_infer_options[];
extern const char prs_cli_infer_help[];

typedef struct prs_cli_infer {
    const char *profile_path;
    prs_infer_opts opts;
    prs_infer_cap_opts cap;
    prs_infer_profile *profile;
    prs_infer_perf perf;
} prs_cli_infer;

void prs_cli_infer_init(prs_cli_infer *c);
/* Option code `code` (from prs_cli_infer_options) with value arg: 0, or 2 (usage error printed
 * as "perseus CMD: ..."). */
int prs_cli_infer_option(const char *cmd, int code, const char *arg, prs_cli_infer *c);
/* Load the profile and check the options: 0, or the exit status (message printed). */
int prs_cli_infer_ready(const char *cmd, prs_cli_infer *c);
void prs_cli_infer_free(prs_cli_infer *c);

/* perseus infer emulate --plots DIR (cli_infer_plots.c): power.svg, ttft-cdf.svg, tbt-cdf.svg,
 * and pools-POLICY.svg and tp-POLICY.svg for each of the n results. 0, or 1 with a message
 * ("perseus CMD: ...") on stderr. */
int prs_cli_infer_plots(const char *cmd, const char *dir, const prs_infer_result *res, int n);

/* Parse "A,B" (two numbers, A < B when ordered) into a and b: 0 or -1. */
int prs_cli_infer_pair(const char *v, double *a, double *b);

#endif
