/* One serving instance's continuous batching (engine.h).
 *
 * The state is kept so that a decode step costs O(classes), not O(batch): a running sequence's
 * context and generated count are affine in the engine's decode counter (ctx = ctx0 + D - step0),
 * so nothing is updated per step; sequences finish off a min-heap keyed by the decode step of
 * their last token; the blocks a step needs are the sequences whose context is a multiple of 16,
 * counted by (ctx0 - step0) mod 16; the inter-token gaps of a step are the same for every
 * sequence that took part in the previous step (counted per class), and each sequence admitted
 * since then (the "fresh" list) has its own. Preemption, rare, scans the slots. */
#include "engine.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { SLOT_FREE, SLOT_PREFILL, SLOT_RUNNING };
enum { ITER_NONE, ITER_PREFILL, ITER_DECODE };

typedef struct seq {
    prs_infer_job job;
    int32_t generated; /* tokens produced (for a running sequence: at step0) */
    int state;
    long admit_no;
    long ctx0, step0; /* running: cached tokens when it joined, decode counter then */
    double first_token_s, last_token_s;
} seq;

typedef struct heap_ent {
    long step;
    long admit_no;
    int slot;
} heap_ent;

struct prs_infer_engine {
    prs_infer_engine_cfg cfg;
    long kv_blocks, used_blocks, watermark_blocks;
    int max_batch;
    seq *slots;
    int *free_slots, n_free;
    heap_ent *heap;
    int heap_n;
    int *fresh, n_fresh;
    int *batch, n_batch;
    long batch_tokens;
    long prompt_tokens; /* prompt tokens prefilled so far (recomputes included) */
    long old_count[PRS_INFER_NCLASS];
    long n_running, sum_ctx, decodes, admits, preempts;
    long phase_count[PRS_INFER_KV_BLOCK_TOKENS];
    seq *wq; /* ring buffer of waiting requests */
    size_t wq_cap, wq_head, wq_n;
    int iter;
    double iter_start_s, iter_end_s, iter_energy_j; /* energy: a prefill's */
    double idle_since_s, paused_until_s, last_decode_end_s;
    double start_at_s; /* idle with work: when the next iteration may start */
    double energy_j;
    long tokens_outstanding;
    double power_limit_w; /* 0: none */
    long over_limit;      /* iterations above the limit even at the lowest clock */
    /* A decode run: run_n steps computed ahead from iter_start_s (step i ends at run_end_s[i],
     * draws run_j[i], run_floor[i]: above the power limit at the lowest clock), run_i of them
     * applied to the state; at most max_run steps, none starting at or after horizon_s. */
    double *run_end_s, *run_j;
    char *run_floor;
    double horizon_s;
    int run_n, run_i, max_run;
    int decode_mhz; /* 0: the clock of the prefills */
};

static long blocks_of(long tokens)
{
    return (tokens + PRS_INFER_KV_BLOCK_TOKENS - 1) / PRS_INFER_KV_BLOCK_TOKENS;
}

static int phase_of(long ctx0, long step0)
{
    long k = (ctx0 - step0) % PRS_INFER_KV_BLOCK_TOKENS;
    return (int)(k < 0 ? k + PRS_INFER_KV_BLOCK_TOKENS : k);
}

