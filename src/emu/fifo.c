/* fifo.c - the FIFO of one read data stream, in the card's "DDR".
 *
 * The store is a ring in address space reserved with MAP_NORESERVE: pages are
 * committed only when written, so a 2 GiB FIFO costs nothing until the host
 * falls behind. A ring whose reader keeps up would still touch every page as
 * its write position goes round, so consume() moves the few bytes in flight
 * back to the start once the read position is far in and the FIFO is nearly
 * empty (the copy is at most 1/32 of what was consumed meanwhile), and gives
 * pages above the low region back after a backlog drained - except in the
 * GPU stream's FIFO, whose pages the DMA engine may have page-locked for the
 * GPU's copy engine (a page given back would leave the GPU reading the old
 * one). The card lock
 * guards the indices; payload is written with the lock held and read
 * without it, by the single consumer, from the region [rd, rd + fill). */
#include <sys/mman.h>
#include <string.h>
#include "card.h"

#define RECENTRE_AT (32u << 20) /* read position past which the ring restarts at 0 */
#define KEEP_LOW (64u << 20)    /* committed pages kept after a backlog drained */

int emu_fifo_init(struct emu_fifo *f, size_t cap)
{
    memset(f, 0, sizeof *f);
    void *p = mmap(NULL, cap, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED)
        return ONI_EBADALLOC;
    f->base = p;
    f->cap = cap;
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&f->cond, &ca);
    pthread_condattr_destroy(&ca);
    return 0;
}

void emu_fifo_fini(struct emu_fifo *f)
{
    if (f->base)
        munmap(f->base, f->cap);
    pthread_cond_destroy(&f->cond);
    f->base = NULL;
}

uint8_t *emu_fifo_reserve(struct emu_fifo *f, size_t n, uint8_t *scratch)
{
    if (f->cap - f->fill < n)
        return NULL;
    return f->cap - f->wr >= n ? f->base + f->wr : scratch;
}

void emu_fifo_commit(struct emu_fifo *f, const uint8_t *p, size_t n)
{
    size_t first = f->cap - f->wr;
    if (p != f->base + f->wr) { /* wrapped frame, staged in scratch */
        memcpy(f->base + f->wr, p, first);
        memcpy(f->base, p + first, n - first);
    }
    f->wr += n;
    if (f->wr >= f->cap)
        f->wr -= f->cap;
    if (f->wr > f->hiwater || f->wr < n)
        f->hiwater = f->wr < n ? f->cap : f->wr;
    f->fill += n;
    f->frames++;
    f->bytes += n;
}

void emu_fifo_spans(const struct emu_fifo *f, size_t n, struct emu_span sp[2])
{
    size_t first = f->cap - f->rd;
    sp[0].p = f->base + f->rd;
    sp[0].n = n < first ? n : first;
    sp[1].p = f->base;
    sp[1].n = n - sp[0].n;
}

void emu_fifo_consume(struct emu_fifo *f, size_t n)
{
    f->rd += n;
    if (f->rd >= f->cap)
        f->rd -= f->cap;
    f->fill -= n;
    if (f->rd >= RECENTRE_AT && f->rd + f->fill <= f->cap && f->fill * 32 <= f->rd) {
        memmove(f->base, f->base + f->rd, f->fill);
        f->recentres++;
        f->moved += f->fill;
        f->rd = 0;
        f->wr = f->fill;
        if (!f->keep_pages && f->hiwater > KEEP_LOW && f->fill <= KEEP_LOW) {
            madvise(f->base + KEEP_LOW, f->hiwater - KEEP_LOW, MADV_DONTNEED);
            f->hiwater = KEEP_LOW;
            f->trims++;
        }
    }
}

void emu_fifo_flush(struct emu_fifo *f)
{
    /* A DMA copy may be reading the held bytes long after the flush (a GPU
     * copy that outlived its wait): they stay counted in fill, so the
     * generator cannot write over them, and their reader drops them. */
    f->wr = f->rd + f->held;
    if (f->wr >= f->cap)
        f->wr -= f->cap;
    f->fill = f->held;
    f->epoch++;
}
