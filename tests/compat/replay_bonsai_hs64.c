/* replay_bonsai_hs64.c - what Bonsai.ONIX1 (github.com/open-ephys/bonsai-onix1,
 * OpenEphys.Onix1/, commit 30bc849) over clroni (liboni 39c4e1a) does for the
 * workflow CreateContext -> ConfigureHeadstage64 (port A) -> StartAcquisition
 * -> Rhd2164Data, Bno055Data, with the electrical and optical stimulators
 * armed and triggered: replayed call for call through <oni.h> and <onix.h>
 * only. The 64-channel headstage is a hub of its own on the port (standard
 * mode, no passthrough): RHD2164 at 256, BNO055 257, TS4231 258, electrical
 * stimulator 259, optical stimulator 260 (ConfigureHeadstage64.cs:100-113).
 * File:line citations are of that commit (Bonsai files unless clroni is
 * named); no code of it is copied.
 *
 * Usage: replay_bonsai_hs64 [seconds]   (acquisition time, default 1)
 * Exit 0 when every step behaved as on real hardware, 1 otherwise. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "replay.h"

#define WHO "replay_bonsai_hs64"

enum { HUB = 0x100, RHD = HUB + 0, BNO = HUB + 1, TS4231 = HUB + 2, ESTIM = HUB + 3, OSTIM = HUB + 4 };
enum { PC_ENABLE = 0, PC_DESPWR = 2, PC_PORTVOLTAGE = 3, PC_LINKSTATE = 5 }; /* ConfigurePortController.cs:108-121 */
/* RHD2000 registers (Rhd2000.cs:13-22) and the RHD2164's managed ENABLE (ConfigureRhd2164.cs:135) */
enum { RHD_FORMAT = 0x04, RHD_BW0 = 0x08, RHD_ENABLE = 0x8000 };
/* electrical stimulator (ConfigureHeadstage64ElectricalStimulator.cs:267-284) */
enum { ES_CURRENT1 = 2, ES_CURRENT2 = 3, ES_PULSEDUR1 = 4, ES_IPI = 5, ES_PULSEDUR2 = 6, ES_INTERPULSE = 7,
       ES_BURSTCOUNT = 8, ES_IBI = 9, ES_TRAINCOUNT = 10, ES_TRAINDELAY = 11, ES_TRIGGER = 12, ES_POWERON = 13,
       ES_ENABLE = 14, ES_RESTCURR = 15 };
/* optical stimulator (ConfigureHeadstage64OpticalStimulator.cs:331-344) */
enum { OS_MAXCURRENT = 1, OS_PULSEMASK = 2, OS_PULSEDUR = 3, OS_PULSEPERIOD = 4, OS_BURSTCOUNT = 5, OS_IBI = 6,
       OS_TRAINCOUNT = 7, OS_TRAINDELAY = 8, OS_TRIGGER = 9, OS_ENABLE = 10 };

static replay_t rp;
static uint32_t acq_hz;

static int reset(const char *at)
{
    return rp_set(&rp, ONI_OPT_RESET, 1, at) == ONI_ESUCCESS && rp_clroni_properties(&rp, &acq_hz, at);
}

static int lock_state(void)
{
    oni_reg_val_t v = 0;
    rp_read(&rp, RP_PORTA, PC_LINKSTATE, &v, "ConfigurePortController.cs:29");
    return (v & 1) != 0;
}

static void port_voltage(double volts, unsigned settle_ms, const char *at)
{
    rp_write(&rp, RP_PORTA, PC_PORTVOLTAGE, (oni_reg_val_t)(10 * volts), at);
    rp_sleep_ms(settle_ms);
}

/* ConfigureHeadstage64PortController.ConfigurePortVoltage (ConfigureHeadstage64.cs:170-214):
 * charge at 10 V, ramp down from 6.5 V until the lock goes, then 0 V and
 * the lowest lock voltage plus 40 % and 2 V */
