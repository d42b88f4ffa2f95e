/* signal.c - the signal stream: COBS packets for the device table (reset)
 * and for register access acknowledgments. */
#include <stdlib.h>
#include <string.h>
#include "ctx.h"

/* Read one signal packet and decode it into buf ([u32 type][payload]);
 * the deadline is the whole wait's: on the signal stream, progress is the
 * answer a call waits for, which live hardware sends at once, so NULLSIG
 * and stale packets do not move it (docs/timeouts.md).
 * *type and *n (payload bytes) are set. Bytes are read one at a time up to
 * the 0 delimiter, so that it works with any driver, whatever it buffers.
 * A packet cut short by the deadline or a driver error stays in ctx->sig,
 * and the next call goes on with it: the stream stays in step. Returns 0,
 * ONI_ECOBSPACK for an undecodable packet (consumed up to its delimiter),
 * ONI_ETIMEOUT past deadline, or the driver's error. */
static int read_packet(struct oni_ctx_impl *ctx, uint64_t deadline, uint32_t *type,
                       uint8_t *buf, size_t *n)
{
    unsigned idle = 0;
    for (;;) {
        uint8_t b;
        int rc = ctx->drv.read_stream(ctx->dctx, ONI_READ_STREAM_SIGNAL, &b, 1);
        if (rc < 0)
            return rc;
        if (rc > 1)
            return ONI_EREADFAILURE; /* driver claims more than asked */
        if (rc == 0) {
            if ((rc = oni_idle_wait(deadline, &idle)) < 0)
                return rc;
            continue;
        }
        if (b != 0) {
            if (ctx->sig.len < sizeof ctx->sig.raw)
                ctx->sig.raw[ctx->sig.len++] = b;
            else
                ctx->sig.overlong = 1;
            /* A driver may also never stop talking (NULLSIG spam, garbage). */
            if (oni_now_ns() > deadline)
                return ONI_ETIMEOUT;
            continue;
        }
        size_t len = ctx->sig.len;
        int overlong = ctx->sig.overlong;
        ctx->sig.len = 0;
        ctx->sig.overlong = 0;
        if (len == 0 && !overlong) {
            if (oni_now_ns() > deadline)
                return ONI_ETIMEOUT;
            continue; /* stray delimiter: no packet */
        }
        if (overlong)
            return ONI_ECOBSPACK;
        int dn = oni_cobs_decode(ctx->sig.raw, len, buf, 4 + ONI_SIGMAXPAYLOAD);
        if (dn < 4)
            return ONI_ECOBSPACK;
        memcpy(type, buf, 4);
        *n = (size_t)dn - 4;
        return 0;
    }
}

static int cmp_idx(const void *a, const void *b)
{
    const oni_device_t *x = a, *y = b;
    return x->idx < y->idx ? -1 : x->idx > y->idx;
}

/* Reset: write ONI_CONFIG_RESET (the value the caller gave, as upstream's
 * oni_set_opt passes it on: api/liboni/oni.c:415), then expect DEVICETABLEACK (u32 count) and
 * one DEVICEINST per device. Packets before the ACK are stale answers and
 * skipped, malformed ones too (ONI_ECOBSPACK if no ACK comes); after it
 * only DEVICEINST and NULLSIG may come. */
int oni_read_devtable(struct oni_ctx_impl *ctx, oni_reg_val_t value, oni_device_t **devs, size_t *ndev)
{
    uint64_t deadline = oni_deadline(ctx);
    uint8_t pkt[4 + ONI_SIGMAXPAYLOAD];
    uint32_t type, count;
    size_t n;
    /* A packet cut short before goes with the reset: a driver that empties
     * its signal stream then sends no rest of it, and one that does not
     * sends a tail that reads as a malformed packet, skipped below. */
    ctx->sig.len = 0;
    ctx->sig.overlong = 0;
    /* The hardware drops a write frame cut short when it resets: the rest
     * the host kept goes at that moment too (write lock), not before or
     * after, so that writes beside a reset leave whole frames. */
    pthread_mutex_lock(&ctx->wlock);
    int rc = ctx->drv.write_config(ctx->dctx, ONI_CONFIG_RESET, value);
    if (rc >= 0)
        ctx->wpend_len = 0;
    pthread_mutex_unlock(&ctx->wlock);
    if (rc < 0)
        return rc;
    int bad = 0; /* a malformed packet before the ACK: stale, but the cause if no ACK comes */
    for (;;) {
        rc = read_packet(ctx, deadline, &type, pkt, &n);
        if (rc == ONI_ECOBSPACK) {
            bad = 1;
            continue;
        }
        if (rc < 0)
            return bad && rc == ONI_ETIMEOUT ? ONI_ECOBSPACK : rc;
        if (type == ONI_SIG_DEVICETABLEACK)
            break;
    }
    ctx->reg_owed = 0; /* whatever was owed came before the ACK, or never comes */
    if (n != 4)
        return ONI_EBADDEVTABLE;
    memcpy(&count, pkt + 4, 4);
    if (count > ONI_MAXDEVICES)
        return ONI_EBADDEVTABLE;

    oni_device_t *t = calloc(count ? count : 1, sizeof *t);
    if (!t)
        return ONI_EBADALLOC;
    for (uint32_t i = 0; i < count;) {
        if ((rc = read_packet(ctx, deadline, &type, pkt, &n)) < 0)
            goto fail;
        if (type == ONI_SIG_NULL)
            continue;
        if (type != ONI_SIG_DEVICEINST || n != sizeof(oni_device_t)) {
            rc = ONI_EBADDEVTABLE;
            goto fail;
        }
        memcpy(&t[i], pkt + 4, sizeof t[i]);
        if (t[i].read_size > ONI_MAXFRAMEPAYLOAD || t[i].write_size > ONI_MAXFRAMEPAYLOAD) {
            rc = ONI_EBADDEVTABLE;
            goto fail;
        }
        i++;
    }
    qsort(t, count, sizeof *t, cmp_idx);
    for (uint32_t i = 1; i < count; i++) {
        if (t[i].idx == t[i - 1].idx) {
            rc = ONI_EDEVIDXREPEAT;
            goto fail;
        }
    }
    *devs = t;
    *ndev = count;
    return 0;
fail:
    free(t);
    return rc;
}

