/* Reading OpenAI-compatible request bodies (oai_request.h): the few fields the router routes on,
 * checked with jansson; the body itself is forwarded untouched, so nothing here rewrites it.
 * Errors name the field at fault, in the words OpenAI's own API uses for a bad field. */
#include "oai_request.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

static long text_tokens(size_t bytes)
{
    return (long)((bytes + PRS_OAI_BYTES_PER_TOKEN - 1) / PRS_OAI_BYTES_PER_TOKEN);
}

/* A prompt: a string, an array of strings, an array of token ids or an array of such arrays. */
static int prompt_tokens(const json_t *p, long *tokens, prs_error *err)
{
    if (json_is_string(p)) {
        *tokens = text_tokens(json_string_length(p));
        return 0;
    }
    if (!json_is_array(p) || json_array_size(p) == 0)
        return prs_error_set(err, PRS_EINVAL, "'prompt' must be a string or a non-empty array");
    size_t i;
    const json_t *e;
    long sum = 0;
    json_array_foreach(p, i, e)
    {
        if (json_is_string(e)) {
            sum += text_tokens(json_string_length(e));
        } else if (json_is_integer(e)) {
            sum += 1;
        } else if (json_is_array(e)) {
            size_t j;
            const json_t *id;
            json_array_foreach(e, j, id)
            {
                if (!json_is_integer(id))
                    return prs_error_set(err, PRS_EINVAL,
                                         "'prompt'[%zu][%zu] must be an integer token id", i, j);
            }
            sum += (long)json_array_size(e);
        } else {
            return prs_error_set(err, PRS_EINVAL,
                                 "'prompt'[%zu] must be a string, a token id or an array of ids",
                                 i);
        }
    }
    *tokens = sum;
    return 0;
}

/* A message's content: a string, null (an assistant's tool call) or an array of parts whose text
 * parts count. */
static int content_tokens(const json_t *c, size_t i, long *tokens, prs_error *err)
{
    *tokens = 0;
    if (json_is_null(c) || c == NULL) return 0;
    if (json_is_string(c)) {
        *tokens = text_tokens(json_string_length(c));
        return 0;
    }
    if (!json_is_array(c))
        return prs_error_set(err, PRS_EINVAL,
                             "'messages'[%zu].content must be a string or an array of parts", i);
    size_t j;
    const json_t *part;
    json_array_foreach(c, j, part)
    {
        if (!json_is_object(part))
            return prs_error_set(err, PRS_EINVAL, "'messages'[%zu].content[%zu] must be an object",
                                 i, j);
        const json_t *text = json_object_get(part, "text");
        if (json_is_string(text)) *tokens += text_tokens(json_string_length(text));
    }
    return 0;
}

static int messages_tokens(const json_t *m, long *tokens, prs_error *err)
{
    if (!json_is_array(m) || json_array_size(m) == 0)
        return prs_error_set(err, PRS_EINVAL, "'messages' must be a non-empty array");
    if (json_array_size(m) > PRS_OAI_MAX_MESSAGES)
        return prs_error_set(err, PRS_EINVAL, "'messages' holds more than %d messages",
                             PRS_OAI_MAX_MESSAGES);
    size_t i;
    const json_t *msg;
    long sum = 0;
    json_array_foreach(m, i, msg)
    {
        if (!json_is_object(msg))
            return prs_error_set(err, PRS_EINVAL, "'messages'[%zu] must be an object", i);
        if (!json_is_string(json_object_get(msg, "role")))
            return prs_error_set(err, PRS_EINVAL, "'messages'[%zu].role must be a string", i);
        long t;
        int rc = content_tokens(json_object_get(msg, "content"), i, &t, err);
        if (rc) return rc;
        sum += t + PRS_OAI_MESSAGE_TOKENS;
    }
    *tokens = sum;
    return 0;
}

