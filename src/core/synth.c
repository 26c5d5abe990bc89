/* Synthetic stage profiles on the GPU model (perseus/synth.h): a profile row per stage, clock and
 * instruction, with the model's time and energy at that clock, optionally with noise.
 *
 * Portability: every step is a single IEEE-754 operation in a fixed order (the model's are too,
 * src/gpu/gpumodel.c), so profiles are bit-identical on every platform. Noise comes from
 * splitmix64, implemented here, never from rand().
 *
 * Irregular profiles (prs_synth_opts.irregular) bend each (stage, instruction) curve the way
 * some measured profiles are bent: a band of clocks that keep the power of the band's top, then a
 * jump clock below it that is markedly cheaper and only slightly slower, and a small wiggle on
 * every energy, so that the energy curve is not monotone and its convex hull skips clocks that
 * the best plans use. */
#include <stdint.h>
#include <string.h>

#include "perseus/synth.h"

/* Record an invalid-argument message in err and return PRS_EINVAL from the calling function
 * (a macro, so static analysis sees that every error path returns non-zero). */
#define RETURN_EINVAL(...)                                                                         \
    do {                                                                                           \
        prs_error_set(err, PRS_EINVAL, __VA_ARGS__);                                               \
        return PRS_EINVAL;                                                                         \
    } while (0)

/* splitmix64 (Steele, Lea, Flood 2014; Vigna's public-domain reference): a tiny, portable PRNG
 * whose stream depends only on the seed. */
