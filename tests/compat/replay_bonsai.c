/* replay_bonsai.c - what Bonsai.ONIX1 (github.com/open-ephys/bonsai-onix1,
 * OpenEphys.Onix1/, commit 30bc849, 2026-05-15) over clroni (liboni's
 * api/clroni, commit 39c4e1a) does for the workflow CreateContext ->
 * ConfigureBreakoutBoard -> ConfigureHeadstageNeuropixelsV2e (port A) ->
 * StartAcquisition -> NeuropixelsV2eData (A and B), DigitalInput,
 * PolledBno055Data, HeartbeatData, replayed call for call through <oni.h>
 * and <onix.h> only: the context and its device table, the firmware check,
 * the configuration stages with a RESET after each (controller: passthrough;
 * link: port power and lock; device: every device's registers, the headstage
 * EEPROM, probe EEPROMs and probe configuration), start, the frames as
 * Bonsai's payload structs decode them, the polled BNO055, stop and the
 * configuration's disposal. File:line citations are of those commits
 * (Bonsai files unless clroni is named). Written from Bonsai's and clroni's
 * sources; no code of them is copied.
 *
 * Bonsai opens the driver "riffa" at index 0 by default (ContextTask.cs:51-52):
 * so does this program (docs/compat.md: pointing it at the emulated card).
 *
 * Usage: replay_bonsai [seconds]   (acquisition time, default 1)
 * Exit 0 when every step behaved as on real hardware, 1 otherwise. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "np2cfg.h"
#include "replay.h"

#define WHO "replay_bonsai"

/* device addresses of ConfigureBreakoutBoard's devices (the DeviceAddress of each Configure*.cs) */
enum { HEARTBEAT = 0, OUTPUTCLOCK = 5, ANALOGIO = 6, DIGITALIO = 7, MEMMON = 10, HARPSYNC = 12 };
enum { PC_ENABLE = 0, PC_DESPWR = 2, PC_PORTVOLTAGE = 3, PC_LINKSTATE = 5 }; /* ConfigurePortController.cs:108-121 */
enum { SER_GPIO10 = 0x0D, SER_GPIO32 = 0x0E, SER933_SCLHIGH = 0x11, SER933_SCLLOW = 0x12 };
/* ConfigureHeadstageNeuropixelsV2e.cs:147-152 */
enum { GPO10_SUPPLY = 1 << 3, GPO10_RESET = 1 << 7, GPO10_DEFAULT = 0x11, NO_PROBE = 0x11, PROBE_A = 0x19,
       PROBE_B = 0x99 };

static replay_t rp;
static uint32_t acq_clk_hz;
static int probe_present[2];

/* new oni.Context(driver, index) and its properties, again after each Refresh */
static int populate(const char *at)
{
    return rp_clroni_properties(&rp, &acq_clk_hz, at);
}

/* ContextTask.Reset (ContextTask.cs:114-127) after each configuration stage (:275-295) */
static int reset(const char *at)
{
    return rp_set(&rp, ONI_OPT_RESET, 1, at) == ONI_ESUCCESS && populate(at);
}

/* GetDeviceContext (ContextHelper.cs:10-30): the table's entry must be of the
 * expected id, at the expected version or later */
static int device(oni_dev_idx_t idx, oni_dev_id_t id, uint32_t minv, const char *at)
{
    return rp_expect_device(&rp, idx, id, minv, at);
}

/* --- controller stage: ConfigurePortController.cs:52-61 --- */

static uint32_t hub_state(void)
{
    uint32_t v = 0;
    rp_get(&rp, ONIX_OPT_PASSTHROUGH, &v, "ContextTask.cs:515");
    return v;
}

static void controller_stage(void)
{
    /* port A: shift (1 - 1) * 2 = 0 (ConfigurePortController.cs:55-57, PassthroughState.cs:8-9) */
    rp_set(&rp, ONIX_OPT_PASSTHROUGH, (hub_state() & ~1u) | 1u, "ContextTask.cs:516");
}

/* --- link stage: ConfigurePortController.cs:62-99 with the NP2.0e search --- */

static int lock_state(void)
{
    oni_reg_val_t v = 0;
    rp_read(&rp, RP_PORTA, PC_LINKSTATE, &v, "ConfigurePortController.cs:29");
    return (v & 1) != 0; /* LINKSTATE_SL, ConfigurePortController.cs:121 */
}

