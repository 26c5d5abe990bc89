/* A small streaming SVG 1.1 writer (include/perseus/plot.h).
 *
 * The writer emits XML as it is called and keeps only a stack of open element names, so a
 * document of any size costs a few hundred bytes of state. Its job is to make a malformed
 * document impossible to write by accident: every text and attribute value goes through one
 * escaping routine, element names are checked, start tags must be ended before anything else
 * is written, and closing tags always match the stack. The first misuse or write error is
 * remembered, every later call becomes a no-op, and prs_svg_finish reports it, so drawing code
 * need not check each call. Numbers are written with at most two decimals: a hundredth of a
 * pixel is below anything a renderer shows, and it keeps plots small. */
#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "perseus/plot.h"

#define SVG_MAX_DEPTH 16
#define SVG_MAX_NAME 32

struct prs_svg {
    FILE *out;
    int failed; /* 0, PRS_EINVAL (misuse) or PRS_EIO */
    char why[160];
    int in_tag; /* inside "<name ..." not yet ended by '>' or "/>" */
    char tag[SVG_MAX_NAME];
    int depth; /* open elements below the root */
    char stack[SVG_MAX_DEPTH][SVG_MAX_NAME];
};

static void fail(prs_svg *s, int code, const char *why)
{
    if (s->failed) return;
    s->failed = code;
    snprintf(s->why, sizeof s->why, "%s", why);
}

static int usable(prs_svg *s)
{
    return s && !s->failed;
}

/* Length of the well-formed UTF-8 sequence at p that XML 1.0 can carry (RFC 3629: no overlong
 * forms, surrogates or code points past U+10FFFF; nor U+FFFE or U+FFFF), or 0. p[0] >= 0x80. */
static size_t utf8_len(const unsigned char *p)
{
    size_t len = p[0] >= 0xF0 ? 4 : p[0] >= 0xE0 ? 3 : 2;
    unsigned lo = 0x80, hi = 0xBF; /* the range of the second byte */
    if (p[0] < 0xC2 || p[0] > 0xF4) return 0;
    if (p[0] == 0xE0) lo = 0xA0;
    if (p[0] == 0xED) hi = 0x9F;
    if (p[0] == 0xF0) lo = 0x90;
    if (p[0] == 0xF4) hi = 0x8F;
    if (p[1] < lo || p[1] > hi) return 0;
    for (size_t i = 2; i < len; i++)
        if ((p[i] & 0xC0) != 0x80) return 0;
    if (p[0] == 0xEF && p[1] == 0xBF && p[2] >= 0xBE) return 0; /* U+FFFE, U+FFFF */
    return len;
}

/* What the character at p becomes in XML text or an attribute value: an entity reference for
 * & < > " ', '?' for a control character XML 1.0 forbids (all but tab, newline and return),
 * U+FFFD for a byte that does not start a well-formed UTF-8 sequence, else the character
 * itself (copied into one). *used gets the bytes of p it stands for. */
static const char *escaped_at(const char *p, char one[5], size_t *used)
{
    const unsigned char *u = (const unsigned char *)p;
    *used = 1;
    switch (*p) {
    case '&':
        return "&amp;";
    case '<':
        return "&lt;";
    case '>':
        return "&gt;";
    case '"':
        return "&quot;";
    case '\'':
        return "&apos;";
    default:
        break;
    }
    if (*u < 0x20 && *p != '\t' && *p != '\n' && *p != '\r') return "?";
    if (*u >= 0x80 && (*used = utf8_len(u)) == 0) {
        *used = 1;
        return "\xEF\xBF\xBD"; /* U+FFFD REPLACEMENT CHARACTER */
    }
    memcpy(one, p, *used);
    one[*used] = '\0';
    return one;
}

static void put_escaped(prs_svg *s, const char *text)
{
    char one[5];
    for (size_t used; *text; text += used)
        fputs(escaped_at(text, one, &used), s->out);
}

size_t prs_svg_escape(char *dst, size_t n, const char *src)
{
    size_t len = 0;
    char one[5];
    for (size_t used; *src; src += used)
        for (const char *r = escaped_at(src, one, &used); *r; r++, len++)
            if (n > 0 && len < n - 1) dst[len] = *r;
    if (n > 0) dst[len < n - 1 ? len : n - 1] = '\0';
    return len;
}

