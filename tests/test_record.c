/* test_record.c - recordings of the emulated card (src/record), read back
 * by an independent reader: tests/record/check_openephys.py, run with
 * Debian's /usr/bin/python3 and numpy (np.load, np.memmap), compares them
 * sample for sample with every frame the test read from the card, with
 * the card's ground truth and its hub clock; then what a crash (kill -9,
 * then rec_recover), a file size limit and an existing recording leave. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include "unit.h"
#include "oni.h"
#include "onix.h"
#include "oniemu.h"
#include "loop/rig.h"
#include "loop/superframe.h"
#include "record/record.h"
#include "oni/util/npy.h"

#define PY "/usr/bin/python3"
#define SPEC "devices=breakout:loopback=1,np2e;mode=realtime;seed=7"

static int have_numpy(void)
{
    return system(PY " -c 'import numpy' >/dev/null 2>&1") == 0;
}

/* tests/record/<name> next to this file (CMake gives absolute paths). */
static void script(char *out, size_t cap, const char *name)
{
    const char *slash = strrchr(__FILE__, '/');
    snprintf(out, cap, "%.*s/record/%s", slash ? (int)(slash - __FILE__) : 1, slash ? __FILE__ : ".", name);
}

static void tmpdir(char *out, size_t cap)
{
    snprintf(out, cap, "/tmp/onigpu-test-rec-XXXXXX");
    if (!mkdtemp(out))
        out[0] = 0;
}

static void rm_rf(const char *dir)
{
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd))
        fprintf(stderr, "  could not remove %s\n", dir);
}

/* The rig on the emulated card, ground truth into truth. NULL on failure (said). */
static oni_ctx open_rig(const char *truth)
{
    oni_ctx ctx = oni_create_ctx("emu");
    if (!ctx)
        return NULL;
    uint32_t tmo = 1000;
    char why[256];
    int rc = oni_set_driver_opt(ctx, ONI_DRV_EMU_SPEC, SPEC, sizeof SPEC);
    if (!rc)
        rc = oni_set_driver_opt(ctx, ONI_DRV_EMU_TRUTH_FILE, truth, strlen(truth) + 1);
    if (!rc)
        rc = oni_set_opt(ctx, ONI_OPT_TIMEOUTMS, &tmo, sizeof tmo);
    if (!rc)
        rc = oni_init_ctx(ctx, -1);
    struct loop_rig rig;
    if (!rc && (rc = loop_rig_open(ctx, 1, &rig, why, sizeof why)))
        fprintf(stderr, "  rig: %s\n", why);
    if (rc) {
        fprintf(stderr, "  cannot open the card: %s\n", oni_error_str(rc));
        oni_destroy_ctx(ctx);
        return NULL;
    }
    return ctx;
}

static struct rec *open_rec_as(oni_ctx ctx, const char *dir, int format)
{
    oni_device_t t[64];
    size_t len = sizeof t;
    oni_size_t n = 0;
    size_t nl = sizeof n;
    if (oni_get_opt(ctx, ONI_OPT_NUMDEVICES, &n, &nl) || n > 64 || oni_get_opt(ctx, ONI_OPT_DEVICETABLE, t, &len))
        return NULL;
    struct rec_config c = {.dir = dir, .format = format, .stim_stream = 1, .spike_stream = 1, .flush_ms = 200};
    struct rec *r = NULL;
    char why[300];
    int rc = rec_open(&c, ctx, t, n, &r, why, sizeof why);
    if (rc)
        fprintf(stderr, "  rec_open: %s\n", why);
    return r;
}

static struct rec *open_rec(oni_ctx ctx, const char *dir)
{
    return open_rec_as(ctx, dir, REC_OPENEPHYS);
}

/* Run when the stream reaches a frame (a live reader); NULL: none. */
static const char *live_cmd;
static long live_at;
static int live_rc = -1;

/* Write frame f in read-frame form to fd (the reference). */
static int put_ref(int fd, const oni_frame_t *f)
{
    uint8_t b[16 + 2048] = {0};
    if (f->data_sz > 2048)
        return -1;
    memcpy(b, &f->time, 8);
    memcpy(b + 8, &f->dev_idx, 4);
    memcpy(b + 12, &f->data_sz, 4);
    memcpy(b + 16, f->data, f->data_sz);
    size_t len = 16 + ((f->data_sz + 3u) & ~3u), done = 0;
    while (done < len) {
        ssize_t w = write(fd, b + done, len - done);
        if (w <= 0)
            return -1;
        done += (size_t)w;
    }
    return 0;
}

