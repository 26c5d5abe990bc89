/* Number formatting and strict parsing (numfmt.h).
 *
 * Python's repr(float) prints the shortest digit string that round-trips, in positional notation
 * when the decimal exponent is in [-4, 16) and in scientific notation otherwise. We get the
 * shortest digits as the smallest p for which %.{p}e reads back as x with strtod (plus one string
 * up at powers of two, see below), found by bisection, then lay them out.
 *
 * The strict parsers take plain decimal text only: no leading whitespace (strto* would skip it),
 * and for doubles no hex floats, "inf" or "nan" (strtod takes them; none is a measurement). */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "perseus/numfmt.h"

/* Adds one unit in the last place of the nd-digit mantissa digits[] (value D.DDD x 10^exp10);
 * on carry out of the first digit the string becomes 100..0 and exp10 grows. */
static void bump_digits(char *digits, size_t nd, int *exp10)
{
    size_t i = nd;
    while (i > 0) {
        i--;
        if (digits[i] != '9') {
            digits[i]++;
            return;
        }
        digits[i] = '0';
    }
    digits[0] = '1';
    (*exp10)++;
}

/* Whether the decimal D.DDD x 10^exp10 reads back (strtod) as exactly x. */
static int reads_back(const char *digits, size_t nd, int exp10, double x)
{
    char s[48];
    size_t o = 0;
    s[o++] = digits[0];
    s[o++] = '.';
    for (size_t i = 1; i < nd; i++)
        s[o++] = digits[i];
    snprintf(s + o, sizeof s - o, "e%d", exp10);
    return strtod(s, NULL) == x;
}

/* The p+1 significant digits (digits[0..*nd), exponent *exp10) of the decimal nearest ax, or the
 * next one up where that one misses ax at a power of two; whether the result reads back as ax.
 * It does for p = 16, and once it does for some p it does for every larger p. The decimals that
 * read back as ax form an interval around it. When the nearest p+1-digit decimal lies in it,
 * the nearest p+2-digit one is no farther from ax, so it lies in it too, unless it falls on the
 * narrow side (below ax, at a power of two); the next string up then lies between ax and the
 * p+1-digit one, inside. When only the string up read back, the interval reaches at least half
 * a p+1-digit unit above ax and a quarter below, and the nearest p+2-digit decimal is within a
 * twentieth of one. */
static int digits_at(double ax, int p, char *digits, size_t *nd, int *exp10)
{
    char sci[40];
    snprintf(sci, sizeof sci, "%.*e", p, ax);
    /* sci = D[.DDD]e[+-]XX */
    const char *s = sci;
    *nd = 0;
    for (; *s && *s != 'e'; s++)
        if (*s != '.') digits[(*nd)++] = *s;
    *exp10 = atoi(s + 1);
    double back = strtod(sci, NULL);
    if (back == ax) return 1;
    /* The nearest p+1-digit string misses x. At a power of two the interval of decimals that
     * read back as x is twice as wide above x as below, so the next string up may still hit it
     * (Python's repr picks it: 2**-1017 is 7.120236347223045e-307). */
    if (back > ax) return 0;
    bump_digits(digits, *nd, exp10);
    return reads_back(digits, *nd, *exp10, ax);
}

/* digits_at for p, writing digits, *nd and *exp10 only when it holds. */
static int keep_if_held(double ax, int p, char *digits, size_t *nd, int *exp10)
{
    char d[24];
    size_t n;
    int e;
    if (!digits_at(ax, p, d, &n, &e)) return 0;
    memcpy(digits, d, n);
    *nd = n;
    *exp10 = e;
    return 1;
}

/* The shortest digits that read back as ax: the smallest p for which digits_at holds, found by
 * bisection (it holds from some p on); most doubles need 16 or 17 digits, so p = 15 and 14 are
 * tried first. The digits of the smallest p that held so far are kept, so the answer is not
 * formatted twice. */
static void shortest_digits(double ax, char *digits, size_t *nd, int *exp10)
{
    int lo = 0, hi = 16, have = 0; /* digits_at holds at hi; have: the digits are hi's */
    if (!(have = keep_if_held(ax, 15, digits, nd, exp10)))
        lo = 16;
    else if (!keep_if_held(ax, 14, digits, nd, exp10))
        lo = hi = 15;
    else
        hi = 14;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (keep_if_held(ax, mid, digits, nd, exp10))
            hi = mid, have = 1;
        else
            lo = mid + 1;
    }
    if (!have) digits_at(ax, 16, digits, nd, exp10); /* holds for every x */
}

