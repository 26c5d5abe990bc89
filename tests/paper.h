/* The SOSP'24 paper profiles for tests that skip without them:
 * $PRS_SHARED_DIR/data/sosp24/stage_profile/<model>+a100_sxm_bf16.csv, ../shared when the
 * variable is unset or empty. */
#ifndef PRS_TESTS_PAPER_H
#define PRS_TESTS_PAPER_H

#include <stdio.h>
#include <stdlib.h>

#include "perseus/profile.h"

/* The A100 profile of model ("gpt3-175b", "bloom"), or NULL when it cannot be loaded. */
static inline prs_profile *prs_paper_profile(const char *model)
{
    const char *shared = getenv("PRS_SHARED_DIR");
    char path[1024];
    snprintf(path, sizeof path, "%s/data/sosp24/stage_profile/%s+a100_sxm_bf16.csv",
             shared && *shared ? shared : "../shared", model);
    prs_profile *p = NULL;
    return prs_profile_load(path, &p, NULL) == 0 ? p : NULL;
}

#endif
