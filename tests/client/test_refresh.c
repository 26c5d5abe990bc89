/* The energy counter's refresh instants (src/client/refresh.h) from the brackets a sampler sees.
 * A counter refreshed every 100 ms at a random phase, polled every 5-15 ms (each change known to
 * lie between the two polls around it), and, as on a loaded host, some reads held up for 40-110
 * ms: their brackets are wide, the refresh anywhere in them but the last before their end (the
 * value read is the latest refresh's). The fit must lock, keep its period to 0.1 per mille, map
 * nearly every change, and, once it has seen 128 refreshes, date them to 0.3 ms rms and 1 ms at
 * worst (4 ms before: 16 brackets of 10 ms tell the period to a few tenths of a millisecond). Wide
 * brackets must not pull it off, nor a long window: a line through every middle, each numbered from
 * the first with the median gap, left a third of the changes unmapped, went a whole period wrong,
 * and dated a held-up read at the refresh before its value's. Then a 10 ms counter polled every 1-3
 * ms, as on an A100. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <math.h>

#include "refresh.h"
#include "rng.h"

typedef struct run_stats {
    int locked_at_end, mapped, late, after;            /* after: brackets after the first 128 */
    double period, worst_err_s, worst_late_s, sq_late; /* of every change mapped; after 128 */
} run_stats;

/* n refreshes of the given period; a share held of the brackets are held-up reads. */
static run_stats run(uint64_t seed, int n, double period, double held)
{
    uint64_t s = seed;
    prs__client_refresh f;
    prs__client_refresh_init(&f);
    run_stats st = {0};
    double phase = 5.0 + prs_test_rng_unif(&s) * period;
    for (int k = 0; k < n; k++) {
        double t = phase + k * period, lo, hi;
        if (prs_test_rng_unif(&s) < held) {
            /* the read after the refresh was held up; no refresh came after t before its end */
            double w = 0.040 + 0.070 * prs_test_rng_unif(&s), u = prs_test_rng_unif(&s);
            if (w * (1 - u) > 0.99 * period) u = 1 - 0.99 * period / w;
            lo = t - w * u;
            hi = lo + w;
        } else {
            double poll = 0.005 + 0.010 * prs_test_rng_unif(&s);
            lo = t - poll * prs_test_rng_unif(&s);
            hi = lo + poll;
        }
        prs__client_refresh_map(&f, &lo, &hi);
        st.after += k >= 128;
        if (lo != hi) continue;
        st.mapped++;
        st.worst_err_s = fmax(st.worst_err_s, fabs(lo - t));
        if (k < 128) continue;
        st.late++;
        st.sq_late += (lo - t) * (lo - t);
        st.worst_late_s = fmax(st.worst_late_s, fabs(lo - t));
    }
    st.locked_at_end = f.locked;
    st.period = f.period;
    return st;
}

static void test_regular_polls(void **state)
{
    (void)state;
    for (uint64_t seed = 1; seed <= 20; seed++) {
        run_stats st = run(seed, 300, 0.100, 0.0);
        assert_true(st.locked_at_end);
        assert_true(fabs(st.period - 0.100) < 1e-5);
        assert_true(st.mapped >= 280);
        assert_true(st.worst_err_s < 4e-3);
        assert_true(st.worst_late_s < 1e-3);
        assert_true(sqrt(st.sq_late / st.late) < 3e-4);
    }
}

static void test_held_up_reads(void **state)
{
    (void)state;
    int late = 0, after = 0;
    double sq = 0, worst = 0;
    for (uint64_t seed = 1; seed <= 20; seed++) {
        run_stats st = run(seed, 300, 0.100, 0.08);
        late += st.late;
        after += st.after;
        sq += st.sq_late;
        worst = fmax(worst, st.worst_late_s);
        double rms = sqrt(st.sq_late / st.late);
        if (!st.locked_at_end || fabs(st.period - 0.100) >= 1e-5 || st.worst_late_s >= 1e-3 ||
            rms >= 3e-4)
            print_error("seed %llu: locked %d, period %.4f ms, mapped %d, worst %.3f ms, rms %.3f "
                        "ms\n",
                        (unsigned long long)seed, st.locked_at_end, 1e3 * st.period, st.mapped,
                        1e3 * st.worst_late_s, 1e3 * rms);
        assert_true(st.locked_at_end);
        assert_true(fabs(st.period - 0.100) < 1e-5);
        assert_true(st.mapped >= 280);
        assert_true(st.worst_err_s < 4e-3);
        assert_true(st.worst_late_s < 1e-3);
        assert_true(rms < 3e-4);
    }
    print_message("held-up reads, 20 runs: after 128 refreshes %.1f %% of the changes dated, rms "
                  "%.3f ms, worst %.3f ms\n",
                  100.0 * late / after, 1e3 * sqrt(sq / late), 1e3 * worst);
}

/* A counter with a 10 ms refresh polled every 1-3 ms, a few reads held up past a period: a held-up
 * bracket may contain two refresh instants, and mapping must not pick the wrong one. */
static void test_short_period(void **state)
{
    (void)state;
    uint64_t s = 7;
    prs__client_refresh f;
    prs__client_refresh_init(&f);
    int mapped = 0;
    double worst = 0;
    for (int k = 0; k < 2000; k++) {
        double t = 1.0 + k * 0.010, poll = 0.001 + 0.002 * prs_test_rng_unif(&s),
               u = prs_test_rng_unif(&s);
        if (prs_test_rng_unif(&s) < 0.03)
            poll = 0.012 + 0.008 * prs_test_rng_unif(&s);   /* held up past a period */
        if (poll * (1 - u) > 0.0099) u = 1 - 0.0099 / poll; /* t is the last refresh before hi */
        double lo = t - poll * u, hi = lo + poll;
        prs__client_refresh_map(&f, &lo, &hi);
        if (lo != hi) continue;
        mapped++;
        if (k >= 128) worst = fmax(worst, fabs(lo - t));
    }
    assert_true(f.locked);
    assert_true(mapped >= 1900);
    print_message("short period: worst %.3f ms, mapped %d\n", 1e3 * worst, mapped);
    assert_true(worst < 3e-4);
    assert_true(fabs(f.period - 0.010) < 1e-5);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_regular_polls),
        cmocka_unit_test(test_held_up_reads),
        cmocka_unit_test(test_short_period),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