/* Stream `probe_frames` probe super-frames (0: until killed) into r and
 * the reference fd; every 3000th one also a DigitalIO write (its loopback
 * comes back as input frames), a stimulation and a detected spike, listed
 * in sent (may be NULL). Returns the probe frames read, or -1. */
static long stream(oni_ctx ctx, struct rec *r, int ref, FILE *sent, long probe_frames)
{
    oni_size_t one = 1, zero = 0;
    if (oni_set_opt(ctx, ONI_OPT_RUNNING, &one, sizeof one))
        return -1;
    long probe = 0;
    uint32_t k = 0;
    while (!probe_frames || probe < probe_frames) {
        oni_frame_t *f = NULL;
        int rc = oni_read_frame(ctx, &f);
        if (rc < 0) {
            fprintf(stderr, "  read: %s\n", oni_error_str(rc));
            probe = -1;
            break;
        }
        if (put_ref(ref, f)) {
            oni_destroy_frame(f);
            probe = -1;
            break;
        }
        rec_frame(r, f, 0);
        if (f->dev_idx == 8 && live_cmd && probe + 1 == live_at)
            live_rc = system(live_cmd);
        if (f->dev_idx == 8 && ++probe % 3000 == 0) {
            uint64_t hub;
            memcpy(&hub, f->data, 8);
            uint32_t pins = loop_rig_stim_pins(k++);
            oni_frame_t *w = NULL;
            if (oni_create_frame(ctx, &w, 7, &pins, sizeof pins) > 0) {
                oni_write_frame(ctx, w);
                oni_destroy_frame(w);
            }
            rec_stim(r, hub, pins, 0);
            struct rec_spike sp = {hub, (uint32_t)(probe / 3000 * 37) % 384, -1};
            rec_spikes(r, 8, 0, &sp, 1, 0);
            if (sent)
                fprintf(sent, "stim,%llu,%u\nspike,%llu,%u\n", (unsigned long long)hub, pins,
                        (unsigned long long)hub, sp.chan);
        }
        oni_destroy_frame(f);
    }
    oni_set_opt(ctx, ONI_OPT_RUNNING, &zero, sizeof zero);
    return probe;
}

