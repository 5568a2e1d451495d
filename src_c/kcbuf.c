/* Large column buffers that keep their pages between calls. See kcbuf.h. */
#if defined(__linux__) && !defined(KCODEC_KCBUF_MALLOC) && !defined(_GNU_SOURCE)
#  define _GNU_SOURCE 1   /* mremap */
#endif
#include "kcbuf.h"

#include <stdlib.h>
#include <string.h>

#if defined(__linux__) && !defined(KCODEC_KCBUF_MALLOC)
#  include <pthread.h>
#  include <sys/mman.h>

#  define KCBUF_UNIT ((size_t)2 << 20)
#  ifndef KCBUF_CACHE_BLOCKS
#    define KCBUF_CACHE_BLOCKS 32
#  endif
#  ifndef KCBUF_CACHE_BYTES   /* an extension's build may set a smaller cache (setup.py) */
#    define KCBUF_CACHE_BYTES ((size_t)256 << 20)
#  endif

static pthread_mutex_t kc_lock = PTHREAD_MUTEX_INITIALIZER;
static void *kc_cache_p[KCBUF_CACHE_BLOCKS];
static size_t kc_cache_n[KCBUF_CACHE_BLOCKS];
static unsigned kc_cache_t[KCBUF_CACHE_BLOCKS];
static int kc_cached = 0;
static size_t kc_cached_bytes = 0;

static size_t kc_units(size_t n)
{
    if (n == 0)
        n = 1;
    if (n > ((size_t)-1) - KCBUF_UNIT)
        return 0;
    return (n + KCBUF_UNIT - 1) & ~(KCBUF_UNIT - 1);
}

/* Take the cached block of the same tag (the one released last), else the one that fits best
 * (the smallest one large enough, else the largest); NULL when the cache is empty. */
static void *kc_take(size_t want, unsigned tag, size_t *have)
{
    int i, fit = -1, big = -1, same = -1, best;
    void *p;
    pthread_mutex_lock(&kc_lock);
    for (i = 0; i < kc_cached; i++) {
        if (tag != 0 && kc_cache_t[i] == tag)
            same = i;
        if (kc_cache_n[i] >= want && (fit < 0 || kc_cache_n[i] < kc_cache_n[fit]))
            fit = i;
        if (big < 0 || kc_cache_n[i] > kc_cache_n[big])
            big = i;
    }
    best = same >= 0 ? same : fit >= 0 ? fit : big;
    if (best < 0) {
        pthread_mutex_unlock(&kc_lock);
        return NULL;
    }
    p = kc_cache_p[best];
    *have = kc_cache_n[best];
    kc_cached_bytes -= kc_cache_n[best];
    kc_cached--;
    /* keep the order of release (the same-tag search takes the last one) */
    for (i = best; i < kc_cached; i++) {
        kc_cache_p[i] = kc_cache_p[i + 1];
        kc_cache_n[i] = kc_cache_n[i + 1];
        kc_cache_t[i] = kc_cache_t[i + 1];
    }
    pthread_mutex_unlock(&kc_lock);
    return p;
}

void *kcbuf_alloc(size_t *size, unsigned tag)
{
    size_t want = kc_units(*size), have = 0;
    void *p;
    if (want == 0)
        return NULL;
    p = kc_take(want, tag, &have);
    if (p != NULL) {
        if (have < want) {   /* grow the cached block: its pages come along */
            void *q = mremap(p, have, want, MREMAP_MAYMOVE);
            if (q == MAP_FAILED) {
                munmap(p, have);
                p = NULL;
            } else {
                p = q;
                have = want;
            }
        }
        if (p != NULL) {
            *size = have;
            return p;
        }
    }
    p = mmap(NULL, want, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    *size = want;
    return p;
}

void *kcbuf_resize(void *p, size_t old, size_t *size)
{
    size_t want = kc_units(*size);
    void *q;
    if (want == 0)
        return NULL;
    if (want <= old) {
        *size = old;
        return p;
    }
    q = mremap(p, old, want, MREMAP_MAYMOVE);
    if (q == MAP_FAILED)
        return NULL;
    *size = want;
    return q;
}

void kcbuf_free(void *p, size_t size, unsigned tag)
{
    if (p == NULL)
        return;
    pthread_mutex_lock(&kc_lock);
    if (kc_cached < KCBUF_CACHE_BLOCKS && size <= KCBUF_CACHE_BYTES - kc_cached_bytes) {
        kc_cache_p[kc_cached] = p;
        kc_cache_n[kc_cached] = size;
        kc_cache_t[kc_cached] = tag;
        kc_cached++;
        kc_cached_bytes += size;
        p = NULL;
    }
    pthread_mutex_unlock(&kc_lock);
    if (p != NULL)
        munmap(p, size);
}

void kcbuf_trim(void)
{
    void *p;
    size_t n;
    for (;;) {
        pthread_mutex_lock(&kc_lock);
        if (kc_cached == 0) {
            pthread_mutex_unlock(&kc_lock);
            return;
        }
        kc_cached--;
        p = kc_cache_p[kc_cached];
        n = kc_cache_n[kc_cached];
        kc_cached_bytes -= n;
        pthread_mutex_unlock(&kc_lock);
        munmap(p, n);
    }
}

#else /* not Linux, or a sanitizer build: the C allocator */

void *kcbuf_alloc(size_t *size, unsigned tag)
{
    (void)tag;
    return malloc(*size ? *size : 1);
}

void *kcbuf_resize(void *p, size_t old, size_t *size)
{
    (void)old;
    return realloc(p, *size ? *size : 1);
}

void kcbuf_free(void *p, size_t size, unsigned tag)
{
    (void)size;
    (void)tag;
    free(p);
}

void kcbuf_trim(void)
{
}

#endif

/* The same on every platform: kcbuf_alloc and its kin are malloc's elsewhere than Linux. */
void *kcbuf_grow(void *p, size_t used, size_t *cap, size_t want, unsigned tag)
{
    size_t size = want;
    void *q;
    if (want < KCBUF_MIN) {
        q = realloc(p, want ? want : 1);
        if (q != NULL)
            *cap = want;
        return q;
    }
    if (*cap >= KCBUF_MIN) {
        q = kcbuf_resize(p, *cap, &size);
    } else {
        q = kcbuf_alloc(&size, tag);
        if (q != NULL) {
            if (used)
                memcpy(q, p, used);
            free(p);
        }
    }
    if (q != NULL)
        *cap = size;
    return q;
}

void kcbuf_release(void *p, size_t cap, unsigned tag)
{
    if (cap >= KCBUF_MIN)
        kcbuf_free(p, cap, tag);
    else
        free(p);
}
