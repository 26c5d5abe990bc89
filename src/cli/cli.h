/* Subcommands of the perseus CLI. Each takes argv starting at the subcommand name and returns
 * the process exit status: 0 success, 1 runtime failure, 2 bad usage or bad input. */
#ifndef PRS_CLI_H
#define PRS_CLI_H

#include <stdio.h>

#include <jansson.h>

#include "perseus/planner.h"
#include "perseus/powercap.h"

int prs_cmd_plan(int argc, char **argv);     /* cmd_plan.c */
int prs_cmd_synth(int argc, char **argv);    /* cmd_synth.c */
int prs_cmd_evaluate(int argc, char **argv); /* cmd_evaluate.c */
int prs_cmd_emulate(int argc, char **argv);  /* cmd_emulate.c */
int prs_cmd_plot(int argc, char **argv);     /* cmd_plot.c */
int prs_cmd_demo(int argc, char **argv);     /* cmd_demo.c */
int prs_cmd_noise(int argc, char **argv);    /* cmd_noise.c */
int prs_cmd_jobs(int argc, char **argv);     /* cmd_jobs.c: perseus jobs */
int prs_cmd_job(int argc, char **argv);      /* cmd_jobs.c: perseus job show */
int prs_cmd_monitor(int argc, char **argv);  /* cmd_monitor.c */
int prs_cmd_show_env(int argc, char **argv); /* cmd_show_env.c */

/* perseus infer (cmd_infer.c: the table of its subcommands) and its subcommands. */
int prs_cmd_infer(int argc, char **argv);
int prs_cmd_infer_synth(int argc, char **argv); /* cmd_infer_synth.c */
int prs_cmd_infer_check(int argc, char **argv); /* cmd_infer_check.c */

/* Shared helpers (cli_util.c). */

/* "perseus CMD: MSG 'ARG'" (or without ARG) on stderr; returns 2, the bad-usage status. */
int prs_cli_usage_error(const char *cmd, const char *msg, const char *arg);

/* cli_http.c: one request to a server with a JSON answer. url is the whole URL; method NULL is
 * GET; token (a bearer token), json (the body, sent as application/json), ca_file (verifies an
 * https:// server) may be NULL; timeout_s <= 0 is 30 s. Returns the HTTP status, or 0 with why
 * (may be NULL) saying why there was no answer; *out (may be NULL) gets the parsed JSON answer
 * (a new reference), or NULL. Answers over PRS_CLI_HTTP_MAX_ANSWER bytes are refused. */
#define PRS_CLI_HTTP_MAX_ANSWER (64u << 20) /* a dp = 16,384 job's status is ~5 MB */
typedef struct prs_cli_http_req {
    const char *url, *method, *token, *json, *ca_file;
    long timeout_s;
} prs_cli_http_req;
long prs_cli_http(const prs_cli_http_req *req, json_t **out, char *why, size_t why_len);

/* cli_suggest.c: the candidate closest to a mistyped word, or NULL when none is close (at most 2
 * edits, fewer than half the word's length). */
const char *prs_cli_suggest(const char *word, const char *const *candidates, size_t n);
struct option;
/* "perseus CMD: unknown option 'ARG'", with "(did you mean '--NAME'?)" when one of opts (a
 * getopt_long table, ended by a zeroed entry) is close. Returns 2. */
int prs_cli_unknown_option(const char *cmd, const char *arg, const struct option *opts);
/* cli_fs.c: create a --out directory with its missing parents (make_dir), or the missing
 * folders above a --out file (make_parent). 0, or -1 with "perseus CMD: cannot create
 * directory ..." on stderr. */
int prs_cli_make_dir(const char *cmd, const char *dir);
int prs_cli_make_parent(const char *cmd, const char *file);
/* cli_frontier.c: 0 when f (planned from profile) has a plan at a positive time, else
 * 1 with "perseus CMD: error: ..." on stderr saying why and which option to change. */
int prs_cli_frontier_usable(const char *cmd, const prs_profile *profile, const prs_frontier *f);
/* cli_gpus.c: the GPUs of a --gpus LIST (comma-separated prs_gpu_open specs, copied into buf),
 * or, when list is NULL, every GPU NVML lists ("nvml:0", ...). Fills specs (at most cap) and
 * returns how many; on failure prints "perseus CMD: ..." and returns minus the exit status. */
int prs_cli_gpu_specs(const char *cmd, const char *list, char *buf, size_t n, const char **specs,
                      int cap);
/* Strict option values; on failure a one-line message naming the option, and -1. */
int prs_cli_positive_int(const char *cmd, const char *opt, const char *v, int *out);
int prs_cli_number(const char *cmd, const char *opt, const char *v, double min, int strict,
                   double *out);

