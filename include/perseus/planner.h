/* The Perseus frequency planner: stage profile -> iteration time-energy frontier, one frequency
 * plan per frontier point (docs/planner.md). Also the exact evaluation of any plan.
 *
 * A plan gives, for every stage, the SM clock (MHz) of each of that stage's computations in the
 * stage's execution order under the schedule (1F1B: docs/planner.md, 'Schedule DAG'); plans are
 * flat arrays of stages * ops_per_stage ints, stage-major. */
#ifndef PERSEUS_PLANNER_H
#define PERSEUS_PLANNER_H

#include "perseus/export.h"

#include <stddef.h>
#include "perseus/error.h"
#include "perseus/limits.h" /* PRS_TIME_TOL_S */
#include "perseus/profile.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Pipeline schedules (the order each GPU runs its computations in):
 *   1f1b         DeepSpeed/Megatron one-forward-one-backward, the reference's (docs/planner.md);
 *   gpipe        all forwards (microbatch 0, 1, ...) then all backwards (same order);
 *   interleaved  Megatron-LM's interleaved 1F1B: each GPU holds virtual_stages model chunks
 *                (chunk c runs on GPU c mod stages); microbatches a multiple of stages. */
typedef enum prs_schedule {
    PRS_SCHEDULE_1F1B = 0,
    PRS_SCHEDULE_GPIPE = 1,
    PRS_SCHEDULE_INTERLEAVED = 2
} prs_schedule;
typedef enum prs_cost_model { PRS_COST_EXP = 0, PRS_COST_HULL = 1 } prs_cost_model;

/* How the exp model picks its candidate options (docs/planner.md, 'Option filter'):
 *   artifact  the SOSP'24 artifact's: drop options dominated in (time, measured energy), then
 *             subtract blocking power from the survivors;
 *   zeus      Zeus master's: subtract blocking power from every option first, then drop options
 *             dominated in (time, effective cost). Keeps slow, low-clock options the artifact
 *             drops. The hull model always works on effective cost and ignores this. */
typedef enum prs_option_filter { PRS_FILTER_ARTIFACT = 0, PRS_FILTER_ZEUS = 1 } prs_option_filter;

/* Which planner iterations a frontier keeps (docs/planner.md, 'Clean frontier'):
 *   auto   clean for hull; raw for exp (whose raw frontier is the reference's);
 *   raw    one point per iteration, as planned;
 *   clean  only plans that no faster plan beats once blocking power over the time gap is
 *          counted, by evaluated figures; evaluated times strictly falling. */
typedef enum prs_frontier_kind {
    PRS_FRONTIER_AUTO = 0,
    PRS_FRONTIER_RAW = 1,
    PRS_FRONTIER_CLEAN = 2
} prs_frontier_kind;

/* Which plans the planner polishes (docs/planner.md, 'Polishing'): a local search that lowers a
 * plan's evaluated energy without lengthening its evaluated time.
 *   auto  runs for hull, none for exp (whose frontier is the reference's);
 *   none  no plan;
 *   runs  the plan a job runs with no straggler (prs_frontier_lookup(f, 0)), the fastest;
 *         straggler plans are polished when looked up (prs_frontier_lookup_plan);
 *   all   every plan of the frontier (then cleaned again, on a clean frontier). */
typedef enum prs_polish_kind {
    PRS_POLISH_AUTO = 0,
    PRS_POLISH_NONE = 1,
    PRS_POLISH_RUNS = 2,
    PRS_POLISH_ALL = 3
} prs_polish_kind;

/* Default bound on frontier length (prs_plan_opts.max_points): a point with its plan changes
 * takes about 100 bytes in memory and 200 bytes on disk, so this stays under ~200 MB. */
#define PRS_DEFAULT_MAX_POINTS 1000000L

/* The pipeline being planned: a value type shared by planning and evaluation. */
typedef struct prs_pipeline {
    int stages; /* GPUs in the pipeline */
    int microbatches;
    prs_schedule schedule;
    double unit_time_s;      /* quantum tau; > 0 */
    double blocking_power_w; /* GPU power while blocked or idle; >= 0 */
    int virtual_stages;      /* model chunks per GPU: interleaved only (>= 2); 0 or 1 otherwise */
    double change_cost_s;    /* time a clock change adds before the computation that needs it on
                              * its GPU, at blocking power (docs/planner.md, 'Clock changes');
                              * 0 (default): changes are free; at most PRS_MAX_CHANGE_COST_S */
} prs_pipeline;

