/* cmd_bench_daemon.c - `onigpu bench daemon`: what the onix-emu daemon and
 * the net driver cost against the in-process card, measured in one run on
 * the same card spec: register access latency (oni_read_reg), block reads of
 * the GPU stream into a host buffer (ONI_DRV_READ, per block size), default-stream
 * throughput through oni_read_frame, and a real-time card kept up with. It
 * starts its own daemon (onix-emu next to the onigpu executable, or
 * --daemon-bin) on a private socket, and its own `net` server (`onigpu
 * serve`'s, on a thread, serving emu on a loopback port) unless --net names
 * one on another machine. */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>
#include "bench/bench.h"
#include "bench_cli.h"
#include "cli.h"
#include "cli_oni.h"
#include "drivers/net/netserve.h"
#include "onigpu.h"
#include "oniemu.h"
#include "onix.h"

static int daemon_bench(int argc, char **argv);
/* Card: the test core on the GPU stream, another on the default stream, emulated time, no link model. */
#define CARD "devices=testcore:route=1,testcore;mode=fast;link=unlimited;seed=1"
static const char options[] =
    "  --regs N         register reads per mode (default 2000)\n"
    "  --blocks LIST    GPU-stream block sizes, multiples of 4 up to 8M (default 4K,64K,1M)\n"
    "  --reads N        blocks per size and mode (default 1000)\n"
    "  --seconds T      default-stream throughput time per mode (default 1)\n"
    "  --stream-block B BLOCKREADSIZE of the stream test (default 64K)\n"
    "  --daemon-bin P   onix-emu to start (default: next to onigpu)\n"
    "  --net HOST:PORT  the net mode's server, `onigpu serve --driver emu` (default: one of its own on loopback)\n"
    "  --out DIR        result directory (default docs/results)\n"
    "card: " CARD "\n";
CLI_COMMAND(bench_daemon, "bench daemon", "[--regs N] [--blocks 4K,64K,1M] [--reads N] [--seconds T] [--stream-block B] [--daemon-bin PATH] [--net HOST:PORT] [--out DIR]",
            "in-process card vs onix-emu daemon vs net driver: register latency, block reads, stream throughput", options, daemon_bench)

#define MAX_BLOCKS 16
#define MODES 3
enum { IN_PROCESS, DAEMON, NET };

struct opts {
    unsigned regs, reads;
    uint32_t blocks[MAX_BLOCKS];
    size_t nblocks;
    double seconds;
    uint32_t stream_block; /* BLOCKREADSIZE of the stream test */
    const char *out, *bin, *net; /* net: the server's address */
};

static const char *const mode_name[MODES] = {"in-process", "daemon", "net"};

/* Start the daemon bin on socket sock; its pid once it accepts connections,
 * -1 if it did not within 5 s. It ends with this process, even one that
 * crashed or was killed (PR_SET_PDEATHSIG), not left holding the socket. */
static pid_t start_daemon(const char *bin, const char *sock)
{
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        if (getppid() != parent)
            _exit(127); /* the benchmark died before the line above */
        execl(bin, bin, "--socket", sock, (char *)NULL);
        _exit(127);
    }
    if (pid < 0)
        return -1;
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    snprintf(a.sun_path, sizeof a.sun_path, "%s", sock);
    for (int i = 0; i < 500; i++) {
        int s = socket(AF_UNIX, SOCK_SEQPACKET, 0);
        int ok = s >= 0 && connect(s, (struct sockaddr *)&a, sizeof a) == 0;
        if (s >= 0)
            close(s);
        if (ok)
            return pid;
        if (waitpid(pid, NULL, WNOHANG) == pid)
            return -1;
        usleep(10000);
    }
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    return -1;
}

/* Real-time card for the small-block stream test: three 64-channel headstage chips, 90k frames/s. */
#define RT_CARD "devices=rhd2164,rhd2164,rhd2164"

