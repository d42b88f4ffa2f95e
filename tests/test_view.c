/* test_view.c - the live view (src/view, docs/view.md): the lock-free ring
 * (one producer, one consumer: nothing lost that is not counted, order
 * kept, the producer never waits), the control body and address parsers,
 * the HTTP server's answers (pages, 4xx for bad requests, the token, the
 * event stream), and that a client which stops reading costs the producer
 * nothing and the server's stop no more than its linger. The browser test
 * is tests/view/browser.mjs (CTest view_browser). */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>
#include <unistd.h>
#include "oni.h"
#include "oni/util/clock.h"
#include "unit.h"
#include "view/client.h"
#include "view/ring.h"
#include "view/view.h"
#include "view/view_int.h"
#include "loop/superframe.h"

/* --- the ring ---------------------------------------------------------------- */

TEST(ring_full_drops_and_counts_then_takes_in_order)
{
    struct view_ring r;
    REQUIRE(view_ring_init(&r, 5, sizeof(uint64_t)) == 0);
    CHECK_EQ(r.cap, 8); /* rounded up to a power of two */
    for (uint64_t i = 0; i < 8; i++)
        CHECK_EQ(view_ring_put(&r, &i), 0);
    uint64_t x = 99;
    CHECK_EQ(view_ring_put(&r, &x), -1);
    CHECK_EQ(view_ring_put(&r, &x), -1);
    CHECK_EQ(atomic_load(&r.lost), 2);
    uint64_t out[16];
    CHECK_EQ(view_ring_take(&r, out, 3), 3);
    for (uint64_t i = 0; i < 3; i++)
        CHECK_EQ(out[i], i);
    for (uint64_t i = 100; i < 103; i++) /* wraps */
        CHECK_EQ(view_ring_put(&r, &i), 0);
    CHECK_EQ(view_ring_take(&r, out, 16), 8);
    static const uint64_t want[8] = {3, 4, 5, 6, 7, 100, 101, 102};
    for (int i = 0; i < 8; i++)
        CHECK_EQ(out[i], want[i]);
    CHECK_EQ(view_ring_take(&r, out, 16), 0);
    view_ring_free(&r);
}

struct spsc {
    struct view_ring r;
    uint64_t n;
    _Atomic int done;
};

static void *producer(void *p)
{
    struct spsc *s = p;
    for (uint64_t i = 0; i < s->n; i++) {
        uint64_t rec[2] = {i, ~i};
        view_ring_put(&s->r, rec);
    }
    atomic_store(&s->done, 1);
    return NULL;
}

/* Two threads: every record taken is whole (its two words agree), in
 * order, each at most once; taken + lost = put. Under TSan (threads label)
 * this is also the check of the memory order. */
TEST(ring_two_threads_whole_records_in_order)
{
    struct spsc s = {.n = 200000};
    REQUIRE(view_ring_init(&s.r, 256, 2 * sizeof(uint64_t)) == 0);
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, producer, &s) == 0);
    uint64_t got = 0, last = 0, torn = 0, disorder = 0, rec[64][2];
    int first = 1;
    for (;;) {
        int done = atomic_load(&s.done);
        size_t n = view_ring_take(&s.r, rec, 64);
        for (size_t i = 0; i < n; i++) {
            torn += rec[i][1] != ~rec[i][0];
            disorder += !first && rec[i][0] <= last;
            last = rec[i][0];
            first = 0;
        }
        got += n;
        if (!n && done)
            break;
    }
    pthread_join(t, NULL);
    CHECK_EQ(torn, 0);
    CHECK_EQ(disorder, 0);
    CHECK_EQ(got + atomic_load(&s.r.lost), s.n);
    view_ring_free(&s.r);
}

/* --- parsers ------------------------------------------------------------------- */

static int parse(const char *s, struct view_control *c, char *why)
{
    return view_parse_control(s, strlen(s), VIEW_PROBE_CHAN, c, why, 200);
}

