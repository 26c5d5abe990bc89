/* One HTTP request to perseusd with a JSON answer, for the commands that talk to a server
 * (demo's embedded one, jobs and job show): libcurl's easy interface, the answer bounded in size
 * and read with jansson (cli.h, prs_cli_http). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>

#include "cli.h"

typedef struct answer {
    char *p;
    size_t len;
    int too_big;
} answer;

static size_t on_data(char *data, size_t size, size_t nmemb, void *user)
{
    answer *a = user;
    size_t n = size * nmemb;
    if (a->len + n > PRS_CLI_HTTP_MAX_ANSWER) {
        a->too_big = 1;
        return 0;
    }
    char *p = realloc(a->p, a->len + n + 1);
    if (!p) return 0;
    memcpy(p + a->len, data, n);
    a->p = p;
    a->len += n;
    p[a->len] = '\0';
    return n;
}

long prs_cli_http(const prs_cli_http_req *req, json_t **out, char *why, size_t why_len)
{
    if (out) *out = NULL;
    if (why && why_len) why[0] = '\0';
    CURL *h = curl_easy_init();
    if (!h) {
        if (why) snprintf(why, why_len, "cannot start libcurl");
        return 0;
    }
    char auth[600], err[CURL_ERROR_SIZE] = "";
    snprintf(auth, sizeof auth, "Authorization: Bearer %s", req->token ? req->token : "");
    struct curl_slist *hdr = req->token ? curl_slist_append(NULL, auth) : NULL;
    if (req->json) hdr = curl_slist_append(hdr, "Content-Type: application/json");
    answer a = {NULL, 0, 0};
    curl_easy_setopt(h, CURLOPT_URL, req->url);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdr);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, req->timeout_s > 0 ? req->timeout_s : 30L);
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, req->method ? req->method : "GET");
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, err);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &a);
    if (req->json) curl_easy_setopt(h, CURLOPT_POSTFIELDS, req->json);
    if (req->ca_file) curl_easy_setopt(h, CURLOPT_CAINFO, req->ca_file);
    long status = 0;
    CURLcode cc = curl_easy_perform(h);
    if (cc == CURLE_OK)
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    else if (why)
        snprintf(why, why_len, "%s",
                 a.too_big ? "the answer is over 64 MiB"
                 : err[0]  ? err
                           : curl_easy_strerror(cc));
    curl_slist_free_all(hdr);
    curl_easy_cleanup(h);
    if (out && status && a.p) *out = json_loadb(a.p, a.len, 0, NULL);
    free(a.p);
    return status;
}
