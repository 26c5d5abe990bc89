/* Fields of one CSV line, as the project's readers take them (csvfield.c): internal to the
 * library, shared by the stage-profile reader (src/core/profile.c) and the inference-profile
 * reader (src/infer/profile.c). */
#ifndef PRS_BASE_CSVFIELD_H
#define PRS_BASE_CSVFIELD_H

#include <stddef.h>

/* Space, tab, carriage return, vertical tab or form feed. */
int prs__csv_blank(char c);
/* A field for a message, in buf (n bytes, at least 8): its first 40 bytes, printable ASCII only
 * (anything else, quote and backslash as \xNN) and "..." when cut, so a message stays one clean
 * line even inside JSON. Returns buf. */
const char *prs__csv_excerpt(char *buf, size_t n, const char *s);
/* Split a NUL-terminated line in place on commas into fields, trimmed of blanks, a field in
 * double quotes unquoted ("" escapes are not supported); at most max pointers are stored in
 * fields, *nfields gets the true count. Returns NULL, or what is wrong with the quoting. */
const char *prs__csv_split(char *line, char **fields, int max, int *nfields);

#endif
