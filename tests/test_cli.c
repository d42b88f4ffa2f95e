/* test_cli.c - the built `onigpu` binary's info, read and reg commands with
 * the test driver, and advise's reading of a workload file: exit codes and
 * output for good and bad arguments; every command's bad values said one
 * way; hardware that cannot be opened told apart. */
#include <poll.h>
#include <signal.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>
#include "unit.h"
#include "oni.h"
#include "oninet.h"
#include "onitest.h"
#include "signals.h"
#include "proc.h"
#include "result_set.h"
#include "bench/bench_emu.h"
#include "bench/floor.h"

static char out[1 << 16];

/* Start $ONIGPU_BIN/<prog> with args (NULL-terminated), stdout and stderr
 * into a pipe (*fd: its reading end; proc.h); returns the pid, -1 if it
 * could not start, -2 if no binary. */
static pid_t spawn_prog(const char *prog, const char *const *args, int *fd)
{
    char bin[4096];
    if (proc_bin(prog, bin, sizeof bin))
        return -2;
    const char *argv[32] = {bin};
    int n = 1;
    for (; args[n - 1] && n < 31; n++)
        argv[n] = args[n - 1];
    argv[n] = NULL;
    struct proc p;
    struct proc_opts o = {.capture = PROC_STDOUT_STDERR};
    if (proc_start(&p, bin, argv, &o))
        return -1;
    *fd = p.out;
    return p.pid;
}

/* Read what a spawn_prog child writes into out until it ends; returns its
 * exit status, -1 if it did not exit (a signal). Closes fd. */
static int finish_prog(pid_t pid, int fd)
{
    struct proc p = {pid, fd};
    proc_read(&p, out, sizeof out, -1);
    return proc_exit_code(proc_wait(&p, -1));
}

/* Run a program to its end (spawn_prog, finish_prog); output in out. */
static int run_prog(const char *prog, const char *const *args)
{
    int fd;
    pid_t pid = spawn_prog(prog, args, &fd);
    return pid < 0 ? (int)pid : finish_prog(pid, fd);
}

#define RUN(...) run_prog("onigpu", (const char *const[]){__VA_ARGS__, NULL})
#define NEED_BIN()                                                                     \
    do {                                                                               \
        if (!getenv("ONIGPU_BIN"))                                                     \
            SKIP("ONIGPU_BIN not set (run through ctest)");                            \
    } while (0)
#define HAS(s)                                                                         \
    do {                                                                               \
        if (!strstr(out, s))                                                           \
            UNIT_FAIL("output lacks \"%s\":\n%s", s, out);                             \
    } while (0)

TEST(info_prints_table_clocks_and_hubs)
{
    NEED_BIN();
    CHECK_EQ(RUN("info", "--driver", "test"), 0);
    HAS("driver           test 1.0.0");
    HAS("ONI API          4.6.0");
    HAS("acq clock        250000000 Hz");
    HAS("max read frame   792 B");
    HAS("max write frame  24 B"); /* STIM: 16-byte header, 12-byte sample */
    HAS("block read       792 B");
    HAS("block write      24 B"); /* the default: one largest write frame, as upstream's */
    HAS("devices          14");
    HAS("2.0       0x4f470001  NEUROPIX2");
    HAS("1.0       3           RHD2164");
    HAS("hub 1   HS64 (2)  rev 2  firmware 0x0102  clock 42000000 Hz  delay 1200 ns");
    CHECK_EQ(RUN("info", "--driver=test", "--host", "0"), 0);
    HAS("devices          14");
}

/* The emu driver's card: link preset, mode and FIFO capacity from its driver options. */
TEST(info_emu_card)
{
    NEED_BIN();
    CHECK_EQ(RUN("info", "--emu", "link=gen3x8;mode=fast;ddr=64M"), 0);
    HAS("link             gen3x8: ");
    HAS("mode             fast");
    HAS("fifo capacity    67108864 B (DDR): 33554432 B default stream, 33554432 B GPU stream");
    CHECK_EQ(RUN("info"), 0);
    HAS("link             gen2x4: 1.60 GB/s, 3.0 us per transfer");
    HAS("mode             realtime");
    HAS("fifo capacity    4294967296 B (DDR)");
    CHECK_EQ(RUN("info", "--driver", "test"), 0);
    CHECK(!strstr(out, "\nlink "));
    CHECK(!strstr(out, "\nmode "));
}

TEST(info_bad_arguments)
{
    NEED_BIN();
    CHECK_EQ(RUN("info", "--driver", "test", "--bogus"), 2);
    HAS("usage: onigpu info");
    CHECK_EQ(RUN("info", "--driver"), 2);
    CHECK_EQ(RUN("info", "--driver", "test", "--host", "x"), 2);
    CHECK_EQ(RUN("info", "--driver", "test", "--host", " 1"), 2);
    CHECK_EQ(RUN("info", "--driver", "test", "--host", "-2"), 2);
    CHECK_EQ(RUN("info", "--driver", "test", "--host", "-1"), 0);
    CHECK_EQ(RUN("info", "--help"), 0);
    HAS("usage: onigpu info");
    CHECK_EQ(RUN("info", "--driver", "no_such_driver_xyz"), 1);
    HAS("cannot load driver 'no_such_driver_xyz'");
    CHECK_EQ(RUN("info", "--driver", "test", "--host", "7"), 1);
    HAS("cannot initialize");
}

TEST(read_frames_verify)
{
    NEED_BIN();
    CHECK_EQ(RUN("read", "--driver", "test", "--frames", "50000", "--verify"), 0);
    HAS("read 50000 frames in");
    HAS("frames/s");
    HAS("MB/s");
    HAS("verify: ok");
    HAS("  2.1 ");
    CHECK(!strstr(out, "FAILED"));
    CHECK_EQ(RUN("read", "--driver", "test", "--frames", "20000", "--block", "64K", "--verify"), 0);
    HAS("verify: ok");
    CHECK_EQ(RUN("read", "--driver", "test", "--frames=3000", "--block=796", "--verify"), 0);
    HAS("verify: ok");
}

/* Numbers are decimal or 0x hex (docs/cli.md); --frames read only decimal. */
TEST(read_frames_hex)
{
    NEED_BIN();
    CHECK_EQ(RUN("read", "--driver", "test", "--frames", "0x100"), 0);
    HAS("read 256 frames in");
}

TEST(read_seconds_prints_live_rate)
{
    NEED_BIN();
    CHECK_EQ(RUN("read", "--driver", "test", "--seconds", "1.3"), 0);
    HAS("1.0 s ");
    HAS("read ");
    CHECK(!strstr(out, "verify"));
}

/* Ctrl-C ends a read, with its summary and exit status 0. SIGINT is blocked
 * in every thread, the card's included, and taken by one of the CLI's own
 * (tools/common/stopsig.h): a handler ran on whichever thread the kernel
 * picked, and a TSan build could lose it there. A read that missed it runs
 * its 60 s. */
TEST(read_interrupted)
{
    NEED_BIN();
    int fd;
    pid_t pid = spawn_prog("onigpu", (const char *const[]){"read", "--driver", "emu", "--seconds", "60", NULL}, &fd);
    REQUIRE(pid > 0);
    /* until the card's threads run (the reading has started) */
    for (int i = 0; i < 1000 && thread_count(pid) < 3; i++)
        usleep(10000);
    int threads = thread_count(pid);
    int takers = threads_taking(pid, SIGINT); /* stopsig's, in sigwait */
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    kill(pid, SIGINT);
    int st = finish_prog(pid, fd);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double secs = (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) * 1e-9;
    fprintf(stderr, "  SIGINT to a read of %d threads, %d of them taking it: exit %d after %.1f s\n", threads,
            takers, st, secs);
    CHECK(threads >= 3);
    CHECK_EQ(takers, 1);
    CHECK_EQ(st, 0);
    CHECK(secs < 10);
    HAS("frames/s");
}

TEST(read_bad_arguments)
{
    NEED_BIN();
    CHECK_EQ(RUN("read", "--driver", "test", "--frames", "10", "--seconds", "1"), 2);
    HAS("onigpu read: --frames and --seconds exclude each other");
    HAS("usage: onigpu read");
    CHECK_EQ(RUN("read", "--driver", "test", "--frames", "0"), 2);
    HAS("onigpu read: --frames 0: must be a whole number >= 1 (decimal or 0x hex)");
    HAS("usage: onigpu read");
    CHECK_EQ(RUN("read", "--driver", "test", "--frames", "-3"), 2);
    HAS("onigpu read: --frames -3: must be a whole number >= 1");
    CHECK_EQ(RUN("read", "--driver", "test", "--frames", "1x"), 2);
    HAS("onigpu read: --frames 1x: must be");
    CHECK_EQ(RUN("read", "--driver", "test", "--seconds", "soon"), 2);
    HAS("onigpu read: --seconds soon: must be a duration above 0 s (as 2.5, 2.5s, 500ms, 100us)");
    /* found by a review: nan and inf were taken, and the read never ended */
    CHECK_EQ(RUN("read", "--driver", "test", "--seconds", "nan"), 2);
    HAS("onigpu read: --seconds nan: must be a duration");
    CHECK_EQ(RUN("read", "--driver", "test", "--seconds=inf"), 2);
    /* found by a review: strtoull skipped the space and negated: 2^64 - 5 frames */
    CHECK_EQ(RUN("read", "--driver", "test", "--frames", " -5"), 2);
    CHECK_EQ(RUN("read", "--driver", "test", "--frames", "+5"), 2);
    CHECK_EQ(RUN("read", "--driver", "test", "--frames", "0x"), 2);
    CHECK_EQ(RUN("read", "--driver", "test", "--block"), 2);
    HAS("onigpu read: --block needs a value: a size from 1 B to");
    CHECK_EQ(RUN("read", "--driver", "test", "extra"), 2);
    HAS("onigpu read: extra: unexpected argument");
    HAS("usage: onigpu read");
    CHECK_EQ(RUN("read", "--timeout=0"), 2);
    HAS("onigpu read: --timeout 0: must be a whole number from 1 to 4294967295");
    CHECK_EQ(RUN("read", "--truth"), 2);
    HAS("onigpu read: --truth needs a value: the name of a file to write");
    CHECK_EQ(RUN("read", "--driver", "test", "--frames", "10", "--truth", "/tmp/never-written.csv"), 1);
    HAS("--truth needs the emu driver");
    CHECK_EQ(RUN("read", "--driver", "test", "--block", "100", "--frames", "10"), 1);
    HAS("block size 100 refused");
    HAS("792");
    /* above ONI_OPT_BLOCKREADSIZE's ceiling: the hint named only the lower bounds */
    CHECK_EQ(RUN("read", "--driver", "test", "--block", "0x40000004", "--frames", "10"), 1);
    HAS("block size 1073741828 refused");
    HAS("at most 1 GiB");
}

