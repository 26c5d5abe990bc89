/* How fast a pipeline runs in wall-clock time (docs/server.md, 'Plan switches').
 *
 * A plan switch is announced some iterations ahead so that every rank hears of it in time. The
 * profile gives each plan's iteration time, but what the ranks need is wall-clock time to fetch
 * the schedule: a pipeline that runs faster than its plan says (a simulated GPU, a frontier
 * reused from slower GPUs) would leave them too little. Each rank reports the wall-clock time
 * between the ends of its consecutive iterations (wall_s), measured on its own host, so neither
 * the batching of reports nor a catch-up after an outage distorts it. The pace is measured over
 * windows of reports that add up to PACE_WINDOW_S or count PACE_WINDOW_N, whichever comes first,
 * and is the faster of the last two windows: a speed-up lengthens the lead within one window and
 * a slow-down shortens it only one window later. */
#ifndef PRS_SERVER_PACE_H
#define PRS_SERVER_PACE_H

#define PACE_WINDOW_S 0.25
#define PACE_WINDOW_N 16

typedef struct pipe_pace {
    double sum_s;   /* wall time of the reports in the current window */
    long n;         /* reports in the current window */
    double last_hz; /* iterations per second in the previous window (0: none) */
    double hz;      /* the pace: the faster of the last two windows (0: unknown) */
} pipe_pace;

/* Forget everything (no pace known). */
void pace_reset(pipe_pace *p);

/* A pace stored before a restart (hz <= 0 or not finite: none); it holds until a window ends. */
void pace_restore(pipe_pace *p, double hz);

/* One rank's iteration took wall_s seconds of wall-clock time (<= 0 or not finite: not known,
 * ignored). Every rank of the pipeline may report the same iteration: the pace is a ratio. */
void pace_note(pipe_pace *p, double wall_s);

/* Iterations the pipeline runs in lead_s seconds of wall time at its pace (0 when unknown). */
long pace_iterations(const pipe_pace *p, double lead_s);

#endif
