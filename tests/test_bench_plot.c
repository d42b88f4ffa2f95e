/* test_bench_plot.c - PNG plots of src/bench: files decode (chunk CRCs, zlib
 * stored blocks, Adler-32, filters) and pixels are where the data says. */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <unistd.h>
#include "bench/bench.h"
#include "unit.h"

/* ---- a tiny PNG reader for what bench_png_write may produce ----------------- */

static uint32_t be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static uint32_t crc32_ref(const uint8_t *p, size_t n)
{
    uint32_t c = 0xFFFFFFFFu;
    for (size_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++)
            c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1)));
    }
    return ~c;
}

struct image {
    int w, h;
    uint8_t *rgb;
};

/* Decode an 8-bit RGB, non-interlaced PNG whose zlib stream uses stored
 * blocks only; every checksum is verified. Returns 0 or a line number. */
static int png_read(const char *path, struct image *img)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return __LINE__;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *buf = malloc((size_t)n);
    uint8_t *z = malloc((size_t)n);
    size_t zn = 0;
    int rc = 0, seen_end = 0;
    if (!buf || !z || fread(buf, 1, (size_t)n, f) != (size_t)n) {
        rc = __LINE__;
        goto out;
    }
    static const uint8_t sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
    if (n < 8 || memcmp(buf, sig, 8)) {
        rc = __LINE__;
        goto out;
    }
    img->w = img->h = 0;
    for (long pos = 8; pos < n && !seen_end;) {
        if (pos + 12 > n) {
            rc = __LINE__;
            goto out;
        }
        uint32_t len = be32(buf + pos);
        const uint8_t *type = buf + pos + 4, *data = buf + pos + 8;
        if (pos + 12 + (long)len > n || crc32_ref(type, len + 4) != be32(data + len)) {
            rc = __LINE__;
            goto out;
        }
        if (!memcmp(type, "IHDR", 4)) {
            if (len != 13 || data[8] != 8 || data[9] != 2 || data[10] || data[11] || data[12]) {
                rc = __LINE__;
                goto out;
            }
            img->w = (int)be32(data);
            img->h = (int)be32(data + 4);
        } else if (!memcmp(type, "IDAT", 4)) {
            memcpy(z + zn, data, len);
            zn += len;
        } else if (!memcmp(type, "IEND", 4)) {
            seen_end = 1;
        }
        pos += 12 + (long)len;
    }
    if (!seen_end || img->w <= 0 || img->h <= 0 || zn < 6 || ((z[0] << 8) | z[1]) % 31 ||
        (z[0] & 0x0F) != 8) {
        rc = __LINE__;
        goto out;
    }
    size_t row = (size_t)img->w * 3 + 1, raw = row * (size_t)img->h;
    uint8_t *r = malloc(raw);
    size_t rn = 0, zp = 2;
    int final = 0;
    while (!final && r) {
        if (zp + 5 > zn || (z[zp] & 0x06) != 0) { /* BTYPE must be 00 (stored) */
            rc = __LINE__;
            break;
        }
        final = z[zp] & 1;
        unsigned len = z[zp + 1] | z[zp + 2] << 8, nlen = z[zp + 3] | z[zp + 4] << 8;
        zp += 5;
        if ((len ^ 0xFFFF) != nlen || zp + len > zn || rn + len > raw) {
            rc = __LINE__;
            break;
        }
        memcpy(r + rn, z + zp, len);
        rn += len;
        zp += len;
    }
    if (!r)
        rc = __LINE__;
    if (!rc && (rn != raw || zp + 4 != zn))
        rc = __LINE__;
    if (!rc) {
        uint32_t a = 1, b = 0;
        for (size_t i = 0; i < raw; i++) {
            a = (a + r[i]) % 65521;
            b = (b + a) % 65521;
        }
        if ((b << 16 | a) != be32(z + zp))
            rc = __LINE__;
    }
    if (!rc) {
        img->rgb = malloc((size_t)img->w * (size_t)img->h * 3);
        for (int y = 0; y < img->h && img->rgb; y++) {
            if (r[(size_t)y * row] != 0) { /* only filter "none" is written */
                rc = __LINE__;
                break;
            }
            memcpy(img->rgb + (size_t)y * (size_t)img->w * 3, r + (size_t)y * row + 1, row - 1);
        }
        if (rc) {
            free(img->rgb);
            img->rgb = NULL;
        }
    }
    free(r);
out:
    fclose(f);
    free(buf);
    free(z);
    return rc;
}

