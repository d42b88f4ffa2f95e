/* spec.c - the card's spec string (include/oniemu.h, docs/emulator.md):
 * "devices=breakout,np2e:port=a;link=gen2x4;mode=realtime;ddr=4G;seed=1".
 * Builds the device table on hubs. `breakout` places the breakout board's
 * devices on hub 0 at the indices of current firmware (docs/devices.md) and
 * opens ports A and B (hubs 1 and 2); a headstage name (headstage.h) plugs
 * into a port. Other devices of the host hub go to hub 0 after them; a bare
 * headstage chip (rhd2164) opens a hub of its own, and a bno055 joins the
 * last such hub (a hub of its own if none); "hub=N" overrides. A MEMUSAGE
 * device is always present on hub 0. */
#include <ctype.h>
#include <pthread.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "card.h"
#include "headstage.h"
#include "headstages.h"

/* The default card: a breakout board with an NP2.0e headstage on port A,
 * as a Neuropixels 2.0 rig has. */
#define DEFAULT_DEVICES "breakout,np2e"

static const struct emu_devtype *const kinds[] = {
    &emu_dev_rhd2164,  &emu_dev_bno055,  &emu_dev_heartbeat,
    &emu_dev_testcore, &emu_dev_testsink, &emu_dev_loadtest, &emu_dev_stim,    &emu_dev_memusage,
    &emu_dev_digitalio, &emu_dev_persthb, &emu_dev_analogio, &emu_dev_harpsync, &emu_dev_outclock,
};

/* Headstage kinds (headstage.h): each headstage file adds its ops here. */
#define MAX_HS_KINDS 16
static const struct emu_hs_ops *hs_kinds[MAX_HS_KINDS] = {
    &emu_hs_np2e,
    &emu_hs_np1e,
    &emu_hs_hs64,
};
static pthread_mutex_t hs_lock = PTHREAD_MUTEX_INITIALIZER;

int emu_hs_register(const struct emu_hs_ops *ops)
{
    if (!ops || !ops->name)
        return ONI_EINVALARG;
    int rc = ONI_EINVALARG, i = 0;
    pthread_mutex_lock(&hs_lock);
    while (i < MAX_HS_KINDS && hs_kinds[i] && strcmp(hs_kinds[i]->name, ops->name))
        i++;
    if (i < MAX_HS_KINDS && (!hs_kinds[i] || hs_kinds[i] == ops)) { /* again: fine; another of that name: not */
        hs_kinds[i] = ops;
        rc = 0;
    }
    pthread_mutex_unlock(&hs_lock);
    return rc;
}

static const struct emu_hs_ops *find_hs(const char *name)
{
    const struct emu_hs_ops *ops = NULL;
    pthread_mutex_lock(&hs_lock);
    for (int i = 0; i < MAX_HS_KINDS && hs_kinds[i] && !ops; i++)
        if (!strcmp(hs_kinds[i]->name, name))
            ops = hs_kinds[i];
    pthread_mutex_unlock(&hs_lock);
    return ops;
}

/* Hub manager registers per hub kind; the values of headstage hubs are
 * plausible, invented (docs/devices.md). */
static struct emu_hub hub_of_kind(uint32_t kind)
{
    switch (kind) {
    case ONIX_HUB_HSNP2E: return (struct emu_hub){kind, 1, 0x0203, 50000000, 1500};
    case ONIX_HUB_HSNP1ET: return (struct emu_hub){kind, 1, 0x0104, 50000000, 1500};
    case ONIX_HUB_HS64: return (struct emu_hub){kind, 2, 0x0102, 42000000, 1200};
    /* The PCIe host: firmware major version 2, as onix-source requires
     * (OnixSource.cpp:280-292); the minor version is the emulator's. */
    default: return (struct emu_hub){ONIX_HUB_FMCHOST, 1, 0x0200, (uint32_t)EMU_ACQ_HZ, 0};
    }
}

