/* Subcommands of the perseus CLI. Each takes argv starting at the subcommand name and returns
 * the process exit status: 0 success, 1 runtime failure, 2 bad usage or bad input. */
#ifndef PRS_CLI_H
#define PRS_CLI_H

int prs_cmd_plan(int argc, char **argv);
int prs_cmd_synth(int argc, char **argv);

#endif
