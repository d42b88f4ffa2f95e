/* test_oni_devtable.c - reset and device table over the signal stream:
 * zero devices, repeats, oversized, truncated, inconsistent and malformed
 * tables, interleaved NULLSIG and stale packets, reset in IDLE. */
#include "drivers/fixture.h"
#include "unit.h"

static const oni_device_t two[] = {{5, 10, 1, 8, 0}, {3, 10, 1, 12, 4}};

/* A fresh uninitialized scripted context with a short timeout whose reset emits sig. */
static oni_ctx with_signal(const uint8_t *sig, size_t len)
{
    oni_ctx ctx = oni_create_ctx("scripted");
    if (!ctx)
        return NULL;
    uint32_t ms = 100;
    if (oni_set_opt(ctx, ONI_OPT_TIMEOUTMS, &ms, 4) || oni_set_driver_opt(ctx, SCR_OPT_DEVTABLE, sig, len) ||
        fx_set_u32(ctx, SCR_OPT_EMPTY, SCR_EMPTY_TIMEOUT)) {
        oni_destroy_ctx(ctx);
        return NULL;
    }
    return ctx;
}

/* Init with these signal bytes; returns what oni_init_ctx said. */
static int init_with(const uint8_t *sig, size_t len)
{
    oni_ctx ctx = with_signal(sig, len);
    if (!ctx)
        return 1;
    int rc = oni_init_ctx(ctx, 0);
    if (rc) { /* a failed init leaves the context uninitialized */
        uint32_t v;
        size_t n = 4;
        if (oni_get_opt(ctx, ONI_OPT_NUMDEVICES, &v, &n) != ONI_EINVALSTATE)
            rc = 2;
    }
    oni_destroy_ctx(ctx);
    return rc;
}

static size_t pack(uint8_t *out, uint32_t type, const void *p, size_t n)
{
    int rc = oni_signal_pack(type, p, n, out, 300);
    return rc > 0 ? (size_t)rc : 0;
}

TEST(zero_devices)
{
    oni_ctx ctx = fx_open(NULL, 0, 1);
    REQUIRE(ctx);
    uint32_t v = 99;
    size_t n = 4;
    CHECK_RC(oni_get_opt(ctx, ONI_OPT_NUMDEVICES, &v, &n), 0);
    CHECK_EQ(v, 0);
    oni_device_t t;
    n = 0;
    CHECK_RC(oni_get_opt(ctx, ONI_OPT_DEVICETABLE, &t, &n), 0);
    CHECK_EQ(n, 0);
    n = 4;
    CHECK_RC(oni_get_opt(ctx, ONI_OPT_MAXREADFRAMESIZE, &v, &n), 0);
    CHECK_EQ(v, 16);
    CHECK_RC(oni_get_opt(ctx, ONI_OPT_BLOCKREADSIZE, &v, &n), 0);
    CHECK_EQ(v, 16);
    CHECK_RC(oni_get_opt(ctx, ONI_OPT_MAXWRITEFRAMESIZE, &v, &n), 0);
    CHECK_EQ(v, 8);
    oni_frame_t *f;
    CHECK_RC(oni_create_frame(ctx, &f, 0, &v, 4), ONI_EDEVIDX);
    oni_destroy_ctx(ctx);
}

TEST(sorted_and_complete)
{
    oni_device_t many[40];
    for (int i = 0; i < 40; i++)
        many[i] = (oni_device_t){(uint32_t)((i * 7919) % 40) | (uint32_t)(i % 3) << 8, (uint32_t)i, 1,
                                 (uint32_t)i, 0};
    oni_ctx ctx = fx_open(many, 40, 1);
    REQUIRE(ctx);
    oni_device_t t[40];
    size_t n = sizeof t;
    REQUIRE(oni_get_opt(ctx, ONI_OPT_DEVICETABLE, t, &n) == 0);
    for (int i = 1; i < 40; i++)
        CHECK(t[i - 1].idx < t[i].idx);
    /* Every device came through with its own fields. */
    for (int i = 0; i < 40; i++) {
        int found = 0;
        for (int j = 0; j < 40; j++)
            found += t[j].idx == many[i].idx && t[j].id == many[i].id && t[j].read_size == many[i].read_size;
        CHECK_EQ(found, 1);
    }
    oni_destroy_ctx(ctx);
}