int prs_infer_engine_new(const prs_infer_engine_cfg *cfg, double now_s, prs_infer_engine **out,
                         prs_error *err)
{
    *out = NULL;
    int rc = prs__infer_perf_check(cfg->perf, err);
    if (rc) return rc;
    if (cfg->max_batched_tokens < 1)
        return prs_error_set(err, PRS_EINVAL, "max batched tokens must be >= 1");
    long kv_tokens;
    int max_batch;
    rc = cfg->perf->capacity(cfg->perf->ctx, cfg->tp, &kv_tokens, &max_batch, err);
    if (rc) return rc;
    if (kv_tokens < PRS_INFER_KV_BLOCK_TOKENS || max_batch < 1 || max_batch > 1 << 20)
        return prs_error_set(err, PRS_EINVAL, "TP %d: KV capacity %ld tokens, batch %d unusable",
                             cfg->tp, kv_tokens, max_batch);
    prs_infer_engine *e = calloc(1, sizeof *e);
    if (!e) return prs_error_set(err, PRS_ENOMEM, "out of memory");
    e->cfg = *cfg;
    e->kv_blocks = kv_tokens / PRS_INFER_KV_BLOCK_TOKENS;
    e->watermark_blocks = (long)(PRS_INFER_KV_WATERMARK * (double)e->kv_blocks);
    e->max_batch = max_batch;
    e->slots = calloc((size_t)max_batch, sizeof *e->slots);
    e->free_slots = malloc((size_t)max_batch * sizeof *e->free_slots);
    e->heap = malloc((size_t)max_batch * 2 * sizeof *e->heap + sizeof *e->heap);
    e->fresh = malloc((size_t)max_batch * sizeof *e->fresh);
    e->batch = malloc((size_t)max_batch * sizeof *e->batch);
    e->max_run = cfg->max_run_steps > 1 ? cfg->max_run_steps : 1;
    e->run_end_s = malloc((size_t)e->max_run * sizeof *e->run_end_s);
    e->run_j = malloc((size_t)e->max_run * sizeof *e->run_j);
    e->run_floor = malloc((size_t)e->max_run);
    e->horizon_s = INFINITY;
    if (!e->slots || !e->free_slots || !e->heap || !e->fresh || !e->batch || !e->run_end_s ||
        !e->run_j || !e->run_floor) {
        prs_infer_engine_free(e);
        return prs_error_set(err, PRS_ENOMEM, "out of memory");
    }
    for (int i = 0; i < max_batch; i++)
        e->free_slots[i] = max_batch - 1 - i;
    e->n_free = max_batch;
    e->idle_since_s = now_s;
    e->last_decode_end_s = now_s;
    *out = e;
    return PRS_OK;
}

void prs_infer_engine_free(prs_infer_engine *e)
{
    if (!e) return;
    free(e->slots);
    free(e->free_slots);
    free(e->heap);
    free(e->fresh);
    free(e->batch);
    free(e->run_end_s);
    free(e->run_j);
    free(e->run_floor);
    free(e->wq);
    free(e);
}

/* ---- waiting queue (ring buffer) ---- */

static int wq_grow(prs_infer_engine *e, prs_error *err)
{
    size_t nc = e->wq_cap ? e->wq_cap * 2 : 64;
    seq *p = malloc(nc * sizeof *p);
    if (!p) return prs_error_set(err, PRS_ENOMEM, "out of memory for the waiting queue");
    for (size_t i = 0; i < e->wq_n; i++)
        p[i] = e->wq[(e->wq_head + i) % e->wq_cap];
    free(e->wq);
    e->wq = p;
    e->wq_cap = nc;
    e->wq_head = 0;
    return PRS_OK;
}

static seq *wq_at(prs_infer_engine *e, size_t i)
{
    return &e->wq[(e->wq_head + i) % e->wq_cap];
}

/* ---- finish heap ---- */

static void heap_push(prs_infer_engine *e, heap_ent h)
{
    int i = e->heap_n++;
    while (i > 0) {
        int p = (i - 1) / 2;
        if (e->heap[p].step <= h.step) break;
        e->heap[i] = e->heap[p];
        i = p;
    }
    e->heap[i] = h;
}

static void heap_pop(prs_infer_engine *e)
{
    heap_ent last = e->heap[--e->heap_n];
    int i = 0, n = e->heap_n;
    for (;;) {
        int c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && e->heap[c + 1].step < e->heap[c].step) c++;
        if (e->heap[c].step >= last.step) break;
        e->heap[i] = e->heap[c];
        i = c;
    }
    if (n > 0) e->heap[i] = last;
}

/* Stale entries (of preempted sequences) are dropped; the heap never holds more than one live
 * entry per slot, so compacting keeps it within 2 * max_batch. */
static void heap_compact(prs_infer_engine *e)
{
    int k = 0;
    for (int i = 0; i < e->heap_n; i++) {
        const seq *s = &e->slots[e->heap[i].slot];
        if (s->state == SLOT_RUNNING && s->admit_no == e->heap[i].admit_no)
            e->heap[k++] = e->heap[i];
    }
    int n = k;
    e->heap_n = 0;
    for (int i = 0; i < n; i++)
        heap_push(e, e->heap[i]);
}