static void set_voltage(double volts)
{
    /* ConfigureHeadstageNeuropixelsV2ePortController.cs:35-41 */
    rp_write(&rp, RP_PORTA, PC_PORTVOLTAGE, 0, "ConfigureHeadstageNeuropixelsV2ePortController.cs:37");
    rp_sleep_ms(200);
    rp_write(&rp, RP_PORTA, PC_PORTVOLTAGE, (oni_reg_val_t)(10 * volts),
             "ConfigureHeadstageNeuropixelsV2ePortController.cs:39");
    rp_sleep_ms(200);
}

static int link_stage(void)
{
    if (!device(RP_PORTA, ONIX_FMCLINKCTRL, 2, "ConfigurePortController.cs:64"))
        return 0;
    rp_write(&rp, RP_PORTA, PC_ENABLE, 1, "ConfigurePortController.cs:66");
    rp_write(&rp, RP_PORTA, PC_DESPWR, 1, "ConfigurePortController.cs:67");
    /* ConfigureHeadstageNeuropixelsV2ePortController.cs:12-33 */
    for (double v = 3.3; v <= 5.5; v += 0.2) {
        set_voltage(v);
        if (lock_state()) {
            set_voltage(v + 1.0);
            if (rp_check(&rp, lock_state(), "ConfigurePortController.cs:82-96", "port A lost lock at %.1f V", v + 1.0)) {
                rp_note(&rp, "port A locked, %.1f V applied", v + 1.0);
                return 1;
            }
            break;
        }
    }
    rp_write(&rp, RP_PORTA, PC_PORTVOLTAGE, 0, "ConfigurePortController.cs:65,94");
    rp_fail(&rp, "ConfigurePortController.cs:82-96", "unable to acquire communication lock on port A");
    return 0;
}

/* --- device stage, ConfigureBreakoutBoard.cs:76-84 --- */