static uint32_t pixel(const struct image *img, int x, int y)
{
    const uint8_t *p = img->rgb + ((size_t)y * (size_t)img->w + (size_t)x) * 3;
    return (uint32_t)p[0] << 16 | (uint32_t)p[1] << 8 | p[2];
}

/* True if colour col appears within r pixels of (x, y). */
static int near_color(const struct image *img, int x, int y, int r, uint32_t col)
{
    for (int dy = -r; dy <= r; dy++)
        for (int dx = -r; dx <= r; dx++) {
            int px = x + dx, py = y + dy;
            if (px >= 0 && py >= 0 && px < img->w && py < img->h && pixel(img, px, py) == col)
                return 1;
        }
    return 0;
}

static void tmp_path(char *buf, size_t len)
{
    snprintf(buf, len, "/tmp/onigpu-bench-plot-%d-XXXXXX", (int)getpid());
    int fd = mkstemp(buf);
    if (fd >= 0)
        close(fd);
}

/* Write a w x h image of a fixed pattern to path and read it back: 0 when
 * the decoded image is the one written, else a line number. */
static int png_roundtrip(const char *path, int w, int h)
{
    size_t n = (size_t)w * (size_t)h * 3;
    uint8_t *rgb = malloc(n);
    struct image img = {0};
    int rc = rgb ? 0 : __LINE__;
    for (size_t i = 0; !rc && i < n; i++)
        rgb[i] = (uint8_t)(i * 7 + (i >> 9));
    if (!rc && bench_png_write(path, w, h, rgb) != ONI_ESUCCESS)
        rc = __LINE__;
    if (!rc)
        rc = png_read(path, &img);
    if (!rc && (img.w != w || img.h != h || memcmp(img.rgb, rgb, n)))
        rc = __LINE__;
    free(img.rgb);
    free(rgb);
    return rc;
}

/* ---- tests ------------------------------------------------------------------- */

TEST(png_roundtrip_small_and_multi_block)
{
    char path[64];
    tmp_path(path, sizeof path);
    uint8_t rgb[3 * 2 * 3];
    for (int i = 0; i < (int)sizeof rgb; i++)
        rgb[i] = (uint8_t)(i * 13);
    REQUIRE(bench_png_write(path, 3, 2, rgb) == ONI_ESUCCESS);
    struct image img = {0};
    CHECK_EQ(png_read(path, &img), 0);
    REQUIRE(img.rgb != NULL);
    CHECK_EQ(img.w, 3);
    CHECK_EQ(img.h, 2);
    CHECK(!memcmp(img.rgb, rgb, sizeof rgb));
    free(img.rgb);

    /* 28x771 is 771 rows of a filter byte and 84 bytes, 65535 raw bytes:
     * exactly one full stored block, and no empty one after it; 300x300
     * RGB is 270300 raw bytes: several stored blocks. */
    CHECK_EQ(png_roundtrip(path, 28, 771), 0);
    CHECK_EQ(png_roundtrip(path, 300, 300), 0);

    /* The reader catches a flipped bit (so a pass above means something). */
    FILE *f = fopen(path, "r+b");
    REQUIRE(f != NULL);
    fseek(f, 200, SEEK_SET);
    int c = fgetc(f);
    fseek(f, 200, SEEK_SET);
    fputc(c ^ 1, f);
    fclose(f);
    img.rgb = NULL;
    CHECK(png_read(path, &img) != 0);
    free(img.rgb);
    unlink(path);

    CHECK_RC(bench_png_write(path, 0, 2, rgb), ONI_EINVALARG);
    CHECK_RC(bench_png_write(NULL, 3, 2, rgb), ONI_EINVALARG);
    CHECK_RC(bench_png_write("/nonexistent-dir/x.png", 3, 2, rgb), ONI_EPATHINVALID);
}

