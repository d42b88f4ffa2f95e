/* plot.c - line/scatter plots and histograms as PNG files, in plain C: an RGB
 * canvas, a 5x7 bitmap font, axes (linear or log with decade ticks) and an
 * uncompressed PNG writer (stored deflate blocks, CRC-32, Adler-32). */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "bench.h"
#include "json.h"

/* ---- PNG ------------------------------------------------------------------- */

/* CRC-32 (PNG's, reflected polynomial 0xEDB88320), bit by bit: a plot is
 * about a megabyte, so a table would save milliseconds and add shared state. */
static uint32_t crc_update(uint32_t crc, const uint8_t *p, size_t n)
{
    crc = ~crc;
    while (n--) {
        crc ^= *p++;
        for (int k = 0; k < 8; k++)
            crc = crc & 1 ? 0xEDB88320u ^ (crc >> 1) : crc >> 1;
    }
    return ~crc;
}

static void put_be32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

/* One chunk: length, type, data, CRC over type + data. */
static int put_chunk(FILE *f, const char *type, const uint8_t *data, uint32_t len)
{
    uint8_t hdr[8];
    put_be32(hdr, len);
    memcpy(hdr + 4, type, 4);
    uint32_t crc = crc_update(0, hdr + 4, 4);
    crc = crc_update(crc, data, len);
    uint8_t tail[4];
    put_be32(tail, crc);
    if (fwrite(hdr, 1, 8, f) != 8 || (len && fwrite(data, 1, len, f) != len) ||
        fwrite(tail, 1, 4, f) != 4)
        return -1;
    return 0;
}

int bench_png_write(const char *path, int w, int h, const uint8_t *rgb)
{
    if (!path || !rgb || w <= 0 || h <= 0 || w > 16384 || h > 16384)
        return ONI_EINVALARG;
    size_t row = (size_t)w * 3 + 1; /* filter byte 0 (none) + pixels */
    size_t raw = row * (size_t)h;
    size_t nblk = (raw + 65534) / 65535;
    size_t zlen = 2 + raw + 5 * nblk + 4;
    uint8_t *z = malloc(zlen);
    if (!z)
        return ONI_EBADALLOC;

    uint8_t *o = z;
    *o++ = 0x78; /* deflate, 32 KiB window */
    *o++ = 0x01; /* no preset dictionary, fastest; (0x78 << 8 | 0x01) % 31 == 0 */
    uint32_t a = 1, b = 0; /* Adler-32 */
    size_t left = raw, pos = 0;
    while (left) {
        uint16_t n = (uint16_t)(left > 65535 ? 65535 : left);
        left -= n;
        *o++ = left ? 0 : 1; /* BFINAL on the last block, BTYPE 00 = stored */
        *o++ = (uint8_t)n;
        *o++ = (uint8_t)(n >> 8);
        *o++ = (uint8_t)~n;
        *o++ = (uint8_t)(~n >> 8);
        for (uint16_t i = 0; i < n; i++, pos++) {
            size_t y = pos / row, x = pos % row;
            uint8_t v = x == 0 ? 0 : rgb[y * (size_t)w * 3 + x - 1];
            *o++ = v;
            a = (a + v) % 65521;
            b = (b + a) % 65521;
        }
    }
    put_be32(o, b << 16 | a);

    uint8_t ihdr[13];
    put_be32(ihdr, (uint32_t)w);
    put_be32(ihdr + 4, (uint32_t)h);
    ihdr[8] = 8;  /* bits per sample */
    ihdr[9] = 2;  /* colour type: RGB */
    ihdr[10] = 0; /* deflate */
    ihdr[11] = 0; /* adaptive filtering */
    ihdr[12] = 0; /* no interlace */

    static const uint8_t sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
    FILE *f = fopen(path, "wb");
    int rc = ONI_EPATHINVALID;
    if (f) {
        if (fwrite(sig, 1, 8, f) == 8 && !put_chunk(f, "IHDR", ihdr, 13) &&
            !put_chunk(f, "IDAT", z, (uint32_t)zlen) && !put_chunk(f, "IEND", NULL, 0))
            rc = ONI_ESUCCESS;
        if (fclose(f) != 0)
            rc = ONI_EPATHINVALID;
    }
    free(z);
    return rc;
}

/* ---- canvas and font ------------------------------------------------------- */

struct canvas {
    int w, h;
    uint8_t *rgb;
};

static void pset(struct canvas *c, int x, int y, uint32_t col)
{
    if (x < 0 || y < 0 || x >= c->w || y >= c->h)
        return;
    uint8_t *p = c->rgb + ((size_t)y * (size_t)c->w + (size_t)x) * 3;
    p[0] = (uint8_t)(col >> 16);
    p[1] = (uint8_t)(col >> 8);
    p[2] = (uint8_t)col;
}