/* Planner callbacks: progress on stderr and warnings as "perseus CMD: warning: ...". Pass a
 * prs_cli_progress as the planner's ud, set up by prs_cli_progress_init (wanted: not --quiet).
 * On a terminal the progress is a bar redrawn in place; otherwise (a log file, a batch job's
 * output) a line at every tenth of the run, once the run has taken a second. */
typedef struct prs_cli_progress {
    const char *cmd;
    const char *what, *unit; /* "planning", "steps" unless set after prs_cli_progress_init */
    int bar;                 /* stderr is a terminal */
    int lines;               /* stderr is not a terminal */
    int last_pct;            /* bar: last percentage drawn; lines: last tenth written (-1: none) */
    double start_s;
} prs_cli_progress;
void prs_cli_progress_init(prs_cli_progress *p, const char *cmd, int wanted);
int prs_cli_on_progress(void *ud, long done, long total);
void prs_cli_on_warn(void *ud, const char *msg);

/* The pipeline options (cli_pipeline.c), shared by plan, evaluate, emulate and plot savings.
 * A command lists the ones it takes in its getopt table (PRS_CLI_PIPELINE_OPTIONS, and
 * PRS_CLI_COST_MODEL_OPTION and PRS_CLI_FRONTIER_OPTIONS where it plans) and hands each one to
 * prs_cli_pipeline_option by its long name. */
enum {
    PRS_CLI_STAGES,
    PRS_CLI_MICROBATCHES,
    PRS_CLI_UNIT_TIME,
    PRS_CLI_BLOCKING_POWER,
    PRS_CLI_SCHEDULE,
    PRS_CLI_VIRTUAL_STAGES,
    PRS_CLI_COST_MODEL,
    PRS_CLI_FRONTIER,
    PRS_CLI_MAX_POINTS,
    PRS_CLI_THREADS,
    PRS_CLI_FORCE_UNITS,
    PRS_CLI_POLISH,
    PRS_CLI_CHANGE_COST,
    PRS_CLI_NPIPE
};
#define PRS_CLI_BIT(i) (1u << (i))
/* The options without which a pipeline cannot be planned. */
#define PRS_CLI_PIPELINE_REQUIRED                                                                  \
    (PRS_CLI_BIT(PRS_CLI_STAGES) | PRS_CLI_BIT(PRS_CLI_MICROBATCHES) |                             \
     PRS_CLI_BIT(PRS_CLI_UNIT_TIME) | PRS_CLI_BIT(PRS_CLI_BLOCKING_POWER))
/* getopt_long entries; VAL is the command's code for "a pipeline option". */
/* The help line of --change-cost-us, for the commands that take the pipeline options. */
#define PRS_CLI_CHANGE_COST_HELP                                                                   \
    "  --change-cost-us US    time a clock change adds before the computation that needs\n"        \
    "                         it, at blocking power (default 0: changes are free)\n"
#define PRS_CLI_PIPELINE_OPTIONS(val)                                                              \
    {"stages", required_argument, 0, (val)}, {"microbatches", required_argument, 0, (val)},        \
        {"unit-time", required_argument, 0, (val)},                                                \
        {"blocking-power", required_argument, 0, (val)},                                           \
        {"schedule", required_argument, 0, (val)},                                                 \
        {"virtual-stages", required_argument, 0, (val)},                                           \
    {                                                                                              \
        "change-cost-us", required_argument, 0, (val)                                              \
    }
#define PRS_CLI_COST_MODEL_OPTION(val)                                                             \
    {                                                                                              \
        "cost-model", required_argument, 0, (val)                                                  \
    }

/* --force-units: plan a profile whose figures do not look like seconds and joules
 * (prs_cli_profile_load), where the command plans from a profile (plan, emulate, noise). */
#define PRS_CLI_UNITS_OPTION(val)                                                                  \
    {                                                                                              \
        "force-units", no_argument, 0, (val)                                                       \
    }

/* --frontier auto|raw|clean, --max-points N, --threads N and --polish auto|none|runs|all, where
 * the command plans (plan, emulate). */
#define PRS_CLI_FRONTIER_OPTIONS(val)                                                              \
    {"frontier", required_argument, 0, (val)}, {"max-points", required_argument, 0, (val)},        \
        {"threads", required_argument, 0, (val)},                                                  \
    {                                                                                              \
        "polish", required_argument, 0, (val)                                                      \
    }

typedef struct prs_cli_pipeline {
    prs_plan_opts plan; /* the pipeline and the cost model, planner defaults where not given */
    unsigned given;     /* PRS_CLI_BIT(PRS_CLI_...) of every option given */
} prs_cli_pipeline;