int emu_parse_u64(const char *s, int si, uint64_t *out)
{
    if (!s || !isdigit((unsigned char)*s))
        return ONI_EINVALARG;
    char *end;
    errno = 0;
    /* Whole numbers in integers (a seed has 64 significant bits, a double
     * 53); a fraction or an exponent ("1.5G", "2e9") through a double. */
    unsigned long long iv = strtoull(s, &end, 10);
    int whole = !errno && *end != '.' && *end != 'e' && *end != 'E';
    double v = 0;
    if (!whole) {
        errno = 0;
        v = strtod(s, &end);
        if (errno || end == s)
            return ONI_EINVALARG;
    }
    uint64_t k = si ? 1000 : 1024, m = 1;
    switch (*end) {
    case 'k': case 'K': m = k; end++; break;
    case 'm': case 'M': m = k * k; end++; break;
    case 'g': case 'G': m = k * k * k; end++; break;
    case 't': case 'T': m = k * k * k * k; end++; break;
    }
    if (*end == 'i' && !si)
        end++;
    if (*end == 'B' || *end == 'b')
        end++;
    if (*end)
        return ONI_EINVALARG;
    if (whole) {
        if (iv > UINT64_MAX / m)
            return ONI_EINVALARG;
        *out = (uint64_t)iv * m;
        return 0;
    }
    v *= (double)m;
    if (!(v < 18446744073709551615.0)) /* also NaN */
        return ONI_EINVALARG;
    /* "1.5k" is 1500; "0.6" is no whole number, refused rather than rounded
     * (the tolerance covers the decimal fraction's binary error, "1.1k"). */
    double r = floor(v + 0.5);
    if (fabs(v - r) > (v > 1e6 ? v * 1e-12 : 1e-6))
        return ONI_EINVALARG;
    *out = (uint64_t)r;
    return 0;
}

const char *emu_arg(struct emu_args *a, const char *key)
{
    for (int i = 0; i < a->n; i++) {
        if (!strcmp(a->kv[i].key, key)) {
            a->kv[i].used = 1;
            return a->kv[i].val;
        }
    }
    return NULL;
}

int emu_arg_u64(struct emu_args *a, const char *key, uint64_t def, uint64_t lo, uint64_t hi, int si,
                uint64_t *out, char *err, size_t cap)
{
    const char *s = emu_arg(a, key);
    if (!s) {
        *out = def;
        return 0;
    }
    if (emu_parse_u64(s, si, out) || *out < lo || *out > hi) {
        snprintf(err, cap, "bad %s=%s (%llu..%llu)", key, s, (unsigned long long)lo, (unsigned long long)hi);
        return ONI_EINVALARG;
    }
    return 0;
}

static int has_key(const struct emu_args *a, const char *kv, size_t len)
{
    for (int i = 0; i < a->n; i++)
        if (strlen(a->kv[i].key) == len && !memcmp(a->kv[i].key, kv, len))
            return 1;
    return 0;
}

/* Split "name:k=v:k=v" into name and args. */
static int split_device(char *tok, char **name, struct emu_args *a, char *err, size_t cap)
{
    memset(a, 0, sizeof *a);
    size_t len = strlen(tok);
    if (strstr(tok, "::") || (len && tok[len - 1] == ':')) {
        snprintf(err, cap, "empty argument in device '%s'", tok);
        return ONI_EINVALARG;
    }
    char *save = NULL;
    *name = tok[0] == ':' ? NULL : strtok_r(tok, ":", &save); /* strtok_r would skip the ':' */
    if (!*name || !**name) {
        snprintf(err, cap, "empty device name in '%s'", tok);
        return ONI_EINVALARG;
    }
    for (char *kv; (kv = strtok_r(NULL, ":", &save));) {
        char *eq = strchr(kv, '=');
        if (!eq || eq == kv || a->n == EMU_MAX_ARGS || (size_t)(eq - kv) >= sizeof a->kv[0].key ||
            strlen(eq + 1) >= sizeof a->kv[0].val) {
            snprintf(err, cap, "bad argument '%s' of device %s", kv, *name);
            return ONI_EINVALARG;
        }
        if (has_key(a, kv, (size_t)(eq - kv))) {
            snprintf(err, cap, "argument '%s' of device %s given twice", kv, *name);
            return ONI_EINVALARG;
        }
        memcpy(a->kv[a->n].key, kv, (size_t)(eq - kv));
        strcpy(a->kv[a->n].val, eq + 1);
        a->n++;
    }
    return 0;
}

