/* Helpers every perseus subcommand shares: one-line usage errors, strict option values, the
 * planner's progress and warnings on stderr, JSON on stdout (cli.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "perseus/clock.h"
#include "perseus/numfmt.h"

int prs_cli_usage_error(const char *cmd, const char *msg, const char *arg)
{
    if (arg)
        fprintf(stderr, "perseus %s: %s '%s'\n", cmd, msg, arg);
    else
        fprintf(stderr, "perseus %s: %s\n", cmd, msg);
    return 2;
}

int prs_cli_positive_int(const char *cmd, const char *opt, const char *v, int *out)
{
    if (prs_num_parse_int(v, out) != 0 || *out < 1) {
        fprintf(stderr, "perseus %s: %s: expected an integer >= 1, got '%s'\n", cmd, opt, v);
        return -1;
    }
    return 0;
}

int prs_cli_number(const char *cmd, const char *opt, const char *v, double min, int strict,
                   double *out)
{
    if (prs_num_parse_double(v, out) != 0 || (strict ? !(*out > min) : !(*out >= min))) {
        fprintf(stderr, "perseus %s: %s: expected a number %s %g, got '%s'\n", cmd, opt,
                strict ? ">" : ">=", min, v);
        return -1;
    }
    return 0;
}

/* Runs shorter than this say nothing on a log. */
#define PROGRESS_QUIET_S 1.0

void prs_cli_progress_init(prs_cli_progress *p, const char *cmd, int wanted)
{
    int tty = isatty(STDERR_FILENO);
    p->cmd = cmd;
    p->what = "planning";
    p->unit = "steps";
    p->bar = wanted && tty;
    p->lines = wanted && !tty;
    p->last_pct = -1;
    p->start_s = prs_mono_s();
}

/* Whether a run that began at start_s (prs_mono_s) is long enough to report on a log. */
static int progress_due(double start_s)
{
    return prs_mono_s() - start_s >= PROGRESS_QUIET_S;
}

int prs_cli_on_progress(void *ud, long done, long total)
{
    prs_cli_progress *p = ud;
    if (total <= 0 || !(p->bar || p->lines)) return 0;
    int pct = (int)(100.0 * (double)done / (double)total);
    if (pct > 100) pct = 100;
    if (p->lines) {
        if (pct / 10 <= p->last_pct || !progress_due(p->start_s)) return 0;
        p->last_pct = pct / 10;
        fprintf(stderr, "perseus %s: %s %d%% (%ld of %ld %s, %.1f s)\n", p->cmd, p->what, pct, done,
                total, p->unit, prs_mono_s() - p->start_s);
        return 0;
    }
    if (pct == p->last_pct) return 0;
    p->last_pct = pct;
    char bar[41];
    int filled = pct * 40 / 100;
    for (int i = 0; i < 40; i++)
        bar[i] = i < filled ? '#' : '.';
    bar[40] = '\0';
    fprintf(stderr, "\r%s [%s] %3d%% %ld/%ld", p->what, bar, pct, done, total);
    if (pct == 100) fputc('\n', stderr);
    fflush(stderr);
    return 0;
}

void prs_cli_on_warn(void *ud, const char *msg)
{
    const prs_cli_progress *p = ud;
    fprintf(stderr, "perseus %s: warning: %s\n", p->cmd, msg);
}

json_t *prs_cli_json_real(double x)
{
    return isfinite(x) ? json_real(x) : json_null();
}

void prs_cli_json_set_real(json_t *o, const char *key, double x)
{
    json_object_set_new(o, key, prs_cli_json_real(x));
}

int prs_cli_json_print(json_t *v, size_t flags)
{
    if (!(flags & JSON_REAL_PRECISION(31))) flags |= JSON_REAL_PRECISION(17);
    flags |= JSON_PRESERVE_ORDER;
    char *dump = v ? json_dumps(v, flags) : NULL;
    char *text = dump ? prs_num_json_shortest(dump) : NULL;
    int rc = text && fputs(text, stdout) != EOF && putchar('\n') != EOF ? 0 : -1;
    free(dump);
    free(text);
    json_decref(v);
    return rc;
}