static void fill_rect(struct canvas *c, int x0, int y0, int x1, int y1, uint32_t col)
{
    for (int y = y0; y <= y1; y++)
        for (int x = x0; x <= x1; x++)
            pset(c, x, y, col);
}

/* Bresenham line, `thick` pixels wide (square pen), clipped to [cx0,cx1]x[cy0,cy1]. */
static void line(struct canvas *c, int x0, int y0, int x1, int y1, int thick, uint32_t col,
                 int cx0, int cy0, int cx1, int cy1)
{
    int dx = abs(x1 - x0), sx = x0 < x1 ? 1 : -1;
    int dy = -abs(y1 - y0), sy = y0 < y1 ? 1 : -1;
    int err = dx + dy;
    for (;;) {
        for (int oy = 0; oy < thick; oy++)
            for (int ox = 0; ox < thick; ox++) {
                int x = x0 + ox - thick / 2, y = y0 + oy - thick / 2;
                if (x >= cx0 && x <= cx1 && y >= cy0 && y <= cy1)
                    pset(c, x, y, col);
            }
        if (x0 == x1 && y0 == y1)
            break;
        int e2 = 2 * err;
        if (e2 >= dy) {
            err += dy;
            x0 += sx;
        }
        if (e2 <= dx) {
            err += dx;
            y0 += sy;
        }
    }
}

/* 5x7 glyphs for printable ASCII (32..126), one byte per row, bit 4 =
 * leftmost column; lower case sits in the lower five rows. */
