/* "Did you mean": the closest known command or option to a mistyped one (cli.h). Closeness is
 * the edit distance (insertions, deletions, substitutions, and swaps of two neighbours, the
 * commonest typing slip); a suggestion is made only when it is unambiguous enough to help: at
 * most 2 edits, and fewer than half the word's length. */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"

#define WORD_MAX 64

/* Optimal string alignment distance between a and b (each at most WORD_MAX - 1 bytes). */
static int distance(const char *a, const char *b)
{
    size_t n = strlen(a), m = strlen(b);
    if (n >= WORD_MAX || m >= WORD_MAX) return WORD_MAX;
    int d[WORD_MAX][WORD_MAX];
    for (size_t i = 0; i <= n; i++)
        d[i][0] = (int)i;
    for (size_t j = 0; j <= m; j++)
        d[0][j] = (int)j;
    for (size_t i = 1; i <= n; i++)
        for (size_t j = 1; j <= m; j++) {
            int best = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
            if (d[i - 1][j] + 1 < best) best = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < best) best = d[i][j - 1] + 1;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
                d[i - 2][j - 2] + 1 < best)
                best = d[i - 2][j - 2] + 1;
            d[i][j] = best;
        }
    return d[n][m];
}

static int close_enough(const char *word, int dist)
{
    return dist <= 2 && 2 * dist < (int)strlen(word);
}

const char *prs_cli_suggest(const char *word, const char *const *candidates, size_t n)
{
    const char *best = NULL;
    int best_d = WORD_MAX;
    for (size_t i = 0; i < n; i++) {
        int dist = distance(word, candidates[i]);
        if (dist < best_d) {
            best_d = dist;
            best = candidates[i];
        }
    }
    return best && close_enough(word, best_d) ? best : NULL;
}

int prs_cli_unknown_option(const char *cmd, const char *arg, const struct option *opts)
{
    char name[WORD_MAX];
    const char *word = strncmp(arg, "--", 2) == 0 ? arg + 2 : arg;
    snprintf(name, sizeof name, "%.*s", (int)strcspn(word, "="), word);
    const char *best = NULL;
    int best_d = WORD_MAX;
    for (const struct option *o = opts; o && o->name; o++) {
        int dist = distance(name, o->name);
        if (dist < best_d) {
            best_d = dist;
            best = o->name;
        }
    }
    if (best && word != arg && close_enough(name, best_d))
        fprintf(stderr, "perseus %s: unknown option '%s' (did you mean '--%s'?)\n", cmd, arg, best);
    else
        fprintf(stderr, "perseus %s: unknown option '%s'\n", cmd, arg);
    return 2;
}