static int is_reg_answer(uint32_t type)
{
    return type == ONI_SIG_CONFIGWACK || type == ONI_SIG_CONFIGWNACK || type == ONI_SIG_CONFIGRACK ||
           type == ONI_SIG_CONFIGRNACK;
}

/* Register access as ONI-API.md: refuse while TRIG is pending, write the
 * address registers, trigger, then wait for the matching ACK or NACK. Other
 * packets that come meanwhile (NULLSIG, answers of the other kind) are
 * skipped. An access that failed after its trigger (a timeout, a bad
 * packet, a driver error) may still get its answer later, maybe of the same
 * kind as the next access's: so TRIG back at 0 means it was answered, and
 * the next access first takes that answer (ctx->reg_owed) out of the stream
 * before it triggers. */
int oni_reg_access(struct oni_ctx_impl *ctx, oni_dev_idx_t dev, oni_reg_addr_t addr,
                   oni_reg_val_t *value, int write)
{
    uint64_t deadline = oni_deadline(ctx);
    oni_reg_val_t trig = 0;
    int rc = ctx->drv.read_config(ctx->dctx, ONI_CONFIG_TRIG, &trig);
    if (rc < 0)
        return rc;
    if (trig != 0)
        return ONI_ERETRIG;
    uint8_t pkt[4 + ONI_SIGMAXPAYLOAD];
    uint32_t type;
    size_t n;
    while (ctx->reg_owed) {
        if ((rc = read_packet(ctx, deadline, &type, pkt, &n)) == ONI_ECOBSPACK)
            continue; /* not an answer we can count; if it was the owed one, the wait ends in a timeout */
        if (rc < 0) {
            if (rc == ONI_ETIMEOUT)
                ctx->reg_owed = 0; /* a whole timeout after TRIG cleared: lost, not late */
            return rc;
        }
        ctx->reg_owed -= is_reg_answer(type);
    }
    if ((rc = ctx->drv.write_config(ctx->dctx, ONI_CONFIG_DEV_IDX, dev)) < 0 ||
        (rc = ctx->drv.write_config(ctx->dctx, ONI_CONFIG_REG_ADDR, addr)) < 0 ||
        (write && (rc = ctx->drv.write_config(ctx->dctx, ONI_CONFIG_REG_VALUE, *value)) < 0) ||
        (rc = ctx->drv.write_config(ctx->dctx, ONI_CONFIG_RW, write ? 1 : 0)) < 0 ||
        (rc = ctx->drv.write_config(ctx->dctx, ONI_CONFIG_TRIG, 1)) < 0)
        return rc;

    uint32_t ack = write ? ONI_SIG_CONFIGWACK : ONI_SIG_CONFIGRACK;
    uint32_t nack = write ? ONI_SIG_CONFIGWNACK : ONI_SIG_CONFIGRNACK;
    do {
        if ((rc = read_packet(ctx, deadline, &type, pkt, &n)) < 0) {
            ctx->reg_owed++; /* whatever went wrong here, its answer may still come */
            return rc;
        }
    } while (type != ack && type != nack);
    if (type == nack)
        return write ? ONI_EWRITEFAILURE : ONI_EREADFAILURE;
    if (write)
        return 0;
    rc = ctx->drv.read_config(ctx->dctx, ONI_CONFIG_REG_VALUE, value);
    return rc < 0 ? rc : 0;
}
