/* Strict readers of JSON fields (jsonfield.h): jansson parses the text (JSON_REJECT_DUPLICATES;
 * its default end-of-input check rejects trailing data); the readers then accept exactly the
 * documented type and range. Integers must be JSON integers (1.0 is not a rank), reals may be
 * integers or reals but must be finite (jansson never produces NaN or infinity from text; the
 * checks stay for values built in code). */
#include "jsonfield.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* The one failure path: PRS_EINVAL with a message of at most JF_MSG_MAX - 1 bytes. */
int jf_fail(prs_error *err, const char *fmt, ...)
{
    char msg[JF_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    /* One line, printable: a message may quote a key from the request. */
    for (char *p = msg; *p; p++)
        if ((unsigned char)*p < 0x20 || (unsigned char)*p >= 0x7f) *p = '?';
    return prs_error_set(err, PRS_EINVAL, "%s", msg);
}

json_t *jf_load(const char *text, size_t len, prs_error *err)
{
    json_error_t je;
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
    if (!root) {
        jf_fail(err, "malformed JSON at line %d column %d: %s", je.line, je.column, je.text);
        return NULL;
    }
    if (!json_is_object(root)) {
        json_decref(root);
        jf_fail(err, "expected a JSON object");
        return NULL;
    }
    return root;
}

/* Every key of obj must be in allowed (NULL-terminated). */
int jf_only_keys(json_t *obj, const char *where, const char *const *allowed, prs_error *err)
{
    const char *key;
    json_t *v;
    json_object_foreach(obj, key, v)
    {
        int ok = 0;
        for (const char *const *a = allowed; *a; a++)
            if (strcmp(key, *a) == 0) ok = 1;
        if (!ok) {
            char k[48];
            snprintf(k, sizeof k, "%s", key);
            return jf_fail(err, "%s%sunknown field '%s'", where, *where ? ": " : "", k);
        }
    }
    return 0;
}

/* Integer field: required when req, else *out keeps its default when absent. */
int jf_long(json_t *obj, const char *key, int req, long lo, long hi, long *out, prs_error *err)
{
    json_t *v = json_object_get(obj, key);
    if (!v) return req ? jf_fail(err, "%s: required", key) : 0;
    if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi)
        return jf_fail(err, "%s: expected an integer in %ld..%ld", key, lo, hi);
    *out = (long)json_integer_value(v);
    return 0;
}

int jf_int(json_t *obj, const char *key, int req, long lo, long hi, int *out, prs_error *err)
{
    long v = *out;
    if (jf_long(obj, key, req, lo, hi, &v, err)) return PRS_EINVAL;
    *out = (int)v;
    return 0;
}

/* Real field in [lo, hi] (lo excluded when open_lo). */
int jf_real(json_t *obj, const char *key, int req, double lo, int open_lo, double hi, double *out,
            prs_error *err)
{
    json_t *v = json_object_get(obj, key);
    if (!v) return req ? jf_fail(err, "%s: required", key) : 0;
    double x = json_is_number(v) ? json_number_value(v) : NAN;
    if (!isfinite(x) || (open_lo ? !(x > lo) : !(x >= lo)) || x > hi)
        return jf_fail(err, "%s: expected a number %s %g and <= %g", key, open_lo ? ">" : ">=", lo,
                       hi);
    *out = x;
    return 0;
}

/* A field of the object `parent` failed: its message names it as parent.field (only_keys'
 * messages already start with the parent). */
int jf_in_object(const char *parent, prs_error *err)
{
    size_t n = strlen(parent);
    if (strncmp(err->msg, parent, n) == 0) return PRS_EINVAL;
    char msg[sizeof err->msg];
    snprintf(msg, sizeof msg, "%s", err->msg);
    return prs_error_set(err, PRS_EINVAL, "%s.%s", parent, msg);
}

int jf_bool(json_t *obj, const char *key, int *out, prs_error *err)
{
    json_t *v = json_object_get(obj, key);
    if (!v) return 0;
    if (!json_is_boolean(v)) return jf_fail(err, "%s: expected true or false", key);
    *out = json_is_true(v);
    return 0;
}

/* String of printable ASCII, at most max bytes. */
int jf_str(json_t *obj, const char *key, size_t max, char *out, prs_error *err)
{
    json_t *v = json_object_get(obj, key);
    if (!v) return 0;
    if (!json_is_string(v)) return jf_fail(err, "%s: expected a string", key);
    size_t n = json_string_length(v);
    const char *s = json_string_value(v);
    if (n > max) return jf_fail(err, "%s: longer than %zu bytes", key, max);
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] < 0x20 || (unsigned char)s[i] >= 0x7f)
            return jf_fail(err, "%s: only printable ASCII is allowed", key);
    memcpy(out, s, n);
    out[n] = '\0';
    return 0;
}
