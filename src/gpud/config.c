/* perseus-gpud access config: who may lease which GPUs.
 *
 *   # comment
 *   allow user NAME GPUS     allow uid N GPUS
 *   allow group NAME GPUS    allow gid N GPUS
 * GPUS is "all" or a comma-separated list of GPU indices and UUIDs. Names are resolved when the
 * file is read (an unknown name is an error, like any malformed line, reported as FILE:LINE).
 * A user matches uid rules by uid and gid rules by primary or supplementary group; uid 0 always
 * may lease. Lines are at most GPUD_CONF_LINE_MAX bytes, rules at most GPUD_CONF_RULES_MAX. */
#define _GNU_SOURCE /* getgrouplist */
#include <ctype.h>
#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "gpud.h"

/* Record an error and evaluate to its code: prs_error_set's result, visibly non-zero to static
 * analysis (which cannot see into error.c). */
#define FAIL(err, code, ...) (prs_error_set((err), (code), __VA_ARGS__), (code))

void gpud_config_free(gpud_config *c)
{
    for (int i = 0; i < c->n; i++)
        free(c->rules[i].gpus);
    free(c->rules);
    memset(c, 0, sizeof *c);
}

static int parse_uint(const char *s, unsigned long max, unsigned long *out)
{
    if (!*s || strlen(s) > 10) return -1;
    unsigned long v = 0;
    for (; *s; s++) {
        if (!isdigit((unsigned char)*s)) return -1;
        v = v * 10 + (unsigned long)(*s - '0');
    }
    if (v > max) return -1;
    *out = v;
    return 0;
}

/* One item of a GPU list: a decimal index or "GPU-" and hex digits and dashes. */
static int gpu_item_ok(const char *s, size_t len)
{
    if (len == 0 || len > 90) return 0;
    if (len > 4 && strncmp(s, "GPU-", 4) == 0) {
        for (size_t i = 4; i < len; i++)
            if (!isxdigit((unsigned char)s[i]) && s[i] != '-') return 0;
        return 1;
    }
    if (len > 4) return 0;
    for (size_t i = 0; i < len; i++)
        if (!isdigit((unsigned char)s[i])) return 0;
    return 1;
}

static int gpu_list_ok(const char *s)
{
    if (strcmp(s, "all") == 0) return 1;
    for (;;) {
        const char *comma = strchr(s, ',');
        size_t len = comma ? (size_t)(comma - s) : strlen(s);
        if (!gpu_item_ok(s, len)) return 0;
        if (!comma) return 1;
        s = comma + 1;
    }
}

/* The id a rule's WHO names; kind is user, group, uid or gid. */
static int resolve_who(const char *kind, const char *who, const char *name, int line, unsigned *id,
                       prs_error *err)
{
    unsigned long v;
    if (strcmp(kind, "uid") == 0 || strcmp(kind, "gid") == 0) {
        if (parse_uint(who, 4294967294ul, &v))
            return FAIL(err, PRS_EPARSE, "%s:%d: expected a numeric %s, got '%.64s'", name, line,
                        kind, who);
        *id = (unsigned)v;
        return 0;
    }
    if (strcmp(kind, "user") == 0) {
        struct passwd *pw = getpwnam(who);
        if (!pw) return FAIL(err, PRS_EPARSE, "%s:%d: unknown user '%.64s'", name, line, who);
        *id = (unsigned)pw->pw_uid;
        return 0;
    }
    struct group *gr = getgrnam(who);
    if (!gr) return FAIL(err, PRS_EPARSE, "%s:%d: unknown group '%.64s'", name, line, who);
    *id = (unsigned)gr->gr_gid;
    return 0;
}

/* Split a line (comment already cut) into at most 5 whitespace-separated words. */
static int split_words(char *s, char **w)
{
    int n = 0;
    for (char *tok = strtok(s, " \t\r"); tok; tok = strtok(NULL, " \t\r"))
        if (n < 5)
            w[n++] = tok;
        else
            return 6;
    return n;
}

static int parse_rule(char *text, const char *name, int line, gpud_rule *r, prs_error *err)
{
    char *w[5];
    int n = split_words(text, w);
    if (n == 0) return 1; /* blank */
    if (strcmp(w[0], "allow") != 0)
        return FAIL(err, PRS_EPARSE, "%s:%d: expected 'allow', got '%.64s'", name, line, w[0]);
    if (n != 4)
        return FAIL(err, PRS_EPARSE,
                    "%s:%d: expected 'allow user|group|uid|gid WHO GPUS' (4 words), "
                    "got %s%d",
                    name, line, n > 5 ? "more than " : "", n > 5 ? 5 : n);
    const char *kind = w[1];
    if (strcmp(kind, "user") != 0 && strcmp(kind, "group") != 0 && strcmp(kind, "uid") != 0 &&
        strcmp(kind, "gid") != 0)
        return FAIL(err, PRS_EPARSE,
                    "%s:%d: expected user, group, uid or gid after 'allow', got '%.64s'", name,
                    line, kind);
    if (!gpu_list_ok(w[3]))
        return FAIL(err, PRS_EPARSE,
                    "%s:%d: expected 'all' or comma-separated GPU indices or GPU-UUIDs, "
                    "got '%.64s'",
                    name, line, w[3]);
    int rc = resolve_who(kind, w[2], name, line, &r->id, err);
    if (rc) return rc;
    r->is_group = kind[0] == 'g';
    r->line = line;
    r->gpus = NULL;
    if (strcmp(w[3], "all") != 0 && !(r->gpus = strdup(w[3])))
        return FAIL(err, PRS_ENOMEM, "out of memory");
    return 0;
}