void prs_cli_pipeline_init(prs_cli_pipeline *p);
/* Parse the value of the option NAME ("stages", without dashes) into p: 0, -1 on a bad value
 * (one line on stderr, "perseus CMD: ..."; exit status 2), 1 if NAME is not a pipeline option. */
int prs_cli_pipeline_option(const char *cmd, const char *name, const char *arg,
                            prs_cli_pipeline *p);
/* cli_profile.c: load the profile at path for pipe's model chunks into *out (the caller frees
 * it). Unless p was given --force-units, a profile whose times look like milliseconds (median
 * computation over 10 s) or whose energies over times give no GPU's power (median below 1 W or
 * above 100 kW) is refused, saying so. 0, or 2 with one line on stderr and *out NULL. */
int prs_cli_profile_load(const char *cmd, const char *path, const prs_cli_pipeline *p,
                         const prs_pipeline *pipe, prs_profile **out);
/* The first option of WHICH (PRS_CLI_BIT mask) not given, as "--stages", or NULL. */
const char *prs_cli_pipeline_missing(const prs_cli_pipeline *p, unsigned which);
/* The options given against a planned frontier's pipeline f (from DIR): 0 when every one
 * matches, else -1 with the first mismatch on stderr. */
int prs_cli_pipeline_match(const char *cmd, const prs_cli_pipeline *p, const prs_pipeline *f,
                           const char *dir);

/* The power-cap options (cli_powercap.c), shared by plan and emulate (docs/power.md). */
#define PRS_CLI_POWERCAP_OPTIONS(val)                                                              \
    {"power-cap", required_argument, 0, (val)}, {"cap-on", required_argument, 0, (val)},           \
        {"window", required_argument, 0, (val)}, {"cap-sweep", required_argument, 0, (val)},       \
    {                                                                                              \
        "cap-plot", required_argument, 0, (val)                                                    \
    }

typedef struct prs_cli_powercap {
    double cap_w;          /* --power-cap W per pipeline; 0: none */
    prs_cap_on on;         /* --cap-on */
    double window_s;       /* --window */
    int sweep;             /* --cap-sweep N; 0: none */
    const char *plot_path; /* --cap-plot FILE */
    int given;             /* power-cap options given */
} prs_cli_powercap;

/* The --help lines of the power-cap options, shared by plan and emulate. */
#define PRS_CLI_POWERCAP_HELP                                                                      \
    "  --power-cap W          the fastest frontier plan whose power (watts per pipeline, all\n"    \
    "                         its GPUs) is within W, beside the fastest uniform clock\n"           \
    "                         and a per-GPU power limit of W / GPUs at the same cap\n"             \
    "  --cap-on avg|peak      hold the cap on the average power (default) or on the peak\n"        \
    "                         over --window SEC (default 1), iterations back to back\n"            \
    "  --cap-sweep N          the same for N caps from the all-max plan's power down to\n"         \
    "                         the lowest plan's; --cap-plot FILE draws throughput vs cap\n"

void prs_cli_powercap_init(prs_cli_powercap *c);
/* As prs_cli_pipeline_option, for the power-cap options. */
int prs_cli_powercap_option(const char *cmd, const char *name, const char *arg,
                            prs_cli_powercap *c);
/* The usage error of an inconsistent combination, or NULL. */
const char *prs_cli_powercap_check(const prs_cli_powercap *c);
/* With --power-cap or --cap-sweep: each strategy's plan at the cap and the sweep, as tables on
 * stdout or, with json non-NULL, as its "power_cap" and "power_cap_sweep" keys; the plot. 0, or
 * the exit status (message printed). */
int prs_cli_powercap_run(const char *cmd, const prs_cli_powercap *c, const prs_profile *profile,
                         const prs_frontier *f, int tp, json_t *json);

/* The version of the CLI's JSON vocabulary (docs/json.md): the "schema" key, first in every
 * object a command prints. Raised when a key is removed or changes its meaning. */
#define PRS_CLI_JSON_SCHEMA 1

/* JSON output (jansson). Numbers are written so that they read back as the same doubles. */
/* A real, or null where x is not finite (JSON has no NaN or infinity). */
json_t *prs_cli_json_real(double x);
/* o[key] = prs_cli_json_real(x). */
void prs_cli_json_set_real(json_t *o, const char *key, double x);
/* Write v (taking the reference) to stdout with a newline, keys in insertion order. flags:
 * jansson's dump flags, e.g. JSON_INDENT(2) (else one line, ", " and ": " separators); reals
 * with 17 significant digits unless a JSON_REAL_PRECISION is given. Returns 0, or -1 when v is
 * NULL (not built) or could not be written. */
int prs_cli_json_print(json_t *v, size_t flags);

#endif
