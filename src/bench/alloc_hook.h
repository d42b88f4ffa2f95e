/* alloc_hook.h - a counting allocator for a program that measures its own
 * heap allocations (`onigpu bench frames`, and the tests of what it and the
 * sample recorder promise). Include it in exactly one .c file of the
 * program: it defines malloc and the rest of the family, each counted with
 * one relaxed atomic add, then served by glibc, so that allocations made
 * anywhere (core, built-in or dlopen'ed drivers) are seen. Sanitizer builds
 * and other C libraries keep their own allocator: BENCH_ALLOC_HOOK is then 0
 * and bench_alloc_count() is not defined. */
#ifndef BENCH_ALLOC_HOOK_H
#define BENCH_ALLOC_HOOK_H

#include <errno.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer)
#define BENCH_NO_ALLOC_HOOK 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__) || !defined(__GLIBC__)
#define BENCH_NO_ALLOC_HOOK 1
#endif

#ifdef BENCH_NO_ALLOC_HOOK
#define BENCH_ALLOC_HOOK 0
#else
#define BENCH_ALLOC_HOOK 1

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);
extern void __libc_free(void *);

static atomic_ullong bench_heap_allocs;

static void bench_alloc_counted(void)
{
    atomic_fetch_add_explicit(&bench_heap_allocs, 1, memory_order_relaxed);
}

/* Allocations so far, by any part of the program. */
static uint64_t bench_alloc_count(void)
{
    return atomic_load_explicit(&bench_heap_allocs, memory_order_relaxed);
}

void *malloc(size_t n)
{
    bench_alloc_counted();
    return __libc_malloc(n);
}

void *calloc(size_t a, size_t b)
{
    bench_alloc_counted();
    return __libc_calloc(a, b);
}

void *realloc(void *p, size_t n)
{
    bench_alloc_counted();
    return __libc_realloc(p, n);
}

void free(void *p)
{
    __libc_free(p);
}

int posix_memalign(void **p, size_t align, size_t n)
{
    if (align < sizeof(void *) || (align & (align - 1)))
        return EINVAL;
    bench_alloc_counted();
    void *q = __libc_memalign(align, n);
    if (!q)
        return ENOMEM;
    *p = q;
    return 0;
}

void *aligned_alloc(size_t align, size_t n)
{
    bench_alloc_counted();
    return __libc_memalign(align, n);
}

void *memalign(size_t align, size_t n)
{
    bench_alloc_counted();
    return __libc_memalign(align, n);
}
#endif

#endif
