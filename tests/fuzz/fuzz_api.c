/* fuzz_api.c - the public ONI API (oni.h) driven by call sequences that the
 * input bytes choose, against the scripted fixture driver: contexts created,
 * initialized (twice), destroyed; every context option got and set with odd
 * sizes and NULL pointers; the driver's streams, register answers and
 * refusals scripted from the input; registers; read frames kept alive across
 * later calls and the context's end; write frames made and sent.
 *
 * The fuzzer keeps a model of what the docs promise and aborts when a call
 * contradicts it: a return code outside docs/errors.md (or, for the options,
 * other than the one the model predicts), a read frame that is not a frame of
 * the table or whose bytes change while it is alive, a write stream that is
 * not whole frames in call order, a register that does not read back what
 * was written, a call that waits much longer than ONI_OPT_TIMEOUTMS. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "../fixtures/drivers/fixture.h"

#define FAILIF(cond)                                                                          \
    do {                                                                                      \
        if (cond) {                                                                           \
            fprintf(stderr, "fuzz_api: %s:%d: %s\n", __FILE__, __LINE__, #cond);            \
            abort();                                                                          \
        }                                                                                     \
    } while (0)
#define MAXOPS 256
#define NHELD 32
#define SLACK_MS 3000 /* beyond ONI_OPT_TIMEOUTMS before a call counts as hanging */
#define UNKNOWN (INT_MIN) /* a return the model does not predict exactly */

/* ---- input --------------------------------------------------------------- */

struct in {
    const uint8_t *p;
    size_t n;
};

static uint8_t u8(struct in *in)
{
    if (!in->n)
        return 0;
    in->n--;
    return *in->p++;
}

static uint32_t u32(struct in *in)
{
    uint32_t v = u8(in);
    v |= (uint32_t)u8(in) << 8;
    v |= (uint32_t)u8(in) << 16;
    return v | (uint32_t)u8(in) << 24;
}

/* Up to want bytes of the input, in place; their count in *n. */
static const uint8_t *take(struct in *in, size_t want, size_t *n)
{
    const uint8_t *p = in->p;
    *n = want < in->n ? want : in->n;
    in->p += *n;
    in->n -= *n;
    return p;
}

/* ---- the model ----------------------------------------------------------- */

struct held {
    oni_frame_t *f;
    int read;
    unsigned gen;   /* context generation it came from */
    uint64_t sum;   /* of its header and payload when handed out */
};

static struct {
    oni_ctx ctx;
    unsigned gen;
    int inited;
    int running;          /* the context's state: ONI_OPT_RUNNING last set nonzero; -1: unknown */
    int64_t hwrun;        /* the value the RUNNING register was last written, -1: unknown */
    uint32_t timeout;
    oni_device_t *devs;   /* the table as the last successful reset gave it */
    size_t ndev;
    uint32_t maxr, maxw;  /* MAXREADFRAMESIZE, MAXWRITEFRAMESIZE */
    uint32_t regmode;
    int32_t callback_rc;
    int reg_known[4][4];
    uint32_t reg_val[4][4];
    uint8_t rest[1 << 16]; /* the unsent rest of a frame the library keeps */
    size_t rest_len;
    size_t written;        /* bytes the driver's write stream had at the last look */
    uint32_t resets;
    struct held held[NHELD];
} S;

static uint8_t written_buf[1 << 20];

static const oni_device_t presets[][5] = {
    {{0, 24, 1, 0, 0}, {1, 1, 2, 16, 8}, {2, 10, 1, 4, 0}, {0x100, 10, 1, 33, 4}, {0x101, 8, 1, 0, 12}},
    {{3, 10, 1, 1, 1}},
    {{5, 8, 1, 0, 4}},
    {{7, 10, 1, 1000, 0}, {8, 10, 1, 2, 2}, {0x10008, 10, 1, 6, 3}},
};
static const uint32_t npresets[] = {5, 1, 1, 3};
#define NPRESET 4

static uint64_t hash(uint64_t h, const void *p, size_t n)
{
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 0x100000001B3ull;
    return h;
}

static uint64_t frame_sum(const oni_frame_t *f)
{
    uint64_t h = hash(0xCBF29CE484222325ull, f, 16);
    return hash(h, f->data, f->data_sz); /* ASan: every byte inside a live allocation */
}

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static int documented(int rc)
{
    return rc >= 0 || (rc <= ONI_ESUCCESS && rc > ONI_MINERRORNUM) ||
           (rc <= ONI_ETIMEOUT && rc > ONI_MINERRORNUM_ONIGPU);
}

/* rc must be want, or one of the codes listed after it (a list ended by
 * INT_MAX) when want is UNKNOWN. */
static void expect(int rc, int want, const int *alts, int line)
{
    int ok = documented(rc) && (want == UNKNOWN ? 0 : rc == want);
    if (want == UNKNOWN)
        for (const int *a = alts; a && *a != INT_MAX; a++)
            ok |= rc == *a;
    if (!ok) {
        fprintf(stderr, "fuzz_api: line %d: returned %d (%s), want %d\n", line, rc, oni_error_str(rc),
                want);
        abort();
    }
}
#define EXPECT(rc, want) expect((rc), (want), NULL, __LINE__)
#define EXPECT_ONE_OF(rc, ...) expect((rc), UNKNOWN, (const int[]){__VA_ARGS__, INT_MAX}, __LINE__)

