/* replay_onixsource.c - what the Open Ephys GUI's ONIX source plugin
 * (github.com/open-ephys-plugins/onix-source, commit bf9ef1c, 2025-11-06)
 * does to an ONIX system with a breakout board and a Neuropixels 2.0e
 * headstage on port A in passthrough mode, replayed call for call through
 * <oni.h> and <onix.h> only: connect (port power and lock, passthrough,
 * device table, hub firmware, breakout devices, headstage EEPROM and probe
 * EEPROMs), start (settings, probe configuration, RESETACQCOUNTER), the
 * frames as its devices decode them, the polled BNO055, stop and disconnect.
 * Every file:line is of that commit's Source/ folder. Written from the
 * plugin's sources; no code of it is copied.
 *
 * The plugin opens the driver "riffa" (Onix1.cpp:31): so does this program,
 * and it runs against the emulated card through a libonidriver_riffa.so that
 * is the emu driver (docs/compat.md says how; ONIGPU_EMU gives the card).
 *
 * Usage: replay_onixsource [seconds]   (acquisition time, default 1)
 * Exit 0 when every step behaved as on the real hardware the plugin was
 * written for, 1 otherwise (each failure is printed with its file:line). */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "np2cfg.h"
#include "replay.h"

#define WHO "replay_onixsource"

/* breakout device offsets the plugin configures (OnixSource.cpp:343) */
enum { OUTPUTCLOCK = 5, ANALOGIO = 6, DIGITALIO = 7, MEMMON = 10, HARPSYNC = 12 };
/* port controller registers (PortController.h:35-44) */
enum { PC_ENABLE = 0, PC_PORTVOLTAGE = 3, PC_LINKSTATE = 5, PC_LINKFLAGS = 7 };
/* serializer GPIO and I2C-rate registers (DS90UB9x.h:116-130) */
enum { SER_SCLHIGH = 0x0A, SER_SCLLOW = 0x0B, SER_GPIO10 = 0x0D, SER_GPIO32 = 0x0E, SER933_SCLHIGH = 0x11,
       SER933_SCLLOW = 0x12 };
/* probe selection and power through the serializer (Neuropixels2e.h:154-159) */
enum { GPO10_SUPPLY = 1 << 3, GPO10_RESET = 1 << 7, GPO10_DEFAULT = 0x11, NO_PROBE = 0x11, PROBE_A = 0x19,
       PROBE_B = 0x99 };

static replay_t rp;
static uint32_t acq_clk_hz, total_mem;
static int probe_connected[2];
static double last_voltage_a;

/* --- port controller (PortController.cpp) --- */

static int check_link_state(oni_dev_idx_t port)
{
    oni_reg_val_t v = 0;
    /* PortController.cpp:218-234 */
    if (oni_read_reg(rp.ctx, port, PC_LINKSTATE, &v) != ONI_ESUCCESS)
        return 0;
    return (v & 1) != 0; /* LINKSTATE_SL, PortController.h:132 */
}

/* setVoltage: 0 V, 300 ms, the voltage, 500 ms (PortController.cpp:196-216) */
static void set_voltage(oni_dev_idx_t port, double volts)
{
    rp_write(&rp, port, PC_PORTVOLTAGE, 0, "PortController.cpp:204");
    rp_sleep_ms(300);
    rp_write(&rp, port, PC_PORTVOLTAGE, (oni_reg_val_t)(volts * 10), "PortController.cpp:209");
    rp_sleep_ms(500);
}

/* The automatic voltage search for an NP2.0e headstage: 3.3 V to 5.5 V in
 * 0.2 V steps until lock, then 1.0 V more (PortController.cpp:138-162,
 * PortController.h:151-177). */
static int configure_voltage(oni_dev_idx_t port)
{
    for (double v = 3.3; v <= 5.5; v += 0.2) {
        set_voltage(port, v);
        if (check_link_state(port)) {
            set_voltage(port, v + 1.0);
            last_voltage_a = v + 1.0;
            return check_link_state(port);
        }
    }
    rp_write(&rp, port, PC_PORTVOLTAGE, 0, "PortController.cpp:159 (no lock)");
    return 0;
}

/* --- the breakout board (OnixSource.cpp:339-379, Devices/) --- */