TEST(plot_loglog_lines_land_where_data_is)
{
    double x[7], y1[7], y2[7];
    for (int i = 0; i < 7; i++) {
        x[i] = pow(10, i);          /* 1 .. 1e6 */
        y1[i] = 10 * x[i];          /* a straight line on log-log axes */
        y2[i] = 1000 + x[i] / 100;  /* flat, then rising */
    }
    struct bench_series s[2] = {
        {"t = 10 s", x, y1, 7, BENCH_LINES_POINTS},
        {"flat", x, y2, 7, BENCH_POINTS},
    };
    struct bench_plot p = {"Transfer time vs size", "size (bytes)", "time (ns)", 1, 1, s, 2};
    char path[64];
    tmp_path(path, sizeof path);
    REQUIRE(bench_plot_png(path, &p) == ONI_ESUCCESS);
    struct image img = {0};
    REQUIRE(png_read(path, &img) == 0);
    CHECK_EQ(img.w, BENCH_PLOT_W);
    CHECK_EQ(img.h, BENCH_PLOT_H);

    uint32_t c0 = bench_series_color(0), c1 = bench_series_color(1);
    CHECK(c0 != c1);
    int px, py, qx, qy;
    /* Points of series 0 right of the legend, and the middle of the segment
     * between two of them (the line between points is drawn). */
    for (int i = 3; i < 7; i++) {
        CHECK_RC(bench_plot_pixel(&p, x[i], y1[i], &px, &py), ONI_ESUCCESS);
        CHECK(near_color(&img, px, py, 1, c0));
    }
    CHECK_RC(bench_plot_pixel(&p, x[4], y1[4], &px, &py), ONI_ESUCCESS);
    CHECK_RC(bench_plot_pixel(&p, x[5], y1[5], &qx, &qy), ONI_ESUCCESS);
    CHECK(near_color(&img, (px + qx) / 2, (py + qy) / 2, 1, c0));
    /* Series 1 is points only: its marks are there, and nothing between them. */
    CHECK_RC(bench_plot_pixel(&p, x[5], y2[5], &px, &py), ONI_ESUCCESS);
    CHECK(near_color(&img, px, py, 1, c1));
    CHECK_RC(bench_plot_pixel(&p, x[6], y2[6], &qx, &qy), ONI_ESUCCESS);
    CHECK(near_color(&img, qx, qy, 1, c1));
    CHECK(!near_color(&img, (px + qx) / 2, (py + qy) / 2, 2, c1));
    /* Far from any data (bottom right of the plot area) nothing of a series. */
    CHECK_RC(bench_plot_pixel(&p, 3e5, 20, &px, &py), ONI_ESUCCESS);
    CHECK(!near_color(&img, px, py, 3, c0) && !near_color(&img, px, py, 3, c1));
    /* Log axes span whole decades: the data's ends (x 1 .. 1e6, y 10 .. 1e7)
     * are the corners of the plot area, where its frame is drawn. */
    CHECK_RC(bench_plot_pixel(&p, 1, 10, &px, &py), ONI_ESUCCESS);
    CHECK_RC(bench_plot_pixel(&p, 1e6, 1e7, &qx, &qy), ONI_ESUCCESS);
    CHECK(px < qx && py > qy);
    int ink[4] = {0}, nx = qx - px + 1, ny = py - qy + 1;
    for (int xx = px; xx <= qx; xx++) {
        ink[0] += pixel(&img, xx, py) == 0x202020; /* bottom edge */
        ink[1] += pixel(&img, xx, qy) == 0x202020; /* top edge */
    }
    for (int yy = qy; yy <= py; yy++) {
        ink[2] += pixel(&img, px, yy) == 0x202020; /* left edge */
        ink[3] += pixel(&img, qx, yy) == 0x202020; /* right edge */
    }
    CHECK(ink[0] > nx * 9 / 10 && ink[1] > nx * 9 / 10);
    CHECK(ink[2] > ny * 9 / 10 && ink[3] > ny * 9 / 10);
    /* Major ticks (6 px below the frame) on the powers of 10, minor ones
     * (3 px) on 2..9 times them. */
    for (int d = 0; d <= 6; d++) {
        int tx, ty;
        CHECK_RC(bench_plot_pixel(&p, pow(10, d), 10, &tx, &ty), ONI_ESUCCESS);
        CHECK_EQ(ty, py);
        CHECK_EQ(pixel(&img, tx, py + 5), 0x202020);
        if (d < 6) {
            CHECK_RC(bench_plot_pixel(&p, 2 * pow(10, d), 10, &tx, &ty), ONI_ESUCCESS);
            CHECK_EQ(pixel(&img, tx, py + 2), 0x202020);
            CHECK(pixel(&img, tx, py + 5) != 0x202020);
        }
    }
    /* No minor tick past the last decade: left of the frame (x = 1 is its
     * left edge, px) a 3-pixel tick at y = 2e6, none at 2e7 above the area.
     * (On the x axis such a tick would be off the canvas.) */
    int mx, my;
    CHECK_RC(bench_plot_pixel(&p, 1, 2e6, &mx, &my), ONI_ESUCCESS);
    CHECK_EQ(pixel(&img, px - 2, my), 0x202020);
    CHECK_RC(bench_plot_pixel(&p, 1, 2e7, &mx, &my), ONI_ESUCCESS);
    REQUIRE(my > 0);
    CHECK(pixel(&img, px - 2, my) != 0x202020);
    /* Data within the decades (x 3 .. 5e5, y 20 .. 3e6) gets the same axes:
     * they are rounded out to whole decades, not fitted to the data. */
    double x3[2] = {3, 5e5}, y3[2] = {20, 3e6};
    struct bench_series s3 = {"inner", x3, y3, 2, BENCH_POINTS};
    struct bench_plot p3 = {"t", "x", "y", 1, 1, &s3, 1};
    int rx, ry;
    CHECK_RC(bench_plot_pixel(&p3, 1, 10, &rx, &ry), ONI_ESUCCESS);
    CHECK(rx == px && ry == py);
    CHECK_RC(bench_plot_pixel(&p3, 1e6, 1e7, &rx, &ry), ONI_ESUCCESS);
    CHECK(rx == qx && ry == qy);
    /* The title is drawn: dark pixels in the top band, centred. */
    int dark = 0;
    for (int yy = 0; yy < 40; yy++)
        for (int xx = BENCH_PLOT_W / 2 - 100; xx < BENCH_PLOT_W / 2 + 100; xx++)
            dark += pixel(&img, xx, yy) == 0x202020;
    CHECK(dark > 100);
    free(img.rgb);
    unlink(path);
}

