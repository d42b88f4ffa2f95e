/* oebin.h - reading back what oebin.c writes: structure.oebin's list of
 * folders, and making every folder's files agree (recover). */
#ifndef RECORD_OEBIN_H
#define RECORD_OEBIN_H

#include <stddef.h>
#include <stdint.h>

#define OEBIN_NODE "Record Node 101" /* the record node folder, as the GUI names its first */
#define OEBIN_RECORDING OEBIN_NODE "/experiment1/recording1" /* under the directory given */
#define OEBIN_MAX_FOLDERS 256
#define OEBIN_NAME 160

enum oebin_kind { OEBIN_CONTINUOUS = 0, OEBIN_EVENTS, OEBIN_SPIKES };

struct oebin_folder {
    int kind;
    char path[OEBIN_NAME]; /* relative to the recording directory: "continuous/ONIX-100.PortA-ProbeA" */
    uint32_t nchan;        /* continuous: channels (row of continuous.dat = 2 * nchan bytes) */
};

struct oebin_index {
    size_t n;
    struct oebin_folder f[OEBIN_MAX_FOLDERS];
};

/* Parse structure.oebin's text (len bytes, not 0-terminated) into *out:
 * every continuous, events and spikes entry's folder and channel count.
 * 0, or -1 with why (cap bytes): not JSON, an entry without its folder, a
 * folder name that is empty, absolute, holds ".." or leaves its kind's
 * directory, a channel count of 0 or over 65535, more than
 * OEBIN_MAX_FOLDERS folders. */
int oebin_parse_index(const char *text, size_t len, struct oebin_index *out, char *why, size_t cap);

/* Make the recording directory rdir (experimentN/recordingM) consistent:
 * in every folder structure.oebin lists, every file cut to the rows all of
 * them hold and every .npy header set to that. report (cap bytes) says
 * what was done. 0; ONI_EINVALARG when rdir holds no structure.oebin onigpu
 * can read, or a file that is not onigpu's (report says why);
 * ONI_EWRITEFAILURE. */
int oebin_consistent(const char *rdir, char *report, size_t cap);

#endif