static void configure_breakout(void)
{
    oni_reg_val_t v;
    /* the plugin configures fixed offsets without looking at ids; these are
     * the devices it assumes there (OnixSource.cpp:343-378) */
    rp_expect_device(&rp, OUTPUTCLOCK, ONIX_FMCCLKOUT1R3, 1, "OnixSource.cpp:345");
    rp_expect_device(&rp, DIGITALIO, ONIX_BREAKDIG1R3, 1, "OnixSource.cpp:352");
    rp_expect_device(&rp, ANALOGIO, ONIX_FMCANALOG1R3, 1, "OnixSource.cpp:359");
    rp_expect_device(&rp, MEMMON, ONIX_MEMUSAGE, 1, "OnixSource.cpp:366");
    rp_expect_device(&rp, HARPSYNC, ONIX_HARPSYNCINPUT, 1, "OnixSource.cpp:373");
    /* OutputClock::configureDevice touches no register (OutputClock.cpp:37-44) */
    /* DigitalIO::configureDevice (DigitalIO.cpp:67-89): polled at the
     * AnalogIO rate, 100 kHz / 4 (AnalogIO.h:101-102) */
    rp_write(&rp, DIGITALIO, 0, 1, "DigitalIO.cpp:72 ENABLE");
    if (rp_read(&rp, DIGITALIO, 5, &v, "DigitalIO.cpp:77 BASE_FREQ_HZ") == ONI_ESUCCESS) {
        rp_check(&rp, v > 25000 * 2, "DigitalIO.cpp:83", "BASE_FREQ_HZ %u too low for 25 kHz sampling", (unsigned)v);
        rp_write(&rp, DIGITALIO, 7, v / 25000 - 2, "DigitalIO.cpp:84 SAMPLE_PERIOD");
    }
    rp_write(&rp, ANALOGIO, 0, 1, "AnalogIO.cpp:71 ENABLE");
    rp_write(&rp, MEMMON, 0, 1, "MemoryMonitor.cpp:107 ENABLE");
    if (rp_read(&rp, MEMMON, 3, &total_mem, "MemoryMonitor.cpp:111 TOTAL_MEM") == ONI_ESUCCESS)
        rp_check(&rp, total_mem > 0, "MemoryMonitor.cpp:161", "TOTAL_MEM is 0 (the plugin divides by it)");
    rp_write(&rp, HARPSYNC, 0, 1, "HarpSyncInput.cpp:60 ENABLE");
}

/* --- the NP2.0e headstage through the DS90UB9x raw device --- */

static void select_probe(uint32_t which)
{
    rp_i2c_write(&rp, RP_PASSTHROUGH_A, RP_SER_ADDR, SER_GPIO32, which, 0, "Neuropixels2e.cpp:517");
    rp_sleep_ms(20);
}

static void probe_supply(int on)
{
    select_probe(NO_PROBE); /* Neuropixels2e.cpp:500-507 */
    rp_i2c_write(&rp, RP_PASSTHROUGH_A, RP_SER_ADDR, SER_GPIO10, on ? GPO10_DEFAULT | GPO10_SUPPLY : GPO10_DEFAULT,
                 0, "Neuropixels2e.cpp:505");
    rp_sleep_ms(20);
}

/* readBytes/readString of the flex EEPROM, one byte a read
 * (I2CRegisterContext.cpp:51-103); ONI_EREADFAILURE means no probe
 * (NeuropixelsProbeMetadata.cpp:79-82). */
static int flex_bytes(uint32_t addr, int n, unsigned char *out)
{
    for (int i = 0; i < n; i++) {
        uint32_t v;
        int rc = rp_i2c_read(&rp, RP_PASSTHROUGH_A, RP_NP2_FLEX_ADDR, addr + (uint32_t)i, 1, 0, &v);
        if (rc != ONI_ESUCCESS)
            return rc;
        out[i] = (unsigned char)v;
    }
    return ONI_ESUCCESS;
}

/* NeuropixelsProbeMetadata::NeuropixelsProbeMetadata for an NP2.0e
 * (NeuropixelsProbeMetadata.cpp:27-87, offsets NeuropixelsProbeMetadata.h:68-75) */
