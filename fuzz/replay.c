/* Replays fuzz inputs without libFuzzer: feeds every regular file named on the command line, or
 * found directly inside a directory named there, to LLVMFuzzerTestOneInput (in name order, each in
 * an exactly-sized heap buffer so sanitizers see overreads). CTest runs it over the checked-in
 * corpus. Exits 0 when all inputs ran; non-zero on a usage or I/O error or when there was no input
 * at all (an empty corpus is a mistake, not a pass). A crashing input ends the process. */
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Reads the whole file and runs it; 0 on success, -1 on an I/O error. */
static int run_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "replay: %s: %s\n", path, strerror(errno));
        return -1;
    }
    size_t len = 0, cap = 4096;
    uint8_t *buf = malloc(cap);
    int rc = 0;
    for (;;) {
        if (!buf) {
            fprintf(stderr, "replay: %s: out of memory\n", path);
            rc = -1;
            break;
        }
        len += fread(buf + len, 1, cap - len, f);
        if (len < cap) break;
        uint8_t *grown = cap <= SIZE_MAX / 2 ? realloc(buf, cap * 2) : NULL;
        if (!grown) free(buf);
        buf = grown;
        cap *= 2;
    }
    if (rc == 0 && ferror(f)) {
        fprintf(stderr, "replay: %s: read error\n", path);
        rc = -1;
    }
    fclose(f);
    if (rc == 0) {
        /* Exact-size copy: any read past len is a heap overflow the sanitizers catch. */
        uint8_t *exact = malloc(len ? len : 1);
        if (!exact) {
            fprintf(stderr, "replay: %s: out of memory\n", path);
            rc = -1;
        } else {
            memcpy(exact, buf, len);
            LLVMFuzzerTestOneInput(exact, len);
            free(exact);
        }
    }
    free(buf);
    return rc;
}

static int cmp_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Runs every regular file directly inside dir; adds to *count. */
static int run_dir(const char *dir, long *count)
{
    DIR *d = opendir(dir);
    if (!d) {
        fprintf(stderr, "replay: %s: %s\n", dir, strerror(errno));
        return -1;
    }
    char **names = NULL;
    size_t n = 0, cap = 0;
    int rc = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        size_t plen = strlen(dir) + 1 + strlen(e->d_name) + 1;
        char *path = malloc(plen);
        if (n == cap) {
            size_t ncap = cap ? cap * 2 : 64;
            char **grown = realloc(names, ncap * sizeof *names);
            if (grown) {
                names = grown;
                cap = ncap;
            }
        }
        if (!path || n == cap) {
            free(path);
            fprintf(stderr, "replay: out of memory\n");
            rc = -1;
            break;
        }
        snprintf(path, plen, "%s/%s", dir, e->d_name);
        names[n++] = path;
    }
    closedir(d);
    if (n > 0) qsort(names, n, sizeof *names, cmp_names);
    for (size_t i = 0; i < n; i++) {
        struct stat st;
        if (rc == 0 && stat(names[i], &st) == 0 && S_ISREG(st.st_mode)) {
            if (run_file(names[i]) != 0)
                rc = -1;
            else
                (*count)++;
        }
        free(names[i]);
    }
    free(names);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s DIR_OR_FILE...\n", argv[0]);
        return 2;
    }
    long count = 0;
    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) != 0) {
            fprintf(stderr, "replay: %s: %s\n", argv[i], strerror(errno));
            return 1;
        }
        int rc;
        if (S_ISDIR(st.st_mode)) {
            rc = run_dir(argv[i], &count);
        } else {
            rc = run_file(argv[i]);
            if (rc == 0) count++;
        }
        if (rc != 0) return 1;
    }
    if (count == 0) {
        fprintf(stderr, "replay: no input files found\n");
        return 1;
    }
    printf("replay: %ld inputs ran\n", count);
    return 0;
}