static int link_stage(void)
{
    if (!rp_expect_device(&rp, RP_PORTA, ONIX_FMCLINKCTRL, 2, "ConfigurePortController.cs:64"))
        return 0;
    rp_write(&rp, RP_PORTA, PC_ENABLE, 1, "ConfigurePortController.cs:66");
    rp_write(&rp, RP_PORTA, PC_DESPWR, 1, "ConfigurePortController.cs:67");
    port_voltage(0, 1000, "ConfigureHeadstage64.cs:183");
    port_voltage(10.0, 10, "ConfigureHeadstage64.cs:187");
    double v = 6.5;
    for (; v >= 3.3; v -= 0.2) {
        port_voltage(v, 200, "ConfigureHeadstage64.cs:194");
        if (!lock_state()) {
            if (!rp_check(&rp, v != 6.5, "ConfigureHeadstage64.cs:198-200", "no lock at 6.5 V"))
                return 0;
            break;
        }
    }
    port_voltage(3.3, 100, "ConfigureHeadstage64.cs:206");
    port_voltage(0, 1000, "ConfigureHeadstage64.cs:208");
    v += 0.4 * v + 2.0;
    port_voltage(v, 200, "ConfigureHeadstage64.cs:211");
    if (!rp_check(&rp, lock_state(), "ConfigureHeadstage64.cs:213", "no lock at %.2f V", v))
        return 0;
    rp_note(&rp, "port A locked, %.2f V applied", v);
    return 1;
}

/* BitHelper.Replace: the masked bits of `value` become those of `bits` */
static uint32_t replace_bits(uint32_t value, uint32_t mask, uint32_t bits)
{
    return (value & ~mask) | (bits & mask);
}

static void rhd2164(void)
{
    /* ConfigureRhd2164.cs:70-122, defaults DSP off, 0.1 Hz to 10 kHz (:45-59);
     * cutoff register values of Rhd2000.cs:66 and :75 */
    static const uint32_t high[4] = {17, 0, 16, 0}, low[3] = {16, 60, 1};
    static const uint32_t mask[6] = {0x3F, 0x1F, 0x3F, 0x1F, 0x7F, 0x7F};
    oni_reg_val_t format = 0, bw[6] = {0};
    if (!rp_expect_device(&rp, RHD, ONIX_RHD2164, 1, "ConfigureRhd2164.cs:79"))
        return;
    rp_read(&rp, RHD, RHD_FORMAT, &format, "ConfigureRhd2164.cs:81");
    format &= ~(1u << 6); /* offset binary */
    format &= ~(1u << 4); /* DSP off */
    for (int i = 0; i < 6; i++)
        rp_read(&rp, RHD, RHD_BW0 + (uint32_t)i, &bw[i], "ConfigureRhd2164.cs:98-103");
    uint32_t want[6] = {high[0], high[1], high[2], high[3], low[0], ((low[2] << 6) & 0x40) | (low[1] & 0x3F)};
    for (int i = 0; i < 6; i++)
        rp_write(&rp, RHD, RHD_BW0 + (uint32_t)i, replace_bits(bw[i], mask[i], want[i]), "ConfigureRhd2164.cs:111-116");
    rp_write(&rp, RHD, RHD_FORMAT, format, "ConfigureRhd2164.cs:117");
    rp_write(&rp, RHD, RHD_ENABLE, 1, "ConfigureRhd2164.cs:118");
    /* what was written reads back: the RHD2164's registers are the chip's */
    oni_reg_val_t v = 0;
    rp_read(&rp, RHD, RHD_BW0 + 4, &v, "ConfigureRhd2164.cs:102");
    rp_check(&rp, v == replace_bits(bw[4], mask[4], want[4]), "ConfigureRhd2164.cs:115",
             "RHD2164 BW4 reads 0x%x after 0x%x", (unsigned)v, (unsigned)replace_bits(bw[4], mask[4], want[4]));
}

/* MicroampsToCode (ConfigureHeadstage64ElectricalStimulator.cs:286-290, :263-264) */
static uint32_t ua_code(double ua)
{
    return (uint32_t)((ua + 2500) / (2 * 2500 / (pow(2, 16) - 1)));
}

/* MilliampsToPotSetting (ConfigureHeadstage64OpticalStimulator.cs:351-356, :308-309) */
static uint32_t ma_pot(double ma)
{
    double r = pow(ma / 3.833e+05, 1 / -0.9632);
    double s = floor(256 * (r - 590) / 100000 + 0.5);
    return s > 255 ? 255 : s < 0 ? 0 : (uint32_t)s;
}

