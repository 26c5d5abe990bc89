/* perseus: command-line entry point. Dispatches to one subcommand per file (cli.h). */
#include <stdio.h>
#include <string.h>

#include "cli.h"

static void usage(FILE *out)
{
    fputs("usage: perseus COMMAND [OPTIONS]\n"
          "\n"
          "Plan GPU clocks for pipeline-parallel training at the least energy for each\n"
          "iteration time.\n"
          "\n"
          "commands:\n"
          "  demo          simulated training job against an embedded perseusd: the savings\n"
          "                (--inference: router, fake serving instances and clock control)\n"
          "  plan          stage profile -> iteration time-energy frontier and frequency plans\n"
          "  plan export   print one plan of a planned frontier (JSON or the reference's list)\n"
          "  evaluate      time and energy of a plan, a uniform clock or all-max, per stage\n"
          "  infer         LLM inference serving: profiles (synth), emulator, policies\n"
          "  emulate       savings of Perseus and baselines for N pipelines with a straggler\n"
          "  noise         what noisy profiles cost: plans on noisy copies judged on the truth\n"
          "  plot          SVG pictures: frontier, pipeline timeline, savings vs slowdown\n"
          "  synth         write a synthetic stage profile from the simulated GPU model\n"
          "  monitor       energy and average power of a command's run, per GPU\n"
          "  show-env      what Perseus sees: GPUs, clocks, energy counters, perseus-gpud\n"
          "  jobs          the jobs a running perseusd holds (its administrator's token)\n"
          "  job show ID   one job's status on a running perseusd\n"
          "\n"
          "Run 'perseus COMMAND --help' for a command's options and examples.\n"
          "\n"
          "examples:\n"
          "  perseus demo\n"
          "  perseus synth --gpu a100 --stages 4 --out prof.csv\n"
          "  perseus plan --profile prof.csv --stages 4 --microbatches 8 --unit-time 0.001 \\\n"
          "               --blocking-power 83.64 --out fr\n",
          out);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 || strcmp(cmd, "help") == 0) {
        usage(stdout);
        return 0;
    }
    if (strcmp(cmd, "--version") == 0) {
        puts("perseus " PRS_VERSION);
        return 0;
    }
    if (strcmp(cmd, "plan") == 0) return prs_cmd_plan(argc - 1, argv + 1);
    if (strcmp(cmd, "synth") == 0) return prs_cmd_synth(argc - 1, argv + 1);
    if (strcmp(cmd, "evaluate") == 0) return prs_cmd_evaluate(argc - 1, argv + 1);
    if (strcmp(cmd, "emulate") == 0) return prs_cmd_emulate(argc - 1, argv + 1);
    if (strcmp(cmd, "plot") == 0) return prs_cmd_plot(argc - 1, argv + 1);
    if (strcmp(cmd, "demo") == 0) return prs_cmd_demo(argc - 1, argv + 1);
    if (strcmp(cmd, "noise") == 0) return prs_cmd_noise(argc - 1, argv + 1);
    if (strcmp(cmd, "infer") == 0) return prs_cmd_infer(argc - 1, argv + 1);
    if (strcmp(cmd, "monitor") == 0) return prs_cmd_monitor(argc - 1, argv + 1);
    if (strcmp(cmd, "show-env") == 0) return prs_cmd_show_env(argc - 1, argv + 1);
    if (strcmp(cmd, "jobs") == 0) return prs_cmd_jobs(argc - 1, argv + 1);
    if (strcmp(cmd, "job") == 0) return prs_cmd_job(argc - 1, argv + 1);
    static const char *const commands[] = {"demo",    "plan",     "evaluate", "emulate",
                                           "infer",   "noise",    "plot",     "synth",
                                           "monitor", "show-env", "jobs",     "job"};
    const char *near = prs_cli_suggest(cmd, commands, sizeof commands / sizeof commands[0]);
    if (near)
        fprintf(stderr, "perseus: unknown command '%s' (did you mean '%s'?)\n", cmd, near);
    else
        fprintf(stderr, "perseus: unknown command '%s' (try 'perseus --help')\n", cmd);
    return 2;
}