static uint64_t read_probe_metadata(int probe, char *pn, size_t cap)
{
    unsigned char sn[8], buf[20], flex[2];
    select_probe(probe ? PROBE_B : PROBE_A); /* Neuropixels2e.cpp:530-541 */
    int rc = flex_bytes(0x00, 8, sn);
    if (rc == ONI_EREADFAILURE)
        return 0;
    if (!rp_check(&rp, rc == ONI_ESUCCESS, "NeuropixelsProbeMetadata.cpp:45", "probe %c serial number: %d", 'A' + probe,
                  rc))
        return 0;
    uint64_t serial = 0;
    for (int i = 0; i < 8; i++)
        serial |= (uint64_t)sn[i] << (8 * i);
    rc = flex_bytes(0x40, 20, buf);
    rp_check(&rp, rc == ONI_ESUCCESS, "NeuropixelsProbeMetadata.cpp:59", "probe part number: %d", rc);
    memcpy(pn, buf, cap - 1 < 20 ? cap - 1 : 20);
    pn[cap - 1 < 20 ? cap - 1 : 20] = 0;
    rc = flex_bytes(0x20, 20, buf);
    rp_check(&rp, rc == ONI_ESUCCESS, "NeuropixelsProbeMetadata.cpp:63", "flex part number: %d", rc);
    rc = flex_bytes(0x10, 2, flex);
    rp_check(&rp, rc == ONI_ESUCCESS, "NeuropixelsProbeMetadata.cpp:69-75", "flex version and revision: %d", rc);
    return serial;
}

static void configure_serdes(void)
{
    /* Neuropixels2e::configureSerDes (Neuropixels2e.cpp:457-498) */
    static const struct {
        uint32_t reg, value;
    } raw[] = {{RP_DS_ENABLE, 1},          {RP_DS_TRIGGEROFF, 0},         {RP_DS_TRIGGER, 0},
               {RP_DS_SYNCBITS, 0},        {RP_DS_DATAGATE, 0},           {RP_DS_MARK, 0},
               {RP_DS_READSZ, 0x00100009}, {RP_DS_MAGIC_MASK, 0xC000003F}, {RP_DS_MAGIC, 0x2E},
               {RP_DS_MAGIC_WAIT, 0},      {RP_DS_DATAMODE, 0x200002B5},  {RP_DS_DATALINES0, 0xFFFFF8A6},
               {RP_DS_DATALINES1, 0xFFFFF97B}};
    for (size_t i = 0; i < sizeof raw / sizeof raw[0]; i++)
        rp_write(&rp, RP_PASSTHROUGH_A, raw[i].reg, raw[i].value, "Neuropixels2e.cpp:459-475");
    static const struct {
        uint32_t reg, value;
    } des[] = {{0x4C, 0x01}, {0x6D, 0x4 + 2}, {0x58, 0x58}, {0x5C, RP_SER_ADDR << 1}, {0x6E, 0x10}, {0x6F, 0x32},
               {0x5E, RP_NP2_PROBE_ADDR << 1}, {0x66, RP_NP2_PROBE_ADDR << 1}, {0x5F, RP_NP2_FLEX_ADDR << 1},
               {0x67, RP_NP2_FLEX_ADDR << 1}};
    for (size_t i = 0; i < sizeof des / sizeof des[0]; i++)
        rp_i2c_write(&rp, RP_PASSTHROUGH_A, RP_DES_ADDR, des[i].reg, des[i].value, 0, "Neuropixels2e.cpp:477-493");
}

/* I2CRegisterContext::set933I2cRate (I2CRegisterContext.cpp:105-113) */
static void set_933_i2c_rate(double rate, const char *at)
{
    uint32_t scl = (uint32_t)floor(1.0 / (100e-9 * rate) + 0.5);
    rp_i2c_write(&rp, RP_PASSTHROUGH_A, RP_SER_ADDR, SER933_SCLHIGH, scl, 0, at);
    rp_i2c_write(&rp, RP_PASSTHROUGH_A, RP_SER_ADDR, SER933_SCLLOW, scl, 0, at);
}

