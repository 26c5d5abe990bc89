/* Reading a whole file to a bound (readfile.h): the buffer doubles from 64 KiB up to one byte past
 * the bound, so a file of any size (or /dev/zero) costs at most max + 1 bytes and one refusal. */
#include "readfile.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int prs__read_bounded(const char *path, size_t max, const char *limit, char **text, size_t *len,
                      prs_error *err)
{
    *text = NULL;
    *len = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return prs_error_set(err, PRS_EIO, "%s: cannot open: %s", path, strerror(errno));
    char *buf = NULL;
    size_t n = 0, cap = 0;
    int rc = PRS_OK;
    for (;;) {
        if (n > max) { /* one byte past the limit read: never more */
            rc = prs_error_set(err, PRS_EPARSE, "%s: larger than %zu bytes (%s)", path, max, limit);
            break;
        }
        if (n == cap) {
            size_t ncap = cap ? cap * 2 : 65536;
            if (ncap > max + 1) ncap = max + 1;
            char *t = realloc(buf, ncap);
            if (!t) {
                rc = prs_error_set(err, PRS_ENOMEM, "%s: out of memory", path);
                break;
            }
            buf = t;
            cap = ncap;
        }
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0) {
            if (ferror(f))
                rc = prs_error_set(err, PRS_EIO, "%s: read error: %s", path, strerror(errno));
            break;
        }
    }
    fclose(f);
    if (rc != PRS_OK) {
        free(buf);
        return rc;
    }
    *text = buf;
    *len = n;
    return PRS_OK;
}
