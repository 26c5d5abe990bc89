/* The GPUs a command works on (perseus monitor, perseus show-env): a --gpus list of backend specs,
 * or every GPU the NVIDIA driver's NVML lists. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "perseus/gpu.h"

static int split(const char *cmd, const char *list, char *buf, size_t n, const char **specs,
                 int cap)
{
    size_t len = strlen(list);
    if (len >= n) return -prs_cli_usage_error(cmd, "--gpus: list too long", NULL);
    memcpy(buf, list, len + 1);
    int count = 0;
    char *save = NULL;
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (count == cap) {
            char what[64];
            snprintf(what, sizeof what, "--gpus: more than %d GPUs in", cap);
            return -prs_cli_usage_error(cmd, what, list);
        }
        specs[count++] = tok;
    }
    if (count == 0)
        return -prs_cli_usage_error(cmd, "--gpus: expected a comma-separated list of GPUs, got",
                                    list);
    return count;
}

int prs_cli_gpu_specs(const char *cmd, const char *list, char *buf, size_t n, const char **specs,
                      int cap)
{
    if (list) return split(cmd, list, buf, n, specs, cap);
    unsigned count = 0;
    prs_error err = {0, ""};
    if (prs_gpu_nvml_count(NULL, &count, &err) != 0 || count == 0) {
        fprintf(stderr,
                "perseus %s: no NVIDIA GPU found (%s); name GPUs with --gpus, e.g. --gpus "
                "sim:a100\n",
                cmd, count == 0 && !err.msg[0] ? "NVML lists none" : err.msg);
        return -1;
    }
    size_t used = 0;
    int k = 0;
    for (unsigned i = 0; i < count && k < cap; i++) {
        int w = snprintf(buf + used, n - used, "nvml:%u", i);
        if (w < 0 || (size_t)w >= n - used) break;
        specs[k++] = buf + used;
        used += (size_t)w + 1;
    }
    return k;
}
