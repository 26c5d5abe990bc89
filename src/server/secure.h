/* Small security primitives of the server: SHA-256 (FIPS 180-4), a constant-time comparison,
 * random bytes from the kernel and URL-safe base64 (RFC 4648 §5, no padding) for server-made job
 * ids and bearer tokens. Fallible calls return 0 or a negative PRS_E* code with details in a
 * prs_error (perseus/error.h). */
#ifndef PRS_SERVER_SECURE_H
#define PRS_SERVER_SECURE_H

#include <stddef.h>
#include <stdint.h>

#include "perseus/error.h"

#define SECURE_SHA256_LEN 32

/* SHA-256 of len bytes at data into out[32]. */
void secure_sha256(const void *data, size_t len, uint8_t out[SECURE_SHA256_LEN]);

/* SHA-256 of len bytes at data as 64 lowercase hex digits into out (NUL-terminated). */
void secure_sha256_hex(const void *data, size_t len, char out[2 * SECURE_SHA256_LEN + 1]);

/* 1 when a[0..n) == b[0..n), else 0; the time taken depends on n only. */
int secure_equal(const void *a, const void *b, size_t n);

/* Fill buf with n bytes from /dev/urandom. 0, or PRS_EIO with err saying why. */
int secure_random(void *buf, size_t n, prs_error *err);

/* URL-safe base64 of n bytes into out (4*ceil(n/3) + 1 bytes is always enough), NUL-terminated,
 * no padding. Returns the text length. */
size_t secure_b64url(const uint8_t *in, size_t n, char *out);

/* Job ids: 16 base64url characters (12 random bytes); tokens: 43 characters (32 random bytes). */
#define SECURE_ID_LEN 16
#define SECURE_TOKEN_LEN 43
/* New random id / token into out (SECURE_*_LEN + 1 bytes; an id begins with a letter or a
 * digit). 0, or PRS_EIO (no randomness). */
int secure_new_id(char out[SECURE_ID_LEN + 1], prs_error *err);
int secure_new_token(char out[SECURE_TOKEN_LEN + 1], prs_error *err);
/* 1 when s is exactly SECURE_ID_LEN base64url characters (what a job id looks like), else 0. */
int secure_is_id(const char *s, size_t len);

#endif
