/* emu.h - the emulated ONIX host card. This is the hardware boundary,
 * together with the card's DMA engine (dma.h): the emu driver calls only the
 * functions of these two headers;
 * nothing above the drivers includes either.
 *
 * The card behaves like the ONIX FPGA core of thesis figures 2.3 and 3.4: a
 * device table on hubs, register files, an acquisition clock, a round-robin
 * data-input multiplexer, a FIFO in bounded "DDR" per data stream with counted
 * overflow, a signal stream of COBS packets, a write stream demultiplexed to
 * output devices, and a modelled PCIe link. */
#ifndef EMU_H
#define EMU_H

#include <stddef.h>
#include <stdint.h>
#include "onidriver.h"
#include "onigpu.h"
#include "oniemu.h"

struct emu_card;

enum emu_stream {
    EMU_STREAM_DATA = 0,   /* default read data stream */
    EMU_STREAM_SIGNAL = 1, /* signal stream (COBS packets) */
    EMU_STREAM_GPU = 2,    /* GPU read data stream (devices routed to the GPU) */
    EMU_STREAM_WRITE = 3,  /* default write stream */
    EMU_STREAM_GPU_WRITE = 4
};

/* Create a card from a spec string (oniemu.h; NULL = defaults). Returns 0 or an
 * ONI error (ONI_EINVALARG with a message in err for a bad spec). */
int emu_card_create(const char *spec, struct emu_card **out, char *err, size_t err_cap);
/* Stop the card's generator thread and free the card (NULL ok); no call on it may run. */
void emu_card_destroy(struct emu_card *card);

/* ONI configuration registers, with the semantics of the driver ABI
 * (writing TRIG performs a register access and queues the ACK/NACK packet;
 * writing RESET queues DEVICETABLEACK + DEVICEINST packets; RUNNING starts and
 * stops acquisition). */
int emu_card_read_config(struct emu_card *card, oni_config_t reg, uint32_t *value);
int emu_card_write_config(struct emu_card *card, oni_config_t reg, uint32_t value);

/* Read exactly n bytes of a read stream into dst (host memory), waiting up to
 * timeout_ms; the PCIe link model is applied. Returns n, ONI_ETIMEOUT, or an
 * error. The signal stream may return fewer than n bytes (at least 1).
 * One reader per data stream at a time (another gets ONI_EBUSY); n above
 * emu_card_read_max can never be satisfied and is ONI_EINVALARG. */
int emu_card_read(struct emu_card *card, enum emu_stream s, void *dst, size_t n, uint32_t timeout_ms);

/* The same, reading ahead: wait for n bytes as emu_card_read does, then take
 * all the stream holds, up to most (>= n). Returns the bytes read (n..most)
 * or an error. A flush between the call and the data cannot make it wait for
 * more than n. */
int emu_card_read_some(struct emu_card *card, enum emu_stream s, void *dst, size_t n, size_t most,
                       uint32_t timeout_ms);

/* The most bytes one read or peek of data stream s can wait for: whole frames
 * fill its FIFO only to within the largest enabled frame routed there (the
 * FIFO's capacity when none is). 0 for a bad argument. */
size_t emu_card_read_max(struct emu_card *card, enum emu_stream s);

/* Write n bytes of write frames to a write stream; malformed frames are
 * rejected with ONI_EBADFRAME and counted. In real time the card first
 * generates every frame due before the write arrives; when it is so far
 * behind (a starved machine) that it cannot within timeout_ms, nothing is
 * delivered and the write is ONI_ETIMEOUT. Returns n or an error. */
int emu_card_write(struct emu_card *card, enum emu_stream s, const void *src, size_t n, uint32_t timeout_ms);

/* Zero-copy access to a read stream's FIFO, for the card's DMA engine (src/emu/dma*):
 * wait up to timeout_ms until n bytes (at most emu_card_read_max) are there,
 * then return them as up to two contiguous spans (the FIFO is a ring). The
 * stream stays held (another
 * reader gets ONI_EBUSY) until emu_card_fifo_consume, which drops the first n
 * bytes, or with n = 0 only lets go (n above the bytes held: ONI_EINVALARG, and
 * it lets go). A flush (RESET, a new start) keeps spans held across it out of
 * the card's way; their consume drops them all, and the stream starts over. */
struct emu_span {
    const uint8_t *p;
    size_t n;
};
int emu_card_fifo_peek(struct emu_card *card, enum emu_stream s, size_t n, struct emu_span span[2], uint32_t timeout_ms);
int emu_card_fifo_consume(struct emu_card *card, enum emu_stream s, size_t n);

/* How many times the card has emptied its default-stream FIFO (a RESET,
 * acquisition starting or stopping; the GPU stream's FIFO is emptied by the
 * first two only). */
uint64_t emu_card_flushes(struct emu_card *card);

/* Wait as the link would for a transfer of n bytes that really took spent_ns. */
void emu_card_link_delay(struct emu_card *card, size_t n, uint64_t spent_ns);

/* FIFO fill and drop counters, and malformed write frames rejected. */
void emu_card_stats(struct emu_card *card, onigpu_stream_stats_t *st);
/* Link preset in use. */
void emu_card_link(struct emu_card *card, oniemu_link_t *link);
/* How far the generator has fallen behind real time (oniemu.h). */
void emu_card_lag(struct emu_card *card, oniemu_lag_t *lag);
/* 1 if the card runs in fast mode (mode=fast), 0 in real time. */
int emu_card_fast(const struct emu_card *card);
/* What the card's firmware has: EMU_FEAT_* bits. */
enum { EMU_FEAT_FAST = 1, EMU_FEAT_GPUSTREAM = 2 };
uint32_t emu_card_features(const struct emu_card *card);
/* Append ground-truth spikes to path as they are generated (NULL stops). */
int emu_card_set_truth_file(struct emu_card *card, const char *path);

#endif