static const uint8_t font[95][7] = {
    {0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00}, /* space */
    {0x04, 0x04, 0x04, 0x04, 0x04, 0x00, 0x04}, /* ! */
    {0x0A, 0x0A, 0x00, 0x00, 0x00, 0x00, 0x00}, /* " */
    {0x0A, 0x0A, 0x1F, 0x0A, 0x1F, 0x0A, 0x0A}, /* # */
    {0x04, 0x0F, 0x14, 0x0E, 0x05, 0x1E, 0x04}, /* $ */
    {0x18, 0x19, 0x02, 0x04, 0x08, 0x13, 0x03}, /* % */
    {0x0C, 0x12, 0x14, 0x08, 0x15, 0x12, 0x0D}, /* & */
    {0x04, 0x04, 0x08, 0x00, 0x00, 0x00, 0x00}, /* ' */
    {0x02, 0x04, 0x08, 0x08, 0x08, 0x04, 0x02}, /* ( */
    {0x08, 0x04, 0x02, 0x02, 0x02, 0x04, 0x08}, /* ) */
    {0x00, 0x04, 0x15, 0x0E, 0x15, 0x04, 0x00}, /* * */
    {0x00, 0x04, 0x04, 0x1F, 0x04, 0x04, 0x00}, /* + */
    {0x00, 0x00, 0x00, 0x00, 0x0C, 0x04, 0x08}, /* , */
    {0x00, 0x00, 0x00, 0x1F, 0x00, 0x00, 0x00}, /* - */
    {0x00, 0x00, 0x00, 0x00, 0x00, 0x0C, 0x0C}, /* . */
    {0x00, 0x01, 0x02, 0x04, 0x08, 0x10, 0x00}, /* / */
    {0x0E, 0x11, 0x13, 0x15, 0x19, 0x11, 0x0E}, /* 0 */
    {0x04, 0x0C, 0x04, 0x04, 0x04, 0x04, 0x0E}, /* 1 */
    {0x0E, 0x11, 0x01, 0x02, 0x04, 0x08, 0x1F}, /* 2 */
    {0x1F, 0x02, 0x04, 0x02, 0x01, 0x11, 0x0E}, /* 3 */
    {0x02, 0x06, 0x0A, 0x12, 0x1F, 0x02, 0x02}, /* 4 */
    {0x1F, 0x10, 0x1E, 0x01, 0x01, 0x11, 0x0E}, /* 5 */
    {0x06, 0x08, 0x10, 0x1E, 0x11, 0x11, 0x0E}, /* 6 */
    {0x1F, 0x01, 0x02, 0x04, 0x08, 0x08, 0x08}, /* 7 */
    {0x0E, 0x11, 0x11, 0x0E, 0x11, 0x11, 0x0E}, /* 8 */
    {0x0E, 0x11, 0x11, 0x0F, 0x01, 0x02, 0x0C}, /* 9 */
    {0x00, 0x0C, 0x0C, 0x00, 0x0C, 0x0C, 0x00}, /* : */
    {0x00, 0x0C, 0x0C, 0x00, 0x0C, 0x04, 0x08}, /* ; */
    {0x02, 0x04, 0x08, 0x10, 0x08, 0x04, 0x02}, /* < */
    {0x00, 0x00, 0x1F, 0x00, 0x1F, 0x00, 0x00}, /* = */
    {0x08, 0x04, 0x02, 0x01, 0x02, 0x04, 0x08}, /* > */
    {0x0E, 0x11, 0x01, 0x02, 0x04, 0x00, 0x04}, /* ? */
    {0x0E, 0x11, 0x17, 0x15, 0x17, 0x10, 0x0F}, /* @ */
    {0x0E, 0x11, 0x11, 0x1F, 0x11, 0x11, 0x11}, /* A */
    {0x1E, 0x11, 0x11, 0x1E, 0x11, 0x11, 0x1E}, /* B */
    {0x0E, 0x11, 0x10, 0x10, 0x10, 0x11, 0x0E}, /* C */
    {0x1C, 0x12, 0x11, 0x11, 0x11, 0x12, 0x1C}, /* D */
    {0x1F, 0x10, 0x10, 0x1E, 0x10, 0x10, 0x1F}, /* E */
    {0x1F, 0x10, 0x10, 0x1E, 0x10, 0x10, 0x10}, /* F */
    {0x0E, 0x11, 0x10, 0x17, 0x11, 0x11, 0x0F}, /* G */
    {0x11, 0x11, 0x11, 0x1F, 0x11, 0x11, 0x11}, /* H */
    {0x0E, 0x04, 0x04, 0x04, 0x04, 0x04, 0x0E}, /* I */
    {0x07, 0x02, 0x02, 0x02, 0x02, 0x12, 0x0C}, /* J */
    {0x11, 0x12, 0x14, 0x18, 0x14, 0x12, 0x11}, /* K */
    {0x10, 0x10, 0x10, 0x10, 0x10, 0x10, 0x1F}, /* L */
    {0x11, 0x1B, 0x15, 0x15, 0x11, 0x11, 0x11}, /* M */
    {0x11, 0x11, 0x19, 0x15, 0x13, 0x11, 0x11}, /* N */
    {0x0E, 0x11, 0x11, 0x11, 0x11, 0x11, 0x0E}, /* O */
    {0x1E, 0x11, 0x11, 0x1E, 0x10, 0x10, 0x10}, /* P */
    {0x0E, 0x11, 0x11, 0x11, 0x15, 0x12, 0x0D}, /* Q */
    {0x1E, 0x11, 0x11, 0x1E, 0x14, 0x12, 0x11}, /* R */
    {0x0F, 0x10, 0x10, 0x0E, 0x01, 0x01, 0x1E}, /* S */
    {0x1F, 0x04, 0x04, 0x04, 0x04, 0x04, 0x04}, /* T */
    {0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x0E}, /* U */
    {0x11, 0x11, 0x11, 0x11, 0x11, 0x0A, 0x04}, /* V */
    {0x11, 0x11, 0x11, 0x15, 0x15, 0x15, 0x0A}, /* W */
    {0x11, 0x11, 0x0A, 0x04, 0x0A, 0x11, 0x11}, /* X */
    {0x11, 0x11, 0x11, 0x0A, 0x04, 0x04, 0x04}, /* Y */
    {0x1F, 0x01, 0x02, 0x04, 0x08, 0x10, 0x1F}, /* Z */
    {0x0E, 0x08, 0x08, 0x08, 0x08, 0x08, 0x0E}, /* [ */
    {0x00, 0x10, 0x08, 0x04, 0x02, 0x01, 0x00}, /* \ */
    {0x0E, 0x02, 0x02, 0x02, 0x02, 0x02, 0x0E}, /* ] */
    {0x04, 0x0A, 0x11, 0x00, 0x00, 0x00, 0x00}, /* ^ */
    {0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x1F}, /* _ */
    {0x08, 0x04, 0x00, 0x00, 0x00, 0x00, 0x00}, /* ` */
    {0x00, 0x00, 0x0E, 0x01, 0x0F, 0x11, 0x0F}, /* a */
    {0x10, 0x10, 0x16, 0x19, 0x11, 0x11, 0x1E}, /* b */
    {0x00, 0x00, 0x0E, 0x10, 0x10, 0x11, 0x0E}, /* c */
    {0x01, 0x01, 0x0D, 0x13, 0x11, 0x11, 0x0F}, /* d */
    {0x00, 0x00, 0x0E, 0x11, 0x1F, 0x10, 0x0E}, /* e */
    {0x06, 0x09, 0x08, 0x1C, 0x08, 0x08, 0x08}, /* f */
    {0x00, 0x0F, 0x11, 0x11, 0x0F, 0x01, 0x0E}, /* g */
    {0x10, 0x10, 0x16, 0x19, 0x11, 0x11, 0x11}, /* h */
    {0x04, 0x00, 0x0C, 0x04, 0x04, 0x04, 0x0E}, /* i */
    {0x02, 0x00, 0x06, 0x02, 0x02, 0x12, 0x0C}, /* j */
    {0x10, 0x10, 0x12, 0x14, 0x18, 0x14, 0x12}, /* k */
    {0x0C, 0x04, 0x04, 0x04, 0x04, 0x04, 0x0E}, /* l */
    {0x00, 0x00, 0x1A, 0x15, 0x15, 0x11, 0x11}, /* m */
    {0x00, 0x00, 0x16, 0x19, 0x11, 0x11, 0x11}, /* n */
    {0x00, 0x00, 0x0E, 0x11, 0x11, 0x11, 0x0E}, /* o */
    {0x00, 0x1E, 0x11, 0x11, 0x1E, 0x10, 0x10}, /* p */
    {0x00, 0x0F, 0x11, 0x11, 0x0F, 0x01, 0x01}, /* q */
    {0x00, 0x00, 0x16, 0x19, 0x10, 0x10, 0x10}, /* r */
    {0x00, 0x00, 0x0E, 0x10, 0x0E, 0x01, 0x1E}, /* s */
    {0x08, 0x08, 0x1C, 0x08, 0x08, 0x09, 0x06}, /* t */
    {0x00, 0x00, 0x11, 0x11, 0x11, 0x13, 0x0D}, /* u */
    {0x00, 0x00, 0x11, 0x11, 0x11, 0x0A, 0x04}, /* v */
    {0x00, 0x00, 0x11, 0x11, 0x15, 0x15, 0x0A}, /* w */
    {0x00, 0x00, 0x11, 0x0A, 0x04, 0x0A, 0x11}, /* x */
    {0x00, 0x11, 0x11, 0x11, 0x0F, 0x01, 0x0E}, /* y */
    {0x00, 0x00, 0x1F, 0x02, 0x04, 0x08, 0x1F}, /* z */
    {0x02, 0x04, 0x04, 0x08, 0x04, 0x04, 0x02}, /* { */
    {0x04, 0x04, 0x04, 0x04, 0x04, 0x04, 0x04}, /* | */
    {0x08, 0x04, 0x04, 0x02, 0x04, 0x04, 0x08}, /* } */
    {0x00, 0x00, 0x08, 0x15, 0x02, 0x00, 0x00}, /* ~ */
};