/* ---- statistics ---- */

static void note_gap(prs_infer_engine *e, int klass, double gap_s, uint64_t count)
{
    if (!e->cfg.latency || count == 0) return;
    prs__infer_hist_add(&e->cfg.latency->tbt[klass], gap_s, count);
    prs__infer_hist_add(&e->cfg.latency->tbt[PRS_INFER_ALL], gap_s, count);
}

static void note_done(prs_infer_engine *e, const seq *s, double t_s)
{
    if (!e->cfg.latency) return;
    prs_infer_latency *l = e->cfg.latency;
    const prs_infer_classes *c = e->cfg.classes;
    int k = s->job.klass;
    double ttft = s->first_token_s - s->job.arrival_s;
    int late = ttft > c->ttft_slo_s[k / 3];
    if (s->job.out_tokens > 1)
        late |= (t_s - s->first_token_s) / (s->job.out_tokens - 1) > c->tbt_slo_s;
    l->done[k]++;
    l->done[PRS_INFER_ALL]++;
    l->late[k] += (uint64_t)late;
    l->late[PRS_INFER_ALL] += (uint64_t)late;
}

static void meter(prs_infer_engine *e, double t0_s, double t1_s, double energy_j)
{
    e->energy_j += energy_j;
    if (e->cfg.meter) prs__infer_meter_add(e->cfg.meter, t0_s, t1_s, energy_j);
}

static int charge_idle(prs_infer_engine *e, double now_s, prs_error *err)
{
    if (now_s <= e->idle_since_s) return PRS_OK;
    double p_w;
    int rc = e->cfg.perf->idle_power(e->cfg.perf->ctx, e->cfg.tp, e->cfg.mhz, &p_w, err);
    if (rc) return rc;
    meter(e, e->idle_since_s, now_s, p_w * (now_s - e->idle_since_s));
    e->idle_since_s = now_s;
    return PRS_OK;
}

/* ---- running set ---- */

static void join_running(prs_infer_engine *e, int slot, long ctx)
{
    seq *s = &e->slots[slot];
    s->state = SLOT_RUNNING;
    s->ctx0 = ctx;
    s->step0 = e->decodes;
    e->phase_count[phase_of(ctx, e->decodes)]++;
    e->sum_ctx += ctx;
    e->n_running++;
    e->fresh[e->n_fresh++] = slot;
    if (e->heap_n >= 2 * e->max_batch) heap_compact(e);
    heap_push(e, (heap_ent){e->decodes + (s->job.out_tokens - s->generated), s->admit_no, slot});
}

/* Take a running sequence out of the aggregates; returns its context. */
static long leave_running(prs_infer_engine *e, int slot)
{
    seq *s = &e->slots[slot];
    long ctx = s->ctx0 + (e->decodes - s->step0);
    e->phase_count[phase_of(s->ctx0, s->step0)]--;
    e->sum_ctx -= ctx;
    e->n_running--;
    e->used_blocks -= blocks_of(ctx);
    int was_fresh = 0;
    for (int i = 0; i < e->n_fresh; i++)
        if (e->fresh[i] == slot) {
            e->fresh[i] = e->fresh[--e->n_fresh];
            was_fresh = 1;
            break;
        }
    if (!was_fresh) e->old_count[s->job.klass]--;
    s->generated += (int32_t)(e->decodes - s->step0);
    if (!was_fresh) s->last_token_s = e->last_decode_end_s;
    return ctx;
}

static void free_slot(prs_infer_engine *e, int slot)
{
    e->slots[slot].state = SLOT_FREE;
    e->free_slots[e->n_free++] = slot;
}

/* Preempt the most recently admitted running sequence: back to the head of the queue. */
static int preempt_latest(prs_infer_engine *e, prs_error *err)
{
    int victim = -1;
    for (int i = 0; i < e->max_batch; i++)
        if (e->slots[i].state == SLOT_RUNNING &&
            (victim < 0 || e->slots[i].admit_no > e->slots[victim].admit_no))
            victim = i;
    leave_running(e, victim);
    if (e->wq_n == e->wq_cap && wq_grow(e, err)) return err ? err->code : PRS_ENOMEM;
    e->wq_head = (e->wq_head + e->wq_cap - 1) % e->wq_cap;
    e->wq[e->wq_head] = e->slots[victim];
    e->wq[e->wq_head].state = SLOT_FREE;
    e->wq_n++;
    free_slot(e, victim);
    e->preempts++;
    return PRS_OK;
}