static void breakout_devices(void)
{
    oni_reg_val_t v = 0, w = 0;
    /* ConfigurePersistentHeartbeat.cs:50-73, 100 beats per second (ConfigureBreakoutBoard.cs:34) */
    if (device(HEARTBEAT, ONIX_PERSTHEARTBEAT, 1, "ConfigurePersistentHeartbeat.cs:57") &&
        !rp_read(&rp, HEARTBEAT, 2, &v, "ConfigurePersistentHeartbeat.cs:60 CLK_HZ") &&
        !rp_read(&rp, HEARTBEAT, 3, &w, "ConfigurePersistentHeartbeat.cs:61 MIN_HB_HZ") &&
        rp_check(&rp, w <= 100, "ConfigurePersistentHeartbeat.cs:63-66", "MIN_HB_HZ %u refuses 100 Hz", (unsigned)w))
        rp_write(&rp, HEARTBEAT, 1, v / 100, "ConfigurePersistentHeartbeat.cs:68 CLK_DIV");
    /* ConfigureAnalogIO.cs:224-267: enabled, +/-10 V (0), all inputs (0) */
    if (device(ANALOGIO, ONIX_FMCANALOG1R3, 2, "ConfigureAnalogIO.cs:230")) {
        rp_write(&rp, ANALOGIO, 0, 1, "ConfigureAnalogIO.cs:231 ENABLE");
        for (uint32_t i = 0; i < 12; i++)
            rp_write(&rp, ANALOGIO, 2 + i, 0, "ConfigureAnalogIO.cs:232-243 CHxxINRANGE");
        rp_write(&rp, ANALOGIO, 1, 0, "ConfigureAnalogIO.cs:262 CHDIR");
    }
    /* ConfigureDigitalIO.cs:103-128: no dead time, SampleRate null -> on change */
    if (device(DIGITALIO, ONIX_BREAKDIG1R3, 2, "ConfigureDigitalIO.cs:111")) {
        rp_write(&rp, DIGITALIO, 0, 1, "ConfigureDigitalIO.cs:112 ENABLE");
        rp_read(&rp, DIGITALIO, 5, &v, "ConfigureDigitalIO.cs:114 BASE_FREQ_HZ");
        rp_write(&rp, DIGITALIO, 6, 0, "ConfigureDigitalIO.cs:115 DEAD_TICKS");
        rp_write(&rp, DIGITALIO, 7, 0, "ConfigureDigitalIO.cs:123 SAMPLE_PERIOD");
    }
    /* ConfigureOutputClock.cs:132-170: 1 MHz, 50 %, no delay; gate subject false */
    if (device(OUTPUTCLOCK, ONIX_FMCCLKOUT1R3, 1, "ConfigureOutputClock.cs:142")) {
        rp_write(&rp, OUTPUTCLOCK, 5, 1, "ConfigureOutputClock.cs:146 GATE_RUN");
        if (!rp_read(&rp, OUTPUTCLOCK, 6, &v, "ConfigureOutputClock.cs:148 BASE_FREQ_HZ")) {
            uint32_t period = (uint32_t)(v / 1e6), h = (uint32_t)(period * (50.0 / 100));
            rp_check(&rp, period >= 2, "ConfigureOutputClock.cs:149", "BASE_FREQ_HZ %u below 2 MHz", (unsigned)v);
            rp_write(&rp, OUTPUTCLOCK, 2, h, "ConfigureOutputClock.cs:153 HIGH_CYCLES");
            rp_write(&rp, OUTPUTCLOCK, 3, period - h, "ConfigureOutputClock.cs:154 LOW_CYCLES");
            rp_write(&rp, OUTPUTCLOCK, 4, 0, "ConfigureOutputClock.cs:155 DELAY_CYCLES");
        }
        rp_write(&rp, OUTPUTCLOCK, 1, 0, "ConfigureOutputClock.cs:23,167 CLOCK_GATE");
    }
    /* ConfigureHarpSyncInput.cs:80-91 */
    if (device(HARPSYNC, ONIX_HARPSYNCINPUT, 2, "ConfigureHarpSyncInput.cs:86")) {
        rp_write(&rp, HARPSYNC, 0, 1, "ConfigureHarpSyncInput.cs:87 ENABLE");
        rp_write(&rp, HARPSYNC, 1, 0, "ConfigureHarpSyncInput.cs:88 SOURCE");
    }
    /* ConfigureMemoryMonitor.cs:71-84: disabled by default (:52), 10 per second (:60) */
    if (device(MEMMON, ONIX_MEMUSAGE, 2, "ConfigureMemoryMonitor.cs:79")) {
        rp_write(&rp, MEMMON, 0, 0, "ConfigureMemoryMonitor.cs:80 ENABLE");
        if (!rp_read(&rp, MEMMON, 2, &v, "ConfigureMemoryMonitor.cs:81 CLK_HZ"))
            rp_write(&rp, MEMMON, 1, v / 10, "ConfigureMemoryMonitor.cs:81 CLK_DIV");
    }
}

/* --- device stage, ConfigureHeadstageNeuropixelsV2e.cs:131-138 --- */

static int eeprom_bytes(uint32_t addr, int n, unsigned char *out)
{
    for (int i = 0; i < n; i++) {
        uint32_t v;
        int rc = rp_i2c_read(&rp, RP_PASSTHROUGH_A, RP_EEPROM_ADDR, addr + (uint32_t)i, 1, 1, &v);
        if (!rp_check(&rp, rc == ONI_ESUCCESS, "I2CRegisterContext.cs:56-64", "EEPROM byte %u: %d (%s)",
                      (unsigned)(addr + (uint32_t)i), rc, oni_error_str(rc)))
            return 0;
        out[i] = (unsigned char)v;
    }
    return 1;
}

static int zero_sum(const unsigned char *p, int n)
{
    unsigned char s = 0;
    for (int i = 0; i < n; i++)
        s = (unsigned char)(s + p[i]);
    return s == 0;
}

/* HeadstageEeprom (HeadstageEeprom.cs:38-105) and ValidateHeadstage
 * (ConfigureHeadstageNeuropixelsV2e.cs:216-229) */
