/* perseus infer synth: a synthetic inference profile (docs/inference.md, "Profiles") from the
 * calibrated roofline model (src/infer/roofline.h), for one model on one GPU at the TP degrees
 * and SM clocks asked for. Parse (strict options, one line and exit status 2 for a bad one), run
 * (prs_infer_synth_csv, in memory), print (to --out, through a temporary file renamed into
 * place, or to stdout). */
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "infer_synth.h"
#include "perseus/limits.h"
#include "perseus/numfmt.h"

#define CMD "perseus infer synth"
#define MAX_LIST 256

enum { OPT_GPU = 256, OPT_MODEL, OPT_TP, OPT_CLOCKS, OPT_OUT };

static void usage(FILE *f)
{
    char gpus[128], llms[128];
    prs_infer_gpu_names(gpus, sizeof gpus);
    prs_infer_llm_names(llms, sizeof llms);
    fprintf(f,
            "usage: perseus infer synth --gpu NAME --model NAME [options]\n"
            "\n"
            "Write an inference profile (model,gpu,tp,freq_mhz,phase,batch,tokens,time_s,\n"
            "energy_j) from the roofline model calibrated on measured latencies: prefill and\n"
            "decode grids (batch 1..%d, tokens 16..%d), idle power and KV capacity per TP.\n"
            "\n"
            "  --gpu NAME         GPU: %s\n"
            "  --model NAME       model: %s\n"
            "  --tp LIST          TP degrees, comma-separated (default 2,4,8; those the\n"
            "                     weights do not fit are refused)\n"
            "  --clocks LIST      SM clocks in MHz, comma-separated (default: f_max down in steps\n"
            "                     of 105 MHz to 800: 1980..825 on h100, 1410..885 on a100)\n"
            "  --out FILE         write the CSV to FILE instead of stdout\n"
            "  -h, --help         show this help\n"
            "\n"
            "examples:\n"
            "  perseus infer synth --gpu h100 --model llama2-70b --out llama-h100.csv\n"
            "  perseus infer synth --gpu a100 --model bloom-176b --tp 8 --clocks 1410,1200,1005\n",
            PRS_INFER_MAX_SEQS, PRS_INFER_SYNTH_MAX_TOKENS, gpus, llms);
}

static int bad(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int bad(const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, CMD ": %s\n", msg);
    return 2;
}

/* "2,4,8" into v (at most MAX_LIST positive integers); the count, or -1 (message printed). */
static int parse_ints(const char *opt, const char *arg, int *v)
{
    char copy[4096];
    if (strlen(arg) >= sizeof copy || !*arg) {
        bad("%s: expected a comma-separated list of positive integers, got '%.40s'", opt, arg);
        return -1;
    }
    memcpy(copy, arg, strlen(arg) + 1);
    int n = 0;
    for (char *item = copy;;) {
        char *comma = strchr(item, ',');
        if (comma) *comma = '\0';
        if (n == MAX_LIST) {
            bad("%s: more than %d values", opt, MAX_LIST);
            return -1;
        }
        if (prs_num_parse_int(item, &v[n]) != 0 || v[n] <= 0) {
            bad("%s: expected a comma-separated list of positive integers, got '%s'", opt, arg);
            return -1;
        }
        n++;
        if (!comma) return n;
        item = comma + 1;
    }
}

typedef struct synth_args {
    const char *gpu_name, *model_name, *out_path;
    int tps[MAX_LIST], ntp, clocks[MAX_LIST], nclk;
} synth_args;

static int parse_option(int c, const char *arg, synth_args *a)
{
    switch (c) {
    case OPT_GPU:
        a->gpu_name = arg;
        return 0;
    case OPT_MODEL:
        a->model_name = arg;
        return 0;
    case OPT_TP:
        a->ntp = parse_ints("--tp", arg, a->tps);
        return a->ntp < 0 ? 2 : 0;
    case OPT_CLOCKS:
        a->nclk = parse_ints("--clocks", arg, a->clocks);
        return a->nclk < 0 ? 2 : 0;
    default: /* OPT_OUT */
        a->out_path = arg;
        return 0;
    }
}

/* The default sweep: f_max, f_max - 105, ... down to 800 MHz, ascending. 105 MHz is 7 steps of
 * the 15 MHz grid both GPUs offer, so every clock of the sweep can be locked on a real GPU. */
