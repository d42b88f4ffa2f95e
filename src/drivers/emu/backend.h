/* backend.h - the emu driver's card operations: one table, two
 * implementations. The spec string (oniemu.h) picks one at init: local.c (an
 * emu_card in this process, src/emu/emu.h) or daemon.c (the card of an
 * onix-emu process, reached over a UNIX socket and shared-memory rings,
 * emuclient.h, docs/daemon.md). emudrv.c calls only this table. */
#ifndef EMU_BACKEND_H
#define EMU_BACKEND_H

#include <stddef.h>
#include <stdint.h>
#include "emu/emu.h"
#include "gpustream/gpustream.h"

/* b is what the backend's open made. Every call returns 0 (or a byte count)
 * or an ONI error, waiting at most timeout_ms; a daemon gone gives
 * ONI_EDISCONNECTED. Safe for calls on different streams at once. */
struct emu_backend {
    /* End the session (the card is destroyed) and free b. NULL-safe. */
    void (*close)(void *b);
    /* As emu_card_read / emu_card_write; through the daemon a read may
     * return fewer than n bytes (at least 1: emuc_read). */
    int (*read)(void *b, enum emu_stream s, void *dst, size_t n, uint32_t timeout_ms);
    int (*write)(void *b, enum emu_stream s, const void *src, size_t n, uint32_t timeout_ms);
    int (*read_config)(void *b, oni_config_t reg, uint32_t *value, uint32_t timeout_ms);
    int (*write_config)(void *b, oni_config_t reg, uint32_t value, uint32_t timeout_ms);
    int (*link)(void *b, oniemu_link_t *link, uint32_t timeout_ms);
    int (*stats)(void *b, onigpu_stream_stats_t *st, uint32_t timeout_ms);
    /* The card's EMU_FEAT_* bits (emu.h): fast mode, GPU data stream. */
    int (*features)(void *b, uint32_t *bits, uint32_t timeout_ms);
    /* Ground truth to the file at path (relative: to this process's working
     * directory), or "" to stop. */
    int (*truth_file)(void *b, const char *path, uint32_t timeout_ms);
    /* The card's DMA operations for the GPU stream layer and the card
     * pointer they take (created on first call; one thread at a time). */
    int (*gpu)(void *b, const struct gpustream_dma **ops, void **card);
};

extern const struct emu_backend emu_local, emu_daemon;

/* Create a card from spec (NULL: the default card) in this process: *b for
 * emu_local. 0 or the card's error (why in err). */
int emu_local_open(const char *spec, void **b, char *err, size_t err_cap);

/* Open a session with the daemon at socket path, its card made from spec
 * ("": the daemon's own): *b for emu_daemon. Errors as emuc_open. */
int emu_daemon_open(const char *path, const char *spec, uint32_t timeout_ms, void **b, char *err, size_t err_cap);

#endif