TEST(plot_linear_axes_and_errors)
{
    double x[3] = {0, 1, 2}, y[3] = {5, -5, 5};
    struct bench_series s = {"zigzag", x, y, 3, BENCH_LINES};
    struct bench_plot p = {"lin", "x", "y", 0, 0, &s, 1};
    char path[64];
    tmp_path(path, sizeof path);
    REQUIRE(bench_plot_png(path, &p) == ONI_ESUCCESS);
    struct image img = {0};
    REQUIRE(png_read(path, &img) == 0);
    int px, py;
    CHECK_RC(bench_plot_pixel(&p, 2, 5, &px, &py), ONI_ESUCCESS);
    CHECK(near_color(&img, px, py, 1, bench_series_color(0)));
    /* a lines-only series has no point markers (5 x 5): nothing of it 2
     * pixels right of its last point, where its line does not go */
    CHECK(pixel(&img, px + 2, py) != bench_series_color(0));
    CHECK_RC(bench_plot_pixel(&p, 1, -5, &px, &py), ONI_ESUCCESS);
    CHECK(near_color(&img, px, py, 1, bench_series_color(0)));
    free(img.rgb);

    /* On log axes, points <= 0 are skipped (x = 0 on a log x axis too), and
     * a plot of only such points is refused. */
    p.logx = 1;
    CHECK_RC(bench_plot_pixel(&p, 0, 5, &px, &py), ONI_EINVALARG);
    CHECK_RC(bench_plot_pixel(&p, 1, 5, &px, &py), ONI_ESUCCESS);
    p.logx = 0;
    p.logy = 1;
    CHECK_RC(bench_plot_pixel(&p, 1, -5, &px, &py), ONI_EINVALARG);
    double yneg[3] = {-1, 0, -3};
    s.y = yneg;
    CHECK_RC(bench_plot_png(path, &p), ONI_EINVALARG);
    p.nseries = 0;
    CHECK_RC(bench_plot_png(path, &p), ONI_EINVALARG);
    p.nseries = BENCH_MAX_SERIES + 1;
    CHECK_RC(bench_plot_png(path, &p), ONI_EINVALARG);
    CHECK_RC(bench_plot_png(path, NULL), ONI_EINVALARG);
    unlink(path);
}

/* A linear axis of data 0 .. 100 spans 0 .. 105: a 5% margin above, none
 * below zero (data that cannot be negative); ticks every 20 (1, 2 or 5
 * times a power of ten, about five of them), each a mark of 6 pixels
 * below the frame. Plot area (plot.c): x 100 .. W - 20, y H - 70 .. 44. */