/* Check a recording `onigpu read --rig --record` made in dir with the
 * independent reader (tests/record/check_openephys.py --self: Debian's
 * python3 and numpy): every stream whole, at least least probe samples.
 * 0 when it passes, 77 when python3-numpy is missing. */
static int check_recording(const char *dir, long least)
{
    if (unit_sh("/usr/bin/python3 -c 'import numpy' >/dev/null 2>&1"))
        return 77;
    const char *slash = strrchr(__FILE__, '/');
    return unit_sh("/usr/bin/python3 %.*s/record/check_openephys.py --self %s %ld", (int)(slash - __FILE__), __FILE__,
                   dir, least);
}

#define REC_EMU "devices=breakout:loopback=1,np2e"

/* run --probes 4 --record DIR: a stream per probe, each whole, and each
 * probe's detections in a spike folder of its own. */
TEST(run_records_four_probes)
{
    NEED_BIN();
    char dir[64];
    snprintf(dir, sizeof dir, "/tmp/onigpu-test-record4-%d", (int)getpid());
    CHECK(unit_sh("rm -rf %s", dir) == 0);
    int rc = RUN("run", "--probes", "4", "--backend", "cpu", "--block", "64", "--seconds", "1", "--record", dir);
    CHECK(rc == 0 || rc == 1); /* a sanitized build may fall behind: the recording is whole all the same */
    int st = check_recording(dir, 1000);
    if (st == 77)
        fprintf(stderr, "  (python3-numpy missing: the recording is not read back)\n");
    else
        CHECK_EQ(st, 0);
    for (const char *const *p = (const char *const[]){"PortA-ProbeA", "PortA-ProbeB", "PortB-ProbeA", "PortB-ProbeB",
                                                      NULL}; *p; p++)
        CHECK(unit_sh("test -f '%s/Record Node 101/experiment1/recording1/continuous/ONIX-100.%s/continuous.dat'", dir,
                      *p) == 0);
    CHECK(unit_sh("rm -rf %s", dir) == 0);
}

/* --record DIR: the Open Ephys format, every stream whole; a directory
 * holding a recording is refused and left as it was, and so is one that
 * cannot be made; --format needs --record. */
TEST(read_record_writes_every_frame)
{
    NEED_BIN();
    char dir[64], arg[80];
    snprintf(dir, sizeof dir, "/tmp/onigpu-test-record-%d", (int)getpid());
    CHECK(unit_sh("rm -rf %s", dir) == 0);
    snprintf(arg, sizeof arg, "%s/run1", dir);
    /* a count of frames, not seconds: as many however busy the machine (the probe's are 99%) */
    CHECK_EQ(RUN("read", "--emu", REC_EMU, "--rig", "--frames", "31000", "--record", arg), 0);
    HAS("recording (openephys) into ");
    HAS("0x8 NP2.0e probes A and B");
    HAS("recorded into ");
    int st = check_recording(arg, 30000);
    if (st != 77)
        CHECK_EQ(st, 0);
    CHECK_EQ(RUN("read", "--emu", REC_EMU, "--rig", "--frames", "10", "--record", arg), 1);
    HAS("holds a recording already");
    if (st != 77)
        CHECK_EQ(check_recording(arg, 30000), 0); /* untouched */
    CHECK_EQ(RUN("read", "--emu", REC_EMU, "--frames", "10", "--record", "/dev/null/rec"), 1);
    HAS("cannot make the directory /dev/null/rec: Not a directory");
    CHECK_EQ(RUN("read", "--driver", "test", "--record"), 2);
    HAS("onigpu read: --record needs a value: the directory of the recording");
    CHECK_EQ(RUN("read", "--driver", "test", "--format", "nwb"), 2);
    HAS("--format is the format of --record DIR");
    CHECK_EQ(RUN("read", "--driver", "test", "--record", arg, "--format", "raw"), 2);
    HAS("one of openephys, nwb");
    CHECK(unit_sh("rm -rf %s", dir) == 0);
}

/* A write that fails (here a file size limit, as a full disk would) stops
 * the recording with exit 1 and a message naming the file; what it holds is
 * whole. */
TEST(read_record_write_failure_keeps_whole_records)
{
    NEED_BIN();
    char dir[64];
    snprintf(dir, sizeof dir, "/tmp/onigpu-test-recfail-%d", (int)getpid());
    CHECK(unit_sh("rm -rf %s && mkdir -p %s", dir, dir) == 0);
    /* onigpu ignores SIGXFSZ itself: a write past the limit fails with EFBIG
     * instead of ending the process with a torn file. 8 MB: 0.36 s of the probe */
    int st = unit_sh("cd %s && ulimit -f 8192 && exec timeout 120 \"$ONIGPU_BIN/onigpu\" read --emu '" REC_EMU "' "
                     "--rig --frames 40000 --record rec >out.txt 2>&1",
                     dir);
    CHECK_EQ(st, 1);
    CHECK(unit_sh("grep -q 'recording stopped: cannot write into .*continuous/ONIX-100.PortA-ProbeA: File too large' "
                  "%s/out.txt", dir) == 0);
    char rec[80];
    snprintf(rec, sizeof rec, "%s/rec", dir);
    st = check_recording(rec, 3000); /* the limit came after about 10900 rows */
    if (st != 77)
        CHECK_EQ(st, 0);
    CHECK(unit_sh("rm -rf %s", dir) == 0);
}

/* Ctrl-C ends a recording as it ends a read: exit 0, every stream whole,
 * nothing for `onigpu recover` to do. */
TEST(read_record_interrupted_ends_whole)
{
    NEED_BIN();
    char dir[64];
    snprintf(dir, sizeof dir, "/tmp/onigpu-test-recint-%d", (int)getpid());
    CHECK(unit_sh("rm -rf %s", dir) == 0);
    int fd;
    pid_t pid = spawn_prog("onigpu", (const char *const[]){"read", "--emu", REC_EMU, "--rig", "--seconds", "60",
                                                          "--record", dir, NULL},
                           &fd);
    REQUIRE(pid > 0);
    /* until stopsig's thread takes SIGINT, and the recording has begun */
    for (int i = 0; i < 1000 && (threads_taking(pid, SIGINT) < 1 ||
                                 unit_sh("test -f %s/Record\\ Node\\ 101/experiment1/recording1/structure.oebin", dir));
         i++)
        usleep(10000);
    usleep(1500000);
    kill(pid, SIGINT);
    CHECK_EQ(finish_prog(pid, fd), 0);
    HAS("recorded into ");
    int st = check_recording(dir, 300);
    if (st != 77)
        CHECK_EQ(st, 0);
    CHECK_EQ(RUN("recover", dir), 0);
    HAS("nothing to do");
    CHECK(unit_sh("rm -rf %s", dir) == 0);
}

/* Sizes: K, M, G are powers of 1024 with or without "iB", "kB" powers of 1000,
 * fractions rounded; numbers decimal or 0x hex, never octal; durations in s,
 * ms or us (docs/cli.md). The block size read back shows what was parsed. */
TEST(read_sizes_numbers_and_durations)
{
    NEED_BIN();
    CHECK_EQ(RUN("read", "--driver", "test", "--frames", "10", "--block", "64K"), 0);
    HAS("block 65536 B");
    CHECK_EQ(RUN("read", "--driver", "test", "--frames", "10", "--block", "64KiB"), 0);
    HAS("block 65536 B");
    CHECK_EQ(RUN("read", "--driver", "test", "--frames", "10", "--block", "64kB"), 0);
    HAS("block 64000 B");
    /* 0.001 GiB = 1073741.824 B: rounded to 1073742, not a multiple of 4, refused by liboni */
    CHECK_EQ(RUN("read", "--driver", "test", "--frames", "10", "--block", "0.001G"), 1);
    HAS("block size 1073742 refused");
    CHECK_EQ(RUN("read", "--driver", "test", "--frames", "010"), 0);
    HAS("read 10 frames in");
    /* what strtod takes beyond that is no size here (found by a review) */
    static const char *const not_sizes[] = {"1e3", " 4096", "+4096", "0x1p12", ".5K", "inf"};
    for (size_t i = 0; i < sizeof not_sizes / sizeof *not_sizes; i++)
        CHECK_EQ(RUN("read", "--driver", "test", "--frames", "10", "--block", not_sizes[i]), 2);
    /* nor a duration (an audit: they were read with strtod alone) */
    static const char *const not_durations[] = {"1e-1", " 0.1", "+0.1", "0x1p-3"};
    for (size_t i = 0; i < sizeof not_durations / sizeof *not_durations; i++)
        CHECK_EQ(RUN("read", "--driver", "test", "--seconds", not_durations[i]), 2);
    CHECK_EQ(RUN("read", "--driver", "test", "--frames", "10", "--block", "0x1000"), 0);
    HAS("block 4096 B");
    CHECK_EQ(RUN("read", "--driver", "test", "--seconds", "200ms"), 0);
    HAS("reading for 0.2 s");
}

/* Limits the parser must refuse itself: 0 s would mean no limit, 4 GiB does
 * not fit ONI_OPT_BLOCKREADSIZE (it would wrap to 0). */
TEST(read_limits_out_of_range)
{
    NEED_BIN();
    CHECK_EQ(RUN("read", "--driver", "test", "--seconds", "0"), 2);
    HAS("onigpu read: --seconds 0: must be a duration above 0 s");
    CHECK_EQ(RUN("read", "--driver", "test", "--block", "4G"), 2);
    HAS("onigpu read: --block 4G: must be a size from 1 B to 4294967295 B");
}

/* No --frames or --seconds: one second. Only readable devices get a row. */
TEST(read_defaults_to_one_second)
{
    NEED_BIN();
    CHECK_EQ(RUN("read", "--driver", "test"), 0);
    HAS("reading for 1 s from driver test");
    HAS("\n  1.0 ");
    CHECK(!strstr(out, "\n  0.3 ")); /* DOUTPUT32: write-only */
    CHECK(!strstr(out, "\n  0.254 ")); /* the hub manager: neither */
}

/* --timeout is applied: with the context's default at 60 s ($ONI_TIMEOUTMS)
 * and a device that makes one frame a second, --timeout 50 ends the read at
 * the second frame's wait with a timeout (exit 1). Were it ignored, the read
 * would wait the second out and get its three frames (exit 0). No clock is
 * read: the outcome alone tells, unless the reader stalls for two seconds. */
TEST(read_timeout_is_applied)
{
    NEED_BIN();
    setenv("ONI_TIMEOUTMS", "60000", 1);
    int rc = RUN("read", "--emu", "devices=memusage:hz=1", "--timeout", "50", "--frames", "3");
    unsetenv("ONI_TIMEOUTMS");
    CHECK_EQ(rc, 1);
    HAS("read stopped: Operation timed out");
}

