/* Fuzz target for perseus-router's request parser (src/router/oai_request.h) and its
 * configuration reader (src/router/router_config.h).
 *
 * The first byte picks what the rest is fed to: bit 0 the endpoint (completions or chat), bit 1
 * the configuration reader instead. A body either parses, with a non-empty model name, at least
 * one prompt token and max_tokens within 0..PRS_OAI_MAX_TOKENS, or fails with PRS_EPARSE or
 * PRS_EINVAL, a one-line message and the field at fault named (possibly ""); the error body
 * built from that message is valid JSON. A configuration either loads, every class in a pool of
 * at least one instance whose clock is in the GPU's range, or fails with a one-line message
 * naming "fuzz.json" and nothing held. A broken invariant calls abort(). */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "oai_request.h"
#include "router_config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int ok)
{
    if (!ok) abort();
}

static void one_line(const prs_error *err)
{
    check(err->msg[0] != '\0' && strchr(err->msg, '\n') == NULL);
}

static void fuzz_body(prs_oai_kind kind, const char *text, size_t len)
{
    prs_oai_request rq;
    const char *param = NULL;
    prs_error err = {0};
    int rc = prs__oai_parse(kind, text, len, &rq, &param, &err);
    check(param != NULL);
    if (rc == 0) {
        check(rq.model[0] != '\0' && strlen(rq.model) < PRS_OAI_MODEL_MAX);
        check(rq.prompt_tokens >= 1);
        check(rq.max_tokens >= 0 && rq.max_tokens <= PRS_OAI_MAX_TOKENS);
        check(rq.stream == 0 || rq.stream == 1);
        return;
    }
    check(rc == PRS_EPARSE || rc == PRS_EINVAL);
    one_line(&err);
    char *body = prs__oai_error_body(err.msg, "invalid_request_error", param, NULL);
    check(body != NULL);
    json_t *v = json_loads(body, 0, NULL);
    check(json_is_object(json_object_get(v, "error")));
    json_decref(v);
    free(body);
}

static void fuzz_config(const char *text, size_t len)
{
    prs_router_config c;
    prs_error err = {0};
    int rc = prs__router_config_parse(text, len, "fuzz.json", &c, &err);
    if (rc != 0) {
        one_line(&err);
        check(strncmp(err.msg, "fuzz.json", 9) == 0);
        check(c.inst == NULL);
        return;
    }
    check(c.ninst >= 1 && c.npools >= 1);
    for (int k = 0; k < PRS_INFER_NCLASS; k++) {
        int p = c.pool_of_class[k];
        check(p >= 0 && p < c.npools && c.pools[p].n >= 1);
    }
    for (int i = 0; i < c.ninst; i++)
        check(c.inst[i].mhz >= c.cost.gpu->f_min_mhz && c.inst[i].mhz <= c.cost.gpu->f_max_mhz);
    check(c.report.period_s > 0 && c.report.rate_scale > 0);
    if (c.report.url[0]) check(c.report.cluster[0] && c.report.token[0]);
    prs__router_config_free(&c);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    const char *text = (const char *)data + 1;
    if (data[0] & 2)
        fuzz_config(text, size - 1);
    else
        fuzz_body((data[0] & 1) ? PRS_OAI_CHAT : PRS_OAI_COMPLETIONS, text, size - 1);
    return 0;
}
