/* Helpers every perseus subcommand shares: one-line usage errors, strict option values, the
 * planner's progress bar and warnings on stderr, JSON on stdout (cli.h). */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
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

void prs_cli_on_progress(void *ud, long done, long total)
{
    prs_cli_progress *p = ud;
    if (!p->enabled || total <= 0) return;
    int pct = (int)(100.0 * (double)done / (double)total);
    if (pct > 100) pct = 100;
    if (pct == p->last_pct) return;
    p->last_pct = pct;
    char bar[41];
    int filled = pct * 40 / 100;
    for (int i = 0; i < 40; i++)
        bar[i] = i < filled ? '#' : '.';
    bar[40] = '\0';
    fprintf(stderr, "\rplanning [%s] %3d%% %ld/%ld", bar, pct, done, total);
    if (pct == 100) fputc('\n', stderr);
    fflush(stderr);
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

/* Write the JSON text s with every real number in its shortest form that reads back as the same
 * double ("938.6006994736958", not jansson's 17 digits "938.60069947369584"); strings and
 * integers as they are. */
static int put_shortest_reals(const char *s, FILE *out)
{
    int in_str = 0;
    for (const char *p = s; *p;) {
        if (in_str) {
            if (*p == '\\' && p[1])
                putc(*p++, out);
            else if (*p == '"')
                in_str = 0;
            putc(*p++, out);
            continue;
        }
        if (*p == '"') in_str = 1;
        if (*p != '-' && !isdigit((unsigned char)*p)) {
            putc(*p++, out);
            continue;
        }
        size_t n = strspn(p, "+-0123456789.eE");
        char tok[64], num[PRS_NUMFMT_MAX];
        int real = n < sizeof tok && strcspn(p, ".eE") < n;
        if (real) {
            memcpy(tok, p, n);
            tok[n] = '\0';
            fputs(prs_num_fmt_double(num, sizeof num, strtod(tok, NULL)), out);
        } else {
            fwrite(p, 1, n, out);
        }
        p += n;
    }
    return ferror(out) ? -1 : 0;
}

int prs_cli_json_print(json_t *v, size_t flags)
{
    if (!(flags & JSON_REAL_PRECISION(31))) flags |= JSON_REAL_PRECISION(17);
    flags |= JSON_PRESERVE_ORDER;
    char *text = v ? json_dumps(v, flags) : NULL;
    int rc = text && put_shortest_reals(text, stdout) == 0 && putchar('\n') != EOF ? 0 : -1;
    free(text);
    json_decref(v);
    return rc;
}
