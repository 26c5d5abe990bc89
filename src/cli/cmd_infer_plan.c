/* perseus infer plan: the configuration each level of the dynamic policy chooses for a steady
 * load: GPUs per pool, each pool's instances (TP) and their clocks, with the model's power, and
 * singlepool's instances for the same total (docs/inference.md). Parse -> capacity table
 * (capacity.h) -> prs_infer_plan_load (plan.h) -> print (table or --json). */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cli_infer.h"
#include "perseus/numfmt.h"
#include "plan.h"

#define CMD "infer plan"

enum { O_LOAD = 256, O_TRACE, O_JSON, O_HELP };

typedef struct args {
    prs_cli_infer in;
    const char *trace_path;
    double rates[PRS_INFER_NCLASS];
    int have_load, json;
} args;

static void usage(FILE *f)
{
    fprintf(f,
            "usage: perseus infer plan --profile FILE --load RATES [options]\n"
            "\n"
            "Print what each level of the dynamic policy chooses for a steady load: the GPUs\n"
            "of each request-class pool, its instances' TP and clock, and the model's power;\n"
            "and singlepool's instances for the same total.\n"
            "\n"
            "  --load RATES           requests/s per class: CLASS=RATE,... (classes SS SM SL\n"
            "                         MS MM ML LS LM LL; the others 0), required\n"
            "  --trace FILE           take each class's length mix from this trace (default:\n"
            "                         one length at the middle of each class's range)\n"
            "  --json                 one JSON object instead of the table\n"
            "%s"
            "  -h, --help             show this help\n"
            "\n"
            "example:\n"
            "  perseus infer plan --profile h100.csv --gpus 96 --load SS=2,MM=1.5,LL=0.5\n",
            prs_cli_infer_help);
}

static int parse_load(const char *v, args *a)
{
    char buf[512];
    if (strlen(v) >= sizeof buf) return prs_cli_usage_error(CMD, "--load: too long", NULL);
    snprintf(buf, sizeof buf, "%s", v);
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(t, '=');
        int k = -1;
        if (eq) {
            *eq = 0;
            for (int c = 0; c < PRS_INFER_NCLASS; c++)
                if (strcmp(t, prs_infer_class_name(c)) == 0) k = c;
        }
        double r;
        if (k < 0 || prs_num_parse_double(eq + 1, &r) || !(r >= 0) || r > 1e6)
            return prs_cli_usage_error(CMD, "--load: expected CLASS=RATE (e.g. SS=2.5), got", t);
        a->rates[k] = r;
    }
    a->have_load = 1;
    return 0;
}

static int parse_args(int argc, char **argv, args *a)
{
    static struct option opts[64];
    static const struct option own[] = {{"load", required_argument, 0, O_LOAD},
                                        {"trace", required_argument, 0, O_TRACE},
                                        {"json", no_argument, 0, O_JSON},
                                        {"help", no_argument, 0, O_HELP}};
    size_t n = 0;
    for (size_t i = 0; i < sizeof own / sizeof own[0]; i++)
        opts[n++] = own[i];
    for (const struct option *p = prs_cli_infer_options; p->name; p++)
        opts[n++] = *p;
    opts[n] = (struct option){0, 0, 0, 0};
    prs_cli_infer_init(&a->in);
    opterr = 0;
    optind = 1;
    int c, rc;
    while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        if (c == 'h' || c == O_HELP) {
            usage(stdout);
            return 0;
        }
        if (c == '?') return prs_cli_unknown_option(CMD, argv[optind - 1], opts);
        if (c == ':') return prs_cli_usage_error(CMD, "missing value for", argv[optind - 1]);
        if (c == O_LOAD)
            rc = parse_load(optarg, a);
        else if (c == O_TRACE)
            a->trace_path = optarg, rc = 0;
        else if (c == O_JSON)
            a->json = 1, rc = 0;
        else
            rc = prs_cli_infer_option(CMD, c, optarg, &a->in);
        if (rc) return rc;
    }
    if (optind < argc) return prs_cli_usage_error(CMD, "unexpected argument", argv[optind]);
    if (!a->have_load) return prs_cli_usage_error(CMD, "missing --load", NULL);
    return -1;
}