static void configure_np2e(void)
{
    /* the passthrough device of port A (OnixSource.cpp:413-426) */
    if (!rp_expect_device(&rp, RP_PASSTHROUGH_A, ONIX_DS90UB9RAW, 1, "OnixSource.cpp:415"))
        return;
    rp_i2c_write(&rp, RP_PASSTHROUGH_A, RP_SER_ADDR, SER_SCLHIGH, 20, 0, "OnixSource.cpp:420");
    rp_i2c_write(&rp, RP_PASSTHROUGH_A, RP_SER_ADDR, SER_SCLLOW, 20, 0, "OnixSource.cpp:421");
    /* HeadStageEEPROM: alias slot 7, then the id as 4 bytes from 18 with
     * 16-bit addresses (HeadStageEEPROM.cpp:29-55, .h:40-41) */
    rp_i2c_write(&rp, RP_PASSTHROUGH_A, RP_DES_ADDR, 0x64, RP_EEPROM_ADDR << 1, 0, "HeadStageEEPROM.cpp:34");
    rp_i2c_write(&rp, RP_PASSTHROUGH_A, RP_DES_ADDR, 0x6C, RP_EEPROM_ADDR << 1, 0, "HeadStageEEPROM.cpp:37");
    uint32_t hsid = 0;
    for (uint32_t i = 0; i < 4; i++) {
        uint32_t v;
        int rc = rp_i2c_read(&rp, RP_PASSTHROUGH_A, RP_EEPROM_ADDR, 18 + i, 1, 1, &v);
        if (!rp_check(&rp, rc == ONI_ESUCCESS, "HeadStageEEPROM.cpp:49", "EEPROM byte %u: %d (%s)", (unsigned)(18 + i),
                      rc, oni_error_str(rc)))
            return;
        hsid += (v & 0xFF) << (8 * i);
    }
    rp_note(&rp, "headstage on port A: %s (%u)", onix_hub_str((int)hsid), (unsigned)hsid);
    if (!rp_check(&rp, hsid == ONIX_HUB_HSNP2E, "OnixSource.cpp:427", "headstage id %u (%s), want %u (%s)",
                  (unsigned)hsid, onix_hub_str((int)hsid), ONIX_HUB_HSNP2E, onix_hub_str(ONIX_HUB_HSNP2E)))
        return;
    /* Neuropixels2e::configureDevice (Neuropixels2e.cpp:299-345) */
    rp_write(&rp, RP_PASSTHROUGH_A, RP_DS_ENABLE, 1, "Neuropixels2e.cpp:304");
    configure_serdes();
    probe_supply(1);
    set_933_i2c_rate(400e3, "Neuropixels2e.cpp:310");
    int n = 0;
    for (int p = 0; p < 2; p++) {
        char pn[21] = "";
        uint64_t sn = read_probe_metadata(p, pn, sizeof pn);
        probe_connected[p] = sn != 0; /* Neuropixels2e.cpp:321-330 */
        n += probe_connected[p];
        if (sn) {
            rp_note(&rp, "probe %c: serial %llu, part number %s", 'A' + p, (unsigned long long)sn, pn);
            /* the plugin's default probe type is quad-shank
             * (Neuropixels2e.cpp:35-38); updateSettings refuses other part
             * numbers (Neuropixels2e.cpp:353, NeuropixelsProbeMetadata.cpp:112-115) */
            rp_check(&rp, strcmp(pn, "NP2013") == 0 || strcmp(pn, "NP2014") == 0, "Neuropixels2e.cpp:353",
                     "probe %c part number \"%s\" is not a quad-shank NP2013/NP2014", 'A' + p, pn);
        }
    }
    probe_supply(0);
    rp_check(&rp, n > 0, "Neuropixels2e.cpp:332", "no probes found on the NP2.0e headstage");
    /* PolledBno055::configureDevice: alias slot 4 (PolledBno055.cpp:138-153) */
    rp_i2c_write(&rp, RP_PASSTHROUGH_A, RP_DES_ADDR, 0x61, RP_BNO_ADDR << 1, 0, "PolledBno055.cpp:145");
    rp_i2c_write(&rp, RP_PASSTHROUGH_A, RP_DES_ADDR, 0x69, RP_BNO_ADDR << 1, 0, "PolledBno055.cpp:148");
}

/* The hub ids of every hub in the table, and the host hub's firmware
 * (Onix1.cpp:82-107, OnixSource.cpp:266-306). */