/* The connection options: a missing value is not the next option, a longer
 * name is not the option, an empty driver name and a host past 10^6 are
 * usage errors (exit 2), not failures to open (exit 1). */
TEST(connection_option_edges)
{
    NEED_BIN();
    CHECK_EQ(RUN("info", "--driver", "--verbose"), 2);
    HAS("onigpu info: --driver needs a value: a driver name");
    CHECK_EQ(RUN("info", "--drivers", "test"), 2);
    CHECK_EQ(RUN("info", "--driver="), 2);
    CHECK_EQ(RUN("info", "--driver", "test", "--host", "2000000"), 2);
    CHECK_EQ(RUN("info", "--driver", "test", "--host", "4294967295"), 2);
}

TEST(read_verify_skipped_for_other_drivers)
{
    NEED_BIN();
    /* the emu driver streams: any failure here is a failure, not a skip */
    CHECK_EQ(RUN("read", "--driver", "emu", "--frames", "100", "--verify"), 0);
    HAS("verify: skipped");
    HAS("read 100 frames");
    HAS("fifo default"); /* emu answers ONI_DRV_STREAM_STATS */
    HAS("dropped");
}

/* A driver that calls itself "test" is not therefore onigpu's test driver:
 * upstream's own test driver does too, and --verify failed all its frames
 * as bad (found running upstream's driver, 2026-12-05). Only a driver that
 * answers ONITEST_OPT_STATS has frames to check. */
TEST(read_verify_needs_our_test_driver_not_its_name)
{
    NEED_BIN();
    CHECK_EQ(RUN("read", "--driver", "compattest", "--frames", "1000", "--verify"), 0);
    HAS("read 1000 frames in");
    HAS("verify: skipped (driver 'test' 1.0.0 is not onigpu's test driver");
    CHECK(!strstr(out, "FAILED"));
}

/* Fast mode: per-device drops (DROPPED registers), rates in emulated time next to
 * wall-clock rates, rejected write frames, and --truth writing the ground truth. */
TEST(read_emu_fast_truth_and_drops)
{
    NEED_BIN();
    char path[64];
    snprintf(path, sizeof path, "/tmp/onigpu-test-cli-truth-%d.csv", (int)getpid());
    FILE *f = fopen(path, "w"); /* a stale file is replaced, not appended to */
    REQUIRE(f);
    fputs("stale\n", f);
    fclose(f);
    /* 30000 frames: about 1 s of emulated time (rhd2164 at 30 kHz) */
    CHECK_EQ(RUN("read", "--emu", "devices=rhd2164;mode=fast;seed=5", "--frames", "30000", "--truth", path), 0);
    HAS("dropped");
    HAS("acq frames/s");
    HAS("30000.0"); /* rhd2164's rate in acquisition-clock time */
    HAS("write frames rejected as malformed: 0");
    f = fopen(path, "r");
    REQUIRE(f);
    char line[256];
    int rows = 0, header = fgets(line, sizeof line, f) && !strcmp(line, "dev_idx,unit,channel,sample_time,snr\n");
    unsigned dev, unit, ch;
    unsigned long long t;
    float snr;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "%u,%u,%u,%llu,%f", &dev, &unit, &ch, &t, &snr) == 5 && dev == 0x100 && ch < 384 && snr > 0)
            rows++;
        else
            UNIT_FAIL("bad truth row: %s", line);
    fclose(f);
    remove(path);
    CHECK(header);
    CHECK(rows > 0);
    /* realtime mode: no emulated-time column */
    CHECK_EQ(RUN("read", "--emu", "devices=heartbeat:hz=1000", "--frames", "20"), 0);
    HAS("dropped");
    CHECK(!strstr(out, "acq frames/s"));
}

TEST(reg_get_set_and_errors)
{
    NEED_BIN();
    CHECK_EQ(RUN("reg", "get", "1.0", "2", "--driver", "test"), 0);
    HAS("1.0 reg 0x2 = 0x00000002 (2)");
    CHECK_EQ(RUN("reg", "get", "1.0", "2", "--timeout=50", "--driver", "test"), 0);
    HAS("= 0x00000002 (2)");
    CHECK_EQ(RUN("reg", "--driver", "test", "get", "0x100", "0x3"), 0);
    HAS("= 0x0000008e (142)");
    CHECK_EQ(RUN("reg", "get", "2.254", "4", "--driver", "test"), 0);
    HAS("= 0x02faf080 (50000000)");
    CHECK_EQ(RUN("reg", "set", "1.0", "1", "0xdeadbeef", "--driver", "test"), 0);
    HAS("1.0 reg 0x1 <- 0xdeadbeef");
    CHECK_EQ(RUN("reg", "set", "1.0", "3", "5", "--driver", "test"), 1);
    HAS("NACK");
    HAS("read-only");
    CHECK_EQ(RUN("reg", "get", "1.0", "99", "--driver", "test"), 1);
    HAS("NACK");
    CHECK_EQ(RUN("reg", "set", "0.1", "2", "0", "--driver", "test"), 1); /* RATE 0 out of range */
    HAS("NACK");
}

TEST(reg_bad_arguments)
{
    NEED_BIN();
    CHECK_EQ(RUN("reg", "--driver", "test"), 2);
    HAS("usage: onigpu reg");
    CHECK_EQ(RUN("reg", "get", "1.0", "--driver", "test"), 2);
    CHECK_EQ(RUN("reg", "get", "1.0", "2", "3", "--driver", "test"), 2);
    CHECK_EQ(RUN("reg", "set", "1.0", "2", "--driver", "test"), 2);
    CHECK_EQ(RUN("reg", "get", "1.x", "2", "--driver", "test"), 2);
    HAS("onigpu reg: DEV 1.x: must be a device index");
    CHECK_EQ(RUN("reg", "get", "256.0", "2", "--driver", "test"), 2);
    CHECK_EQ(RUN("reg", "get", "1.0", "0x1ffffffff", "--driver", "test"), 2);
    HAS("onigpu reg: ADDR 0x1ffffffff: must be a register address from 0 to 0xffffffff");
    CHECK_EQ(RUN("reg", "set", "1.0", "1", "-1", "--driver", "test"), 2);
    CHECK_EQ(RUN("reg", "frob", "1.0", "1", "--driver", "test"), 2);
    CHECK_EQ(RUN("reg", "get", "1.0", "2", "--verbose", "--driver", "test"), 2);
    CHECK_EQ(RUN("reg", "get", "1.0", "2", "--timeout", "0", "--driver", "test"), 2);
    CHECK_EQ(RUN("reg", "get", "1.0", "2", "--timeout", "soon", "--driver", "test"), 2);
    CHECK_EQ(RUN("reg", "--help"), 0);
    HAS("usage: onigpu reg");
}

/* 32-bit values to the last one; hub.dev parts are 8 bits each; an index
 * above 16 bits is printed in hex, not as hub.dev. */
TEST(reg_number_edges)
{
    NEED_BIN();
    CHECK_EQ(RUN("reg", "set", "1.0", "1", "0xffffffff", "--driver", "test"), 0);
    HAS("1.0 reg 0x1 <- 0xffffffff (4294967295)");
    CHECK_EQ(RUN("reg", "get", "1.256", "2", "--driver", "test"), 2);
    HAS("onigpu reg: DEV 1.256: must be a device index: a number (decimal or 0x hex) or hub.dev (each 0 to 255)");
    CHECK_EQ(RUN("reg", "get", "0x10000", "2", "--driver", "test"), 1);
    HAS("device 0x10000 refused (NACK)");
}

/* A command that fails after its arguments were good exits 1: here bench
 * frames cannot load its driver (an --out it cannot write is refused before
 * any work, exit 2: test_bench_cli). */
TEST(failure_after_good_arguments_exits_1)
{
    NEED_BIN();
    char dir[] = "/tmp/onigpu-fag-XXXXXX";
    REQUIRE(mkdtemp(dir));
    CHECK_EQ(RUN("bench", "frames", "--driver", "nosuch", "--blocks", "4K", "--seconds", "0.02", "--out", dir), 1);
    HAS("no block size could be measured with driver 'nosuch'");
    CHECK(unit_sh("rm -rf %s", dir) == 0);
}

/* Is there a file matching the shell pattern? */
static int have(const char *dir, const char *pattern)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd, "ls %s/%s >/dev/null 2>&1", dir, pattern);
    return system(cmd) == 0;
}

/* The rows of `onigpu bench emu`'s result set in dir: one per link preset,
 * their rates from the counts, the link model from the preset's bandwidth
 * and latency (latency + 1 MiB / bandwidth per MiB), the ratios of them. */
static void check_emu_liboni_rows(const char *dir)
{
    json_t *v = result_set_load(dir, "emu/emu-liboni-*.json");
    REQUIRE(v != NULL);
    CHECK_EQ(result_rows(v), 6);
    size_t counted = 0;
    for (size_t i = 0; i < result_rows(v); i++) {
        double frames = result_num(v, i, "frames"), mbs = result_num(v, i, "mb_per_s");
        double bw = result_num(v, i, "bandwidth_Bps"), lat = result_num(v, i, "latency_s");
        double model = result_num(v, i, "model_mb_per_s");
        /* bytes read, each frame with its 16-byte header: test core frames
         * of 4096 bytes and now and then a short one of another device
         * (about one in 5000), so more than 4096 a frame once there are some hundreds */
        double bytes = mbs * result_num(v, i, "seconds") * 1e6;
        if (frames >= 300) {
            counted++;
            if (!(bytes > 4096 * frames && bytes <= 4112 * frames * (1 + 1e-9)))
                UNIT_FAIL("row %zu: %.0f bytes in %.0f frames, want 4096 .. 4112 a frame", i, bytes, frames);
        }
        double ns = lat * 1e9 + (bw > 0 ? 1048576 / bw * 1e9 : 0);
        CHECK(result_close(model, ns > 0 ? bench_mb_per_s(1048576, ns) : 0));
        /* each sample holds one block read, which waits out the link model
         * (a lower bound: load makes it longer); one with none took about a
         * microsecond when a frame ended on a block's end (1 block in 257) */
        if (ns > 0 && !(result_num(v, i, "mib_min_ns") >= 0.99 * ns))
            UNIT_FAIL("row %zu: a block in %.0f ns, under the link model's %.0f", i, result_num(v, i, "mib_min_ns"),
                      ns);
        CHECK(result_close(result_num(v, i, "over_model"), model > 0 ? mbs / model : 0));
        CHECK(result_close(result_num(v, i, "mb_per_s_p50_mib"),
                           bench_mb_per_s(1048576, result_num(v, i, "mib_p50_ns"))));
    }
    CHECK(counted > 0);
    json_decref(v);
}