TEST(repeated_index)
{
    oni_device_t rep[3] = {{7, 10, 1, 4, 0}, {2, 10, 1, 4, 0}, {7, 11, 1, 8, 0}};
    uint8_t sig[400];
    size_t len = fx_devtable(sig, sizeof sig, rep, 3);
    REQUIRE(len);
    CHECK_RC(init_with(sig, len), ONI_EDEVIDXREPEAT);
}

TEST(oversized_tables)
{
    uint8_t sig[600];
    uint32_t count = 70000; /* more devices than hub.idx can address */
    size_t len = pack(sig, ONI_SIG_DEVICETABLEACK, &count, 4);
    CHECK_RC(init_with(sig, len), ONI_EBADDEVTABLE);
    oni_device_t huge[1] = {{1, 10, 1, 64u << 20, 0}}; /* 64 MiB frames */
    len = fx_devtable(sig, sizeof sig, huge, 1);
    CHECK_RC(init_with(sig, len), ONI_EBADDEVTABLE);
    oni_device_t wbig[1] = {{1, 10, 1, 4, 0xFFFFFFF0u}};
    len = fx_devtable(sig, sizeof sig, wbig, 1);
    CHECK_RC(init_with(sig, len), ONI_EBADDEVTABLE);
}

TEST(truncated_table_times_out)
{
    uint8_t sig[400];
    size_t len = fx_devtable(sig, sizeof sig, two, 2);
    REQUIRE(len);
    /* Drop the last DEVICEINST packet: the ACK promised 2. */
    size_t last = pack(sig + len, ONI_SIG_DEVICEINST, &two[1], sizeof two[1]);
    CHECK_RC(init_with(sig, len - last), ONI_ETIMEOUT);
    /* Cut inside a packet. */
    CHECK_RC(init_with(sig, len - 3), ONI_ETIMEOUT);
    /* Nothing at all, driver returning 0 bytes rather than an error: the core's deadline. */
    oni_ctx ctx = with_signal(sig, 0);
    REQUIRE(ctx);
    REQUIRE(fx_set_u32(ctx, SCR_OPT_EMPTY, SCR_EMPTY_ZERO) == 0);
    uint64_t t0 = oni_now_ns();
    CHECK_RC(oni_init_ctx(ctx, 0), ONI_ETIMEOUT);
    uint64_t ms = (oni_now_ns() - t0) / 1000000;
    CHECK(ms >= 95 && ms < 1000);
    oni_destroy_ctx(ctx);
}

TEST(inconsistent_tables)
{
    uint8_t sig[600];
    size_t len;
    uint32_t count = 1;
    /* ACK with a short payload. */
    len = pack(sig, ONI_SIG_DEVICETABLEACK, &count, 2);
    CHECK_RC(init_with(sig, len), ONI_EBADDEVTABLE);
    /* DEVICEINST with a short payload. */
    len = pack(sig, ONI_SIG_DEVICETABLEACK, &count, 4);
    len += pack(sig + len, ONI_SIG_DEVICEINST, &two[0], 16);
    CHECK_RC(init_with(sig, len), ONI_EBADDEVTABLE);
    /* A second ACK inside the table. */
    len = pack(sig, ONI_SIG_DEVICETABLEACK, &count, 4);
    len += pack(sig + len, ONI_SIG_DEVICETABLEACK, &count, 4);
    len += pack(sig + len, ONI_SIG_DEVICEINST, &two[0], 20);
    CHECK_RC(init_with(sig, len), ONI_EBADDEVTABLE);
    /* A register answer inside the table. */
    len = pack(sig, ONI_SIG_DEVICETABLEACK, &count, 4);
    len += pack(sig + len, ONI_SIG_CONFIGWACK, NULL, 0);
    len += pack(sig + len, ONI_SIG_DEVICEINST, &two[0], 20);
    CHECK_RC(init_with(sig, len), ONI_EBADDEVTABLE);
}