static int read_max_tokens(const json_t *root, prs_oai_kind kind, long *out, const char **param,
                           prs_error *err)
{
    const char *names[2] = {"max_tokens", "max_completion_tokens"};
    *out = 0;
    for (int k = 0; k < (kind == PRS_OAI_CHAT ? 2 : 1); k++) {
        const json_t *v = json_object_get(root, names[k]);
        if (v == NULL || json_is_null(v)) continue;
        *param = names[k];
        if (!json_is_integer(v) || json_integer_value(v) < 1 ||
            json_integer_value(v) > PRS_OAI_MAX_TOKENS)
            return prs_error_set(err, PRS_EINVAL, "'%s' must be an integer from 1 to %d", names[k],
                                 PRS_OAI_MAX_TOKENS);
        *out = (long)json_integer_value(v);
        return 0;
    }
    return 0;
}

static int read_fields(const json_t *root, prs_oai_kind kind, prs_oai_request *out,
                       const char **param, prs_error *err)
{
    const json_t *model = json_object_get(root, "model");
    *param = "model";
    if (!json_is_string(model) || json_string_length(model) == 0)
        return prs_error_set(err, PRS_EINVAL, "'model' must be a non-empty string");
    if (json_string_length(model) >= PRS_OAI_MODEL_MAX)
        return prs_error_set(err, PRS_EINVAL, "'model' is longer than %d bytes",
                             PRS_OAI_MODEL_MAX - 1);
    memcpy(out->model, json_string_value(model), json_string_length(model) + 1);
    int rc;
    if (kind == PRS_OAI_COMPLETIONS) {
        *param = "prompt";
        const json_t *p = json_object_get(root, "prompt");
        if (p == NULL) return prs_error_set(err, PRS_EINVAL, "'prompt' is required");
        rc = prompt_tokens(p, &out->prompt_tokens, err);
    } else {
        *param = "messages";
        const json_t *m = json_object_get(root, "messages");
        if (m == NULL) return prs_error_set(err, PRS_EINVAL, "'messages' is required");
        rc = messages_tokens(m, &out->prompt_tokens, err);
    }
    if (rc) return rc;
    if (out->prompt_tokens < 1) out->prompt_tokens = 1;
    rc = read_max_tokens(root, kind, &out->max_tokens, param, err);
    if (rc) return rc;
    const json_t *s = json_object_get(root, "stream");
    *param = "stream";
    if (s != NULL && !json_is_null(s) && !json_is_boolean(s))
        return prs_error_set(err, PRS_EINVAL, "'stream' must be true or false");
    out->stream = json_is_true(s);
    *param = "";
    return 0;
}

int prs__oai_parse(prs_oai_kind kind, const char *body, size_t len, prs_oai_request *out,
                   const char **param, prs_error *err)
{
    const char *unused;
    if (param == NULL) param = &unused;
    *param = "";
    memset(out, 0, sizeof *out);
    out->kind = kind;
    json_error_t jerr;
    json_t *root = json_loadb(body, len, JSON_REJECT_DUPLICATES, &jerr);
    if (root == NULL) {
        prs__oai_one_line(jerr.text);
        return prs_error_set(err, PRS_EPARSE, "request body is not valid JSON: %s (line %d)",
                             jerr.text, jerr.line);
    }
    int rc = 0;
    if (!json_is_object(root))
        rc = prs_error_set(err, PRS_EPARSE, "request body must be a JSON object");
    else
        rc = read_fields(root, kind, out, param, err);
    json_decref(root);
    return rc;
}

void prs__oai_one_line(char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || *s == 0x7f) *s = '?';
}

char *prs__oai_error_body(const char *message, const char *type, const char *param,
                          const char *code)
{
    json_t *e = json_pack("{s:s, s:s, s:o, s:o}", "message", message, "type", type, "param",
                          param && *param ? json_string(param) : json_null(), "code",
                          code ? json_string(code) : json_null());
    if (e == NULL) return NULL;
    json_t *root = json_pack("{s:o}", "error", e);
    if (root == NULL) return NULL;
    char *s = json_dumps(root, JSON_COMPACT);
    json_decref(root);
    return s;
}