/* Hub number for a device of kind t (or the one asked for), creating hubs as needed. */
static int place(struct emu_card *c, const struct emu_devtype *t, long want, uint32_t *hub)
{
    if (want >= 0) {
        if (want >= EMU_MAX_HUB)
            return ONI_EINVALARG;
        while (c->nhub <= want)
            c->hub[c->nhub++] = hub_of_kind(want == 0 ? 0 : (t->hub_kind ? t->hub_kind : ONIX_HUB_HS64));
        *hub = (uint32_t)want;
        return 0;
    }
    if (!t->hub_kind) {
        *hub = 0;
        return 0;
    }
    if (t == &emu_dev_bno055 && c->nhub > (c->port[0].used ? 3 : 1)) { /* a hub of the emulator's layouts */
        *hub = (uint32_t)c->nhub - 1;
        return 0;
    }
    if (c->nhub == EMU_MAX_HUB)
        return ONI_EINVALARG;
    c->hub[c->nhub] = hub_of_kind(t->hub_kind);
    *hub = (uint32_t)c->nhub++;
    return 0;
}

/* The next free index on hub h: after every device there. */
static uint32_t next_slot(const struct emu_card *c, uint32_t hub)
{
    uint32_t n = 0;
    for (int i = 0; i < c->ndev; i++)
        if ((c->dev[i].desc.idx >> 8) == hub && (c->dev[i].desc.idx & 0xFF) + 1 > n)
            n = (c->dev[i].desc.idx & 0xFF) + 1;
    return n;
}

/* Add a device of kind t at (hub, slot) with arguments a; port: the port
 * whose state decides whether it is in the table (-1: always). */
static int put_device(struct emu_card *c, const struct emu_devtype *t, struct emu_args *a, uint32_t hub,
                      uint32_t slot, int port, char *err, size_t cap)
{
    if (c->ndev == EMU_MAX_DEV) {
        snprintf(err, cap, "more than %d devices", EMU_MAX_DEV);
        return ONI_EINVALARG;
    }
    uint64_t route, enable;
    int rc;
    if ((rc = emu_arg_u64(a, "route", 0, 0, 1, 1, &route, err, cap)) ||
        (rc = emu_arg_u64(a, "enable", 1, 0, 1, 1, &enable, err, cap)))
        return rc;
    if (route && !c->gpustream) {
        snprintf(err, cap, "device %s: route=1 needs the GPU data stream, which this card lacks (gpustream=0)",
                 t->name);
        return ONI_EINVALARG;
    }
    if (slot >= ONIX_HUB_DEV_IDX) {
        snprintf(err, cap, "hub %u is full", hub);
        return ONI_EINVALARG;
    }
    struct emu_dev *d = &c->dev[c->ndev];
    memset(d, 0, sizeof *d);
    d->type = t;
    d->card = c;
    d->desc.idx = (hub << 8) | slot;
    d->desc.id = t->id;
    d->desc.version = 1; /* init may change it and enable_reg */
    d->enable = (uint32_t)enable;
    d->route = (uint32_t)route;
    d->port = port;
    d->absent = port >= 0; /* until emu_port_reset decides */
    d->hub_kind = c->hub[hub].kind;
    if ((rc = t->init(d, a, err, cap)) != 0) {
        if (t->fini)
            t->fini(d); /* what init allocated before it failed */
        return rc;
    }
    c->ndev++; /* from here on destroy() finalizes it */
    for (int i = 0; i < a->n; i++) {
        if (!a->kv[i].used) {
            snprintf(err, cap, "device %s has no argument '%s'", t->name, a->kv[i].key);
            return ONI_EINVALARG;
        }
    }
    if (d->desc.read_size > EMU_MAX_READ) {
        snprintf(err, cap, "device %s: frames of %u bytes are too large", t->name, d->desc.read_size);
        return ONI_EINVALARG;
    }
    if (t == &emu_dev_memusage)
        c->memusage = d;
    return 0;
}

static int add_device(struct emu_card *c, const struct emu_devtype *t, struct emu_args *a, char *err,
                      size_t cap)
{
    uint64_t hubarg;
    int rc = emu_arg_u64(a, "hub", UINT64_MAX, 0, EMU_MAX_HUB - 1, 1, &hubarg, err, cap);
    if (rc)
        return rc;
    uint32_t hub;
    if (c->port[0].used && (hubarg == 1 || hubarg == 2)) {
        snprintf(err, cap, "device %s: hubs 1 and 2 are the breakout board's ports", t->name);
        return ONI_EINVALARG;
    }
    if (place(c, t, hubarg == UINT64_MAX ? -1 : (long)hubarg, &hub)) {
        snprintf(err, cap, "no hub for device %s (at most %d hubs)", t->name, EMU_MAX_HUB);
        return ONI_EINVALARG;
    }
    return put_device(c, t, a, hub, next_slot(c, hub), -1, err, cap);
}

