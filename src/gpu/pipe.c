/* pipe.c - chunked two-stage transfer schedule (see pipe.h). */
#include "pipe.h"
#include "onidefs.h"

#define PIPE_MAX_SLOTS 16

struct pipe_run {
    const struct gpu_pipe_ops *o;
    size_t total, chunk;
    int nslots;
    unsigned char a_busy[PIPE_MAX_SLOTS], b_busy[PIPE_MAX_SLOTS];
};

static size_t chunk_len(const struct pipe_run *r, size_t k)
{
    size_t off = k * r->chunk;
    return r->total - off < r->chunk ? r->total - off : r->chunk;
}

static int wait_a(struct pipe_run *r, int s)
{
    if (!r->a_busy[s])
        return 0;
    r->a_busy[s] = 0;
    return r->o->wait_a ? r->o->wait_a(r->o->ctx, s) : 0;
}

static int wait_b(struct pipe_run *r, int s)
{
    if (!r->b_busy[s])
        return 0;
    r->b_busy[s] = 0;
    return r->o->wait_b ? r->o->wait_b(r->o->ctx, s) : 0;
}

/* Wait for everything still in flight; keep the first error. */
static int drain(struct pipe_run *r, int rc)
{
    for (int s = 0; s < r->nslots; s++) {
        int a = wait_a(r, s), b = wait_b(r, s);
        if (!rc)
            rc = a ? a : b;
    }
    return rc;
}

int gpu_pipe_run(size_t total, size_t chunk, int nslots, const struct gpu_pipe_ops *ops)
{
    if (!ops || !ops->start_a || !ops->start_b || !chunk || nslots < 1 || nslots > PIPE_MAX_SLOTS)
        return ONI_EINVALARG;
    struct pipe_run r = {.o = ops, .total = total, .chunk = chunk, .nslots = nslots};
    size_t nchunks = total / chunk + (total % chunk != 0);
    /* With an asynchronous stage A, chunk k+1 is started before chunk k is
     * emptied; with a synchronous one, emptying k first lets B(k) overlap A(k+1). */
    size_t ahead = ops->wait_a && nslots > 1 ? 1 : 0, issued = 0;
    int rc = 0;
    for (size_t k = 0; k < nchunks && !rc; k++) {
        while (!rc && issued < nchunks && issued <= k + ahead) {
            int s = (int)(issued % (size_t)nslots);
            rc = wait_b(&r, s); /* the slot is free once its previous B is done */
            if (!rc)
                rc = ops->start_a(ops->ctx, s, issued * chunk, chunk_len(&r, issued));
            if (!rc)
                r.a_busy[s] = 1;
            issued++;
        }
        if (rc)
            break;
        int s = (int)(k % (size_t)nslots);
        rc = wait_a(&r, s);
        if (!rc)
            rc = ops->start_b(ops->ctx, s, k * chunk, chunk_len(&r, k));
        if (!rc)
            r.b_busy[s] = 1;
    }
    return drain(&r, rc);
}
