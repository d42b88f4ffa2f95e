/* cmd_bench_remote.c - `onigpu bench remote`: the remote card (the net
 * driver and `onigpu serve` over UCX) measured against UCX's own floor in
 * one run: for each UCX transport named, the served emulated card's
 * register round trip, a 4 KiB GPU-stream block (ONI_DRV_READ into host
 * memory, and into GPU memory with --gpu, staged from the server on a thread
 * and by CUDA IPC from a server process) and 16 MiB blocks (bandwidth),
 * beside ucx_perftest's ucp_am_lat (8 B and 4 KiB) and ucp_am_bw (16 MiB)
 * on the same transport, and the in-process card as the baseline; then the
 * default stream through oni_read_frame: throughput in emulated time, and a
 * real-time card of three 30 kHz headstage chips kept up with. The server
 * runs on a thread of this process, on the loopback; ucx_perftest runs as
 * two processes (its server and client) with the same UCX_TLS. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include "bench/bench.h"
#include "bench_cli.h"
#include "cli.h"
#include "cli_oni.h"
#include "drivers/net/netserve.h"
#include "gpu/gpu.h"
#include "onigpu.h"
#include "oninet.h"
#include "onix.h"

static int remote_bench(int argc, char **argv);
/* Card: the test core on the GPU stream, emulated time, no link model. */
#define CARD "devices=testcore:route=1;mode=fast;link=unlimited;seed=1"
/* The stream test's card: the test core on the default stream, emulated time. */
#define STREAM_CARD "devices=testcore;mode=fast;link=unlimited;seed=1"
/* The real-time test's card: three 64-channel headstage chips, 90 000 frames/s. */
#define RT_CARD "devices=rhd2164,rhd2164,rhd2164"
#define RT_FPS 90000
#define BIG (16u << 20)
#define SMALL 4096u
static const char options[] =
    "  --tls LIST       UCX transports, each a UCX_TLS value or 'default' (UCX's own choice; default: default,tcp)\n"
    "  --regs N         register reads per transport (default 2000)\n"
    "  --reads N        4 KiB blocks per transport (default 2000)\n"
    "  --big N          16 MiB blocks per transport (default 20)\n"
    "  --gpu            4 KiB blocks into GPU memory too: from the server on a thread (staged through host\n"
    "                   memory: Debian's UCX has no CUDA) and from an onigpu serve process (CUDA IPC)\n"
    "  --seconds T      time of the stream test and of each real-time test (default 1)\n"
    "  --stream-block B BLOCKREADSIZE of the stream test and of the second real-time test (default 64K)\n"
    "  --perftest P     ucx_perftest to run (default: ucx_perftest on PATH)\n"
    "  --out DIR        result directory (default docs/results)\n"
    "cards: " CARD "; stream: " STREAM_CARD "; real time: " RT_CARD "\n";
CLI_COMMAND(bench_remote, "bench remote",
            "[--tls LIST] [--regs N] [--reads N] [--big N] [--gpu] [--seconds T] [--stream-block B] [--perftest P] "
            "[--out DIR]",
            "remote card over UCX vs ucx_perftest on the same transport, and the in-process card", options,
            remote_bench)

#define MAX_TLS 8
struct opts {
    unsigned regs, reads, big;
    int gpu;
    double seconds;
    uint32_t stream_block;
    const char *tls[MAX_TLS];
    size_t ntls;
    char tls_buf[256];
    const char *perftest, *out;
};

/* What one card (remote or in-process) gave; rt_*[k]: the real-time test at
 * the default BLOCKREADSIZE (k = 0) and at --stream-block (k = 1). */
struct card_res {
    struct bench_stats call, reg, small, big, gpu, gpu_proc;
    int has_gpu, has_gpu_proc;
    uint32_t ipc_blocks; /* of gpu_proc's: those that went by CUDA IPC */
    char transport[64];
    double stream_mbps, stream_fps, rt_fps[2];
    uint64_t rt_left[2];
};