TEST(plot_linear_axis_margins_and_ticks)
{
    double x[2] = {0, 100}, y[2] = {0, 100};
    struct bench_series s = {"line", x, y, 2, BENCH_LINES};
    struct bench_plot p = {"linear", "x", "y", 0, 0, &s, 1};
    int px, py;
    CHECK_RC(bench_plot_pixel(&p, 0, 0, &px, &py), ONI_ESUCCESS);
    CHECK_EQ(px, 100);
    CHECK_EQ(py, BENCH_PLOT_H - 70);
    CHECK_RC(bench_plot_pixel(&p, 100, 100, &px, &py), ONI_ESUCCESS);
    CHECK_EQ(px, lround(100 + 100.0 / 105 * (BENCH_PLOT_W - 120)));
    CHECK_EQ(py, lround(BENCH_PLOT_H - 70 - 100.0 / 105 * (BENCH_PLOT_H - 114)));
    char path[64];
    tmp_path(path, sizeof path);
    REQUIRE(bench_plot_png(path, &p) == ONI_ESUCCESS);
    struct image img = {0};
    REQUIRE(png_read(path, &img) == 0);
    for (int v = 10; v < 100; v += 10) {
        int tx, ty;
        CHECK_RC(bench_plot_pixel(&p, v, 0, &tx, &ty), ONI_ESUCCESS);
        int tick = pixel(&img, tx, ty + 4) == 0x202020;
        if (tick != (v % 20 == 0))
            UNIT_FAIL("x = %d: %s tick mark below the frame", v, tick ? "a" : "no");
    }
    free(img.rgb);
    unlink(path);
}

TEST(hist_png_bars)
{
    uint64_t v[1000];
    for (int i = 0; i < 1000; i++)
        v[i] = i < 900 ? 4000 + (uint64_t)(i % 10) : 40000; /* a tall bar and a short one */
    struct bench_hist h;
    REQUIRE(bench_hist_make(&h, v, 1000, 40, 1, 0, 0) == ONI_ESUCCESS);
    char path[64];
    tmp_path(path, sizeof path);
    REQUIRE(bench_hist_png(path, "4 KiB transfers", "time (ns)", &h) == ONI_ESUCCESS);
    struct image img = {0};
    REQUIRE(png_read(path, &img) == 0);
    /* A bar fills its column: sample a pixel just above the x axis under each
     * populated bin, and one well above the short bar. */
    uint32_t c = bench_series_color(0);
    int found_tall = 0, found_short = 0, top = BENCH_PLOT_H;
    for (int x = 0; x < img.w; x++) {
        if (pixel(&img, x, BENCH_PLOT_H - 75) != c)
            continue;
        if (pixel(&img, x, BENCH_PLOT_H / 2) == c)
            found_tall = 1; /* the 900-sample bar reaches mid-height */
        else
            found_short = 1;
        int y = BENCH_PLOT_H - 75;
        while (y > 0 && pixel(&img, x, y - 1) == c)
            y--;
        top = y < top ? y : top;
    }
    CHECK(found_tall && found_short);
    /* The tallest bar's top is the highest count on a count axis with a 5%
     * margin: 1 / 1.05 of the way up the plot area (rows H - 70 .. 44). */
    CHECK_EQ(top, lround(BENCH_PLOT_H - 70 - (BENCH_PLOT_H - 114) / 1.05));
    free(img.rgb);
    bench_hist_free(&h);
    CHECK_RC(bench_hist_png(path, "t", "x", &h), ONI_EINVALARG); /* freed: no counts */
    unlink(path);
}

TEST(report_lists_plots)
{
    char dir[] = "/tmp/onigpu-bench-XXXXXX";
    REQUIRE(mkdtemp(dir));
    int err;
    struct bench_report *r = bench_report_open(dir, "p", 0, NULL, NULL, &err);
    REQUIRE(r != NULL);
    double x[2] = {1, 2}, y[2] = {3, 4};
    struct bench_series s = {"a", x, y, 2, BENCH_LINES};
    struct bench_plot p = {"t", "x", "y", 0, 0, &s, 1};
    CHECK_RC(bench_report_plot(r, "lines", &p), ONI_ESUCCESS);
    CHECK_RC(bench_report_plot(r, "bad/tag", &p), ONI_EINVALARG);
    char png[512];
    snprintf(png, sizeof png, "%s", bench_report_path(r, "-lines.png"));
    char json[512];
    snprintf(json, sizeof json, "%s", bench_report_path(r, ".json"));
    bench_cell_int(r, "k", 1);
    CHECK_RC(bench_report_row(r, NULL), ONI_ESUCCESS);
    CHECK_RC(bench_report_close(r), ONI_ESUCCESS);
    struct image img = {0};
    CHECK_EQ(png_read(png, &img), 0);
    free(img.rgb);
    FILE *f = fopen(json, "r");
    REQUIRE(f != NULL);
    char text[4096];
    size_t n = fread(text, 1, sizeof text - 1, f);
    text[n] = 0;
    fclose(f);
    const char *base = strrchr(png, '/') + 1;
    char want[600];
    snprintf(want, sizeof want, "\"plots\": [\"%s\"]", base);
    CHECK(strstr(text, want) != NULL);
    unlink(png);
    unlink(json);
    snprintf(png, sizeof png, "%s", json);
    strcpy(png + strlen(png) - 5, ".csv");
    unlink(png);
    rmdir(dir);
}

