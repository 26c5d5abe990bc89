/* Limits and tolerances shared by the libraries: every size bound and every floating-point
 * tolerance has its name here, with why it has its value. Sizes bound what one call may allocate
 * (a malformed input must fail with a message, not exhaust memory); tolerances are the only
 * places where two doubles are taken as equal. */
#ifndef PERSEUS_LIMITS_H
#define PERSEUS_LIMITS_H

/* ---- Sizes ---- */

/* Pipelines (prs_pipeline_check): stages x microbatches, and stages x microbatches x virtual
 * stages, at most this; an iteration then has at most 2e6 computations per GPU-chunk pair. */
#define PRS_MAX_PIPELINE_CELLS 1000000L
/* Model chunks per GPU of the interleaved schedule (prs_pipeline_check). */
#define PRS_MAX_VIRTUAL_STAGES 1024
/* Computations in one schedule DAG (stages * ops_per_stage; src/core/graph.c): a second guard
 * on the DAG's arrays, above anything PRS_MAX_PIPELINE_CELLS admits. */
#define PRS_MAX_DAG_OPS 20000000L
/* Largest stage number a profile row may carry (so per-stage arrays stay sane). */
#define PRS_PROFILE_MAX_STAGE 1000000
/* Largest rank number (rank, dp_rank, pp_rank, tp_rank) of a rank-level profile row: 2^24 GPUs. */
#define PRS_PROFILE_MAX_RANK 16777216
/* A profile CSV (prs_profile_load; perseusd's default --max-profile): at most 16 MiB, some
 * 300,000 rows; and one line of it at most PRS_PROFILE_MAX_LINE bytes (prs_profile_parse), far
 * more than five numbers and a word take. */
#define PRS_PROFILE_MAX_BYTES (16L << 20)
#define PRS_PROFILE_MAX_LINE 4096
/* A profile row's time and energy of one computation (prs_profile_parse, prs_profile_add): at
 * most 11.6 days and 1 TJ. Far above any real measurement, and low enough that the planner's sums
 * over PRS_MAX_DAG_OPS computations (and blocking power over their time) stay finite. */
#define PRS_PROFILE_MAX_TIME_S 1e6
#define PRS_PROFILE_MAX_ENERGY_J 1e12
/* A GPU's blocking power (prs_pipeline_check, perseus --blocking-power, perseusd's
 * blocking_power_w): 100 kW, far above any GPU's, so energies stay finite. */
#define PRS_MAX_BLOCKING_POWER_W 1e5
/* The time one clock change adds (prs_pipeline.change_cost_s, perseus --change-cost-us,
 * perseusd's change_cost_us): at most 100 ms, some hundred times what locking a real GPU's
 * clocks takes; a larger figure is a mistake of units. */
#define PRS_MAX_CHANGE_COST_S 0.1
/* Span q_max - q_min of an operation type's quantized times, in units of tau: the planner keeps
 * a cost table over the span (src/core/options.c); a larger one means a unit time far too small. */
#define PRS_MAX_UNIT_SPAN 100000000L
/* A measured time quantized to units of tau (prs__model_quantize): at most 2^53 units, where
 * doubles still count every unit and the conversion to long is exact. */
#define PRS_MAX_TIME_UNITS 9007199254740992.0
/* Critical paths are sums of quantized times in long: the sum of every computation's slowest
 * quantized time, times the stages (the blocking-energy term), must stay below this (2^62). */
#define PRS_MAX_PATH_UNITS 4611686018427387904.0
/* Points of a frontier read back from plans.prs (prs_frontier_load, prs_frontier_from_plans),
 * and the most perseusd's --max-plan-points allows. */
#define PRS_MAX_FRONTIER_POINTS 100000000L
/* GPUs of one emulated job, pipelines x stages x tp (prs_emulate, perseus emulate): far above
 * any real cluster, and low enough that every count and product of counts fits an int. */
