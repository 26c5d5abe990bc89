/* "Did you mean" for the perseus command line (cli.h), on the programs' shared edit distance
 * (src/base/suggest.c). */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "suggest.h"

const char *prs_cli_suggest(const char *word, const char *const *candidates, size_t n)
{
    return prs__suggest(word, candidates, n);
}

int prs_cli_unknown_option(const char *cmd, const char *arg, const struct option *opts)
{
    char name[PRS_SUGGEST_WORD_MAX];
    const char *word = strncmp(arg, "--", 2) == 0 ? arg + 2 : arg;
    snprintf(name, sizeof name, "%.*s", (int)strcspn(word, "="), word);
    const char *best = NULL;
    int best_d = PRS_SUGGEST_WORD_MAX;
    for (const struct option *o = opts; o && o->name; o++) {
        int dist = prs__edit_distance(name, o->name);
        if (dist < best_d) {
            best_d = dist;
            best = o->name;
        }
    }
    if (best && word != arg && prs__suggest_close(name, best_d))
        fprintf(stderr, "perseus %s: unknown option '%s' (did you mean '--%s'?)\n", cmd, arg, best);
    else
        fprintf(stderr, "perseus %s: unknown option '%s'\n", cmd, arg);
    return 2;
}