static struct scr_stats stats(void)
{
    return fx_stats(S.ctx);
}

static const oni_device_t *find_dev(uint32_t idx)
{
    for (size_t i = 0; i < S.ndev; i++)
        if (S.devs[i].idx == idx)
            return &S.devs[i];
    return NULL;
}

static int readable(void)
{
    for (size_t i = 0; i < S.ndev; i++)
        if (S.devs[i].read_size)
            return 1;
    return 0;
}

static uint32_t get_u32(int opt)
{
    uint32_t v = 0;
    size_t n = sizeof v;
    EXPECT(oni_get_opt(S.ctx, opt, &v, &n), 0);
    FAILIF(n != 4);
    return v;
}

/* After a successful init or RESET: take the table in and check what the
 * core promises of it and of the sizes that follow from it. */
static void load_table(void)
{
    uint32_t n = get_u32(ONI_OPT_NUMDEVICES);
    FAILIF(n > 65536);
    free(S.devs);
    S.devs = calloc(n ? n : 1, sizeof *S.devs);
    size_t sz = n * sizeof *S.devs;
    EXPECT(oni_get_opt(S.ctx, ONI_OPT_DEVICETABLE, S.devs, &sz), 0);
    FAILIF(sz != n * sizeof *S.devs);
    S.ndev = n;
    uint32_t rmax = 0, wmax = 0;
    for (uint32_t i = 0; i < n; i++) {
        FAILIF(i && S.devs[i - 1].idx >= S.devs[i].idx);
        FAILIF(S.devs[i].read_size > (16u << 20) || S.devs[i].write_size > (16u << 20));
        rmax = S.devs[i].read_size > rmax ? S.devs[i].read_size : rmax;
        wmax = S.devs[i].write_size > wmax ? S.devs[i].write_size : wmax;
    }
    S.maxr = get_u32(ONI_OPT_MAXREADFRAMESIZE);
    S.maxw = get_u32(ONI_OPT_MAXWRITEFRAMESIZE);
    FAILIF(S.maxr != 16 + rmax || S.maxw != 8 + wmax);
    uint32_t br = get_u32(ONI_OPT_BLOCKREADSIZE), bw = get_u32(ONI_OPT_BLOCKWRITESIZE);
    FAILIF(br < S.maxr || br % 4 || bw < S.maxw || bw % 4);
    FAILIF(get_u32(ONI_OPT_SYSCLKHZ) != 250000000 || get_u32(ONI_OPT_ACQCLKHZ) != 250000000);
}

/* A reset drops the kept rest of a write (docs/errors.md, a write that timed out). */
static void note_resets(void)
{
    uint32_t r = stats().resets;
    if (r != S.resets)
        S.rest_len = 0;
    S.resets = r;
}

/* ONI_OPT_RUNNING reads the hardware's register, as upstream's does. */
static void check_running(void)
{
    uint32_t v = get_u32(ONI_OPT_RUNNING);
    FAILIF(S.hwrun >= 0 && v != (uint32_t)S.hwrun);
    S.hwrun = v;
}

/* Every frame still held must be what it was when handed out. */
static void check_held(void)
{
    for (int i = 0; i < NHELD; i++)
        if (S.held[i].f)
            FAILIF(frame_sum(S.held[i].f) != S.held[i].sum);
}

static void hold(oni_frame_t *f, int read)
{
    int i = 0;
    while (i < NHELD && S.held[i].f)
        i++;
    if (i == NHELD) {
        i = (int)(f->data_sz % NHELD);
        FAILIF(frame_sum(S.held[i].f) != S.held[i].sum);
        oni_destroy_frame(S.held[i].f);
    }
    S.held[i] = (struct held){f, read, S.gen, frame_sum(f)};
}

/* ---- lifecycle ----------------------------------------------------------- */

static void set_drv(int opt, uint32_t v)
{
    EXPECT(fx_set_u32(S.ctx, opt, v), 0);
}

static void op_create(void)
{
    if (S.ctx)
        return;
    S.ctx = oni_create_ctx_driver(&onifix_scripted);
    FAILIF(!S.ctx);
    S.gen++;
    S.inited = 0;
    S.running = 0;
    S.hwrun = -1;
    S.ndev = 0;
    S.regmode = 0;
    S.callback_rc = 0;
    S.rest_len = 0;
    S.written = 0;
    S.resets = 0;
    memset(S.reg_known, 0, sizeof S.reg_known);
    S.timeout = 1;
    EXPECT(oni_set_opt(S.ctx, ONI_OPT_TIMEOUTMS, &S.timeout, 4), 0);
    size_t len = fx_devtable(written_buf, sizeof written_buf, presets[0], npresets[0]);
    EXPECT(oni_set_driver_opt(S.ctx, SCR_OPT_DEVTABLE, written_buf, len), 0);
}