static int hub_of(oni_ctx ctx, uint32_t *hub)
{
    oni_device_t *dev;
    oni_size_t n;
    int rc = cli_devtable(ctx, &dev, &n);
    if (rc)
        return rc;
    *hub = UINT32_MAX;
    for (oni_size_t i = 0; i < n && *hub == UINT32_MAX; i++)
        if ((dev[i].idx & 0xFF) == ONIX_HUB_DEV_IDX)
            *hub = dev[i].idx;
    free(dev);
    return *hub == UINT32_MAX ? ONI_EDEVIDX : 0;
}

static int time_regs(oni_ctx ctx, unsigned n, struct bench_stats *st)
{
    uint32_t hub;
    int rc = hub_of(ctx, &hub);
    uint64_t *t = rc ? NULL : malloc(n * sizeof *t);
    if (!rc && !t)
        rc = ONI_EBADALLOC;
    for (unsigned i = 0; i < n && !rc && !bench_stopped(); i++) {
        oni_reg_val_t v;
        uint64_t t0 = oni_now_ns();
        rc = oni_read_reg(ctx, hub, ONIX_HUB_CLKRATEHZ, &v);
        t[i] = oni_now_ns() - t0;
    }
    if (!rc)
        rc = bench_stats_compute(t, n, st);
    free(t);
    return rc;
}

/* One driver call per sample (a driver option read: one round trip through
 * the net driver, where oni_read_reg is several: docs/net.md). */
static int time_calls(oni_ctx ctx, unsigned n, struct bench_stats *st)
{
    uint64_t *t = malloc(n * sizeof *t);
    int rc = t ? 0 : ONI_EBADALLOC;
    for (unsigned i = 0; i < n && !rc && !bench_stopped(); i++) {
        uint32_t v;
        size_t len = sizeof v;
        uint64_t t0 = oni_now_ns();
        rc = oni_get_driver_opt(ctx, ONI_DRV_RD_SZ, &v, &len);
        t[i] = oni_now_ns() - t0;
    }
    if (!rc)
        rc = bench_stats_compute(t, n, st);
    free(t);
    return rc;
}

/* n blocks of size bytes into buf (host or GPU memory): per-block times. */
static int time_blocks(oni_ctx ctx, void *buf, uint32_t size, unsigned n, struct bench_stats *st)
{
    int rc = oni_set_driver_opt(ctx, ONI_DRV_RD_SZ, &size, sizeof size);
    uint64_t *t = malloc(n * sizeof *t);
    if (!t)
        return ONI_EBADALLOC;
    onigpu_buf_t ob = {buf, size};
    for (unsigned i = 0; i < n / 10 + 1 && !rc; i++) /* warm up: page faults, registrations */
        rc = oni_set_driver_opt(ctx, ONI_DRV_READ, &ob, sizeof ob);
    for (unsigned i = 0; i < n && !rc && !bench_stopped(); i++) {
        uint64_t t0 = oni_now_ns();
        rc = oni_set_driver_opt(ctx, ONI_DRV_READ, &ob, sizeof ob);
        t[i] = oni_now_ns() - t0;
    }
    if (!rc)
        rc = bench_stats_compute(t, n, st);
    free(t);
    return rc;
}

/* The card behind ctx: registers, then the GPU stream running. */
static int time_card(oni_ctx ctx, const struct opts *o, int big, struct card_res *r)
{
    static uint8_t *host;
    if (!host && !(host = malloc(BIG)))
        return ONI_EBADALLOC;
    int rc = time_calls(ctx, o->regs, &r->call);
    if (!rc)
        rc = time_regs(ctx, o->regs, &r->reg);
    oni_reg_val_t run = 1;
    if (!rc)
        rc = oni_set_opt(ctx, ONI_OPT_RUNNING, &run, sizeof run);
    if (!rc)
        rc = time_blocks(ctx, host, SMALL, o->reads, &r->small);
    if (!rc && big)
        rc = time_blocks(ctx, host, BIG, o->big, &r->big);
    void *dev = NULL;
    r->has_gpu = 0;
    if (!rc && o->gpu && !gpu_alloc(&dev, SMALL)) {
        rc = time_blocks(ctx, dev, SMALL, o->reads, &r->gpu);
        r->has_gpu = !rc;
        gpu_free(dev);
    }
    return rc;
}

