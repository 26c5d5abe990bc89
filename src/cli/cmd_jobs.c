/* perseus jobs / perseus job show ID: the operator's command line for a running perseusd
 * (docs/server.md, 'Operating'). `jobs` lists every job (GET /v1/jobs, the administrator's token);
 * `job show` prints one job's status (GET /v1/jobs/ID, with the job's token or the
 * administrator's). Parse, request, print: the request through libcurl, the answer read with
 * jansson, a table on a terminal or the server's JSON with --json.
 *
 * The server and the token come from options, else from the environment (PERSEUS_SERVER,
 * PERSEUS_TOKEN), so a token need not appear in the process list (--token-file too). */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "cli.h"

#define DEFAULT_SERVER "http://127.0.0.1:7787"
typedef struct jobs_args {
    const char *server, *token, *token_file, *ca_file, *id;
    int json;
    char token_buf[512];
} jobs_args;

/* GET path from the server: 0 with the JSON answer in *out, or 1 with a message on stderr
 * (no answer, an error status with the server's own words, or an answer that is not JSON). */
static int get_json(const char *cmd, const jobs_args *a, const char *path, json_t **out)
{
    char url[1024], why[256];
    snprintf(url, sizeof url, "%s%s", a->server, path);
    prs_cli_http_req req = {url, "GET", a->token, NULL, a->ca_file, 30};
    json_t *j = NULL;
    long status = prs_cli_http(&req, &j, why, sizeof why);
    if (status == 200 && j) {
        *out = j;
        return 0;
    }
    if (!status) {
        fprintf(stderr, "perseus %s: no answer from %s: %s\n", cmd, a->server, why);
    } else if (status != 200) {
        json_t *e = json_object_get(j, "error");
        const char *msg = json_string_value(json_object_get(e, "message"));
        fprintf(stderr, "perseus %s: %s answered HTTP %ld: %s\n", cmd, path, status,
                msg ? msg : "no message");
    } else {
        fprintf(stderr, "perseus %s: %s answered something that is not JSON\n", cmd, path);
    }
    json_decref(j);
    return 1;
}

/* The token from --token-file's first line (without its newline). 0, or 2 with a message. */
static int read_token_file(const char *cmd, jobs_args *a)
{
    FILE *f = fopen(a->token_file, "r");
    if (!f || !fgets(a->token_buf, sizeof a->token_buf, f)) {
        if (f) fclose(f);
        fprintf(stderr, "perseus %s: --token-file: cannot read a token from '%s'\n", cmd,
                a->token_file);
        return 2;
    }
    fclose(f);
    a->token_buf[strcspn(a->token_buf, "\r\n")] = '\0';
    if (!a->token_buf[0])
        return fprintf(stderr, "perseus %s: --token-file: '%s' is empty\n", cmd, a->token_file), 2;
    a->token = a->token_buf;
    return 0;
}

static void usage(FILE *f, const char *cmd)
{
    fprintf(f,
            "usage: perseus %s [--server URL] [--token-file FILE | --token TOKEN]\n"
            "                  [--ca-file FILE] [--json]\n"
            "\n"
            "%s\n"
            "\n"
            "  --server URL       perseusd's address (default $PERSEUS_SERVER, else %s)\n"
            "  --token-file FILE  the bearer token, from FILE's first line%s\n"
            "  --token TOKEN      the same on the command line (visible to other users)\n"
            "                     (default $PERSEUS_TOKEN)\n"
            "  --ca-file FILE     PEM CA bundle that verifies an https:// server\n"
            "  --json             print the server's JSON answer as it is\n"
            "\n"
            "examples:\n"
            "  perseus %s --server http://127.0.0.1:7787 --token-file /etc/perseus/admin-token\n",
            strcmp(cmd, "jobs") == 0 ? "jobs" : "job show ID",
            strcmp(cmd, "jobs") == 0
                ? "List every job perseusd holds (GET /v1/jobs): id, model, phase, shape and\n"
                  "ranks registered. Needs the server's administrator token (--admin-token)."
                : "Show one job's status (GET /v1/jobs/ID): phase, shape, ranks, profiling,\n"
                  "planning and savings. Needs the job's token or the administrator's.",
            DEFAULT_SERVER, strcmp(cmd, "jobs") == 0 ? " (the administrator's)" : "",
            strcmp(cmd, "jobs") == 0 ? "jobs" : "job show JOB_ID");
}