static int valid_name(const char *name)
{
    size_t len = name ? strlen(name) : 0;
    if (len == 0 || len >= SVG_MAX_NAME) return 0;
    if (!isalpha((unsigned char)name[0]) && name[0] != '_') return 0;
    for (size_t i = 1; i < len; i++)
        if (!isalnum((unsigned char)name[i]) && !strchr("-_.:", name[i])) return 0;
    return 1;
}

/* Whitespace between elements is harmless except inside text, where it could become a space. */
static int in_text(const prs_svg *s)
{
    if (s->depth == 0) return 0;
    const char *top = s->stack[s->depth - 1];
    return strcmp(top, "text") == 0 || strcmp(top, "tspan") == 0;
}

prs_svg *prs_svg_new(FILE *out, double width_px, double height_px, const char *title)
{
    if (!out) return NULL;
    prs_svg *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->out = out;
    if (!(width_px > 0) || !(height_px > 0) || !isfinite(width_px) || !isfinite(height_px))
        fail(s, PRS_EINVAL, "svg: width and height must be finite and positive");
    if (!usable(s)) return s;
    fputs("<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"no\"?>\n", out);
    fprintf(out,
            "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"%.0f\" "
            "height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\">\n",
            width_px, height_px, width_px, height_px);
    if (title) {
        fputs("<title>", out);
        put_escaped(s, title);
        fputs("</title>\n", out);
    }
    return s;
}

void prs_svg_begin(prs_svg *s, const char *name)
{
    if (!usable(s)) return;
    if (s->in_tag) {
        fail(s, PRS_EINVAL, "svg: start tag begun inside another start tag");
        return;
    }
    if (!valid_name(name)) {
        fail(s, PRS_EINVAL, "svg: invalid element name");
        return;
    }
    if (!in_text(s)) fputc('\n', s->out);
    fprintf(s->out, "<%s", name);
    snprintf(s->tag, sizeof s->tag, "%s", name);
    s->in_tag = 1;
}

void prs_svg_attr(prs_svg *s, const char *name, const char *value)
{
    if (!usable(s)) return;
    if (!s->in_tag) {
        fail(s, PRS_EINVAL, "svg: attribute outside a start tag");
        return;
    }
    if (!valid_name(name) || !value) {
        fail(s, PRS_EINVAL, "svg: invalid attribute");
        return;
    }
    fprintf(s->out, " %s=\"", name);
    put_escaped(s, value);
    fputc('"', s->out);
}

void prs_svg_attrf(prs_svg *s, const char *name, const char *fmt, ...)
{
    if (!usable(s)) return;
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    int len = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (len < 0 || (size_t)len >= sizeof buf) {
        fail(s, PRS_EINVAL, "svg: attribute value too long");
        return;
    }
    prs_svg_attr(s, name, buf);
}

void prs_svg_attr_num(prs_svg *s, const char *name, double value)
{
    if (!usable(s)) return;
    if (!isfinite(value)) {
        fail(s, PRS_EINVAL, "svg: non-finite number in an attribute");
        return;
    }
    char buf[64];
    snprintf(buf, sizeof buf, "%.2f", value);
    char *end = buf + strlen(buf);
    while (end[-1] == '0')
        *--end = '\0';
    if (end[-1] == '.') *--end = '\0';
    prs_svg_attr(s, name, strcmp(buf, "-0") == 0 ? "0" : buf);
}

static void attr_pairs(prs_svg *s, va_list ap)
{
    const char *name;
    while ((name = va_arg(ap, const char *)) != NULL) {
        const char *value = va_arg(ap, const char *);
        prs_svg_attr(s, name, value);
    }
}

void prs_svg_attrs(prs_svg *s, ...)
{
    va_list ap;
    va_start(ap, s);
    attr_pairs(s, ap);
    va_end(ap);
}