/* The card of spec: in this process (addr NULL) or the one served at addr. */
static oni_ctx open_card(const char *addr, const char *spec)
{
    return addr ? cli_open("net", spec, addr, -1) : cli_open("emu", spec, NULL, -1);
}

/* oni_read_frame of STREAM_CARD for o->seconds at BLOCKREADSIZE
 * o->stream_block: payload MB/s and frames/s. */
static int time_stream(const char *addr, const struct opts *o, struct card_res *r)
{
    oni_ctx ctx = open_card(addr, STREAM_CARD);
    if (!ctx)
        return ONI_EINIT;
    oni_reg_val_t run = 1;
    int rc = oni_set_opt(ctx, ONI_OPT_BLOCKREADSIZE, &o->stream_block, sizeof o->stream_block);
    if (!rc)
        rc = oni_set_opt(ctx, ONI_OPT_RUNNING, &run, sizeof run);
    uint64_t bytes = 0, frames = 0, t0 = oni_now_ns(), end = t0 + (uint64_t)(o->seconds * 1e9), now = t0;
    while (!rc && (now = oni_now_ns()) < end && !bench_stopped()) {
        for (int k = 0; k < 256 && !rc; k++) {
            oni_frame_t *f;
            rc = oni_read_frame(ctx, &f);
            if (rc > 0) {
                bytes += f->data_sz;
                frames++;
                oni_destroy_frame(f);
                rc = 0;
            }
        }
    }
    oni_destroy_ctx(ctx);
    double ns = now > t0 ? (double)(now - t0) : 1;
    r->stream_mbps = bench_mb_per_s((double)bytes, ns);
    r->stream_fps = frames / (ns / 1e9);
    return rc;
}

/* RT_CARD in real time for o->seconds at BLOCKREADSIZE block (0: the
 * default, one frame per refill): frames/s read, and what was left in the
 * card's FIFO at the end (ONI_DRV_STREAM_STATS). */
