/* Output paths of the CLI (cli.h): a --out directory or file may name folders that do not exist
 * yet; they are created, as 'mkdir -p' would, before anything is written. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"

/* One folder: created, or already a directory; 0 or -1 with errno set. */
static int make_one(const char *path)
{
    if (mkdir(path, 0777) == 0) return 0;
    if (errno != EEXIST) return -1;
    struct stat st;
    if (stat(path, &st) != 0) return -1;
    if (S_ISDIR(st.st_mode)) return 0;
    errno = ENOTDIR;
    return -1;
}

/* mkdir -p on buf (cut at each '/' in turn, then restored); 0 or -1 with errno set. */
static int make_dirs(char *buf)
{
    size_t len = strlen(buf);
    for (size_t i = 1; i <= len; i++) {
        if (buf[i] != '/' && buf[i] != '\0') continue;
        if (buf[i - 1] == '/') continue; /* "a//b" */
        char saved = buf[i];
        buf[i] = '\0';
        int rc = make_one(buf);
        buf[i] = saved;
        if (rc) return -1;
    }
    return 0;
}

int prs_cli_make_dir(const char *cmd, const char *dir)
{
    char *buf = strdup(dir);
    if (!buf) {
        fprintf(stderr, "perseus %s: out of memory\n", cmd);
        return -1;
    }
    int rc = make_dirs(buf);
    if (rc)
        fprintf(stderr, "perseus %s: cannot create directory '%s': %s\n", cmd, dir,
                strerror(errno));
    free(buf);
    return rc;
}

int prs_cli_make_parent(const char *cmd, const char *file)
{
    const char *slash = strrchr(file, '/');
    if (!slash || slash == file) return 0;
    char *buf = strndup(file, (size_t)(slash - file));
    if (!buf) {
        fprintf(stderr, "perseus %s: out of memory\n", cmd);
        return -1;
    }
    int rc = make_dirs(buf);
    if (rc)
        fprintf(stderr, "perseus %s: cannot create directory '%s' for '%s': %s\n", cmd, buf, file,
                strerror(errno));
    free(buf);
    return rc;
}