/* One UTF-8 character of s (s[0] != 0): its code point, or -1 for a byte
 * that does not start a well-formed sequence (bench_json_utf8 decides);
 * *len is the bytes it takes (1 for a bad byte: one glyph). */
static long utf8_char(const char *s, int *len)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t n = bench_json_utf8(s, strnlen(s, 4));
    *len = 1;
    if (n == 0)
        return -1;
    long cp = n == 1 ? u[0] : u[0] & (0x7F >> n);
    for (size_t i = 1; i < n; i++)
        cp = cp << 6 | (u[i] & 0x3F);
    *len = (int)n;
    return cp;
}

/* Glyph of a code point: printable ASCII, micro (U+00B5, U+03BC), else a box. */
static const uint8_t *glyph(long cp)
{
    static const uint8_t box[7] = {0x1F, 0x11, 0x11, 0x11, 0x11, 0x11, 0x1F};
    static const uint8_t micro[7] = {0x00, 0x00, 0x11, 0x11, 0x13, 0x1D, 0x10};
    if (cp == 0xB5 || cp == 0x3BC)
        return micro;
    if (cp < 32 || cp > 126)
        return box;
    return font[cp - 32];
}

#define CHAR_W 6 /* 5 pixels + 1 space, times the scale */
#define CHAR_H 7

/* Characters (not bytes) in s. */
static int text_len(const char *s)
{
    int n = 0, len;
    for (; *s; s += len, n++)
        utf8_char(s, &len);
    return n;
}

static int text_w(const char *s, int scale)
{
    int n = text_len(s);
    return n ? (n * CHAR_W - 1) * scale : 0;
}

/* Draw s with its top-left corner at (x, y); rot: 0 normal, 1 rotated 90
 * degrees counter-clockwise (reads bottom to top, starting at (x, y) = the
 * bottom-left corner). */
