/* cudrv_cuda.c - the few CUDA driver API functions onigpu uses, resolved at run
 * time through the runtime (cudaGetDriverEntryPointByVersion) instead of
 * linking libcuda.so.1. The NVIDIA driver's library exists only where a GPU
 * driver is installed; linked directly, every onigpu binary (CLI, tests) would
 * fail to start on machines without one, CI included. With this shim they
 * start, and CUDA reports "no device" through the runtime instead.
 *
 * Each function has the exact name and signature cuda.h declares (the header's
 * macros map e.g. cuStreamWriteValue32 to cuStreamWriteValue32_v2), so code in
 * src/ calls the driver API as usual. A function the driver cannot provide
 * answers CUDA_ERROR_NOT_FOUND. Add a wrapper here before using another
 * driver API function. */
#include <pthread.h>
#include <stddef.h>
#include <cuda.h>
#include <cuda_runtime.h>

static void *resolve(const char *name)
{
    void *fn = NULL;
    enum cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
    if (cudaGetDriverEntryPointByVersion(name, &fn, CUDART_VERSION, cudaEnableDefault, &q) != cudaSuccess ||
        q != cudaDriverEntryPointSuccess)
        return NULL;
    return fn;
}

/* One cached pointer per function; resolving twice races harmlessly. */
#define DRIVER_FN(var, type, name)                                                     \
    static type var;                                                                   \
    if (!__atomic_load_n(&var, __ATOMIC_ACQUIRE))                                      \
        __atomic_store_n(&var, (type)resolve(name), __ATOMIC_RELEASE);                 \
    if (!var)                                                                          \
        return CUDA_ERROR_NOT_FOUND

typedef CUresult (*write32_fn)(CUstream, CUdeviceptr, cuuint32_t, unsigned int);
typedef CUresult (*getattrs_fn)(unsigned int, CUpointer_attribute *, void **, CUdeviceptr);
typedef CUresult (*setattr_fn)(const void *, CUpointer_attribute, CUdeviceptr);
typedef CUresult (*getattr_fn)(void *, CUpointer_attribute, CUdeviceptr);
typedef CUresult (*errstr_fn)(CUresult, const char **);

CUresult CUDAAPI cuStreamWriteValue32(CUstream stream, CUdeviceptr addr, cuuint32_t value, unsigned int flags)
{
    DRIVER_FN(fn, write32_fn, "cuStreamWriteValue32");
    return fn(stream, addr, value, flags);
}

CUresult CUDAAPI cuStreamWaitValue32(CUstream stream, CUdeviceptr addr, cuuint32_t value, unsigned int flags)
{
    DRIVER_FN(fn, write32_fn, "cuStreamWaitValue32");
    return fn(stream, addr, value, flags);
}

CUresult CUDAAPI cuPointerGetAttributes(unsigned int n, CUpointer_attribute *attrs, void **data, CUdeviceptr ptr)
{
    DRIVER_FN(fn, getattrs_fn, "cuPointerGetAttributes");
    return fn(n, attrs, data, ptr);
}

CUresult CUDAAPI cuPointerGetAttribute(void *data, CUpointer_attribute attr, CUdeviceptr ptr)
{
    DRIVER_FN(fn, getattr_fn, "cuPointerGetAttribute");
    return fn(data, attr, ptr);
}

CUresult CUDAAPI cuPointerSetAttribute(const void *value, CUpointer_attribute attr, CUdeviceptr ptr)
{
    DRIVER_FN(fn, setattr_fn, "cuPointerSetAttribute");
    return fn(value, attr, ptr);
}

CUresult CUDAAPI cuGetErrorString(CUresult error, const char **str)
{
    DRIVER_FN(fn, errstr_fn, "cuGetErrorString");
    return fn(error, str);
}

/* Modules: a cubin linked at run time (src/loop/gpu_jit.h), its kernel
 * launched once (the loop's GPU chain). */
typedef CUresult (*modload_fn)(CUmodule *, const void *);
typedef CUresult (*modfn_fn)(CUfunction *, CUmodule, const char *);
typedef CUresult (*modunload_fn)(CUmodule);
typedef CUresult (*launch_fn)(CUfunction, unsigned int, unsigned int, unsigned int, unsigned int, unsigned int,
                              unsigned int, unsigned int, CUstream, void **, void **);

CUresult CUDAAPI cuModuleLoadData(CUmodule *module, const void *image)
{
    DRIVER_FN(fn, modload_fn, "cuModuleLoadData");
    return fn(module, image);
}

CUresult CUDAAPI cuModuleGetFunction(CUfunction *hfunc, CUmodule hmod, const char *name)
{
    DRIVER_FN(fn, modfn_fn, "cuModuleGetFunction");
    return fn(hfunc, hmod, name);
}

CUresult CUDAAPI cuModuleUnload(CUmodule hmod)
{
    DRIVER_FN(fn, modunload_fn, "cuModuleUnload");
    return fn(hmod);
}

CUresult CUDAAPI cuLaunchKernel(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx,
                                unsigned int by, unsigned int bz, unsigned int shmem, CUstream s, void **params,
                                void **extra)
{
    DRIVER_FN(fn, launch_fn, "cuLaunchKernel");
    return fn(f, gx, gy, gz, bx, by, bz, shmem, s, params, extra);
}
