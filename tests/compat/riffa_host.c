/* riffa_host.c - oni-repl's traffic (upstream api/liboni/oni-repl/main.c,
 * cited as "repl:N"), through <oni.h> and <onix.h> only, against the
 * riffa-rules driver (riffa.c), which aborts or refuses where upstream's riffa
 * driver would crash, hang or refuse. Every frame is checked: a device of the
 * table, its size, its own counter one more than the last in this run, its
 * bytes, oni_read_frame's answer as upstream's (sizeof(oni_frame_t) + size +
 * size % 4, upstream oni.c:668-704).
 *
 * The session, in oni-repl's order:
 *  1. create, init (repl:542, 563), the device table (repl:399, 407), the
 *     frame sizes (repl:639, 642);
 *  2. a run at the DEFAULT block read size, as a program that never sets it
 *     (the riffa driver then has to have been told it at init);
 *  3. BLOCKREADSIZE / BLOCKWRITESIZE 2048 (repl:23-24, 647, 658), the
 *     clocks (repl:668, 673), the reader started before the hardware
 *     (repl:292), RUNNING read from the hardware (repl:692), RESETACQCOUNTER
 *     = 2 (repl:700) and RUNNING read again, which must say 1 (repl:706);
 *  4. frames, a register write and read, a write frame, RESETACQCOUNTER = 1
 *     ('a', repl:955);
 *  5. 'p' twice: stop (reader joined, RUNNING = 0, repl:746-756), start
 *     (reader, RUNNING = 1, repl:758-767), frames;
 *  6. 'x': stop, RESET = 1 (repl:770), the table again, then a run at the
 *     default block size again (the reset brought it back);
 *  7. 'q': stop, RUNNING = 0, destroy (repl:963-983).
 *
 *   riffa_host DRIVER FRAMES */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <oni.h>
#include <onix.h>

static oni_ctx ctx;
static oni_device_t *devices;
static oni_size_t num_devs;
static int failures;
static long want_frames;

struct reader {
    pthread_t tid;
    long frames;
    int rc;
};
static unsigned long long last_count[3];
static int seen[3];

static void fail(const char *what, int rc)
{
    fprintf(stderr, "riffa_host: %s: %d (%s)\n", what, rc, rc <= 0 ? oni_error_str(rc) : "");
    failures++;
}

static void must(int rc, const char *what)
{
    if (rc < 0)
        fail(what, rc);
}

static void update_dev_table(void)
{
    size_t n = sizeof num_devs;
    must(oni_get_opt(ctx, ONI_OPT_NUMDEVICES, &num_devs, &n), "NUMDEVICES");
    size_t sz = sizeof(oni_device_t) * num_devs;
    devices = realloc(devices, sz ? sz : 1);
    must(oni_get_opt(ctx, ONI_OPT_DEVICETABLE, devices, &sz), "DEVICETABLE");
}

static oni_size_t get_u32(int opt, const char *what)
{
    oni_size_t v = 0;
    size_t n = sizeof v;
    must(oni_get_opt(ctx, opt, &v, &n), what);
    return v;
}

static void set_u32(int opt, oni_size_t v, const char *what)
{
    must(oni_set_opt(ctx, opt, &v, sizeof v), what);
}

/* One frame as the rules driver's card makes it (riffa.c, next_frame). */
static int check_frame(const oni_frame_t *f, int rc)
{
    oni_size_t i;
    int d = -1;
    for (i = 0; i < num_devs; i++)
        if (devices[i].idx == f->dev_idx)
            d = (int)i;
    if (d < 0 || d >= 3 || devices[d].read_size != f->data_sz || f->data_sz < 4) {
        fail("a frame of no readable device of the table", (int)f->dev_idx);
        return 0;
    }
    if (rc != (int)(sizeof(oni_frame_t) + f->data_sz + f->data_sz % 4)) {
        fail("oni_read_frame's answer is not upstream's", rc);
        return 0;
    }
    oni_reg_val_t k;
    memcpy(&k, f->data, 4);
    if (seen[d] && k != last_count[d] + 1) {
        fprintf(stderr, "riffa_host: device %u: counter %u after %llu\n", f->dev_idx, k, last_count[d]);
        failures++;
        return 0;
    }
    for (i = 4; i < f->data_sz; i++)
        if ((unsigned char)f->data[i] != (unsigned char)(k + i)) {
            fail("a frame's bytes", (int)i);
            return 0;
        }
    seen[d] = 1;
    last_count[d] = k;
    return 1;
}

static void *read_loop(void *arg)
{
    struct reader *r = arg;
    while (r->frames < want_frames) {
        oni_frame_t *f = NULL;
        int rc = oni_read_frame(ctx, &f);
        if (rc < 0) {
            r->rc = rc;
            break;
        }
        int ok = check_frame(f, rc);
        oni_destroy_frame(f);
        if (!ok) {
            r->rc = -1;
            break;
        }
        r->frames++;
    }
    return NULL;
}

/* A new run. A stop drops the frame the card was sending (riffa.c), so each
 * device's counter is checked from its first frame of the run on. */
static void start_reader(struct reader *r)
{
    memset(seen, 0, sizeof seen);
    r->frames = 0;
    r->rc = 0;
    if (pthread_create(&r->tid, NULL, read_loop, r))
        fail("pthread_create", 0);
}

static void join_reader(struct reader *r, const char *what)
{
    pthread_join(r->tid, NULL);
    if (r->rc || r->frames != want_frames) {
        fprintf(stderr, "riffa_host: %s: %ld frames, rc %d (%s)\n", what, r->frames, r->rc,
                oni_error_str(r->rc));
        failures++;
    }
    printf("%s: %ld frames\n", what, r->frames);
}

