/* dma_agent_nocuda.c - dma_agent.h for builds without CUDA: there is no agent. */
#include "dma_agent.h"
#include "onidefs.h"

int emu_agent_start(struct emu_agent **out) { return out ? ONI_ENOGPU : ONI_EINVALARG; }

int emu_agent_stop(struct emu_agent *a, uint32_t timeout_ms) { return 0; }

void emu_agent_halt(struct emu_agent *a) {}

int emu_agent_devptr(const void *p, void **dev) { return ONI_ENOGPU; }

int emu_agent_post(struct emu_agent *a, void *dst, const void *src, size_t n, uint32_t *done, uint32_t done_seq,
                   int host_reader, uint64_t deadline_ns, uint64_t *ticket)
{
    return ONI_ENOGPU;
}

int emu_agent_wait(struct emu_agent *a, uint64_t ticket, uint64_t deadline_ns) { return ONI_ENOGPU; }

int emu_agent_done(struct emu_agent *a, uint64_t ticket) { return 0; }

uint64_t emu_agent_launches(struct emu_agent *a) { return 0; }
