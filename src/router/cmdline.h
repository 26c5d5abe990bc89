/* Command-line errors of the router's programs (cmdline.c), worded as the other Perseus programs
 * word them: one line, the option named, a suggestion when one is close. */
#ifndef PRS_ROUTER_CMDLINE_H
#define PRS_ROUTER_CMDLINE_H

#include <getopt.h>

/* After getopt_long (optstring starting with ':') returned ch ('?' or ':') for argv[optind - 1]:
 * print "PROG: unknown option 'X' (did you mean '--Y'?)", "... (see PROG --help)" or "PROG:
 * option X needs a value" to stderr and return 2, the exit status. opts ends with a zero entry. */
int prs__cmdline_bad(const char *prog, const struct option *opts, int ch, char *const *argv);

#endif