static int check(const char *flags, const char *dir, const char *ref, const char *truth, const char *sent)
{
    char py[512], cmd[2048];
    script(py, sizeof py, "check_openephys.py");
    snprintf(cmd, sizeof cmd, PY " '%s' %s '%s' '%s' '%s' %s%s%s", py, flags, dir, ref, truth, sent ? "'" : "",
             sent ? sent : "", sent ? "'" : "");
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

struct paths {
    char tmp[64], dir[128], ref[128], truth[128], sent[128];
};

static int make_paths(struct paths *p)
{
    tmpdir(p->tmp, sizeof p->tmp);
    if (!p->tmp[0])
        return -1;
    snprintf(p->dir, sizeof p->dir, "%s/rec", p->tmp);
    snprintf(p->ref, sizeof p->ref, "%s/ref.bin", p->tmp);
    snprintf(p->truth, sizeof p->truth, "%s/truth.csv", p->tmp);
    snprintf(p->sent, sizeof p->sent, "%s/sent.csv", p->tmp);
    int fd = open(p->truth, O_WRONLY | O_CREAT | O_EXCL, 0644);
    if (fd < 0)
        return -1;
    close(fd);
    return 0;
}

/* 1.5 s of the rig recorded whole: every sample, event, stimulus and spike
 * read back by numpy equal to what the card sent and the test queued. */
TEST(record_openephys_reads_back_sample_for_sample)
{
    if (!have_numpy())
        SKIP(PY " has no numpy (Debian: apt-get install python3-numpy; tools/deps.sh does it)");
    struct paths p;
    CHECK(make_paths(&p) == 0);
    oni_ctx ctx = open_rig(p.truth);
    CHECK(ctx != NULL);
    if (!ctx)
        return;
    struct rec *r = open_rec(ctx, p.dir);
    CHECK(r != NULL);
    int ref = open(p.ref, O_WRONLY | O_CREAT | O_EXCL, 0644);
    FILE *sent = fopen(p.sent, "w");
    CHECK(ref >= 0 && sent);
    long n = r && ref >= 0 && sent ? stream(ctx, r, ref, sent, 45000) : -1;
    CHECK_EQ(n, 45000);
    struct rec_stats st;
    memset(&st, 0, sizeof st);
    if (r)
        CHECK_RC(rec_close(r, &st), 0);
    CHECK_EQ(st.lost_msgs, 0);
    CHECK(st.samples >= 45000);
    close(ref);
    fclose(sent);
    oni_destroy_ctx(ctx); /* the truth file flushed */
    CHECK_EQ(check("", p.dir, p.ref, p.truth, p.sent), 0);
    /* a directory holding a recording is refused, and left as it was */
    ctx = open_rig(p.truth);
    CHECK(ctx != NULL);
    if (ctx) {
        oni_device_t t[64];
        size_t len = sizeof t;
        oni_get_opt(ctx, ONI_OPT_DEVICETABLE, t, &len);
        struct rec_config c = {.dir = p.dir, .format = REC_OPENEPHYS};
        struct rec *again = NULL;
        char why[300];
        CHECK_RC(rec_open(&c, ctx, t, len / sizeof t[0], &again, why, sizeof why), ONI_EINVALARG);
        CHECK(strstr(why, "holds a recording") != NULL);
        CHECK(again == NULL);
        oni_destroy_ctx(ctx);
    }
    CHECK_EQ(check("", p.dir, p.ref, p.truth, p.sent), 0);
    rm_rf(p.tmp);
}

/* NWB: h5py finds the core schema's required groups, datasets and
 * attributes, and the probe's data equal to the card's; a reader following
 * the file while it is written (HDF5 SWMR) sees whole rows too. */
TEST(record_nwb_reads_back_and_live)
{
    if (system(PY " -c 'import h5py, numpy' >/dev/null 2>&1"))
        SKIP(PY " has no h5py (Debian: apt-get install python3-h5py; tools/deps.sh does it)");
    struct paths p;
    CHECK(make_paths(&p) == 0);
    oni_ctx ctx = open_rig(p.truth);
    CHECK(ctx != NULL);
    if (!ctx)
        return;
    struct rec *r = open_rec_as(ctx, p.dir, REC_NWB);
    CHECK(r != NULL);
    int ref = open(p.ref, O_WRONLY | O_CREAT | O_EXCL, 0644);
    char py[512], cmd[2048], file[200];
    script(py, sizeof py, "check_nwb.py");
    snprintf(file, sizeof file, "%s/onigpu.nwb", p.dir);
    /* at 20000 frames, after the writer's flushes (every 200 ms) */
    snprintf(cmd, sizeof cmd, PY " '%s' '%s' '%s' --live 2048", py, file, p.ref);
    live_cmd = cmd, live_at = 20000, live_rc = -1;
    long n = r && ref >= 0 ? stream(ctx, r, ref, NULL, 30000) : -1;
    live_cmd = NULL;
    CHECK_EQ(n, 30000);
    CHECK_EQ(live_rc, 0);
    struct rec_stats st;
    memset(&st, 0, sizeof st);
    if (r)
        CHECK_RC(rec_close(r, &st), 0);
    CHECK_EQ(st.lost_msgs, 0);
    close(ref);
    oni_destroy_ctx(ctx);
    snprintf(cmd, sizeof cmd, PY " '%s' '%s' '%s'", py, file, p.ref);
    CHECK_EQ(system(cmd), 0);
    rm_rf(p.tmp);
}

/* A child that records the rig into dir, its reference going to fd,
 * with a file size limit of fsize bytes (0: none). Exit 0 when the
 * recording closed whole, 3 when it stopped at a failed write, 1 else. */
static void child(const char *dir, const char *truth, int fd, rlim_t fsize, long frames)
{
    signal(SIGXFSZ, SIG_IGN);
    if (fsize) {
        struct rlimit rl = {fsize, fsize};
        setrlimit(RLIMIT_FSIZE, &rl);
    }
    oni_ctx ctx = open_rig(truth);
    struct rec *r = ctx ? open_rec(ctx, dir) : NULL;
    if (!r)
        _exit(1);
    long n = stream(ctx, r, fd, NULL, frames);
    struct rec_stats st;
    int rc = rec_close(r, &st);
    oni_destroy_ctx(ctx);
    if (rc)
        fprintf(stderr, "  child: recording stopped: %s\n", st.why);
    _exit(n < 0 ? 1 : rc ? 3 : 0);
}

/* Copy the pipe into file until EOF, or until `kill_after` bytes have come
 * (then the child is killed with SIGKILL, and the rest of the pipe copied). */
static long drain(int in, const char *file, pid_t pid, long kill_after)
{
    int out = open(file, O_WRONLY | O_CREAT | O_EXCL, 0644);
    if (out < 0)
        return -1;
    long total = 0;
    char buf[65536];
    for (;;) {
        ssize_t r = read(in, buf, sizeof buf);
        if (r <= 0)
            break;
        if (write(out, buf, (size_t)r) != r)
            break;
        total += r;
        if (kill_after && total >= kill_after) {
            kill(pid, SIGKILL);
            kill_after = 0;
        }
    }
    close(out);
    return total;
}

static int run_child(const struct paths *p, rlim_t fsize, long frames, long kill_after)
{
    int pfd[2];
    if (pipe(pfd))
        return -1;
    pid_t pid = fork();
    if (pid == 0) {
        close(pfd[0]);
        child(p->dir, p->truth, pfd[1], fsize, frames);
    }
    close(pfd[1]);
    long got = drain(pfd[0], p->ref, pid, kill_after);
    close(pfd[0]);
    int st = 0;
    waitpid(pid, &st, 0);
    if (got <= 0)
        return -1;
    return WIFSIGNALED(st) ? 128 + WTERMSIG(st) : WEXITSTATUS(st);
}

/* kill -9 mid-recording: rec_recover makes it consistent, and everything
 * in it is the card's first samples. */
TEST(record_kill9_then_recover_reads_back)
{
    if (!have_numpy())
        SKIP(PY " has no numpy");
    struct paths p;
    CHECK(make_paths(&p) == 0);
    /* killed after about 1.2 s of super-frames (1180 bytes each) */
    int st = run_child(&p, 0, 0, 36000L * 1180);
    CHECK_EQ(st, 128 + SIGKILL);
    char report[4096];
    CHECK_RC(rec_recover(p.dir, report, sizeof report), 0);
    printf("%s", report);
    CHECK(strstr(report, "continuous/ONIX-100.PortA-ProbeA: ") != NULL);
    CHECK_EQ(check("--prefix", p.dir, p.ref, p.truth, NULL), 0);
    /* recover again: nothing left to change */
    CHECK_RC(rec_recover(p.dir, report, sizeof report), 0);
    CHECK(strstr(report, "made consistent") == NULL);
    rm_rf(p.tmp);
}

/* A file size limit stops the recording at a failed write; what it holds
 * is whole and the card's first samples. */
TEST(record_file_size_limit_keeps_whole_rows)
{
    if (!have_numpy())
        SKIP(PY " has no numpy");
    struct paths p;
    CHECK(make_paths(&p) == 0);
    /* 8 MB: continuous.dat fills it after about 10900 rows (0.36 s) */
    int st = run_child(&p, 8u << 20, 30000, 0);
    CHECK_EQ(st, 3);
    CHECK_EQ(check("--prefix", p.dir, p.ref, p.truth, NULL), 0);
    char report[4096];
    CHECK_RC(rec_recover(p.dir, report, sizeof report), 0);
    CHECK(strstr(report, "made consistent") == NULL); /* it was closed consistent */
    rm_rf(p.tmp);
}

/* Bad configurations and a directory that cannot be made: refused, nothing made. */
TEST(record_refuses_bad_config)
{
    char why[300];
    struct rec *r = NULL;
    struct rec_config c = {.dir = "", .format = REC_OPENEPHYS};
    CHECK_RC(rec_open(&c, NULL, NULL, 0, &r, why, sizeof why), ONI_EINVALARG);
    c.dir = "/tmp/x";
    c.format = 7;
    CHECK_RC(rec_open(&c, NULL, NULL, 0, &r, why, sizeof why), ONI_EINVALARG);
    CHECK(r == NULL);
    CHECK_EQ(rec_format_of("openephys"), REC_OPENEPHYS);
    CHECK_EQ(rec_format_of("nwb"), REC_NWB);
    CHECK_EQ(rec_format_of("raw"), -1);
    char report[512];
    CHECK_RC(rec_recover("/tmp/onigpu-test-rec-none-such", report, sizeof report), ONI_EINVALARG);
    CHECK(strstr(report, "structure.oebin") != NULL);
}


/* More NP2.0e headstages than a breakout has ports (two): each probe still
 * gets a stream of its own (they were all "Hub0-ProbeA/B", and the second
 * headstage's open failed on the first's files). */
TEST(record_headstages_past_the_ports_get_their_own_streams)
{
    char tmp[] = "/tmp/onigpu-test-rec-XXXXXX", why[300];
    REQUIRE(mkdtemp(tmp));
    oni_device_t t[4];
    for (int i = 0; i < 4; i++)
        t[i] = (oni_device_t){.idx = 8 + i, .id = ONIX_DS90UB9RAW, .version = 3, .read_size = LOOP_NP2E_PAYLOAD};
    struct rec_config c = {.dir = tmp, .format = REC_OPENEPHYS};
    struct rec *r = NULL;
    int rc = rec_open(&c, NULL, t, 4, &r, why, sizeof why);
    if (rc)
        UNIT_FAIL("rec_open: %s", why);
    CHECK_RC(rc, 0);
    if (r) { /* one super-frame of each probe of each headstage (streams open at their first) */
        enum { STRIDE = 16 + ((LOOP_NP2E_PAYLOAD + 3) & ~3) };
        static uint8_t blk[8 * STRIDE];
        for (uint32_t k = 0; k < 8; k++) {
            uint8_t *f = blk + k * STRIDE;
            uint64_t clk = 1000;
            uint32_t idx = 8 + k / 2, sz = LOOP_NP2E_PAYLOAD;
            uint16_t probe = (uint16_t)(k % 2);
            memcpy(f, &clk, 8);
            memcpy(f + 8, &idx, 4);
            memcpy(f + 12, &sz, 4);
            memcpy(f + 16, &clk, 8);
            memcpy(f + 16 + LOOP_NP2E_PROBE_OFF, &probe, 2);
        }
        CHECK_RC(rec_frames(r, blk, sizeof blk, 0), 0);
        CHECK_RC(rec_close(r, NULL), 0);
    }
    const char *const want[] = {"PortA-ProbeA", "PortA-ProbeB", "PortB-ProbeA", "PortB-ProbeB",
                                "Dev10-ProbeA", "Dev10-ProbeB", "Dev11-ProbeA", "Dev11-ProbeB"};
    for (int i = 0; i < 8; i++)
        CHECK(unit_sh("test -d '%s/Record Node 101/experiment1/recording1/continuous/ONIX-100.%s'", tmp, want[i]) == 0);
    rm_rf(tmp);
}

/* The queue wraps: 1 MiB of queue, 8 MiB of blocks whose size does not
 * divide it, the producer waiting while it is half full. Every row is
 * written, in order (the writer skips the unused end at each wrap). */
TEST(record_queue_wraps_and_loses_nothing)
{
    char tmp[] = "/tmp/onigpu-test-rec-XXXXXX", why[300];
    REQUIRE(mkdtemp(tmp));
    oni_device_t t = {.idx = 8, .id = ONIX_DS90UB9RAW, .version = 3, .read_size = LOOP_NP2E_PAYLOAD};
    struct rec_config c = {.dir = tmp, .format = REC_OPENEPHYS, .queue_bytes = 1u << 20};
    struct rec *r = NULL;
    int rc = rec_open(&c, NULL, &t, 1, &r, why, sizeof why);
    if (rc)
        UNIT_FAIL("rec_open: %s", why);
    REQUIRE(r);
    enum { STRIDE = 16 + ((LOOP_NP2E_PAYLOAD + 3) & ~3), PER = 7, BLOCKS = 1000 };
    static uint8_t blk[PER * STRIDE];
    uint64_t clk = 1000;
    for (int b = 0; b < BLOCKS; b++) {
        for (int k = 0; k < PER; k++, clk += 8333) { /* 30 kHz at 250 MHz */
            uint8_t *f = blk + k * STRIDE;
            uint32_t idx = 8, sz = LOOP_NP2E_PAYLOAD;
            uint16_t probe = 0;
            memcpy(f, &clk, 8);
            memcpy(f + 8, &idx, 4);
            memcpy(f + 12, &sz, 4);
            memcpy(f + 16, &clk, 8);
            memcpy(f + 16 + LOOP_NP2E_PROBE_OFF, &probe, 2);
        }
        struct rec_stats q;
        for (rec_get_stats(r, &q); q.queued > q.queue_cap / 2; rec_get_stats(r, &q))
            usleep(200);
        CHECK_RC(rec_frames(r, blk, sizeof blk, 0), 0);
    }
    struct rec_stats st;
    CHECK_RC(rec_close(r, &st), 0);
    CHECK_EQ(st.lost_msgs, 0);
    CHECK_EQ(st.samples, (uint64_t)PER * BLOCKS);
    CHECK(unit_sh("test $(stat -c %%s '%s/Record Node 101/experiment1/recording1/continuous/ONIX-100.PortA-ProbeA/"
                  "continuous.dat') -eq %d", tmp, PER * BLOCKS * 384 * 2) == 0);
    if (have_numpy())
        CHECK(unit_sh(PY " -c \"import numpy as n, sys; s = n.load(sys.argv[1]); "
                      "sys.exit(0 if len(s) == %d and (n.diff(s) == 1).all() else 1)\" "
                      "'%s/Record Node 101/experiment1/recording1/continuous/ONIX-100.PortA-ProbeA/sample_numbers.npy'",
                      PER * BLOCKS, tmp) == 0);
    rm_rf(tmp);
}

/* Messages (rec_message): events/MessageCenter/ with text.npy of |S128,
 * sample_numbers on the acquisition clock (the clock given, or for clock 0
 * the last row's) and timestamps, listed in structure.oebin as stream
 * MessageCenter; read back by numpy as load_messages reads them (decoded
 * byte strings). A text longer than REC_MSG_TEXT is cut; an empty one refused. */
TEST(record_messages_read_back)
{
    char tmp[] = "/tmp/onigpu-test-rec-XXXXXX", why[300];
    REQUIRE(mkdtemp(tmp));
    oni_device_t t = {.idx = 8, .id = ONIX_DS90UB9RAW, .version = 3, .read_size = LOOP_NP2E_PAYLOAD};
    struct rec_config c = {.dir = tmp, .format = REC_OPENEPHYS};
    struct rec *r = NULL;
    int rc = rec_open(&c, NULL, &t, 1, &r, why, sizeof why);
    if (rc)
        UNIT_FAIL("rec_open: %s", why);
    REQUIRE(r);
    enum { STRIDE = 16 + ((LOOP_NP2E_PAYLOAD + 3) & ~3), PER = 30 };
    static uint8_t blk[PER * STRIDE];
    uint64_t clk = 1000;
    for (int k = 0; k < PER; k++, clk += 8333) {
        uint8_t *f = blk + k * STRIDE;
        uint32_t idx = 8, sz = LOOP_NP2E_PAYLOAD;
        memcpy(f, &clk, 8);
        memcpy(f + 8, &idx, 4);
        memcpy(f + 12, &sz, 4);
        memcpy(f + 16, &clk, 8);
    }
    char longer[300];
    memset(longer, 'x', sizeof longer - 1);
    longer[sizeof longer - 1] = 0;
    CHECK_RC(rec_frames(r, blk, sizeof blk, 0), 0);
    CHECK_RC(rec_message(r, 125000000, "threshold k=6", 0), 0);
    CHECK_RC(rec_message(r, 0, "trace channels 1,385", 0), 0);
    CHECK_RC(rec_message(r, 7, longer, 0), 0);
    CHECK_EQ(rec_message(r, 7, "", 0), ONI_EINVALARG);
    struct rec_stats st;
    CHECK_RC(rec_close(r, &st), 0);
    CHECK_EQ(st.messages, 3);
    if (!have_numpy()) {
        rm_rf(tmp);
        SKIP(PY " has no numpy");
    }
    uint64_t last = clk - 8333;
    CHECK(unit_sh(PY " -c \"import numpy as n, json, sys; d = sys.argv[1] + '/events/MessageCenter/'; "
                  "t = n.load(d + 'text.npy'); s = n.load(d + 'sample_numbers.npy'); ts = n.load(d + 'timestamps.npy'); "
                  "m = [x.decode('utf-8') for x in t]; "
                  "e = [x for x in json.load(open(sys.argv[1] + '/structure.oebin'))['events'] "
                  "if x['stream_name'] == 'MessageCenter']; "
                  "ok = str(t.dtype) == '|S128' and m == ['threshold k=6', 'trace channels 1,385', 'x' * 128] and "
                  "s.dtype == n.int64 and list(s) == [125000000, %llu, 7] and "
                  "abs(ts[0] - 0.5) < 1e-12 and len(e) == 1 and e[0]['folder_name'] == 'MessageCenter/'; "
                  "print(m, list(s), e); sys.exit(0 if ok else 1)\" '%s/Record Node 101/experiment1/recording1'",
                  (unsigned long long)last, tmp) == 0);
    rm_rf(tmp);
}

/* The .npy header of fixed-width byte strings ("|S<n>", NumPy's bytes
 * dtype): written and parsed with n bytes an element; n 0, past
 * NPY_MAX_STR or not a number refused. */
TEST(npy_byte_strings)
{
    char h[NPY_HDR];
    struct npy_info in;
    CHECK_EQ(npy_header(h, "|S128", 1, (const uint64_t[]){3}), 0);
    REQUIRE(npy_parse((const uint8_t *)h, sizeof h, &in) == 0);
    CHECK(!strcmp(in.descr, "|S128") && in.item == 128 && in.shape[0] == 3 && in.ndim == 1);
    CHECK_EQ(npy_header(h, "|S1", 1, (const uint64_t[]){1}), 0);
    static const char *const bad[] = {"|S0", "|S", "|S4097", "|S12x", "<S8", "|S01"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        if (npy_header(h, bad[i], 1, (const uint64_t[]){1}) != -1)
            UNIT_FAIL("npy_header took '%s'", bad[i]);
}

/* `onigpu run --record`: the closed loop's latencies recomputed from the
 * recording's event files alone equal run's own, echo for echo; the probe's
 * stream is whole. */
TEST(record_run_latency_from_the_files)
{
    const char *bin = getenv("ONIGPU_BIN");
    if (!bin)
        SKIP("ONIGPU_BIN not set (CTest sets it)");
    if (!have_numpy())
        SKIP(PY " has no numpy");
    struct paths p;
    CHECK(make_paths(&p) == 0);
    char py[512], cmd[2048];
    int st = unit_sh("cd %s && '%s/onigpu' run --backend cpu --seconds 2 --out out --record rec > run.txt 2>&1",
                     p.tmp, bin);
    /* a starved loop (a sanitizer build on a busy machine) may see a read time out: run then
     * exits 1 with what it measured; the recording must be whole all the same */
    if (st && unit_sh("grep -q 'Operation timed out' %s/run.txt", p.tmp)) {
        CHECK_EQ(st, 0);
        unit_sh("cat %s/run.txt >&2", p.tmp);
    }
    CHECK(unit_sh("grep -q 'recording LOST\\|recording stopped' %s/run.txt", p.tmp) != 0);
    CHECK(unit_sh("grep -q 'recording (openephys) into rec: .*stimuli, detected spikes' %s/run.txt", p.tmp) == 0);
    CHECK(unit_sh("grep -q '^recorded into rec (openephys): ' %s/run.txt", p.tmp) == 0);
    script(py, sizeof py, "latency_from_recording.py");
    snprintf(cmd, sizeof cmd, PY " '%s' '%s/rec' %s/out/run/run-*-latency.csv", py, p.tmp, p.tmp);
    CHECK_EQ(system(cmd), 0);
    /* whole, however few blocks a sanitizer build processed on a busy machine (16: one block) */
    script(py, sizeof py, "check_openephys.py");
    snprintf(cmd, sizeof cmd, PY " '%s' --self '%s/rec' 16", py, p.tmp);
    CHECK_EQ(system(cmd), 0);
    /* spikes, when the loop got past its calibration (a sanitizer build may not, on a busy machine) */
    if (unit_sh("grep -q 'spikes detected    0 ' %s/run.txt", p.tmp))
        CHECK(unit_sh("test -s %s/rec/Record\\ Node\\ 101/experiment1/recording1/spikes/"
                      "ONIX-100.PortA-ProbeA-spikes/sample_numbers.npy", p.tmp) == 0);
    rm_rf(p.tmp);
}
