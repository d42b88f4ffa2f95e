/* headstages.h - the chips of the emulated headstages that sit behind a
 * DS90UB9x serializer (NP2.0e, NP1.0e), as plain models: their I2C
 * registers, their EEPROMs and the payloads of the raw-device frames they
 * make. The card's passthrough (headstage.h) drives them; the unit tests
 * (tests/test_emu_headstages.c) call them directly. Facts and their sources:
 * docs/devices-headstages.md. No locking here: the card lock covers them.
 *
 * I2C accesses come as the host encodes them on the raw device (Bonsai
 * I2CRegisterContext.cs:29-31): a 7-bit chip address, a register (8 or 16
 * bits wide), 1 to 4 bytes (a multi-byte access covers consecutive
 * registers, the first in the low byte). Every access returns 1 for ACK,
 * 0 for NACK (no such chip, chip unpowered, read-only register). */
#ifndef EMU_HEADSTAGES_H
#define EMU_HEADSTAGES_H

#include <stdint.h>
#include "neural.h"

/* I2C chip addresses behind the serializer (7-bit) */
enum {
    HS_I2C_PROBE = 0x10,  /* Neuropixels ASIC (NeuropixelsV2.cs:8, Neuropixels1e.h) */
    HS_I2C_BNO055 = 0x28, /* BNO055 (ConfigurePolledBno055.cs:56) */
    HS_I2C_FLEX = 0x50,   /* probe flex EEPROM (NeuropixelsV2.cs:9) */
    HS_I2C_EEPROM = 0x51, /* headstage EEPROM (HeadstageEeprom.cs:8) */
    HS_I2C_SER = 0x58     /* the DS90UB933 serializer itself (ConfigureDS90UB9x.cs:60) */
};

/* An I2C read of n bytes (1..4) from register reg of a byte-wide register
 * file or memory m of size bytes; 0 (NACK) for a bad count or address. */
int hs_bytes_read(const uint8_t *m, size_t size, uint32_t reg, unsigned n, uint32_t *v);

/* --- headstage EEPROM ("HSOE" layout, HeadstageEeprom.cs:10-36) ----------------- */

#define HS_EEPROM_SIZE 128

/* Build the EEPROM image of a headstage with hardware id hw_id, revision
 * major.minor and name into img (HS_EEPROM_SIZE bytes): header, device info
 * section at byte 16, both zero-checksummed. */
void hs_eeprom_build(uint8_t *img, uint32_t hw_id, uint8_t major, uint8_t minor, const char *name);

/* --- BNO055 (polled over I2C on the NP headstages, native on hs64) ---------------- */

/* The chip's fused-output block, registers 0x1A..0x35 (BNO055 data sheet
 * table 4-2; Bonsai Bno055DataFrame.cs Bno055DataPayload): euler (heading,
 * roll, pitch, 1/16 deg), quaternion (w, x, y, z, 2^-14), linear
 * acceleration and gravity (1/100 m/s^2), temperature (C), calibration. */
#define BNO055_DATA 28

/* The 28 bytes of that block at time t_s seconds: the head turns slowly
 * about the vertical axis (36 deg/s) and rocks a little in roll. */
void bno055_data(double t_s, uint8_t *out);

struct bno055_chip {
    uint8_t reg[0x80]; /* page 0 register file */
};

/* Power-on state: config mode, chip ids in place (data sheet table 4-2). */
void bno055_chip_init(struct bno055_chip *b);
/* I2C access to register reg of the chip at acquisition time t (ticks of
 * EMU_ACQ_HZ): data registers read the fused output of that moment while
 * the chip is in a fusion mode (OPR_MODE 0x08..0x0C), 0 in config mode. */
int bno055_chip_read(struct bno055_chip *b, uint32_t reg, unsigned nbytes, uint64_t t, uint32_t *v);
int bno055_chip_write(struct bno055_chip *b, uint32_t reg, unsigned nbytes, uint32_t v);

/* --- the 64-channel headstage's stimulators (estim.c, ostim.c) -------------------- */