static void op_destroy(void)
{
    if (!S.ctx)
        return;
    EXPECT(oni_destroy_ctx(S.ctx), 0);
    S.ctx = NULL;
    check_held(); /* read frames stay valid after the context (oni.h) */
}

static void op_init(struct in *in)
{
    int host = (int8_t)u8(in);
    uint32_t inits = stats().inits;
    int rc = oni_init_ctx(S.ctx, host);
    if (S.inited) {
        EXPECT(rc, ONI_EINVALSTATE);
        FAILIF(stats().inits != inits); /* the hardware is not opened twice */
    } else {
        EXPECT_ONE_OF(rc, 0, ONI_EINIT, ONI_EPATHINVALID, ONI_ETIMEOUT, ONI_ECOBSPACK, ONI_EBADDEVTABLE,
                      ONI_EDEVIDXREPEAT, ONI_EBADALLOC, ONI_EREADFAILURE, ONI_EINVALOPT, ONI_EUNIMPL);
    }
    note_resets();
    if (rc == 0) {
        S.inited = 1;
        S.running = 0;
        S.hwrun = -1;
        load_table();
        check_running();
    }
}

/* ---- context options ----------------------------------------------------- */

static int pick_opt(struct in *in)
{
    static const int opts[] = {ONI_OPT_CUSTOMBEGIN, ONI_OPT_CUSTOMBEGIN + 15, ONI_OPT_CUSTOMBEGIN + 16,
                               ONI_OPT_TIMEOUTMS, ONI_OPT_TIMEOUTMS - 1, -1, INT_MAX, INT_MIN};
    uint8_t c = u8(in);
    if (c < 12 * 16)
        return c % 12;
    if (c < 12 * 16 + 8 * 7)
        return opts[c % 8];
    return (int)u32(in);
}

static int custom_ok(int opt)
{
    return opt >= ONI_OPT_CUSTOMBEGIN && opt - ONI_OPT_CUSTOMBEGIN < SCR_NCONFIG - ONI_CONFIG_CUSTOMBEGIN;
}

static size_t pick_size(struct in *in, size_t table)
{
    static const size_t sizes[] = {0, 1, 4, 8, 3, 5};
    uint8_t c = u8(in);
    if (c < 6 * 32)
        return sizes[c % 6];
    if (c < 240)
        return table;
    return c & 1 ? (table ? table - 1 : 2) : 4096;
}

/* What oni_get_opt must answer for a buffer of size bytes (non-NULL pointers). */
static int expect_get(int opt, size_t size)
{
    size_t need = opt == ONI_OPT_DEVICETABLE ? S.ndev * sizeof(oni_device_t) : 4;
    if (opt == ONI_OPT_RESET || opt == ONI_OPT_RESETACQCOUNTER)
        return ONI_EWRITEONLY;
    if (opt < 0)
        return ONI_EPROTCONFIG;
    if (opt == ONI_OPT_TIMEOUTMS)
        return size < 4 ? ONI_EBUFFERSIZE : 0;
    if (!S.inited)
        return ONI_EINVALSTATE;
    if (size < need)
        return ONI_EBUFFERSIZE;
    if (opt >= ONI_OPT_CUSTOMBEGIN && opt != ONI_OPT_TIMEOUTMS && !custom_ok(opt))
        return ONI_EINVALOPT;
    return 0;
}

static void check_got(int opt, const void *value, size_t size)
{
    uint32_t v = 0;
    if (opt == ONI_OPT_DEVICETABLE) {
        FAILIF(size != S.ndev * sizeof(oni_device_t));
        FAILIF(size && memcmp(value, S.devs, size));
        return;
    }
    FAILIF(size != 4);
    memcpy(&v, value, 4);
    if (opt == ONI_OPT_TIMEOUTMS)
        FAILIF(v != S.timeout);
    else if (opt == ONI_OPT_RUNNING)
        FAILIF(S.hwrun >= 0 && v != (uint32_t)S.hwrun); /* the register, as written (check_running) */
    else if (opt == ONI_OPT_NUMDEVICES)
        FAILIF(v != S.ndev);
    else if (opt == ONI_OPT_MAXREADFRAMESIZE)
        FAILIF(v != S.maxr);
    else if (opt == ONI_OPT_MAXWRITEFRAMESIZE)
        FAILIF(v != S.maxw);
}

static void op_get_opt(struct in *in)
{
    int opt = pick_opt(in);
    size_t table = S.ndev * sizeof(oni_device_t);
    size_t size = pick_size(in, table);
    uint8_t how = u8(in);
    if (how % 8 == 0) { /* NULL pointers */
        size_t n = size;
        int want = expect_get(opt, 4);
        want = want == ONI_EWRITEONLY || want == ONI_EPROTCONFIG || want == ONI_EINVALSTATE ? want : ONI_EINVALARG;
        EXPECT(oni_get_opt(S.ctx, opt, NULL, &n), want);
        uint32_t v;
        EXPECT(oni_get_opt(S.ctx, opt, &v, NULL), want);
        return;
    }
    uint8_t *buf = malloc(size); /* exactly size bytes: ASan sees a write past them */
    if (!buf && size)
        return;
    size_t n = size;
    int want = expect_get(opt, size);
    int rc = oni_get_opt(S.ctx, opt, buf, &n);
    EXPECT(rc, want);
    if (rc == ONI_EBUFFERSIZE)
        FAILIF(n != (opt == ONI_OPT_DEVICETABLE ? table : 4)); /* what is needed */
    if (rc == 0)
        check_got(opt, buf, n);
    free(buf);
}