/* ---- iterations ---- */

/* Admit waiting requests from the head into a prefill batch; returns how many. */
static int admit_prefill(prs_infer_engine *e)
{
    e->n_batch = 0;
    e->batch_tokens = 0;
    while (e->wq_n > 0 && e->n_free > 0) {
        const seq *h = wq_at(e, 0);
        long p = (long)h->job.in_tokens + h->generated;
        if (e->n_batch > 0 && e->batch_tokens + p > e->cfg.max_batched_tokens) break;
        if (e->used_blocks + blocks_of(p) > e->kv_blocks - e->watermark_blocks) break;
        int slot = e->free_slots[--e->n_free];
        e->slots[slot] = *h;
        e->slots[slot].state = SLOT_PREFILL;
        e->slots[slot].admit_no = ++e->admits;
        e->used_blocks += blocks_of(p);
        e->batch[e->n_batch++] = slot;
        e->batch_tokens += p;
        e->wq_head = (e->wq_head + 1) % e->wq_cap;
        e->wq_n--;
    }
    return e->n_batch;
}

/* One iteration's figures at clock mhz, or under the power limit at the highest lower clock of
 * the backend that fits it (the lowest when none does). */
static int iteration(prs_infer_engine *e, const prs_infer_prefill *pf, const prs_infer_decode *dc,
                     int mhz, double *t, double *j, char *floor_hit, prs_error *err)
{
    const prs_infer_perf *p = e->cfg.perf;
    *floor_hit = 0;
    int rc = pf ? p->prefill(p->ctx, e->cfg.tp, mhz, pf, t, j, err)
                : p->decode(p->ctx, e->cfg.tp, mhz, dc, t, j, err);
    if (rc || !(e->power_limit_w > 0) || !(*t > 0) || *j <= e->power_limit_w * *t) return rc;
    const int *clk;
    int n;
    rc = p->clocks(p->ctx, &clk, &n);
    for (int f = n - 1; !rc && f >= 0; f--) {
        if (clk[f] >= mhz) continue;
        rc = pf ? p->prefill(p->ctx, e->cfg.tp, clk[f], pf, t, j, err)
                : p->decode(p->ctx, e->cfg.tp, clk[f], dc, t, j, err);
        if (!rc && *j <= e->power_limit_w * *t) return PRS_OK;
    }
    if (!rc) *floor_hit = 1;
    return rc;
}

static int start_prefill(prs_infer_engine *e, double now_s, prs_error *err)
{
    prs_infer_prefill it = {e->n_batch, e->batch_tokens};
    double t, j;
    char floor_hit;
    int rc = iteration(e, &it, NULL, e->cfg.mhz, &t, &j, &floor_hit, err);
    if (rc) return rc;
    e->over_limit += floor_hit;
    if (!prs__infer_perf_figures_ok(t, j))
        return prs_error_set(err, PRS_EINVAL, "backend: bad prefill figures (TP %d, %d MHz)",
                             e->cfg.tp, e->cfg.mhz);
    e->iter = ITER_PREFILL;
    e->iter_start_s = now_s;
    e->iter_end_s = now_s + t;
    e->iter_energy_j = j;
    return PRS_OK;
}

/* The blocks decode step number `step` needs: one for each running sequence whose context is at
 * a block boundary then. */
static long step_blocks(const prs_infer_engine *e, long step)
{
    int k = (int)((PRS_INFER_KV_BLOCK_TOKENS - step % PRS_INFER_KV_BLOCK_TOKENS) %
                  PRS_INFER_KV_BLOCK_TOKENS);
    return e->phase_count[k];
}