char *prs_num_fmt_double(char *buf, size_t n, double x)
{
    if (isnan(x)) {
        snprintf(buf, n, "nan");
        return buf;
    }
    if (isinf(x)) {
        snprintf(buf, n, x < 0 ? "-inf" : "inf");
        return buf;
    }
    if (x == 0) {
        snprintf(buf, n, signbit(x) ? "-0.0" : "0.0");
        return buf;
    }
    int neg = signbit(x) != 0;
    double ax = fabs(x);
    char digits[24];
    size_t nd = 0;
    int exp10 = 0;
    shortest_digits(ax, digits, &nd, &exp10);
    digits[nd] = '\0';
    while (nd > 1 && digits[nd - 1] == '0')
        digits[--nd] = '\0';

    char out[64];
    size_t o = 0;
    if (neg) out[o++] = '-';
    if (exp10 >= -4 && exp10 < 16) {
        if (exp10 < 0) {
            out[o++] = '0';
            out[o++] = '.';
            for (int i = -1; i > exp10; i--)
                out[o++] = '0';
            for (size_t i = 0; i < nd; i++)
                out[o++] = digits[i];
        } else {
            size_t intlen = (size_t)exp10 + 1;
            for (size_t i = 0; i < intlen; i++)
                out[o++] = i < nd ? digits[i] : '0';
            out[o++] = '.';
            if (nd > intlen)
                for (size_t i = intlen; i < nd; i++)
                    out[o++] = digits[i];
            else
                out[o++] = '0';
        }
        out[o] = '\0';
    } else {
        out[o++] = digits[0];
        if (nd > 1) {
            out[o++] = '.';
            for (size_t i = 1; i < nd; i++)
                out[o++] = digits[i];
        }
        snprintf(out + o, sizeof out - o, "e%c%02d", exp10 < 0 ? '-' : '+', abs(exp10));
    }
    snprintf(buf, n, "%s", out);
    return buf;
}

int prs_num_parse_double(const char *s, double *out)
{
    if (!s || !*s) return -1;
    /* Only [+-] digits . e E: rejects leading whitespace, hex floats, inf, nan. */
    if (s[strspn(s, "0123456789+-.eE")] != '\0') return -1;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || *end != '\0' || !isfinite(v)) return -1;
    if (errno == ERANGE && fabs(v) > 1) return -1;
    *out = v;
    return 0;
}

int prs_num_parse_long(const char *s, long *out)
{
    if (!s || !*s) return -1;
    if (!(*s == '+' || *s == '-' || (*s >= '0' && *s <= '9'))) return -1; /* no leading space */
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (end == s || *end != '\0' || errno == ERANGE) return -1;
    *out = v;
    return 0;
}

int prs_num_parse_int(const char *s, int *out)
{
    long v;
    if (prs_num_parse_long(s, &v) != 0 || v < INT_MIN || v > INT_MAX) return -1;
    *out = (int)v;
    return 0;
}

double prs_num_py_floordiv(double a, double b)
{
    double mod = fmod(a, b);
    double div = (a - mod) / b;
    if (mod != 0 && ((b < 0) != (mod < 0))) div -= 1.0;
    double floordiv;
    if (div != 0) {
        floordiv = floor(div);
        if (div - floordiv > 0.5) floordiv += 1.0;
    } else {
        floordiv = copysign(0.0, a / b);
    }
    return floordiv;
}

/* Length of the number token at p (JSON: -, digits, '.', e/E, signs), and whether it is a real. */
static size_t number_token(const char *p, int *real)
{
    size_t n = strspn(p, "+-0123456789.eE");
    *real = strcspn(p, ".eE") < n;
    return n;
}

char *prs_num_json_shortest(const char *json)
{
    size_t len = strlen(json), o = 0;
    char *out = malloc(2 * len + PRS_NUMFMT_MAX + 1);
    if (!out) return NULL;
    int in_str = 0;
    for (const char *p = json; *p;) {
        if (in_str || (*p != '-' && !isdigit((unsigned char)*p))) {
            if (in_str && *p == '\\' && p[1])
                out[o++] = *p++;
            else if (*p == '"')
                in_str = !in_str;
            out[o++] = *p++;
            continue;
        }
        int real;
        size_t n = number_token(p, &real);
        char tok[64];
        if (real && n < sizeof tok) {
            memcpy(tok, p, n);
            tok[n] = '\0';
            prs_num_fmt_double(out + o, PRS_NUMFMT_MAX, strtod(tok, NULL));
            o += strlen(out + o);
        } else {
            memcpy(out + o, p, n);
            o += n;
        }
        p += n;
    }
    out[o] = '\0';
    return out;
}
