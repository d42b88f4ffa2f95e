/* ring.h - a bounded lock-free ring of fixed-size records, one producer and
 * one consumer: how the closed loop's threads hand the live view its
 * snapshots (docs/view.md). The producer never waits: a record that finds
 * the ring full is dropped and counted, so a slow or absent reader costs
 * the loop one failed compare, never a sample. */
#ifndef VIEW_RING_H
#define VIEW_RING_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

struct view_ring {
    _Atomic uint64_t head;  /* records written (the producer's) */
    _Atomic uint64_t tail;  /* records read (the consumer's) */
    _Atomic uint64_t lost;  /* records dropped because the ring was full */
    uint32_t cap;           /* records, a power of two */
    uint32_t rec;           /* bytes per record */
    unsigned char *buf;
};

/* Set r up for cap records (rounded up to a power of two, >= 2) of rec
 * bytes each. 0, or ONI_EBADALLOC (r is then empty; view_ring_free is safe). */
int view_ring_init(struct view_ring *r, uint32_t cap, uint32_t rec);
/* Free r's memory (a zeroed or freed ring is fine). */
void view_ring_free(struct view_ring *r);
/* Producer: copy one record of r->rec bytes in. 0, or -1 when the ring is
 * full (the record is dropped and counted in r->lost). Never blocks. */
int view_ring_put(struct view_ring *r, const void *rec);
/* Consumer: copy up to max records out into dst (room for max records).
 * Returns how many. Never blocks. */
size_t view_ring_take(struct view_ring *r, void *dst, size_t max);

#endif