/* Figures of the run's step number run_n, starting at start_s, into the run. */
static int run_step(prs_infer_engine *e, double start_s, prs_error *err)
{
    long n = e->n_running;
    prs_infer_decode it = {(int)n, e->sum_ctx + n * (e->run_n + 1)};
    double t, j;
    int mhz = prs_infer_engine_decode_clock(e);
    int rc = iteration(e, NULL, &it, mhz, &t, &j, &e->run_floor[e->run_n], err);
    if (rc) return rc;
    if (!prs__infer_perf_figures_ok(t, j))
        return prs_error_set(err, PRS_EINVAL, "backend: bad decode figures (TP %d, %d MHz)",
                             e->cfg.tp, mhz);
    e->run_end_s[e->run_n] = start_s + t;
    e->run_j[e->run_n++] = j;
    return PRS_OK;
}

/* A decode run from now_s: the first step (preempting while its blocks do not fit), then as
 * many more as can come with nothing changing: no sequence finishes before the run's last
 * step, every step's blocks fit without preemption, no step starts at or after the horizon
 * (the policy's next decision), at most max_run steps. Each step's figures are the backend's
 * at its own batch and context, as if run one at a time. */
static int start_decode(prs_infer_engine *e, double now_s, prs_error *err)
{
    for (;;) {
        long need = step_blocks(e, e->decodes);
        if (e->used_blocks + need <= e->kv_blocks) {
            e->used_blocks += need;
            break;
        }
        int rc = preempt_latest(e, err);
        if (rc) return rc;
    }
    e->run_n = e->run_i = 0;
    int rc = run_step(e, now_s, err);
    long first_finish = e->heap_n > 0 ? e->heap[0].step : e->decodes + 1;
    long extra = 0;
    while (!rc && e->run_n < e->max_run && e->decodes + e->run_n < first_finish) {
        double start = e->run_end_s[e->run_n - 1];
        long need = step_blocks(e, e->decodes + e->run_n);
        if (start >= e->horizon_s || e->used_blocks + extra + need > e->kv_blocks) break;
        extra += need;
        rc = run_step(e, start, err);
    }
    if (rc) return rc;
    e->iter = ITER_DECODE;
    e->iter_start_s = now_s;
    e->iter_end_s = e->run_end_s[e->run_n - 1];
    return PRS_OK;
}

/* The next iteration at now_s, or idle from now_s. */
static int start_next(prs_infer_engine *e, double now_s, prs_error *err)
{
    e->iter = ITER_NONE;
    if (now_s < e->paused_until_s || (e->wq_n == 0 && e->n_running == 0)) return PRS_OK;
    int rc = charge_idle(e, now_s, err);
    if (rc) return rc;
    if (e->wq_n > 0 && admit_prefill(e) > 0) {
        e->prompt_tokens += e->batch_tokens;
        return start_prefill(e, now_s, err);
    }
    if (e->n_running > 0) return start_decode(e, now_s, err);
    return PRS_OK; /* unreachable: a request alone always fits (checked at submit) */
}

static void token_hook(prs_infer_engine *e, const seq *s, int token, double t_s)
{
    if (e->cfg.on_token) e->cfg.on_token(e->cfg.on_token_ud, s->job.id, token, t_s);
}

static void end_prefill(prs_infer_engine *e, double t_s)
{
    for (int i = 0; i < e->n_batch; i++) {
        int slot = e->batch[i];
        seq *s = &e->slots[slot];
        long p = (long)s->job.in_tokens + s->generated;
        s->generated++;
        if (s->generated == 1) {
            s->first_token_s = t_s;
            e->tokens_outstanding -= s->job.in_tokens;
            if (e->cfg.latency) {
                double ttft = t_s - s->job.arrival_s;
                prs__infer_hist_add(&e->cfg.latency->ttft[s->job.klass], ttft, 1);
                prs__infer_hist_add(&e->cfg.latency->ttft[PRS_INFER_ALL], ttft, 1);
            }
        } else {
            note_gap(e, s->job.klass, t_s - s->last_token_s, 1);
        }
        e->tokens_outstanding--;
        s->last_token_s = t_s;
        token_hook(e, s, s->generated, t_s);
        if (s->generated >= s->job.out_tokens) {
            e->used_blocks -= blocks_of(p);
            note_done(e, s, t_s);
            free_slot(e, slot);
        } else {
            join_running(e, slot, p);
        }
    }
    e->n_batch = 0;
}

