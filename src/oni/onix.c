/* onix.c - human-readable names of ONIX device and hub ids (onix.h). The
 * texts are upstream's, word for word (api/liboni/onix.c), since programs
 * print and compare them; onigpu's private ids (onix.h) have their own. */
#include <stddef.h>
#include "onix.h"
#include "oni/names.h"

struct id_name {
    int id;
    const char *tag;  /* onigpu's short name: the enum's name without ONIX_ (names.h) */
    const char *name; /* upstream's text */
};

static const struct id_name dev_names[] = {
    {ONIX_NULL, "NULL", "Placeholder device: neither generates or accepts data"},
    {ONIX_INFO, "INFO", "Host status and error information"},
    {ONIX_RHD2132, "RHD2132", "Intan RHD2132 bioamplifier"},
    {ONIX_RHD2164, "RHD2164", "Intan RHD2164 bioamplifier"},
    {ONIX_ESTIM, "ESTIM", "Electrical stimulation subcircuit"},
    {ONIX_OSTIM, "OSTIM", "Optical stimulation subcircuit"},
    {ONIX_TS4231, "TS4231", "Triad TS4231 optical to digital converter"},
    {ONIX_DINPUT32, "DINPUT32", "32-bit digital input port"},
    {ONIX_DOUTPUT32, "DOUTPUT32", "32-bit digital output port"},
    {ONIX_BNO055, "BNO055", "BNO055 9-axis IMU"},
    {ONIX_TEST0, "TEST0", "Open Ephys test device"},
    {ONIX_NEUROPIX1R0, "NEUROPIX1R0", "Neuropixels 1.0 probe"},
    {ONIX_HEARTBEAT, "HEARTBEAT", "Heartbeat"},
    {ONIX_AD51X2, "AD51X2", "AD51X2 digital potentiometer"},
    {ONIX_FMCVCTRL, "FMCVCTRL", "Open Ephys FMC Host Board rev. 1.3 link voltage control subcircuit"},
    {ONIX_AD7617, "AD7617", "AD7617 ADC/DAS"},
    {ONIX_AD576X, "AD576X", "AD576x DAC"},
    {ONIX_TESTREG0, "TESTREG0", "A test device used for testing remote register programming"},
    {ONIX_BREAKDIG1R3, "BREAKDIG1R3", "Open Ephys Breakout Board rev. 1.3 digital and user IO"},
    {ONIX_FMCCLKIN1R3, "FMCCLKIN1R3", "Open Ephys FMC Host Board rev. 1.3 clock intput subcircuit"},
    {ONIX_FMCCLKOUT1R3, "FMCCLKOUT1R3", "Open Ephys FMC Host Board rev. 1.3 clock output subcircuit"},
    {ONIX_TS4231V2ARR, "TS4231V2ARR", "Triad TS421 optical to digital converter array for V2 base stations"},
    {ONIX_FMCANALOG1R3, "FMCANALOG1R3", "Open Ephys FMC Host Board rev. 1.3 analog IO subcircuit"},
    {ONIX_FMCLINKCTRL, "FMCLINKCTRL", "Open Ephys FMC Host Board coaxial headstage link control circuit"},
    {ONIX_DS90UB9RAW, "DS90UB9RAW", "Raw DS90UB9x deserializer"},
    {ONIX_TS4231V1ARR, "TS4231V1ARR", "Triad TS421 optical to digital converter array for V1 base stations"},
    {ONIX_MAX10ADCCORE, "MAX10ADCCORE", "Intel MAX10 internal ADC device"},
    {ONIX_LOADTEST, "LOADTEST", "Variable load testing device"},
    {ONIX_MEMUSAGE, "MEMUSAGE", "Acquisition hardware buffer usage reporting device"},
    {ONIX_HARPSYNCINPUT, "HARPSYNCINPUT", "HARP Synchronization time input"},
    {ONIX_RHS2116, "RHS2116", "Intan RHS2116 bioamplifier and stimulator"},
    {ONIX_RHS2116TRIGGER, "RHS2116TRIGGER", "Multi Intan RHS2116 stimulation trigger"},
    {ONIX_NRIC1384, "NRIC1384", "IMEC NRIC1384 384-channel bioacquisition chip"},
    {ONIX_I2CRAW, "I2CRAW", "Device for raw I2C accesses"},
    {ONIX_PERSTHEARTBEAT, "PERSTHEARTBEAT", "Persistent heartbeat"},
    /* onigpu's private ids: upstream has no text for them */
    {(int)ONIX_ONIGPU_NEUROPIX2, "NEUROPIX2", "onigpu Neuropixels 2.0 probe (private id)"},
    {(int)ONIX_ONIGPU_TESTCORE, "TESTCORE", "onigpu GPU stream test core (private id)"},
    {(int)ONIX_ONIGPU_TESTSINK, "TESTSINK", "onigpu GPU stream test sink (private id)"},
    {(int)ONIX_ONIGPU_STIM, "STIM", "onigpu echo stimulator (private id)"},
    {(int)ONIX_ONIGPU_HUBMGR, "HUBMGR", "onigpu hub manager (private id)"},
};