static int time_realtime(const char *addr, const struct opts *o, uint32_t block, double *fps, uint64_t *left)
{
    oni_ctx ctx = open_card(addr, RT_CARD);
    if (!ctx)
        return ONI_EINIT;
    oni_reg_val_t run = 1;
    int rc = block ? oni_set_opt(ctx, ONI_OPT_BLOCKREADSIZE, &block, sizeof block) : 0;
    if (!rc)
        rc = oni_set_opt(ctx, ONI_OPT_RUNNING, &run, sizeof run);
    uint64_t frames = 0, t0 = oni_now_ns(), end = t0 + (uint64_t)(o->seconds * 1e9), now = t0;
    while (!rc && (now = oni_now_ns()) < end && !bench_stopped()) {
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
    *fps = now > t0 ? frames / ((now - t0) / 1e9) : 0;
    *left = rc ? 0 : st.fifo_bytes[0];
    return rc;
}

/* The default stream's tests of the card at addr (NULL: in this process). */
static int time_streams(const char *addr, const struct opts *o, struct card_res *r)
{
    int rc = time_stream(addr, o, r);
    uint32_t block[2] = {0, o->stream_block};
    for (int k = 0; k < 2 && !rc; k++)
        rc = time_realtime(addr, o, block[k], &r->rt_fps[k], &r->rt_left[k]);
    return rc;
}

static pid_t spawn(char *const argv[], const char *tls, int *out);

/* 4 KiB blocks into GPU memory from the card of an `onigpu serve` process
 * (this executable) on the loopback under UCX_TLS tls: the local server that
 * shares the GPU, its card's DMA straight into this process's allocation by
 * CUDA IPC (docs/net.md). Sets r->gpu_proc, r->ipc_blocks. */
static int time_gpu_process(const struct opts *o, const char *tls, struct card_res *r)
{
    char self[4096];
    ssize_t sn = readlink("/proc/self/exe", self, sizeof self - 1);
    if (sn <= 0)
        return ONI_EPATHINVALID;
    self[sn] = 0;
    char *argv[] = {self, "serve", "--driver", "emu", "--listen", "127.0.0.1:0", "--sessions", "1", NULL};
    int fd = -1;
    pid_t pid = spawn(argv, tls, &fd);
    if (pid < 0)
        return ONI_EBADALLOC;
    FILE *f = fdopen(fd, "r");
    char line[256] = "", addr[96] = "";
    const char *at = f && fgets(line, sizeof line, f) ? strstr(line, " on ") : NULL;
    if (at) {
        snprintf(addr, sizeof addr, "%s", at + 4);
        addr[strcspn(addr, "\n")] = 0;
    }
    int rc = at ? 0 : ONI_EINIT;
    oni_ctx ctx = rc ? NULL : cli_open("net", CARD, addr, -1);
    void *dev = NULL;
    oni_reg_val_t run = 1;
    if (!rc && !ctx)
        rc = ONI_EINIT;
    if (!rc)
        rc = oni_set_opt(ctx, ONI_OPT_RUNNING, &run, sizeof run);
    if (!rc)
        rc = gpu_alloc(&dev, SMALL);
    if (!rc)
        rc = time_blocks(ctx, dev, SMALL, o->reads, &r->gpu_proc);
    size_t len = sizeof r->ipc_blocks;
    if (!rc)
        rc = oni_get_driver_opt(ctx, ONI_DRV_NET_GPU_IPC, &r->ipc_blocks, &len);
    r->has_gpu_proc = !rc;
    gpu_free(dev);
    if (ctx)
        oni_destroy_ctx(ctx);
    kill(pid, SIGTERM);
    waitpid(pid, NULL, 0);
    if (f)
        fclose(f);
    else if (fd >= 0)
        close(fd);
    return rc;
}

/* The remote card served on the loopback under UCX_TLS tls (NULL: UCX's choice). */
static int time_remote(const struct opts *o, const char *tls, struct card_res *r)
{
    if (tls)
        setenv("UCX_TLS", tls, 1);
    else
        unsetenv("UCX_TLS");
    struct netserve *s;
    char err[256];
    int rc = netserve_open("emu", "127.0.0.1:0", NULL, &s, err, sizeof err);
    if (rc) {
        fprintf(stderr, "onigpu: %s\n", err);
        return rc;
    }
    if ((rc = netserve_start(s))) {
        netserve_close(s);
        return rc;
    }
    oni_ctx ctx = cli_open("net", CARD, netserve_addr(s), -1);
    rc = ctx ? 0 : ONI_EINIT;
    size_t len = sizeof r->transport;
    if (!rc && oni_get_driver_opt(ctx, ONI_DRV_NET_TRANSPORT, r->transport, &len))
        snprintf(r->transport, sizeof r->transport, "?");
    if (!rc)
        rc = time_card(ctx, o, 1, r);
    if (ctx)
        oni_destroy_ctx(ctx);
    if (!rc) /* each a session of its own on the same server */
        rc = time_streams(netserve_addr(s), o, r);
    netserve_close(s);
    r->has_gpu_proc = 0;
    if (!rc && o->gpu && r->has_gpu)
        rc = time_gpu_process(o, tls, r);
    return rc;
}

/* A loopback TCP port free now (ucx_perftest's own connection). */
static int free_port(void)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    int s = socket(AF_INET, SOCK_STREAM, 0);
    if (s < 0 || bind(s, (struct sockaddr *)&a, sizeof a) || getsockname(s, (struct sockaddr *)&a, &len)) {
        if (s >= 0)
            close(s);
        return -1;
    }
    close(s);
    return ntohs(a.sin_port);
}

