/* gpu_jit_cuda.c - a chain of stages compiled for the GPU (gpu_jit.h):
 * the chain's device code (chain_device.cuh), a dispatch generated for the
 * chain, and each stage's gpu_source, each compiled by NVRTC to LTO IR and
 * linked by nvJitLink into one cubin (NVRTC and nvJitLink docs:
 * docs.nvidia.com/cuda/nvrtc, docs.nvidia.com/cuda/nvjitlink). Needs no GPU:
 * the architecture is given. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "oni.h"
#include "loop/gpu_jit.h"
#include "loop/stage.h"

#if ONIGPU_HAVE_JIT
#include <nvJitLink.h>
#include <nvrtc.h>

/* The device sources and the headers they include, embedded at build time
 * (tools/embed.cmake). */
extern const char loop_src_chain_device[], loop_src_onigpu_stage_h[], loop_src_kernels_h[], loop_src_gpu_chain_h[];

/* The built-in stages' device functions (chain_device.cuh); detect runs on
 * the GPU only inside the built-in chain's fused kernel. */
static const char *builtin_entry(const struct onigpu_stage *d)
{
    if (d == &loop_stage_filter)
        return "loop_gpu_filter";
    if (d == &loop_stage_reference)
        return "loop_gpu_reference";
    if (d == &loop_stage_decide)
        return "loop_gpu_decide";
    return NULL;
}

static int is_builtin(const struct onigpu_stage *d)
{
    return d == &loop_stage_filter || d == &loop_stage_reference || d == &loop_stage_detect ||
           d == &loop_stage_decide;
}

/* Append to a growing text. */
struct text {
    char *s;
    size_t len, cap;
    int bad;
};