/* Progress of a planning run: done of about total steps. Return 0 to go on, anything else to
 * stop the run (prs_plan then fails with PRS_ECANCELED): a caller cancels a run this way. */
typedef int (*prs_progress_fn)(void *ud, long done, long total);
typedef void (*prs_warn_fn)(void *ud, const char *msg);

typedef struct prs_plan_opts {
    prs_pipeline pipe;
    prs_cost_model cost_model;
    int always_noise_factor;         /* reference --always-use-noise-factor (exp only) */
    prs_option_filter option_filter; /* exp only; default artifact */
    prs_frontier_kind frontier;      /* raw or clean frontier; default auto */
    long max_points;          /* refuse a pipeline whose frontier could be longer; 0: the default */
    prs_progress_fn progress; /* optional; called with (done, total estimate) after every
                                 step of the run (a step takes far less than
                                 PRS_PROGRESS_INTERVAL_S), after cleaning and at the end with
                                 done = total; before the walk, between the passes of its
                                 set-up (each at most linear in the size of the schedule
                                 graph), with done = total = 0 */
    int threads;              /* hull: threads that turn the points' relaxed plans into clocks, the
                                 caller's included: 1 for none started; 0 (default): one per processor,
                                 at most PRS_PLAN_AUTO_THREADS. exp plans on the caller's thread alone.
                                 The frontier does not depend on it */
    prs_warn_fn warn;         /* optional; one line per warning (e.g. a fallback to hull) */
    void *ud;                 /* passed to progress and warn */
    prs_polish_kind polish;   /* which plans to polish; default auto */
} prs_plan_opts;

/* Defaults: 1F1B, exp, unit 1 ms, 0 W, stages/microbatches 0 (must be set). */
PRS_API void prs_plan_opts_default(prs_plan_opts *o);

/* Name <-> enum. Parsers return PRS_EINVAL for unknown names. */
PRS_API const char *prs_schedule_name(prs_schedule s);
PRS_API int prs_schedule_parse(const char *name, prs_schedule *out);
PRS_API const char *prs_cost_model_name(prs_cost_model m);
PRS_API int prs_cost_model_parse(const char *name, prs_cost_model *out);
PRS_API const char *prs_frontier_kind_name(prs_frontier_kind k);
PRS_API const char *prs_option_filter_name(prs_option_filter f);
PRS_API int prs_option_filter_parse(const char *name, prs_option_filter *out);
PRS_API int prs_frontier_kind_parse(const char *name, prs_frontier_kind *out);
PRS_API const char *prs_polish_kind_name(prs_polish_kind k);
PRS_API int prs_polish_kind_parse(const char *name, prs_polish_kind *out);

/* Validate a pipeline description (positive sizes, finite positive unit, finite power >= 0,
 * change cost from 0 to PRS_MAX_CHANGE_COST_S). */
PRS_API int prs_pipeline_check(const prs_pipeline *pipe, prs_error *err);

/* Model chunks = profile stages the pipeline needs: stages * virtual stages (interleaved),
 * stages otherwise. Profile stage c is model chunk c, run by GPU c mod stages. */
PRS_API int prs_pipeline_chunks(const prs_pipeline *pipe);
/* Computations per GPU in one iteration: 2 * microbatches * virtual stages. */
PRS_API int prs_ops_per_stage(const prs_pipeline *pipe);
/* What the computation at position pos of GPU stage's execution order is. */
PRS_API int prs_op_describe(const prs_pipeline *pipe, int stage, int pos, prs_instr *instr,
                            int *microbatch);
/* Same, with the model chunk (profile stage) it belongs to (chunk may be NULL). */
PRS_API int prs_op_describe_chunk(const prs_pipeline *pipe, int stage, int pos, prs_instr *instr,
                                  int *microbatch, int *chunk);