static const struct id_name hub_names[] = {
    {ONIX_HUB_NULL, "NULL", "Placeholder Hub"},
    {ONIX_HUB_FMCHOST, "FMCHOST", "Open Ephys ONIX FMC Host"},
    {ONIX_HUB_HS64, "HS64", "Open Ephys ONIX Headstage-64"},
    {ONIX_HUB_HSNP, "HSNP", "Open Ephys ONIX Headstage-Neuropixels1.0"},
    {ONIX_HUB_HSRHS2116, "HSRHS2116", "Open Ephys ONIX Headstage-RHS2116"},
    {ONIX_HUB_HS64S, "HS64S", "Open Ephys ONIX Headstage-64s"},
    {ONIX_HUB_HSNP1ET, "HSNP1ET", "Open Ephys ONIX Headstage-Neuropixels1.0e-TE"},
    {ONIX_HUB_HSNP2EB, "HSNP2EB", "Open Ephys ONIX Headstage-Neuropixels2.0e-Beta"},
    {ONIX_HUB_HSNP2E, "HSNP2E", "Open Ephys ONIX Headstage-Neuropixels2.0e"},
    {ONIX_HUB_HSNRIC1384, "HSNRIC1384", "Open Ephys ONIX Headstage-NRIC1384"},
    {ONIX_HUB_HSNP1EH, "HSNP1EH", "Open Ephys ONIX Headstage-Neuropixels1.0e-Hirose"},
    {ONIX_HUB_ACQBOARD, "ACQBOARD", "Open Ephys Acquisition Board"},
    {ONIX_HUB_RHYTHM, "RHYTHM", "Open Ephys Acquisition Board Rhythm wrapper"},
    {ONIX_HUB_ACQBOARD3D, "ACQBOARD3D", "Open Ephys 3D-capable Acquisition Board"},
};

static const struct id_name *lookup(const struct id_name *t, size_t n, int id)
{
    for (size_t i = 0; i < n; i++)
        if (t[i].id == id)
            return &t[i];
    return NULL;
}

#define DEV(id) lookup(dev_names, sizeof dev_names / sizeof dev_names[0], id)
#define HUB(id) lookup(hub_names, sizeof hub_names / sizeof hub_names[0], id)

const char *onix_device_str(int dev_id)
{
    const struct id_name *e = DEV(dev_id);
    return e ? e->name : "Unknown device";
}

const char *onix_hub_str(int hub_hardware_id)
{
    const struct id_name *e = HUB(hub_hardware_id);
    return e ? e->name : "Unknown Hub";
}

const char *onix_device_tag(int dev_id)
{
    const struct id_name *e = DEV(dev_id);
    return e ? e->tag : "unknown";
}

const char *onix_hub_tag(int hub_hardware_id)
{
    const struct id_name *e = HUB(hub_hardware_id);
    return e ? e->tag : "unknown";
}
