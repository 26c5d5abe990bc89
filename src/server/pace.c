/* A pipeline's wall-clock pace (pace.h). */
#include "pace.h"

#include <math.h>

void pace_reset(pipe_pace *p)
{
    *p = (pipe_pace){0, 0, 0, 0};
}

void pace_restore(pipe_pace *p, double hz)
{
    pace_reset(p);
    if (hz > 0 && isfinite(hz)) p->hz = p->last_hz = hz;
}

void pace_note(pipe_pace *p, double wall_s)
{
    if (!(wall_s > 0) || !isfinite(wall_s)) return;
    p->sum_s += wall_s;
    p->n++;
    if (p->sum_s < PACE_WINDOW_S && p->n < PACE_WINDOW_N) return;
    double hz = (double)p->n / p->sum_s;
    p->hz = hz > p->last_hz ? hz : p->last_hz;
    p->last_hz = hz;
    p->sum_s = 0;
    p->n = 0;
}

long pace_iterations(const pipe_pace *p, double lead_s)
{
    double n = ceil(p->hz * lead_s);
    if (!(n > 0)) return 0;
    return n < 1e6 ? (long)n : 1000000;
}