static uint32_t pick_value(struct in *in, int opt)
{
    uint8_t c = u8(in);
    if (opt == ONI_OPT_TIMEOUTMS)
        return 1 + c % 5; /* keep every wait short (0, waiting while live, could wait for ever) */
    if (opt == ONI_OPT_BLOCKREADSIZE || opt == ONI_OPT_BLOCKWRITESIZE) {
        uint32_t base = opt == ONI_OPT_BLOCKREADSIZE ? S.maxr : S.maxw;
        switch (c % 8) {
        case 0: return base + (uint32_t)(c >> 3) - 8;
        case 1: return (base + 3u) & ~3u;
        case 2: return ((base + 3u) & ~3u) + 4u * (c >> 3);
        case 3: return (1u << 30) + 4;
        case 4: return 0xFFFFFFFCu;
        case 5: return 4u * u8(in);
        case 6: return (u32(in) & 0xFFFFu) * 4; /* a bigger block, but far below 1 GiB */
        default: return u32(in) | (1u << 30); /* above the ceiling: refused, never allocated */
        }
    }
    if (c < 128)
        return c % 4;
    return c < 192 ? c : u32(in);
}

/* What oni_set_opt must answer before it looks at the value (upstream's
 * order: the option, the state), 0 if it goes on. */
static int expect_set_pre(int opt)
{
    switch (opt) {
    case ONI_OPT_DEVICETABLE:
    case ONI_OPT_NUMDEVICES:
    case ONI_OPT_SYSCLKHZ:
    case ONI_OPT_ACQCLKHZ:
    case ONI_OPT_MAXREADFRAMESIZE:
    case ONI_OPT_MAXWRITEFRAMESIZE:
        return ONI_EREADONLY;
    case ONI_OPT_TIMEOUTMS:
        return 0;
    case ONI_OPT_RESET:
    case ONI_OPT_BLOCKREADSIZE:
    case ONI_OPT_BLOCKWRITESIZE:
        if (!S.inited)
            return ONI_EINVALSTATE;
        if (S.running != 0)
            return S.running < 0 ? UNKNOWN : ONI_EINVALSTATE;
        return 0;
    default:
        if (opt < 0)
            return ONI_EPROTCONFIG;
        return S.inited ? 0 : ONI_EINVALSTATE;
    }
}

/* What oni_set_opt must answer for a 4-byte value v, before the callback. */
static int expect_set(int opt, uint32_t v)
{
    int pre = expect_set_pre(opt);
    if (pre)
        return pre;
    switch (opt) {
    case ONI_OPT_TIMEOUTMS:
    case ONI_OPT_RUNNING:
    case ONI_OPT_HWADDRESS:
    case ONI_OPT_RESETACQCOUNTER:
        return 0;
    case ONI_OPT_RESET:
        return v == 0 ? 0 : UNKNOWN;
    case ONI_OPT_BLOCKREADSIZE:
        return v < S.maxr || v % 4 || v > (1u << 30) ? ONI_EINVALREADSIZE : 0;
    case ONI_OPT_BLOCKWRITESIZE:
        return v < S.maxw || v % 4 || v > (1u << 30) ? ONI_EINVALWRITESIZE : 0;
    default:
        return custom_ok(opt) ? 0 : ONI_EINVALOPT;
    }
}

/* A set that reached the core's success: the model follows it. */
static void set_done(int opt, uint32_t v, int rc)
{
    if (opt == ONI_OPT_TIMEOUTMS)
        S.timeout = v;
    if (opt == ONI_OPT_RUNNING) {
        S.running = v != 0;
        S.hwrun = v; /* written as it is, as upstream writes it */
    }
    if (opt == ONI_OPT_BLOCKREADSIZE && rc == 0)
        FAILIF(get_u32(ONI_OPT_BLOCKREADSIZE) != v);
    if (opt == ONI_OPT_BLOCKWRITESIZE && rc == 0)
        FAILIF(get_u32(ONI_OPT_BLOCKWRITESIZE) != v);
}