#define PRS_MAX_JOB_GPUS 10000000L
/* Largest GPU device index accepted anywhere (nvml:INDEX, LOCAL_RANK, CUDA_VISIBLE_DEVICES,
 * perseus-gpud's --gpu nvml:INDEX): NVML and CUDA number devices far below it. */
#define PRS_MAX_GPU_INDEX 1023
/* Inference profiles (src/infer/profile.h): a file of at most 64 MiB (a fine sweep of every
 * clock, TP degree, batch and length stays far below it) and lines of at most 4096 bytes; a
 * row's tp, clock, batch and tokens within these bounds, its time and energy within the stage
 * profile's (PRS_PROFILE_MAX_TIME_S, PRS_PROFILE_MAX_ENERGY_J), so sums over a serving run stay
 * finite. Names of the model and GPU at most PRS_INFER_NAME_MAX - 1 bytes. */
#define PRS_INFER_PROFILE_MAX_BYTES (64L << 20)
#define PRS_INFER_PROFILE_MAX_LINE 4096
#define PRS_INFER_MAX_TP 64
#define PRS_INFER_MAX_FREQ_MHZ 10000
#define PRS_INFER_MAX_BATCH 1000000
#define PRS_INFER_MAX_TOKENS 1000000000L
#define PRS_INFER_NAME_MAX 64
/* How far beyond the largest measured tokens per sequence a profile's cost is extrapolated
 * (linearly, along the last measured segment): at most this factor; further is refused. */
#define PRS_INFER_PROFILE_MAX_EXTRAP 2.0

/* ---- Tolerances ---- */

/* Comparing iteration times to a target (seconds): times are multiples of the unit, so this only
 * absorbs the rounding of units * tau. */
#define PRS_TIME_TOL_S 1e-9
/* The reference planner's FP_ERROR (exp mode): capacities are padded by it and floored to its
 * grid, the cut tolerance, and a net cost change below it ends the frontier. Part of what makes
 * exp mode reproduce the reference bit for bit: do not change. */
#define PRS_REF_FP_ERROR 1e-6
/* hull mode's min-cut tolerance: slopes are exact there, so only rounding is absorbed. */
#define PRS_HULL_CUT_EPS 1e-9
/* hull mode: a plan whose evaluated energy is within this fraction of the relaxation's lower
 * bound is certified and emitted as refined; one further off also gets the reclaiming by rate
 * (docs/planner.md, 'From the relaxed plan to clocks'). */
#define PRS_HULL_CERT_GAP 5e-4
/* hull mode, clean frontier: a plan further than this fraction above the relaxation's lower
 * bound is also rounded along the relaxed schedule at the relaxation's price of time, forward
 * and backward (docs/planner.md, 'From the relaxed plan to clocks'); one within it is within it
 * of the optimum already. */
#define PRS_HULL_TRACK_GAP 1e-3
/* Planner threads: the most a caller may ask for, and the most used when it asks for 0 (the
 * processors online). */
#define PRS_PLAN_MAX_THREADS 256
#define PRS_PLAN_AUTO_THREADS 16
/* Max flow: the smallest residual capacity worth augmenting through. */
#define PRS_FLOW_AUG_EPS 1e-12
/* Max flow with lower bounds: a cut value below -this means no feasible flow (above, a
 * negative value is rounding of sums of capacities). */
#define PRS_FLOW_INFEASIBLE_TOL 1e-6
/* Cleaning a frontier (prs_frontier_clean): a plan whose evaluated energy is within this fraction
 * of the magnitudes compared of a faster plan's, blocking power over the gap included, is taken
 * as beaten (rounding of sums of energies, not a real saving). */
#define PRS_CLEAN_REL_TOL 1e-12
/* The planner's progress callback fires at least this often (seconds) during a run. */
#define PRS_PROGRESS_INTERVAL_S 0.25
/* Counting the values of a START:STOP:STEP range: (STOP - START) / STEP may fall just short of
 * a whole number through rounding (0.3 / 0.1); this much is taken as a whole step. */
#define PRS_RANGE_STEP_TOL 1e-6

#endif
