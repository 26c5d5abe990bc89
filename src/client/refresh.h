/* When the energy counter took its values (docs/measurement.md), internal to the client.
 *
 * The sampler (sampler.h) sees a new counter value between two reads: the counter took it at an
 * unknown instant of that bracket. Two kinds of counters make the instant knowable:
 *   - a continuous counter (the value changes at nearly every read): the value is the one at the
 *     read, the bracket's end;
 *   - a counter refreshed periodically (every 10-100 ms on current GPUs): the refresh instants
 *     are phase + k * period; the period and phase that the brackets allow (a weighted line
 *     through their middles, then the middle of what their ends allow), checked to fall inside
 *     them, give each value's instant (the latest refresh before the bracket's end) to a fraction
 *     of a millisecond where the bracket only gives it to one poll period.
 * Otherwise (irregular refreshes, too few readings yet) the bracket stands. Readings go through
 * prs__client_refresh_map in time order; it narrows [*lo, *hi] to [t, t] when it can. */
#ifndef PRS_CLIENT_REFRESH_H
#define PRS_CLIENT_REFRESH_H

#define PRS__CLIENT_REFRESH_WINDOW 256

typedef struct prs__client_refresh {
    double lo[PRS__CLIENT_REFRESH_WINDOW], hi[PRS__CLIENT_REFRESH_WINDOW];
    int head, len;        /* recent brackets, a ring */
    int since_fit;        /* brackets since the last fit */
    int contiguous;       /* of the recent brackets, those that began at the previous one's end */
    double period, phase; /* the fitted refresh instants (period 0: none); phase is one of them */
    int locked;           /* the fit held for the recent brackets */
} prs__client_refresh;

void prs__client_refresh_init(prs__client_refresh *r);
void prs__client_refresh_map(prs__client_refresh *r, double *lo, double *hi);

#endif