static oni_ctx open_mode(int mode, const struct opts *o, const char *sock, const char *card)
{
    if (mode == NET)
        return cli_open("net", card, o->net, -1);
    char spec[300];
    int d = mode == DAEMON;
    snprintf(spec, sizeof spec, "%s%s%s%s", d ? "daemon=" : "", d ? sock : "", d ? ";" : "", card);
    return cli_open("emu", spec, NULL, -1);
}

/* Register reads of the first hub manager: per-call times. */
static int bench_regs(oni_ctx ctx, unsigned n, struct bench_stats *st)
{
    oni_device_t *dev;
    oni_size_t ndev;
    int rc = cli_devtable(ctx, &dev, &ndev);
    if (rc)
        return rc;
    uint32_t hub = UINT32_MAX;
    for (oni_size_t i = 0; i < ndev && hub == UINT32_MAX; i++)
        if ((dev[i].idx & 0xFF) == ONIX_HUB_DEV_IDX)
            hub = dev[i].idx;
    free(dev);
    if (hub == UINT32_MAX)
        return ONI_EDEVIDX;
    uint64_t *t = malloc(n * sizeof *t);
    if (!t)
        return ONI_EBADALLOC;
    for (unsigned i = 0; i < n && !rc && !bench_stopped(); i++) {
        oni_reg_val_t v;
        uint64_t t0 = oni_now_ns();
        rc = oni_read_reg(ctx, hub, 4, &v);
        t[i] = oni_now_ns() - t0;
    }
    if (!rc)
        rc = bench_stats_compute(t, n, st);
    free(t);
    return rc;
}

/* n blocks of size bytes from the GPU stream into a host buffer: per-block times. */
static int bench_block(oni_ctx ctx, uint32_t size, unsigned n, struct bench_stats *st)
{
    int rc = oni_set_driver_opt(ctx, ONI_DRV_RD_SZ, &size, sizeof size);
    if (rc)
        return rc;
    uint8_t *buf = malloc(size);
    uint64_t *t = malloc(n * sizeof *t);
    if (!buf || !t) {
        free(buf);
        free(t);
        return ONI_EBADALLOC;
    }
    onigpu_buf_t ob = {buf, size};
    for (unsigned i = 0; i < n / 10 + 1 && !rc; i++) /* warm up: page faults, ring pages */
        rc = oni_set_driver_opt(ctx, ONI_DRV_READ, &ob, sizeof ob);
    for (unsigned i = 0; i < n && !rc && !bench_stopped(); i++) {
        uint64_t t0 = oni_now_ns();
        rc = oni_set_driver_opt(ctx, ONI_DRV_READ, &ob, sizeof ob);
        t[i] = oni_now_ns() - t0;
    }
    if (!rc)
        rc = bench_stats_compute(t, n, st);
    free(buf);
    free(t);
    return rc;
}

/* oni_read_frame for seconds: payload MB/s. */
static int bench_stream(oni_ctx ctx, double seconds, double *mbps, double *fps)
{
    uint64_t bytes = 0, frames = 0, t0 = oni_now_ns(), end = t0 + (uint64_t)(seconds * 1e9), now;
    do {
        for (int k = 0; k < 256; k++) {
            oni_frame_t *f;
            int rc = oni_read_frame(ctx, &f);
            if (rc < 0)
                return rc;
            bytes += f->data_sz;
            frames++;
            oni_destroy_frame(f);
        }
    } while ((now = oni_now_ns()) < end && !bench_stopped());
    *mbps = bench_mb_per_s((double)bytes, (double)(now - t0));
    *fps = frames / ((now - t0) / 1e9);
    return 0;
}

/* Real time, BLOCKREADSIZE block (0: the default, one frame per refill):
 * frames/s kept up with, and what was left in the card's FIFO at the end. */
