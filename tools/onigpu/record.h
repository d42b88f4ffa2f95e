/* record.h - `onigpu read --record DIR`: every frame read is appended to its
 * device's file in DIR, and DIR/devices.csv says which file holds what.
 *
 * A device's file is a sequence of records [u64 acquisition clock][payload:
 * read_size bytes], little-endian as the frames are, no padding. A file only
 * ever holds whole records: a write that fails (a full disk, a file size
 * limit) stops the recording and the file is cut back to its last whole
 * record, so nothing recorded before the failure is lost or torn. The
 * caller ignores SIGXFSZ, so that a file size limit is such a failure and
 * not the end of the process. */
#ifndef RECORD_H
#define RECORD_H

#include <stdint.h>
#include "oni.h"

struct recorder;

/* Make DIR (mkdir -p; an existing DIR must hold no devices.csv, and no
 * devices.csv.part of a recording under way or cut off, so a recording is
 * never overwritten), the index's room and one empty file per readable
 * device of t[0..n). The caller keeps t. NULL after printing why. */
struct recorder *rec_open(const char *dir, const oni_device_t *t, oni_size_t n);

/* Append frame f's record to its device's file (buffered). 0; -1 after
 * printing why: a device not in the table, a payload not read_size long, a
 * write that failed (then the recording is over: every later call fails). */
int rec_frame(struct recorder *r, const oni_frame_t *f);

/* Flush every file, cut a failed one back to whole records, sync them,
 * write devices.csv (file, index, id, name, sizes, frames recorded) and
 * free r. 0; -1 after printing why, also when an earlier rec_frame failed. */
int rec_close(struct recorder *r);

/* Remove every file rec_open made and free r: for a recording that never
 * started (acquisition refused), which must not look like one that ended. */
void rec_abort(struct recorder *r);

#endif
