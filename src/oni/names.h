/* names.h - onigpu's short names of ONIX device and hub ids, for its tools'
 * tables and files (onix_device_str / onix_hub_str give upstream's texts,
 * which are sentences). Not part of liboni.so's API (not exported). */
#ifndef ONI_NAMES_H
#define ONI_NAMES_H

/* The id's name in onix.h without ONIX_ / ONIX_ONIGPU_ / ONIX_HUB_ ("RHD2164",
 * "HS64"), or "unknown". */
const char *onix_device_tag(int dev_id);
const char *onix_hub_tag(int hub_hardware_id);

#endif