static void end_decode(prs_infer_engine *e, double t_s)
{
    double gap = t_s - e->last_decode_end_s;
    if (e->cfg.latency) {
        size_t bin = prs__infer_hist_bin(gap);
        uint64_t all = 0;
        for (int k = 0; k < PRS_INFER_NCLASS; k++)
            if (e->old_count[k] > 0) {
                prs__infer_hist_add_at(&e->cfg.latency->tbt[k], bin, gap,
                                       (uint64_t)e->old_count[k]);
                all += (uint64_t)e->old_count[k];
            }
        if (all) prs__infer_hist_add_at(&e->cfg.latency->tbt[PRS_INFER_ALL], bin, gap, all);
    }
    for (int i = 0; i < e->n_fresh; i++) {
        seq *s = &e->slots[e->fresh[i]];
        note_gap(e, s->job.klass, t_s - s->last_token_s, 1);
        e->old_count[s->job.klass]++;
    }
    e->n_fresh = 0;
    e->decodes++;
    e->sum_ctx += e->n_running;
    e->tokens_outstanding -= e->n_running;
    e->last_decode_end_s = t_s;
    if (e->cfg.on_token)
        for (int i = 0; i < e->max_batch; i++) {
            const seq *s = &e->slots[i];
            if (s->state == SLOT_RUNNING)
                token_hook(e, s, s->generated + (int)(e->decodes - s->step0), t_s);
        }
    while (e->heap_n > 0 && e->heap[0].step <= e->decodes) {
        heap_ent h = e->heap[0];
        heap_pop(e);
        seq *s = &e->slots[h.slot];
        if (s->state != SLOT_RUNNING || s->admit_no != h.admit_no) continue;
        leave_running(e, h.slot);
        /* leave_running took it for one that took part in this step (old). */
        note_done(e, s, t_s);
        free_slot(e, h.slot);
    }
}

/* Apply the run's next step to the state: its blocks (the first step's were taken when the run
 * started), energy, tokens and gaps. */
static void apply_step(prs_infer_engine *e)
{
    int i = e->run_i++;
    double t0 = i ? e->run_end_s[i - 1] : e->iter_start_s;
    if (i > 0) e->used_blocks += step_blocks(e, e->decodes);
    e->over_limit += e->run_floor[i];
    meter(e, t0, e->run_end_s[i], e->run_j[i]);
    end_decode(e, e->run_end_s[i]);
}

void prs_infer_engine_sync(prs_infer_engine *e, double now_s)
{
    if (e->iter != ITER_DECODE) return;
    while (e->run_i < e->run_n - 1 && e->run_end_s[e->run_i] < now_s)
        apply_step(e);
}

/* Something changes at now_s: the run ends with the step in progress then. */
static void cut_run(prs_infer_engine *e, double now_s)
{
    if (e->iter != ITER_DECODE) return;
    prs_infer_engine_sync(e, now_s);
    e->run_n = e->run_i + 1;
    e->iter_end_s = e->run_end_s[e->run_i];
}

void prs_infer_engine_set_horizon(prs_infer_engine *e, double until_s)
{
    e->horizon_s = until_s;
}

int prs_infer_engine_advance(prs_infer_engine *e, prs_error *err)
{
    if (e->iter == ITER_NONE) {
        /* Work queued while idle, or paused: start when it may. */
        double t = prs_infer_engine_next_s(e);
        return isfinite(t) ? start_next(e, t, err) : PRS_OK;
    }
    double t = e->iter_end_s;
    if (e->iter == ITER_PREFILL) {
        meter(e, e->iter_start_s, t, e->iter_energy_j);
        end_prefill(e, t);
    } else {
        while (e->run_i < e->run_n)
            apply_step(e);
    }
    e->idle_since_s = t;
    return start_next(e, t, err);
}

double prs_infer_engine_next_s(const prs_infer_engine *e)
{
    if (e->iter != ITER_NONE) return e->iter_end_s;
    if (e->wq_n > 0 || e->n_running > 0)
        return e->start_at_s > e->paused_until_s ? e->start_at_s : e->paused_until_s;
    return INFINITY;
}