static void stimulators(void)
{
    /* electrical: the subjects' initial values, all 0 (ConfigureHeadstage64ElectricalStimulator.cs:22-33, 224-243) */
    if (rp_expect_device(&rp, ESTIM, ONIX_ESTIM, 1, "ConfigureHeadstage64ElectricalStimulator.cs:226")) {
        static const uint32_t regs[] = {ES_CURRENT1, ES_RESTCURR, ES_CURRENT2};
        for (int i = 0; i < 3; i++)
            rp_write(&rp, ESTIM, regs[i], ua_code(0), "ConfigureHeadstage64ElectricalStimulator.cs:229-234");
        static const uint32_t zero[] = {ES_TRAINDELAY, ES_PULSEDUR1, ES_IPI, ES_PULSEDUR2, ES_INTERPULSE, ES_IBI,
                                        ES_BURSTCOUNT, ES_TRAINCOUNT};
        for (size_t i = 0; i < sizeof zero / sizeof zero[0]; i++)
            rp_write(&rp, ESTIM, zero[i], 0, "ConfigureHeadstage64ElectricalStimulator.cs:235-242");
    }
    /* optical: 100 mA max, channel 1 at 100 %, 5 ms pulses at 50 Hz, 20 per
     * burst, one burst (ConfigureHeadstage64OpticalStimulator.cs:22-31, 241-290) */
    if (rp_expect_device(&rp, OSTIM, ONIX_OSTIM, 1, "ConfigureHeadstage64OpticalStimulator.cs:243")) {
        const char *at = "ConfigureHeadstage64OpticalStimulator.cs:265-289";
        rp_write(&rp, OSTIM, OS_MAXCURRENT, ma_pot(100), at);
        rp_write(&rp, OSTIM, OS_PULSEMASK, 0xFF, at);        /* 100 % of channel 0: 8 of 8 sources */
        rp_write(&rp, OSTIM, OS_PULSEMASK, 0xFF, at);        /* channel 1 at 0 % */
        rp_write(&rp, OSTIM, OS_PULSEDUR, 5000, at);         /* 5 ms, below the 20 ms period */
        rp_write(&rp, OSTIM, OS_PULSEPERIOD, 20000, at);
        rp_write(&rp, OSTIM, OS_BURSTCOUNT, 20, at);
        rp_write(&rp, OSTIM, OS_IBI, 0, at);
        rp_write(&rp, OSTIM, OS_TRAINCOUNT, 1, at);
        rp_write(&rp, OSTIM, OS_TRAINDELAY, 0, at);
    }
}

/* --- frames --- */

static rp_clock_t rhd, bno;
static long other;
static int amp_min = 65535, amp_max = 0;

static void dispatch(const oni_frame_t *f)
{
    if (!rp_frame_size_ok(&rp, f, "ContextTask.cs:90"))
        return;
    if (f->dev_idx == RHD) { /* Rhd2164Payload (Rhd2000DataFrame.cs:64-69): hub clock, 64 + 3 u16 */
        if (!rp_check(&rp, f->data_sz >= 8 + 2 * 67, "Rhd2000DataFrame.cs:64-69", "RHD2164 frame of %u bytes",
                      (unsigned)f->data_sz))
            return;
        rp_clock_step(&rhd, rp_u64(f, 0));
        for (int i = 0; i < 64; i++) {
            int s = rp_u16(f, 8 + 2 * (size_t)i);
            amp_min = s < amp_min ? s : amp_min;
            amp_max = s > amp_max ? s : amp_max;
        }
    } else if (f->dev_idx == BNO) { /* Bno055Payload (Bno055DataFrame.cs:106-121): hub clock, 13 s16, 2 u8 */
        if (rp_check(&rp, f->data_sz >= 8 + 28, "Bno055DataFrame.cs:106-121", "BNO055 frame of %u bytes",
                     (unsigned)f->data_sz))
            rp_clock_step(&bno, rp_u64(f, 0));
    } else {
        other++;
    }
}

