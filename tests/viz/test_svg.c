/* plot.h: the SVG writer's escaping and misuse checks, nice ticks, the viridis colormap, and
 * that every plot is a well-formed SVG document. Well-formedness is checked by a small XML
 * checker below (balanced tags, quoted attributes, entity references, one root <svg> with the
 * SVG namespace), itself tested on broken documents; tests/cli/plot.sh also runs xmllint. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "skips.h"

#include "perseus/plot.h"

/* ---- a small XML well-formedness checker ------------------------------------------------ */

static int is_name_start(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':';
}

static int is_name_char(char c)
{
    return is_name_start(c) || (c >= '0' && c <= '9') || c == '-' || c == '.';
}

/* An entity reference at p ("&amp;", "&#38;", "&#x26;"); its length, or 0 if malformed. */
static size_t entity_len(const char *p)
{
    static const char *const named[] = {"&amp;", "&lt;", "&gt;", "&quot;", "&apos;"};
    for (size_t i = 0; i < 5; i++)
        if (strncmp(p, named[i], strlen(named[i])) == 0) return strlen(named[i]);
    const char *q = p + 1;
    if (*q++ != '#') return 0;
    int hex = *q == 'x';
    if (hex) q++;
    const char *digits = q;
    while ((hex && strchr("0123456789abcdefABCDEF", *q) && *q) || (!hex && *q >= '0' && *q <= '9'))
        q++;
    return q > digits && *q == ';' ? (size_t)(q - p + 1) : 0;
}

/* Character data or an attribute value from p up to (not including) stop: no '<', and every
 * '&' starts an entity reference. Returns the end, or NULL. */
static const char *check_chars(const char *p, char stop)
{
    while (*p && *p != stop) {
        if (*p == '<') return NULL; /* only in attribute values: text stops at '<' */
        if (*p == '&') {
            size_t n = entity_len(p);
            if (!n) return NULL;
            p += n;
        } else
            p++;
    }
    return p;
}

enum { XML_MAXD = 64 };

/* The elements open, the root elements seen, and why a document was refused. */
typedef struct xml_state {
    char stack[XML_MAXD][64];
    int depth, roots;
    const char *why;
} xml_state;

/* The end tag at p ("</"): it must close the innermost open element. The position after it, or
 * NULL with s->why. */
static const char *xml_end_tag(xml_state *s, const char *p)
{
    p += 2;
    const char *n = p;
    while (is_name_char(*p))
        p++;
    size_t len = (size_t)(p - n);
    while (*p == ' ' || *p == '\n')
        p++;
    if (*p != '>') return s->why = "bad end tag", NULL;
    if (s->depth == 0 || strlen(s->stack[s->depth - 1]) != len ||
        strncmp(s->stack[s->depth - 1], n, len) != 0)
        return s->why = "end tag does not match", NULL;
    s->depth--;
    return p + 1;
}

/* The attributes of a start tag from p (after its name): each named once, quoted; on the root
 * *has_xmlns tells whether xmlns is the SVG namespace. The position of the tag's '>' or "/>",
 * or NULL with s->why. */
static const char *xml_attrs(xml_state *s, const char *p, int *has_xmlns)
{
    char attrs[32][64];
    int nattrs = 0;
    for (;;) {
        int space = 0;
        while (*p == ' ' || *p == '\n' || *p == '\t' || *p == '\r')
            p++, space = 1;
        if (*p == '>' || (p[0] == '/' && p[1] == '>')) return p;
        if (!space || !is_name_start(*p)) return s->why = "bad attribute", NULL;
        const char *an = p;
        while (is_name_char(*p))
            p++;
        size_t alen = (size_t)(p - an);
        if (alen >= 64 || nattrs == 32) return s->why = "attribute name too long", NULL;
        for (int i = 0; i < nattrs; i++)
            if (strlen(attrs[i]) == alen && strncmp(attrs[i], an, alen) == 0)
                return s->why = "duplicate attribute", NULL;
        memcpy(attrs[nattrs], an, alen);
        attrs[nattrs++][alen] = '\0';
        if (*p++ != '=') return s->why = "attribute without value", NULL;
        char q = *p++;
        if (q != '"' && q != '\'') return s->why = "unquoted attribute value", NULL;
        const char *v = p;
        p = check_chars(p, q);
        if (!p || *p != q) return s->why = "bad attribute value", NULL;
        if (s->depth == 0 && alen == 5 && strncmp(an, "xmlns", 5) == 0 &&
            (size_t)(p - v) == strlen("http://www.w3.org/2000/svg") &&
            strncmp(v, "http://www.w3.org/2000/svg", (size_t)(p - v)) == 0)
            *has_xmlns = 1;
        p++;
    }
}

