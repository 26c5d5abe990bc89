/* "Did you mean" for command lines (suggest.c): internal to the programs, not exported. */
#ifndef PRS_BASE_SUGGEST_H
#define PRS_BASE_SUGGEST_H

#include <stddef.h>

/* Words longer than this are never close to anything. */
#define PRS_SUGGEST_WORD_MAX 64

/* Edit distance between a and b (optimal string alignment: a swap of two neighbours is one
 * edit); PRS_SUGGEST_WORD_MAX when either is that long or longer. */
int prs__edit_distance(const char *a, const char *b);
/* 1 when a candidate dist edits away from word is worth suggesting. */
int prs__suggest_close(const char *word, int dist);
/* The candidate closest to word, or NULL when none is close enough. */
const char *prs__suggest(const char *word, const char *const *candidates, size_t n);

#endif