static void validate_headstage(void)
{
    unsigned char h[16], info[256];
    const char *at = "HeadstageEeprom.cs:43-104";
    if (!eeprom_bytes(0, 16, h))
        return;
    if (!rp_check(&rp, zero_sum(h, 16), at, "EEPROM header checksum") ||
        !rp_check(&rp, memcmp(h, "HSOE", 4) == 0, at, "EEPROM ident \"%.4s\", want \"HSOE\"", (const char *)h) ||
        !rp_check(&rp, h[4] == 1, at, "EEPROM header version %u, want 1", h[4]) ||
        !rp_check(&rp, h[6] != 0, at, "EEPROM has no device info section"))
        return;
    uint32_t base = h[6] * 8u;
    if (!eeprom_bytes(base, 2, info))
        return;
    int len = info[1] * 8;
    if (!rp_check(&rp, info[0] == 1, at, "device info version %u, want 1", info[0]) ||
        !rp_check(&rp, len >= 10, at, "device info section of %d bytes", len) || !eeprom_bytes(base, len, info) ||
        !rp_check(&rp, zero_sum(info, len), at, "device info checksum"))
        return;
    uint32_t id = info[2] | (uint32_t)info[3] << 8 | (uint32_t)info[4] << 16 | (uint32_t)info[5] << 24;
    int nlen = info[8] < len - 9 ? info[8] : len - 9;
    rp_note(&rp, "headstage EEPROM: \"%.*s\", id %u, revision %u.%u", nlen, (const char *)info + 9, (unsigned)id, info[7],
            info[6]);
    rp_check(&rp, id == 8, "ConfigureHeadstageNeuropixelsV2e.cs:144,218", "headstage id %u, want 8 (NP2.0e)", (unsigned)id);
    rp_check(&rp, info[7] >= 1, "ConfigureHeadstageNeuropixelsV2e.cs:143,224", "headstage revision %u.%u < 1.0", info[7],
             info[6]);
}

static uint32_t ser_read(uint32_t reg, const char *at)
{
    uint32_t v = 0;
    int rc = rp_i2c_read(&rp, RP_PASSTHROUGH_A, RP_SER_ADDR, reg, 1, 0, &v);
    rp_check(&rp, rc == ONI_ESUCCESS, at, "serializer register 0x%02x: %d (%s)", (unsigned)reg, rc, oni_error_str(rc));
    return v & 0xFF;
}

static void ser_write(uint32_t reg, uint32_t v, const char *at)
{
    rp_i2c_write(&rp, RP_PASSTHROUGH_A, RP_SER_ADDR, reg, v, 0, at);
}

static void select_probe(uint32_t which, const char *at)
{
    ser_write(SER_GPIO32, which, at); /* ConfigureHeadstageNeuropixelsV2e.cs:241-257 */
    rp_sleep_ms(20);
}

