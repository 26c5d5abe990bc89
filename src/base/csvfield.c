/* Fields of one CSV line (csvfield.h): the splitting, trimming and quoting rules, and the excerpt
 * of a field that error messages quote, written once for every reader of the project's CSV
 * formats. */
#include "csvfield.h"

#include <limits.h>
#include <string.h>

int prs__csv_blank(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f';
}

const char *prs__csv_excerpt(char *buf, size_t n, const char *s)
{
    static const char hex[] = "0123456789abcdef";
    size_t o = 0, i = 0;
    for (; i < 40 && s[i] && o + 5 < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c < 0x20 || c >= 0x7f || c == '\'' || c == '\\') {
            buf[o++] = '\\';
            buf[o++] = 'x';
            buf[o++] = hex[c >> 4];
            buf[o++] = hex[c & 15];
        } else {
            buf[o++] = (char)c;
        }
    }
    buf[o] = '\0';
    if (s[i] && o + 4 < n) memcpy(buf + o, "...", 4);
    return buf;
}

/* A quoted field from s (at its opening quote): its text in [*start, *end), *next at the comma
 * or end after it; NULL or the problem. */
static const char *quoted(char *s, char **start, char **end, char **next)
{
    *start = s + 1;
    char *q = strchr(*start, '"');
    if (!q) return "unterminated quoted field";
    *end = q;
    *next = q + 1;
    while (prs__csv_blank(**next))
        (*next)++;
    if (**next == '"') return "quote inside a quoted field (\"\" escapes are not supported)";
    if (**next != ',' && **next != '\0') return "unexpected text after a quoted field";
    while (*start < *end && prs__csv_blank(**start))
        (*start)++;
    return NULL;
}

const char *prs__csv_split(char *line, char **fields, int max, int *nfields)
{
    int n = 0;
    char *s = line;
    for (;;) {
        while (prs__csv_blank(*s))
            s++;
        char *start, *end, *next;
        if (*s == '"') {
            const char *problem = quoted(s, &start, &end, &next);
            if (problem) return problem;
        } else {
            start = s;
            next = s + strcspn(s, ",\"");
            if (*next == '"') return "unexpected quote inside an unquoted field";
            end = next;
        }
        while (end > start && prs__csv_blank(end[-1]))
            end--;
        if (n < max) fields[n] = start;
        if (n < INT_MAX) n++;
        char sep = *next;
        *end = '\0';
        if (sep == '\0') break;
        s = next + 1;
    }
    *nfields = n;
    return NULL;
}
