/* gpu.h - onigpu's small GPU helper API (in the spirit of gdrcopy): tell what
 * a pointer is, allocate, register, copy with a copy engine, write completion
 * words from a stream, wait with a deadline.
 *
 * Built with CUDA (gpu_cuda.c) it drives the CUDA runtime and driver APIs on
 * device 0; built without (gpu_nocuda.c) every call that needs a GPU answers
 * ONI_ENOGPU and gpu_query() reports every pointer as plain host memory.
 * Errors are ONI codes; gpu_error() holds the last CUDA message of the calling
 * thread for readable reports. All functions are thread-safe; a gpu_stream and
 * a gpu_event are used by one thread at a time, except that several threads
 * may wait on one stream (gpu_stream_wait). */
#ifndef ONIGPU_GPU_H
#define ONIGPU_GPU_H

#include <stddef.h>
#include <stdint.h>

/* What a pointer points to. */
enum gpu_kind {
    GPU_KIND_HOST = 0,    /* host memory unknown to CUDA (pageable) */
    GPU_KIND_HOST_PINNED, /* page-locked host memory (cudaMallocHost / cudaHostRegister) */
    GPU_KIND_DEVICE,      /* device memory (cudaMalloc) */
    GPU_KIND_MANAGED      /* managed memory (cudaMallocManaged) */
};

/* The allocation a pointer belongs to. base/len cover the whole allocation
 * (or registration) for CUDA-known memory and are NULL/0 for GPU_KIND_HOST.
 * buffer_id is CUDA's process-wide unique id of the allocation: a buffer that
 * was freed and reallocated at the same address gets a new one. */
struct gpu_ptr_info {
    enum gpu_kind kind;
    int device;
    void *base;
    size_t len;
    uint64_t buffer_id;
};

struct gpu_stream;
struct gpu_event;

/* The deadline of the waits the caller cannot give one (gpu_copy, gpu_memset,
 * gpu_stream_destroy): only a stuck GPU takes that long. */
#define GPU_SYNC_TIMEOUT_MS 2000

/* 1 when a CUDA device can be used; else 0 and, if why != NULL, the reason
 * ("built without CUDA", "no CUDA device: ...") in why. Cheap after the first call. */
int gpu_available(char *why, size_t why_cap);

/* Name of device 0 ("NVIDIA H100 80GB HBM3") into name; ONI_ENOGPU without one. */
int gpu_name(char *name, size_t cap);

/* The last CUDA error message of the calling thread ("" if none). */
const char *gpu_error(void);

/* Describe p. Returns 0 (host memory that CUDA does not know is kind
 * GPU_KIND_HOST, not an error; without a usable CUDA device every pointer is
 * GPU_KIND_HOST) or ONI_EINVALARG for info == NULL. */
int gpu_query(const void *p, struct gpu_ptr_info *info);
/* The CUDA allocation p lies in, as an id unique in the process and never
 * reused (*id = 0: memory CUDA does not know, e.g. freed). One attribute, so
 * cheaper than gpu_query: for checking on every transfer that a pinned
 * buffer is still the allocation it was. 0, or ONI_EINVALARG for a NULL id. */
int gpu_buffer_id(const void *p, unsigned long long *id);

/* "Pin" device memory for a DMA engine, as GPUDirect RDMA requires: look up
 * the allocation of p (range, buffer id) and turn on synchronous memory
 * operations for it (CU_POINTER_ATTRIBUTE_SYNC_MEMOPS). Returns 0,
 * ONI_EINVALARG if p is not device memory, or ONI_ENOGPU. */
int gpu_pin_device(const void *p, struct gpu_ptr_info *info);

/* Device memory: allocate n bytes into *p (ONI_EBADALLOC, ONI_ENOGPU) / free (NULL ok). */
int gpu_alloc(void **p, size_t n);
void gpu_free(void *p);

/* Sharing device memory with another process (CUDA IPC). A handle names a
 * whole allocation; export the allocation's base (gpu_ptr_info.base). */
#define GPU_IPC_HANDLE_SIZE 64

/* Handle of the device allocation that starts at base, for gpu_ipc_open in
 * another process. Returns 0, ONI_EINVALARG (not the base of device memory)
 * or ONI_ENOGPU. */
