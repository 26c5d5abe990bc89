/* perseus infer check: load an inference profile (docs/inference.md, "Profiles") with every rule
 * of the format checked, and say what it covers: the model and GPU, the TP degrees with their KV
 * capacity and largest batch, the clocks, and each (tp, clock)'s idle power. A bad file is one
 * line on stderr naming file:line (or the tp, clock and phase at fault) and exit status 1. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "profile.h"

#define CMD "perseus infer check"

static void usage(FILE *f)
{
    fputs("usage: perseus infer check FILE\n"
          "\n"
          "Load an inference profile (model,gpu,tp,freq_mhz,phase,batch,tokens,time_s,energy_j),\n"
          "check it, and print the TP degrees, KV capacities, clocks and idle powers it holds.\n"
          "\n"
          "examples:\n"
          "  perseus infer synth --gpu h100 --model llama2-70b --tp 4 --out p.csv\n"
          "  perseus infer check p.csv\n",
          f);
}

static void print_summary(const prs_infer_profile *p)
{
    prs_infer_perf pf;
    prs_infer_profile_perf(p, &pf);
    const int *tps, *mhz;
    int ntp, nclk;
    pf.tps(pf.ctx, &tps, &ntp);
    pf.clocks(pf.ctx, &mhz, &nclk);
    printf("model %s on %s: %d TP degree(s), %d clock(s) from %d to %d MHz\n",
           prs_infer_profile_model(p), prs_infer_profile_gpu(p), ntp, nclk, mhz[0], mhz[nclk - 1]);
    for (int i = 0; i < ntp; i++) {
        long kv = 0;
        int batch = 0;
        double lo = 0, hi = 0;
        pf.capacity(pf.ctx, tps[i], &kv, &batch, NULL);
        pf.idle_power(pf.ctx, tps[i], mhz[0], &lo, NULL);
        pf.idle_power(pf.ctx, tps[i], mhz[nclk - 1], &hi, NULL);
        printf("  tp %d: KV cache %ld tokens, at most %d sequences, idle %.1f W at %d MHz, %.1f W "
               "at %d MHz\n",
               tps[i], kv, batch, lo, mhz[0], hi, mhz[nclk - 1]);
    }
}

int prs_cmd_infer_check(int argc, char **argv)
{
    if (argc == 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
        usage(stdout);
        return 0;
    }
    if (argc != 2 || argv[1][0] == '-') {
        fprintf(stderr, CMD ": expected one profile FILE (see --help)\n");
        return 2;
    }
    prs_infer_profile *p = NULL;
    prs_error err = {0};
    if (prs_infer_profile_load(argv[1], &p, &err) != PRS_OK) {
        fprintf(stderr, CMD ": %s\n", err.msg);
        return 1;
    }
    print_summary(p);
    prs_infer_profile_free(p);
    return 0;
}
