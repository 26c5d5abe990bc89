/* Strict readers of JSON fields, shared by the request parsers (request.c) and the job spec's
 * decoder (spec.c). Every failure returns PRS_EINVAL with a one-line printable message of fewer
 * than JF_MSG_MAX bytes in a prs_error, naming the field ("stages: expected an integer in
 * 1..1024"). An optional field that is absent leaves *out as it is (its default). */
#ifndef PRS_SERVER_JSONFIELD_H
#define PRS_SERVER_JSONFIELD_H

#include <stddef.h>

#include <jansson.h>

#include "perseus/error.h"

#define JF_MSG_MAX 256 /* bound of a message */

/* The one failure path: PRS_EINVAL with the message, made one printable line. */
int jf_fail(prs_error *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Parse text (len bytes) as one JSON object (new reference), or NULL with err. */
json_t *jf_load(const char *text, size_t len, prs_error *err);
/* Every key of obj must be in allowed (NULL-terminated); where: the object's name ("" at the
 * top). */
int jf_only_keys(json_t *obj, const char *where, const char *const *allowed, prs_error *err);
/* Integer field in [lo, hi]: required when req. */
int jf_long(json_t *obj, const char *key, int req, long lo, long hi, long *out, prs_error *err);
int jf_int(json_t *obj, const char *key, int req, long lo, long hi, int *out, prs_error *err);
/* Real field in [lo, hi] (lo excluded when open_lo): required when req. */
int jf_real(json_t *obj, const char *key, int req, double lo, int open_lo, double hi, double *out,
            prs_error *err);
/* A field of the object `parent` failed: its message names it as parent.field. PRS_EINVAL. */
int jf_in_object(const char *parent, prs_error *err);
/* Boolean field (optional). */
int jf_bool(json_t *obj, const char *key, int *out, prs_error *err);
/* String field of printable ASCII, at most max bytes, into out (max + 1 bytes) (optional). */
int jf_str(json_t *obj, const char *key, size_t max, char *out, prs_error *err);

#endif
