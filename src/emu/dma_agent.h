/* dma_agent.h - the DMA engine's GPU-resident agent for small transfers.
 *
 * A real ONIX card's DMA engine writes into GPU memory over PCIe without any
 * host CPU call per transfer. The agent models that for small blocks: a
 * kernel of one thread block polls a descriptor ring in page-locked,
 * device-mapped host memory; the host posts a descriptor {source, destination,
 * length, completion word} with a release store and the agent copies with all
 * its threads, fences, writes the completion word after the payload, then
 * publishes the descriptor's ticket in mapped host memory. No CUDA call is
 * made per transfer. The bytes cross PCIe once (the GPU pulls them with SM
 * loads, where the card would push them).
 *
 * The kernel is persistent but bounded: it leaves after AGENT_IDLE_MS without
 * work or AGENT_LIFE_MS in all (between two descriptors) and is launched again
 * by the next post or wait, so that CUDA calls which wait for the whole device
 * (cudaFree, cudaDeviceSynchronize, lazy module loading) are delayed, never
 * stuck. Built without CUDA (dma_agent_nocuda.c) emu_agent_start answers
 * ONI_ENOGPU. Thread-safe. Used by dma.c only. */
#ifndef EMU_DMA_AGENT_H
#define EMU_DMA_AGENT_H

#include <stddef.h>
#include <stdint.h>

#define AGENT_RING 64      /* descriptors in flight */
#define AGENT_IDLE_MS 20   /* the kernel leaves after this long without work */
#define AGENT_LIFE_MS 250  /* ... or after this long in all */

struct emu_agent;

/* Allocate the ring and launch the agent on device 0. Returns 0, ONI_ENOGPU
 * (no usable GPU), ONI_EBADALLOC, or ONI_EINIT (the launch failed; gpu_error()
 * in this thread says why). */
int emu_agent_start(struct emu_agent **out);

/* Ask the kernel to stop and wait up to timeout_ms for it. Returns 0, or
 * ONI_ETIMEOUT when it did not stop (its ring memory is then leaked, never
 * freed under a running kernel). NULL-safe. */
int emu_agent_stop(struct emu_agent *a, uint32_t timeout_ms);

/* Make the kernel leave before its next descriptor; later waits fail with
 * ONI_EINIT. For failures: what is still in the ring is never run. */
void emu_agent_halt(struct emu_agent *a);

/* Device address of page-locked, device-mapped host memory p (a
 * cudaHostRegister'ed range or cudaHostAlloc'ed block): 0 and *dev set, or
 * ONI_EINVALARG when p is not mapped for the device, ONI_ENOGPU. */
int emu_agent_devptr(const void *p, void **dev);

/* Post a copy of n bytes from src to dst (device addresses: GPU memory or
 * mapped host memory). done (a device address, or NULL) gets done_seq after the
 * payload is visible: to GPU readers with host_reader 0, to the host with 1.
 * *ticket identifies the descriptor for emu_agent_wait. Waits for ring space
 * until deadline_ns (oni_now_ns clock): ONI_ETIMEOUT. ONI_EINIT when the
 * kernel could not be launched again (nothing posted). */
int emu_agent_post(struct emu_agent *a, void *dst, const void *src, size_t n, uint32_t *done, uint32_t done_seq,
                   int host_reader, uint64_t deadline_ns, uint64_t *ticket);

/* Spin until the descriptor `ticket` (and all before it) is complete, at most
 * until deadline_ns. Returns 0, ONI_ETIMEOUT or ONI_EINIT (relaunch failed). */
int emu_agent_wait(struct emu_agent *a, uint64_t ticket, uint64_t deadline_ns);

/* 1 if the descriptor `ticket` (and all before it) is complete, without
 * waiting: after a halt, whether the copy it let finish did. */
int emu_agent_done(struct emu_agent *a, uint64_t ticket);

/* Times the kernel was launched (1 after start; more after idle exits). */
uint64_t emu_agent_launches(struct emu_agent *a);

#endif