static void text(struct canvas *c, int x, int y, const char *s, int scale, uint32_t col, int rot)
{
    int len;
    for (int i = 0; *s; i++, s += len) {
        const uint8_t *g = glyph(utf8_char(s, &len));
        for (int r = 0; r < CHAR_H; r++)
            for (int k = 0; k < 5; k++) {
                if (!(g[r] >> (4 - k) & 1))
                    continue;
                int gx = (i * CHAR_W + k) * scale, gy = r * scale;
                for (int sy = 0; sy < scale; sy++)
                    for (int sx = 0; sx < scale; sx++) {
                        if (rot)
                            pset(c, x + gy + sy, y - gx - sx, col);
                        else
                            pset(c, x + gx + sx, y + gy + sy, col);
                    }
            }
    }
}

/* ---- axes ------------------------------------------------------------------ */

/* On a log axis lo and hi are decades (exponents of 10), so that the range
 * of any positive finite data stays finite (DBL_MAX is below 10^309). */
struct axis {
    int log;
    double lo, hi; /* range shown: data values (linear) or decades (log) */
    int p0, p1;    /* pixels of lo and hi */
};

static double axis_t(const struct axis *a, double v)
{
    return a->log ? log10(v) : v;
}

/* Pixel of t, a value already on the axis' scale (a decade on a log axis).
 * Halves: hi - lo of data near +-DBL_MAX would overflow. */
static double axis_px_t(const struct axis *a, double t)
{
    double f = (t / 2 - a->lo / 2) / (a->hi / 2 - a->lo / 2);
    return a->p0 + f * (a->p1 - a->p0);
}

static double axis_px(const struct axis *a, double v)
{
    return axis_px_t(a, axis_t(a, v));
}

/* A pixel coordinate as an int: NaN or far off the canvas are clamped, so
 * the conversion is defined and lines stay short. */
static int px_int(double p)
{
    const double lim = 4 * BENCH_PLOT_W;
    if (!(p > -lim))
        return (int)-lim;
    return p > lim ? (int)lim : (int)lround(p);
}

/* Range [mn, mx] of finite data made presentable: whole decades on a log
 * axis, 5% margins on a linear one; never empty, never infinite. */
static void axis_range(struct axis *a, double mn, double mx)
{
    if (a->log) {
        a->lo = floor(log10(mn) + 1e-9);
        a->hi = ceil(log10(mx) - 1e-9);
        if (a->hi <= a->lo)
            a->hi = a->lo + 1;
        return;
    }
    double pad = mx * 0.05 - mn * 0.05;
    if (pad == 0)
        pad = mn != 0 ? fabs(mn) * 0.1 : 1;
    a->lo = fmax(mn - pad, -DBL_MAX);
    a->hi = fmin(mx + pad, DBL_MAX);
    if (!(a->hi > a->lo)) { /* equal subnormal values: 10% of them is 0 */
        a->lo = mn - DBL_MIN;
        a->hi = mx + DBL_MIN;
    }
    if (mn >= 0 && a->lo < 0)
        a->lo = 0; /* do not show negative room for data that cannot be negative */
}

/* Step of about 5 linear ticks: 1, 2 or 5 times a power of ten. */
static double nice_step(double lo, double hi)
{
    double raw = (hi / 2 - lo / 2) / 2.5, p = pow(10, floor(log10(raw)));
    double m = raw / p;
    return (m < 1.5 ? 1 : m < 3.5 ? 2 : m < 7.5 ? 5 : 10) * p;
}

/* Tick label: short, with an SI suffix for large values ("12.5M"), so
 * labels stay narrow enough for the left margin. */
static void fmt_num(char *buf, size_t len, double v)
{
    static const struct { double from, div; const char *suffix; } si[] = {
        {1e12, 1e12, "T"}, {1e9, 1e9, "G"}, {1e6, 1e6, "M"}, {1e4, 1e3, "k"}};
    if (fabs(v) < 1e-12)
        v = 0;
    for (size_t i = 0; i < sizeof si / sizeof si[0]; i++) {
        if (fabs(v) >= si[i].from) {
            snprintf(buf, len, "%.4g%s", v / si[i].div, si[i].suffix);
            return;
        }
    }
    snprintf(buf, len, "%.5g", v);
}

#define GRID 0xE4E4E4u
#define INK 0x202020u

