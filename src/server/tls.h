/* perseusd's TLS certificate and key (docs/server.md, 'TLS').
 *
 * libmicrohttpd does the TLS (through GnuTLS) from PEM text in memory; this reads the two files
 * once at start, bounded in size, and says which file is wrong when one is. */
#ifndef PRS_SERVER_TLS_H
#define PRS_SERVER_TLS_H

#include "perseus/error.h"

#define TLS_MAX_PEM_BYTES (1u << 20)

typedef struct tls_pem {
    char *cert; /* PEM, NUL-terminated; NULL when TLS is off */
    char *key;
} tls_pem;

/* Read cert_file and key_file (both NULL: TLS off, *out empty). One without the other, a file
 * that cannot be read, is larger than TLS_MAX_PEM_BYTES or holds no PEM block is PRS_EINVAL or
 * PRS_EIO naming the file. */
int tls_load(const char *cert_file, const char *key_file, tls_pem *out, prs_error *err);
void tls_free(tls_pem *t);

#endif
