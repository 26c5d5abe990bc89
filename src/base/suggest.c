/* "Did you mean": the closest known command or option to a mistyped one, for every program's
 * command line (suggest.h). Closeness is the edit distance (insertions, deletions,
 * substitutions, and swaps of two neighbours, the commonest typing slip); a suggestion is made
 * only when it is unambiguous enough to help: at most 2 edits, and fewer than half the word's
 * length. */
#include "suggest.h"

#include <string.h>

/* Optimal string alignment distance between a and b (each at most PRS_SUGGEST_WORD_MAX - 1 bytes).
 */
int prs__edit_distance(const char *a, const char *b)
{
    size_t n = strlen(a), m = strlen(b);
    if (n >= PRS_SUGGEST_WORD_MAX || m >= PRS_SUGGEST_WORD_MAX) return PRS_SUGGEST_WORD_MAX;
    int d[PRS_SUGGEST_WORD_MAX][PRS_SUGGEST_WORD_MAX];
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

int prs__suggest_close(const char *word, int dist)
{
    return dist <= 2 && 2 * dist < (int)strlen(word);
}

const char *prs__suggest(const char *word, const char *const *candidates, size_t n)
{
    const char *best = NULL;
    int best_d = PRS_SUGGEST_WORD_MAX;
    for (size_t i = 0; i < n; i++) {
        int dist = prs__edit_distance(word, candidates[i]);
        if (dist < best_d) {
            best_d = dist;
            best = candidates[i];
        }
    }
    return best && prs__suggest_close(word, best_d) ? best : NULL;
}