/* Ticks, grid lines and labels of one axis; horizontal (x) or vertical (y). */
static void draw_axis(struct canvas *c, const struct axis *a, int horiz, int other0, int other1)
{
    char buf[32];
    /* Decades always fall on the range of a log axis; label each of them,
     * or every k-th when there are too many to fit. */
    if (a->log) {
        int d0 = (int)a->lo, d1 = (int)a->hi;
        int every = (d1 - d0 + 9) / 10;
        if (every < 1)
            every = 1;
        for (int d = d0; d <= d1; d++) {
            for (int m = 1; m < 10 && (m == 1 || d < d1); m++) {
                int p = px_int(axis_px_t(a, d + log10(m)));
                int major = m == 1, len = major ? 6 : 3;
                if (horiz) {
                    if (major)
                        line(c, p, other0, p, other1, 1, GRID, 0, 0, c->w, c->h);
                    line(c, p, other1, p, other1 + len, 1, INK, 0, 0, c->w, c->h);
                } else {
                    if (major)
                        line(c, other0, p, other1, p, 1, GRID, 0, 0, c->w, c->h);
                    line(c, other0 - len, p, other0, p, 1, INK, 0, 0, c->w, c->h);
                }
                if (!major || (d - d0) % every)
                    continue;
                /* "10" with the exponent raised and smaller */
                snprintf(buf, sizeof buf, "%d", d);
                int w = text_w("10", 2) + 2 + text_w(buf, 1);
                int x = horiz ? p - w / 2 : other0 - 10 - w;
                int y = horiz ? other1 + 14 : p - 7;
                text(c, x, y, "10", 2, INK, 0);
                text(c, x + text_w("10", 2) + 2, y - 4, buf, 1, INK, 0);
            }
        }
        return;
    }
    /* Ticks by integer index, never by adding the step: a step below the
     * values' resolution would not advance. At most 20 ticks are drawn. */
    double step = nice_step(a->lo, a->hi);
    double k0 = ceil(a->lo / step - 1e-9), k1 = floor(a->hi / step + 1e-9);
    for (int k = 0; k <= 20 && k0 + k <= k1; k++) {
        double v = (k0 + k) * step;
        int p = px_int(axis_px(a, v));
        fmt_num(buf, sizeof buf, v);
        int w = text_w(buf, 2);
        if (horiz) {
            line(c, p, other0, p, other1, 1, GRID, 0, 0, c->w, c->h);
            line(c, p, other1, p, other1 + 6, 1, INK, 0, 0, c->w, c->h);
            text(c, p - w / 2, other1 + 12, buf, 2, INK, 0);
        } else {
            line(c, other0, p, other1, p, 1, GRID, 0, 0, c->w, c->h);
            line(c, other0 - 6, p, other0, p, 1, INK, 0, 0, c->w, c->h);
            text(c, other0 - 10 - w, p - 7, buf, 2, INK, 0);
        }
    }
}

/* Plot area in pixels. */
enum { AREA_X0 = 100, AREA_X1 = BENCH_PLOT_W - 20, AREA_Y0 = 44, AREA_Y1 = BENCH_PLOT_H - 70 };

/* Frame, title, axis labels and ticks around the plot area. */
static void draw_frame(struct canvas *c, const struct axis *ax, const struct axis *ay,
                       const char *title, const char *xlabel, const char *ylabel)
{
    draw_axis(c, ax, 1, AREA_Y0, AREA_Y1);
    draw_axis(c, ay, 0, AREA_X0, AREA_X1);
    line(c, AREA_X0, AREA_Y0, AREA_X1, AREA_Y0, 1, INK, 0, 0, c->w, c->h);
    line(c, AREA_X0, AREA_Y1, AREA_X1, AREA_Y1, 1, INK, 0, 0, c->w, c->h);
    line(c, AREA_X0, AREA_Y0, AREA_X0, AREA_Y1, 1, INK, 0, 0, c->w, c->h);
    line(c, AREA_X1, AREA_Y0, AREA_X1, AREA_Y1, 1, INK, 0, 0, c->w, c->h);
    if (title)
        text(c, (c->w - text_w(title, 2)) / 2, 14, title, 2, INK, 0);
    if (xlabel)
        text(c, (AREA_X0 + AREA_X1 - text_w(xlabel, 2)) / 2, c->h - 24, xlabel, 2, INK, 0);
    if (ylabel)
        text(c, 8, (AREA_Y0 + AREA_Y1 + text_w(ylabel, 2)) / 2, ylabel, 2, INK, 1);
}

static int canvas_new(struct canvas *c)
{
    c->w = BENCH_PLOT_W;
    c->h = BENCH_PLOT_H;
    c->rgb = malloc((size_t)c->w * (size_t)c->h * 3);
    if (!c->rgb)
        return ONI_EBADALLOC;
    memset(c->rgb, 0xFF, (size_t)c->w * (size_t)c->h * 3);
    return ONI_ESUCCESS;
}