/* Clock changes a plan makes per iteration (docs/planner.md, 'Clock changes'): on every GPU,
 * each computation whose clock differs from the one before it in the GPU's execution order, the
 * first computation compared with the last (the plan repeats every iteration). clocks_mhz:
 * stages * ops_per_stage entries. -1 for a pipeline that fails prs_pipeline_check. */
PRS_API long prs_plan_count_changes(const prs_pipeline *pipe, const int *clocks_mhz);

/* One emitted planner iteration. */
typedef struct prs_frontier_point {
    long time_units;      /* planned iteration time in units of tau */
    double time_s;        /* time_units * tau: the reference's frontier time */
    double energy_j;      /* model-predicted iteration energy (the reference's frontier energy) */
    double cost_change_j; /* change of predicted effective energy in this iteration */
    double eval_time_s;   /* critical path of the chosen clocks' real quantized times */
    double eval_energy_j; /* real energies of the chosen clocks + blocking power when idle */
    double bound_j;       /* hull: a lower bound on the energy of any plan finishing within
                           * eval_time_s, the LP relaxation's (docs/planner.md, 'Polishing');
                           * 0 where unknown (exp) */
} prs_frontier_point;

typedef struct prs_frontier prs_frontier;

/* Run the planner. On success *out owns the frontier (points slowest first; at least one: a
 * pipeline that cannot be shortened has its one plan). Fails with PRS_EINVAL, naming the unit
 * time to use, when the frontier could hold more than opts->max_points points or a measured
 * time is too many units long to count. */
PRS_API int prs_plan(const prs_profile *profile, const prs_plan_opts *opts, prs_frontier **out,
                     prs_error *err);
/* What one planning run did, counted for performance work (bench_plan --stats; docs/planner.md,
 * 'Speed'). Counting costs nothing measurable, so every run counts. */
typedef struct prs_plan_stats {
    long steps;          /* planner iterations (a step taken k times in one go counts once) */
    long repeated;       /* hull: steps taken k >= 2 times in one go */
    long points;         /* frontier points emitted, before any cleaning */
    long cuts;           /* minimum cuts solved */
    long cuts_kept;      /* hull: steps whose flow problem was the last solve's, cut kept */
    long same_ops;       /* steps that changed the same computations as the step before */
    long level_searches; /* max flow: breadth-first level searches (Dinic's phases + 1, none
                          * where a cut search settled the solve) */
    long level_nodes;    /* nodes those searches reached */
    long cut_searches;   /* searches for the cut: first in a solve after one that needed no
                          * augmenting path, or where the last level search could not serve */
    long cut_nodes;      /* nodes those searches reached */
    long evaluations;    /* plans evaluated (some clock changed since the last point; with
                          * planner threads also the first point of each job of points) */
    long reclaims;       /* hull: reclaimings by rate run */
    long reclaim_moves;  /* the moves they made */
    long tracks;   /* hull, clean frontier: relaxed plans also rounded along their schedule (each
                    * result that the plan of its iteration does not beat is one more plan for
                    * the cleaning, beside the raw points) */
    double pick_s; /* time spent picking the points' plans (the evaluation and, in hull mode,
                    * the slack reclaiming, the reclaiming by rate and the roundings), summed
                    * over the threads, by the monotonic clock; the rest of a run is the
                    * planner's walk, the handing over and the cleaning */
    long polish_moves; /* moves polishing took (prs_plan_opts.polish; docs/planner.md,
                        * 'Polishing') */
    double polish_s;   /* time spent polishing, by the monotonic clock (part of neither pick_s
                        * nor the walk) */
} prs_plan_stats;

/* prs_plan, also filling *stats (zeroed first; on failure, what was counted until then). */
PRS_API int prs_plan_counted(const prs_profile *profile, const prs_plan_opts *opts,
                             prs_frontier **out, prs_plan_stats *stats, prs_error *err);
/* The size of a planning problem, cheaply (no cost model is fitted, nothing per unit of time is
 * allocated), so that a caller can refuse one before prs_plan: *span, the most points the
 * frontier can have (its T_max - T_min in units, the figure max_points bounds), and
 * *table_bytes, at most the memory the planner's per-duration tables take (they cover every
 * unit between a computation's fastest and slowest measured time). */