/* Start argv (with UCX_TLS tls, NULL: unset), its stdout into a pipe when
 * out is not NULL; it dies with this process. */
static pid_t spawn(char *const argv[], const char *tls, int *out)
{
    int p[2] = {-1, -1};
    if (out && pipe(p))
        return -1;
    pid_t parent = getpid(), pid = fork();
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        if (getppid() != parent)
            _exit(127);
        if (tls)
            setenv("UCX_TLS", tls, 1);
        else
            unsetenv("UCX_TLS");
        if (out) {
            dup2(p[1], 1);
            close(p[0]);
            close(p[1]);
        } else {
            int dn = open("/dev/null", O_WRONLY);
            if (dn >= 0)
                dup2(dn, 1);
        }
        execvp(argv[0], argv);
        _exit(127);
    }
    if (out) {
        close(p[1]);
        *out = pid > 0 ? p[0] : -1;
        if (pid < 0)
            close(p[0]);
    }
    return pid;
}

/* One ucx_perftest test (-t test -s size -n n) between a server and a
 * client of its own: the "Final:" line's 50th-percentile latency (us) and
 * average bandwidth (MB/s). 0, or -1 when it did not run or said nothing. */
static int perftest(const struct opts *o, const char *tls, const char *test, uint32_t size, unsigned n,
                    double *lat_us, double *mbps)
{
    int port = free_port();
    if (port < 0)
        return -1;
    char ps[16], ss[16], ns[16];
    snprintf(ps, sizeof ps, "%d", port);
    snprintf(ss, sizeof ss, "%u", size);
    snprintf(ns, sizeof ns, "%u", n);
    char *srv_argv[] = {(char *)o->perftest, "-p", ps, NULL};
    pid_t srv = spawn(srv_argv, tls, NULL);
    if (srv < 0)
        return -1;
    int found = 0;
    for (int attempt = 0; attempt < 20 && !found; attempt++) { /* until its server listens */
        usleep(100000);
        char *cl_argv[] = {(char *)o->perftest, "127.0.0.1", "-p", ps, "-t", (char *)test, "-s", ss, "-n", ns, NULL};
        int fd;
        pid_t cl = spawn(cl_argv, tls, &fd);
        if (cl < 0)
            break;
        FILE *f = fdopen(fd, "r");
        char line[512];
        while (f && fgets(line, sizeof line, f)) {
            unsigned long it;
            double p50, avg, overall, bw;
            if (sscanf(line, "Final: %lu %lf %lf %lf %lf", &it, &p50, &avg, &overall, &bw) == 5) {
                *lat_us = p50;
                *mbps = bw;
                found = 1;
            }
        }
        if (f)
            fclose(f);
        int st;
        waitpid(cl, &st, 0);
        if (!found && WIFEXITED(st) && WEXITSTATUS(st) == 127)
            break; /* no such program */
    }
    kill(srv, SIGTERM);
    waitpid(srv, NULL, 0);
    return found ? 0 : -1;
}

static void row(struct results *r, const char *tls, const char *who, const char *op, long long size,
                const struct bench_stats *s, double floor_ns, double base_ns)
{
    results_cell_str(r, "tls", tls);
    results_cell_str(r, "who", who);
    results_cell_str(r, "op", op);
    results_cell_int(r, "size", size);
    bench_cell_stats(r, "", s);
    if (size > 0)
        results_cell_num(r, "mb_per_s", bench_mb_per_s((double)size, s->p50));
    if (floor_ns > 0)
        results_cell_num(r, "p50_vs_perftest", s->p50 / floor_ns);
    if (base_ns > 0)
        results_cell_num(r, "p50_vs_in_process", s->p50 / base_ns);
    results_row(r, NULL);
    printf("%-8s %-10s %-10s %9lld %10.0f %10.0f %10.0f %10.0f", tls, who, op, size, s->p50, s->p99, s->p999,
           s->max);
    if (floor_ns > 0)
        printf("  x%.2f perftest", s->p50 / floor_ns);
    if (base_ns > 0)
        printf("  x%.2f in-process", s->p50 / base_ns);
    printf("\n");
}