/* ConfigureHeadstageNeuropixelsV2eDS90UB9x.ConfigureSerdes (ConfigureHeadstageNeuropixelsV2e.cs:159-214) */
static int serdes(void)
{
    if (!device(RP_PASSTHROUGH_A, ONIX_DS90UB9RAW, 3, "ConfigureDS90UB9x.cs:24"))
        return 0;
    static const uint32_t raw[][2] = {{RP_DS_ENABLE, 0},          {RP_DS_TRIGGEROFF, 0},         {RP_DS_TRIGGER, 0},
                                      {RP_DS_SYNCBITS, 0},        {RP_DS_DATAGATE, 0},           {RP_DS_MARK, 0},
                                      {RP_DS_READSZ, 0x00100009}, {RP_DS_MAGIC_MASK, 0xC000003F}, {RP_DS_MAGIC, 0x2E},
                                      {RP_DS_MAGIC_WAIT, 0},      {RP_DS_DATAMODE, 0x200002B5},  {RP_DS_DATALINES0, 0xFFFFF8A6},
                                      {RP_DS_DATALINES1, 0xFFFFF97B}};
    for (size_t i = 0; i < sizeof raw / sizeof raw[0]; i++)
        rp_write(&rp, RP_PASSTHROUGH_A, raw[i][0], raw[i][1], "ConfigureHeadstageNeuropixelsV2e.cs:162-178");
    /* Initialize933SerDesLink (ConfigureDS90UB9x.cs:62-74), then the aliases
     * (ConfigureHeadstageNeuropixelsV2e.cs:183-199) */
    static const uint32_t des[][2] = {{0x4C, 0x01}, {0x6D, 0x4 + 2}, {0x58, 0x58}, {0x5C, RP_SER_ADDR << 1},
                                      {0x6E, 0x10}, {0x6F, 0x32},
                                      {0x5E, RP_EEPROM_ADDR << 1}, {0x66, RP_EEPROM_ADDR << 1},
                                      {0x5F, RP_NP2_PROBE_ADDR << 1}, {0x67, RP_NP2_PROBE_ADDR << 1},
                                      {0x60, RP_NP2_FLEX_ADDR << 1}, {0x68, RP_NP2_FLEX_ADDR << 1},
                                      {0x61, RP_BNO_ADDR << 1}, {0x69, RP_BNO_ADDR << 1}};
    for (size_t i = 0; i < sizeof des / sizeof des[0]; i++)
        rp_i2c_write(&rp, RP_PASSTHROUGH_A, RP_DES_ADDR, des[i][0], des[i][1], 0,
                     "ConfigureDS90UB9x.cs:67-73, ConfigureHeadstageNeuropixelsV2e.cs:186-199");
    /* ShutdownProbes, DeselectProbes, EnableProbeSupply (read-modify-write) */
    ser_write(SER_GPIO10, GPO10_DEFAULT, "ConfigureHeadstageNeuropixelsV2e.cs:278");
    select_probe(NO_PROBE, "ConfigureHeadstageNeuropixelsV2e.cs:255");
    uint32_t g = ser_read(SER_GPIO10, "ConfigureHeadstageNeuropixelsV2e.cs:261");
    rp_check(&rp, g == GPO10_DEFAULT, "ConfigureHeadstageNeuropixelsV2e.cs:261", "serializer GPIO10 reads 0x%02x after 0x%02x",
             (unsigned)g, GPO10_DEFAULT);
    ser_write(SER_GPIO10, g | GPO10_SUPPLY, "ConfigureHeadstageNeuropixelsV2e.cs:263");
    rp_sleep_ms(20);
    /* Set933I2CRate 400 kHz (ConfigureDS90UB9x.cs:76-82) */
    uint32_t scl = (uint32_t)floor(1.0 / (100e-9 * 400e3) + 0.5);
    ser_write(SER933_SCLHIGH, scl, "ConfigureDS90UB9x.cs:80");
    ser_write(SER933_SCLLOW, scl, "ConfigureDS90UB9x.cs:81");
    validate_headstage();
    /* ResetProbes (ConfigureHeadstageNeuropixelsV2e.cs:267-274) */
    g = ser_read(SER_GPIO10, "ConfigureHeadstageNeuropixelsV2e.cs:269");
    rp_check(&rp, g == (GPO10_DEFAULT | GPO10_SUPPLY), "ConfigureHeadstageNeuropixelsV2e.cs:269",
             "serializer GPIO10 reads 0x%02x, want 0x%02x", (unsigned)g, GPO10_DEFAULT | GPO10_SUPPLY);
    ser_write(SER_GPIO10, g & ~(uint32_t)GPO10_RESET, "ConfigureHeadstageNeuropixelsV2e.cs:271");
    ser_write(SER_GPIO10, (g & ~(uint32_t)GPO10_RESET) | GPO10_RESET, "ConfigureHeadstageNeuropixelsV2e.cs:273");
    return 1;
}

/* NeuropixelsV2Metadata (NeuropixelsV2Metadata.cs:13-33): -5 is "no probe" */
static int flex(uint32_t addr, int n, unsigned char *out, int *absent)
{
    for (int i = 0; i < n; i++) {
        uint32_t v;
        int rc = rp_i2c_read(&rp, RP_PASSTHROUGH_A, RP_NP2_FLEX_ADDR, addr + (uint32_t)i, 1, 0, &v);
        if (rc == ONI_EREADFAILURE) {
            *absent = 1;
            return 0;
        }
        if (!rp_check(&rp, rc == ONI_ESUCCESS, "NeuropixelsV2Metadata.cs:27-28", "flex EEPROM byte 0x%x: %d (%s)",
                      (unsigned)(addr + (uint32_t)i), rc, oni_error_str(rc)))
            return 0;
        out[i] = (unsigned char)v;
    }
    return 1;
}