static int check_hubs(void)
{
    int host = 0;
    int seen[256] = {0};
    for (oni_size_t i = 0; i < rp.ntable; i++) {
        const oni_device_t *d = &rp.table[i];
        if (d->id == ONIX_NULL)
            continue;
        int hub = (int)(d->idx & 0xFF00) >> 8; /* OnixDevice::getOffset, OnixDevice.cpp:238-241 */
        if (seen[hub]++)
            continue;
        oni_reg_val_t id = 0, fw = 0;
        if (rp_read(&rp, ((oni_dev_idx_t)hub << 8) + ONIX_HUB_DEV_IDX, ONIX_HUB_HARDWAREID, &id, "Onix1.cpp:96"))
            continue;
        if (id == ONIX_HUB_FMCHOST) {
            host++;
            if (rp_read(&rp, ((oni_dev_idx_t)hub << 8) + ONIX_HUB_DEV_IDX, ONIX_HUB_FIRMWAREVER, &fw,
                        "OnixSource.cpp:177"))
                return 0;
            rp_note(&rp, "PCIe Host firmware version: v%u.%u", (unsigned)(fw & 0xFF00) >> 8, (unsigned)fw & 0xFF);
            rp_check(&rp, (fw & 0xFF00) >> 8 == 2, "OnixSource.cpp:292", "host hub firmware major v%u, the plugin needs v2",
                     (unsigned)(fw & 0xFF00) >> 8);
        } else {
            /* the only other hub the plugin knows is the NP1.0f one
             * (OnixSource.cpp:380-409); anything else stops it */
            rp_fail(&rp, "OnixSource.cpp:401-408", "hub %d is %s (%u), which the plugin does not implement", hub,
                    onix_hub_str((int)id), (unsigned)id);
        }
    }
    return rp_check(&rp, host == 1, "OnixSource.cpp:339", "%d PCIe host hubs in the table, want 1", host);
}

/* --- connect: OnixSourceEditor::setConnectedStatus(true), OnixSourceEditor.cpp:259-307 --- */

static int connect(void)
{
    rp_note(&rp, "connect");
    /* configurePort A and B: PortController::configureDevice (PortController.cpp:33-39) */
    rp_write(&rp, RP_PORTA, PC_ENABLE, 1, "PortController.cpp:38");
    rp_write(&rp, RP_PORTB, PC_ENABLE, 1, "PortController.cpp:38");
    /* port voltages: A searched (headstage selected), B switched off (no
     * headstage selected; OnixSourceEditor.cpp:321-354, PortController.cpp:178-194) */
    if (!rp_check(&rp, configure_voltage(RP_PORTA), "OnixSourceEditor.cpp:334", "no communication lock on port A"))
        return 0;
    rp_note(&rp, "port A locked at %.1f V", last_voltage_a);
    rp_write(&rp, RP_PORTB, PC_PORTVOLTAGE, 0, "PortController.cpp:186");
    /* configureAllDevices (OnixSourceEditor.cpp:363-397) */
    rp_set(&rp, ONIX_OPT_PASSTHROUGH, 1u << 0, "OnixSource.cpp:208 (port A bit 0, port B bit 2)");
    rp_set(&rp, ONI_OPT_RESET, 1, "Onix1.cpp:155"); /* getDeviceTable resets first (Onix1.cpp:56) */
    if (rp_read_table(&rp, "Onix1.cpp:59-69"))
        return 0;
    rp_note(&rp, "%u devices", (unsigned)rp.ntable);
    if (!check_hubs())
        return 0;
    configure_breakout();
    configure_np2e();
    rp_set(&rp, ONI_OPT_RESET, 1, "OnixSource.cpp:505");
    /* configureBlockReadSize with the editor's default 4096 (OnixSource.cpp:514-589,
     * OnixSourceEditor.h:124) */
    uint32_t maxr = 0, maxw = 0;
    rp_get(&rp, ONI_OPT_MAXREADFRAMESIZE, &maxr, "OnixSource.cpp:523");
    rp_get(&rp, ONI_OPT_MAXWRITEFRAMESIZE, &maxw, "OnixSource.cpp:535");
    if (!rp_check(&rp, maxr <= 4096, "OnixSource.cpp:572", "max read frame %u > the default block read size 4096",
                  (unsigned)maxr))
        return 0;
    rp_set(&rp, ONI_OPT_BLOCKREADSIZE, 4096, "OnixSource.cpp:578");
    /* resetPortLinkFlags(A) after a voltage was set (OnixSourceEditor.cpp:287-294) */
    rp_write(&rp, RP_PORTA, PC_LINKFLAGS, 3, "PortController.cpp:46");
    return rp.failures == 0;
}

/* --- start: OnixSource::isReady and startAcquisition, OnixSource.cpp:1128-1182 --- */