static int bench_realtime(int mode, const struct opts *o, const char *sock, uint32_t block, double *fps,
                          uint64_t *left)
{
    double seconds = o->seconds;
    oni_ctx ctx = open_mode(mode, o, sock, RT_CARD);
    if (!ctx)
        return ONI_EINIT;
    oni_reg_val_t run = 1;
    int rc = block ? oni_set_opt(ctx, ONI_OPT_BLOCKREADSIZE, &block, sizeof block) : 0;
    if (!rc)
        rc = oni_set_opt(ctx, ONI_OPT_RUNNING, &run, sizeof run);
    uint64_t frames = 0, t0 = oni_now_ns(), end = t0 + (uint64_t)(seconds * 1e9), now = t0;
    while (!rc && (now = oni_now_ns()) < end) {
        oni_frame_t *f;
        rc = oni_read_frame(ctx, &f);
        if (rc > 0) {
            frames++;
            oni_destroy_frame(f);
            rc = 0;
        }
    }
    onigpu_stream_stats_t st;
    size_t sz = sizeof st;
    if (!rc)
        rc = oni_get_driver_opt(ctx, ONI_DRV_STREAM_STATS, &st, &sz);
    oni_destroy_ctx(ctx);
    *fps = frames / ((now - t0) / 1e9);
    *left = rc ? 0 : st.fifo_bytes[0];
    return rc;
}

static void row_stats(struct results *r, int mode, const char *what, long long size,
                      const struct bench_stats *s, const struct bench_stats *base)
{
    results_cell_str(r, "mode", mode_name[mode]);
    results_cell_str(r, "op", what);
    results_cell_int(r, "size", size);
    bench_cell_stats(r, "", s);
    if (size > 0)
        results_cell_num(r, "mb_per_s", bench_mb_per_s((double)size, s->p50));
    if (base)
        results_cell_num(r, "p50_vs_in_process", s->p50 / base->p50);
    results_row(r, NULL);
    printf("%-11s %-12s %9lld %9.0f %9.0f %9.0f %9.0f", mode_name[mode], what, size, s->p50, s->p99, s->p999, s->max);
    if (base)
        printf("  x%.2f", s->p50 / base->p50);
    printf("\n");
}

static int run_all(const struct opts *o, const char *sock, struct results *r)
{
    struct bench_stats reg[MODES], blk[MODES][MAX_BLOCKS];
    double mbps[MODES], fps[MODES];
    for (int m = 0; m < MODES; m++) {
        oni_ctx ctx = open_mode(m, o, sock, CARD);
        if (!ctx)
            return 1;
        int rc = bench_regs(ctx, o->regs, &reg[m]);
        if (!rc)
            rc = oni_set_opt(ctx, ONI_OPT_BLOCKREADSIZE, &o->stream_block, sizeof o->stream_block);
        oni_reg_val_t run = 1;
        if (!rc)
            rc = oni_set_opt(ctx, ONI_OPT_RUNNING, &run, sizeof run);
        for (size_t b = 0; b < o->nblocks && !rc; b++)
            rc = bench_block(ctx, o->blocks[b], o->reads, &blk[m][b]);
        if (!rc)
            rc = bench_stream(ctx, o->seconds, &mbps[m], &fps[m]);
        oni_destroy_ctx(ctx);
        if (rc)
            return cli_fail(mode_name[m], rc);
    }
    printf("%-11s %-12s %9s %9s %9s %9s %9s\n", "mode", "op", "bytes", "p50 ns", "p99 ns", "p99.9 ns", "max ns");
    for (int m = 0; m < MODES; m++)
        row_stats(r, m, "read_reg", 0, &reg[m], m ? &reg[0] : NULL);
    for (size_t b = 0; b < o->nblocks; b++)
        for (int m = 0; m < MODES; m++)
            row_stats(r, m, "gpu_read", o->blocks[b], &blk[m][b], m ? &blk[0][b] : NULL);
    for (int m = 0; m < MODES; m++) {
        results_cell_str(r, "mode", mode_name[m]);
        results_cell_int(r, "block_read_size", o->stream_block);
        results_cell_num(r, "mb_per_s", mbps[m]);
        results_cell_num(r, "frames_per_s", fps[m]);
        if (m)
            results_cell_num(r, "vs_in_process", mbps[m] / mbps[0]);
        results_row(r, "stream");
        printf("%-11s stream (BLOCKREADSIZE %u): %.1f MB/s payload, %.0f frames/s", mode_name[m], o->stream_block, mbps[m], fps[m]);
        if (m)
            printf("  x%.2f", mbps[m] / mbps[0]);
        printf("\n");
    }
    uint32_t rt_block[2] = {0, o->stream_block};
    for (int b = 0; b < 2; b++)
        for (int m = 0; m < MODES; m++) {
            double rfps;
            uint64_t left;
            int rc = bench_realtime(m, o, sock, rt_block[b], &rfps, &left);
            if (rc)
                return cli_fail(mode_name[m], rc);
            results_cell_str(r, "mode", mode_name[m]);
            results_cell_str(r, "card", RT_CARD);
            results_cell_int(r, "block_read_size", rt_block[b]); /* 0: the default, the largest frame */
            results_cell_num(r, "frames_per_s", rfps);
            results_cell_num(r, "nominal_frames_per_s", 90000);
            results_cell_int(r, "fifo_bytes_left", (long long)left);
            results_row(r, "realtime");
            char bs[16] = "default";
            if (rt_block[b])
                snprintf(bs, sizeof bs, "%u", rt_block[b]);
            printf("%-11s real time " RT_CARD ", BLOCKREADSIZE %s: %.0f of 90000 frames/s, %llu bytes left in the FIFO\n",
                   mode_name[m], bs, rfps, (unsigned long long)left);
        }
    return 0;
}