void prs_svg_open(prs_svg *s)
{
    if (!usable(s)) return;
    if (!s->in_tag) {
        fail(s, PRS_EINVAL, "svg: open without a start tag");
        return;
    }
    if (s->depth == SVG_MAX_DEPTH) {
        fail(s, PRS_EINVAL, "svg: elements nested too deep");
        return;
    }
    fputc('>', s->out);
    memcpy(s->stack[s->depth++], s->tag, sizeof s->tag);
    s->in_tag = 0;
}

void prs_svg_end(prs_svg *s)
{
    if (!usable(s)) return;
    if (!s->in_tag) {
        fail(s, PRS_EINVAL, "svg: end without a start tag");
        return;
    }
    fputs("/>", s->out);
    s->in_tag = 0;
}

void prs_svg_text(prs_svg *s, const char *text)
{
    if (!usable(s)) return;
    if (s->in_tag || s->depth == 0 || !text) {
        fail(s, PRS_EINVAL, "svg: text outside an open element");
        return;
    }
    put_escaped(s, text);
}

void prs_svg_close(prs_svg *s)
{
    if (!usable(s)) return;
    if (s->in_tag || s->depth == 0) {
        fail(s, PRS_EINVAL, "svg: close without open element");
        return;
    }
    fprintf(s->out, "</%s>", s->stack[--s->depth]);
}

void prs_svg_rect(prs_svg *s, double x, double y, double w, double h, ...)
{
    prs_svg_begin(s, "rect");
    prs_svg_attr_num(s, "x", x);
    prs_svg_attr_num(s, "y", y);
    prs_svg_attr_num(s, "width", w > 0 ? w : 0);
    prs_svg_attr_num(s, "height", h > 0 ? h : 0);
    va_list ap;
    va_start(ap, h);
    attr_pairs(s, ap);
    va_end(ap);
    prs_svg_end(s);
}

void prs_svg_line(prs_svg *s, double x1, double y1, double x2, double y2, ...)
{
    prs_svg_begin(s, "line");
    prs_svg_attr_num(s, "x1", x1);
    prs_svg_attr_num(s, "y1", y1);
    prs_svg_attr_num(s, "x2", x2);
    prs_svg_attr_num(s, "y2", y2);
    va_list ap;
    va_start(ap, y2);
    attr_pairs(s, ap);
    va_end(ap);
    prs_svg_end(s);
}

void prs_svg_label(prs_svg *s, double x, double y, const char *text, ...)
{
    prs_svg_begin(s, "text");
    prs_svg_attr_num(s, "x", x);
    prs_svg_attr_num(s, "y", y);
    va_list ap;
    va_start(ap, text);
    attr_pairs(s, ap);
    va_end(ap);
    prs_svg_open(s);
    prs_svg_text(s, text);
    prs_svg_close(s);
}

int prs_svg_finish(prs_svg *s, prs_error *err)
{
    if (!s) return prs_error_set(err, PRS_ENOMEM, "svg: out of memory");
    if (!s->failed && s->in_tag) fail(s, PRS_EINVAL, "svg: start tag never ended");
    while (!s->failed && s->depth > 0)
        prs_svg_close(s);
    if (!s->failed) fputs("\n</svg>\n", s->out);
    if (!s->failed && (fflush(s->out) != 0 || ferror(s->out)))
        fail(s, PRS_EIO, "svg: write failed");
    int rc = s->failed ? prs_error_set(err, s->failed, "%s", s->why) : 0;
    free(s);
    return rc;
}

double prs_svg_text_width(const char *text, double font_px)
{
    /* Advance widths of DejaVu Sans (the usual fallback for sans-serif), rounded up a little
     * so a layout made with them holds in narrower fonts too. */
    double em = 0;
    for (const unsigned char *p = (const unsigned char *)text; p && *p; p++) {
        if ((*p & 0xC0) == 0x80) continue; /* UTF-8 continuation byte */
        if (strchr(" .,:;!|'ijlI()[]", *p))
            em += 0.34;
        else if (isdigit(*p))
            em += 0.64;
        else if (*p == 'm' || *p == 'w' || *p == 'M' || *p == 'W')
            em += 0.92;
        else if (isupper(*p))
            em += 0.72;
        else
            em += 0.62;
    }
    return em * font_px;
}