static void floor_row(struct results *r, const char *tls, const char *op, long long size, double rt_ns,
                      double mbps)
{
    results_cell_str(r, "tls", tls);
    results_cell_str(r, "op", op);
    results_cell_int(r, "size", size);
    if (rt_ns > 0)
        results_cell_num(r, "round_trip_ns", rt_ns);
    if (mbps > 0)
        results_cell_num(r, "mb_per_s", mbps);
    results_row(r, "perftest");
    if (rt_ns > 0)
        printf("%-8s perftest   %-10s %9lld %10.0f (round trip: twice its p50 latency)\n", tls, op, size, rt_ns);
    else if (mbps > 0)
        printf("%-8s perftest   %-10s %9lld %10.1f MB/s\n", tls, op, size, mbps);
    else
        printf("%-8s perftest   %-10s %9lld  did not run\n", tls, op, size);
}

/* The default stream's rows of one card: tables "stream" and "realtime". */
static void stream_rows(struct results *r, const struct opts *o, const char *tls, const char *who,
                        const struct card_res *c, const struct card_res *base)
{
    results_cell_str(r, "tls", tls);
    results_cell_str(r, "who", who);
    results_cell_int(r, "block_read_size", o->stream_block);
    results_cell_num(r, "mb_per_s", c->stream_mbps);
    results_cell_num(r, "frames_per_s", c->stream_fps);
    if (base)
        results_cell_num(r, "vs_in_process", c->stream_mbps / base->stream_mbps);
    results_row(r, "stream");
    printf("%-8s %-10s stream (BLOCKREADSIZE %u): %.1f MB/s payload, %.0f frames/s", tls, who, o->stream_block,
           c->stream_mbps, c->stream_fps);
    if (base)
        printf("  x%.2f in-process", c->stream_mbps / base->stream_mbps);
    printf("\n");
    uint32_t block[2] = {0, o->stream_block};
    for (int k = 0; k < 2; k++) {
        results_cell_str(r, "tls", tls);
        results_cell_str(r, "who", who);
        results_cell_str(r, "card", RT_CARD);
        results_cell_int(r, "block_read_size", block[k]); /* 0: the default, the largest frame */
        results_cell_num(r, "frames_per_s", c->rt_fps[k]);
        results_cell_num(r, "nominal_frames_per_s", RT_FPS);
        results_cell_int(r, "fifo_bytes_left", (long long)c->rt_left[k]);
        results_row(r, "realtime");
        char bs[16] = "default";
        if (block[k])
            snprintf(bs, sizeof bs, "%u", block[k]);
        printf("%-8s %-10s real time " RT_CARD ", BLOCKREADSIZE %s: %.0f of %d frames/s, %llu bytes left in the "
               "FIFO\n", tls, who, bs, c->rt_fps[k], RT_FPS, (unsigned long long)c->rt_left[k]);
    }
}