/* The net mode's server when none is named: emu served on a loopback port,
 * on its own thread; NULL after the error is printed. */
static struct netserve *net_server_start(const char **addr)
{
    struct netserve *ns;
    char err[256];
    if (netserve_open("emu", "127.0.0.1:0", NULL, &ns, err, sizeof err)) {
        fprintf(stderr, "onigpu: net server: %s\n", err);
        return NULL;
    }
    int rc = netserve_start(ns);
    if (rc) {
        netserve_close(ns);
        cli_fail("net server thread", rc);
        return NULL;
    }
    *addr = netserve_addr(ns);
    return ns;
}

/* onix-emu next to this executable. */
static int default_bin(char *path, size_t cap)
{
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0)
        return -1;
    self[n] = 0;
    char *slash = strrchr(self, '/');
    if (!slash)
        return -1;
    *slash = 0;
    return snprintf(path, cap, "%s/onix-emu", self) < (int)cap ? 0 : -1;
}

/* Parse argv into o: 0, or exit status 2 after saying what was wrong. */
static int parse_args(int argc, char **argv, struct opts *o)
{
    const struct cli_command *cmd = &cli_cmd_bench_daemon;
    for (int i = 1; i < argc; i++) {
        char opt[64];
        const char *a, *v;
        cli_opt_split(argc, argv, &i, opt, sizeof opt, &a, &v);
        uint64_t x;
        int st;
        if (!strcmp(a, "--regs")) {
            if (!(st = cli_arg_count(cmd, a, v, 1, 10000000, &x)))
                o->regs = (unsigned)x;
        } else if (!strcmp(a, "--reads")) {
            if (!(st = cli_arg_count(cmd, a, v, 1, 10000000, &x)))
                o->reads = (unsigned)x;
        } else if (!strcmp(a, "--blocks")) {
            st = cli_parse_sizes(cmd, a, v, 8u << 20, 4, o->blocks, MAX_BLOCKS, &o->nblocks);
        } else if (!strcmp(a, "--seconds")) {
            st = cli_arg_seconds(cmd, a, v, 0, 1, 3600, &o->seconds);
        } else if (!strcmp(a, "--stream-block")) {
            if (!(st = cli_arg_size(cmd, a, v, 4, 64u << 20, 4, &x)))
                o->stream_block = (uint32_t)x;
        } else if (!strcmp(a, "--daemon-bin")) {
            st = cli_arg_text(cmd, a, v, "the path of an onix-emu executable", &o->bin);
        } else if (!strcmp(a, "--net")) {
            st = cli_arg_text(cmd, a, v, "HOST:PORT of an `onigpu serve --driver emu`", &o->net);
        } else if (!strcmp(a, "--out")) {
            st = cli_arg_text(cmd, a, v, "the name of a directory", &o->out);
        } else {
            st = cli_bad_arg(cmd, a == opt ? argv[i] : a);
        }
        if (st)
            return st;
    }
    return 0;
}

