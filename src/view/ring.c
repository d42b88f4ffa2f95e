/* ring.c - the single-producer single-consumer ring of view snapshots
 * (ring.h). The producer publishes a record by storing head with release
 * order after copying it; the consumer frees slots by storing tail the same
 * way, so each side reads the other's index with acquire order and never
 * sees a slot half written. */
#include <stdlib.h>
#include <string.h>
#include "onidefs.h"
#include "view/ring.h"

int view_ring_init(struct view_ring *r, uint32_t cap, uint32_t rec)
{
    memset(r, 0, sizeof *r);
    uint32_t n = 2;
    while (n < cap && n < (1u << 30))
        n <<= 1;
    r->buf = calloc(n, rec ? rec : 1);
    if (!r->buf)
        return ONI_EBADALLOC;
    r->cap = n;
    r->rec = rec;
    return 0;
}

void view_ring_free(struct view_ring *r)
{
    free(r->buf);
    r->buf = NULL;
    r->cap = 0;
}

int view_ring_put(struct view_ring *r, const void *rec)
{
    uint64_t h = atomic_load_explicit(&r->head, memory_order_relaxed);
    uint64_t t = atomic_load_explicit(&r->tail, memory_order_acquire);
    if (h - t >= r->cap) {
        atomic_fetch_add_explicit(&r->lost, 1, memory_order_relaxed);
        return -1;
    }
    memcpy(r->buf + (size_t)(h & (r->cap - 1)) * r->rec, rec, r->rec);
    atomic_store_explicit(&r->head, h + 1, memory_order_release);
    return 0;
}

size_t view_ring_take(struct view_ring *r, void *dst, size_t max)
{
    uint64_t t = atomic_load_explicit(&r->tail, memory_order_relaxed);
    uint64_t h = atomic_load_explicit(&r->head, memory_order_acquire);
    size_t n = 0;
    for (; t + n < h && n < max; n++)
        memcpy((unsigned char *)dst + n * r->rec, r->buf + (size_t)((t + n) & (r->cap - 1)) * r->rec, r->rec);
    atomic_store_explicit(&r->tail, t + n, memory_order_release);
    return n;
}