static uint64_t splitmix64(uint64_t *state)
{
    uint64_t z = (*state += UINT64_C(0x9E3779B97F4A7C15));
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

/* Uniform in [-1, 1), exactly representable (53 random bits). */
static double uniform_pm1(uint64_t *state)
{
    double u01 = (double)(splitmix64(state) >> 11) * (1.0 / 9007199254740992.0);
    return 2.0 * u01 - 1.0;
}

void prs_synth_opts_init(prs_synth_opts *o)
{
    memset(o, 0, sizeof *o);
    o->gpu = NULL;
    o->stages = 1;
    o->imbalance = NULL;
    o->noise = 0.0;
}

/* Resolve defaults and validate; fills the effective clock range and per-instruction work. */
static int synth_resolve(const prs_synth_opts *o, const prs_gpu_preset **gpu, int *fmin, int *fmax,
                         int *fstep, prs_gpu_work work[2], prs_error *err)
{
    if (!o) RETURN_EINVAL("no options given");
    const prs_gpu_preset *g = o->gpu ? o->gpu : prs_gpu_preset_find("a100");
    int rc = prs_gpu_preset_check(g, err);
    if (rc) return rc;
    if (o->stages < 1 || o->stages > PRS_SYNTH_MAX_STAGES)
        RETURN_EINVAL("stages must be in 1..%d (got %d)", PRS_SYNTH_MAX_STAGES, o->stages);

    int lo = o->f_min_mhz ? o->f_min_mhz : g->prof_min_mhz;
    int hi = o->f_max_mhz ? o->f_max_mhz : g->f_max_mhz;
    int step = o->f_step_mhz ? o->f_step_mhz : g->f_step_mhz;
    if (!prs_gpu_clock_supported(g, lo))
        RETURN_EINVAL("minimum clock %d MHz is not a supported %s clock (%d..%d step %d)", lo,
                      g->name, g->f_min_mhz, g->f_max_mhz, g->f_step_mhz);
    if (!prs_gpu_clock_supported(g, hi))
        RETURN_EINVAL("maximum clock %d MHz is not a supported %s clock (%d..%d step %d)", hi,
                      g->name, g->f_min_mhz, g->f_max_mhz, g->f_step_mhz);
    if (lo > hi) RETURN_EINVAL("minimum clock %d MHz is above maximum clock %d MHz", lo, hi);
    if (step <= 0 || step % g->f_step_mhz != 0)
        RETURN_EINVAL("clock step must be a positive multiple of %d MHz (got %d)", g->f_step_mhz,
                      step);
    if ((hi - lo) % step != 0)
        RETURN_EINVAL("clock range %d..%d MHz is not a whole number of %d MHz steps", lo, hi, step);

    for (int i = 0; i < 2; i++) {
        work[i] = o->work[i].t_ref_s == 0 ? g->work[i] : o->work[i];
        rc = prs_gpu_work_check(&work[i], prs_instr_name((prs_instr)i), err);
        if (rc) return rc;
    }

    if (o->imbalance) {
        if (o->n_imbalance != o->stages)
            RETURN_EINVAL("imbalance has %d values but there are %d stages", o->n_imbalance,
                          o->stages);
        for (int s = 0; s < o->stages; s++)
            if (!(o->imbalance[s] > 0 && o->imbalance[s] <= 100))
                RETURN_EINVAL("imbalance of stage %d must be in (0, 100] (got %g)", s,
                              o->imbalance[s]);
    }
    if (!(o->noise >= 0 && o->noise < PRS_SYNTH_MAX_NOISE))
        RETURN_EINVAL("noise must be in [0, %g) (got %g)", PRS_SYNTH_MAX_NOISE, o->noise);

    *gpu = g;
    *fmin = lo;
    *fmax = hi;
    *fstep = step;
    return PRS_OK;
}

/* One (stage, instruction) curve's irregularity (prs_synth_opts.irregular): clocks in
 * (jump_mhz, top_mhz) keep top_mhz's power; clocks at or below jump_mhz draw drop less power and
 * take shift_s less time than the model says. No jump when jump_mhz is 0. */
typedef struct irregular {
    int top_mhz, jump_mhz;
    double drop, shift_s;
} irregular;

/* Draw one curve's irregularity from rng (w: its work at the stage's multiplier). */
static irregular draw_irregular(const prs_gpu_preset *g, const prs_gpu_work *w, int fmin, int fmax,
                                int fstep, uint64_t *rng)
{
    irregular ir = {0, 0, 0, 0};
    int width = (PRS_SYNTH_JUMP_MHZ + fstep / 2) / fstep; /* steps in the band */
    int nclk = (fmax - fmin) / fstep + 1;
    double u = 0.5 * (uniform_pm1(rng) + 1.0); /* [0, 1) */
    double v = 0.5 * (uniform_pm1(rng) + 1.0);
    if (width < 1 || nclk <= width + 1) return ir;
    /* the band's top among the upper half of the clocks that leave room for the band */
    int room = nclk - width - 1, choices = room / 2 + 1; /* whole clocks */
    int k = (int)(u * (double)choices);
    ir.top_mhz = fmax - k * fstep;
    ir.jump_mhz = ir.top_mhz - width * fstep;
    ir.drop = 0.04 + 0.04 * v;
    /* the jump clock takes 40 % of the time the model adds from the band's top */
    ir.shift_s = 0.6 * (prs_gpu_time_s(g, w, ir.jump_mhz) - prs_gpu_time_s(g, w, ir.top_mhz));
    return ir;
}

/* Time and power of clock f on an irregular curve (model values t, pw in, bent values out). */
static void bend(const prs_gpu_preset *g, const irregular *ir, int f, double *t, double *pw)
{
    if (ir->jump_mhz == 0 || f >= ir->top_mhz) return;
    if (f > ir->jump_mhz) {
        *pw = prs_gpu_power_w(g, ir->top_mhz);
        return;
    }
    *t -= ir->shift_s;
    *pw *= 1.0 - ir->drop;
}

int prs_synth_profile(const prs_synth_opts *o, prs_profile **out, prs_error *err)
{
    if (!out) RETURN_EINVAL("no output profile pointer given");
    *out = NULL;
    const prs_gpu_preset *g = NULL;
    int fmin = 0, fmax = 0, fstep = 1;
    prs_gpu_work base[2];
    int rc = synth_resolve(o, &g, &fmin, &fmax, &fstep, base, err);
    if (rc) return rc;

    prs_profile *p = prs_profile_new();
    if (!p) {
        prs_error_set(err, PRS_ENOMEM, "out of memory creating a profile");
        return PRS_ENOMEM;
    }

    uint64_t rng = o->seed;
    uint64_t irr_rng = o->seed ^ UINT64_C(0x6A09E667F3BCC909); /* a stream of its own */
    for (int s = 0; s < o->stages && rc == PRS_OK; s++) {
        double mult = 1.0;
        if (o->imbalance)
            mult = o->imbalance[s];
        else if (o->stages >= 2 && s == o->stages - 1)
            mult = PRS_SYNTH_LAST_STAGE_DEFAULT;
        prs_gpu_work w[2];
        for (int i = 0; i < 2; i++) {
            w[i] = base[i];
            w[i].t_ref_s = base[i].t_ref_s * mult;
        }
        irregular ir[2] = {{0, 0, 0, 0}, {0, 0, 0, 0}};
        for (int i = 0; i < 2 && o->irregular; i++)
            ir[i] = draw_irregular(g, &w[i], fmin, fmax, fstep, &irr_rng);
        for (int f = fmax; f >= fmin && rc == PRS_OK; f -= fstep) {
            for (int i = 0; i < 2 && rc == PRS_OK; i++) {
                double t = prs_gpu_time_s(g, &w[i], f);
                double pw = prs_gpu_power_w(g, f);
                double wiggle = 1.0;
                if (o->irregular) {
                    bend(g, &ir[i], f, &t, &pw);
                    wiggle += PRS_SYNTH_WIGGLE * uniform_pm1(&irr_rng);
                }
                if (o->noise > 0) {
                    t *= 1.0 + o->noise * uniform_pm1(&rng);
                    pw *= 1.0 + o->noise * uniform_pm1(&rng);
                }
                prs_profile_row row = {
                    .stage = s,
                    .instr = (prs_instr)i,
                    .freq_mhz = f,
                    .time_s = t,
                    .energy_j = pw * t * wiggle,
                    .line = 0,
                };
                rc = prs_profile_add(p, &row, err);
            }
        }
    }
    if (rc) {
        prs_profile_free(p);
        return rc;
    }
    *out = p;
    return PRS_OK;
}
