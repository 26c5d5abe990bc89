/* Subcommands of the perseus CLI. Each takes argv starting at the subcommand name and returns
 * the process exit status: 0 success, 1 runtime failure, 2 bad usage or bad input. */
#ifndef PRS_CLI_H
#define PRS_CLI_H

int prs_cmd_plan(int argc, char **argv);     /* cmd_plan.c */
int prs_cmd_synth(int argc, char **argv);    /* cmd_synth.c */
int prs_cmd_evaluate(int argc, char **argv); /* cmd_evaluate.c */
int prs_cmd_emulate(int argc, char **argv);  /* cmd_emulate.c */
int prs_cmd_plot(int argc, char **argv);     /* cmd_plot.c */

#endif