static void sleep_ms(long ms)
{
    struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&t, NULL);
}

/* A run as oni-repl starts one: the reader first, then the hardware. */
static void run_repl_style(const char *what)
{
    struct reader r;
    start_reader(&r);
    sleep_ms(100); /* repl:699 sleeps 500 ms */
    if (get_u32(ONI_OPT_RUNNING, "RUNNING before the start") != 0)
        fail("RUNNING read from the hardware before the start is not 0", 0);
    set_u32(ONI_OPT_RESETACQCOUNTER, 2, "RESETACQCOUNTER = 2");
    if (get_u32(ONI_OPT_RUNNING, "RUNNING after RESETACQCOUNTER = 2") != 1)
        fail("ONI_OPT_RUNNING should be 1 (repl:706)", 0);
    join_reader(&r, what);
}

/* 'p' (repl:746-756): the reader stops, then the hardware. */
static void stop(void)
{
    set_u32(ONI_OPT_RUNNING, 0, "RUNNING = 0");
}

static void registers_and_a_write(void)
{
    oni_reg_val_t v = 0;
    must(oni_write_reg(ctx, devices[1].idx, 3, 0xC0FFEE), "oni_write_reg");
    must(oni_read_reg(ctx, devices[1].idx, 3, &v), "oni_read_reg");
    if (v != 0xC0FFEE)
        fail("a register does not read back what was written", (int)v);
    if (oni_read_reg(ctx, 0x77, 0, &v) != ONI_EREADFAILURE)
        fail("a register of no device is not refused", 0);
    oni_frame_t *w = NULL;
    oni_reg_val_t word = 0x5A5A5A5A;
    int rc = oni_create_frame(ctx, &w, devices[2].idx, &word, sizeof word);
    if (rc != (int)(sizeof(oni_frame_t) + sizeof word))
        fail("oni_create_frame's answer is not upstream's 24 + size", rc);
    if (rc > 0) {
        rc = oni_write_frame(ctx, w);
        if (rc != 8 + (int)sizeof word)
            fail("oni_write_frame", rc);
        oni_destroy_frame(w);
    }
    must(oni_read_reg(ctx, devices[2].idx, 7, &v), "write counter");
    if (v < 1)
        fail("the card saw no write frame", (int)v);
}

int main(int argc, char **argv)
{
    const char *driver = argc > 1 ? argv[1] : "riffarules";
    want_frames = argc > 2 ? atol(argv[2]) : 20000;
    struct reader r;

    ctx = oni_create_ctx(driver);
    if (!ctx) {
        fprintf(stderr, "riffa_host: no driver %s\n", driver);
        return 1;
    }
    must(oni_init_ctx(ctx, -1), "oni_init_ctx");
    update_dev_table();
    if (num_devs != 3) {
        fail("the table has not 3 devices", (int)num_devs);
        return 1;
    }
    printf("Max. read frame size: %u bytes\n", get_u32(ONI_OPT_MAXREADFRAMESIZE, "MAXREADFRAMESIZE"));
    printf("Max. write frame size: %u bytes\n", get_u32(ONI_OPT_MAXWRITEFRAMESIZE, "MAXWRITEFRAMESIZE"));
    printf("default block read size: %u bytes\n", get_u32(ONI_OPT_BLOCKREADSIZE, "BLOCKREADSIZE"));

    /* 2. the default block size */
    run_repl_style("run at the default block read size");
    stop();

    /* 3. as oni-repl configures */
    set_u32(ONI_OPT_BLOCKREADSIZE, 2048, "BLOCKREADSIZE = 2048");
    set_u32(ONI_OPT_BLOCKWRITESIZE, 2048, "BLOCKWRITESIZE = 2048");
    if (get_u32(ONI_OPT_BLOCKREADSIZE, "BLOCKREADSIZE") != 2048)
        fail("Setting block read size was unsuccessful (repl:653)", 0);
    if (get_u32(ONI_OPT_SYSCLKHZ, "SYSCLKHZ") == 0 || get_u32(ONI_OPT_ACQCLKHZ, "ACQCLKHZ") == 0)
        fail("a clock rate of 0", 0);
    run_repl_style("run at 2048-byte blocks");

    /* 4. registers, a write frame, 'a' while running */
    registers_and_a_write();
    set_u32(ONI_OPT_RESETACQCOUNTER, 1, "RESETACQCOUNTER = 1 ('a')");

    /* 5. 'p', 'p' */
    stop();
    start_reader(&r);
    set_u32(ONI_OPT_RUNNING, 1, "RUNNING = 1 ('p')");
    join_reader(&r, "run after a pause");
    stop();

    /* 6. 'x': a reset brings the default block size back; the driver is told */
    set_u32(ONI_OPT_RESET, 1, "RESET = 1 ('x')");
    update_dev_table();
    if (get_u32(ONI_OPT_BLOCKREADSIZE, "BLOCKREADSIZE after RESET") != 40) /* 16 + 22, to a word */
        fail("BLOCKREADSIZE after RESET is not the default (upstream oni.c:1055)", 0);
    run_repl_style("run after a reset, default block read size");

    /* 7. 'q' */
    stop();
    must(oni_destroy_ctx(ctx), "oni_destroy_ctx");
    free(devices);
    printf("%s\n", failures ? "FAILED" : "ok");
    return failures ? 1 : 0;
}