/* --- the breakout board and its ports --------------------------------------- */

/* A device of the board with no spec arguments of its own. */
static int board_device(struct emu_card *c, const struct emu_devtype *t, uint32_t slot, int port, int enable,
                        char *err, size_t cap)
{
    struct emu_args a = {0};
    if (!enable) {
        a.n = 1;
        strcpy(a.kv[0].key, "enable");
        strcpy(a.kv[0].val, "0");
    }
    return put_device(c, t, &a, 0, slot, port, err, cap);
}

/* `breakout`: the host hub of the PCIe host + breakout board at the indices
 * current software addresses (docs/devices.md, Breakout board): 0
 * persistent heartbeat, 1-2 port controllers, 5 clock output, 6 analog I/O,
 * 7 digital I/O, 8-9 the ports' raw devices (in passthrough), 10 memory
 * monitor, 11 load tester (loadtest=1), 12 Harp sync input. */
static int add_breakout(struct emu_card *c, struct emu_args *a, char *err, size_t cap)
{
    uint64_t loop, lt;
    int rc;
    if ((rc = emu_arg_u64(a, "loopback", 0, 0, 1, 1, &loop, err, cap)) ||
        (rc = emu_arg_u64(a, "loadtest", 0, 0, 1, 1, &lt, err, cap)))
        return rc;
    for (int i = 0; i < a->n; i++) {
        if (!a->kv[i].used) {
            snprintf(err, cap, "breakout has no argument '%s' (loopback loadtest)", a->kv[i].key);
            return ONI_EINVALARG;
        }
    }
    if (c->port[0].used) {
        snprintf(err, cap, "breakout given twice");
        return ONI_EINVALARG;
    }
    c->hub[1] = c->hub[2] = (struct emu_hub){ONIX_HUB_NULL, 0, 0, 0, 0}; /* until a hub headstage plugs in */
    c->nhub = 3;
    for (int p = 0; p < 2; p++) {
        struct emu_port *pt = &c->port[p];
        memset(pt, 0, sizeof *pt);
        pt->used = 1;
        pt->despwr = 1;                      /* the plugin never writes DESPWR */
        pt->des[0x5C] = EMU_HS_SER_ADDR << 1; /* SER_ALIAS: the serializer's own address */
    }
    struct emu_args dio = {0};
    dio.n = 1;
    strcpy(dio.kv[0].key, "loopback");
    strcpy(dio.kv[0].val, loop ? "1" : "0");
    if ((rc = board_device(c, &emu_dev_persthb, 0, -1, 1, err, cap)) ||
        (rc = board_device(c, &emu_dev_portctl, 1, -1, 1, err, cap)) ||
        (rc = board_device(c, &emu_dev_portctl, 2, -1, 1, err, cap)) ||
        (rc = board_device(c, &emu_dev_outclock, 5, -1, 1, err, cap)) ||
        (rc = board_device(c, &emu_dev_analogio, 6, -1, 0, err, cap)) ||
        (rc = put_device(c, &emu_dev_digitalio, &dio, 0, 7, -1, err, cap)) ||
        (rc = board_device(c, &emu_dev_ds90ub9x, 8, 0, 1, err, cap)) ||
        (rc = board_device(c, &emu_dev_ds90ub9x, 9, 1, 1, err, cap)) ||
        (rc = board_device(c, &emu_dev_memusage, 10, -1, 1, err, cap)) ||
        (lt && (rc = board_device(c, &emu_dev_loadtest, 11, -1, 1, err, cap))) ||
        (rc = board_device(c, &emu_dev_harpsync, 12, -1, 1, err, cap)))
        return rc;
    for (int i = 0; i < c->ndev; i++) {
        struct emu_dev *d = &c->dev[i];
        if (d->type == &emu_dev_portctl)
            c->port[(d->desc.idx & 0xFF) - 1].ctrl = d, d->port = (int)(d->desc.idx & 0xFF) - 1;
        if (d->type == &emu_dev_ds90ub9x)
            c->port[d->port].raw = d;
    }
    return 0;
}