/* The start tag at p ('<'): a name (the root's is svg, in the SVG namespace), its attributes;
 * unless it closes itself, the element is opened. The position after it, or NULL with s->why. */
static const char *xml_start_tag(xml_state *s, const char *p)
{
    p++;
    if (!is_name_start(*p)) return s->why = "bad element name", NULL;
    const char *n = p;
    while (is_name_char(*p))
        p++;
    size_t len = (size_t)(p - n);
    if (len >= 64) return s->why = "element name too long", NULL;
    char name[64];
    memcpy(name, n, len);
    name[len] = '\0';
    if (s->depth == 0) {
        if (++s->roots > 1) return s->why = "more than one root element", NULL;
        if (strcmp(name, "svg") != 0) return s->why = "root is not svg", NULL;
    }
    int has_xmlns = 0;
    p = xml_attrs(s, p, &has_xmlns);
    if (!p) return NULL;
    if (s->depth == 0 && !has_xmlns) return s->why = "root svg lacks the SVG namespace", NULL;
    if (*p == '/') return p + 2;
    p++;
    if (s->depth == XML_MAXD) return s->why = "too deep", NULL;
    memcpy(s->stack[s->depth++], name, len + 1);
    return p;
}

/* 0 if doc is well-formed XML whose single root is <svg xmlns="http://www.w3.org/2000/svg">;
 * otherwise a line number-free reason in why. */
static int xml_check(const char *doc, const char **why)
{
    xml_state s;
    s.depth = s.roots = 0;
    s.why = NULL;
    const char *p = doc;
    if (strncmp(p, "<?xml", 5) == 0) {
        p = strstr(p, "?>");
        if (!p) return *why = "unterminated XML declaration", -1;
        p += 2;
    }
    while (*p) {
        if (*p != '<') {
            if (s.depth == 0) {
                if (!strchr(" \t\r\n", *p)) return *why = "text outside the root", -1;
                p++;
                continue;
            }
            p = check_chars(p, '<');
            if (!p) return *why = "bad character data", -1;
            continue;
        }
        if (strncmp(p, "<!--", 4) == 0) {
            const char *e = strstr(p + 4, "-->");
            if (!e) return *why = "unterminated comment", -1;
            p = e + 3;
            continue;
        }
        p = p[1] == '/' ? xml_end_tag(&s, p) : xml_start_tag(&s, p);
        if (!p) return *why = s.why, -1;
    }
    if (s.depth != 0) return *why = "unclosed element", -1;
    if (s.roots != 1) return *why = "no root element", -1;
    return 0;
}

static void assert_well_formed(const char *doc)
{
    const char *why = NULL;
    if (xml_check(doc, &why) != 0) fail_msg("not well-formed: %s", why);
}