TEST(malformed_packets)
{
    uint8_t sig[600];
    /* A packet whose code byte runs past its end. */
    size_t len = 0;
    sig[len++] = 0x09;
    sig[len++] = 0x20;
    sig[len++] = 0x00;
    CHECK_RC(init_with(sig, len), ONI_ECOBSPACK);
    /* A packet shorter than its type. */
    len = 0;
    sig[len++] = 0x03;
    sig[len++] = 0x20;
    sig[len++] = 0x01;
    sig[len++] = 0x00;
    CHECK_RC(init_with(sig, len), ONI_ECOBSPACK);
    /* Over 255 bytes with no delimiter. */
    memset(sig, 0x11, 300);
    sig[300] = 0;
    CHECK_RC(init_with(sig, 301), ONI_ECOBSPACK);
    /* Before a good table (the tail of a packet cut before the reset): skipped. */
    oni_device_t one[1] = {{1, 10, 1, 8, 0}};
    len = 0;
    sig[len++] = 0x09;
    sig[len++] = 0x20;
    sig[len++] = 0x00;
    len += fx_devtable(sig + len, sizeof sig - len, one, 1);
    CHECK_RC(init_with(sig, len), 0);
}

TEST(nullsig_and_stale_packets_skipped)
{
    uint8_t sig[800];
    size_t len = 0;
    uint32_t count = 2;
    len += pack(sig + len, ONI_SIG_CONFIGWACK, NULL, 0);   /* stale, before the table */
    len += pack(sig + len, ONI_SIG_NULL, NULL, 0);
    sig[len++] = 0;                                         /* stray delimiters */
    sig[len++] = 0;
    len += pack(sig + len, ONI_SIG_DEVICETABLEACK, &count, 4);
    len += pack(sig + len, ONI_SIG_NULL, NULL, 0);
    len += pack(sig + len, ONI_SIG_DEVICEINST, &two[0], 20);
    len += pack(sig + len, ONI_SIG_NULL, NULL, 0);
    len += pack(sig + len, ONI_SIG_NULL, NULL, 0);
    len += pack(sig + len, ONI_SIG_DEVICEINST, &two[1], 20);
    oni_ctx ctx = with_signal(sig, len);
    REQUIRE(ctx);
    CHECK_RC(oni_init_ctx(ctx, 0), 0);
    uint32_t v;
    size_t n = 4;
    CHECK_RC(oni_get_opt(ctx, ONI_OPT_NUMDEVICES, &v, &n), 0);
    CHECK_EQ(v, 2);
    oni_destroy_ctx(ctx);
}

/* Reset ctx, the scripted driver answering with table devs: what
 * ONI_OPT_RESET said (1: the table could not be handed to the driver). */
static int reset_to(oni_ctx ctx, const oni_device_t *devs, uint32_t n)
{
    uint8_t sig[600];
    size_t len = fx_devtable(sig, sizeof sig, devs, n);
    if (oni_set_driver_opt(ctx, SCR_OPT_DEVTABLE, sig, len))
        return 1;
    uint32_t v = 1;
    return oni_set_opt(ctx, ONI_OPT_RESET, &v, 4);
}

