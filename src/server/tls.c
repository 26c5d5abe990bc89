/* perseusd's TLS certificate and key (tls.h). */
#define _DEFAULT_SOURCE /* explicit_bzero */
#include "tls.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The whole of a PEM file, or NULL with err set. */
static char *read_pem(const char *what, const char *path, prs_error *err)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        prs_error_set(err, PRS_EIO, "%s %s: %s", what, path, strerror(errno));
        return NULL;
    }
    char *buf = malloc(TLS_MAX_PEM_BYTES + 1);
    size_t n = buf ? fread(buf, 1, TLS_MAX_PEM_BYTES + 1, f) : 0;
    int bad = ferror(f);
    fclose(f);
    if (!buf) {
        prs_error_set(err, PRS_ENOMEM, "out of memory");
    } else if (bad) {
        prs_error_set(err, PRS_EIO, "%s %s: read error", what, path);
    } else if (n > TLS_MAX_PEM_BYTES) {
        prs_error_set(err, PRS_EINVAL, "%s %s: larger than %u bytes", what, path,
                      TLS_MAX_PEM_BYTES);
    } else {
        buf[n] = '\0';
        if (strlen(buf) == n && strstr(buf, "-----BEGIN ")) return buf;
        prs_error_set(err, PRS_EINVAL, "%s %s: not a PEM file (no -----BEGIN line)", what, path);
    }
    free(buf);
    return NULL;
}

int tls_load(const char *cert_file, const char *key_file, tls_pem *out, prs_error *err)
{
    *out = (tls_pem){NULL, NULL};
    if (!cert_file && !key_file) return 0;
    if (!cert_file || !key_file)
        return prs_error_set(err, PRS_EINVAL,
                             "TLS needs both a certificate (--tls-cert) and "
                             "its private key (--tls-key)");
    out->cert = read_pem("TLS certificate", cert_file, err);
    out->key = out->cert ? read_pem("TLS key", key_file, err) : NULL;
    if (out->cert && out->key) return 0;
    int code = err ? err->code : PRS_EINVAL;
    tls_free(out);
    return code ? code : PRS_EINVAL;
}

void tls_free(tls_pem *t)
{
    free(t->cert);
    if (t->key) explicit_bzero(t->key, strlen(t->key)); /* a private key does not linger */
    free(t->key);
    *t = (tls_pem){NULL, NULL};
}