struct hs64_stim {
    uint32_t reg[18], nreg;
    uint64_t triggers, ignored;    /* TRIGGER writes obeyed / ignored (disabled) */
    uint64_t trigger, start, end;  /* the last obeyed one: its time, its train's start and end (acq. ticks) */
};

/* A TRIGGER write now (card lock held): obeyed if on, the train starting
 * delay_us after now and lasting train_us. */
void hs64_stim_trigger(struct hs64_stim *s, struct emu_card *c, int on, uint32_t delay_us, uint64_t train_us);

/* The hs64 hub's devices besides the RHD2164 and BNO055 (card.h has those). */
extern const struct emu_devtype emu_dev_ts4231, emu_dev_estim, emu_dev_ostim;

/* --- Neuropixels ASIC shift-register chains (npsr.c) ------------------------------ */

#define NP_SR_OK 0x80 /* STATUS: the last chain loaded whole */

struct np_sr {
    uint32_t len, count; /* SR_LENGTH; bytes shifted since the soft reset */
    uint32_t chain;      /* register of the chain being shifted, 0 = none */
    uint64_t loads;      /* chains loaded whole */
};

/* SOFT_RESET went 0xFF -> 0x00: shifting starts over. */
void np_sr_soft_reset(struct np_sr *s);
/* A write of SR_LENGTH1 (high = 0) or SR_LENGTH2 (high = 1). */
void np_sr_length(struct np_sr *s, int high, uint8_t x);
/* Byte x into the chain at register reg, n bytes long, kept in store (NULL:
 * not kept). Returns the new STATUS: NP_SR_OK or 0. */
uint8_t np_sr_shift(struct np_sr *s, uint32_t reg, uint8_t x, uint32_t n, uint8_t *store);

/* --- Neuropixels 2.0e headstage (two probes) -------------------------------------- */

enum {
    NP2E_CH = 384,
    NP2E_FRAMES = 16,      /* frames per super-frame (NeuropixelsV2.cs:15) */
    NP2E_FRAME_WORDS = 36, /* words per frame (NeuropixelsV2.cs:18) */
    NP2E_TRASH = 4,        /* words before the first frame's samples (NeuropixelsV2.cs:17) */
    NP2E_ADCS = 24,
    /* raw-device frame: u64 hub clock, u16 probe index, u16 data[16 * 36] */
    NP2E_PAYLOAD = 8 + 2 + 2 * NP2E_FRAMES * NP2E_FRAME_WORDS,
    NP2E_HZ = 30000,
    NP2E_BASE_BYTES = NP2E_CH * 4 / 2 / 8, /* a base chain: 768 bits (NeuropixelsV2.cs:76-80) */
    NP2E_SHANK_BYTES = (1280 + 4 + 4 + 7) / 8 /* a shank chain: 1288 bits (NeuropixelsV2ProbeConfiguration.cs:119) */
};

/* Probe ASIC registers (NeuropixelsV2.cs:21-52) */
enum {
    NP2_OP_MODE = 0x00, NP2_STATUS = 0x09, NP2_SUPERSYNC0 = 0x0A, NP2_SUPERSYNC11 = 0x15,
    NP2_SR_CHAIN6 = 0x16, NP2_SR_CHAIN5 = 0x17, NP2_SR_CHAIN4 = 0x18, NP2_SR_CHAIN1 = 0x1B,
    NP2_SR_LENGTH2 = 0x1C, NP2_SR_LENGTH1 = 0x1D, NP2_PROBE_ID = 0x1E, NP2_SOFT_RESET = 0x1F
};
#define NP2_OP_RECORD 0x40    /* OP_MODE: recording (ConfigureNeuropixelsV2PsbDecoder.cs:110) */
#define NP2_OP_POWERDOWN 0x80 /* OP_MODE: power down (ConfigureNeuropixelsV2PsbDecoder.cs:116) */
#define NP2_SR_OK NP_SR_OK

/* Serializer GPIO registers and the headstage's use of them
 * (ConfigureDS90UB9x.cs:153-154, ConfigureHeadstageNeuropixelsV2e.cs:103-108) */