TEST(reset_reads_new_table_and_keeps_old_on_failure)
{
    oni_ctx ctx = fx_open(two, 2, 1);
    REQUIRE(ctx);
    oni_device_t three[3] = {{1, 10, 1, 100, 0}, {2, 10, 1, 4, 8}, {9, 10, 1, 0, 0}};
    uint32_t v;
    size_t n = 4;
    CHECK_RC(reset_to(ctx, three, 3), 0);
    CHECK_RC(oni_get_opt(ctx, ONI_OPT_NUMDEVICES, &v, &n), 0);
    CHECK_EQ(v, 3);
    CHECK_RC(oni_get_opt(ctx, ONI_OPT_MAXREADFRAMESIZE, &v, &n), 0);
    CHECK_EQ(v, 116);
    CHECK_RC(oni_get_opt(ctx, ONI_OPT_BLOCKREADSIZE, &v, &n), 0);
    CHECK_EQ(v, 116); /* the old default no longer fits: new default */

    /* Every reset brings the block read size back to its default, one
     * largest frame of the new table (upstream's reset routine,
     * api/liboni/oni.c:1055), also one the user chose, and tells the driver. */
    oni_device_t small[1] = {{1, 10, 1, 8, 0}};
    CHECK_RC(reset_to(ctx, small, 1), 0);
    CHECK_RC(oni_get_opt(ctx, ONI_OPT_BLOCKREADSIZE, &v, &n), 0);
    CHECK_EQ(v, 24);
    CHECK_EQ(fx_stats(ctx).block_read, 24);
    v = 400;
    CHECK_RC(oni_set_opt(ctx, ONI_OPT_BLOCKREADSIZE, &v, 4), 0);
    CHECK_EQ(fx_stats(ctx).block_read, 400);
    CHECK_RC(reset_to(ctx, three, 3), 0);
    CHECK_RC(oni_get_opt(ctx, ONI_OPT_BLOCKREADSIZE, &v, &n), 0);
    CHECK_EQ(v, 116);
    CHECK_EQ(fx_stats(ctx).block_read, 116);

    /* A reset that fails leaves the table as it was. */
    oni_device_t rep[2] = {{4, 10, 1, 4, 0}, {4, 10, 1, 4, 0}};
    CHECK_RC(reset_to(ctx, rep, 2), ONI_EDEVIDXREPEAT);
    CHECK_RC(oni_get_opt(ctx, ONI_OPT_NUMDEVICES, &v, &n), 0);
    CHECK_EQ(v, 3);
    oni_destroy_ctx(ctx);
}

TEST(init_retry_after_bad_table)
{
    oni_device_t rep[2] = {{4, 10, 1, 4, 0}, {4, 10, 1, 4, 0}};
    uint8_t sig[400];
    size_t len = fx_devtable(sig, sizeof sig, rep, 2);
    oni_ctx ctx = with_signal(sig, len);
    REQUIRE(ctx);
    CHECK_RC(oni_init_ctx(ctx, 0), ONI_EDEVIDXREPEAT);
    len = fx_devtable(sig, sizeof sig, two, 2);
    REQUIRE(oni_set_driver_opt(ctx, SCR_OPT_DEVTABLE, sig, len) == 0);
    CHECK_RC(oni_init_ctx(ctx, 0), 0);
    CHECK_EQ(fx_stats(ctx).inits, 1); /* the hardware was opened once */
    CHECK_EQ(fx_stats(ctx).resets, 2);
    oni_destroy_ctx(ctx);
}

/* The limits of a device table are inclusive: 65536 devices (ONI_MAXDEVICES)
 * and frames of 16 MiB (ONI_MAXFRAMEPAYLOAD) are allowed, one more is not
 * (oversized_tables). A DEVICETABLEACK of 65536 with no devices after it is
 * taken, so the reset waits for them and times out instead of calling the
 * table malformed. Guards both comparisons (> for >=). */
TEST(largest_tables_are_accepted)
{
    uint8_t sig[600];
    uint32_t count = 65536;
    size_t len = pack(sig, ONI_SIG_DEVICETABLEACK, &count, 4);
    CHECK_RC(init_with(sig, len), ONI_ETIMEOUT);
    oni_device_t big[2] = {{1, 10, 1, 16u << 20, 0}, {2, 10, 1, 4, 16u << 20}};
    len = fx_devtable(sig, sizeof sig, big, 2);
    CHECK_RC(init_with(sig, len), 0);
}

/* A DEVICETABLEACK carries exactly a u32 count: a longer payload is a
 * malformed table, not a count followed by junk (the table after it is
 * otherwise good). Guards the n != 4 check (n < 4 took it). */
TEST(device_count_payload_of_eight_bytes)
{
    uint8_t sig[600];
    uint32_t count[2] = {1, 0};
    size_t len = pack(sig, ONI_SIG_DEVICETABLEACK, count, 8);
    len += pack(sig + len, ONI_SIG_DEVICEINST, &two[0], 20);
    CHECK_RC(init_with(sig, len), ONI_EBADDEVTABLE);
}

