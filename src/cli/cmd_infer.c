/* perseus infer: the inference-serving commands (docs/inference.md), one row per subcommand in a
 * table: its name, its handler and its line of the usage. A subcommand's handler takes argv
 * starting at its own name, as the top-level commands do. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "cli_infer.h"

typedef struct infer_command {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
} infer_command;

static const infer_command COMMANDS[] = {
    {"synth", prs_cmd_infer_synth, "write a synthetic inference profile from the roofline model"},
    {"check", prs_cmd_infer_check, "load and check an inference profile, say what it covers"},
    {"emulate", prs_cmd_infer_emulate, "replay a trace on a cluster under serving policies"},
    {"plan", prs_cmd_infer_plan, "the configuration each policy level chooses for a load"},
};
#define NCOMMANDS (sizeof COMMANDS / sizeof COMMANDS[0])

static void usage(FILE *f)
{
    fputs("usage: perseus infer SUBCOMMAND [OPTIONS]\n"
          "\n"
          "LLM inference serving: performance profiles of serving instances (TP degree x SM\n"
          "clock), the serving emulator and its policies.\n"
          "\n"
          "subcommands:\n",
          f);
    for (size_t i = 0; i < NCOMMANDS; i++)
        fprintf(f, "  %-12s  %s\n", COMMANDS[i].name, COMMANDS[i].summary);
    fputs("\nRun 'perseus infer SUBCOMMAND --help' for its options.\n", f);
}

int prs_cmd_infer(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *sub = argv[1];
    if (strcmp(sub, "--help") == 0 || strcmp(sub, "-h") == 0 || strcmp(sub, "help") == 0) {
        usage(stdout);
        return 0;
    }
    const char *names[NCOMMANDS];
    for (size_t i = 0; i < NCOMMANDS; i++) {
        if (strcmp(sub, COMMANDS[i].name) == 0) return COMMANDS[i].run(argc - 1, argv + 1);
        names[i] = COMMANDS[i].name;
    }
    const char *near = prs_cli_suggest(sub, names, NCOMMANDS);
    if (near)
        fprintf(stderr, "perseus infer: unknown subcommand '%s' (did you mean '%s'?)\n", sub, near);
    else
        fprintf(stderr, "perseus infer: unknown subcommand '%s' (try 'perseus infer --help')\n",
                sub);
    return 2;
}
