/* Command-line errors for perseus-router, perseus-fakeserve and perseus-instclock (cmdline.h),
 * with the project's "did you mean" (src/base/suggest.h). */
#include "cmdline.h"

#include <stdio.h>
#include <string.h>

#include "suggest.h"

#define MAX_OPTS 64

int prs__cmdline_bad(const char *prog, const struct option *opts, int ch, char *const *argv)
{
    const char *arg = argv[optind - 1];
    if (ch == ':') {
        fprintf(stderr, "%s: option %s needs a value\n", prog, arg);
        return 2;
    }
    char names[MAX_OPTS][PRS_SUGGEST_WORD_MAX];
    const char *cands[MAX_OPTS];
    size_t n = 0;
    for (; opts[n].name && n < MAX_OPTS; n++) {
        snprintf(names[n], sizeof names[n], "--%s", opts[n].name);
        cands[n] = names[n];
    }
    char word[PRS_SUGGEST_WORD_MAX];
    snprintf(word, sizeof word, "%.*s", (int)strcspn(arg, "="), arg);
    const char *near = prs__suggest(word, cands, n);
    if (near)
        fprintf(stderr, "%s: unknown option '%s' (did you mean '%s'?)\n", prog, word, near);
    else
        fprintf(stderr, "%s: unknown option '%s' (see %s --help)\n", prog, word, prog);
    return 2;
}