/* A headstage (headstage.h) plugged into port=a|b, else the first free port. */
static int add_headstage(struct emu_card *c, const struct emu_hs_ops *hs, struct emu_args *a, char *err,
                         size_t cap)
{
    if (!c->port[0].used) {
        snprintf(err, cap, "headstage %s needs a breakout board: put breakout first in devices=", hs->name);
        return ONI_EINVALARG;
    }
    const char *ps = emu_arg(a, "port");
    int p = -1;
    if (ps && (!strcmp(ps, "a") || !strcmp(ps, "b")))
        p = ps[0] - 'a';
    else if (ps) {
        snprintf(err, cap, "headstage %s: port must be a or b, not '%s'", hs->name, ps);
        return ONI_EINVALARG;
    } else
        p = c->port[0].hs ? 1 : 0;
    struct emu_port *pt = &c->port[p];
    if (pt->hs) {
        snprintf(err, cap, "headstage %s: port %c already has a headstage (%s)", hs->name, 'a' + p,
                 pt->hs->name);
        return ONI_EINVALARG;
    }
    pt->hs = hs;
    int rc = hs->init ? hs->init(&pt->hs_priv, c, pt->raw->desc.idx, a, err, cap) : 0;
    if (rc)
        return rc; /* emu_card_destroy runs fini on what init left */
    for (int i = 0; i < a->n; i++) {
        if (!a->kv[i].used) {
            snprintf(err, cap, "headstage %s has no argument '%s'", hs->name, a->kv[i].key);
            return ONI_EINVALARG;
        }
    }
    if (hs->hub_devices) { /* its own hub, hub 1 or 2 */
        uint32_t hub = (uint32_t)p + 1;
        c->hub[hub] = (struct emu_hub){hs->hs_id, hs->hub_rev, hs->hub_fw, hs->hub_clk_hz, 0};
        for (uint32_t k = 0; hs->hub_devices[k]; k++) {
            struct emu_args none = {0};
            if ((rc = put_device(c, hs->hub_devices[k], &none, hub, k, p, err, cap)) != 0)
                return rc;
        }
        return 0;
    }
    if (hs->read_size > EMU_MAX_READ || (uint64_t)hs->nstreams * hs->rate_mhz > EMU_ACQ_HZ * 1000 ||
        hs->nstreams > EMU_HS_MAX_STREAMS) {
        snprintf(err, cap, "headstage %s: frames too large or too fast", hs->name);
        return ONI_EINVALARG;
    }
    pt->raw->desc.read_size = hs->read_size;
    return 0;
}

/* One pass over the device list: pass 0 places the breakout board (its
 * indices are fixed, whatever comes before it in the list), pass 1 the rest. */
static int parse_pass(struct emu_card *c, const char *list, int pass, char *err, size_t cap)
{
    char *copy = strdup(list);
    if (!copy)
        return ONI_EBADALLOC;
    int rc = 0;
    /* Split at every comma: strtok_r would skip an empty name (",," or a
     * comma at either end), and the card would silently lack a device. */
    for (char *tok = copy, *next; tok && !rc; tok = next) {
        char *comma = strchr(tok, ',');
        next = comma ? comma + 1 : NULL;
        if (comma)
            *comma = 0;
        if (!*tok) {
            snprintf(err, cap, "empty device name in devices=%s", list);
            rc = ONI_EINVALARG;
            break;
        }
        char *name;
        struct emu_args a;
        if ((rc = split_device(tok, &name, &a, err, cap)) != 0)
            break;
        int board = !strcmp(name, "breakout");
        if (board != (pass == 0))
            continue;
        const struct emu_devtype *t = NULL;
        const struct emu_hs_ops *hs = find_hs(name);
        for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
            if (!strcmp(kinds[i]->name, name))
                t = kinds[i];
        if (board) {
            rc = add_breakout(c, &a, err, cap);
        } else if (hs) {
            rc = add_headstage(c, hs, &a, err, cap);
        } else if (!t) {
            snprintf(err, cap, "unknown device '%s' (docs/devices.md lists them)", name);
            rc = ONI_EINVALARG;
        } else if (t == &emu_dev_memusage && c->memusage) {
            snprintf(err, cap, "memusage given twice (breakout has one)");
            rc = ONI_EINVALARG;
        } else {
            rc = add_device(c, t, &a, err, cap);
        }
    }
    free(copy);
    return rc;
}

