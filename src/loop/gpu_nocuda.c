/* gpu_nocuda.c - the GPU backends in a build without CUDA: none is available. */
#include <stdio.h>
#include "oni.h"
#include "loop/engine.h"

const struct loop_be *loop_gpu_backend(int backend)
{
    return NULL;
}

int loop_gpu_ephys_once(struct loop_ephys_state *st, const uint8_t *blk, uint32_t nframes, struct loop_ephys_out *out)
{
    return ONI_ENOGPU;
}
