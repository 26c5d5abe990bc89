/* The instance level's clock choice and the reading of an engine's load (instclock.h). The
 * choice walks the candidate clocks upward and stops at the first one whose modelled iteration
 * times fit the SLOs: the model's times fall as the clock rises, so the first fit is the lowest
 * clock that meets them and, power rising with the clock, the least energy per token. */
#include "instclock.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int fits(const prs_infer_roofline *m, int tp, int mhz, const prs_instclock_slo *slo,
                const prs_instclock_load *load, long kv_tokens)
{
    double n = load->running < 1 ? 1 : load->running;
    double ctx = load->kv_usage * (double)kv_tokens / n;
    if (ctx < (double)slo->prompt_tokens) ctx = (double)slo->prompt_tokens;
    double decode_s, prefill_s, j;
    prs_infer_roofline_decode(m, tp, mhz, n, ctx, &decode_s, &j);
    double busy = 0; /* share of the time spent prefilling the prompts arriving */
    if (load->prompt_rate > 0) {
        prs_infer_roofline_prefill(m, tp, mhz, 1, (double)slo->prompt_tokens, &prefill_s, &j);
        busy = load->prompt_rate * prefill_s / (double)slo->prompt_tokens;
    }
    if (busy >= 1 || decode_s > slo->headroom * slo->tbt_s * (1 - busy)) return 0;
    for (int t = -1; t < slo->ntargets; t++) {
        long tokens = t < 0 ? slo->prompt_tokens : slo->target_tokens[t];
        double ttft = t < 0 ? slo->ttft_s : slo->target_ttft_s[t];
        prs_infer_roofline_prefill(m, tp, mhz, load->waiting + 1, (double)tokens, &prefill_s, &j);
        if (prefill_s + decode_s > slo->headroom * ttft) return 0;
    }
    return 1;
}

static int targets_ok(const prs_instclock_slo *slo)
{
    if (slo->ntargets < 0 || slo->ntargets > PRS_INSTCLOCK_MAX_TARGETS) return 0;
    for (int t = 0; t < slo->ntargets; t++)
        if (slo->target_tokens[t] < 1 || !(slo->target_ttft_s[t] > 0)) return 0;
    return 1;
}

int prs__instclock_pick(const prs_infer_roofline *model, int tp, const prs_instclock_slo *slo,
                        const prs_instclock_load *load, int *mhz, prs_error *err)
{
    if (!(slo->ttft_s > 0) || !(slo->tbt_s > 0) || !(slo->headroom > 0) || slo->headroom > 1 ||
        slo->prompt_tokens < 1 || !targets_ok(slo))
        return prs_error_set(err, PRS_EINVAL,
                             "SLOs must be > 0, headroom in (0, 1], prompt tokens >= 1, at most "
                             "%d targets",
                             PRS_INSTCLOCK_MAX_TARGETS);
    long kv;
    int rc = prs_infer_roofline_kv_tokens(model, tp, &kv, err);
    if (rc) return rc;
    const prs_infer_gpu *g = model->gpu;
    for (int f = g->f_min_mhz; f < g->f_max_mhz; f += PRS_INSTCLOCK_STEP_MHZ) {
        if (fits(model, tp, f, slo, load, kv)) {
            *mhz = f;
            return 0;
        }
    }
    *mhz = g->f_max_mhz;
    return 0;
}

/* The value of a sample line "name{labels} value [timestamp]" or "name value": 1 and *v when
 * the line is a sample of name, 0 when it is another metric's, -1 when its value is bad. */
static int sample_of(const char *line, size_t n, const char *name, double *v)
{
    size_t k = strlen(name);
    if (n <= k || memcmp(line, name, k) != 0 || (line[k] != '{' && line[k] != ' ')) return 0;
    size_t i = k;
    if (line[i] == '{') {
        int quoted = 0;
        for (; i < n; i++) {
            if (line[i] == '\\' && quoted)
                i++;
            else if (line[i] == '"')
                quoted = !quoted;
            else if (line[i] == '}' && !quoted)
                break;
        }
        if (i >= n) return -1;
        i++;
    }
    char buf[64];
    while (i < n && line[i] == ' ')
        i++;
    size_t m = 0;
    while (i < n && line[i] != ' ' && m < sizeof buf - 1)
        buf[m++] = line[i++];
    buf[m] = '\0';
    char *end;
    *v = strtod(buf, &end);
    return m > 0 && *end == '\0' && isfinite(*v) && *v >= 0 ? 1 : -1;
}

int prs__instclock_parse_metrics(const char *text, size_t len, prs_instclock_load *out,
                                 prs_error *err)
{
    static const char *const names[5] = {"vllm:num_requests_running", "vllm:num_requests_waiting",
                                         "vllm:gpu_cache_usage_perc", "vllm:kv_cache_usage_perc",
                                         "vllm:prompt_tokens_total"};
    double sum[5] = {0};
    int seen[5] = {0};
    size_t pos = 0;
    int lineno = 0;
    while (pos < len) {
        const char *line = text + pos;
        const char *nl = memchr(line, '\n', len - pos);
        size_t n = nl ? (size_t)(nl - line) : len - pos;
        pos += n + 1;
        lineno++;
        if (n == 0 || line[0] == '#') continue;
        for (int k = 0; k < 5; k++) {
            double v;
            int s = sample_of(line, n, names[k], &v);
            if (s < 0)
                return prs_error_set(err, PRS_EPARSE, "metrics line %d: bad value of %s", lineno,
                                     names[k]);
            if (s > 0) {
                sum[k] += v;
                seen[k] = 1;
            }
        }
    }
    if (!seen[0]) return prs_error_set(err, PRS_EPARSE, "metrics: no %s series", names[0]);
    out->running = sum[0];
    out->waiting = sum[1];
    out->kv_usage = seen[2] ? sum[2] : sum[3];
    if (out->kv_usage > 1) out->kv_usage = 1;
    out->prompt_tokens = seen[4] ? sum[4] : -1;
    out->prompt_rate = 0;
    return 0;
}