/* ---- line plots ------------------------------------------------------------ */

uint32_t bench_series_color(size_t i)
{
    static const uint32_t pal[BENCH_MAX_SERIES] = {
        0x1F5FBF, 0xD62728, 0x2CA02C, 0xFF7F0E, 0x9467BD,
        0x8C564B, 0xE377C2, 0x606060, 0xB0B020, 0x17BECF};
    return pal[i % BENCH_MAX_SERIES];
}

static int plottable(const struct bench_plot *p, double x, double y)
{
    return isfinite(x) && isfinite(y) && (!p->logx || x > 0) && (!p->logy || y > 0);
}

/* Axes of p from its data; ONI_EINVALARG when nothing is plottable. */
static int plot_axes(const struct bench_plot *p, struct axis *ax, struct axis *ay)
{
    if (!p || !p->series || !p->nseries || p->nseries > BENCH_MAX_SERIES)
        return ONI_EINVALARG;
    double xmn = INFINITY, xmx = -INFINITY, ymn = INFINITY, ymx = -INFINITY;
    for (size_t s = 0; s < p->nseries; s++) {
        const struct bench_series *se = &p->series[s];
        if (se->n && (!se->x || !se->y))
            return ONI_EINVALARG;
        for (size_t i = 0; i < se->n; i++) {
            if (!plottable(p, se->x[i], se->y[i]))
                continue;
            xmn = fmin(xmn, se->x[i]);
            xmx = fmax(xmx, se->x[i]);
            ymn = fmin(ymn, se->y[i]);
            ymx = fmax(ymx, se->y[i]);
        }
    }
    if (!(xmn <= xmx))
        return ONI_EINVALARG;
    *ax = (struct axis){.log = p->logx != 0, .p0 = AREA_X0, .p1 = AREA_X1};
    *ay = (struct axis){.log = p->logy != 0, .p0 = AREA_Y1, .p1 = AREA_Y0};
    axis_range(ax, xmn, xmx);
    axis_range(ay, ymn, ymx);
    return ONI_ESUCCESS;
}

int bench_plot_pixel(const struct bench_plot *p, double x, double y, int *px, int *py)
{
    struct axis ax, ay;
    int rc = plot_axes(p, &ax, &ay);
    if (rc)
        return rc;
    if (!px || !py || !plottable(p, x, y))
        return ONI_EINVALARG;
    *px = px_int(axis_px(&ax, x));
    *py = px_int(axis_px(&ay, y));
    return ONI_ESUCCESS;
}

/* Non-background pixels (anything but white and grid grey) in a box. */
static int busy_pixels(const struct canvas *c, int x0, int y0, int x1, int y1)
{
    int n = 0;
    for (int y = y0; y <= y1; y++)
        for (int x = x0; x <= x1; x++) {
            const uint8_t *p = c->rgb + ((size_t)y * (size_t)c->w + (size_t)x) * 3;
            uint32_t v = (uint32_t)p[0] << 16 | (uint32_t)p[1] << 8 | p[2];
            n += v != 0xFFFFFF && v != GRID;
        }
    return n;
}

/* The widest legend text: the box (40 pixels more) stays inside the plot
 * area with 10 pixels to spare on each side. */
#define LEGEND_TEXT_W (AREA_X1 - AREA_X0 - 20 - 40)

#define LEGEND_CHARS ((LEGEND_TEXT_W / 2 + 1) / CHAR_W)

/* name cut to the characters that fit in LEGEND_TEXT_W at scale 2, never
 * inside a multi-byte character; out has room for 4 bytes a character. */
static void legend_name(char *out, const char *name)
{
    size_t bytes = 0;
    int len;
    for (int n = 0; name && name[bytes] && n < LEGEND_CHARS; n++) {
        utf8_char(name + bytes, &len);
        bytes += (size_t)len;
    }
    memcpy(out, name ? name : "", bytes);
    out[bytes] = 0;
}

/* The legend goes in the corner of the plot area where it hides the least
 * of the data already drawn. */
