/* perseus emulate: placeholder until the command lands (being written now). */
#include <stdio.h>

#include "cli.h"

int prs_cmd_emulate(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fputs("perseus emulate: not available in this build\n", stderr);
    return 1;
}