TEST(plot_tiny_spread_terminates)
{
    /* Values far apart from zero with a spread below their resolution:
     * the axis must still be drawn, with a bounded number of ticks. */
    double x[2] = {1, 2}, y[2] = {1e9, 1e9 + 1e-7};
    struct bench_series s = {"flat", x, y, 2, BENCH_LINES};
    struct bench_plot p = {"tiny", "x", "y", 0, 0, &s, 1};
    char path[64];
    tmp_path(path, sizeof path);
    CHECK_RC(bench_plot_png(path, &p), ONI_ESUCCESS);
    struct image img = {0};
    CHECK_EQ(png_read(path, &img), 0);
    free(img.rgb);
    unlink(path);
}

/* Found by a review: the legend box was as wide as its longest name, so a
 * long name drew past the plot area to the canvas edge, and the search for
 * the emptiest corner read pixels outside the box's rows - past the end of
 * the canvas for a name of 10000 characters (ASan: heap-buffer-overflow).
 * The box now stays inside the plot area and names are cut to fit. */
TEST(plot_long_legend_stays_in_the_area)
{
    static char name[10001];
    memset(name, 'M', sizeof name - 1);
    double x[2] = {1, 2}, y[2] = {1, 2};
    struct bench_series s[2] = {{name, x, y, 2, BENCH_LINES}, {"short", x, y, 2, BENCH_POINTS}};
    struct bench_plot p = {"long legend", "x", "y", 0, 0, s, 2};
    char path[64];
    tmp_path(path, sizeof path);
    REQUIRE(bench_plot_png(path, &p) == ONI_ESUCCESS);
    struct image img = {0};
    REQUIRE(png_read(path, &img) == 0);
    /* the right margin (plot.c: the area ends 20 pixels from the edge),
     * beside the area, holds no ink */
    int ink = 0;
    for (int yy = 50; yy < BENCH_PLOT_H - 80; yy++)
        for (int xx = BENCH_PLOT_W - 18; xx < BENCH_PLOT_W; xx++)
            ink += pixel(&img, xx, yy) != 0xFFFFFF;
    CHECK_EQ(ink, 0);
    /* the legend is still drawn, and its box lies inside the plot area
     * (plot.c: AREA_X0 = 100 .. W - 20) on both sides: the first series'
     * colour key is a run of 20 pixels or more (its line has no such run),
     * the box's left edge is 6 pixels before the key and its top edge 10
     * rows above it; that top edge runs in ink to the box's right edge. (A
     * check of the right margin alone passed with a box too wide for the
     * area placed right-aligned: it spilled over the left margin.) */
    int kx = -1, ky = -1;
    for (int yy = 0; yy < BENCH_PLOT_H && kx < 0; yy++)
        for (int xx = 0, run = 0; xx < BENCH_PLOT_W; xx++) {
            run = pixel(&img, xx, yy) == bench_series_color(0) ? run + 1 : 0;
            if (run == 20) {
                kx = xx - 19, ky = yy;
                break;
            }
        }
    REQUIRE(kx >= 0 && ky >= 10);
    int bx0 = kx - 6, bx1 = bx0;
    while (bx1 + 1 < BENCH_PLOT_W && pixel(&img, bx1 + 1, ky - 10) == 0x202020)
        bx1++;
    if (bx0 <= 100 || bx1 >= BENCH_PLOT_W - 20 || bx1 - bx0 < 100)
        UNIT_FAIL("legend box x %d .. %d, want inside the area 100 .. %d", bx0, bx1, BENCH_PLOT_W - 20);
    free(img.rgb);
    unlink(path);
}

/* True if (x, y) is inside the plot area drawn by bench_plot_png (plot.c:
 * AREA_X0 = 100 .. W - 20, AREA_Y0 = 44 .. H - 70). */
static int in_area(int x, int y)
{
    return x >= 100 && x <= BENCH_PLOT_W - 20 && y >= 44 && y <= BENCH_PLOT_H - 70;
}