static void put(struct text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(struct text *t, const char *fmt, ...)
{
    va_list ap;
    for (int tries = 0; tries < 2 && !t->bad; tries++) {
        va_start(ap, fmt);
        int n = vsnprintf(t->s ? t->s + t->len : NULL, t->s ? t->cap - t->len : 0, fmt, ap);
        va_end(ap);
        if (n < 0) {
            t->bad = 1;
            return;
        }
        if (t->s && t->len + (size_t)n < t->cap) {
            t->len += (size_t)n;
            return;
        }
        size_t cap = (t->cap + (size_t)n + 1) * 2;
        char *s = realloc(t->s, cap);
        if (!s) {
            t->bad = 1;
            return;
        }
        t->s = s;
        t->cap = cap;
    }
}

/* The dispatch: every stage's entry in order, the frames decoded first
 * where the chain says, the first error with its stage. */
static int dispatch(const struct loop_chain *ch, struct text *t, char *why, size_t cap)
{
    uint32_t n = loop_chain_count(ch);
    put(t, "#include \"onigpu_stage.h\"\n"
           "extern \"C\" __device__ int loop_gpu_decode(struct onigpu_block *b);\n"
           "extern \"C\" __device__ void loop_gpu_settle(struct onigpu_block *b, int sort);\n");
    for (uint32_t i = 0; i < n; i++) {
        const struct onigpu_stage *d = loop_chain_stage(ch, i, NULL, NULL);
        const char *e = is_builtin(d) ? builtin_entry(d) : d->gpu_source || d->gpu_image ? d->gpu_entry : NULL;
        if (!e || !e[0]) {
            snprintf(why, cap, "stage %u (%s) has no GPU implementation%s", i + 1, d->name,
                     d == &loop_stage_detect ? " of its own (detect runs on the GPU in the built-in chain only)"
                     : " (gpu_source or gpu_image, and gpu_entry): run the chain on the cpu backend");
            return ONI_EINVALARG;
        }
        put(t, "extern \"C\" __device__ int %s(void *state, struct onigpu_block *b);\n", e);
    }
    put(t, "extern \"C\" __device__ int loop_gpu_chain_run(void *const *s, struct onigpu_block *b)\n{\n"
           "    __shared__ int code;\n    int r;\n");
    for (uint32_t i = 0; i < n; i++) {
        int decode = 0;
        const struct onigpu_stage *d = loop_chain_stage(ch, i, NULL, &decode);
        const char *e = is_builtin(d) ? builtin_entry(d) : d->gpu_entry;
        if (decode)
            put(t, "    loop_gpu_decode(b);\n    __syncthreads();\n");
        put(t, "    if (threadIdx.x == 0)\n        code = 0;\n    __syncthreads();\n"
               "    r = %s(s[%u], b);\n    if (r)\n        atomicCAS(&code, 0, r);\n    __syncthreads();\n"
               "    loop_gpu_settle(b, %d);\n    if (code)\n        return %u << 16 | ((-code) & 0xFFFF);\n",
            e, i, d->output == ONIGPU_DATA_SPIKES, i + 1);
    }
    put(t, "    return 0;\n}\n");
    if (t->bad) {
        snprintf(why, cap, "no memory for the chain's dispatch");
        return ONI_EBADALLOC;
    }
    return 0;
}

/* One source to LTO IR (*ir, malloc'd). 0, or ONI_EINVALARG with the
 * compiler's log in why. */
static int compile(const char *src, const char *name, int arch, char **ir, size_t *len, char *why, size_t cap)
{
    static const char *const hnames[] = {"onigpu_stage.h", "loop/kernels.h", "loop/gpu_chain.h", "stddef.h",
                                         "stdint.h"};
    const char *hsrc[] = {loop_src_onigpu_stage_h, loop_src_kernels_h, loop_src_gpu_chain_h, "", ""};
    char archopt[32];
    snprintf(archopt, sizeof archopt, "-arch=compute_%d", arch);
    const char *opts[] = {archopt, "-dlto", "-rdc=true", "-std=c++17"};
    nvrtcProgram prog;
    nvrtcResult r = nvrtcCreateProgram(&prog, src, name, 5, hsrc, hnames);
    if (r != NVRTC_SUCCESS) {
        snprintf(why, cap, "%s: NVRTC: %s", name, nvrtcGetErrorString(r));
        return ONI_EINVALARG;
    }
    r = nvrtcCompileProgram(prog, 4, opts);
    if (r != NVRTC_SUCCESS) {
        size_t lsz = 0;
        nvrtcGetProgramLogSize(prog, &lsz);
        char *log = malloc(lsz + 1);
        if (log && nvrtcGetProgramLog(prog, log) == NVRTC_SUCCESS) {
            log[lsz] = 0;
            for (size_t i = lsz; i > 0 && (log[i - 1] == '\n' || log[i - 1] == 0); i--)
                log[i - 1] = 0;
        }
        snprintf(why, cap, "%s does not compile (NVRTC): %s", name, log ? log : nvrtcGetErrorString(r));
        free(log);
        nvrtcDestroyProgram(&prog);
        return ONI_EINVALARG;
    }
    *ir = NULL;
    r = nvrtcGetLTOIRSize(prog, len);
    if (r == NVRTC_SUCCESS && (*ir = malloc(*len)) != NULL)
        r = nvrtcGetLTOIR(prog, *ir);
    nvrtcDestroyProgram(&prog);
    if (r != NVRTC_SUCCESS || !*ir) {
        free(*ir);
        *ir = NULL;
        snprintf(why, cap, "%s: no LTO IR from NVRTC: %s", name, nvrtcGetErrorString(r));
        return ONI_EINVALARG;
    }
    return 0;
}

static void link_log(nvJitLinkHandle h, const char *what, nvJitLinkResult r, char *why, size_t cap)
{
    size_t lsz = 0;
    char *log = NULL;
    if (nvJitLinkGetErrorLogSize(h, &lsz) == NVJITLINK_SUCCESS && lsz && (log = malloc(lsz + 1)) != NULL &&
        nvJitLinkGetErrorLog(h, log) == NVJITLINK_SUCCESS) {
        log[lsz] = 0;
        for (size_t i = lsz; i > 0 && (log[i - 1] == '\n' || log[i - 1] == 0); i--)
            log[i - 1] = 0;
    }
    snprintf(why, cap, "%s (nvJitLink error %d)%s%s", what, (int)r, log && log[0] ? ": " : "", log ? log : "");
    free(log);
}

int loop_gpu_jit(const struct loop_chain *ch, int arch, void **image, size_t *len, char *why, size_t cap)
{
    *image = NULL;
    *len = 0;
    struct text disp = {0};
    int rc = dispatch(ch, &disp, why, cap);
    uint32_t n = loop_chain_count(ch);
    char *ir[LOOP_MAXSTAGES + 2] = {0};
    size_t irlen[LOOP_MAXSTAGES + 2] = {0};
    char names[LOOP_MAXSTAGES + 2][64];
    uint32_t nir = 0;
    if (!rc) {
        snprintf(names[nir], sizeof names[nir], "chain_device.cu");
        rc = compile(loop_src_chain_device, names[nir], arch, &ir[nir], &irlen[nir], why, cap);
        nir++;
    }
    if (!rc) {
        snprintf(names[nir], sizeof names[nir], "chain_dispatch.cu");
        rc = compile(disp.s, names[nir], arch, &ir[nir], &irlen[nir], why, cap);
        nir++;
    }
    const void *lib[LOOP_MAXSTAGES] = {0}; /* prebuilt device libraries, linked as they are */
    size_t image_bytes[LOOP_MAXSTAGES] = {0};
    char image_name[LOOP_MAXSTAGES][64];
    uint32_t nimage = 0;
    for (uint32_t i = 0; i < n && !rc; i++) {
        const struct onigpu_stage *d = loop_chain_stage(ch, i, NULL, NULL);
        if (is_builtin(d))
            continue;
        if (d->gpu_image) {
            snprintf(image_name[nimage], sizeof image_name[nimage], "stage %u (%.40s)", i + 1, d->name);
            lib[nimage] = d->gpu_image;
            image_bytes[nimage++] = d->gpu_image_bytes;
            continue;
        }
        snprintf(names[nir], sizeof names[nir], "stage %u (%.40s)", i + 1, d->name);
        /* every stage's source sees the stage API (its own include of it is
         * kept out by the guard); the log's lines are the source's own */
        struct text src = {0};
        put(&src, "#include \"onigpu_stage.h\"\n#line 1\n%s", d->gpu_source);
        if (src.bad) {
            snprintf(why, cap, "no memory for the source of %s", names[nir]);
            rc = ONI_EBADALLOC;
        } else {
            rc = compile(src.s, names[nir], arch, &ir[nir], &irlen[nir], why, cap);
        }
        free(src.s);
        nir++;
    }
    nvJitLinkHandle h = NULL;
    if (!rc) {
        char archopt[32];
        snprintf(archopt, sizeof archopt, "-arch=sm_%d", arch);
        const char *opts[] = {archopt, "-lto"};
        nvJitLinkResult r = nvJitLinkCreate(&h, 2, opts);
        if (r != NVJITLINK_SUCCESS) {
            snprintf(why, cap, "nvJitLink: cannot start a link (error %d)", (int)r);
            rc = ONI_EINVALARG;
            h = NULL;
        }
        for (uint32_t i = 0; i < nir && !rc; i++)
            if ((r = nvJitLinkAddData(h, NVJITLINK_INPUT_LTOIR, ir[i], irlen[i], names[i])) != NVJITLINK_SUCCESS) {
                link_log(h, names[i], r, why, cap);
                rc = ONI_EINVALARG;
            }
        for (uint32_t i = 0; i < nimage && !rc; i++)
            if ((r = nvJitLinkAddData(h, NVJITLINK_INPUT_ANY, lib[i], image_bytes[i], image_name[i])) !=
                NVJITLINK_SUCCESS) {
                link_log(h, image_name[i], r, why, cap);
                rc = ONI_EINVALARG;
            }
        if (!rc && (r = nvJitLinkComplete(h)) != NVJITLINK_SUCCESS) {
            link_log(h, "the chain's GPU code does not link", r, why, cap);
            rc = ONI_EINVALARG;
        }
        size_t sz = 0;
        if (!rc && (r = nvJitLinkGetLinkedCubinSize(h, &sz)) == NVJITLINK_SUCCESS && (*image = malloc(sz)) != NULL &&
            (r = nvJitLinkGetLinkedCubin(h, *image)) == NVJITLINK_SUCCESS) {
            *len = sz;
        } else if (!rc) {
            free(*image);
            *image = NULL;
            link_log(h, "no linked image", r, why, cap);
            rc = ONI_EINVALARG;
        }
    }
    if (h)
        nvJitLinkDestroy(&h);
    for (uint32_t i = 0; i < nir; i++)
        free(ir[i]);
    free(disp.s);
    return rc;
}

#else

int loop_gpu_jit(const struct loop_chain *ch, int arch, void **image, size_t *len, char *why, size_t cap)
{
    *image = NULL;
    *len = 0;
    snprintf(why, cap, "GPU stages need NVRTC and nvJitLink, which this build was made without");
    return ONI_EUNIMPL;
}

#endif