static int start(void)
{
    oni_reg_val_t v = 0;
    rp_note(&rp, "start");
    /* checkPortControllerStatus(A) (OnixSource.cpp:1109-1126) */
    rp_check(&rp, check_link_state(RP_PORTA), "OnixSource.cpp:1113", "port A is not connected");
    rp_read(&rp, RP_PORTA, PC_LINKFLAGS, &v, "PortController.cpp:59");
    rp_check(&rp, v == 0, "OnixSource.cpp:1118", "port A link flags 0x%x after reset (\"was disconnected\")", (unsigned)v);
    /* updateSettings of each source, in the order they were configured */
    /* OutputClock (OutputClock.cpp:46-75): 1 MHz, 50 %, no delay, gate run (OutputClock.h:70-74) */
    if (rp_read(&rp, OUTPUTCLOCK, 6, &v, "OutputClock.cpp:49 BASE_FREQ_HZ") == ONI_ESUCCESS) {
        uint32_t period = (uint32_t)(v / 1e6), h = (uint32_t)(period * 0.5);
        rp_check(&rp, period >= 2, "OutputClock.cpp:51", "OutputClock BASE_FREQ_HZ %u below 2 MHz", (unsigned)v);
        rp_write(&rp, OUTPUTCLOCK, 1, 1, "OutputClock.cpp:56 CLOCK_GATE");
        rp_write(&rp, OUTPUTCLOCK, 2, h, "OutputClock.cpp:60 HIGH_CYCLES");
        rp_write(&rp, OUTPUTCLOCK, 3, period - h, "OutputClock.cpp:63 LOW_CYCLES");
        rp_write(&rp, OUTPUTCLOCK, 4, 0, "OutputClock.cpp:66 DELAY_CYCLES");
        rp_write(&rp, OUTPUTCLOCK, 5, 1, "OutputClock.cpp:70 GATE_RUN");
    }
    /* AnalogIO (AnalogIO.cpp:74-102): +/-10 V ranges, all inputs */
    for (uint32_t i = 0; i < 12; i++)
        rp_write(&rp, ANALOGIO, 2 + i, 0, "AnalogIO.cpp:80 CHxx_IN_RANGE");
    rp_write(&rp, ANALOGIO, 1, 0, "AnalogIO.cpp:92 CHDIR");
    /* MemoryMonitor at 100 Hz (MemoryMonitor.cpp:119-129, .h:63) */
    if (rp_read(&rp, MEMMON, 2, &v, "MemoryMonitor.cpp:122 CLK_HZ") == ONI_ESUCCESS)
        rp_write(&rp, MEMMON, 1, v / 100, "MemoryMonitor.cpp:126 CLK_DIV");
    rp_write(&rp, HARPSYNC, 1, 0, "HarpSyncInput.cpp:65 SOURCE = breakout");
    /* Neuropixels2e::updateSettings (Neuropixels2e.cpp:347-435); the gain
     * correction file it then reads is the user's, for the serial number read
     * at connect */
    probe_supply(1);
    rp_i2c_write(&rp, RP_PASSTHROUGH_A, RP_SER_ADDR, SER_GPIO10, (GPO10_DEFAULT | GPO10_SUPPLY) & ~GPO10_RESET, 0,
                 "Neuropixels2e.cpp:525");
    rp_i2c_write(&rp, RP_PASSTHROUGH_A, RP_SER_ADDR, SER_GPIO10, GPO10_DEFAULT | GPO10_SUPPLY | GPO10_RESET, 0,
                 "Neuropixels2e.cpp:527");
    for (int p = 0; p < 2; p++) {
        if (!probe_connected[p])
            continue;
        select_probe(p ? PROBE_B : PROBE_A);
        np2_write_configuration(&rp, RP_PASSTHROUGH_A, "Neuropixels2e.cpp:426");
        np2_start_streaming(&rp, RP_PASSTHROUGH_A, "Neuropixels2e.cpp:427");
    }
    select_probe(NO_PROBE);
    /* PolledBno055::updateSettings (PolledBno055.cpp:155-187): axis map YZX,
     * X and Y mirrored (OnixSource.cpp:455-456) */
    static const uint32_t bno[][2] = {{0x3E, 0x00}, {0x07, 0x00}, {0x3F, 0x00}, {0x41, 0x09}, {0x42, 0x06}, {0x3D, 0x0C}};
    for (size_t i = 0; i < sizeof bno / sizeof bno[0]; i++)
        rp_i2c_write(&rp, RP_PASSTHROUGH_A, RP_BNO_ADDR, bno[i][0], bno[i][1], 0, "PolledBno055.cpp:160-180");
    set_933_i2c_rate(400e3, "PolledBno055.cpp:184");
    /* and go: RESETACQCOUNTER = 2 resets the clock and starts (OnixSource.cpp:1154-1157) */
    return rp_set(&rp, ONI_OPT_RESETACQCOUNTER, 2, "OnixSource.cpp:1155") == ONI_ESUCCESS;
}

