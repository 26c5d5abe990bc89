/* An estimate of prs_plan's peak memory before it runs (prs_plan_measure, docs/planner.md,
 * 'Memory'): what the planner allocates per computation of the schedule graph (the graph itself,
 * the evaluation context, the walk's arrays, the flow network, the picker's scratch and, for
 * polishing, a second evaluation context), per extra picking thread, for the ring of points in
 * flight, for the per-duration tables and for the frontier. The per-computation figures are the
 * peaks bench/plan_memory measured on the development machine with a margin of a quarter or more
 * (the allocations add up to more, but not every array is touched); its report puts estimate
 * and peak side by side and fails when an estimate is below its peak. */
#include "perseus/planner.h"

#include "emit.h"
#include "plan_int.h"

/* What any run takes whatever its size: the allocator's arenas, the fixed buffers. */
#define BASE_BYTES (2.0 * 1048576)
/* Bytes per computation on one thread: exp (no refiner, no tracks, no polish) and hull. */
#define BYTES_PER_OP_EXP 620.0
#define BYTES_PER_OP_HULL 800.0
/* Bytes per computation of each picking thread past the first (hull): its picker and refiner. */
#define BYTES_PER_OP_THREAD 240.0
/* Bytes per computation of a slot of the ring of points in flight (hull with tracks). */
#define BYTES_PER_OP_SLOT 40.0
/* The per-duration tables, counted once by prs_plan_size, are built twice (the cost models'
 * and the walk's bounds) and padded: this many times their size. */
#define TABLE_FACTOR 2.5
/* Bytes per frontier point: the point and its changes from the last one, about one per GPU. */
#define POINT_BYTES 64.0
#define CHANGE_BYTES 8.0

double prs_plan_peak_bytes(const prs_plan_opts *o, const prs_plan_measures *m)
{
    long span = m->span;
    double table_bytes = m->table_bytes;
    int hull = o->cost_model == PRS_COST_HULL;
    int threads = !hull ? 1 : o->threads ? o->threads : prs__emit_default_threads();
    double ops = (double)m->ops;
    double bytes = BASE_BYTES + ops * (hull ? BYTES_PER_OP_HULL : BYTES_PER_OP_EXP);
    bytes += ops * BYTES_PER_OP_THREAD * (threads - 1);
    /* the ring: 2 slots alone, else up to 4 * 32 per thread within PRS__EMIT_BYTES */
    double slot = ops * BYTES_PER_OP_SLOT, ring = threads > 1 ? 128.0 * threads * slot : 2 * slot;
    if (threads > 1 && ring > (double)PRS__EMIT_BYTES) ring = (double)PRS__EMIT_BYTES;
    if (ring < 2 * slot) ring = 2 * slot;
    bytes += ring + TABLE_FACTOR * table_bytes;
    double gpus =
        (double)o->pipe.stages * (o->pipe.virtual_stages > 1 ? o->pipe.virtual_stages : 1);
    bytes += (double)(span + 1) * (POINT_BYTES + CHANGE_BYTES * gpus) * (hull ? 2 : 1);
    return bytes;
}