static void print_plan(const args *a, const prs_infer_plan *p)
{
    printf("cluster level: %d of %d GPUs, %.1f kW (singlepool: %d instances, %d GPUs, %.1f kW)\n",
           p->gpus, a->in.opts.gpus, p->power_w / 1e3, p->single_instances, p->single_gpus,
           p->single_power_w / 1e3);
    printf("%-4s %8s %5s %8s  %s\n", "pool", "load_rps", "GPUs", "power_kW",
           "instances (TP@MHz: req/s)");
    for (int c = 0; c < PRS_INFER_NCLASS; c++) {
        const prs_infer_plan_pool *q = &p->pool[c];
        printf("%-4s %8.2f %5d %8.2f ", prs_infer_class_name(c), q->load_rps, q->gpus,
               q->power_w / 1e3);
        for (int i = 0; i < q->n_inst; i++)
            printf(" TP%d@%d:%.2f", q->inst[i].tp, q->inst[i].mhz, q->inst[i].load_rps);
        putchar('\n');
    }
}

static json_t *plan_json(const args *a, const prs_infer_plan *p)
{
    json_t *o = json_object();
    json_object_set_new(o, "schema", json_integer(PRS_CLI_JSON_SCHEMA));
    json_object_set_new(o, "command", json_string(CMD));
    json_object_set_new(o, "gpus", json_integer(a->in.opts.gpus));
    json_object_set_new(o, "gpus_used", json_integer(p->gpus));
    prs_cli_json_set_real(o, "power_w", p->power_w);
    json_t *s = json_object();
    json_object_set_new(s, "instances", json_integer(p->single_instances));
    json_object_set_new(s, "gpus", json_integer(p->single_gpus));
    prs_cli_json_set_real(s, "power_w", p->single_power_w);
    json_object_set_new(o, "singlepool", s);
    json_t *pools = json_object();
    for (int c = 0; c < PRS_INFER_NCLASS; c++) {
        const prs_infer_plan_pool *q = &p->pool[c];
        json_t *pj = json_object();
        prs_cli_json_set_real(pj, "load_rps", q->load_rps);
        json_object_set_new(pj, "gpus", json_integer(q->gpus));
        prs_cli_json_set_real(pj, "power_w", q->power_w);
        json_t *arr = json_array();
        for (int i = 0; i < q->n_inst; i++) {
            json_t *ij = json_object();
            json_object_set_new(ij, "tp", json_integer(q->inst[i].tp));
            json_object_set_new(ij, "freq_mhz", json_integer(q->inst[i].mhz));
            prs_cli_json_set_real(ij, "load_rps", q->inst[i].load_rps);
            prs_cli_json_set_real(ij, "power_w", q->inst[i].power_w);
            json_array_append_new(arr, ij);
        }
        json_object_set_new(pj, "instances", arr);
        json_object_set_new(pools, prs_infer_class_name(c), pj);
    }
    json_object_set_new(o, "pools", pools);
    return o;
}

static int run(args *a)
{
    prs_error err = {0};
    prs_infer_trace t = {0};
    if (a->trace_path && prs_infer_trace_load(a->trace_path, &t, &err)) {
        fprintf(stderr, "perseus %s: %s\n", CMD, err.msg);
        return 2;
    }
    prs_infer_captable *caps = calloc(1, sizeof *caps);
    prs_infer_plan *p = calloc(1, sizeof *p);
    int rc = caps && p ? 0 : 1;
    if (!rc &&
        prs_infer_captable_build(&a->in.perf, &a->in.opts.classes, &a->in.cap, &t, caps, &err)) {
        fprintf(stderr, "perseus %s: %s: %s\n", CMD, a->in.profile_path, err.msg);
        rc = 2;
    }
    if (!rc && prs_infer_plan_load(caps, &a->in.opts, a->rates, p, &err)) {
        fprintf(stderr, "perseus %s: %s\n", CMD, err.msg);
        rc = 2;
    }
    if (!rc && a->json)
        rc = prs_cli_json_print(plan_json(a, p), JSON_INDENT(2)) ? 1 : 0;
    else if (!rc)
        print_plan(a, p);
    prs_infer_trace_free(&t);
    free(caps);
    free(p);
    return rc;
}

int prs_cmd_infer_plan(int argc, char **argv)
{
    args *a = calloc(1, sizeof *a);
    if (!a) return 1;
    int rc = parse_args(argc, argv, a);
    if (rc == -1 && !(rc = prs_cli_infer_ready(CMD, &a->in))) rc = run(a);
    prs_cli_infer_free(&a->in);
    free(a);
    return rc;
}