int gpu_ipc_export(const void *base, uint8_t handle[GPU_IPC_HANDLE_SIZE]);

/* Map an allocation exported by another process: *p = its base in this
 * process. Returns 0, ONI_EINVALARG (the handle cannot be opened: not a
 * handle, its allocation is gone, or it was exported by this process) or
 * ONI_ENOGPU. Undo with gpu_ipc_close. */
int gpu_ipc_open(const uint8_t handle[GPU_IPC_HANDLE_SIZE], void **p);
/* Unmap what gpu_ipc_open mapped at p: 0, ONI_EINVALARG (NULL, or not such a
 * mapping) or ONI_ENOGPU. */
int gpu_ipc_close(void *p);

/* Page-locked, device-mapped host memory: allocate n bytes into *p (ONI_EINVALARG,
 * ONI_EBADALLOC, ONI_ENOGPU) / free (NULL ok). */
int gpu_host_alloc(void **p, size_t n);
void gpu_host_free(void *p);

/* Page-lock n bytes of existing host memory at p (and map it for the device)
 * / undo it. ONI_EPINNED if already registered, ONI_ENOTPINNED on unregister
 * of memory that is not, ONI_EINVALARG for other refusals. */
int gpu_host_register(void *p, size_t n);
int gpu_host_unregister(void *p);

/* A non-blocking stream of GPU work (copies, word writes). Destroy waits at
 * most GPU_SYNC_TIMEOUT_MS for queued work, then releases the stream (CUDA frees it once
 * the work is done). Create: 0, ONI_EINVALARG (NULL), ONI_EBADALLOC or ONI_ENOGPU. */
int gpu_stream_create(struct gpu_stream **s);
void gpu_stream_destroy(struct gpu_stream *s);

/* Queue a copy of n bytes between any two of host/pinned/device memory (0 bytes: nothing).
 * 0, ONI_EINVALARG (a NULL argument, or CUDA refused the copy), ONI_ENOGPU. */
int gpu_copy_async(struct gpu_stream *s, void *dst, const void *src, size_t n);

/* Queue a 32-bit write of value to word once all earlier work in s is done
 * (cuStreamWriteValue32). word must be device memory or page-locked host memory.
 * 0, ONI_EINVALARG (a NULL argument, or CUDA refused it), ONI_ENOGPU. The same for the wait below. */
int gpu_write_word_async(struct gpu_stream *s, volatile uint32_t *word, uint32_t value);

/* Queue a wait: later work in s starts only once the 32-bit word at word has
 * reached value (wrap-safe: (int32_t)(*word - value) >= 0; cuStreamWaitValue32
 * GEQ). word: device memory or page-locked host memory. Bound how many such
 * waits are queued ahead of a host writer: a full stream queue blocks. */
int gpu_wait_word_async(struct gpu_stream *s, const volatile uint32_t *word, uint32_t value);

/* Wait until all work queued in s is done, at most timeout_ms (0 = only check).
 * Spins, for the lowest latency, on a page-locked word that the stream writes
 * behind the work (cudaStreamQuery only now and then, for errors). Several
 * threads may wait on one stream. Returns 0, ONI_ETIMEOUT, or an error of the
 * queued work. */
int gpu_stream_wait(struct gpu_stream *s, uint32_t timeout_ms);

/* Events: record the point reached in a stream, wait for it with a deadline.
 * Errors as for streams; the wait: 0, ONI_ETIMEOUT, or an error of the work before it. */
int gpu_event_create(struct gpu_event **e);
void gpu_event_destroy(struct gpu_event *e);
int gpu_event_record(struct gpu_event *e, struct gpu_stream *s);
int gpu_event_wait(struct gpu_event *e, uint32_t timeout_ms);

/* Synchronous helpers for setup and tests: copy n bytes (any direction); fill device memory.
 * Both return once the bytes are in place, visible to work on any stream, or
 * ONI_ETIMEOUT after GPU_SYNC_TIMEOUT_MS (the GPU is stuck, e.g. behind a
 * kernel that never ends). */
int gpu_copy(void *dst, const void *src, size_t n);
int gpu_memset(void *p, int value, size_t n);

#endif