static int parse_devices(struct emu_card *c, const char *list, char *err, size_t cap)
{
    int rc = parse_pass(c, list, 0, err, cap);
    if (!rc)
        rc = parse_pass(c, list, 1, err, cap);
    if (!rc && !c->memusage) {
        struct emu_args none = {0};
        rc = add_device(c, &emu_dev_memusage, &none, err, cap);
    }
    if (!rc)
        emu_port_reset(c); /* the table at power-up: no passthrough, no port powered */
    return rc;
}

int emu_spec_parse(struct emu_card *c, const char *spec, size_t *ddr, char *err, size_t cap)
{
    char devices[512] = DEFAULT_DEVICES;
    uint64_t ddr_bytes = 4ull << 30;
    emu_link_preset("gen2x4", &c->link);
    c->fast = 0;
    c->seed = 1;
    c->gpustream = 1;
    c->hub[0] = hub_of_kind(0);
    c->nhub = 1;
    if (spec && strlen(spec) >= sizeof c->spec) {
        snprintf(err, cap, "spec longer than %zu bytes", sizeof c->spec - 1);
        return ONI_EINVALARG;
    }
    snprintf(c->spec, sizeof c->spec, "%s", spec ? spec : "");
    char buf[512];
    snprintf(buf, sizeof buf, "%s", c->spec);
    char *save = NULL;
    for (char *kv = strtok_r(buf, ";", &save); kv; kv = strtok_r(NULL, ";", &save)) {
        while (*kv == ' ' || *kv == '\t')
            kv++;
        if (!*kv)
            continue;
        char *eq = strchr(kv, '=');
        if (!eq) {
            snprintf(err, cap, "'%s' is not key=value", kv);
            return ONI_EINVALARG;
        }
        *eq = 0;
        const char *v = eq + 1;
        if (!strcmp(kv, "devices")) {
            snprintf(devices, sizeof devices, "%s", v);
        } else if (!strcmp(kv, "link")) {
            if (emu_link_preset(v, &c->link)) {
                snprintf(err, cap, "unknown link '%s' (gen2x4 gen3x8 gen4x8 gen4x16 gen5x16 unlimited)", v);
                return ONI_EINVALARG;
            }
        } else if (!strcmp(kv, "mode")) {
            if (strcmp(v, "fast") && strcmp(v, "realtime")) {
                snprintf(err, cap, "mode must be realtime or fast, not '%s'", v);
                return ONI_EINVALARG;
            }
            c->fast = !strcmp(v, "fast");
        } else if (!strcmp(kv, "wake")) {
            if (strcmp(v, "sleep") && strcmp(v, "spin")) {
                snprintf(err, cap, "wake must be sleep or spin, not '%s'", v);
                return ONI_EINVALARG;
            }
            c->spin = !strcmp(v, "spin");
        } else if (!strcmp(kv, "batch")) {
            uint64_t us;
            if (emu_parse_u64(v, 0, &us) || us > 10000000) {
                snprintf(err, cap, "bad batch=%s (0..10000000 us)", v);
                return ONI_EINVALARG;
            }
            c->batch_ns = us * 1000u;
        } else if (!strcmp(kv, "ddr")) {
            if (emu_parse_u64(v, 0, &ddr_bytes) || ddr_bytes < 8192 || ddr_bytes > (64ull << 30)) {
                snprintf(err, cap, "bad ddr=%s (8K..64G)", v);
                return ONI_EINVALARG;
            }
        } else if (!strcmp(kv, "gpustream")) {
            if (strcmp(v, "0") && strcmp(v, "1")) {
                snprintf(err, cap, "gpustream must be 0 or 1, not '%s'", v);
                return ONI_EINVALARG;
            }
            c->gpustream = v[0] == '1';
        } else if (!strcmp(kv, "templates")) {
            if (!*v || strlen(v) >= sizeof c->templates_dir - 16) {
                snprintf(err, cap, "templates= needs a directory of 1 to %zu characters", sizeof c->templates_dir - 17);
                return ONI_EINVALARG;
            }
            snprintf(c->templates_dir, sizeof c->templates_dir, "%s", v);
        } else if (!strcmp(kv, "seed")) {
            if (emu_parse_u64(v, 1, &c->seed)) {
                snprintf(err, cap, "bad seed=%s", v);
                return ONI_EINVALARG;
            }
        } else {
            snprintf(err, cap, "unknown key '%s' (devices link mode wake batch ddr seed gpustream templates)", kv);
            return ONI_EINVALARG;
        }
    }
    *ddr = (size_t)ddr_bytes;
    return parse_devices(c, devices, err, cap);
}