/* Found by a review: data near DBL_MAX made a log axis end at
 * pow(10, 309) = inf and a linear axis' max - min overflow; a point's
 * position was then (x - lo) / inf = 0 or inf / inf = NaN, so the largest
 * value was drawn at the bottom of the plot, or every point at one place.
 * Positions now come from the decades (log) or half-ranges (linear), which
 * stay finite for any finite data, and are clamped before they become ints. */
TEST(plot_extreme_values_land_in_the_area)
{
    char path[64];
    tmp_path(path, sizeof path);
    double x[3] = {1, 2, 3}, big[3] = {1, 1e300, DBL_MAX}, lin[3] = {-DBL_MAX, 0, DBL_MAX};
    double tiny[3] = {4.9e-324, 1, 10};
    const double *ys[3] = {big, lin, tiny};
    int logy[3] = {1, 0, 1};
    for (int c = 0; c < 3; c++) {
        struct bench_series s = {"extreme", x, ys[c], 3, BENCH_LINES_POINTS};
        struct bench_plot p = {"extreme", "x", "y", 0, logy[c], &s, 1};
        int py[3];
        for (int i = 0; i < 3; i++) {
            int px;
            CHECK_RC(bench_plot_pixel(&p, x[i], ys[c][i], &px, &py[i]), ONI_ESUCCESS);
            CHECK(in_area(px, py[i]));
        }
        CHECK(py[0] > py[1] && py[1] > py[2]); /* larger values higher up */
        CHECK_RC(bench_plot_png(path, &p), ONI_ESUCCESS);
        struct image img = {0};
        REQUIRE(png_read(path, &img) == 0);
        int px2, py2;
        CHECK_RC(bench_plot_pixel(&p, x[2], ys[c][2], &px2, &py2), ONI_ESUCCESS);
        CHECK(near_color(&img, px2, py2, 1, bench_series_color(0)));
        free(img.rgb);
    }
    /* the same on the x axis, with its extremes at the plot area's ends */
    double y[2] = {1, 2}, xs[2] = {-DBL_MAX, DBL_MAX};
    struct bench_series s = {"wide", xs, y, 2, BENCH_LINES};
    struct bench_plot p = {"wide", "x", "y", 0, 0, &s, 1};
    int ax, ay, bx, by;
    CHECK_RC(bench_plot_pixel(&p, xs[0], y[0], &ax, &ay), ONI_ESUCCESS);
    CHECK_RC(bench_plot_pixel(&p, xs[1], y[1], &bx, &by), ONI_ESUCCESS);
    CHECK(in_area(ax, ay) && in_area(bx, by) && bx - ax > 600);
    CHECK_RC(bench_plot_png(path, &p), ONI_ESUCCESS);
    unlink(path);
}

/* Degenerate series: NaN/inf points and non-positive values on a log axis
 * are skipped, an empty series is allowed beside others, one point and
 * all-equal values give a plot with the point inside the area. */
TEST(plot_degenerate_series)
{
    char path[64];
    tmp_path(path, sizeof path);
    double x[4] = {1, NAN, 3, INFINITY}, y[4] = {5, 6, -7, 8};
    double one_x = 5, one_y = 5, eq_x[3] = {2, 2, 2}, eq_y[3] = {1e-310, 1e-310, 1e-310};
    struct bench_series s[4] = {
        {"nan", x, y, 4, BENCH_LINES_POINTS},
        {"empty", NULL, NULL, 0, BENCH_LINES},
        {"one", &one_x, &one_y, 1, BENCH_POINTS},
        {"equal", eq_x, eq_y, 3, BENCH_LINES_POINTS},
    };
    for (int logy = 0; logy < 2; logy++) {
        struct bench_plot p = {"degenerate", "x", "y", 0, logy, s, 4};
        CHECK_RC(bench_plot_png(path, &p), ONI_ESUCCESS);
        int px, py;
        CHECK_RC(bench_plot_pixel(&p, 2, 1e-310, &px, &py), ONI_ESUCCESS);
        CHECK(in_area(px, py));
        CHECK_RC(bench_plot_pixel(&p, 5, 5, &px, &py), ONI_ESUCCESS);
        CHECK(in_area(px, py));
        CHECK_RC(bench_plot_pixel(&p, NAN, 5, &px, &py), ONI_EINVALARG);
        CHECK_RC(bench_plot_pixel(&p, 3, -7, &px, &py), logy ? ONI_EINVALARG : ONI_ESUCCESS);
    }
    /* only the equal series: a zero-width range on both axes */
    struct bench_plot q = {"equal", "x", "y", 0, 0, &s[3], 1};
    int px, py;
    CHECK_RC(bench_plot_pixel(&q, 2, 1e-310, &px, &py), ONI_ESUCCESS);
    CHECK(in_area(px, py));
    CHECK_RC(bench_plot_png(path, &q), ONI_ESUCCESS);
    /* a histogram with a non-finite range is refused, not drawn */
    uint64_t cnt[2] = {1, 2};
    struct bench_hist h = {2, 0, 0, NAN, cnt, 0, 0};
    CHECK_RC(bench_hist_png(path, "t", "x", &h), ONI_EINVALARG);
    unlink(path);
}