/* ConfigureNeuropixelsV2PsbDecoder.Process (ConfigureNeuropixelsV2PsbDecoder.cs:64-156) */
static void np2_probe(int p)
{
    const char *at = "ConfigureNeuropixelsV2PsbDecoder.cs:77";
    if (!device(RP_PASSTHROUGH_A, ONIX_DS90UB9RAW, 3, at))
        return;
    select_probe(p ? PROBE_B : PROBE_A, "ConfigureHeadstageNeuropixelsV2e.cs:123,127");
    unsigned char pn[21] = {0}, sn[8], fpn[20], ver[2];
    int absent = 0;
    if (flex(0x40, 20, pn, &absent) && flex(0x00, 8, sn, &absent) && flex(0x20, 20, fpn, &absent) &&
        flex(0x10, 2, ver, &absent)) {
        uint64_t serial = 0;
        for (int i = 0; i < 8; i++)
            serial |= (uint64_t)sn[i] << (8 * i);
        probe_present[p] = 1;
        rp_note(&rp, "probe %c: serial %llu, part number %s, flex %u.%u", 'A' + p, (unsigned long long)serial,
                (const char *)pn, ver[0], ver[1]);
        /* enabled (:41): stream on, then the user's gain calibration file,
         * whose serial number must be this one (:98-115), the configuration,
         * sync words and recording mode (:123-140) */
        rp_write(&rp, RP_PASSTHROUGH_A, RP_DS_ENABLE, 1, "ConfigureNeuropixelsV2PsbDecoder.cs:96");
        np2_write_configuration(&rp, RP_PASSTHROUGH_A, "NeuropixelsV2RegisterContext.cs:18-67");
        np2_start_streaming(&rp, RP_PASSTHROUGH_A, "ConfigureNeuropixelsV2PsbDecoder.cs:126-140");
    } else {
        rp_check(&rp, absent, "NeuropixelsV2Metadata.cs:13-33", "probe %c metadata unreadable", 'A' + p);
        rp_note(&rp, "probe %c: none", 'A' + p);
    }
    select_probe(NO_PROBE, "ConfigureNeuropixelsV2PsbDecoder.cs:151");
}

/* ConfigurePolledBno055.cs:81-96: axis map YZX, X and Y mirrored
 * (ConfigureHeadstageNeuropixelsV2e.cs:65-66) */
static void bno_configure(void)
{
    static const uint32_t w[][2] = {{0x3E, 0x00}, {0x07, 0x00}, {0x3F, 0x00}, {0x41, 0x09}, {0x42, 0x06}, {0x3D, 0x0C}};
    if (!device(RP_PASSTHROUGH_A, ONIX_DS90UB9RAW, 3, "ConfigurePolledBno055.cs:84"))
        return;
    for (size_t i = 0; i < sizeof w / sizeof w[0]; i++)
        rp_i2c_write(&rp, RP_PASSTHROUGH_A, RP_BNO_ADDR, w[i][0], w[i][1], 0, "ConfigurePolledBno055.cs:88-93");
}

static int configure(void)
{
    rp_note(&rp, "configure: controller stage");
    controller_stage();
    if (!reset("ContextTask.cs:294 (controller)"))
        return 0;
    rp_note(&rp, "configure: link stage");
    if (!link_stage() || !reset("ContextTask.cs:294 (link)"))
        return 0;
    rp_note(&rp, "configure: device stage");
    breakout_devices();
    if (serdes()) {
        np2_probe(0);
        np2_probe(1);
        bno_configure();
    }
    rp_check(&rp, probe_present[0] || probe_present[1], "ConfigureNeuropixelsV2PsbDecoder.cs:89", "no probe found");
    return reset("ContextTask.cs:294 (device)") && rp.failures == 0;
}

/* --- StartAsync (ContextTask.cs:317-356), StartAcquisition.cs:44,92 defaults --- */