static void test_checker_rejects_broken_documents(void **state)
{
    (void)state;
    const char *ok = "<?xml version=\"1.0\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\">"
                     "<g a='1' b=\"x &amp; y\"><text>a &lt; b &#38; c</text></g><rect/></svg>\n";
    const char *why;
    assert_int_equal(xml_check(ok, &why), 0);
    const char *bad[] = {
        "<svg xmlns=\"http://www.w3.org/2000/svg\"><g></svg>",
        "<svg xmlns=\"http://www.w3.org/2000/svg\"><g></h></svg>",
        "<svg xmlns=\"http://www.w3.org/2000/svg\"><rect x=1/></svg>",
        "<svg xmlns=\"http://www.w3.org/2000/svg\"><text>a & b</text></svg>",
        "<svg xmlns=\"http://www.w3.org/2000/svg\"><text>a < b</text></svg>",
        "<svg xmlns=\"http://www.w3.org/2000/svg\"><rect x=\"1\" x=\"2\"/></svg>",
        "<svg xmlns=\"http://www.w3.org/2000/svg\"><rect x=\"a<b\"/></svg>",
        "<svg xmlns=\"http://www.w3.org/2000/svg\"></svg><svg xmlns=\"urn:x\"></svg>",
        "<svg></svg>",
        "<html xmlns=\"http://www.w3.org/2000/svg\"></html>",
        "<svg xmlns=\"http://www.w3.org/2000/svg\">",
        "stray<svg xmlns=\"http://www.w3.org/2000/svg\"></svg>",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        if (xml_check(bad[i], &why) == 0) fail_msg("accepted: %s", bad[i]);
}

/* ---- writer ----------------------------------------------------------------------------- */

typedef struct membuf {
    char *data;
    size_t len;
    FILE *f;
} membuf;

static void mem_open(membuf *m)
{
    m->data = NULL;
    m->len = 0;
    m->f = open_memstream(&m->data, &m->len);
    assert_non_null(m->f);
}

static char *mem_close(membuf *m)
{
    fclose(m->f);
    return m->data;
}

static void test_escape(void **state)
{
    (void)state;
    char buf[128];
    const char *in = "a&b<c>d\"e'f";
    const char *want = "a&amp;b&lt;c&gt;d&quot;e&apos;f";
    assert_int_equal(prs_svg_escape(buf, sizeof buf, in), strlen(want));
    assert_string_equal(buf, want);
    /* truncated: always terminated, returns the full length */
    assert_int_equal(prs_svg_escape(buf, 6, in), strlen(want));
    assert_string_equal(buf, "a&amp");
    assert_int_equal(prs_svg_escape(NULL, 0, "<"), 4);
    assert_int_equal(prs_svg_escape(buf, sizeof buf, ""), 0);
    assert_string_equal(buf, "");
    /* control characters XML cannot carry are replaced; UTF-8 passes through */
    prs_svg_escape(buf, sizeof buf, "x\x01y \xe2\x80\xb2");
    assert_string_equal(buf, "x?y \xe2\x80\xb2");
    /* bytes that are no well-formed UTF-8 become U+FFFD, one each: Latin-1, a lone
     * continuation byte, overlong, a surrogate, past U+10FFFF, U+FFFF, cut short at the end */
    const char *bad[][2] = {
        {"caf\xe9!", "caf\xef\xbf\xbd!"},
        {"\x80", "\xef\xbf\xbd"},
        {"\xc0\xaf", "\xef\xbf\xbd\xef\xbf\xbd"},
        {"\xed\xa0\x80", "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"},
        {"\xf4\x90\x80\x80", "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"},
        {"\xef\xbf\xbf", "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"},
        {"a\xf0\x9f\x94", "a\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"},
        {"\xf0\x9f\x94\x8b \xf4\x8f\xbf\xbd", "\xf0\x9f\x94\x8b \xf4\x8f\xbf\xbd"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(prs_svg_escape(buf, sizeof buf, bad[i][0]), strlen(bad[i][1]));
        assert_string_equal(buf, bad[i][1]);
    }
}

static void test_writer_escapes_text_and_attributes(void **state)
{
    (void)state;
    membuf m;
    mem_open(&m);
    prs_svg *s = prs_svg_new(m.f, 100, 50, "A & B <plot> \"q\" 'a'");
    assert_non_null(s);
    prs_svg_begin(s, "g");
    prs_svg_attr(s, "id", "x\"y'z&<>");
    prs_svg_attrf(s, "transform", "translate(%d %d)", 3, 4);
    prs_svg_attr_num(s, "opacity", 0.5);
    prs_svg_open(s);
    prs_svg_label(s, 1, 2, "T' < T & \"quoted\"", "text-anchor", "middle", PRS_SVG_END);
    prs_svg_rect(s, 0, 0, 10.004, -3, "fill", "#fff", PRS_SVG_END);
    prs_svg_line(s, 0, 0, 1e3, -0.001, PRS_SVG_END);
    prs_svg_label(s, 1, 2, "caf\xe9", "class", "caf\xe9", PRS_SVG_END); /* Latin-1 */
    prs_svg_close(s);
    assert_int_equal(prs_svg_finish(s, NULL), 0);
    char *doc = mem_close(&m);
    assert_well_formed(doc);
    assert_non_null(strstr(doc, "class=\"caf\xef\xbf\xbd\">caf\xef\xbf\xbd</text>"));
    assert_non_null(
        strstr(doc, "<title>A &amp; B &lt;plot&gt; &quot;q&quot; &apos;a&apos;</title>"));
    assert_non_null(strstr(doc, "id=\"x&quot;y&apos;z&amp;&lt;&gt;\""));
    assert_non_null(strstr(doc, "T&apos; &lt; T &amp; &quot;quoted&quot;"));
    assert_non_null(strstr(doc, "transform=\"translate(3 4)\""));
    assert_non_null(strstr(doc, "opacity=\"0.5\""));
    /* numbers: two decimals at most, no trailing zeros, never "-0", no negative sizes */
    assert_non_null(strstr(doc, "width=\"10\" height=\"0\""));
    assert_non_null(strstr(doc, "x2=\"1000\" y2=\"0\""));
    assert_non_null(strstr(doc, "xmlns=\"http://www.w3.org/2000/svg\""));
    assert_non_null(strstr(doc, "version=\"1.1\""));
    free(doc);
}

static int misuse(void (*fn)(prs_svg *s))
{
    membuf m;
    mem_open(&m);
    prs_svg *s = prs_svg_new(m.f, 10, 10, NULL);
    fn(s);
    prs_error err = {0, ""};
    int rc = prs_svg_finish(s, &err);
    free(mem_close(&m));
    if (rc) assert_true(strncmp(err.msg, "svg: ", 5) == 0);
    return rc;
}

static void text_at_root(prs_svg *s)
{
    prs_svg_text(s, "loose");
}
static void nested_begin(prs_svg *s)
{
    prs_svg_begin(s, "g");
    prs_svg_begin(s, "rect");
}
static void bad_name(prs_svg *s)
{
    prs_svg_begin(s, "1rect");
}
static void bad_attr_name(prs_svg *s)
{
    prs_svg_begin(s, "rect");
    prs_svg_attr(s, "x y", "1");
    prs_svg_end(s);
}
static void nan_number(prs_svg *s)
{
    prs_svg_rect(s, NAN, 0, 1, 1, PRS_SVG_END);
}
static void never_ended(prs_svg *s)
{
    prs_svg_begin(s, "rect");
}
static void too_deep(prs_svg *s)
{
    for (int i = 0; i < 20; i++) {
        prs_svg_begin(s, "g");
        prs_svg_open(s);
    }
}
static void close_too_many(prs_svg *s)
{
    prs_svg_close(s);
}
static void left_open(prs_svg *s)
{
    prs_svg_begin(s, "g");
    prs_svg_open(s);
    prs_svg_begin(s, "text");
    prs_svg_open(s);
    prs_svg_text(s, "auto-closed");
}

static void test_writer_misuse(void **state)
{
    (void)state;
    assert_int_equal(misuse(text_at_root), PRS_EINVAL);
    assert_int_equal(misuse(nested_begin), PRS_EINVAL);
    assert_int_equal(misuse(bad_name), PRS_EINVAL);
    assert_int_equal(misuse(bad_attr_name), PRS_EINVAL);
    assert_int_equal(misuse(nan_number), PRS_EINVAL);
    assert_int_equal(misuse(never_ended), PRS_EINVAL);
    assert_int_equal(misuse(too_deep), PRS_EINVAL);
    assert_int_equal(misuse(close_too_many), PRS_EINVAL);
    assert_int_equal(misuse(left_open), 0); /* finish closes what is open */
    assert_int_equal(prs_svg_finish(NULL, NULL), PRS_ENOMEM);
    assert_null(prs_svg_new(NULL, 10, 10, NULL));
}

static void test_write_error_is_reported(void **state)
{
    (void)state;
    FILE *f = fopen("/dev/full", "w");
    if (!f) prs_skip_case("cannot open /dev/full");
    double x[] = {1, 2}, y[] = {3, 4};
    prs_frontier_plot p = {0};
    p.predicted = (prs_plot_series){"p", x, y, 2};
    prs_error err = {0, ""};
    assert_int_equal(prs_plot_frontier(f, &p, &err), PRS_EIO);
    fclose(f);
}

/* ---- ticks ------------------------------------------------------------------------------ */

/* cmocka 1.1 has no double comparison */
#define assert_near(a, b, eps) assert_true(fabs((double)(a) - (double)(b)) <= (eps))

static void check_ticks(double lo, double hi, int target)
{
    prs_ticks t;
    assert_int_equal(prs_nice_ticks(lo, hi, target, &t), 0);
    assert_true(t.lo <= lo && t.hi >= hi);
    assert_true(t.count >= 2 && t.count <= 2 * target + 1);
    assert_true(fabs(t.lo + (t.count - 1) * t.step - t.hi) <= t.step * 1e-9);
    double e = floor(log10(t.step) + 1e-9), mant = t.step / pow(10, e);
    assert_true(fabs(mant - 1) < 1e-9 || fabs(mant - 2) < 1e-9 || fabs(mant - 2.5) < 1e-9 ||
                fabs(mant - 5) < 1e-9);
    /* every label distinct, reads back to its tick, and never "-0" */
    char prev[64] = "", buf[64];
    for (int i = 0; i < t.count; i++) {
        prs_ticks_label(&t, i, buf, sizeof buf);
        assert_string_not_equal(buf, prev);
        assert_true(strncmp(buf, "-0", 2) != 0 || strspn(buf + 1, "0.") != strlen(buf + 1));
        assert_true(fabs(strtod(buf, NULL) - (t.lo + i * t.step)) <= t.step * 1e-6);
        snprintf(prev, sizeof prev, "%s", buf);
    }
}

static void test_nice_ticks(void **state)
{
    (void)state;
    prs_ticks t;
    char buf[64];
    assert_int_equal(prs_nice_ticks(0, 1, 6, &t), 0);
    assert_near(t.step, 0.2, 1e-12);
    assert_near(t.lo, 0, 0);
    assert_near(t.hi, 1, 1e-12);
    assert_int_equal(t.count, 6);
    assert_int_equal(t.decimals, 1);
    assert_string_equal(prs_ticks_label(&t, 3, buf, sizeof buf), "0.6");

    /* an energy axis: steps of 25 J (5 ticks) beat 20 J (7) by the tie rule */
    assert_int_equal(prs_nice_ticks(4578, 4663, 6, &t), 0);
    assert_near(t.step, 25, 1e-9);
    assert_near(t.lo, 4575, 1e-9);
    assert_near(t.hi, 4675, 1e-9);
    assert_int_equal(t.decimals, 0);
    assert_string_equal(prs_ticks_label(&t, 0, buf, sizeof buf), "4575");

    /* slowdown factors 1.00-1.50 */
    assert_int_equal(prs_nice_ticks(1.0, 1.5, 8, &t), 0);
    assert_near(t.step, 0.1, 1e-12);
    assert_int_equal(t.count, 6);
    assert_string_equal(prs_ticks_label(&t, 3, buf, sizeof buf), "1.3");

    /* 2.5 steps need one more decimal */
    assert_int_equal(prs_nice_ticks(0, 1, 5, &t), 0);
    assert_near(t.step, 0.25, 1e-12);
    assert_int_equal(t.decimals, 2);
    assert_string_equal(prs_ticks_label(&t, 1, buf, sizeof buf), "0.25");

    /* crossing zero: "0.0", not "-0.0" or "-2.7755575615628914e-17" */
    assert_int_equal(prs_nice_ticks(-0.3, 0.7, 11, &t), 0);
    assert_near(t.step, 0.1, 1e-12);
    for (int i = 0; i < t.count; i++)
        if (fabs(t.lo + i * t.step) < t.step / 2)
            assert_string_equal(prs_ticks_label(&t, i, buf, sizeof buf), "0.0");

    /* a single value is widened around it */
    assert_int_equal(prs_nice_ticks(5, 5, 5, &t), 0);
    assert_true(t.lo < 5 && t.hi > 5);
    assert_int_equal(prs_nice_ticks(0, 0, 5, &t), 0);
    assert_true(t.lo < 0 && t.hi > 0);

    const double ranges[][2] = {{0, 1},       {0.001, 0.0037},  {-5, 5},      {2.21, 3.119},
                                {855, 1410},  {0, 1e12},        {1e-9, 3e-9}, {-1234.5, -1200},
                                {1.01, 1.02}, {4430.2, 5103.9}, {0, 100},     {99, 101}};
    for (size_t i = 0; i < sizeof ranges / sizeof ranges[0]; i++)
        for (int target = 2; target <= 12; target++)
            check_ticks(ranges[i][0], ranges[i][1], target);

    assert_int_equal(prs_nice_ticks(NAN, 1, 5, &t), PRS_EINVAL);
    assert_int_equal(prs_nice_ticks(0, INFINITY, 5, &t), PRS_EINVAL);
    assert_int_equal(prs_nice_ticks(2, 1, 5, &t), PRS_EINVAL);
    assert_int_equal(prs_nice_ticks(0, 1, 1, &t), PRS_EINVAL);
    assert_int_equal(prs_nice_ticks(-1e308, 1e308, 5, &t), PRS_EINVAL);
}

/* ---- colormap --------------------------------------------------------------------------- */

static double luma(prs_rgb c)
{
    return 0.299 * c.r + 0.587 * c.g + 0.114 * c.b;
}

static void test_viridis(void **state)
{
    (void)state;
    prs_rgb a = prs_colormap_viridis(0), b = prs_colormap_viridis(1);
    assert_int_equal(a.r, 68);
    assert_int_equal(a.g, 1);
    assert_int_equal(a.b, 84);
    assert_int_equal(b.r, 253);
    assert_int_equal(b.g, 231);
    assert_int_equal(b.b, 37);
    prs_rgb m = prs_colormap_viridis(0.5); /* matplotlib's viridis(0.5) is #21918c */
    assert_true(abs(m.r - 0x21) <= 3 && abs(m.g - 0x91) <= 3 && abs(m.b - 0x8c) <= 3);
    /* clamped outside [0, 1], NaN reads as 0 */
    prs_rgb lo = prs_colormap_viridis(-3), hi = prs_colormap_viridis(7),
            nan = prs_colormap_viridis(NAN);
    assert_memory_equal(&lo, &a, sizeof a);
    assert_memory_equal(&hi, &b, sizeof b);
    assert_memory_equal(&nan, &a, sizeof a);
    /* lightness strictly increases along the map */
    double prev = -1;
    for (int i = 0; i <= 200; i++) {
        double l = luma(prs_colormap_viridis(i / 200.0));
        assert_true(l > prev);
        prev = l;
    }
}

/* ---- plots ------------------------------------------------------------------------------ */

static void test_frontier_plot(void **state)
{
    (void)state;
    enum { N = 20000 }; /* far more points than pixels: thinned */
    double *v = malloc(sizeof *v * 4 * (size_t)N);
    assert_non_null(v);
    for (int i = 0; i < N; i++) {
        double t = 3.1 - 0.9 * i / (N - 1.0);
        v[i] = t;
        v[N + i] = 4430 + 400 * (t - 2.53) * (t - 2.53);
        v[2 * N + i] = t + 0.001;
        v[3 * N + i] = v[N + i] + 2;
    }
    prs_plot_point base[] = {{"all-max", 2.21, 5100},
                             {"EnvPipe <style> & co", 2.21, 4700},
                             {"uniform 1035 MHz", 2.86, 4620}};
    double ux[] = {2.21, 2.5, 2.9, 3.2}, uy[] = {5100, 4750, 4620, 4690};
    prs_plot_series curve = {"uniform clock", ux, uy, 4};
    prs_frontier_plot p = {"Frontier \"test\"",
                           "8 stages",
                           {"predicted", v, v + N, N},
                           {"evaluated", v + 2 * (size_t)N, v + 3 * (size_t)N, N},
                           base,
                           3,
                           &curve,
                           1,
                           2.21,
                           2.53};
    membuf m;
    mem_open(&m);
    prs_error err = {0, ""};
    assert_int_equal(prs_plot_frontier(m.f, &p, &err), 0);
    char *doc = mem_close(&m);
    assert_well_formed(doc);
    assert_true(m.len < (size_t)200 * 1024);
    const char *want[] = {"Iteration time (s)",
                          "Iteration energy (J)",
                          "Frontier &quot;test&quot;",
                          "predicted",
                          "evaluated",
                          "all-max",
                          "EnvPipe &lt;style&gt; &amp; co",
                          "uniform clock",
                          ">min</tspan>",
                          "T*"};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        if (!strstr(doc, want[i])) fail_msg("frontier plot lacks %s", want[i]);
    free(doc);

    /* bad input */
    prs_frontier_plot bad = p;
    bad.predicted.x = NULL;
    mem_open(&m);
    assert_int_equal(prs_plot_frontier(m.f, &bad, &err), PRS_EINVAL);
    bad = (prs_frontier_plot){0};
    assert_int_equal(prs_plot_frontier(m.f, &bad, &err), PRS_EINVAL); /* nothing to draw */
    free(mem_close(&m));
    free(v);
}

static void test_savings_plot(void **state)
{
    (void)state;
    double x[51], y[4][51];
    for (int i = 0; i <= 50; i++) {
        x[i] = 1 + i / 100.0;
        y[0][i] = 15 + 10 * sin(i / 20.0);
        y[1][i] = 8 - i / 25.0;
        y[2][i] = i / 4.0 - 2; /* dips below zero */
        y[3][i] = 0;
    }
    prs_plot_series ser[] = {{"Perseus", x, y[0], 51},
                             {"EnvPipe-style", x, y[1], 51},
                             {"uniform clock", x, y[2], 51},
                             {"all-max (reference)", x, y[3], 51}};
    prs_savings_plot p = {NULL, "16 pipelines", NULL, ser, 4, NULL};
    membuf m;
    mem_open(&m);
    assert_int_equal(prs_plot_savings(m.f, &p, NULL), 0);
    char *doc = mem_close(&m);
    assert_well_formed(doc);
    const char *want[] = {"Energy savings vs straggler slowdown",
                          "Straggler slowdown T",
                          "Energy saving (%)",
                          "Perseus",
                          "EnvPipe-style",
                          "uniform clock",
                          "all-max (reference)",
                          ">1.5</text>",
                          ">0</text>"};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        if (!strstr(doc, want[i])) fail_msg("savings plot lacks %s", want[i]);
    free(doc);
    prs_savings_plot none = {0};
    mem_open(&m);
    assert_int_equal(prs_plot_savings(m.f, &none, NULL), PRS_EINVAL);
    free(mem_close(&m));
}

static void test_timeline_plot(void **state)
{
    (void)state;
    /* two GPUs, a forward and a backward each; clocks at both ends of the scale */
    prs_timeline_op ops[] = {
        {0, 0, 0, PRS_FORWARD, 0, 1410, 0.0, 0.5, 20},
        {1, 0, 1, PRS_FORWARD, 0, 855, 0.5, 1.0, 20},
        {1, 1, 1, PRS_BACKWARD, 0, 1410, 1.0, 1.98, 40},
        {0, 1, 0, PRS_BACKWARD, 0, 1000, 1.98, 2.0, 40}, /* narrow: no label */
    };
    prs_timeline_plot p = {NULL, "plan <3>", ops, 4, 2, 2.0, 855, 1410};
    membuf m;
    mem_open(&m);
    assert_int_equal(prs_plot_timeline(m.f, &p, NULL), 0);
    char *doc = mem_close(&m);
    assert_well_formed(doc);
    const char *want[] = {"Pipeline timeline",
                          "plan &lt;3&gt;",
                          "GPU 0",
                          "GPU 1",
                          "SM clock (MHz)",
                          "Time within the iteration (s)",
                          "forward",
                          "backward",
                          "idle",
                          ">F0</text>",
                          ">B0</text>",
                          "fill=\"#fde725\"", /* 1410 MHz: the top of the scale */
                          "fill=\"#440154\"", /* 855 MHz: the bottom */
                          "url(#hatch)"};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        if (!strstr(doc, want[i])) fail_msg("timeline plot lacks %s", want[i]);
    /* only the wide computations are labelled: F0 twice, B0 once */
    int labels = 0;
    for (const char *q = doc; (q = strstr(q, ">B0</text>")); q++)
        labels++;
    assert_int_equal(labels, 1);
    free(doc);

    mem_open(&m);
    prs_timeline_op bad = ops[0];
    bad.stage = 2;
    prs_timeline_plot pb = {NULL, NULL, &bad, 1, 2, 2.0, 0, 0};
    assert_int_equal(prs_plot_timeline(m.f, &pb, NULL), PRS_EINVAL);
    pb.ops = ops;
    pb.time_s = 0;
    assert_int_equal(prs_plot_timeline(m.f, &pb, NULL), PRS_EINVAL);
    pb.time_s = 2;
    pb.stages = 0;
    assert_int_equal(prs_plot_timeline(m.f, &pb, NULL), PRS_EINVAL);
    free(mem_close(&m));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_checker_rejects_broken_documents),
        cmocka_unit_test(test_escape),
        cmocka_unit_test(test_writer_escapes_text_and_attributes),
        cmocka_unit_test(test_writer_misuse),
        cmocka_unit_test(test_write_error_is_reported),
        cmocka_unit_test(test_nice_ticks),
        cmocka_unit_test(test_viridis),
        cmocka_unit_test(test_frontier_plot),
        cmocka_unit_test(test_savings_plot),
        cmocka_unit_test(test_timeline_plot),
    };
    return prs_test_result(cmocka_run_group_tests(tests, NULL, NULL));
}