/* Signal packets are at most 255 encoded bytes (ONI_COBSMAXPACKET): a
 * 256-byte one is malformed even though it would decode (0xFF, 254 bytes,
 * then a final code 1: 254 decoded bytes). It comes before any ACK, so the
 * reset skips it, and says ONI_ECOBSPACK when no table follows. Guards
 * read_packet's bound (sig.len < sizeof raw; with <= the packet was kept in
 * raw's padding byte, decoded and skipped as a stale packet: ONI_ETIMEOUT). */
TEST(packet_of_256_bytes_is_malformed)
{
    uint8_t sig[300];
    sig[0] = 0xFF;
    memset(sig + 1, 0x11, 254);
    sig[255] = 0x01;
    sig[256] = 0;
    CHECK_RC(init_with(sig, 257), ONI_ECOBSPACK);
    /* The same bytes less one are a packet of 255: well-formed, skipped. */
    sig[254] = 0x01;
    sig[255] = 0;
    CHECK_RC(init_with(sig, 256), ONI_ETIMEOUT);
}

/* A packet that decodes to 3 bytes is shorter than its u32 type: malformed
 * (ONI_ECOBSPACK), never a packet of some type (malformed_packets has one
 * of 2 bytes). Guards read_packet's dn < 4. */
TEST(packet_of_three_bytes_is_malformed)
{
    const uint8_t sig[] = {0x04, 0x20, 0x01, 0x02, 0x00};
    CHECK_RC(init_with(sig, sizeof sig), ONI_ECOBSPACK);
}

/* The driver hears of the block read size at init and after every reset
 * (RESET = 1), before it hears of the RESET itself, as upstream calls it
 * (api/liboni/oni.c:1059 in the reset routine, then 541); RESET = 0 resets
 * nothing and tells only of itself. The riffa driver sizes its reads by it
 * (onidriver_riffa.c:231-236), so a program that keeps the default reads. */
TEST(driver_told_the_block_read_size_at_init_and_reset)
{
    oni_ctx ctx = fx_open(two, 2, 1);
    REQUIRE(ctx);
    struct scr_stats st = fx_stats(ctx);
    CHECK_EQ(st.block_read_calls, 1);
    CHECK_EQ(st.block_read, 28);
    uint32_t v = 64;
    CHECK_RC(oni_set_opt(ctx, ONI_OPT_BLOCKREADSIZE, &v, 4), 0);
    CHECK_EQ(fx_stats(ctx).block_read, 64);
    uint32_t calls = fx_stats(ctx).callbacks;
    CHECK_RC(reset_to(ctx, two, 2), 0);
    st = fx_stats(ctx);
    CHECK_EQ(st.block_read_calls, 3);
    CHECK_EQ(st.block_read, 28);
    CHECK_EQ(st.callbacks, calls + 2);
    CHECK_EQ(st.last_callback, ONI_OPT_RESET);
    v = 0;
    CHECK_RC(oni_set_opt(ctx, ONI_OPT_RESET, &v, 4), 0);
    st = fx_stats(ctx);
    CHECK_EQ(st.block_read_calls, 3);
    CHECK_EQ(st.callbacks, calls + 3);
    oni_destroy_ctx(ctx);
}

/* A BLOCKWRITESIZE the user chose goes back to the default (one largest
 * write frame) at a reset too, as upstream's (api/liboni/oni.c:1056). */
TEST(reset_brings_the_block_write_size_back)
{
    oni_device_t w[1] = {{1, 10, 1, 8, 12}};
    oni_ctx ctx = fx_open(w, 1, 1);
    REQUIRE(ctx);
    uint32_t v = 0;
    size_t n = 4;
    CHECK_RC(oni_get_opt(ctx, ONI_OPT_BLOCKWRITESIZE, &v, &n), 0);
    CHECK_EQ(v, 20);
    v = 4096;
    CHECK_RC(oni_set_opt(ctx, ONI_OPT_BLOCKWRITESIZE, &v, 4), 0);
    CHECK_RC(reset_to(ctx, w, 1), 0);
    CHECK_RC(oni_get_opt(ctx, ONI_OPT_BLOCKWRITESIZE, &v, &n), 0);
    CHECK_EQ(v, 20);
    oni_destroy_ctx(ctx);
}