static int start(void)
{
    uint32_t hw = 0;
    rp_note(&rp, "start");
    rp_set(&rp, ONI_OPT_BLOCKREADSIZE, 8192, "ContextTask.cs:339");
    rp_set(&rp, ONI_OPT_BLOCKWRITESIZE, 2048, "ContextTask.cs:340");
    if (rp_get(&rp, ONI_OPT_HWADDRESS, &hw, "ContextTask.cs:344"))
        return 0;
    if ((hw & 0x00FF0000) >> 16 == 0) /* standalone: Start(true) (clroni Context.cs:291-299) */
        return rp_set(&rp, ONI_OPT_RESETACQCOUNTER, 2, "ContextTask.cs:348") == ONI_ESUCCESS;
    rp_set(&rp, ONI_OPT_RESETACQCOUNTER, 1, "ContextTask.cs:352");
    return rp_set(&rp, ONI_OPT_RUNNING, 1, "ContextTask.cs:353") == ONI_ESUCCESS;
}

/* --- frames --- */

static rp_clock_t np2[2], dio, aio, heart;
static long mem_frames, other;
static int np2_min = 65535, np2_max = 0;

/* NeuropixelsV2ePayload (NeuropixelsV2eData.cs:183-189) read as
 * CopyAmplifierBuffer does (:148-166, NeuropixelsV2.cs:15-18) */
static void np2_frame(const oni_frame_t *f)
{
    np2_check_frame(&rp, f, 8 + 2 + 2 * 36 * 16, probe_present, np2, &np2_min, &np2_max, "NeuropixelsV2eData.cs:142-189");
}

static void dispatch(const oni_frame_t *f)
{
    if (!rp_frame_size_ok(&rp, f, "ContextTask.cs:90"))
        return;
    switch (f->dev_idx) {
    case RP_PASSTHROUGH_A:
        np2_frame(f);
        break;
    case DIGITALIO: /* DigitalInputPayload (DigitalInputDataFrame.cs:34-41) */
        if (rp_check(&rp, f->data_sz >= 12, "DigitalInputDataFrame.cs:35-41", "DigitalIO frame of %u bytes",
                     (unsigned)f->data_sz))
            rp_clock_step(&dio, rp_u64(f, 0));
        break;
    case ANALOGIO: /* AnalogInputPayload (AnalogInputDataFrame.cs:49-53) */
        if (rp_check(&rp, f->data_sz >= 8 + 24, "AnalogInputDataFrame.cs:49-53", "AnalogIO frame of %u bytes",
                     (unsigned)f->data_sz))
            rp_clock_step(&aio, rp_u64(f, 0));
        break;
    case HEARTBEAT: /* HeartbeatPayload (HeartbeatDataFrame.cs:22-26) */
        if (rp_check(&rp, f->data_sz >= 8, "HeartbeatDataFrame.cs:23-26", "heartbeat frame of %u bytes",
                     (unsigned)f->data_sz))
            rp_clock_step(&heart, rp_u64(f, 0));
        break;
    case MEMMON:
        mem_frames++;
        break;
    default:
        other++;
    }
}

/* PolledBno055Data (PolledBno055Data.cs:73-166): every 10 ms the registers
 * 0x1A.. as 4/2-byte reads, then LASTI2CL/H as the sample's clock */
static const uint32_t bno_reads[][2] = {{0, 4}, {4, 2}, {6, 4}, {10, 4}, {14, 4}, {18, 2}, {20, 4}, {24, 2}, {26, 2}};
static rp_bno_t bno = {bno_reads, sizeof bno_reads / sizeof bno_reads[0], "PolledBno055Data.cs:127-158",
                       "PolledBno055Data.cs:161-165", 0, 0};

static void poll_bno(void)
{
    rp_bno_poll(&rp, &bno);
}