static void draw_legend(struct canvas *c, const struct bench_plot *p)
{
    char names[BENCH_MAX_SERIES][4 * LEGEND_CHARS + 1];
    int w = 0;
    for (size_t s = 0; s < p->nseries; s++) {
        legend_name(names[s], p->series[s].name);
        if (text_w(names[s], 2) > w)
            w = text_w(names[s], 2);
    }
    int bw = 40 + w, bh = 8 + (int)p->nseries * 20;
    int best = -1, x0 = 0, y0 = 0;
    for (int corner = 0; corner < 4; corner++) {
        int cx = corner & 1 ? AREA_X1 - 10 - bw : AREA_X0 + 10;
        int cy = corner & 2 ? AREA_Y1 - 10 - bh : AREA_Y0 + 10;
        int busy = busy_pixels(c, cx, cy, cx + bw, cy + bh);
        if (best < 0 || busy < best) {
            best = busy;
            x0 = cx;
            y0 = cy;
        }
    }
    int x1 = x0 + bw, y1 = y0 + bh;
    fill_rect(c, x0, y0, x1, y1, 0xFFFFFF);
    line(c, x0, y0, x1, y0, 1, INK, 0, 0, c->w, c->h);
    line(c, x0, y1, x1, y1, 1, INK, 0, 0, c->w, c->h);
    line(c, x0, y0, x0, y1, 1, INK, 0, 0, c->w, c->h);
    line(c, x1, y0, x1, y1, 1, INK, 0, 0, c->w, c->h);
    for (size_t s = 0; s < p->nseries; s++) {
        int y = y0 + 6 + (int)s * 20;
        fill_rect(c, x0 + 6, y + 4, x0 + 28, y + 9, bench_series_color(s));
        text(c, x0 + 34, y, names[s], 2, INK, 0);
    }
}

int bench_plot_png(const char *path, const struct bench_plot *p)
{
    struct axis ax, ay;
    struct canvas c;
    int rc = plot_axes(p, &ax, &ay);
    if (rc)
        return rc;
    if (!path)
        return ONI_EINVALARG;
    if ((rc = canvas_new(&c)))
        return rc;
    draw_frame(&c, &ax, &ay, p->title, p->xlabel, p->ylabel);
    for (size_t s = 0; s < p->nseries; s++) {
        const struct bench_series *se = &p->series[s];
        uint32_t col = bench_series_color(s);
        int have_prev = 0, qx = 0, qy = 0;
        for (size_t i = 0; i < se->n; i++) {
            if (!plottable(p, se->x[i], se->y[i]))
                continue;
            int x = px_int(axis_px(&ax, se->x[i])), y = px_int(axis_px(&ay, se->y[i]));
            if (se->style != BENCH_POINTS && have_prev)
                line(&c, qx, qy, x, y, 2, col, AREA_X0, AREA_Y0, AREA_X1, AREA_Y1);
            if (se->style != BENCH_LINES)
                fill_rect(&c, x - 2, y - 2, x + 2, y + 2, col);
            have_prev = 1;
            qx = x;
            qy = y;
        }
    }
    draw_legend(&c, p);
    rc = bench_png_write(path, c.w, c.h, c.rgb);
    free(c.rgb);
    return rc;
}

/* ---- histograms ------------------------------------------------------------ */

int bench_hist_png(const char *path, const char *title, const char *xlabel,
                   const struct bench_hist *h)
{
    if (!path || !h || !h->count || !h->nbins || !isfinite(h->lo) || !isfinite(h->hi) ||
        (h->log_bins && h->lo <= 0))
        return ONI_EINVALARG;
    uint64_t mx = 0;
    for (size_t i = 0; i < h->nbins; i++)
        if (h->count[i] > mx)
            mx = h->count[i];
    struct axis ax = {.log = h->log_bins, .p0 = AREA_X0, .p1 = AREA_X1};
    struct axis ay = {.log = 0, .p0 = AREA_Y1, .p1 = AREA_Y0};
    double hi = h->hi > h->lo ? h->hi : h->lo + (h->log_bins ? h->lo : 1);
    axis_range(&ax, h->lo, hi);
    axis_range(&ay, 0, mx ? (double)mx : 1);
    ay.lo = 0;
    struct canvas c;
    int rc = canvas_new(&c);
    if (rc)
        return rc;
    draw_frame(&c, &ax, &ay, title, xlabel, "count");
    uint32_t col = bench_series_color(0);
    for (size_t i = 0; i < h->nbins; i++) {
        if (!h->count[i])
            continue;
        double e0 = bench_hist_edge(h, i), e1 = bench_hist_edge(h, i + 1);
        if (e1 <= e0)
            e1 = hi; /* a zero-width range: one bar across it */
        int x0 = px_int(axis_px(&ax, e0)), x1 = px_int(axis_px(&ax, e1)) - 1;
        int y = px_int(axis_px(&ay, (double)h->count[i]));
        if (x1 < x0)
            x1 = x0;
        fill_rect(&c, x0, y, x1, AREA_Y1 - 1, col);
    }
    rc = bench_png_write(path, c.w, c.h, c.rgb);
    free(c.rgb);
    return rc;
}