/* `onigpu bench emu`: the card through liboni (above the boundary): link
 * presets, generation, echo, age; its result set and its arguments. */
TEST(bench_emu_writes_results)
{
    NEED_BIN();
    char dir[] = "/tmp/onigpu-be-XXXXXX";
    REQUIRE(mkdtemp(dir));
    /* 0.2 s: past 257 blocks at gen2x4, where a frame ends on a block's end */
    CHECK_EQ(RUN("bench", "emu", "--seconds=0.2", "--out", dir), 0); /* --opt=VALUE: found by a review */
    HAS("liboni gen2x4");
    HAS("liboni unlimited");
    CHECK(have(dir, "emu/emu-liboni-*.csv") && have(dir, "emu/emu-liboni-*.json"));
    CHECK(unit_sh("grep -q '\"command\": \"onigpu bench emu --seconds=0.2 --out ' %s/emu/emu-liboni-*.json",
                  dir) == 0);
    check_emu_liboni_rows(dir);
    CHECK_EQ(RUN("bench", "emu", "--seconds", "0"), 2);
    CHECK_EQ(RUN("bench", "emu", "--seconds=inf"), 2);
    HAS("onigpu bench emu: --seconds inf: must be a duration above 0 s and at most 3600 s");
    /* at most an hour: inside, the run gets to its --out (refused, exit 2); outside, a bad argument */
    CHECK_EQ(RUN("bench", "emu", "--seconds", "3600", "--out", "/dev/null/sub"), 2);
    HAS("--out /dev/null/sub: ");
    CHECK_EQ(RUN("bench", "emu", "--seconds", "3601", "--out", "/dev/null/sub"), 2);
    HAS("onigpu bench emu: --seconds 3601: must be a duration above 0 s and at most 3600 s");
    /* the card's own parts, through liboni */
    CHECK_EQ(RUN("bench", "emu", "--seconds", "0.05", "--only", "gen,echo,age", "--out", dir), 0);
    HAS("generate rhd2164 ");
    HAS("echo gen2x4");
    HAS("echo unlimited");
    CHECK(!strstr(out, "echo gen3x8")); /* the echo: slowest and unlimited link only */
    HAS("age  rhd2164 realtime wake=sleep");
    HAS("age  rhd2164 realtime wake=spin");
    CHECK(!strstr(out, "liboni gen2x4")); /* link not asked for */
    CHECK(have(dir, "emu/emu-liboni-*-gen.csv") && have(dir, "emu/emu-liboni-*-echo.csv") && have(dir, "emu/emu-liboni-*-age.csv"));
    CHECK_EQ(RUN("bench", "emu", "--only", "liboni"), 2);
    HAS("onigpu bench emu: --only liboni: must be one of link, gen, echo, age");
    CHECK_EQ(RUN("bench", "emu", "--only", "li"), 2); /* a part's name, not a prefix of one */
    CHECK(unit_sh("rm -rf %s", dir) == 0);
}

/* The exit status of `onigpu ARGS` (a shell word list) with stdout alone
 * in *bytes (stderr discarded); -1 if it could not run. */
