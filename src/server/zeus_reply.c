/* Answers to Zeus-compatible requests (zeus_job.h): the reply queued for the suspended
 * connection, which is resumed and its worker woken. Apart from the routes and the jobs, which
 * both answer, so neither calls back into the other. */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "zeus_job.h"

void zeus_answer(zeus_req *r, int status, json_t *v)
{
    char *text = v ? json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY) : strdup("null");
    json_decref(v);
    r->status = text ? status : 500;
    r->text = text;
    r->len = text ? strlen(text) : 0;
    r->ready = 1;
    MHD_resume_connection(r->conn);
    uint64_t one = 1;
    if (r->wake_fd >= 0) {
        ssize_t w = write(r->wake_fd, &one, sizeof one);
        (void)w; /* a full counter still wakes the worker */
    }
}

void zeus_fail(zeus_req *r, int status, const char *fmt, ...)
{
    char msg[PRS_ERRMSG_MAX + 64];
    va_list ap;
    va_start(ap, fmt);
    // NOLINTNEXTLINE(clang-analyzer-valist.Uninitialized): started above (analyzer false positive)
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    zeus_answer(r, status, json_pack("{s:s}", "detail", msg));
}