static void op_set_opt(struct in *in)
{
    int opt = pick_opt(in);
    uint32_t v = pick_value(in, opt);
    size_t size = pick_size(in, 4);
    if (u8(in) % 8 == 0) {
        int pre = expect_set_pre(opt);
        if (pre != UNKNOWN)
            EXPECT(oni_set_opt(S.ctx, opt, NULL, size), pre ? pre : size != 4 ? ONI_EBUFFERSIZE : ONI_EINVALARG);
        return;
    }
    uint8_t *buf = malloc(size); /* exactly size bytes: ASan sees a read past them */
    if (!buf && size)
        return;
    memcpy(buf, &v, size < 4 ? size : 4);
    if (size > 4)
        memset(buf + 4, 0xA5, size - 4);
    int pre = expect_set_pre(opt);
    int want = pre ? pre : size != 4 ? ONI_EBUFFERSIZE : expect_set(opt, v);
    int rc = oni_set_opt(S.ctx, opt, buf, size);
    free(buf);
    int core = want;
    if (want == 0 && opt != ONI_OPT_TIMEOUTMS && S.callback_rc != 0)
        want = S.callback_rc; /* the driver's set_opt_callback answers after the core, as it is */
    if (want == UNKNOWN) { /* a reset: the hardware's answer */
        EXPECT_ONE_OF(rc, 0, ONI_ETIMEOUT, ONI_ECOBSPACK, ONI_EBADDEVTABLE, ONI_EDEVIDXREPEAT,
                      ONI_EBADALLOC, ONI_EINVALSTATE, ONI_EREADFAILURE, S.callback_rc < 0 ? S.callback_rc : 0);
        note_resets();
        if (S.running >= 0 && rc != ONI_EINVALSTATE && (rc == 0 || rc == S.callback_rc))
            load_table();
    } else {
        EXPECT(rc, want);
        if (opt == ONI_OPT_RESET && v && rc == want && (rc == 0 || rc == S.callback_rc)) {
            note_resets();
            load_table();
        }
    }
    if (core == 0 || (core == UNKNOWN && (rc == 0 || rc == S.callback_rc)))
        set_done(opt, v, rc);
    if (S.inited)
        check_running();
}

/* ---- the scripted driver's options ---------------------------------------- */

/* The data stream: raw bytes, or frames of the table with some of them wrong. */
static void op_data(struct in *in)
{
    static uint8_t buf[1 << 16];
    uint8_t how = u8(in);
    size_t len = 0;
    const uint8_t *raw = NULL;
    if (how & 1) {
        raw = take(in, u8(in) * 4u, &len);
    } else {
        const oni_device_t *t = S.ndev ? S.devs : presets[how >> 6];
        size_t nt = S.ndev ? S.ndev : npresets[how >> 6];
        unsigned n = 1 + (how >> 1) % 32;
        for (unsigned i = 0; i < n; i++) {
            uint8_t c = u8(in);
            const oni_device_t *d = &t[c % nt];
            uint32_t idx = d->idx, sz = d->read_size;
            if ((c & 0xC0) == 0xC0)
                sz = u8(in); /* most likely the wrong size */
            if ((c & 0xE0) == 0xA0)
                idx = u32(in);
            if (sz > 2048 || len + 16 + oni_pad4(sz) > sizeof buf)
                break;
            len += fx_frame(buf + len, i + (uint64_t)u8(in) * 256, idx, sz);
        }
        raw = buf;
    }
    EXPECT(oni_set_driver_opt(S.ctx, SCR_OPT_DATA, len ? raw : NULL, len), 0);
}

/* The signal stream: raw bytes, or packets of any type. */
static void op_signal(struct in *in)
{
    static const uint32_t types[] = {ONI_SIG_NULL, ONI_SIG_CONFIGWACK, ONI_SIG_CONFIGWNACK,
                                     ONI_SIG_CONFIGRACK, ONI_SIG_CONFIGRNACK, ONI_SIG_DEVICETABLEACK,
                                     ONI_SIG_DEVICEINST, 0};
    uint8_t how = u8(in);
    size_t n;
    if (how & 1) {
        const uint8_t *raw = take(in, how >> 1, &n);
        EXPECT(oni_set_driver_opt(S.ctx, SCR_OPT_SIGNAL, n ? raw : NULL, n), 0);
        return;
    }
    uint8_t pkt[300];
    const uint8_t *payload = take(in, (how >> 4) * 2u, &n);
    int len = oni_signal_pack(types[(how >> 1) % 8], n ? payload : NULL, n, pkt, sizeof pkt);
    if (len > 0)
        EXPECT(oni_set_driver_opt(S.ctx, SCR_OPT_SIGNAL, pkt, (size_t)len), 0);
}

/* What the driver emits on RESET: a preset table, devices from the input, or raw bytes. */
static void op_devtable(struct in *in)
{
    static uint8_t buf[4096];
    uint8_t how = u8(in);
    size_t len = 0;
    if (how % 4 == 0) {
        const uint8_t *raw = take(in, how, &len);
        memcpy(buf, raw, len);
    } else if (how % 4 == 1) {
        oni_device_t d[8];
        uint32_t n = (how >> 2) % 9;
        for (uint32_t i = 0; i < n; i++) {
            uint8_t a = u8(in), b = u8(in), c = u8(in);
            d[i] = (oni_device_t){a % 8 | (uint32_t)(a >> 6) << 8, 10, 1, b % 70, c % 20};
            if (b == 255)
                d[i].read_size = u32(in); /* maybe above the 16 MiB a frame may have */
        }
        len = fx_devtable(buf, sizeof buf, d, n);
    } else {
        uint32_t k = (how >> 2) % NPRESET;
        len = fx_devtable(buf, sizeof buf, presets[k], npresets[k]);
    }
    EXPECT(oni_set_driver_opt(S.ctx, SCR_OPT_DEVTABLE, len ? buf : NULL, len), 0);
}