static int stdout_bytes(const char *args, long *bytes)
{
    char path[64], cmd[4400];
    snprintf(path, sizeof path, "/tmp/onigpu-test-cli-out-%d", (int)getpid());
    snprintf(cmd, sizeof cmd, "'%s/onigpu' %s >%s 2>/dev/null", getenv("ONIGPU_BIN"), args, path);
    int st = system(cmd);
    FILE *f = fopen(path, "r");
    *bytes = -1;
    if (f && !fseek(f, 0, SEEK_END))
        *bytes = ftell(f);
    if (f)
        fclose(f);
    remove(path);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* Found by a review: `onigpu` alone and an unknown command printed the
 * command list on stdout beside their exit status 2; a usage error goes to
 * stderr, the list asked for (--help) to stdout. */
TEST(usage_errors_print_on_stderr)
{
    NEED_BIN();
    long n;
    CHECK_EQ(stdout_bytes("", &n), 2);
    CHECK_EQ(n, 0);
    CHECK_EQ(stdout_bytes("nosuch", &n), 2);
    CHECK_EQ(n, 0);
    CHECK_EQ(stdout_bytes("bench nosuch", &n), 2);
    CHECK_EQ(n, 0);
    CHECK_EQ(stdout_bytes("--help", &n), 0);
    CHECK(n > 0);
    CHECK_EQ(RUN("nosuch"), 2);
    HAS("unknown command 'nosuch'");
    HAS("  bench loop ");
}

/* `onigpu --version`: the build's version, the ONI API the library speaks,
 * and what GPU it sees (here none, or one; either way a line). */
TEST(version_names_build_api_and_gpu)
{
    NEED_BIN();
    CHECK_EQ(RUN("--version"), 0);
    HAS("onigpu 0.1.0\n");
    HAS("ONI API 4.6.0 (liboni.so.1)\n");
    HAS("GPU: ");
    long n;
    CHECK_EQ(stdout_bytes("--version", &n), 0);
    CHECK(n > 0);
}

/* `onigpu bench` alone is the group of two-word bench commands: --help lists
 * them (exit 0); nothing or an unknown second word lists them too (exit 2). */
TEST(bench_group_help_lists_subcommands)
{
    NEED_BIN();
    static const char *const sub[] = {"  frames ", "  emu ", "  transfer ", "  loop ", "  remote ", "  floor "};
    CHECK_EQ(RUN("bench", "--help"), 0);
    HAS("usage: onigpu bench <command>");
    for (size_t i = 0; i < sizeof sub / sizeof sub[0]; i++)
        HAS(sub[i]);
    HAS("frames/s, MB/s, call latency"); /* the one-line description of bench frames */
    CHECK(!strstr(out, "unknown command"));
    CHECK_EQ(RUN("bench", "-h"), 0);
    HAS("  frames ");
    CHECK_EQ(RUN("bench"), 2);
    for (size_t i = 0; i < sizeof sub / sizeof sub[0]; i++)
        HAS(sub[i]);
    CHECK_EQ(RUN("bench", "nosuch"), 2);
    HAS("unknown command 'bench nosuch'");
    HAS("  transfer ");
    CHECK_EQ(RUN("bench", "frames", "--help"), 0);
    HAS("usage: onigpu bench frames");
    CHECK_EQ(RUN("bench", "remote", "--help"), 0); /* the options of the stream measurements */
    HAS("[--seconds T]");
    HAS("  --stream-block B BLOCKREADSIZE"); /* and its option-by-option help, */
    CHECK_EQ(RUN("bench", "transfer", "--help"), 0); /* never printed before 2026-11-25 */
    HAS("  --chunk BYTES   chunk size of the chunked path");
    CHECK_EQ(RUN("bench", "frames", "-h"), 0);
    HAS("  --second-thread start a thread that only waits");
    CHECK_EQ(RUN("--help"), 0);
    static const char *const all[] = {"  info ", "  read ", "  reg ", "  bench frames ", "  bench emu ",
                                      "  bench transfer ", "  bench loop ", "  bench remote ", "  bench floor "};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        HAS(all[i]);
}

/* `onigpu bench frames` with no block size that can be measured: a clear
 * message, exit 1, and no result file in --out. */
TEST(bench_frames_no_results_when_all_blocks_fail)
{
    NEED_BIN();
    char dir[] = "/tmp/onigpu-bf-XXXXXX";
    REQUIRE(mkdtemp(dir));
    CHECK_EQ(RUN("bench", "frames", "--driver", "test", "--blocks", "7", "--seconds", "0.02", "--out", dir), 1);
    HAS("block 7:");
    HAS("no block size could be measured");
    HAS("no results written");
    CHECK(!have(dir, "*"));
    CHECK_EQ(RUN("bench", "frames", "--driver", "no_such_driver_xyz", "--blocks", "4K", "--seconds", "0.02",
                 "--out", dir),
             1);
    HAS("no block size could be measured");
    CHECK(!have(dir, "*"));
    /* --seconds at most an hour; a --driver names one */
    CHECK_EQ(RUN("bench", "frames", "--driver", "no_such_driver_xyz", "--seconds", "3600"), 1);
    CHECK_EQ(RUN("bench", "frames", "--driver", "no_such_driver_xyz", "--seconds", "3601"), 2);
    CHECK_EQ(RUN("bench", "frames", "--driver="), 2);
    CHECK(unit_sh("rm -rf %s", dir) == 0);
}

/* One block size that fails among good ones: its row says why, the others
 * are measured and written, and the exit status is 1 (docs/cli.md). The
 * stream MB/s (headers included) is the payload's and a bit, not 1000x. */
TEST(bench_frames_failed_block_keeps_its_row)
{
    NEED_BIN();
    char dir[] = "/tmp/onigpu-bf3-XXXXXX";
    REQUIRE(mkdtemp(dir));
    CHECK_EQ(RUN("bench", "frames", "--driver", "test", "--blocks", "7,4K", "--seconds", "0.02", "--out", dir), 1);
    HAS("       7  failed: ");
    CHECK(unit_sh("grep -q '^test,7,\"Block read size' %s/frames/frames-*[0-9].csv", dir) == 0);
    /* block 4096: ok, stream_mb_per_s (column 11) from mb_per_s (10) to 100x it */
    CHECK(unit_sh("awk -F, '$2 == 4096 && $3 == \"ok\" && $11 >= $10 && $11 < 100 * $10 {n++} END {exit n != 1}' "
                  "%s/frames/frames-*[0-9].csv", dir) == 0);
    CHECK(unit_sh("rm -rf %s", dir) == 0);
}

/* `onigpu bench remote`'s limits of its counts, times and the stream
 * block: inside them the run gets to its --out (refused: exit 2, said),
 * outside they are bad arguments (the run itself: test_bench_cli). */
TEST(bench_remote_limits)
{
    NEED_BIN();
    CHECK_EQ(RUN("bench", "remote", "--reads", "0"), 2);
    CHECK_EQ(RUN("bench", "remote", "--stream-block", "8", "--seconds", "3600", "--out", "/dev/null/sub"), 2);
    HAS("--out /dev/null/sub: must be a directory: /dev/null is not a directory");
    CHECK_EQ(RUN("bench", "remote", "--stream-block", "6", "--out", "/dev/null/sub"), 2);
    HAS("onigpu bench remote: --stream-block 6: must be a size from 4 B to 16 MiB, a multiple of 4");
    CHECK_EQ(RUN("bench", "remote", "--seconds", "3601", "--out", "/dev/null/sub"), 2);
    HAS("onigpu bench remote: --seconds 3601: must be a duration above 0 s and at most 3600 s");
}

/* `onigpu bench frames --second-thread`: the run says which read path it
 * measured (docs/threads.md): the one-thread path without the option, the
 * threaded one with it. */
TEST(bench_frames_second_thread)
{
    NEED_BIN();
    char dir[] = "/tmp/onigpu-bf2-XXXXXX";
    REQUIRE(mkdtemp(dir));
    CHECK_EQ(RUN("bench", "frames", "--blocks", "4K", "--seconds", "0.05", "--second-thread", "--out", dir), 0);
    CHECK(unit_sh("grep -q '\"one_thread_path\": \"no\"' %s/frames/frames-*.json", dir) == 0);
    CHECK(unit_sh("grep -q '\"command\": \"onigpu bench frames --blocks 4K --seconds 0.05' %s/frames/frames-*.json",
                  dir) == 0);
    CHECK(unit_sh("rm -rf %s", dir) == 0);
    CHECK_EQ(RUN("bench", "frames", "--second-thread=1"), 2);
}

/* `onigpu bench floor`: usage on bad input (exit 2); with no GPU a clear
 * skip (exit 0, nothing written); with one, a short run that writes its
 * result set. */
TEST(bench_floor_arguments_and_no_gpu)
{
    NEED_BIN();
    CHECK_EQ(RUN("bench", "floor", "--help"), 0);
    HAS("usage: onigpu bench floor");
    CHECK_EQ(RUN("bench", "floor", "--reps", "0"), 2);
    HAS("onigpu bench floor: --reps 0: must be a whole number from 1 to 100000000");
    CHECK_EQ(RUN("bench", "floor", "--size", "4"), 2);
    CHECK_EQ(RUN("bench", "floor", "--mechs", "memcpy-query,nosuch"), 2);
    HAS("onigpu bench floor: --mechs nosuch: must be one of memcpy-query, memcpy-flag,");
    CHECK_EQ(RUN("bench", "floor", "--rounds"), 2);
    /* counts are whole numbers (found by a review: they were read as sizes,
     * --reps 100.4 ran 100, --rounds 16K 16384, --timeout-ms 1K 1024 ms) */
    CHECK_EQ(RUN("bench", "floor", "--reps", "100.4"), 2);
    CHECK_EQ(RUN("bench", "floor", "--rounds", "16K"), 2);
    CHECK_EQ(RUN("bench", "floor", "--timeout-ms", "1K"), 2);
    char dir[] = "/tmp/onigpu-floor-XXXXXX";
    REQUIRE(mkdtemp(dir));
    CHECK_EQ(RUN("bench", "floor", "--reps", "20", "--rounds", "2", "--out", dir), 0);
    if (strstr(out, "no GPU: skipped"))
        CHECK(!have(dir, "*"));
    else
        CHECK(have(dir, "floor/floor-*.json"));
    if (!strstr(out, "no GPU: skipped")) { /* the command as typed (it was "floor --reps ...") */
        CHECK(unit_sh("grep -q '\"command\": \"onigpu bench floor --reps 20 ' %s/floor/floor-*.json", dir) == 0);
    }
    /* the largest size and timeout are taken */
    CHECK_EQ(RUN("bench", "floor", "--size", "16M", "--reps", "1", "--rounds", "1", "--mechs", "memcpy-query", "--out",
                 dir),
             0);
    CHECK_EQ(RUN("bench", "floor", "--timeout-ms", "600000", "--reps", "1", "--rounds", "1", "--mechs", "memcpy-query",
                 "--out", dir),
             0);
    CHECK(unit_sh("rm -rf %s", dir) == 0);
}

/* bench_emu_run refuses a time that is not above 0 (the CLI checks it
 * first; this is the function's own contract). */
TEST(bench_emu_run_refuses_bad_seconds)
{
    char dir[] = "/tmp/onigpu-ber-XXXXXX";
    REQUIRE(mkdtemp(dir));
    int err = 0;
    struct results *r = results_open(dir, "t", 0, NULL, NULL, &err);
    REQUIRE(r != NULL);
    const double bad[] = {0, -1, NAN};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        CHECK_RC(bench_emu_run(&(struct bench_emu_opts){bad[i], 1, 0}, r), ONI_EINVALARG);
    CHECK_RC(bench_emu_run(NULL, r), ONI_EINVALARG);
    results_close(r);
    CHECK(unit_sh("rm -rf %s", dir) == 0);
}

/* bench floor's mechanisms by name and back; its option check at the
 * documented edges (floor.h); without CUDA the run ends after the check. */
TEST(floor_mechanism_names_and_option_check)
{
    for (int m = 0; m < FLOOR_NMECH; m++) {
        const char *name = floor_mech_name(m);
        REQUIRE(name != NULL);
        CHECK_EQ(floor_mech_parse(name), m);
    }
    CHECK(floor_mech_name(-1) == NULL && floor_mech_name(FLOOR_NMECH) == NULL);
    CHECK_EQ(floor_mech_parse("nosuch"), -1);
    CHECK_EQ(floor_mech_parse(NULL), -1);
    const struct bench_floor_opts good = {.reps = 1, .size = 8, .mechs = FLOOR_ALL_MECHS, .rounds = 1,
                                          .timeout_ms = 1, .out_dir = "/nonexistent-dir"};
    struct bench_floor_opts o = good;
    CHECK_RC(bench_floor_check(&o), 0);
    o.size = FLOOR_MAX_SIZE;
    CHECK_RC(bench_floor_check(&o), 0);
    o.reps = FLOOR_MAX_REPS;
    o.mechs = 1;
    CHECK_RC(bench_floor_check(&o), 0);
    struct bench_floor_opts bad[] = {good, good, good, good, good, good, good, good, good, good};
    bad[0].reps = 0;
    bad[1].reps = FLOOR_MAX_REPS + 1ull;
    bad[2].size = 7;
    bad[3].size = 4;
    bad[4].size = FLOOR_MAX_SIZE + 1;
    bad[5].mechs = 0;
    bad[6].mechs = 1u << FLOOR_NMECH; /* no such mechanism */
    bad[7].rounds = 0;
    bad[8].timeout_ms = 0;
    bad[9].out_dir = NULL;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        if (bench_floor_check(&bad[i]) != ONI_EINVALARG)
            UNIT_FAIL("bad option set %zu accepted", i);
    CHECK_RC(bench_floor_check(NULL), ONI_EINVALARG);
    if (!ONIGPU_HAVE_CUDA) {
        int measured = 1;
        CHECK_RC(bench_floor_run(&good, NULL, &measured), ONI_ENOGPU);
        CHECK_EQ(measured, 0);
        CHECK_RC(bench_floor_run(&bad[3], NULL, &measured), ONI_EINVALARG);
    }
}

/* The list options share one parser of names and one of sizes (cli.h):
 * an unknown name is named, a bad size or an empty item list is a usage
 * error, in every command that takes them. */
TEST(bench_list_options)
{
    NEED_BIN();
    CHECK_EQ(RUN("bench", "transfer", "--paths", "reference,nosuch"), 2);
    HAS("onigpu bench transfer: --paths nosuch: must be one of reference, original,");
    CHECK_EQ(RUN("bench", "transfer", "--paths", ","), 2);
    CHECK_EQ(RUN("bench", "loop", "--backends", "cpu,nosuch"), 2); /* an unknown name is a bad argument */
    HAS("onigpu bench loop: --backends nosuch: must be one of cpu, gpu-staged,");
    HAS("usage: onigpu bench loop");
    CHECK_EQ(RUN("bench", "frames", "--blocks", "4K,0"), 2);
    CHECK_EQ(RUN("bench", "frames", "--blocks", "4K,x"), 2);
}

/* A workload file for advise holding text; its path in path (a mkstemp template). */
static int workload(char *path, const char *text)
{
    int fd = mkstemp(path);
    if (fd < 0)
        return -1;
    ssize_t n = write(fd, text, strlen(text));
    close(fd);
    return n == (ssize_t)strlen(text) ? 0 : -1;
}

/* advise on the workload text; its exit status, the output in out. */
static int advise_on(const char *text, const char *row)
{
    char path[] = "/tmp/onigpu-wl-XXXXXX";
    if (workload(path, text))
        return -1;
    int rc = RUN("advise", "--workload", path, "--row", row);
    unlink(path);
    return rc;
}

/* Found by a review: advise read the result file by text search, so a ']'
 * in a string ended the results early and a '{' in one was taken for the
 * start of the next row (row 1 here read row 0's block_bytes, 100). */
TEST(advise_workload_strings_are_strings)
{
    NEED_BIN();
    static const char *text =
        "{\"meta\": {\"command\": \"onigpu run --note \\\"results\\\": [{\\\"block_bytes\\\": 64}] }\"},\n"
        " \"results\": [\n"
        "  {\"backend\": \"a{b]\", \"block_bytes\": 100, \"ai\": 1},\n"
        "  {\"backend\": \"\\\"}\\\\\", \"block_bytes\": 12672, \"ai\": 5, \"note\": \"]}\\u00e9\"}\n"
        " ]}\n";
    CHECK_EQ(advise_on(text, "1"), 0);
    HAS("data 12672 B, compute 12672 B, AI ");
    CHECK_EQ(advise_on(text, "0"), 0);
    HAS("data 100 B, compute 100 B, AI ");
}

/* Rows that are not there, and files that are no result set, are named. */
TEST(advise_workload_missing_rows)
{
    NEED_BIN();
    CHECK_EQ(advise_on("{\"results\": [{\"block_bytes\": 4096, \"ai\": 1}]}", "1"), 2);
    HAS("has no result row 1 (it has 1)");
    CHECK_EQ(advise_on("{\"results\": []}", "0"), 2);
    HAS("has no result row 0 (it has 0)");
    CHECK_EQ(advise_on("{\"results\": {\"block_bytes\": 4096}}", "0"), 2);
    HAS("has no \"results\" array");
    CHECK_EQ(advise_on("[{\"results\": []}]", "0"), 2);
    HAS("has no \"results\" array");
    CHECK_EQ(advise_on("{\"results\": [[4096]]}", "0"), 2);
    HAS("row 0 is not an object: array");
    CHECK_EQ(advise_on("{\"results\": [{\"backend\": \"cpu\"}]}", "0"), 2);
    HAS("row 0: no block size (block_bytes, or data and compute)");
    HAS("usage: onigpu advise");
}

/* A value of the wrong type is named, not skipped (a string block_bytes was
 * passed over for the next way of finding the size). */
TEST(advise_workload_wrong_types)
{
    NEED_BIN();
    CHECK_EQ(advise_on("{\"results\": [{\"block_bytes\": \"12672\", \"ai\": 1}]}", "0"), 2);
    HAS("row 0: block_bytes is not a number: string");
    CHECK_EQ(advise_on("{\"results\": [{\"block_bytes\": 12672, \"ai\": \"9.74\"}]}", "0"), 2);
    HAS("row 0: ai is not a number: string");
    CHECK_EQ(advise_on("{\"results\": [{\"data\": 4000, \"compute\": \"4kB\", \"ai\": 1}]}", "0"), 2);
    HAS("row 0: data is not a string: number");
    CHECK_EQ(advise_on("{\"results\": [{\"block_bytes\": 12672, \"ai\": -1}]}", "0"), 2);
    HAS("row 0: ai -1 out of range");
    CHECK_EQ(advise_on("{\"results\": [{\"data\": \"2\", \"compute\": \"4\", \"ai\": 1}]}", "0"), 2);
    HAS("onigpu advise: data 2 B: must be 4 B to 1 GiB, a multiple of 4");
    /* null is "not recorded": the AI must then be given */
    CHECK_EQ(advise_on("{\"results\": [{\"block_bytes\": 12672, \"ai\": null}]}", "0"), 2);
    HAS("has no arithmetic intensity (ai): give --ai");
}

/* Text that is no JSON is refused with the place and the reason. */
TEST(advise_workload_malformed)
{
    NEED_BIN();
    CHECK_EQ(advise_on("{\"results\": [{\"block_bytes\": 12672, \"ai\": 1}", "0"), 2);
    HAS("line 1, column 44: ']' expected near end of file");
    CHECK_EQ(advise_on("{\"results\": [{\"block_bytes\": 12672, \"ai\": nan}]}", "0"), 2);
    HAS("line 1, column 45: invalid token near 'nan'");
    CHECK_EQ(advise_on("{\"results\": [{\"block_bytes\": 12672, \"ai\": 1}]} trailing", "0"), 2);
    HAS("line 1, column 55: end of file expected near 'trailing'");
    CHECK_EQ(advise_on("", "0"), 2);
    HAS("'[' or '{' expected near end of file");
    CHECK_EQ(RUN("advise", "--workload", "/nonexistent/w.json"), 2);
    HAS("/nonexistent/w.json: cannot open: No such file or directory");
}

/* A run row's ai is the ephys pipeline's FLOP per byte of block read;
 * advise's model (the MAC kernel) counts its AI per byte read and written,
 * so the row's figure is halved for it (found by a review: it was taken as
 * it is, and the model computed twice the pipeline's FLOPs). A bench loop
 * row's ai is the MAC's already and stays. */
TEST(advise_workload_run_ai_counted_once)
{
    NEED_BIN();
    CHECK_EQ(advise_on("{\"results\": [{\"block_frames\": 16, \"block_bytes\": 12672, \"ai\": 9.74}]}", "0"), 0);
    HAS("AI 4.87 is modelled as 4.75: the MAC kernel's AI comes in quarters");
    HAS("AI 9.74 FLOP/byte of block read, 4.75 per byte read and written (the model's)");
    HAS("for 12672 B in / 12672 B compute / AI 4.75:");
    CHECK_EQ(advise_on("{\"results\": [{\"data\": \"4kB\", \"compute\": \"40kB\", \"ai\": 0.75}]}", "0"), 0);
    HAS("data 4000 B, compute 40000 B, AI 0.75 FLOP/byte\n");
    HAS("for 4000 B in / 40000 B compute / AI 0.75:");
}

/* An option's value is never the next option: "--out --seconds=0.1" lacks
 * the directory (found by a review: the bench commands took the option as
 * the directory, while info, read and reg refused it). */
TEST(bench_option_value_is_not_an_option)
{
    NEED_BIN();
    /* the next option in its --opt=VALUE form: it ran, with results in
     * ./--seconds=0.1 */
    CHECK_EQ(RUN("bench", "emu", "--out", "--seconds=0.1"), 2);
    HAS("usage: onigpu bench emu");
    CHECK(access("--seconds=0.1", F_OK) != 0);
}

/* Found by a review: bench transfer read its repetition counts as sizes, so
 * "--max-reps 1.5" ran 2 per size and "--min-reps 2.5k" 2560; counts are
 * whole numbers, as bench loop's --blocks. */
TEST(bench_transfer_counts_are_whole_numbers)
{
    NEED_BIN();
    char scratch[] = "/tmp/onigpu-btc-XXXXXX"; /* an --out that takes files: refused before any work if not */
    REQUIRE(mkdtemp(scratch));
    char none[] = "/tmp/onigpu-btn-XXXXXX"; /* an --out no refused run may make */
    REQUIRE(mkdtemp(none) && rmdir(none) == 0);
    CHECK_EQ(RUN("bench", "transfer", "--max-reps", "1.5", "--out", none), 2);
    HAS("onigpu bench transfer: --max-reps 1.5: must be a whole number >= 1");
    CHECK_EQ(RUN("bench", "transfer", "--min-reps", "2.5k", "--out", none), 2);
    CHECK_EQ(RUN("bench", "transfer", "--max-reps", "16K", "--out", none), 2);
    CHECK_EQ(RUN("bench", "transfer", "--max-reps", "0", "--out", none), 2);
    /* --agent-max up to 1 GiB, the largest GPU block: past the arguments (no GPU: exit 1; one: no --out) */
    CHECK(RUN("bench", "transfer", "--sizes", "4K:4K", "--total", "4K", "--paths", "staged", "--link", "unlimited",
              "--agent-max", "1G", "--out", scratch) != 2);
    CHECK(access(none, F_OK) != 0);
    CHECK(unit_sh("rm -rf %s", scratch) == 0);
}

/* Found by a review: "--link ," (or "--link ''") named no preset, so bench
 * transfer measured nothing and exited 0, as if it had succeeded. */
TEST(bench_transfer_empty_link_list)
{
    NEED_BIN();
    char none[] = "/tmp/onigpu-btl-XXXXXX"; /* an --out no refused run may make */
    REQUIRE(mkdtemp(none) && rmdir(none) == 0);
    CHECK_EQ(RUN("bench", "transfer", "--link", ",", "--out", none), 2);
    HAS("onigpu bench transfer: --link ,: must be a comma-separated list, each a link preset (gen2x4,");
    CHECK_EQ(RUN("bench", "transfer", "--link", "", "--out", none), 2);
    HAS("onigpu bench transfer: --link '': must be a comma-separated list, each a link preset");
    CHECK(access(none, F_OK) != 0);
}

/* --sizes A:B doubles from A: a B off that doubling (whose target row and
 * histograms were then silently missing) or above a GPU block is refused,
 * and sizes that miss 4096 say there is no 4 KiB target row. */
TEST(bench_transfer_sizes_on_the_doubling)
{
    NEED_BIN();
    char scratch[] = "/tmp/onigpu-bts-XXXXXX";
    REQUIRE(mkdtemp(scratch));
    char none[] = "/tmp/onigpu-btd-XXXXXX"; /* an --out no refused run may make */
    REQUIRE(mkdtemp(none) && rmdir(none) == 0);
    CHECK_EQ(RUN("bench", "transfer", "--sizes", "64:10M", "--out", none), 2);
    CHECK_EQ(RUN("bench", "transfer", "--sizes", "64:2G", "--out", none), 2);
    CHECK_EQ(RUN("bench", "transfer", "--sizes", "100:4K", "--out", none), 2);
    HAS("onigpu bench transfer: --sizes 100:4K: must be A:B or A, sizes doubling from A to B");
    CHECK(access(none, F_OK) != 0);
    CHECK(RUN("bench", "transfer", "--sizes", "8K:16K", "--total", "16K", "--paths", "staged", "--link", "unlimited",
              "--out", scratch) != 2);
    HAS("no 4 KiB target row");
    CHECK(RUN("bench", "transfer", "--sizes", "64:2K", "--total", "16K", "--paths", "staged", "--link", "unlimited",
              "--out", scratch) != 2);
    HAS("no 4 KiB target row"); /* B below 4096 */
    /* one size (A = B) is a run: the benchmark takes it as the CLI does */
    CHECK(RUN("bench", "transfer", "--sizes", "8K:8K", "--total", "16K", "--paths", "staged", "--link", "unlimited",
              "--out", scratch) != 2);
    CHECK(strstr(out, "Invalid function argument") == NULL);
    CHECK(unit_sh("rm -rf %s", scratch) == 0);
}

/* Wait up to ms for a spawn_prog child to end, then kill it: its exit
 * status, -1 if a signal ended it, -2 if it had to be killed. Its output
 * into out; closes fd. */
static int wait_prog(pid_t pid, int fd, int ms)
{
    siginfo_t info = {0};
    int done = 0; /* WNOWAIT: finish_prog reaps it */
    for (int t = 0; t < ms && !(done = !waitid(P_PID, (id_t)pid, &info, WEXITED | WNOHANG | WNOWAIT) &&
                                       info.si_pid == pid);
         t += 10)
        usleep(10000);
    if (!done)
        kill(pid, SIGKILL);
    int rc = finish_prog(pid, fd);
    return done ? rc : -2;
}

/* Run $ONIGPU_BIN/onigpu for at most 5 s (wait_prog). */
static int run_briefly(const char *const *args)
{
    int fd;
    pid_t pid = spawn_prog("onigpu", args, &fd);
    return pid < 0 ? (int)pid : wait_prog(pid, fd, 5000);
}
#define RUN_BRIEFLY(...) run_briefly((const char *const[]){__VA_ARGS__, NULL})

/* `onigpu serve` started with args: its pid, its output's fd, the address
 * from its first line ("... on HOST:PORT"); -1 if it did not say in 5 s. */
static pid_t serve_start(const char *const *args, int *fd, char *addr, size_t cap)
{
    pid_t pid = spawn_prog("onigpu", args, fd);
    if (pid < 0)
        return -1;
    char line[256];
    size_t n = 0;
    struct pollfd p = {.fd = *fd, .events = POLLIN};
    while (n < sizeof line - 1 && poll(&p, 1, 5000) > 0 && read(*fd, line + n, 1) == 1 && line[n] != '\n')
        n++;
    line[n] = 0;
    const char *on = strstr(line, " on ");
    if (!on) {
        wait_prog(pid, *fd, 0);
        return -1;
    }
    snprintf(addr, cap, "%s", on + 4);
    return pid;
}

/* One client session on addr through the net driver: init's result. */
static int net_session(const char *addr)
{
    oni_ctx ctx = oni_create_ctx("net");
    if (!ctx)
        return ONI_EINVALARG;
    int rc = oni_set_driver_opt(ctx, ONI_DRV_NET_ADDR, addr, strlen(addr) + 1);
    if (!rc)
        rc = oni_init_ctx(ctx, -1);
    oni_destroy_ctx(ctx);
    return rc;
}

/* `onigpu serve`: bad arguments (and a bad $ONIGPU_EMU for the emulated
 * card) are usage errors and a driver or address it cannot serve fails, at
 * once; --sessions N exits after N sessions;
 * without it, sessions follow one another until SIGTERM, which ends it
 * cleanly (exit 0). */
TEST(serve_sessions_and_exits)
{
    NEED_BIN();
    CHECK_EQ(RUN_BRIEFLY("serve", "--listen", "127.0.0.1:0", "--driver"), 2);
    CHECK_EQ(RUN_BRIEFLY("serve", "--listen", "127.0.0.1:0", "--sessions", "many"), 2);
    CHECK_EQ(RUN_BRIEFLY("serve", "--listen", "127.0.0.1:0", "--frames", "3"), 2);
    CHECK_EQ(RUN_BRIEFLY("serve", "--driver", "nosuch", "--listen", "127.0.0.1:0"), 1);
    HAS("no driver 'nosuch'");
    CHECK_EQ(RUN_BRIEFLY("serve", "--driver", "test", "--listen", "nohostport"), 1);
    HAS("bad address");
    setenv("ONIGPU_EMU", "devices=nosuch", 1); /* the emulated card of sessions that name none: checked first */
    CHECK_EQ(RUN_BRIEFLY("serve", "--listen", "127.0.0.1:0"), 2);
    unsetenv("ONIGPU_EMU");
    HAS("onigpu serve: $ONIGPU_EMU \"devices=nosuch\": not a card spec (oniemu.h)");
    HAS("unknown device 'nosuch'");

    int fd;
    char addr[96];
    pid_t pid = serve_start((const char *const[]){"serve", "--driver", "test", "--listen", "127.0.0.1:0",
                                                  "--sessions", "2", NULL},
                            &fd, addr, sizeof addr);
    REQUIRE(pid > 0);
    CHECK_RC(net_session(addr), 0);
    CHECK_RC(net_session(addr), 0);
    CHECK_EQ(wait_prog(pid, fd, 5000), 0);
    HAS("session 2: ended");

    pid = serve_start((const char *const[]){"serve", "--driver", "test", "--listen", "127.0.0.1:0", NULL}, &fd,
                      addr, sizeof addr);
    REQUIRE(pid > 0);
    CHECK_RC(net_session(addr), 0);
    CHECK_RC(net_session(addr), 0);
    kill(pid, SIGTERM);
    CHECK_EQ(wait_prog(pid, fd, 5000), 0);
}

/* `onigpu read --net ... --verify`: frames checked after their trip over the
 * network when the server serves the test driver, the check skipped with a
 * message when it serves another (emu), as for a local driver. */
TEST(read_verify_through_net)
{
    NEED_BIN();
    static const char *const drivers[] = {"test", "emu"};
    for (int k = 0; k < 2; k++) {
        int fd;
        char addr[96];
        pid_t pid = serve_start((const char *const[]){"serve", "--driver", drivers[k], "--listen", "127.0.0.1:0",
                                                      "--sessions", "1", NULL},
                                &fd, addr, sizeof addr);
        REQUIRE(pid > 0);
        /* the default card sends ~200 frames/s until a headstage is configured */
        CHECK_EQ(RUN("read", "--net", addr, "--frames", k ? "400" : "20000", "--verify"), 0);
        if (k == 0) {
            HAS("verify: ok");
            CHECK(strstr(out, "verify: skipped") == NULL);
        } else {
            HAS("verify: skipped");
        }
        CHECK_EQ(wait_prog(pid, fd, 5000), 0);
    }
}

/* Every bad argument of every command is said one way (cli.h, docs/cli.md):
 * "onigpu <cmd>: <opt> <value>: must be <what is allowed>", or "<opt> needs
 * a value: ...", "unknown option", "unexpected argument"; then the usage
 * line, exit status 2, before any work starts. */
struct bad_case {
    const char *args[8];
    const char *says; /* the whole first line of the message, or its start */
};

static const struct bad_case bad_cases[] = {
    {{"info", "--host", "-2"}, "onigpu info: --host -2: must be -1 (the driver's default) or a whole number from 0 to 1000000\n"},
    {{"info", "--timeout", "0"}, "onigpu info: --timeout 0: must be a whole number from 1 to 4294967295 (decimal or 0x hex)\n"},
    {{"info", "--timeout=soon"}, "onigpu info: --timeout soon: must be a whole number from 1 to 4294967295"},
    {{"info", "--driver="}, "onigpu info: --driver '': must be a driver name"},
    {{"info", "--net"}, "onigpu info: --net needs a value: HOST:PORT of an `onigpu serve`\n"},
    {{"info", "--emu", "--driver", "test"}, "onigpu info: --emu needs a value: the emulated card's spec string"},
    {{"info", "--bogus"}, "onigpu info: --bogus: unknown option\n"},
    {{"info", "test"}, "onigpu info: test: unexpected argument\n"},
    {{"read", "--frames", "0"}, "onigpu read: --frames 0: must be a whole number >= 1 (decimal or 0x hex)\n"},
    {{"read", "--seconds", "-1"}, "onigpu read: --seconds -1: must be a duration above 0 s (as 2.5, 2.5s, 500ms, 100us)\n"},
    {{"read", "--block", "0"}, "onigpu read: --block 0: must be a size from 1 B to 4294967295 B (as 4096, 64K, 1M, 4kB)\n"},
    {{"read", "--truth", "/"}, "onigpu read: --truth /: must be a file to write: this is a directory\n"},
    {{"read", "--truth", "/nonexistent-onigpu/t.csv"},
     "onigpu read: --truth /nonexistent-onigpu/t.csv: must be a file in an existing directory: /nonexistent-onigpu: No such file or directory\n"},
    {{"read", "--truth", "/dev/null/t.csv"},
     "onigpu read: --truth /dev/null/t.csv: must be a file in a directory: /dev/null is not a directory\n"},
    {{"read", "--record="}, "onigpu read: --record '': must be the directory of the recording\n"},
    {{"read", "--verify=yes"}, "onigpu read: --verify=yes: takes no value\n"},
    {{"read", "--frames", "5", "--seconds", "1"}, "onigpu read: --frames and --seconds exclude each other: give one\n"},
    {{"reg", "peek", "1.0", "0"}, "onigpu reg: operation peek: must be get or set\n"},
    {{"reg"}, "onigpu reg: operation needs a value: get or set\n"},
    {{"reg", "get", "1.0"}, "onigpu reg: get takes DEV ADDR, 1 given\n"},
    {{"reg", "get", "x", "0"}, "onigpu reg: DEV x: must be a device index"},
    {{"reg", "get", "1.0", "-1"}, "onigpu reg: ADDR -1: must be a register address from 0 to 0xffffffff"},
    {{"reg", "set", "1.0", "0", "0x100000000"}, "onigpu reg: VALUE 0x100000000: must be a value from 0 to 0xffffffff"},
    {{"reg", "get", "1.0", "0", "--host", "x"}, "onigpu reg: --host x: must be -1"},
    {{"serve", "--sessions", "0"}, "onigpu serve: --sessions 0: must be a whole number from 1 to 4294967295 (decimal or 0x hex)\n"},
    {{"serve", "--sessions", "many"}, "onigpu serve: --sessions many: must be a whole number"},
    {{"serve", "--listen"}, "onigpu serve: --listen needs a value: HOST:PORT to listen on (port 0: any free one)\n"},
    {{"serve", "--driver="}, "onigpu serve: --driver '': must be a driver name"},
    {{"serve", "--frames", "3"}, "onigpu serve: --frames: unknown option\n"},
    {{"roofline", "--link", "gen9x1"},
     "onigpu roofline: --link gen9x1: must be a link preset (gen2x4, gen3x8, gen4x8, gen4x16, gen5x16, unlimited)\n"},
    {{"roofline", "--out", "/etc/hostname"}, "onigpu roofline: --out /etc/hostname: must be a directory: /etc/hostname is not a directory\n"},
    {{"roofline", "--out", "/etc/hostname/sub"}, "onigpu roofline: --out /etc/hostname/sub: must be a directory: /etc/hostname is not a directory\n"},
    {{"roofline", "extra"}, "onigpu roofline: extra: unexpected argument\n"},
    {{"advise", "--data", "6"}, "onigpu advise: --data 6: must be a size from 4 B to 1 GiB, a multiple of 4 (as 4096, 64K, 1M, 4kB)\n"},
    {{"advise", "--compute", "65G"}, "onigpu advise: --compute 65G: must be a size from 4 B to 64 GiB"},
    {{"advise", "--ai", "0.3"}, "onigpu advise: --ai 0.3: must be a multiple of 0.25 from 0.25 to 10000\n"},
    {{"advise", "--row", "1.5"}, "onigpu advise: --row 1.5: must be a whole number from 0 to 1000000"},
    {{"advise", "--workload"}, "onigpu advise: --workload needs a value: a result set's JSON file"},
    {{"advise", "--link="}, "onigpu advise: --link '': must be a link preset (gen2x4,"},
    {{"advise", "--serial=1"}, "onigpu advise: --serial=1: takes no value\n"},
    {{"advise", "--data", "4K", "--compute", "1K"}, "onigpu advise: compute 1024 B: must be at least the data, 4096 B"},
    {{"run", "--seconds", "0.4"},
     "onigpu run: --seconds 0.4: must be a duration of at least 0.5 s and at most 86400 s (as 2.5, 2.5s, 500ms, 100us)\n"},
    {{"run", "--seconds", "86401"}, "onigpu run: --seconds 86401: must be a duration of at least 0.5 s and at most 86400 s"},
    {{"run", "--block", "1501"}, "onigpu run: --block 1501: must be a whole number from 1 to 1500 (decimal or 0x hex)\n"},
    {{"run", "--block", "16.5"}, "onigpu run: --block 16.5: must be a whole number from 1 to 1500"},
    {{"run", "--probes", "0"}, "onigpu run: --probes 0: must be a whole number from 1 to 16"},
    {{"run", "--probes", "17"}, "onigpu run: --probes 17: must be a whole number from 1 to 16"},
    {{"run", "--cards", "0"}, "onigpu run: --cards 0: must be a whole number from 1 to 4"},
    {{"run", "--cards", "5"}, "onigpu run: --cards 5: must be a whole number from 1 to 4"},
    {{"run", "--backend", "gpu-magic"},
     "onigpu run: --backend gpu-magic: must be one of cpu, gpu-staged, gpu-direct, gpu-graph, gpu-flag, gpu-persistent, "
     "gpu-mapped\n"},
    {{"run", "--emu="}, "onigpu run: --emu '': must be the emulated card's spec string (oniemu.h)\n"},
    {{"run", "--devices"}, "onigpu run: --devices needs a value: the emulated card's spec string (oniemu.h)\n"},
    {{"run", "--link", "gen9x1"}, "onigpu run: --link gen9x1: must be a link preset (gen2x4, gen3x8, gen4x8, gen4x16, gen5x16, unlimited)\n"},
    {{"run", "--out", "/etc/hostname"}, "onigpu run: --out /etc/hostname: must be a directory: /etc/hostname is not a directory\n"},
    {{"run", "--out", "--seconds", "1"}, "onigpu run: --out needs a value: the name of a directory\n"},
    {{"run", "--bogus", "1"}, "onigpu run: --bogus: unknown option\n"},
    {{"run", "cpu"}, "onigpu run: cpu: unexpected argument\n"},
    {{"bench", "emu", "--seconds", "0"}, "onigpu bench emu: --seconds 0: must be a duration above 0 s and at most 3600 s (as 2.5, 2.5s, 500ms, 100us)\n"},
    {{"bench", "emu", "--only", "link,li"}, "onigpu bench emu: --only li: must be one of link, gen, echo, age (a comma-separated list, or all)\n"},
    {{"bench", "emu", "--only="}, "onigpu bench emu: --only '': must be one of link, gen, echo, age"},
    {{"bench", "emu", "--out", "/etc/hostname"}, "onigpu bench emu: --out /etc/hostname: must be a directory: /etc/hostname is not a directory\n"},
    {{"bench", "emu", "--bogus"}, "onigpu bench emu: --bogus: unknown option\n"},
    {{"bench", "floor", "--reps", "0"}, "onigpu bench floor: --reps 0: must be a whole number from 1 to 100000000 (decimal or 0x hex)\n"},
    {{"bench", "floor", "--size", "4"}, "onigpu bench floor: --size 4: must be a size from 8 B to 16 MiB (as 4096, 64K, 1M, 4kB)\n"},
    {{"bench", "floor", "--mechs", "armed,nope"},
     "onigpu bench floor: --mechs nope: must be one of memcpy-query, memcpy-flag, memcpy-sync, drv-memcpy-flag, armed, "
     "kernel-pull, doorbell-rtt, launch-query, ptr-attrs, ptr-id (a comma-separated list, or all)\n"},
    {{"bench", "floor", "--rounds", "1000001"}, "onigpu bench floor: --rounds 1000001: must be a whole number from 1 to 1000000"},
    {{"bench", "floor", "--timeout-ms", "0"}, "onigpu bench floor: --timeout-ms 0: must be a whole number from 1 to 600000"},
    {{"bench", "floor", "--out="}, "onigpu bench floor: --out '': must be the name of a directory\n"},
    {{"bench", "floor", "--bogus", "1"}, "onigpu bench floor: --bogus: unknown option\n"},
    {{"bench", "frames", "--driver="}, "onigpu bench frames: --driver '': must be a driver name"},
    {{"bench", "frames", "--blocks", "1K,0"}, "onigpu bench frames: --blocks 0: must be a size from 1 B to 4294967295 B"},
    {{"bench", "frames", "--blocks", ","}, "onigpu bench frames: --blocks ,: must be a comma-separated list of sizes"},
    {{"bench", "frames", "--seconds", "3601"}, "onigpu bench frames: --seconds 3601: must be a duration above 0 s and at most 3600 s"},
    {{"bench", "frames", "--out", "/etc/hostname/sub"},
     "onigpu bench frames: --out /etc/hostname/sub: must be a directory: /etc/hostname is not a directory\n"},
    {{"bench", "frames", "--second-thread=1"}, "onigpu bench frames: --second-thread=1: takes no value\n"},
    {{"bench", "frames", "--bogus"}, "onigpu bench frames: --bogus: unknown option\n"},
    {{"bench", "remote", "--regs", "0"}, "onigpu bench remote: --regs 0: must be a whole number from 1 to 10000000"},
    {{"bench", "remote", "--seconds", "0"}, "onigpu bench remote: --seconds 0: must be a duration above 0 s and at most 3600 s"},
    {{"bench", "remote", "--stream-block", "17M"}, "onigpu bench remote: --stream-block 17M: must be a size from 4 B to 16 MiB, a multiple of 4"},
    {{"bench", "remote", "--out", "--tls", "tcp"}, "onigpu bench remote: --out needs a value: the name of a directory\n"},
    {{"bench", "remote", "--bogus"}, "onigpu bench remote: --bogus: unknown option\n"},
    {{"bench", "loop", "--sizes", "4kB"}, "onigpu bench loop: --sizes 4kB: must be a comma-separated list of DATA/COMPUTE sizes"},
    {{"bench", "loop", "--ai", "0.3"}, "onigpu bench loop: --ai 0.3: must be a comma-separated list of multiples of 0.25"},
    {{"bench", "loop", "--backends", "cpu,nope"},
     "onigpu bench loop: --backends nope: must be one of cpu, gpu-staged, gpu-direct, gpu-graph, gpu-flag, gpu-persistent, "
     "gpu-mapped (a comma-separated list, or all)\n"},
    {{"bench", "loop", "--blocks", "4"}, "onigpu bench loop: --blocks 4: must be a whole number from 5 to 10000000 (decimal or 0x hex)\n"},
    {{"bench", "loop", "--seconds", "inf"}, "onigpu bench loop: --seconds inf: must be a duration above 0 s (as 2.5, 2.5s, 500ms, 100us)\n"},
    {{"bench", "loop", "--source", "fpga"}, "onigpu bench loop: --source fpga: must be mem or emu\n"},
    {{"bench", "loop", "--source", "emu", "--link", "nosuch"}, "onigpu bench loop: --link nosuch: must be a link preset (gen2x4,"},
    {{"bench", "loop", "--out", "/etc/hostname"}, "onigpu bench loop: --out /etc/hostname: must be a directory: /etc/hostname is not a directory\n"},
    {{"bench", "loop", "--bogus=1"}, "onigpu bench loop: --bogus=1: unknown option\n"},
    {{"bench", "transfer", "--sizes", "64:100"}, "onigpu bench transfer: --sizes 64:100: must be A:B or A, sizes doubling from A to B"},
    {{"bench", "transfer", "--total", "0"}, "onigpu bench transfer: --total 0: must be a size of at least 1 B (as 4096, 64K, 1M, 4kB)\n"},
    {{"bench", "transfer", "--min-reps", "-1"}, "onigpu bench transfer: --min-reps -1: must be a whole number >= 0 (decimal or 0x hex)\n"},
    {{"bench", "transfer", "--max-reps", "0"}, "onigpu bench transfer: --max-reps 0: must be a whole number >= 1 (decimal or 0x hex)\n"},
    {{"bench", "transfer", "--paths", "staged,nope"},
     "onigpu bench transfer: --paths nope: must be one of reference, original, staged, direct, prepinned, chunked, ring, "
     "ring-thp, agent (a comma-separated list, or all)\n"},
    {{"bench", "transfer", "--dir", "up"}, "onigpu bench transfer: --dir up: must be read, write or both\n"},
    {{"bench", "transfer", "--link", ","}, "onigpu bench transfer: --link ,: must be a comma-separated list, each a link preset (gen2x4,"},
    {{"bench", "transfer", "--link", "gen2x4,nosuch"}, "onigpu bench transfer: --link nosuch: must be a link preset (gen2x4,"},
    {{"bench", "transfer", "--chunk", "3"}, "onigpu bench transfer: --chunk 3: must be a size from 4 B to 1 GiB, a multiple of 4"},
    {{"bench", "transfer", "--agent-max", "2G"}, "onigpu bench transfer: --agent-max 2G: must be a size from 1 B to 1 GiB"},
    {{"bench", "transfer", "--out", "/etc/hostname"},
     "onigpu bench transfer: --out /etc/hostname: must be a directory: /etc/hostname is not a directory\n"},
    {{"bench", "transfer", "--bogus"}, "onigpu bench transfer: --bogus: unknown option\n"},
    {{"roofline", "--out", "/proc"}, "onigpu roofline: --out /proc: must be a directory a file can be made in: "},
};

TEST(bad_values_named_with_what_is_allowed)
{
    NEED_BIN();
    for (size_t i = 0; i < sizeof bad_cases / sizeof bad_cases[0]; i++) {
        const struct bad_case *c = &bad_cases[i];
        int rc = run_briefly(c->args); /* a bad value taken would run (serve: for good) */
        char cmd[64]; /* the command as the message names it: "onigpu bench loop: ..." */
        snprintf(cmd, sizeof cmd, "usage: %.*s ", (int)strcspn(c->says, ":"), c->says);
        if (rc != 2 || strncmp(out, c->says, strlen(c->says)) || !strstr(out, cmd))
            UNIT_FAIL("onigpu %s %s %s ...: exit %d, want 2 with \"%s\" then the usage; got:\n%s", c->args[0],
                      c->args[1] ? c->args[1] : "", c->args[1] && c->args[2] ? c->args[2] : "", rc, c->says, out);
    }
}

/* Hardware that cannot be opened says which failure it was and where the
 * address came from (exit 1): nobody listening, bad syntax, an unknown host,
 * a bad card spec; not one "Invalid stream path". */
TEST(open_failures_told_apart)
{
    NEED_BIN();
    CHECK_EQ(RUN("info", "--net", "127.0.0.1:1"), 1); /* port 1: nobody listens (tcpmux is long gone) */
    HAS("onigpu: cannot open the hardware served at 127.0.0.1:1 (--net; driver net): connection refused: nobody listens there");
    CHECK_EQ(RUN("info", "--net", "localhost"), 1);
    HAS("served at localhost (--net; driver net): bad address syntax: want HOST:PORT or [IPv6]:PORT, port 1-65535");
    CHECK_EQ(RUN("info", "--net", "no-such-host.invalid:9455"), 1);
    HAS("(--net; driver net): unknown host: the name does not resolve");
    setenv("ONIGPU_NET", "127.0.0.1:70000", 1);
    CHECK_EQ(RUN("info", "--driver", "net"), 1);
    unsetenv("ONIGPU_NET");
    HAS("served at 127.0.0.1:70000 ($ONIGPU_NET; driver net): bad address syntax");
    /* the onix-emu daemon's key is gone: the card says which key it does not know */
    setenv("ONIGPU_EMU", "daemon=/tmp/onix.sock", 1);
    CHECK_EQ(RUN("info"), 1);
    unsetenv("ONIGPU_EMU");
    HAS("emu: unknown key 'daemon' (devices link mode");
    CHECK(!strstr(out, "Invalid stream path"));
}

/* No GPU or no driver is said as such: CUDA's "driver version is
 * insufficient" (its text when there is no driver at all) sent users to
 * upgrade a driver that is not installed. */
TEST(version_says_no_driver_plainly)
{
    NEED_BIN();
    CHECK_EQ(RUN("--version"), 0);
    CHECK(!strstr(out, "insufficient"));
}