static int run_all(const struct opts *o, struct results *r)
{
    struct card_res base, streams[MAX_TLS];
    oni_ctx ctx = cli_open("emu", CARD, NULL, -1);
    if (!ctx)
        return 1;
    int rc = time_card(ctx, o, 1, &base);
    oni_destroy_ctx(ctx);
    if (!rc)
        rc = time_streams(NULL, o, &base);
    if (rc)
        return cli_fail("in-process card", rc);
    printf("%-8s %-10s %-10s %9s %10s %10s %10s %10s\n", "tls", "who", "op", "bytes", "p50 ns", "p99 ns", "p99.9 ns",
           "max ns");
    row(r, "-", "in-process", "drv_call", 0, &base.call, 0, 0);
    row(r, "-", "in-process", "read_reg", 0, &base.reg, 0, 0);
    row(r, "-", "in-process", "gpu_read", SMALL, &base.small, 0, 0);
    row(r, "-", "in-process", "gpu_read", BIG, &base.big, 0, 0);
    if (base.has_gpu)
        row(r, "-", "in-process", "to_gpu", SMALL, &base.gpu, 0, 0);
    for (size_t i = 0; i < o->ntls; i++) {
        const char *tls = strcmp(o->tls[i], "default") ? o->tls[i] : NULL;
        struct card_res rem;
        if ((rc = time_remote(o, tls, &rem)))
            return cli_fail(o->tls[i], rc);
        double lat8 = 0, lat4k = 0, bw = 0, mb;
        int p1 = perftest(o, tls, "ucp_am_lat", 8, o->regs, &lat8, &mb);
        int p2 = perftest(o, tls, "ucp_am_lat", SMALL, o->reads, &lat4k, &mb);
        int p3 = perftest(o, tls, "ucp_am_bw", BIG, o->big * 5, &mb, &bw);
        double rt8 = p1 ? 0 : 2000 * lat8, rt4k = p2 ? 0 : 2000 * lat4k;
        printf("%-8s transport: %s\n", o->tls[i], rem.transport);
        results_cell_str(r, "tls", o->tls[i]);
        results_cell_str(r, "transport", rem.transport);
        results_row(r, "transport");
        floor_row(r, o->tls[i], "am_lat", 8, rt8, 0);
        floor_row(r, o->tls[i], "am_lat", SMALL, rt4k, 0);
        floor_row(r, o->tls[i], "am_bw", BIG, 0, p3 ? 0 : bw);
        row(r, o->tls[i], "remote", "drv_call", 0, &rem.call, rt8, base.call.p50);
        row(r, o->tls[i], "remote", "read_reg", 0, &rem.reg, rt8, base.reg.p50);
        row(r, o->tls[i], "remote", "gpu_read", SMALL, &rem.small, rt4k, base.small.p50);
        /* bandwidth against perftest's: its MB/s (2^20 bytes) as the time of one block */
        row(r, o->tls[i], "remote", "gpu_read", BIG, &rem.big, p3 ? 0 : BIG / (bw * 1048576.0) * 1e9, base.big.p50);
        if (rem.has_gpu)
            row(r, o->tls[i], "remote", "to_gpu", SMALL, &rem.gpu, 0, base.has_gpu ? base.gpu.p50 : 0);
        if (rem.has_gpu_proc) { /* the server a process of its own: CUDA IPC where it works */
            row(r, o->tls[i], "serve-proc", "to_gpu", SMALL, &rem.gpu_proc, 0, base.has_gpu ? base.gpu.p50 : 0);
            printf("%-8s serve-proc to_gpu: %u of %u blocks by CUDA IPC\n", o->tls[i], rem.ipc_blocks,
                   o->reads + o->reads / 10 + 1);
        }
        streams[i] = rem;
    }
    stream_rows(r, o, "-", "in-process", &base, NULL);
    for (size_t i = 0; i < o->ntls; i++)
        stream_rows(r, o, o->tls[i], "remote", &streams[i], &base);
    return 0;
}