int prs__infer_fits_kv(long kv_tokens, int in_tokens, int out_tokens)
{
    long blocks = kv_tokens / PRS_INFER_KV_BLOCK_TOKENS;
    long watermark = (long)(PRS_INFER_KV_WATERMARK * (double)blocks);
    return blocks_of((long)in_tokens + out_tokens) <= blocks - watermark;
}

int prs_infer_engine_fits(const prs_infer_engine *e, int in_tokens, int out_tokens)
{
    return blocks_of((long)in_tokens + out_tokens) <= e->kv_blocks - e->watermark_blocks;
}

int prs_infer_engine_submit(prs_infer_engine *e, const prs_infer_job *job, double now_s,
                            prs_error *err)
{
    if (!prs_infer_engine_fits(e, job->in_tokens, job->out_tokens))
        return prs_error_set(err, PRS_EINVAL,
                             "request %u (%d + %d tokens) exceeds the KV cache of a TP %d "
                             "instance (%ld tokens)",
                             job->id, job->in_tokens, job->out_tokens, e->cfg.tp,
                             e->kv_blocks * PRS_INFER_KV_BLOCK_TOKENS);
    cut_run(e, now_s);
    if (e->wq_n == e->wq_cap) {
        int rc = wq_grow(e, err);
        if (rc) return rc;
    }
    seq *s = &e->wq[(e->wq_head + e->wq_n) % e->wq_cap];
    memset(s, 0, sizeof *s);
    s->job = *job;
    e->wq_n++;
    e->tokens_outstanding += (long)job->in_tokens + job->out_tokens;
    if (e->iter == ITER_NONE && e->wq_n + (size_t)e->n_running == 1) e->start_at_s = now_s;
    return PRS_OK;
}

void prs_infer_engine_flush(prs_infer_engine *e, double now_s)
{
    if (e->iter == ITER_NONE) charge_idle(e, now_s, NULL);
}

int prs_infer_engine_set_clock(prs_infer_engine *e, int mhz, double now_s, prs_error *err)
{
    cut_run(e, now_s);
    if (e->iter == ITER_NONE) {
        int rc = charge_idle(e, now_s, err);
        if (rc) return rc;
    }
    e->cfg.mhz = mhz;
    return PRS_OK;
}

int prs_infer_engine_clock(const prs_infer_engine *e)
{
    return e->cfg.mhz;
}
void prs_infer_engine_set_decode_clock(prs_infer_engine *e, int mhz)
{
    e->decode_mhz = mhz > 0 ? mhz : 0;
}

int prs_infer_engine_decode_clock(const prs_infer_engine *e)
{
    return e->decode_mhz > 0 && e->decode_mhz < e->cfg.mhz ? e->decode_mhz : e->cfg.mhz;
}

void prs_infer_engine_set_power_limit(prs_infer_engine *e, double power_w)
{
    e->power_limit_w = power_w > 0 ? power_w : 0;
}

long prs_infer_engine_over_limit(const prs_infer_engine *e)
{
    return e->over_limit;
}

void prs_infer_engine_running(const prs_infer_engine *e, int *n_seqs, long *ctx_tokens)
{
    *n_seqs = (int)e->n_running;
    *ctx_tokens = e->sum_ctx;
}

int prs_infer_engine_tp(const prs_infer_engine *e)
{
    return e->cfg.tp;
}

void prs_infer_engine_pause(prs_infer_engine *e, double until_s)
{
    if (until_s > e->paused_until_s) e->paused_until_s = until_s;
}

long prs_infer_engine_outstanding(const prs_infer_engine *e)
{
    return (long)e->wq_n + e->n_running + e->n_batch;
}

long prs_infer_engine_outstanding_tokens(const prs_infer_engine *e)
{
    return e->tokens_outstanding;
}

double prs_infer_engine_energy_j(const prs_infer_engine *e)
{
    return e->energy_j;
}
long prs_infer_engine_preemptions(const prs_infer_engine *e)
{
    return e->preempts;
}

long prs_infer_engine_prompt_tokens(const prs_infer_engine *e)
{
    return e->prompt_tokens;
}

double prs_infer_engine_head_wait_s(const prs_infer_engine *e, double now_s)
{
    if (e->wq_n == 0) return 0;
    double a = e->wq[e->wq_head].job.arrival_s;
    return now_s > a ? now_s - a : 0;
}
