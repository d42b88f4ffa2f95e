/* zipsrc.c - several sources' blocks side by side, frame by frame (source.h). */
#include <stdlib.h>
#include <string.h>
#include "loop/source.h"

int loop_zipsrc_init(struct loop_zipsrc *z, const struct loop_source *parts, const uint32_t *width, uint32_t nparts)
{
    if (!z || !parts || !width || !nparts || nparts > LOOP_ZIPSRC_MAXPARTS)
        return ONI_EINVALARG;
    memset(z, 0, sizeof *z);
    for (uint32_t k = 0; k < nparts; k++) {
        if (!parts[k].read || !width[k] || width[k] % 4)
            return ONI_EINVALARG;
        z->part[k] = parts[k];
        z->width[k] = width[k];
        z->frame += width[k];
    }
    z->nparts = nparts;
    return 0;
}

/* The parts' buffers for blocks of len bytes (once: one size for the run). */
static int zip_start(struct loop_zipsrc *z, size_t len)
{
    if (z->block)
        return z->block == len ? 0 : ONI_EBUFFERSIZE;
    if (!len || len % z->frame)
        return ONI_EBUFFERSIZE;
    size_t n = len / z->frame;
    for (uint32_t k = 0; k < z->nparts; k++)
        if (!(z->buf[k] = malloc(n * z->width[k]))) {
            loop_zipsrc_free(z);
            return ONI_EBADALLOC;
        }
    z->block = len;
    return 0;
}

static int zip_read(void *ctx, void *buf, size_t len, uint32_t timeout_ms)
{
    struct loop_zipsrc *z = ctx;
    int rc = zip_start(z, len);
    size_t n = len / z->frame;
    for (uint32_t k = 0; !rc && k < z->nparts; k++)
        rc = z->part[k].read(z->part[k].ctx, z->buf[k], n * z->width[k], timeout_ms);
    if (rc)
        return rc;
    uint8_t *out = buf;
    for (size_t i = 0; i < n; i++)
        for (uint32_t k = 0; k < z->nparts; k++) {
            memcpy(out, z->buf[k] + i * z->width[k], z->width[k]);
            out += z->width[k];
        }
    return 0;
}

static uint64_t zip_dropped(void *ctx)
{
    struct loop_zipsrc *z = ctx;
    uint64_t sum = 0;
    for (uint32_t k = 0; k < z->nparts; k++)
        sum += z->part[k].dropped ? z->part[k].dropped(z->part[k].ctx) : 0;
    return sum;
}

void loop_zipsrc_source(struct loop_zipsrc *z, struct loop_source *src)
{
    memset(src, 0, sizeof *src);
    src->ctx = z;
    src->read = zip_read;
    src->dropped = zip_dropped;
}

void loop_zipsrc_free(struct loop_zipsrc *z)
{
    if (!z)
        return;
    for (uint32_t k = 0; k < LOOP_ZIPSRC_MAXPARTS; k++) {
        free(z->buf[k]);
        z->buf[k] = NULL;
    }
    z->block = 0;
}