static int parse_args(int argc, char **argv, struct opts *o)
{
    const struct cli_command *cmd = &cli_cmd_bench_remote;
    for (int i = 1; i < argc; i++) {
        char opt[64];
        const char *a, *v;
        cli_opt_split(argc, argv, &i, opt, sizeof opt, &a, &v);
        uint64_t x;
        int st = 0;
        unsigned *count = !strcmp(a, "--regs") ? &o->regs : !strcmp(a, "--reads") ? &o->reads
                        : !strcmp(a, "--big")                       ? &o->big
                                                                    : NULL;
        if (count) {
            if (!(st = cli_arg_count(cmd, a, v, 1, 10000000, &x)))
                *count = (unsigned)x;
        } else if (!strcmp(a, "--gpu")) {
            o->gpu = 1;
        } else if (!strcmp(a, "--seconds")) {
            st = cli_arg_seconds(cmd, a, v, 0, 1, 3600, &o->seconds);
        } else if (!strcmp(a, "--stream-block")) {
            if (!(st = cli_arg_size(cmd, a, v, 4, 16u << 20, 4, &x)))
                o->stream_block = (uint32_t)x;
        } else if (!strcmp(a, "--tls")) {
            const char *list;
            if (!(st = cli_arg_text(cmd, a, v, "transports: UCX_TLS values or 'default', comma-separated", &list))) {
                if (strlen(list) >= sizeof o->tls_buf)
                    return cli_bad_arg(cmd, list);
                snprintf(o->tls_buf, sizeof o->tls_buf, "%s", list);
                o->ntls = 0;
                for (char *t = strtok(o->tls_buf, ","); t && o->ntls < MAX_TLS; t = strtok(NULL, ","))
                    o->tls[o->ntls++] = t;
                if (!o->ntls)
                    return cli_bad_arg(cmd, list);
            }
        } else if (!strcmp(a, "--perftest")) {
            st = cli_arg_text(cmd, a, v, "the path of ucx_perftest", &o->perftest);
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

/* What the result set's meta says of the method. */
#define METHOD \
    "per call: oni_get_driver_opt(ONI_DRV_RD_SZ) (drv_call: one driver call), oni_read_reg of a " \
    "hub manager register (several driver calls); oni_set_driver_opt(ONI_DRV_READ) of one " \
    "GPU-stream block (4 KiB, 16 MiB) into host memory, with --gpu 4 KiB into GPU memory " \
    "(remote: staged through host memory by the net driver; serve-proc: an onigpu serve " \
    "process, the card's DMA into it by CUDA IPC). Remote: the net driver to onigpu serve's " \
    "server on a thread of this process on 127.0.0.1, per UCX_TLS. Floor: ucx_perftest " \
    "ucp_am_lat (8 B, 4 KiB; round trip = 2 x its p50) and ucp_am_bw (16 MiB), two processes, " \
    "same UCX_TLS, in the same run. Ratios: p50 / floor, p50 / in-process p50. Stream: " \
    "oni_read_frame + oni_destroy_frame of " STREAM_CARD " for --seconds at --stream-block; " \
    "realtime: " RT_CARD " in real time for --seconds at the default BLOCKREADSIZE and at " \
    "--stream-block, frames/s read and the FIFO's bytes left (each a session of its own)"

struct remote_arg {
    const struct opts *o;
    int status; /* run_all's: 0, or 1 after it said why */
};

static int body(struct results *r, void *arg, int *measured)
{
    struct remote_arg *a = arg;
    const struct opts *o = a->o;
    results_meta(r, "card_spec", CARD);
    results_meta(r, "stream_card_spec", STREAM_CARD);
    results_meta(r, "realtime_card_spec", RT_CARD);
    const char *spin = getenv("ONIGPU_NET_SPIN_US");
    results_meta(r, "ONIGPU_NET_SPIN_US", spin && *spin ? spin : "100 (the default)");
    results_meta(r, "method", METHOD);
    a->status = run_all(o, r);
    return 0;
}

static int remote_bench(int argc, char **argv)
{
    struct opts o = {.regs = 2000, .reads = 2000, .big = 20, .tls = {"default", "tcp"}, .ntls = 2,
                     .seconds = 1, .stream_block = 65536, .perftest = "ucx_perftest", .out = "docs/results"};
    int st = parse_args(argc, argv, &o);
    if (st)
        return st;
    if ((st = cli_arg_outdir(&cli_cmd_bench_remote, "--out", o.out, &o.out)) != 0)
        return st;
    char gname[128] = "";
    const char *gpu = o.gpu && !gpu_name(gname, sizeof gname) ? gname : NULL;
    struct remote_arg a = {&o, 0};
    struct bench_cli_set set = {"bench remote", o.out, "remote", gpu, NULL, body, &a};
    st = bench_cli_run(&set);
    return st ? st : a.status;
}