int main(int argc, char **argv)
{
    double seconds = argc > 1 ? atof(argv[1]) : 1;
    if (argc > 2 || seconds <= 0 || seconds > 600) {
        fprintf(stderr, "usage: %s [seconds]   (acquisition time, more than 0 and at most 600; default 1)\n", WHO);
        return 2;
    }
    if (rp_open(&rp, WHO, "riffa", 0, "ContextTask.cs:94 (clroni Context.cs:93-106)") ||
        !rp_clroni_properties(&rp, &acq_hz, "clroni Context.cs:117-130"))
        return rp_close(&rp);
    oni_reg_val_t fw = 0, hubid = 0, hubclk = 0;
    rp_read(&rp, ONIX_HUB_DEV_IDX, 2, &fw, "clroni onix.cs:98");
    if (!rp_check(&rp, (fw >> 8 & 0xFF) == 2, "ContextTask.cs:96-102", "host firmware major v%u, want 2",
                  (unsigned)(fw >> 8 & 0xFF)))
        return rp_close(&rp);
    /* controller stage: standard hub on port A, passthrough bit 0 cleared (ConfigurePortController.cs:52-61) */
    uint32_t state = 0;
    rp_note(&rp, "configure");
    rp_get(&rp, ONIX_OPT_PASSTHROUGH, &state, "ContextTask.cs:515");
    rp_set(&rp, ONIX_OPT_PASSTHROUGH, state & ~1u, "ContextTask.cs:516");
    if (!reset("ContextTask.cs:294 (controller)") || !link_stage() || !reset("ContextTask.cs:294 (link)"))
        return rp_close(&rp);
    /* the headstage's own hub manager (clroni onix.cs:90-101) */
    rp_read(&rp, HUB + ONIX_HUB_DEV_IDX, ONIX_HUB_HARDWAREID, &hubid, "clroni onix.cs:96");
    rp_read(&rp, HUB + ONIX_HUB_DEV_IDX, 4, &hubclk, "clroni onix.cs:99");
    rp_note(&rp, "hub 1: %s (%u), clock %u Hz", onix_hub_str((int)hubid), (unsigned)hubid, (unsigned)hubclk);
    rp_check(&rp, hubid == ONIX_HUB_HS64, "ConfigureHeadstage64.cs", "hub 1 is %s, want %s", onix_hub_str((int)hubid),
             onix_hub_str(ONIX_HUB_HS64));
    rhd2164();
    if (rp_expect_device(&rp, BNO, ONIX_BNO055, 1, "ConfigureBno055.cs:50"))
        rp_write(&rp, BNO, 0, 1, "ConfigureBno055.cs:51");
    if (rp_expect_device(&rp, TS4231, ONIX_TS4231V1ARR, 1, "ConfigureTS4231V1.cs:53"))
        rp_write(&rp, TS4231, 0, 1, "ConfigureTS4231V1.cs:54");
    stimulators();
    if (!reset("ContextTask.cs:294 (device)"))
        return rp_close(&rp);
    /* direct stage, after the reset: arm (electrical: disarmed by default,
     * :22, 244-253; optical: armed, :22, 292-298) */
    rp_write(&rp, ESTIM, ES_ENABLE, 0, "ConfigureHeadstage64ElectricalStimulator.cs:250");
    rp_write(&rp, ESTIM, ES_POWERON, 0, "ConfigureHeadstage64ElectricalStimulator.cs:251");
    rp_write(&rp, OSTIM, OS_ENABLE, 1, "ConfigureHeadstage64OpticalStimulator.cs:297");
    /* start (ContextTask.cs:317-356, StartAcquisition.cs:44,92) */
    rp_set(&rp, ONI_OPT_BLOCKREADSIZE, 8192, "ContextTask.cs:339");
    rp_set(&rp, ONI_OPT_BLOCKWRITESIZE, 2048, "ContextTask.cs:340");
    if (rp.failures || rp_set(&rp, ONI_OPT_RESETACQCOUNTER, 2, "ContextTask.cs:348"))
        return rp_close(&rp);
    rp_note(&rp, "start");
    double t0 = rp_now();
    int triggered = 0;
    while (rp_now() - t0 < seconds && rp.failures <= 20) {
        oni_frame_t *f = NULL;
        int rc = oni_read_frame(rp.ctx, &f);
        if (!rp_check(&rp, rc > 0, "ContextTask.cs:404", "oni_read_frame: %d (%s)", rc, oni_error_str(rc)))
            break;
        dispatch(f);
        oni_destroy_frame(f);
        if (!triggered && rp_now() - t0 > seconds / 2) {
            /* Headstage64OpticalStimulatorTrigger (Headstage64OpticalStimulatorTrigger.cs:38-44) */
            rp_write(&rp, OSTIM, OS_TRIGGER, 1, "Headstage64OpticalStimulatorTrigger.cs:42");
            triggered = 1;
        }
    }
    rp_set(&rp, ONI_OPT_RUNNING, 0, "ContextTask.cs:473");
    rp_note(&rp, "RHD2164 %ld frames, BNO055 %ld, others %ld", rhd.n, bno.n, other);
    /* the RHD2164 samples at 30 kHz and the BNO055 at 100 Hz on this headstage (hub clock of hub 1) */
    uint32_t clk = hubclk ? hubclk : acq_hz;
    rp_check_rate(&rp, "RHD2164", &rhd, 30000, clk, "Rhd2164Data.cs:74");
    rp_check_rate(&rp, "BNO055", &bno, 100, clk, "Bno055Data.cs");
    rp_check(&rp, amp_max > amp_min, "Rhd2164Data.cs:72", "RHD2164 amplifier samples are all %d", amp_min);
    /* disposal: passthrough bit stays clear, port off (ConfigurePortController.cs:60,65) */
    rp_write(&rp, RP_PORTA, PC_PORTVOLTAGE, 0, "ConfigurePortController.cs:65");
    return rp_close(&rp);
}