/* The options (and, for job show, the one job id) into a; -1 to go on, else the exit status. */
static int parse(const char *cmd, int argc, char **argv, int want_id, jobs_args *a)
{
    static const struct option opts[] = {{"server", required_argument, 0, 's'},
                                         {"token", required_argument, 0, 't'},
                                         {"token-file", required_argument, 0, 'f'},
                                         {"ca-file", required_argument, 0, 'c'},
                                         {"json", no_argument, 0, 'j'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    memset(a, 0, sizeof *a);
    a->server = getenv("PERSEUS_SERVER");
    a->token = getenv("PERSEUS_TOKEN");
    int c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        switch (c) {
        case 's':
            a->server = optarg;
            break;
        case 't':
            a->token = optarg;
            break;
        case 'f':
            a->token_file = optarg;
            break;
        case 'c':
            a->ca_file = optarg;
            break;
        case 'j':
            a->json = 1;
            break;
        case 'h':
            usage(stdout, cmd);
            return 0;
        case ':':
            return prs_cli_usage_error(cmd, "missing value for", argv[optind - 1]);
        default:
            return prs_cli_unknown_option(cmd, argv[optind - 1], opts);
        }
    }
    if (want_id) {
        if (optind >= argc) return prs_cli_usage_error(cmd, "missing the job id", NULL);
        a->id = argv[optind++];
        if (!a->id[0] ||
            strspn(a->id, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                          "0123456789-_") != strlen(a->id) ||
            strlen(a->id) > 64)
            return prs_cli_usage_error(cmd, "not a job id:", a->id);
    }
    if (optind < argc) return prs_cli_usage_error(cmd, "unexpected argument", argv[optind]);
    if (!a->server || !a->server[0]) a->server = DEFAULT_SERVER;
    if (strncmp(a->server, "http://", 7) != 0 && strncmp(a->server, "https://", 8) != 0)
        return prs_cli_usage_error(cmd, "--server: expected http://HOST:PORT or https://..., got",
                                   a->server);
    if (a->token_file) return read_token_file(cmd, a) ? 2 : -1;
    return -1;
}

static void print_jobs(const json_t *v)
{
    const json_t *jobs = json_object_get(v, "jobs");
    printf("%-18s %-20s %-12s %6s %6s %4s %9s\n", "JOB_ID", "MODEL", "PHASE", "STAGES", "DP", "TP",
           "RANKS");
    size_t i;
    const json_t *j;
    json_array_foreach(jobs, i, j)
    {
        char ranks[32];
        snprintf(ranks, sizeof ranks, "%lld/%lld",
                 (long long)json_integer_value(json_object_get(j, "ranks_registered")),
                 (long long)json_integer_value(json_object_get(j, "ranks_expected")));
        printf("%-18s %-20.20s %-12s %6lld %6lld %4lld %9s\n",
               json_string_value(json_object_get(j, "job_id")),
               json_string_value(json_object_get(j, "model")),
               json_string_value(json_object_get(j, "phase")),
               (long long)json_integer_value(json_object_get(j, "stages")),
               (long long)json_integer_value(json_object_get(j, "dp")),
               (long long)json_integer_value(json_object_get(j, "tp")), ranks);
    }
    printf("%zu job%s\n", json_array_size(jobs), json_array_size(jobs) == 1 ? "" : "s");
}

int prs_cmd_jobs(int argc, char **argv)
{
    jobs_args a;
    int rc = parse("jobs", argc, argv, 0, &a);
    if (rc >= 0) return rc;
    json_t *v = NULL;
    if (get_json("jobs", &a, "/v1/jobs", &v)) return 1;
    if (a.json) return prs_cli_json_print(v, JSON_INDENT(2)) ? 1 : 0;
    print_jobs(v);
    json_decref(v);
    return 0;
}

static const char *str(const json_t *o, const char *k)
{
    const char *s = json_string_value(json_object_get(o, k));
    return s ? s : "-";
}

static long long num(const json_t *o, const char *k)
{
    return (long long)json_integer_value(json_object_get(o, k));
}

/* The status a person reads first; everything else is in --json. */
static void print_job(const json_t *v)
{
    const json_t *spec = json_object_get(v, "spec"), *ranks = json_object_get(v, "ranks");
    const json_t *prof = json_object_get(v, "profiling"), *plan = json_object_get(v, "planning");
    const json_t *sav = json_object_get(v, "savings");
    printf("job       %s (%s)\n", str(v, "job_id"), str(spec, "model"));
    printf("phase     %s", str(v, "phase"));
    if (json_object_get(v, "reason")) printf(": %s", str(v, "reason"));
    printf(", round %lld\n", num(v, "round"));
    printf("shape     %lld stages x %lld microbatches, dp %lld, tp %lld, %s\n", num(spec, "stages"),
           num(spec, "microbatches"), num(spec, "dp"), num(spec, "tp"), str(spec, "schedule"));
    printf("ranks     %lld of %lld registered, %lld clock failures\n", num(ranks, "registered"),
           num(ranks, "expected"), num(ranks, "clock_failures"));
    printf("profiling %lld of %lld clocks swept\n", num(prof, "clocks_done"),
           num(prof, "clocks_total"));
    printf("planning  %.0f %% done, %.1f s\n", json_number_value(json_object_get(plan, "done_pct")),
           json_number_value(json_object_get(plan, "elapsed_s")));
    if (sav)
        printf(
            "savings   %.2f %% per iteration (fastest plan), %.1f J so far over %lld iterations\n",
            json_number_value(json_object_get(sav, "saving_pct")),
            json_number_value(json_object_get(sav, "so_far_j")), num(sav, "iterations"));
}

/* perseus job SUBCOMMAND: show (one row so far; a table as perseus infer has when it grows). */
int prs_cmd_job(int argc, char **argv)
{
    if (argc < 2 || strcmp(argv[1], "show") != 0) {
        if (argc >= 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
            usage(stdout, "job show");
            return 0;
        }
        return prs_cli_usage_error("job", "expected 'show JOB_ID', got",
                                   argc >= 2 ? argv[1] : "nothing");
    }
    jobs_args a;
    int rc = parse("job show", argc - 1, argv + 1, 1, &a);
    if (rc >= 0) return rc;
    char path[128];
    snprintf(path, sizeof path, "/v1/jobs/%s", a.id);
    json_t *v = NULL;
    if (get_json("job show", &a, path, &v)) return 1;
    if (a.json) return prs_cli_json_print(v, JSON_INDENT(2)) ? 1 : 0;
    print_job(v);
    json_decref(v);
    return 0;
}
