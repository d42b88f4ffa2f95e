/* gpu_nocuda.c - gpu.h for builds without CUDA: no GPU, every pointer is host memory. */
#include <string.h>
#include "gpu.h"
#include "onidefs.h"

int gpu_available(char *why, size_t why_cap)
{
    if (why && why_cap) {
        strncpy(why, "no CUDA device: onigpu was built without CUDA", why_cap - 1);
        why[why_cap - 1] = 0;
    }
    return 0;
}

int gpu_name(char *name, size_t cap)
{
    if (name && cap)
        name[0] = 0;
    return ONI_ENOGPU;
}

const char *gpu_error(void) { return "built without CUDA"; }

int gpu_query(const void *p, struct gpu_ptr_info *info)
{
    if (!info)
        return ONI_EINVALARG;
    memset(info, 0, sizeof *info);
    return 0;
}

int gpu_buffer_id(const void *p, unsigned long long *id)
{
    (void)p;
    if (!id)
        return ONI_EINVALARG;
    *id = 0;
    return 0;
}

int gpu_pin_device(const void *p, struct gpu_ptr_info *info)
{
    if (info)
        memset(info, 0, sizeof *info);
    return ONI_ENOGPU;
}

int gpu_alloc(void **p, size_t n)
{
    if (p)
        *p = NULL;
    return ONI_ENOGPU;
}

void gpu_free(void *p) {}

int gpu_host_alloc(void **p, size_t n)
{
    if (p)
        *p = NULL;
    return ONI_ENOGPU;
}

void gpu_host_free(void *p) {}
int gpu_host_register(void *p, size_t n) { return ONI_ENOGPU; }
int gpu_host_unregister(void *p) { return ONI_ENOGPU; }

int gpu_ipc_export(const void *base, uint8_t handle[GPU_IPC_HANDLE_SIZE]) { return ONI_ENOGPU; }

int gpu_ipc_open(const uint8_t handle[GPU_IPC_HANDLE_SIZE], void **p)
{
    if (p)
        *p = NULL;
    return ONI_ENOGPU;
}

int gpu_ipc_close(void *p) { return ONI_ENOGPU; }

int gpu_stream_create(struct gpu_stream **s)
{
    if (s)
        *s = NULL;
    return ONI_ENOGPU;
}

void gpu_stream_destroy(struct gpu_stream *s) {}
int gpu_copy_async(struct gpu_stream *s, void *dst, const void *src, size_t n) { return ONI_ENOGPU; }
int gpu_write_word_async(struct gpu_stream *s, volatile uint32_t *word, uint32_t value) { return ONI_ENOGPU; }
int gpu_wait_word_async(struct gpu_stream *s, const volatile uint32_t *word, uint32_t value) { return ONI_ENOGPU; }
int gpu_stream_wait(struct gpu_stream *s, uint32_t timeout_ms) { return ONI_ENOGPU; }

int gpu_event_create(struct gpu_event **e)
{
    if (e)
        *e = NULL;
    return ONI_ENOGPU;
}

void gpu_event_destroy(struct gpu_event *e) {}
int gpu_event_record(struct gpu_event *e, struct gpu_stream *s) { return ONI_ENOGPU; }
int gpu_event_wait(struct gpu_event *e, uint32_t timeout_ms) { return ONI_ENOGPU; }
int gpu_copy(void *dst, const void *src, size_t n) { return ONI_ENOGPU; }
int gpu_memset(void *p, int value, size_t n) { return ONI_ENOGPU; }