/* The driver's knobs, and its options asked in ways that must be refused. */
static void op_knob(struct in *in)
{
    static const int32_t rcs[] = {0, 1, ONI_EINIT, ONI_EPATHINVALID, ONI_EINVALOPT, ONI_EUNIMPL, 0, 0};
    uint8_t c = u8(in), v = u8(in);
    switch (c % 14) {
    case 0: set_drv(SCR_OPT_REPEAT, v & 1); break;
    case 1: set_drv(SCR_OPT_CHUNK, v % 33); break;
    case 2: set_drv(SCR_OPT_REGMODE, S.regmode = v % 6); break;
    case 3: set_drv(SCR_OPT_EMPTY, v % 4); break;
    case 4: set_drv(SCR_OPT_INITRC, (uint32_t)rcs[v % 8]); break;
    case 5: set_drv(SCR_OPT_WRITECHUNK, v % 24); break;
    case 6: set_drv(SCR_OPT_CALLBACKRC, (uint32_t)(S.callback_rc = rcs[v % 8])); break;
    case 7: set_drv(SCR_OPT_WRITEROOM, v & 1 ? UINT32_MAX : v); break;
    case 8: set_drv(SCR_OPT_RUNGATE, v & 1); break;
    case 9: set_drv(SCR_OPT_TABLEDELAY, v % 4); break;
    case 10: {
        uint32_t x = v;
        EXPECT(oni_set_driver_opt(S.ctx, SCR_OPT_REPEAT, &x, v % 4), ONI_EBUFFERSIZE);
        EXPECT(oni_set_driver_opt(S.ctx, SCR_OPT_SIGNAL, NULL, 1 + v), ONI_EINVALARG);
        EXPECT(oni_set_driver_opt(S.ctx, (int)u32(in) | 0x100, &x, 4), ONI_EINVALOPT);
        break;
    }
    case 11: {
        struct scr_stats st;
        size_t n = v % 2 ? sizeof st : v % 8;
        int rc = oni_get_driver_opt(S.ctx, SCR_OPT_STATS, &st, &n);
        EXPECT(rc, n < sizeof st && v % 2 == 0 ? ONI_EBUFFERSIZE : 0);
        EXPECT(oni_get_driver_opt(S.ctx, SCR_OPT_STATS, NULL, &n), ONI_EINVALARG);
        EXPECT(oni_get_driver_opt(S.ctx, SCR_OPT_STATS, &st, NULL), ONI_EINVALARG);
        break;
    }
    default: {
        uint32_t x;
        size_t n = 4;
        EXPECT(oni_get_driver_opt(S.ctx, SCR_OPT_DATA, &x, &n), ONI_EINVALOPT);
    }
    }
}

/* ---- registers ----------------------------------------------------------- */

static int store_mode(void)
{
    return S.regmode == SCR_REG_ACK || S.regmode > SCR_REG_EXTERNAL;
}

static void op_reg(struct in *in, int write)
{
    uint8_t c = u8(in);
    uint32_t dev = c % 4, addr = (c >> 2) % 4, v = u32(in);
    if ((c >> 4) == 15) { /* a NULL value, an index not in the table */
        if (!write)
            EXPECT(oni_read_reg(S.ctx, dev, addr, NULL), ONI_EINVALARG);
        dev = u32(in);
    }
    int rc = write ? oni_write_reg(S.ctx, dev, addr, v) : oni_read_reg(S.ctx, dev, addr, &v);
    /* before init too: the driver answers, as under upstream's liboni */
    EXPECT_ONE_OF(rc, 0, write ? ONI_EWRITEFAILURE : ONI_EREADFAILURE, ONI_ERETRIG, ONI_ETIMEOUT,
                  ONI_ECOBSPACK, ONI_EBADALLOC);
    if (dev >= 4 || !store_mode())
        return;
    if (write) { /* the store took it on success; on a failure it may or may not have */
        S.reg_known[dev][addr] = rc == 0;
        S.reg_val[dev][addr] = v;
    } else if (rc == 0 && S.reg_known[dev][addr]) {
        FAILIF(v != S.reg_val[dev][addr]);
    }
}

/* ---- frames -------------------------------------------------------------- */

static void check_read_frame(const oni_frame_t *f, int rc)
{
    const oni_device_t *d = find_dev(f->dev_idx);
    FAILIF(!d || d->read_size == 0 || d->read_size != f->data_sz);
    FAILIF((size_t)rc != sizeof(oni_frame_t) + f->data_sz + f->data_sz % 4); /* upstream's answer */
    FAILIF(f->data_sz && !f->data);
}

