/* perseusd over TLS (--tls-cert/--tls-key) with the client library (ca_file): a CA and a server
 * certificate made here with openssl; a client that trusts the CA creates a job and registers;
 * a client trusting another CA, and one that speaks plain HTTP to the TLS port, fail with
 * a message that says why; a server given half a key pair or a file that is not PEM refuses to
 * start, naming it. Skipped (77) without the openssl program. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "perseus/client.h"
#include "perseus/gpu.h"
#include "perseus/server.h"
#include "server_harness.h"

static char dir[256];

static const char SPEC[] = "{\"stages\":1,\"microbatches\":2,\"dp\":1,\"clocks_mhz\":[1410,1005],"
                           "\"blocking_power_w\":83.64,\"reuse_frontier\":false}";

/* Run an openssl command line in dir; 0 on success. */
static int openssl(const char *args)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "cd '%s' && openssl %s >/dev/null 2>&1", dir, args);
    return system(cmd);
}

static void path(char *out, size_t n, const char *name)
{
    snprintf(out, n, "%s/%s", dir, name);
}

/* Two self-signed CAs; a certificate for 127.0.0.1 signed by the first. */
static int make_pki(void)
{
    FILE *f;
    char ext[300];
    path(ext, sizeof ext, "ext.cnf");
    if (!(f = fopen(ext, "w"))) return -1;
    fputs("subjectAltName=IP:127.0.0.1\n", f);
    fclose(f);
    return openssl("req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 2 "
                   "-subj /CN=perseus-test-ca") ||
           openssl("req -x509 -newkey rsa:2048 -nodes -keyout other.key -out other.pem -days 2 "
                   "-subj /CN=someone-else") ||
           openssl("req -newkey rsa:2048 -nodes -keyout srv.key -out srv.csr "
                   "-subj /CN=127.0.0.1") ||
           openssl("x509 -req -in srv.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out srv.pem "
                   "-days 2 -extfile ext.cnf");
}

static int start(const char *cert, const char *key, prs_server **srv, prs_error *err)
{
    prs_server_config cfg;
    prs_server_config_default(&cfg);
    char db[300], c[300], k[300];
    path(db, sizeof db, "tls.db");
    path(c, sizeof c, cert ? cert : "");
    path(k, sizeof k, key ? key : "");
    cfg.port = 0;
    cfg.db_path = db;
    cfg.data_dir = dir;
    cfg.log_fd = -1;
    cfg.threads = 1;
    cfg.tls_cert_file = cert ? c : NULL;
    cfg.tls_key_file = key ? k : NULL;
    return prs_server_start(&cfg, srv, err);
}

/* A client of a new job at url trusting ca (a file in dir, or NULL): 0 or the error. */
static int client(const char *url, const char *ca, prs_gpu *gpu, prs_client **cl, prs_error *err)
{
    char ca_path[300];
    path(ca_path, sizeof ca_path, ca ? ca : "");
    prs_client_opts o;
    prs_client_opts_init(&o);
    o.server_url = url;
    o.job_spec_json = SPEC;
    o.gpu = gpu;
    o.ca_file = ca ? ca_path : NULL;
    o.poll_interval_s = 0.01;
    o.http_timeout_s = 2;
    return prs_client_new(&o, cl, err);
}

static void test_tls(void **state)
{
    (void)state;
    prs_server *srv = NULL;
    prs_error err = {0, ""};
    assert_int_equal(start("srv.pem", "srv.key", &srv, &err), 0);
    char https[64], http[64];
    snprintf(https, sizeof https, "https://127.0.0.1:%d", prs_server_port(srv));
    snprintf(http, sizeof http, "http://127.0.0.1:%d", prs_server_port(srv));
    prs_gpu *gpu = NULL;
    assert_int_equal(prs_gpu_open("sim:a100", &gpu, &err), 0);

    /* Trusting the CA: the job is created, the rank registers and gets its schedule. */
    prs_client *cl = NULL;
    assert_int_equal(client(https, "ca.pem", gpu, &cl, &err), 0);
    assert_true(strlen(prs_client_job_id(cl)) > 0);
    prs_client_stats st = {0};
    double t0 = harness_now();
    while (harness_now() - t0 < 10) { /* the background thread registers the rank */
        prs_client_get_stats(cl, &st);
        if (st.registered) break;
        harness_sleep_ms(10); /* poll interval */
    }
    printf("over TLS: job %s, registered %d, requests without answer %ld\n", prs_client_job_id(cl),
           st.registered, st.http_failures);
    assert_true(st.registered);
    assert_int_equal(st.http_failures, 0);
    prs_client_free(cl);

    /* Trusting another CA: refused, and the message says it is the certificate. */
    cl = NULL;
    err = (prs_error){0, ""};
    assert_int_not_equal(client(https, "other.pem", gpu, &cl, &err), 0);
    printf("another CA: %s\n", err.msg);
    assert_null(cl);
    assert_non_null(strstr(err.msg, "certificate"));

    /* Plain HTTP to the TLS port: refused, with the hint. */
    err = (prs_error){0, ""};
    assert_int_not_equal(client(http, NULL, gpu, &cl, &err), 0);
    printf("plain HTTP: %s\n", err.msg);
    assert_non_null(strstr(err.msg, "https://"));
    prs_gpu_close(gpu);
    prs_server_stop(srv);

    /* Half a key pair, a file that is not PEM: the server does not start and says which. */
    srv = NULL;
    assert_int_not_equal(start("srv.pem", NULL, &srv, &err), 0);
    assert_null(srv);
    assert_non_null(strstr(err.msg, "--tls-key"));
    assert_int_not_equal(start("srv.pem", "ext.cnf", &srv, &err), 0);
    assert_non_null(strstr(err.msg, "ext.cnf: not a PEM file"));
    assert_int_not_equal(start("srv.pem", "missing.key", &srv, &err), 0);
    assert_non_null(strstr(err.msg, "missing.key"));
}

int main(void)
{
    if (system("openssl version >/dev/null 2>&1") != 0) {
        fprintf(stderr, "skipped: no openssl program to make certificates with\n");
        return 77;
    }
    harness_tmpdir(dir, sizeof dir, "tls");
    if (!dir[0] || make_pki() != 0) {
        fprintf(stderr, "cannot make the test certificates in %s\n", dir);
        return 1;
    }
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_tls)};
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    harness_rmdir(dir);
    return rc;
}