/* Read one line into buf (GPUD_CONF_LINE_MAX + 1 bytes): 1: a line, 0: the end, negative: a
 * line too long, a control character or a read error. */
static int read_line(FILE *f, char *buf, const char *name, int line, prs_error *err)
{
    size_t len = 0;
    int ch;
    while ((ch = getc(f)) != EOF && ch != '\n') {
        if ((ch < 0x20 && ch != '\t' && ch != '\r') || ch == 0x7f)
            return FAIL(err, PRS_EPARSE, "%s:%d: control character 0x%02x", name, line, ch);
        if (len == GPUD_CONF_LINE_MAX)
            return FAIL(err, PRS_EPARSE, "%s:%d: line longer than %d bytes", name, line,
                        GPUD_CONF_LINE_MAX);
        buf[len++] = (char)ch;
    }
    buf[len] = '\0';
    if (ferror(f)) return FAIL(err, PRS_EIO, "%s: read error", name);
    return ch == EOF && len == 0 ? 0 : 1;
}

static int add_rule(gpud_config *out, const gpud_rule *r, const char *name, int line,
                    prs_error *err)
{
    if (out->n >= GPUD_CONF_RULES_MAX)
        return FAIL(err, PRS_EPARSE, "%s:%d: more than %d rules", name, line, GPUD_CONF_RULES_MAX);
    if (out->n % 64 == 0) {
        gpud_rule *grown = realloc(out->rules, sizeof *grown * (size_t)(out->n + 64));
        if (!grown) return FAIL(err, PRS_ENOMEM, "out of memory");
        out->rules = grown;
    }
    out->rules[out->n++] = *r;
    return 0;
}

int gpud_config_read(FILE *f, const char *name, gpud_config *out, prs_error *err)
{
    memset(out, 0, sizeof *out);
    snprintf(out->path, sizeof out->path, "%s", name);
    char *buf = malloc(GPUD_CONF_LINE_MAX + 1);
    if (!buf) return FAIL(err, PRS_ENOMEM, "out of memory");
    int rc = 0;
    for (int line = 1;; line++) {
        rc = read_line(f, buf, name, line, err);
        if (rc <= 0) break;
        char *hash = strchr(buf, '#');
        if (hash) *hash = '\0';
        gpud_rule r;
        rc = parse_rule(buf, name, line, &r, err);
        if (rc == 1) continue;
        if (rc) break;
        if ((rc = add_rule(out, &r, name, line, err))) {
            free(r.gpus);
            break;
        }
    }
    free(buf);
    if (rc < 0) {
        gpud_config_free(out);
        return rc;
    }
    out->present = 1;
    return 0;
}

int gpud_config_load(const char *path, gpud_config *out, prs_error *err)
{
    memset(out, 0, sizeof *out);
    FILE *f = fopen(path, "r");
    if (!f) {
        if (errno == ENOENT) {
            snprintf(out->path, sizeof out->path, "%s", path);
            return 0;
        }
        return FAIL(err, PRS_EIO, "%s: %s", path, strerror(errno));
    }
    int rc = gpud_config_read(f, path, out, err);
    fclose(f);
    return rc;
}

static int rule_covers(const gpud_rule *r, int gpu_index, const char *uuid)
{
    if (!r->gpus) return 1;
    char idx[16];
    snprintf(idx, sizeof idx, "%d", gpu_index);
    for (const char *s = r->gpus;;) {
        const char *comma = strchr(s, ',');
        size_t len = comma ? (size_t)(comma - s) : strlen(s);
        if ((len == strlen(idx) && strncmp(s, idx, len) == 0) ||
            (uuid && len == strlen(uuid) && strncasecmp(s, uuid, len) == 0))
            return 1;
        if (!comma) return 0;
        s = comma + 1;
    }
}

int gpud_config_allows(const gpud_config *c, unsigned uid, const unsigned *gids, int ngids,
                       int gpu_index, const char *uuid)
{
    if (uid == 0) return 1;
    for (int i = 0; i < c->n; i++) {
        const gpud_rule *r = &c->rules[i];
        int who = !r->is_group && r->id == uid;
        for (int k = 0; r->is_group && k < ngids && !who; k++)
            who = gids[k] == r->id;
        if (who && rule_covers(r, gpu_index, uuid)) return 1;
    }
    return 0;
}

int gpud_user_groups(unsigned uid, unsigned gid, unsigned *gids, int cap)
{
    gids[0] = gid;
    struct passwd *pw = getpwuid((uid_t)uid);
    if (!pw || cap < 2) return 1;
    gid_t list[256];
    int n = 256;
    if (getgrouplist(pw->pw_name, (gid_t)gid, list, &n) < 0) n = 256;
    int out = 1;
    for (int i = 0; i < n && out < cap; i++)
        if ((unsigned)list[i] != gid) gids[out++] = (unsigned)list[i];
    return out;
}
