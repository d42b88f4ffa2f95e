/* onix.c - human-readable names of ONIX device and hub ids (onix.h). */
#include <stddef.h>
#include "onix.h"

struct id_name {
    int id;
    const char *name;
};

static const struct id_name dev_names[] = {
    {ONIX_NULL, "NULL"}, {ONIX_INFO, "INFO"}, {ONIX_RHD2132, "RHD2132"}, {ONIX_RHD2164, "RHD2164"},
    {ONIX_ESTIM, "ESTIM"}, {ONIX_OSTIM, "OSTIM"}, {ONIX_TS4231, "TS4231"}, {ONIX_DINPUT32, "DINPUT32"},
    {ONIX_DOUTPUT32, "DOUTPUT32"}, {ONIX_BNO055, "BNO055"}, {ONIX_TEST0, "TEST0"},
    {ONIX_NEUROPIX1R0, "NEUROPIX1R0"}, {ONIX_HEARTBEAT, "HEARTBEAT"}, {ONIX_AD51X2, "AD51X2"},
    {ONIX_FMCVCTRL, "FMCVCTRL"}, {ONIX_AD7617, "AD7617"}, {ONIX_AD576X, "AD576X"},
    {ONIX_TESTREG0, "TESTREG0"}, {ONIX_BREAKDIG1R3, "BREAKDIG1R3"}, {ONIX_FMCCLKIN1R3, "FMCCLKIN1R3"},
    {ONIX_FMCCLKOUT1R3, "FMCCLKOUT1R3"}, {ONIX_TS4231V2ARR, "TS4231V2ARR"},
    {ONIX_FMCANALOG1R3, "FMCANALOG1R3"}, {ONIX_FMCLINKCTRL, "FMCLINKCTRL"},
    {ONIX_DS90UB9RAW, "DS90UB9RAW"}, {ONIX_TS4231V1ARR, "TS4231V1ARR"},
    {ONIX_MAX10ADCCORE, "MAX10ADCCORE"}, {ONIX_LOADTEST, "LOADTEST"}, {ONIX_MEMUSAGE, "MEMUSAGE"},
    {ONIX_HARPSYNCINPUT, "HARPSYNCINPUT"}, {ONIX_RHS2116, "RHS2116"},
    {ONIX_RHS2116TRIGGER, "RHS2116TRIGGER"}, {ONIX_NRIC1384, "NRIC1384"}, {ONIX_I2CRAW, "I2CRAW"},
    {ONIX_PERSTHEARTBEAT, "PERSTHEARTBEAT"}, {(int)ONIX_ONIGPU_NEUROPIX2, "NEUROPIX2"},
    {(int)ONIX_ONIGPU_TESTCORE, "TESTCORE"}, {(int)ONIX_ONIGPU_TESTSINK, "TESTSINK"},
    {(int)ONIX_ONIGPU_STIM, "STIM"}, {(int)ONIX_ONIGPU_HUBMGR, "HUBMGR"},
};

static const struct id_name hub_names[] = {
    {ONIX_HUB_NULL, "NULL"}, {ONIX_HUB_FMCHOST, "FMCHOST"}, {ONIX_HUB_HS64, "HS64"},
    {ONIX_HUB_HSNP, "HSNP"}, {ONIX_HUB_HSRHS2116, "HSRHS2116"}, {ONIX_HUB_HS64S, "HS64S"},
    {ONIX_HUB_HSNP1ET, "HSNP1ET"}, {ONIX_HUB_HSNP2EB, "HSNP2EB"}, {ONIX_HUB_HSNP2E, "HSNP2E"},
    {ONIX_HUB_HSNRIC1384, "HSNRIC1384"}, {ONIX_HUB_HSNP1EH, "HSNP1EH"},
    {ONIX_HUB_ACQBOARD, "ACQBOARD"}, {ONIX_HUB_RHYTHM, "RHYTHM"}, {ONIX_HUB_ACQBOARD3D, "ACQBOARD3D"},
};

static const char *lookup(const struct id_name *t, size_t n, int id)
{
    for (size_t i = 0; i < n; i++)
        if (t[i].id == id)
            return t[i].name;
    return "unknown";
}

const char *onix_device_str(int dev_id)
{
    return lookup(dev_names, sizeof dev_names / sizeof dev_names[0], dev_id);
}

const char *onix_hub_str(int hub_hardware_id)
{
    return lookup(hub_names, sizeof hub_names / sizeof hub_names[0], hub_hardware_id);
}