enum { SER_GPIO10 = 0x0D, SER_GPIO32 = 0x0E };
#define NP2E_GPIO10_SUPPLY 0x08 /* VDDA on */
#define NP2E_GPIO10_RESET 0x80  /* probes out of reset (low = held in reset) */
#define NP2E_GPIO32_SELECT 0x08 /* a probe's I2C bus connected ... */
#define NP2E_GPIO32_B 0x80      /* ... probe B's rather than A's */

struct np2e_probe {
    int present;
    uint8_t reg[32];
    uint8_t flex[128];                      /* flex EEPROM */
    uint8_t chain[6][NP2E_SHANK_BYTES];     /* SR_CHAIN1..6 as last loaded */
    struct np_sr sr;
    struct neural sig;
};

struct np2e {
    struct emu_card *card;
    int record;            /* power on recording (spec record=1) */
    uint8_t ser[256];      /* serializer registers */
    uint8_t eeprom[HS_EEPROM_SIZE];
    struct np2e_probe probe[2];
    struct bno055_chip bno;
};

/* Set up the headstage: probes with serial numbers sn[0], sn[1] (0 = no
 * probe on that side: its flex EEPROM and ASIC NACK) and part number pn;
 * signal as sig says (np2e_signal: the defaults), truth as (card, dev_idx)
 * stream 0/1.
 * record != 0 starts the probes powered and recording (for hosts that do
 * not configure them); else they start unpowered and in reset, as the real
 * headstage does. 0 or ONI_EBADALLOC. */
int np2e_init(struct np2e *h, struct emu_card *card, uint32_t dev_idx, const uint64_t sn[2], const char *pn,
              const struct neural_cfg *sig, int record);
/* The NP2.0 probe's signal defaults (neural.h): wideband, 3.05 uV per
 * code, the probe's geometry and ADC sampling order. */
void np2e_signal(struct neural_cfg *sig);
/* Sampling slot of channel ch within a sample period (frame of the super-frame). */
uint32_t np2e_slot(uint32_t ch);
/* The chips' power-on state (the port's power went on or off). */
void np2e_power_on(struct np2e *h);
/* Free what np2e_init allocated (safe after a failed one). */
void np2e_fini(struct np2e *h);
/* I2C access behind the serializer at acquisition time t. */
int np2e_i2c_read(struct np2e *h, uint32_t addr, uint32_t reg, unsigned nbytes, uint64_t t, uint32_t *v);
int np2e_i2c_write(struct np2e *h, uint32_t addr, uint32_t reg, unsigned nbytes, uint32_t v);
/* 1 if probe p (0 = A, 1 = B) streams super-frames now. */
int np2e_streaming(const struct np2e *h, int p);
/* One super-frame of probe p (NP2E_PAYLOAD bytes) sampled at time t. */
void np2e_fill(struct np2e *h, int p, uint8_t *out, uint64_t hub_clock, uint64_t t);
/* Channel whose sample ADC k (0..23) gives in frame i (0..15) of a
 * super-frame (NeuropixelsV2eData.cs:78-110), and that sample's word in the
 * payload's data[] (NeuropixelsV2eData.cs:125-133, 141-150). */
uint32_t np2e_channel(uint32_t k, uint32_t i);
uint32_t np2e_word(uint32_t k, uint32_t i);

/* --- Neuropixels 1.0e headstage (one probe) --------------------------------------- */

enum {
    NP1E_CH = 384,
    NP1E_ADCS = 32,
    NP1E_FRAMES = 13,      /* 1 LFP frame + 12 AP frames (NeuropixelsV1.cs:9-10) */
    NP1E_FRAME_WORDS = 40, /* NeuropixelsV1.cs:14 */
    /* raw-device frame: u64 hub clock, u16 probe index, u16 data[13 * 40] */
    NP1E_PAYLOAD = 8 + 2 + 2 * NP1E_FRAMES * NP1E_FRAME_WORDS,
    NP1E_HZ = 30000,         /* super-frames: one AP sample of every channel */
    NP1E_SHANK_BYTES = 121,  /* 968 bits (NeuropixelsV1.cs:34) */
    NP1E_BASE_BYTES = 306,   /* 2448 bits (NeuropixelsV1.cs:68) */
    HS_I2C_NP1_PROBE = 0x70  /* NeuropixelsV1.cs:7 */
};