static int daemon_bench(int argc, char **argv)
{
    struct opts o = {.regs = 2000, .reads = 1000, .blocks = {4096, 65536, 1 << 20}, .nblocks = 3,
                     .seconds = 1, .stream_block = 65536, .out = "docs/results"};
    char bin[PATH_MAX];
    int st = parse_args(argc, argv, &o);
    if (st)
        return st;
    if (!o.bin) {
        if (default_bin(bin, sizeof bin))
            return cli_fail("finding onix-emu (use --daemon-bin)", ONI_EPATHINVALID);
        o.bin = bin;
    }
    if (access(o.bin, X_OK)) {
        fprintf(stderr, "onigpu: %s: %s (use --daemon-bin)\n", o.bin, strerror(errno));
        return 1;
    }
    if ((st = cli_arg_outdir(&cli_cmd_bench_daemon, "--out", o.out, &o.out)) != 0)
        return st;
    if (bench_cli_signals("bench daemon"))
        return 1;
    char sock[108];
    snprintf(sock, sizeof sock, "/tmp/onigpu-bench-daemon-%d.sock", (int)getpid());
    pid_t pid = start_daemon(o.bin, sock);
    if (pid < 0) {
        fprintf(stderr, "onigpu: could not start %s\n", o.bin);
        return 1;
    }
    struct netserve *ns = NULL;
    const char *net_where = o.net ? o.net : "onigpu serve's server on a thread of this process, loopback TCP";
    if (!o.net && !(ns = net_server_start(&o.net))) {
        kill(pid, SIGTERM);
        waitpid(pid, NULL, 0);
        return 1;
    }
    char **full;
    int nfull = cli_command_line(&full);
    int err;
    struct results *r = results_open(o.out, "daemon", nfull, full, NULL, &err);
    int rc = r ? 0 : cli_fail(o.out, err);
    if (r) {
        results_meta(r, "card_spec", CARD);
        results_meta(r, "net_server", net_where);
        results_meta(r, "method", "per call: oni_read_reg of a hub manager register; oni_set_driver_opt(ONI_DRV_READ) "
                                       "of one GPU-stream block into a host buffer (after n/10 warm-up blocks); "
                                       "stream: oni_read_frame + oni_destroy_frame for the given time; realtime: "
                                       RT_CARD " in real time, default BLOCKREADSIZE and the stream's, frames/s read. All modes "
                                       "in one run, in-process first; ratios = the mode's p50 / in-process p50");
        rc = run_all(&o, sock, r);
        const char *json = results_path(r, ".json");
        char where[1024];
        snprintf(where, sizeof where, "%s", json ? json : o.out);
        int wrc = results_close(r);
        if (!rc && wrc)
            rc = cli_fail("writing results", wrc);
        else if (!rc)
            printf("results: %s (and .csv, -stream.csv, -realtime.csv)\n", where);
    }
    netserve_close(ns); /* NULL: none of its own */
    kill(pid, SIGTERM);
    waitpid(pid, NULL, 0);
    bench_cli_signals_end("bench daemon");
    return rc;
}