TEST(control_accepts_threshold_and_channels)
{
    struct view_control c;
    char why[200] = "";
    CHECK_EQ(parse("k=4.5", &c, why), 0);
    CHECK(c.have_k && !c.have_chans && fabs(c.k - 4.5) < 1e-12);
    CHECK_EQ(parse("channels=0,383,17", &c, why), 0);
    CHECK(c.have_chans && !c.have_k);
    CHECK_EQ(c.nchan, 3);
    CHECK(c.chan[0] == 0 && c.chan[1] == 383 && c.chan[2] == 17);
    CHECK_EQ(parse("channels=5&k=20", &c, why), 0);
    CHECK(c.have_k && c.have_chans && c.nchan == 1 && c.k == 20);
}

TEST(control_refuses_what_it_does_not_know)
{
    static const struct {
        const char *body, *says;
    } bad[] = {
        {"", "empty"},
        {"k", "key=value"},
        {"k=1", "2..20"},
        {"k=21", "2..20"},
        {"k=-5", "2..20"},
        {"k=5e1", "2..20"},
        {"k=.5", "2..20"},
        {"k=5.", "2..20"},
        {"k=4&k=5", "twice"},
        {"k=5&", "trailing"},
        {"channels=", "no channel"},
        {"channels=384", "0..383"},
        {"channels=1,,2", "no channel"},
        {"channels=1.5", "0..383"},
        {"channels=1,2,1", "twice"},
        {"channels=0,1,2,3,4,5,6", "at most"},
        {"colour=red", "unknown key"},
        {"K=5", "unknown key"},
        {"k=5;rm", "2..20"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct view_control c;
        char why[200] = "";
        int rc = parse(bad[i].body, &c, why);
        if (rc != ONI_EINVALARG || !strstr(why, bad[i].says))
            UNIT_FAIL("'%s': rc %d, why '%s' (want ONI_EINVALARG saying '%s')", bad[i].body, rc, why, bad[i].says);
    }
}

/* The selection word holds six channels of any of the four probes, in
 * order, and fewer; the parser takes channels of the probes there are. */
TEST(selection_spans_every_probe)
{
    const uint16_t ch[VIEW_TRACES] = {1535, 0, 384, 767, 1152, 5};
    uint16_t got[VIEW_TRACES] = {0};
    CHECK_EQ(view_sel_unpack(view_sel_pack(ch, VIEW_TRACES), got), VIEW_TRACES);
    for (int i = 0; i < VIEW_TRACES; i++)
        CHECK_EQ(got[i], ch[i]);
    CHECK_EQ(view_sel_unpack(view_sel_pack(ch, 2), got), 2);
    CHECK(got[0] == 1535 && got[1] == 0);
    CHECK_EQ(view_sel_unpack(view_sel_pack(ch, 0), got), 0);
    struct view_control c;
    char why[200] = "";
    CHECK_EQ(view_parse_control("channels=767,0", 14, 2 * VIEW_PROBE_CHAN, &c, why, sizeof why), 0);
    CHECK(c.nchan == 2 && c.chan[0] == 767);
    CHECK_EQ(view_parse_control("channels=768", 12, 2 * VIEW_PROBE_CHAN, &c, why, sizeof why), ONI_EINVALARG);
    CHECK(strstr(why, "0..767") != NULL);
}

TEST(address_parses_host_and_port)
{
    struct view_config c = {0};
    char why[200];
    CHECK_EQ(view_parse_addr("8080", &c, why, sizeof why), 0);
    CHECK(!strcmp(c.host, "127.0.0.1") && c.port == 8080);
    CHECK_EQ(view_parse_addr("0.0.0.0:0", &c, why, sizeof why), 0);
    CHECK(!strcmp(c.host, "0.0.0.0") && c.port == 0);
    CHECK_EQ(view_parse_addr("localhost:9", &c, why, sizeof why), 0);
    CHECK(!strcmp(c.host, "127.0.0.1") && c.port == 9);
    static const char *const bad[] = {"", ":80", "myhost:80", "70000", "80a", "-1", "1.2.3:80", "1.2.3.4:"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        if (view_parse_addr(bad[i], &c, why, sizeof why) != ONI_EINVALARG)
            UNIT_FAIL("'%s' was taken", bad[i]);
}

/* --- the server ------------------------------------------------------------------ */

static struct view *open_probes(const char *token, uint32_t probes, char *why)
{
    struct view_config c = {.port = 0, .token = token, .web_dir = ONIGPU_WEB_DIR, .detect_stage = 2,
                            .probes = probes};
    snprintf(c.host, sizeof c.host, "127.0.0.1");
    struct view *v = NULL;
    int rc = view_open(&c, &v, why, 400);
    return rc ? NULL : v;
}

static struct view *open_view(const char *token, char *why)
{
    return open_probes(token, 1, why);
}

/* The page's files must be there (tools/deps.sh: npm ci in web/view). */
#define OPEN_OR_SKIP(v, token)                                                            \
    char why_[400] = "";                                                                 \
    struct view *v = open_view(token, why_);                                             \
    if (!v) {                                                                            \
        if (strstr(why_, "node_modules") || strstr(why_, "libmicrohttpd"))               \
            SKIP("%s", why_);                                                            \
        UNIT_FAIL("view_open: %s", why_);                                                \
        return;                                                                          \
    }

static int req(struct view *v, const char *text, char *buf, size_t cap)
{
    return view_http("127.0.0.1", view_port(v), text, strlen(text), buf, cap, 3000);
}

static char resp[1 << 20];

TEST(server_pages_and_errors)
{
    OPEN_OR_SKIP(v, NULL);
    CHECK_EQ(req(v, "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n", resp, sizeof resp), 200);
    CHECK(strstr(resp, "<title>onigpu live view</title>") != NULL);
    CHECK_EQ(req(v, "GET /uPlot.iife.min.js HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n", resp, sizeof resp),
             200);
    CHECK(strstr(resp, "text/javascript") != NULL);
    CHECK_EQ(req(v, "GET /../../etc/passwd HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n", resp, sizeof resp),
             404);
    CHECK_EQ(req(v, "GET /view.js.bak HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n", resp, sizeof resp), 404);
    CHECK_EQ(req(v, "DELETE / HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n", resp, sizeof resp), 405);
    CHECK_EQ(req(v, "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nContent-Length: 3\r\n\r\nabc", resp,
                 sizeof resp), 400);
    /* no request line libmicrohttpd can parse: it answers 4xx or closes */
    int st = req(v, "NONSENSE\r\n\r\n", resp, sizeof resp);
    CHECK(st == -1 || st / 100 == 4);
    /* another site's name for this machine (DNS rebinding): refused; loopback's names taken */
    CHECK_EQ(req(v, "GET / HTTP/1.1\r\nHost: evil.example:80\r\nConnection: close\r\n\r\n", resp, sizeof resp), 403);
    CHECK(strstr(resp, "Host header") != NULL);
    CHECK_EQ(req(v, "GET /events HTTP/1.1\r\nHost: 127.0.0.1.evil.example\r\nConnection: close\r\n\r\n", resp,
                 sizeof resp), 403);
    CHECK_EQ(req(v, "GET / HTTP/1.1\r\nHost: localhost:9000\r\nConnection: close\r\n\r\n", resp, sizeof resp), 200);
    CHECK_EQ(req(v, "GET / HTTP/1.1\r\nHost: [::1]:9000\r\nConnection: close\r\n\r\n", resp, sizeof resp), 200);
    /* read-only: no control at all */
    CHECK_EQ(req(v, "POST /control HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nContent-Length: 3\r\n\r\nk=5", resp,
                 sizeof resp), 403);
    CHECK(strstr(resp, "read-only") != NULL);
    view_close(v, 0);
}

static int control(struct view *v, const char *token, const char *body)
{
    char text[2048];
    int n = snprintf(text, sizeof text,
                     "POST /control HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n%s%s%sContent-Length: %zu\r\n\r\n%s",
                     token ? "X-Onigpu-Token: " : "", token ? token : "", token ? "\r\n" : "", strlen(body), body);
    return view_http("127.0.0.1", view_port(v), text, (size_t)n, resp, sizeof resp, 3000);
}

TEST(server_control_needs_the_token_and_a_good_body)
{
    const char *tok = "s3cret-token-1";
    OPEN_OR_SKIP(v, tok);
    CHECK_EQ(control(v, NULL, "channels=1,2"), 403);
    CHECK_EQ(control(v, "s3cret-token-2", "channels=1,2"), 403);
    CHECK_EQ(control(v, "s3cret-token-", "channels=1,2"), 403);
    CHECK_EQ(control(v, tok, "channels=1,2,400"), 400);
    CHECK(strstr(resp, "0..383") != NULL);
    char big[600];
    memset(big, '1', sizeof big - 1);
    big[sizeof big - 1] = 0;
    memcpy(big, "k=", 2);
    CHECK_EQ(control(v, tok, big), 413);
    /* no loop runs: the threshold cannot change, and nothing else does */
    CHECK_EQ(control(v, tok, "k=6&channels=7"), 409);
    CHECK_EQ(control(v, tok, "channels=7,8"), 200);
    CHECK(strstr(resp, "\"ok\":true") != NULL);
    view_close(v, 0);
}

TEST(token_shorter_than_8_is_refused)
{
    char why[400] = "";
    CHECK(open_view("short", why) == NULL);
    CHECK(strstr(why, "8 to 127") != NULL);
}

TEST(missing_page_is_refused_before_anything_runs)
{
    struct view_config c = {.web_dir = "/nonexistent/web", .detect_stage = -1};
    struct view *v = NULL;
    char why[400] = "";
    CHECK_RC(view_open(&c, &v, why, sizeof why), ONI_EINVALARG);
    CHECK(v == NULL);
    CHECK(strstr(why, "/nonexistent/web/index.html") != NULL);
}

/* v's tap, after telling v a cpu run of blocks of 30 frames started. */
static const struct loop_run_tap *start(struct view *v, struct loop_run_result *res)
{
    const struct loop_run_tap *tap = view_tap(v, NULL);
    memset(res, 0, sizeof *res);
    res->block = 30, res->fs_hz = 30000;
    view_started(v, "cpu", res);
    return tap;
}

static struct loop_ephys_out out_with_spikes(uint64_t t, uint32_t n, int stim)
{
    struct loop_ephys_out o;
    memset(&o, 0, sizeof o);
    o.nspikes = n;
    for (uint32_t i = 0; i < n; i++)
        o.spikes[i] = (struct loop_spike){t + i, i % 384, i, ONIGPU_UNIT_NONE, 0};
    o.stim = (uint32_t)stim;
    o.t_stim = t;
    return o;
}

/* The stream: a hello first, then ticks carrying what the tap was given,
 * then the end, and the reader sees the stream end. */
TEST(stream_carries_spikes_stimuli_and_the_end)
{
    OPEN_OR_SKIP(v, NULL);
    struct loop_run_result res;
    const struct loop_run_tap *tap = start(v, &res);
    res.ran = 1;
    struct view_reader r = {.port = view_port(v)};
    snprintf(r.host, sizeof r.host, "127.0.0.1");
    REQUIRE(view_reader_start(&r) == 0);
    for (int i = 0; i < 20; i++) {
        struct loop_ephys_out o = out_with_spikes(1000000ull * (uint64_t)(i + 1), 3, i % 4 == 0);
        tap->detect(tap->arg, &o, o.stim ? 5 : 0, 0);
        tap->echo(tap->arg, (uint64_t)i, 500.0 + i);
        struct timespec ts = {0, 20000000};
        nanosleep(&ts, NULL);
    }
    uint64_t until = oni_ms_from_now(5000);
    while (atomic_load(&r.ticks) < 3 && oni_ms_left(until))
        usleep(10000);
    CHECK(atomic_load(&r.ticks) >= 3);
    CHECK_EQ(r.status, 200);
    view_end(v, &res, "/tmp/results-here");
    until = oni_ms_from_now(5000);
    while (!atomic_load(&r.ended) && oni_ms_left(until))
        usleep(10000);
    CHECK(atomic_load(&r.ended));
    view_close(v, 2000);
    view_reader_join(&r);
}

/* What a tick holds, read with the one-shot client: the spikes and the
 * stimulus given to the tap, and the latency's percentiles. */
TEST(tick_holds_the_taps_data)
{
    OPEN_OR_SKIP(v, NULL);
    struct loop_run_result res;
    const struct loop_run_tap *tap = start(v, &res);
    struct loop_ephys_out o = out_with_spikes(250000000ull, 2, 1);
    tap->detect(tap->arg, &o, 3, 0);
    for (int i = 1; i <= 1000; i++)
        tap->echo(tap->arg, (uint64_t)i, (double)i); /* 1..1000 us: p50 500, p99 990, p99.9 999 */
    usleep(150000);
    view_end(v, &res, NULL);
    /* the stream is over: a new client gets the hello and every event still queued */
    int st = req(v, "GET /events HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", resp, sizeof resp);
    CHECK_EQ(st, 200);
    CHECK(strstr(resp, "event: hello") != NULL);
    CHECK(strstr(resp, "\"backend\":\"cpu\"") != NULL);
    CHECK(strstr(resp, "\"spikes\":[[0,0],[4e-09,1]]") != NULL);
    CHECK(strstr(resp, "\"stims\":[0]") != NULL);
    /* the last latency summary: within half a bin (0.05 %) of 500, 990, 999; the maximum exact */
    const char *lat = NULL;
    for (const char *p = resp; (p = strstr(p, "\"lat\":{\"n\":1000,")) != NULL; p++)
        lat = p;
    REQUIRE(lat != NULL);
    double p50 = 0, p99 = 0, p999 = 0, max = 0;
    CHECK_EQ(sscanf(lat, "\"lat\":{\"n\":1000,\"p50\":%lf,\"p99\":%lf,\"p999\":%lf,\"max\":%lf", &p50, &p99,
                    &p999, &max), 4);
    if (fabs(p50 / 500 - 1) > 5e-4 || fabs(p99 / 990 - 1) > 5e-4 || fabs(p999 / 999 - 1) > 5e-4 || max != 1000)
        UNIT_FAIL("p50 %g p99 %g p99.9 %g max %g (want 500, 990, 999 within 0.05 %%, 1000)", p50, p99, p999, max);
    CHECK(strstr(resp, "event: end") != NULL);
    view_close(v, 0);
}

/* The traces of a probe block: a constant 500 above the ADC's midpoint on
 * every channel gives raw points of 500, and through the detector's
 * band-pass (its high-pass rejects DC) filtered points near 0 once the
 * filter settled. */
TEST(traces_raw_and_filtered)
{
    OPEN_OR_SKIP(v, NULL);
    REQUIRE(view_probe_layout(v, LOOP_NP2E_PAYLOAD) == 0);
    struct loop_run_result res;
    const struct loop_run_tap *tap = start(v, &res);
    const struct loop_ephys_layout *lay = &v->lay;
    enum { FRAMES = 300 };
    uint8_t *blk = calloc(FRAMES, lay->stride);
    REQUIRE(blk);
    uint64_t t = 1000;
    for (int b = 0; b < 5; b++) { /* 50 ms */
        for (int f = 0; f < FRAMES; f++, t += 8333) {
            uint8_t *fr = blk + (size_t)f * lay->stride;
            memcpy(fr + lay->time_off, &t, 8);
            for (uint32_t c = 0; c < lay->nchan; c++) {
                uint16_t x = 2048 + 500;
                memcpy(fr + lay->off[c], &x, 2);
            }
        }
        tap->block(tap->arg, blk, (size_t)FRAMES * lay->stride);
    }
    free(blk);
    usleep(150000);
    view_end(v, &res, NULL);
    int st = req(v, "GET /events HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", resp, sizeof resp);
    CHECK_EQ(st, 200);
    /* the last point of channel 0: [0,lo,hi,flo,fhi] */
    const char *last = NULL;
    for (const char *p = resp; (p = strstr(p, "[0,500,500,")) != NULL; p++)
        last = p;
    REQUIRE(last != NULL);
    int flo = 99, fhi = 99;
    CHECK_EQ(sscanf(last, "[0,500,500,%d,%d]", &flo, &fhi), 2);
    if (abs(flo) > 2 || abs(fhi) > 2)
        UNIT_FAIL("filtered DC after 50 ms: %d..%d (want about 0)", flo, fhi);
    CHECK(strstr(resp, "\"filter\":\"300-6000 Hz band-pass\"") != NULL);
    view_close(v, 0);
}

/* Spikes a sorting stage labelled: [t, channel, unit] in the tick (an
 * unlabelled one stays [t, channel]), and "units" lists the busiest units
 * over the last second with their rate and channel, busiest first. */
TEST(units_in_the_tick)
{
    OPEN_OR_SKIP(v, NULL);
    struct loop_run_result res;
    const struct loop_run_tap *tap = start(v, &res);
    struct loop_ephys_out o;
    memset(&o, 0, sizeof o);
    o.nspikes = 6; /* unit 7 thrice on channel 40, unit 3 twice on 389, one unlabelled on 5 */
    static const uint32_t unit[6] = {7, 3, 7, 3, 7, ONIGPU_UNIT_NONE};
    static const uint32_t chan[6] = {40, 389, 40, 389, 40, 5};
    for (uint32_t i = 0; i < 6; i++)
        o.spikes[i] = (struct loop_spike){1000 + i, chan[i], i, unit[i], 0};
    tap->detect(tap->arg, &o, 0, 0);
    usleep(150000);
    view_end(v, &res, NULL);
    int st = req(v, "GET /events HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", resp, sizeof resp);
    CHECK_EQ(st, 200);
    CHECK(strstr(resp, "[0,40,7],") != NULL);
    CHECK(strstr(resp, ",389,3]") != NULL);
    CHECK(strstr(resp, ",5]]") != NULL);
    /* the rates over the ticks so far (which tick took them is the pump's timing): 3 : 2 */
    const char *u = strstr(resp, "\"units\":[[");
    REQUIRE(u != NULL);
    double r7 = 0, r3 = 0;
    CHECK_EQ(sscanf(u, "\"units\":[[7,%lf,40],[3,%lf,389]]", &r7, &r3), 2);
    if (!(r7 > 0 && fabs(r7 / r3 - 1.5) < 1e-2))
        UNIT_FAIL("unit rates %g and %g (want 3 : 2)", r7, r3);
    view_close(v, 0);
}

/* Two probes: the hello draws both (ProbeB's channels from 384), a trace of
 * channel 384 + c comes from the second probe's frame in the block (500 on
 * probe A, 700 on probe B), and a channel past the second probe is refused. */
TEST(two_probes_drawn_and_traced)
{
    char why_[400] = "";
    struct view *v = open_probes("s3cret-token-1", 2, why_);
    if (!v) {
        if (strstr(why_, "node_modules") || strstr(why_, "libmicrohttpd"))
            SKIP("%s", why_);
        UNIT_FAIL("view_open: %s", why_);
        return;
    }
    char why5[400] = "";
    CHECK(open_probes(NULL, 5, why5) == NULL && strstr(why5, "1 to 4") != NULL);
    REQUIRE(view_probe_layout(v, LOOP_NP2E_PAYLOAD) == 0);
    CHECK_EQ(v->lay.nchan, 2 * VIEW_PROBE_CHAN);
    struct loop_run_result res;
    const struct loop_run_tap *tap = start(v, &res);
    CHECK_EQ(control(v, "s3cret-token-1", "channels=768"), 400);
    CHECK(strstr(resp, "0..767") != NULL);
    CHECK_EQ(control(v, "s3cret-token-1", "channels=3,389"), 200);
    const struct loop_ephys_layout *lay = &v->lay;
    enum { FRAMES = 300 };
    uint8_t *blk = calloc(FRAMES, lay->stride);
    REQUIRE(blk);
    uint64_t t = 1000;
    for (int f = 0; f < FRAMES; f++, t += 8333) {
        uint8_t *fr = blk + (size_t)f * lay->stride;
        memcpy(fr + lay->time_off, &t, 8);
        for (uint32_t c = 0; c < lay->nchan; c++) {
            uint16_t x = (uint16_t)(c < VIEW_PROBE_CHAN ? 2048 + 500 : 2048 + 700);
            memcpy(fr + lay->off[c], &x, 2);
        }
    }
    tap->block(tap->arg, blk, (size_t)FRAMES * lay->stride);
    free(blk);
    usleep(150000);
    view_end(v, &res, NULL);
    int st = req(v, "GET /events HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", resp, sizeof resp);
    CHECK_EQ(st, 200);
    CHECK(strstr(resp, "\"name\":\"ProbeA\",\"first\":0,") != NULL);
    CHECK(strstr(resp, "\"name\":\"ProbeB\",\"first\":384,") != NULL);
    CHECK(strstr(resp, "\"name\":\"ProbeC\"") == NULL);
    CHECK(strstr(resp, "[3,500,500,") != NULL);
    CHECK(strstr(resp, "[389,700,700,") != NULL);
    view_close(v, 0);
}

/* The loop's side never waits on the view: a client that connected and
 * reads nothing (its sends stuck), and every lock of the view held by
 * another thread (the stream's queue, the run's status, the loop's), and
 * still every tap call returns (were one to take a lock, this test would
 * hang until CTest's timeout); what the rings could not take is counted as
 * lost, not waited for. The server then stops though the client is stuck. */
TEST(tap_never_waits_on_the_view)
{
    OPEN_OR_SKIP(v, NULL);
    REQUIRE(view_probe_layout(v, LOOP_NP2E_PAYLOAD) == 0);
    struct loop_run_result res;
    const struct loop_run_tap *tap = start(v, &res);
    struct view_reader r = {.port = view_port(v), .stall = 1};
    snprintf(r.host, sizeof r.host, "127.0.0.1");
    REQUIRE(view_reader_start(&r) == 0);
    uint64_t until = oni_ms_from_now(5000);
    while (view_clients(v) < 1 && oni_ms_left(until))
        usleep(10000);
    CHECK_EQ(view_clients(v), 1);
    uint8_t *blk = calloc(30, v->lay.stride);
    REQUIRE(blk);
    pthread_mutex_lock(&v->q.mu);
    pthread_mutex_lock(&v->smu);
    pthread_mutex_lock(&v->lmu);
    uint64_t t = 1;
    for (int i = 0; i < 2000; i++, t += 30000) {
        struct loop_ephys_out o = out_with_spikes(t, LOOP_EPHYS_MAXSPIKES, 1);
        tap->detect(tap->arg, &o, 1, 0);
        tap->echo(tap->arg, (uint64_t)i, 800.0);
        tap->block(tap->arg, blk, 30u * v->lay.stride);
    }
    pthread_mutex_unlock(&v->lmu);
    pthread_mutex_unlock(&v->smu);
    pthread_mutex_unlock(&v->q.mu);
    free(blk);
    /* 2000 x (LOOP_EPHYS_MAXSPIKES spikes + a stimulus) into a ring of
     * VIEW_EBUF, drained at most once meanwhile (the pump then waits for the
     * queue's lock) */
    CHECK(view_lost(v) > 0);
    view_end(v, &res, NULL);
    view_close(v, 300);
    view_reader_join(&r);
}

TEST(too_many_streams_get_503)
{
    OPEN_OR_SKIP(v, NULL);
    struct view_reader r[VIEW_MAX_CLIENTS];
    memset(r, 0, sizeof r);
    for (int i = 0; i < VIEW_MAX_CLIENTS; i++) {
        r[i].port = view_port(v);
        snprintf(r[i].host, sizeof r[i].host, "127.0.0.1");
        REQUIRE(view_reader_start(&r[i]) == 0);
    }
    uint64_t until = oni_ms_from_now(5000);
    while (view_clients(v) < VIEW_MAX_CLIENTS && oni_ms_left(until))
        usleep(10000);
    CHECK_EQ(view_clients(v), VIEW_MAX_CLIENTS);
    CHECK_EQ(req(v, "GET /events HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", resp, sizeof resp), 503);
    view_close(v, 0);
    for (int i = 0; i < VIEW_MAX_CLIENTS; i++)
        view_reader_join(&r[i]);
}