/* --- acquisition: FrameReader.cpp:34-67 hands each frame to its device --- */

static rp_clock_t np2[2], dio, aio, mem;
static long harp, other;
static int np2_min = 4095, np2_max = 0;

/* Neuropixels2e::processFrames (Neuropixels2e.cpp:575-617): probe index at
 * u16 word 4, samples from word 9, 16 frames of 36 words, ADC k at
 * adcIndices[k] (Neuropixels2e.h:161-164, 206-230). */
static void np2_frame(const oni_frame_t *f)
{
    np2_check_frame(&rp, f, 2 * (9 + 15 * 36 + 30 + 1), probe_connected, np2, &np2_min, &np2_max, "Neuropixels2e.cpp:575-617");
}

static void dispatch(const oni_frame_t *f)
{
    if (!rp_frame_size_ok(&rp, f, "FrameReader.cpp:54"))
        return;
    switch (f->dev_idx) {
    case RP_PASSTHROUGH_A:
        np2_frame(f);
        break;
    case DIGITALIO: /* hub clock, inputs at word 4, buttons at word 5 (DigitalIO.cpp:139-150) */
        if (rp_check(&rp, f->data_sz >= 12, "DigitalIO.cpp:144-150", "DigitalIO frame of %u bytes", (unsigned)f->data_sz))
            rp_clock_step(&dio, rp_u64(f, 0));
        break;
    case ANALOGIO: /* hub clock, 12 int16 from word 4 (AnalogIO.cpp:214-240) */
        if (rp_check(&rp, f->data_sz >= 8 + 24, "AnalogIO.cpp:216-223", "AnalogIO frame of %u bytes", (unsigned)f->data_sz))
            rp_clock_step(&aio, rp_u64(f, 0));
        break;
    case MEMMON: /* hub clock, words used at u32 2 (MemoryMonitor.cpp:158-161) */
        if (rp_check(&rp, f->data_sz >= 12, "MemoryMonitor.cpp:160", "MemoryMonitor frame of %u bytes",
                     (unsigned)f->data_sz)) {
            rp_clock_step(&mem, rp_u64(f, 0));
            rp_check(&rp, rp_u32(f, 8) <= total_mem, "MemoryMonitor.cpp:161", "memory used %u > TOTAL_MEM %u",
                     (unsigned)rp_u32(f, 8), (unsigned)total_mem);
        }
        break;
    case HARPSYNC:
        harp++;
        rp_check(&rp, f->data_sz >= 12, "HarpSyncInput.cpp:92-94", "HarpSyncInput frame of %u bytes", (unsigned)f->data_sz);
        break;
    case RP_PORTA: /* a port status frame: lock bit in byte 9 (PortController.cpp:104-121) */
        rp_check(&rp, f->data_sz >= 10 && (((unsigned char)f->data[9]) & 1), "PortController.cpp:115",
                 "port A lost lock during acquisition");
        break;
    default:
        other++; /* the plugin destroys frames of devices it has no source for */
    }
}

/* PolledBno055::pollFrame (PolledBno055.cpp:246-320), every 10 ms
 * (PolledBno055.h:100-102): seven 4-byte reads from 0x1A, then the time of
 * the last I2C transaction. */
static const uint32_t bno_reads[][2] = {{0, 4}, {4, 4}, {8, 4}, {12, 4}, {16, 4}, {20, 4}, {24, 4}};
static rp_bno_t bno = {bno_reads, sizeof bno_reads / sizeof bno_reads[0], "PolledBno055.cpp:252-283",
                       "PolledBno055.cpp:302-309", 0, 0};

static void poll_bno(void)
{
    rp_bno_poll(&rp, &bno);
}