static void default_clocks(const prs_infer_gpu *g, synth_args *a)
{
    int n = (g->f_max_mhz - 800) / 105 + 1;
    a->nclk = 0;
    for (int i = n - 1; i >= 0; i--)
        a->clocks[a->nclk++] = g->f_max_mhz - 105 * i;
}

static int check_names(synth_args *a, const prs_infer_llm **m, const prs_infer_gpu **g)
{
    char names[128];
    if (!a->gpu_name)
        return bad("missing --gpu NAME (one of: %s)", prs_infer_gpu_names(names, sizeof names));
    if (!(*g = prs_infer_gpu_find(a->gpu_name)))
        return bad("unknown GPU '%s' (known: %s)", a->gpu_name,
                   prs_infer_gpu_names(names, sizeof names));
    if (!a->model_name)
        return bad("missing --model NAME (one of: %s)", prs_infer_llm_names(names, sizeof names));
    if (!(*m = prs_infer_llm_find(a->model_name)))
        return bad("unknown model '%s' (known: %s)", a->model_name,
                   prs_infer_llm_names(names, sizeof names));
    if (a->ntp == 0) {
        a->tps[0] = 2, a->tps[1] = 4, a->tps[2] = 8;
        a->ntp = 3;
    }
    if (a->nclk == 0) default_clocks(*g, a);
    return 0;
}

static int parse_args(int argc, char **argv, synth_args *a, int *done)
{
    static const struct option longopts[] = {
        {"gpu", required_argument, NULL, OPT_GPU},
        {"model", required_argument, NULL, OPT_MODEL},
        {"tp", required_argument, NULL, OPT_TP},
        {"clocks", required_argument, NULL, OPT_CLOCKS},
        {"out", required_argument, NULL, OPT_OUT},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int status = 0, c;
    *done = 0;
    optind = 1;
    opterr = 0;
    while (status == 0 && (c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        if (c == 'h') {
            usage(stdout);
            *done = 1;
            return 0;
        } else if (c == ':') {
            status = bad("option '%s' needs a value", argv[optind - 1]);
        } else if (c >= OPT_GPU && c <= OPT_OUT) {
            status = parse_option(c, optarg, a);
        } else if (optopt) {
            status = bad("unknown option '-%c' (see --help)", optopt);
        } else {
            status = prs_cli_unknown_option("infer synth", argv[optind - 1], longopts);
        }
    }
    if (status == 0 && optind < argc)
        status = bad("unexpected argument '%s' (see --help)", argv[optind]);
    return status;
}

/* text to --out (written beside it, then renamed into place) or stdout; 0 or 1. */
static int write_text(const char *path, const char *text, size_t len)
{
    if (!path) {
        if (fwrite(text, 1, len, stdout) != len || fflush(stdout) != 0) {
            fprintf(stderr, CMD ": writing stdout failed\n");
            return 1;
        }
        return 0;
    }
    if (prs_cli_make_parent("infer synth", path)) return 1;
    char tmp[4200];
    if (snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid()) >= (int)sizeof tmp) {
        fprintf(stderr, CMD ": path too long: '%s'\n", path);
        return 1;
    }
    FILE *f = fopen(tmp, "w");
    if (!f) {
        fprintf(stderr, CMD ": cannot open '%s' for writing: %s\n", tmp, strerror(errno));
        return 1;
    }
    int ok = fwrite(text, 1, len, f) == len;
    ok = (fclose(f) == 0) && ok;
    if (!ok || rename(tmp, path) != 0) {
        fprintf(stderr, CMD ": writing '%s' failed: %s\n", path, strerror(errno));
        unlink(tmp);
        return 1;
    }
    return 0;
}

int prs_cmd_infer_synth(int argc, char **argv)
{
    synth_args a;
    memset(&a, 0, sizeof a);
    int done = 0, status = parse_args(argc, argv, &a, &done);
    const prs_infer_llm *m = NULL;
    const prs_infer_gpu *g = NULL;
    if (status == 0 && !done) status = check_names(&a, &m, &g);
    if (status || done) return status;
    prs_infer_roofline r;
    prs_error err = {0};
    char *text = NULL;
    size_t len = 0;
    int rc = prs_infer_roofline_init(&r, m, g, &err);
    if (rc == PRS_OK)
        rc = prs_infer_synth_csv(&r, a.tps, a.ntp, a.clocks, a.nclk, &text, &len, &err);
    if (rc != PRS_OK) {
        fprintf(stderr, CMD ": %s\n", err.msg);
        return rc == PRS_EINVAL ? 2 : 1;
    }
    status = write_text(a.out_path, text, len);
    free(text);
    return status;
}