static void acquire(double seconds)
{
    rp_poller_t poller = {&rp, poll_bno, 10, 0, 0, 0};
    if (rp_poller_start(&poller, "PolledBno055Data.cs:73"))
        return;
    double t0 = rp_now();
    long n = 0;
    int rc = 1;
    while (rp_now() - t0 < seconds && rp_failures(&rp) <= 20) {
        oni_frame_t *f = NULL;
        rc = oni_read_frame(rp.ctx, &f); /* clroni Context.cs:440-445 */
        if (!rp_check(&rp, rc > 0, "ContextTask.cs:404", "oni_read_frame: %d (%s)", rc, oni_error_str(rc)))
            break;
        n++;
        dispatch(f);
        oni_destroy_frame(f);
    }
    rp_poller_stop(&poller);
    if (rc <= 0)
        return;
    rp_note(&rp, "%ld frames in %.1f s: NP2.0e A %ld, B %ld; DigitalIO %ld, AnalogIO %ld, heartbeat %ld, "
            "MemoryMonitor %ld, others %ld; BNO055 polled %ld times",
            n, seconds, np2[0].n, np2[1].n, dio.n, aio.n, heart.n, mem_frames, other, bno.polls);
    for (int p = 0; p < 2; p++)
        if (probe_present[p])
            rp_check_rate(&rp, p ? "NP2.0e probe B" : "NP2.0e probe A", &np2[p], 30000, acq_clk_hz, "NeuropixelsV2eData.cs:90");
    rp_check(&rp, np2_max > np2_min, "NeuropixelsV2eData.cs:89", "NP2.0e samples are all %d", np2_min);
    rp_check_rate(&rp, "AnalogIO", &aio, 100000, acq_clk_hz, "AnalogInput.cs");
    rp_check_rate(&rp, "heartbeat", &heart, 100, acq_clk_hz, "ConfigureBreakoutBoard.cs:34");
    rp_check(&rp, mem_frames == 0, "ConfigureMemoryMonitor.cs:52,80", "%ld frames from the disabled MemoryMonitor",
             mem_frames);
    /* DigitalIO with SAMPLE_PERIOD 0 sends on change only: nothing changes here */
    rp_check(&rp, bno.polls > 0, "PolledBno055Data.cs:73", "the BNO055 was never polled");
}

/* --- stop (ContextTask.cs:452-478) and the configuration's disposal in
 * reverse (StackDisposable) --- */

static void stop(void)
{
    rp_note(&rp, "stop");
    rp_set(&rp, ONI_OPT_RUNNING, 0, "ContextTask.cs:473 (clroni Context.cs:306-309)");
    /* device stage, last first: serdes shutdown (ConfigureHeadstageNeuropixelsV2e.cs:231-239),
     * output clock gate (ConfigureOutputClock.cs:160-163) */
    ser_write(SER_GPIO10, GPO10_DEFAULT, "ConfigureHeadstageNeuropixelsV2e.cs:278");
    select_probe(NO_PROBE, "ConfigureHeadstageNeuropixelsV2e.cs:255");
    rp_write(&rp, OUTPUTCLOCK, 1, 0, "ConfigureOutputClock.cs:162");
    /* link stage: port off (ConfigurePortController.cs:65,98); controller: passthrough off (:60) */
    rp_write(&rp, RP_PORTA, PC_PORTVOLTAGE, 0, "ConfigurePortController.cs:65");
    rp_set(&rp, ONIX_OPT_PASSTHROUGH, hub_state() & ~1u, "ConfigurePortController.cs:60");
}

int main(int argc, char **argv)
{
    double seconds = 1;
    if (argc > 2 || (argc == 2 && ((seconds = atof(argv[1])) <= 0 || seconds > 600))) {
        fprintf(stderr, "usage: %s [seconds]   (acquisition time, more than 0 and at most 600; default 1)\n", WHO);
        return 2;
    }
    if (rp_open(&rp, WHO, "riffa", 0, "ContextTask.cs:94 (clroni Context.cs:93-106)"))
        return rp_close(&rp);
    if (populate("clroni Context.cs:117-130")) {
        oni_reg_val_t v[5] = {0};
        static const oni_reg_addr_t regs[5] = {0, 1, 2, 4, 5}; /* clroni onix.cs:75-101 */
        for (int i = 0; i < 5; i++)
            rp_read(&rp, ONIX_HUB_DEV_IDX, regs[i], &v[i], "clroni onix.cs:96-100");
        rp_note(&rp, "hub 0: %s, firmware v%u.%u, %u Hz", onix_hub_str((int)v[0]), (unsigned)(v[2] >> 8 & 0xFF),
                (unsigned)(v[2] & 0xFF), (unsigned)v[3]);
        if (rp_check(&rp, (v[2] >> 8 & 0xFF) == 2, "ContextTask.cs:96-102",
                     "firmware major v%u: \"This library requires version 2.x of the ONIX firmware\"",
                     (unsigned)(v[2] >> 8 & 0xFF)) &&
            configure() && start()) {
            acquire(seconds);
            stop();
        }
    }
    return rp_close(&rp);
}