/* Probe ASIC registers (NeuropixelsV1.cs:16-31) and values (:218-242) */
enum {
    NP1_OP_MODE = 0x00, NP1_REC_MOD = 0x01, NP1_STATUS = 0x08, NP1_SR_CHAIN3 = 0x0C, NP1_SR_CHAIN2 = 0x0D,
    NP1_SR_CHAIN1 = 0x0E, NP1_SR_LENGTH2 = 0x0F, NP1_SR_LENGTH1 = 0x10, NP1_SOFT_RESET = 0x11
};
#define NP1_OP_RECORD 0x40
#define NP1_OP_POWERDOWN 0x80
#define NP1_REC_ACTIVE 0xC0 /* DIG_ENABLE | CH_ENABLE */
#define NP1E_GPIO10_MUX 0x08 /* GPIO10: probe MUX out of reset (ConfigureHeadstageNeuropixelsV1e.cs:123) */

struct np1e {
    struct emu_card *card;
    int record, present;
    uint8_t ser[256];
    uint8_t eeprom[HS_EEPROM_SIZE];
    uint8_t flex[128];
    uint8_t reg[0x20];
    uint8_t shank[NP1E_SHANK_BYTES], base[2][NP1E_BASE_BYTES]; /* SR_CHAIN1, SR_CHAIN2, SR_CHAIN3 */
    struct np_sr sr;
    struct neural ap, lfp;
    uint16_t lfp_now[NP1E_CH]; /* the LFP sample being sent, 32 channels a super-frame */
    uint64_t frames;           /* super-frames sent */
    struct bno055_chip bno;
};

/* Set up the headstage: probe serial number sn (0 = no probe: its flex
 * EEPROM and ASIC NACK), part number pn, the AP band's signal as sig says
 * (np1e_signal: the defaults; the LFP band shares its LFP, common-mode and
 * hum), truth as (card, dev_idx); record as for np2e_init. 0 or
 * ONI_EBADALLOC. */
int np1e_init(struct np1e *h, struct emu_card *card, uint32_t dev_idx, uint64_t sn, const char *pn,
              const struct neural_cfg *sig, int record);
/* The NP1.0 probe's AP-band signal defaults (neural.h). */
void np1e_signal(struct neural_cfg *sig);
/* The LFP band's knobs derived from the AP band's. */
void np1e_lfp_signal(const struct neural_cfg *ap, struct neural_cfg *lfp);
void np1e_power_on(struct np1e *h);
void np1e_fini(struct np1e *h);
int np1e_i2c_read(struct np1e *h, uint32_t addr, uint32_t reg, unsigned nbytes, uint64_t t, uint32_t *v);
int np1e_i2c_write(struct np1e *h, uint32_t addr, uint32_t reg, unsigned nbytes, uint32_t v);
int np1e_streaming(const struct np1e *h);
/* One super-frame (NP1E_PAYLOAD bytes) at time t. */
void np1e_fill(struct np1e *h, uint8_t *out, uint64_t hub_clock, uint64_t t);
/* Channel of ADC k (0..31) in AP frame i (0..11), or in the LFP frame of
 * super-frame i mod 12 (NeuropixelsV1eData.cs:83-115); the ADC's word in
 * a frame (NeuropixelsV1eDataFrame.cs:61-67). */
uint32_t np1e_channel(uint32_t k, uint32_t i);
uint32_t np1e_word(uint32_t k);

/* The headstages a breakout port takes (headstage.h): spec names np2e, ... */
struct emu_hs_ops;
extern const struct emu_hs_ops emu_hs_np2e, emu_hs_np1e, emu_hs_hs64;

#endif