PRS_API int prs_plan_size(const prs_profile *profile, const prs_pipeline *pipe, long *span,
                          double *table_bytes, prs_error *err);
/* Whether a planning problem has a frontier to find, as cheaply as prs_plan_size (whose
 * failures it shares): PRS_EINVAL when every computation's fastest time rounds to 0 units at
 * pipe->unit_time_s (the fastest plan would take 0 s: the message gives the profile's range of
 * times and a unit that would do, naming the unit time unit_name, e.g. "--unit-time" or
 * "unit_time_s"; NULL: "unit time"). prs_plan does not refuse it; a caller that plans a profile
 * it did not make checks it first. (An iteration's energy cannot overflow: a profile's rows and
 * the blocking power are bounded, perseus/limits.h.) */
PRS_API int prs_plan_check(const prs_profile *profile, const prs_pipeline *pipe,
                           const char *unit_name, prs_error *err);
/* What prs_plan_measure finds out about a planning problem before planning it. */
typedef struct prs_plan_measures {
    long ops;           /* computations in the schedule graph */
    long span;          /* as prs_plan_size */
    double table_bytes; /* as prs_plan_size */
    double peak_bytes;  /* an estimate of prs_plan's peak memory with these options: the
                         * schedule graph and every array the planner keeps per computation
                         * (threads included), the tables and the frontier (docs/planner.md,
                         * 'Memory') */
} prs_plan_measures;

/* prs_plan_check and prs_plan_size in one pass (the problem opened once), with the estimate of
 * prs_plan's peak memory for the options o (its pipeline, cost model and threads). o->progress,
 * when set, is called with done = total = 0 between the passes, each at most linear in the size
 * of the schedule graph: a non-zero answer stops the call with PRS_ECANCELED. */
PRS_API int prs_plan_measure(const prs_profile *profile, const prs_plan_opts *o,
                             const char *unit_name, prs_plan_measures *out, prs_error *err);
/* The peak-memory estimate of prs_plan_measure for other options o (another thread count, cost
 * model or frontier kind) on the problem it measured into m, without opening it again. */
PRS_API double prs_plan_peak_bytes(const prs_plan_opts *o, const prs_plan_measures *m);
PRS_API void prs_frontier_free(prs_frontier *f);
/* The clean frontier of f (docs/planner.md, 'Clean frontier') into *out, a new frontier: the
 * plans no faster plan beats (evaluated energy plus blocking power over the time gap, all
 * stages), ordered by strictly falling evaluated time. Ties go to the earlier point. */
PRS_API int prs_frontier_clean(const prs_frontier *f, prs_frontier **out, prs_error *err);

PRS_API size_t prs_frontier_size(const prs_frontier *f);
/* Pointer into the frontier; valid until prs_frontier_free. NULL if k is out of range. */
PRS_API const prs_frontier_point *prs_frontier_point_at(const prs_frontier *f, size_t k);
PRS_API const prs_pipeline *prs_frontier_pipeline(const prs_frontier *f);
PRS_API prs_cost_model prs_frontier_cost_model(const prs_frontier *f);
/* Write plan k into clocks_mhz (stages * ops_per_stage entries). */
PRS_API int prs_frontier_plan(const prs_frontier *f, size_t k, int *clocks_mhz, prs_error *err);
/* Index of the least evaluated-energy plan whose evaluated time is <= time_s (+PRS_TIME_TOL_S,
 * perseus/limits.h).
 * PRS_ERANGE if every plan is slower. */
PRS_API int prs_frontier_find_time(const prs_frontier *f, double time_s, size_t *k, prs_error *err);

/* Persist to / restore from a directory: frontier.csv (time,energy: the reference's semantics),
 * frontier-detail.csv (index, planned and evaluated figures), plans.prs (all plans, stored as
 * the first plan plus per-iteration changes). save creates dir if missing; save and to_plans
 * refuse (PRS_ERANGE) a point load would not read back (a figure not finite, an energy below
 * 0). load refuses (PRS_EPARSE, file:line) a plans.prs of no points or with such a point, and
 * reads no line longer than the pipeline's computations need (README.md, 'perseus plan'). */