static void op_read_frames(struct in *in)
{
    uint8_t c = u8(in);
    if (c == 255) {
        EXPECT(oni_read_frame(S.ctx, NULL), ONI_EINVALARG);
        return;
    }
    for (unsigned i = 0; i < 1u + c % 16; i++) {
        oni_frame_t *f = NULL;
        int rc = oni_read_frame(S.ctx, &f);
        if (!S.inited) {
            EXPECT(rc, ONI_EINVALSTATE);
            return;
        }
        if (!readable()) {
            EXPECT(rc, ONI_ENOREADDEV);
            return;
        }
        if (rc <= 0) {
            EXPECT_ONE_OF(rc, ONI_EBADFRAME, ONI_ETIMEOUT, ONI_EBADALLOC, ONI_EREADFAILURE);
            if (rc != ONI_EBADFRAME)
                return;
            continue;
        }
        check_read_frame(f, rc);
        if (c & 0x80)
            hold(f, 1);
        else
            oni_destroy_frame(f);
    }
}

static void op_destroy_frame(struct in *in)
{
    int i = u8(in) % NHELD;
    if (!S.held[i].f)
        return;
    FAILIF(frame_sum(S.held[i].f) != S.held[i].sum);
    oni_destroy_frame(S.held[i].f);
    S.held[i].f = NULL;
}

/* What oni_create_frame must answer for device d (NULL: not in the table). */
static int expect_create(const oni_device_t *d, size_t sz)
{
    if (!S.inited)
        return ONI_EINVALSTATE;
    if (!d)
        return ONI_EDEVIDX;
    if (!d->write_size)
        return ONI_ENOTWRITEDEV;
    /* 0 is a multiple too; success answers upstream's 24 + sz + sz % 4 */
    return sz % d->write_size ? ONI_EWRITESIZE : (int)(sizeof(oni_frame_t) + sz + sz % 4);
}

static void op_create_frame(struct in *in)
{
    uint8_t c = u8(in);
    uint32_t idx = S.ndev && c < 224 ? S.devs[c % S.ndev].idx : u32(in);
    size_t sz = u8(in);
    const oni_device_t *d = find_dev(idx);
    if (d && d->write_size && c % 4)
        sz = d->write_size * (sz % 4); /* a multiple, 0 included */
    oni_frame_t *f = NULL;
    uint8_t *data = malloc(sz ? sz : 1); /* exactly sz bytes: ASan sees a read past them */
    for (size_t i = 0; i < sz; i++)
        data[i] = (uint8_t)(i * 7 + c);
    if (c % 16 == 15) {
        EXPECT(oni_create_frame(S.ctx, NULL, idx, data, sz), ONI_EINVALARG);
        if (sz)
            EXPECT(oni_create_frame(S.ctx, &f, idx, NULL, sz), ONI_EINVALARG);
        EXPECT(oni_create_frame(S.ctx, &f, idx, NULL, 0), expect_create(d, 0)); /* no data: size 0 */
        if (expect_create(d, 0) > 0)
            oni_destroy_frame(f);
        free(data);
        return;
    }
    int want = expect_create(d, sz);
    int rc = oni_create_frame(S.ctx, &f, idx, data, sz);
    EXPECT(rc, want);
    if (rc > 0) {
        FAILIF(f->dev_idx != idx || f->data_sz != sz || memcmp(f->data, data, sz));
        hold(f, 0);
    }
    free(data);
}

/* Send a held write frame (or a read frame, which is refused) and check
 * what reached the driver: the kept rest of an earlier frame, then this
 * one, as a prefix of the two; whatever is not out is kept only when it
 * is the rest of a frame already begun (docs/errors.md). */
static void op_write_frame(struct in *in)
{
    uint8_t c = u8(in);
    struct held *h = &S.held[c % NHELD];
    if (c == 255) {
        EXPECT(oni_write_frame(S.ctx, NULL), ONI_EINVALARG);
        return;
    }
    if (!h->f || h->gen != S.gen)
        return;
    if (h->read) {
        EXPECT(oni_write_frame(S.ctx, h->f), ONI_EINVALARG);
        return;
    }
    const oni_frame_t *f = h->f;
    size_t wlen = 8 + oni_pad4(f->data_sz);
    uint8_t *frame = malloc(wlen);
    uint32_t hdr[2] = {f->dev_idx, (uint32_t)(oni_pad4(f->data_sz) / 4)};
    memcpy(frame, hdr, 8);
    memcpy(frame + 8, f->data, f->data_sz);
    memset(frame + 8 + f->data_sz, 0, wlen - 8 - f->data_sz);
    int rc = oni_write_frame(S.ctx, f);
    if (rc > 0)
        FAILIF((size_t)rc != 8 + f->data_sz); /* upstream's answer: header and data_sz */
    else
        EXPECT_ONE_OF(rc, ONI_ETIMEOUT, ONI_EWRITEFAILURE, ONI_EBADALLOC);
    size_t n = sizeof written_buf;
    EXPECT(oni_get_driver_opt(S.ctx, SCR_OPT_WRITTEN, written_buf, &n), 0);
    FAILIF(n < S.written);
    size_t sent = n - S.written, r = S.rest_len;
    const uint8_t *out = written_buf + S.written;
    S.written = n;
    FAILIF(sent > r + wlen);
    FAILIF(memcmp(out, S.rest, sent < r ? sent : r));
    if (sent > r)
        FAILIF(memcmp(out + r, frame, sent - r));
    FAILIF((rc > 0) != (sent == r + wlen)); /* all out, and only then, is a success */
    if (sent < r) { /* the rest went out in part: this frame not at all */
        memmove(S.rest, S.rest + sent, r - sent);
        S.rest_len = r - sent;
    } else if (sent > r && sent < r + wlen && wlen - (sent - r) <= sizeof S.rest) {
        S.rest_len = wlen - (sent - r);
        memcpy(S.rest, frame + (sent - r), S.rest_len);
    } else {
        S.rest_len = 0;
    }
    free(frame);
}

