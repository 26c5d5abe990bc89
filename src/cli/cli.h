/* Subcommands of the perseus CLI. Each takes argv starting at the subcommand name and returns
 * the process exit status: 0 success, 1 runtime failure, 2 bad usage or bad input. */
#ifndef PRS_CLI_H
#define PRS_CLI_H

int prs_cmd_plan(int argc, char **argv);     /* cmd_plan.c */
int prs_cmd_synth(int argc, char **argv);    /* cmd_synth.c */
int prs_cmd_evaluate(int argc, char **argv); /* cmd_evaluate.c */
int prs_cmd_emulate(int argc, char **argv);  /* cmd_emulate.c */
int prs_cmd_plot(int argc, char **argv);     /* cmd_plot.c */
int prs_cmd_demo(int argc, char **argv);     /* cmd_demo.c */

/* Shared helpers (cli_util.c). */

/* "perseus CMD: MSG 'ARG'" (or without ARG) on stderr; returns 2, the bad-usage status. */
int prs_cli_usage_error(const char *cmd, const char *msg, const char *arg);
/* Strict option values; on failure a one-line message naming the option, and -1. */
int prs_cli_positive_int(const char *cmd, const char *opt, const char *v, int *out);
int prs_cli_number(const char *cmd, const char *opt, const char *v, double min, int strict,
                   double *out);

/* Planner callbacks: a progress bar on stderr (when enabled, i.e. stderr is a terminal) and
 * warnings as "perseus CMD: warning: ...". Pass a prs_cli_progress as the planner's ud. */
typedef struct prs_cli_progress {
    const char *cmd;
    int enabled;
    int last_pct;
} prs_cli_progress;
void prs_cli_on_progress(void *ud, long done, long total);
void prs_cli_on_warn(void *ud, const char *msg);

#endif