PRS_API int prs_frontier_save(const prs_frontier *f, const char *dir, prs_error *err);
PRS_API int prs_frontier_load(const char *dir, prs_frontier **out, prs_error *err);
/* The same plans.prs text in memory, for callers that keep frontiers elsewhere (a database):
 * to_plans writes it, byte for byte what save writes, into a malloc'd buffer (*text, *len; the
 * caller frees; NUL-terminated, the NUL not counted); from_plans parses len bytes of it (no NUL
 * needed), naming the text `name` in error messages; it reads a text of no points too. */
PRS_API int prs_frontier_to_plans(const prs_frontier *f, char **text, size_t *len, prs_error *err);
PRS_API int prs_frontier_from_plans(const char *name, const void *text, size_t len,
                                    prs_frontier **out, prs_error *err);

/* The frontier lookup rule. With no straggler (straggler_time_s <= 0): the least evaluated
 * energy plan at the frontier's fastest evaluated time. With a straggler pipeline at T': among
 * plans whose evaluated time is <= T' (the fastest plan if none), the one minimising its
 * evaluated energy plus the blocking energy of its stages until T',
 * stages * P_block * (T' - t). */
PRS_API int prs_frontier_lookup(const prs_frontier *f, double straggler_time_s, size_t *k);

/* Polish a plan (docs/planner.md, 'Polishing'): clocks_mhz (stages * ops_per_stage entries) is
 * replaced by a plan no slower by evaluation and no costlier, often cheaper; *time_s and
 * *energy_j (either may be NULL) get its evaluated figures. Fails like prs_evaluate_plan. */
PRS_API int prs_plan_polish(const prs_profile *profile, const prs_pipeline *pipe, int *clocks_mhz,
                            double *time_s, double *energy_j, prs_error *err);
/* The plan prs_frontier_lookup chooses for straggler_time_s, polished against profile (when
 * polish is not PRS_POLISH_NONE), into clocks_mhz with its evaluated figures (*time_s,
 * *energy_j; may be NULL) and its frontier index (*k, may be NULL). */
PRS_API int prs_frontier_lookup_plan(const prs_frontier *f, const prs_profile *profile,
                                     double straggler_time_s, prs_polish_kind polish,
                                     int *clocks_mhz, size_t *k, double *time_s, double *energy_j,
                                     prs_error *err);

/* One computation of a plan laid out in time (earliest start), for timelines and breakdowns. */
typedef struct prs_timeline_op {
    int stage; /* GPU */
    int pos;   /* position in the GPU's execution order */
    int chunk; /* model chunk = profile stage */
    prs_instr instr;
    int microbatch;
    int freq_mhz;
    double start_s, end_s; /* quantized times, as the evaluation uses them */
    double energy_j;       /* measured energy of the computation at that clock */
} prs_timeline_op;

/* Lay a plan out in time: ops[stage * ops_per_stage + pos] (caller allocates stages *
 * ops_per_stage entries). *time_s is the iteration time, *energy_j the evaluated energy
 * (same figures as prs_evaluate_plan). */
PRS_API int prs_plan_timeline(const prs_profile *profile, const prs_pipeline *pipe,
                              const int *clocks_mhz, prs_timeline_op *ops, double *time_s,
                              double *energy_j, prs_error *err);

/* Exact evaluation of a plan against a profile: each computation takes its clock's measured
 * time quantized to units of tau (as the planner quantizes) and its measured energy; the
 * iteration time is the critical path; every stage burns blocking power while not computing.
 * energy = sum(e) + P_block * (stages * T - sum(q * tau)). With pipe->change_cost_s > 0, a
 * computation whose clock differs from the one before it on its GPU (prs_plan_count_changes)
 * takes its measured time plus the change cost, quantized, and the change's time is spent at
 * blocking power (it is not part of q). Fails if a clock is not profiled. */
PRS_API int prs_evaluate_plan(const prs_profile *profile, const prs_pipeline *pipe,
                              const int *clocks_mhz, double *time_s, double *energy_j,
                              prs_error *err);

#ifdef __cplusplus
}
#endif
#endif