struct box {
    int x0, y0, x1, y1;
};

/* The smallest box around the dark pixels inside b (x0 = -1: none). */
static struct box ink_box(const struct image *img, struct box b)
{
    struct box r = {-1, -1, -1, -1};
    for (int x = b.x0; x <= b.x1; x++)
        for (int y = b.y0; y <= b.y1; y++)
            if (pixel(img, x, y) == 0x202020) {
                if (r.x0 < 0)
                    r = (struct box){x, y, x, y};
                r.x1 = x;
                r.y0 = y < r.y0 ? y : r.y0;
                r.y1 = y > r.y1 ? y : r.y1;
            }
    return r;
}

/* Found by a review: text was drawn byte by byte, so "µs" (3 bytes in
 * UTF-8) came out as two boxes and an s, and its width was counted as 3
 * characters. A multi-byte character is now one glyph (µ has its own). */
TEST(plot_utf8_label_is_one_glyph_per_character)
{
    double x[2] = {1, 2}, y[2] = {1, 2};
    struct bench_series s = {"a", x, y, 2, BENCH_LINES};
    const char *labels[2] = {"time (us)", "time (\xc2\xb5s)"};
    int first[2], last[2], box_rows[2];
    char path[64];
    tmp_path(path, sizeof path);
    for (int k = 0; k < 2; k++) {
        struct bench_plot p = {"t", labels[k], "y", 0, 0, &s, 1};
        REQUIRE(bench_plot_png(path, &p) == ONI_ESUCCESS);
        struct image img = {0};
        REQUIRE(png_read(path, &img) == 0);
        struct box ink = ink_box(&img, (struct box){0, BENCH_PLOT_H - 30, BENCH_PLOT_W - 1, BENCH_PLOT_H - 1});
        first[k] = ink.x0;
        last[k] = ink.x1;
        /* the 'u' or 'µ' is the 7th glyph: 12 pixels per glyph at scale 2;
         * a box would have ink in its top row */
        int gx = first[k] + 6 * 12, top = 0;
        for (int xx = gx; xx < gx + 10; xx++)
            top += pixel(&img, xx, BENCH_PLOT_H - 24) == 0x202020;
        box_rows[k] = top;
        free(img.rgb);
    }
    CHECK(first[0] >= 0 && first[1] >= 0);
    CHECK_EQ(first[1], first[0]);
    CHECK_EQ(last[1], last[0]);
    CHECK_EQ(box_rows[0], 0);
    CHECK_EQ(box_rows[1], 0);
    unlink(path);
}

/* The y label reads bottom to top (rotated a quarter turn counter-clockwise)
 * in the left margin, centred on the plot area's rows (44 .. H - 70). */
TEST(plot_y_label_runs_upwards_centred)
{
    double x[2] = {1, 2}, y[2] = {1, 2};
    struct bench_series s = {"a", x, y, 2, BENCH_LINES};
    struct bench_plot p = {"t", "x", "round trip (us)", 0, 0, &s, 1};
    char path[64];
    tmp_path(path, sizeof path);
    REQUIRE(bench_plot_png(path, &p) == ONI_ESUCCESS);
    struct image img = {0};
    REQUIRE(png_read(path, &img) == 0);
    /* columns 0 .. 24: the label alone (the tick labels end 10 pixels left of x = 100) */
    struct box b = ink_box(&img, (struct box){0, 0, 24, BENCH_PLOT_H - 1});
    REQUIRE(b.x0 >= 0);
    /* 15 glyphs of 6 x 2 pixels along the rows, 7 x 2 pixels across */
    CHECK(b.x1 - b.x0 < 14 && b.y1 - b.y0 > 150);
    int mid = (b.y0 + b.y1) / 2, want = (44 + BENCH_PLOT_H - 70) / 2;
    if (abs(mid - want) > 3)
        UNIT_FAIL("y label rows %d .. %d, centred on %d, want about %d", b.y0, b.y1, mid, want);
    free(img.rgb);
    unlink(path);
}
