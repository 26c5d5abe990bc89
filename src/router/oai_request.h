/* OpenAI-compatible request bodies as the router and the fake serving instance read them, and
 * the error bodies they answer with (oai_request.c).
 *
 * Only what routing needs is taken from a body: the endpoint's kind, the model, an estimate of
 * the prompt's tokens, the requested output length and whether the answer is streamed. The body
 * itself is forwarded unchanged. Token estimate: a string counts one token per
 * PRS_OAI_BYTES_PER_TOKEN bytes (rounded up), a prompt given as token ids counts them exactly,
 * and each chat message adds PRS_OAI_MESSAGE_TOKENS for its role and framing. */
#ifndef PRS_ROUTER_OAI_REQUEST_H
#define PRS_ROUTER_OAI_REQUEST_H

#include <stddef.h>

#include "perseus/error.h"

#define PRS_OAI_BYTES_PER_TOKEN 4  /* English text averages about four bytes a token */
#define PRS_OAI_MESSAGE_TOKENS 4   /* a chat message's role and separators */
#define PRS_OAI_MAX_TOKENS 1000000 /* largest max_tokens accepted (any real model is below) */
#define PRS_OAI_MAX_MESSAGES 100000
#define PRS_OAI_MODEL_MAX 256 /* bytes of a model name, NUL included */

typedef enum prs_oai_kind {
    PRS_OAI_COMPLETIONS = 0, /* POST /v1/completions */
    PRS_OAI_CHAT = 1,        /* POST /v1/chat/completions */
} prs_oai_kind;

typedef struct prs_oai_request {
    prs_oai_kind kind;
    char model[PRS_OAI_MODEL_MAX];
    long prompt_tokens; /* estimate, >= 1 */
    long max_tokens;    /* the body's max_tokens (or max_completion_tokens); 0 when absent */
    int stream;         /* 1 when "stream": true */
} prs_oai_request;

/* Parse body[len] (need not be NUL-terminated) as a request of the given kind. PRS_EPARSE when
 * the body is not a JSON object; PRS_EINVAL when a field is missing or of the wrong type or
 * range. On failure *param (if not NULL) points to a static string naming the field at fault
 * ("" when none) and err says what is wrong; out is then unspecified. */
int prs__oai_parse(prs_oai_kind kind, const char *body, size_t len, prs_oai_request *out,
                   const char **param, prs_error *err);

/* Replace control characters in s by '?', so a message quoting its input stays one line. */
void prs__oai_one_line(char *s);

/* A malloc'd NUL-terminated OpenAI error body
 *   {"error":{"message":MSG,"type":TYPE,"param":PARAM or null,"code":CODE or null}}
 * (the caller frees it); NULL only when memory runs out. */
char *prs__oai_error_body(const char *message, const char *type, const char *param,
                          const char *code);

#endif