static void acquire(double seconds)
{
    rp_poller_t poller = {&rp, poll_bno, 10, 0, 0, 0};
    if (rp_poller_start(&poller, "PolledBno055.cpp:196"))
        return;
    double t0 = rp_now();
    oni_fifo_time_t last = 0;
    long n = 0;
    int rc = 1;
    while (rp_now() - t0 < seconds) {
        oni_frame_t *f = NULL;
        rc = oni_read_frame(rp.ctx, &f);
        if (!rp_check(&rp, rc > 0, "Onix1.cpp:174", "oni_read_frame: %d (%s)", rc, oni_error_str(rc)))
            break; /* the plugin stops acquisition (FrameReader.cpp:40-48) */
        if (n++ && f->time < last)
            rp_fail(&rp, "FrameReader.cpp:38", "frame time went backwards");
        last = f->time;
        dispatch(f);
        oni_destroy_frame(f);
        if (rp_failures(&rp) > 20)
            break;
    }
    rp_poller_stop(&poller);
    if (rc <= 0)
        return;
    rp_note(&rp, "%ld frames in %.1f s: NP2.0e A %ld, B %ld; DigitalIO %ld, AnalogIO %ld, MemoryMonitor %ld, "
            "HarpSync %ld, others %ld; BNO055 polled %ld times",
            n, seconds, np2[0].n, np2[1].n, dio.n, aio.n, mem.n, harp, other, bno.polls);
    for (int p = 0; p < 2; p++)
        if (probe_connected[p])
            rp_check_rate(&rp, p ? "NP2.0e probe B" : "NP2.0e probe A", &np2[p], 30000, acq_clk_hz, "Neuropixels2e.cpp:590-592");
    rp_check(&rp, np2_max > np2_min, "Neuropixels2e.cpp:603", "NP2.0e samples are all %d", np2_min);
    rp_check_rate(&rp, "DigitalIO", &dio, 25000, acq_clk_hz, "DigitalIO.cpp:83");
    rp_check_rate(&rp, "AnalogIO", &aio, 100000, acq_clk_hz, "AnalogIO.h:101");
    rp_check_rate(&rp, "MemoryMonitor", &mem, 100, acq_clk_hz, "MemoryMonitor.cpp:126");
    rp_check(&rp, bno.polls > 0, "PolledBno055.cpp:200-218", "the BNO055 was never polled");
}

/* --- stop and disconnect (OnixSource.cpp:1196-1250, OnixSourceEditor.cpp:309-318, OnixSource.cpp:90-112) --- */

static void stop_and_disconnect(void)
{
    rp_note(&rp, "stop");
    rp_set(&rp, ONI_OPT_RUNNING, 0, "OnixSource.cpp:1208");
    probe_supply(0); /* Neuropixels2e::stopAcquisition (Neuropixels2e.cpp:549-554) */
    rp_note(&rp, "disconnect");
    rp_write(&rp, RP_PORTA, PC_PORTVOLTAGE, 0, "PortController.cpp:186 (OnixSourceEditor.cpp:311)");
    rp_write(&rp, RP_PORTB, PC_PORTVOLTAGE, 0, "PortController.cpp:186 (OnixSourceEditor.cpp:312)");
    rp_set(&rp, ONIX_OPT_PASSTHROUGH, 0, "OnixSource.cpp:101");
}

int main(int argc, char **argv)
{
    double seconds = 1;
    if (argc > 2 || (argc == 2 && ((seconds = atof(argv[1])) <= 0 || seconds > 600))) {
        fprintf(stderr, "usage: %s [seconds]   (acquisition time, more than 0 and at most 600; default 1)\n", WHO);
        return 2;
    }
    /* Onix1::Onix1(-1): the driver name is fixed (Onix1.cpp:29-44, OnixSource.cpp:37) */
    if (rp_open(&rp, WHO, "riffa", -1, "Onix1.cpp:31-36"))
        return rp_close(&rp);
    if (rp_get(&rp, ONI_OPT_ACQCLKHZ, &acq_clk_hz, "Onix1.cpp:41") == ONI_ESUCCESS)
        rp_check(&rp, acq_clk_hz > 0, "Onix1.cpp:166", "ACQCLKHZ is 0 (the plugin divides by it)");
    if (connect() && start()) {
        acquire(seconds);
        stop_and_disconnect();
    }
    return rp_close(&rp);
}