/* ---- NULL contexts, bad names and the rest of oni.h ----------------------- */

static void op_misc(struct in *in)
{
    uint32_t v = 1;
    size_t n = 4;
    oni_frame_t *f;
    EXPECT(oni_init_ctx(NULL, 0), ONI_ENULLCTX);
    EXPECT(oni_destroy_ctx(NULL), ONI_ENULLCTX);
    EXPECT(oni_get_opt(NULL, ONI_OPT_RUNNING, &v, &n), ONI_ENULLCTX);
    EXPECT(oni_set_opt(NULL, ONI_OPT_RUNNING, &v, 4), ONI_ENULLCTX);
    EXPECT(oni_get_driver_opt(NULL, SCR_OPT_STATS, &v, &n), ONI_ENULLCTX);
    EXPECT(oni_set_driver_opt(NULL, SCR_OPT_REPEAT, &v, 4), ONI_ENULLCTX);
    EXPECT(oni_read_reg(NULL, 0, 0, &v), ONI_ENULLCTX);
    EXPECT(oni_write_reg(NULL, 0, 0, v), ONI_ENULLCTX);
    EXPECT(oni_read_frame(NULL, &f), ONI_ENULLCTX);
    EXPECT(oni_create_frame(NULL, &f, 0, &v, 4), ONI_ENULLCTX);
    EXPECT(oni_write_frame(NULL, NULL), ONI_ENULLCTX);
    oni_destroy_frame(NULL);
    FAILIF(oni_get_driver_info(NULL) != NULL);
    const oni_driver_info_t *info = oni_get_driver_info(S.ctx);
    FAILIF(!info || !info->name || strcmp(info->name, "scripted"));
    FAILIF(!oni_error_str((int)u32(in)));
    int ma, mi, pa;
    oni_version(&ma, &mi, &pa);
    FAILIF(ma != ONI_VERSION_MAJOR || mi != ONI_VERSION_MINOR || pa != ONI_VERSION_PATCH);
    static const char *bad[] = {NULL, "", "a/b", "../x", "x y",
                                "a123456789012345678901234567890123456789012345678901234567890123456789"};
    errno = 0;
    FAILIF(oni_create_ctx(bad[u8(in) % 6]) != NULL || errno != EINVAL);
}

/* ---- the run ------------------------------------------------------------- */

static void step(struct in *in)
{
    uint8_t op = u8(in);
    if (!S.ctx)
        op_create();
    switch (op % 20) {
    case 0: op_destroy(); break;
    case 1: case 2: op_init(in); break;
    case 3: case 4: op_get_opt(in); break;
    case 5: case 6: case 7: op_set_opt(in); break;
    case 8: op_data(in); break;
    case 9: op_signal(in); break;
    case 10: op_devtable(in); break;
    case 11: op_knob(in); break;
    case 12: op_reg(in, 0); break;
    case 13: op_reg(in, 1); break;
    case 14: case 15: op_read_frames(in); break;
    case 16: op_destroy_frame(in); break;
    case 17: op_create_frame(in); break;
    case 18: op_write_frame(in); break;
    default: op_misc(in); break;
    }
    check_held();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct in in = {data, size};
    uint8_t flags = u8(&in); /* bit 0: the context goes before the frames kept */
    for (int i = 0; i < MAXOPS && in.n; i++) {
        uint64_t t0 = now_ms();
        step(&in);
        uint64_t ms = now_ms() - t0;
        /* Every wait is bounded by ONI_OPT_TIMEOUTMS (at most 5 ms here). */
        if (ms > 5 + SLACK_MS) {
            fprintf(stderr, "fuzz_api: a call took %llu ms\n", (unsigned long long)ms);
            abort();
        }
    }
    if (S.ctx && (flags & 1))
        op_destroy(); /* frames then outlive their context */
    for (int i = 0; i < NHELD; i++) {
        if (S.held[i].f)
            FAILIF(frame_sum(S.held[i].f) != S.held[i].sum);
        oni_destroy_frame(S.held[i].f);
        S.held[i].f = NULL;
    }
    if (S.ctx)
        op_destroy();
    free(S.devs);
    S.devs = NULL;
    S.ndev = 0;
    return 0;
}
