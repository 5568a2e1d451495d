/*
 * Large column buffers for decode_columns: memory that keeps its pages between calls.
 *
 * Plain C, no Python API. A decode of a big blob writes tens of MiB of columns into fresh
 * buffers; from the allocator those come as new anonymous mappings, and every 4 KiB page
 * of them then costs a page fault and a zeroing on first write, at every call (the
 * mapping is unmapped when the arrays are freed): at 30-60 MB blobs that took more time
 * than the decode. Here a buffer of at least KCBUF_MIN bytes is an anonymous mapping of a
 * whole number of 2 MiB units that grows in place or by moving its pages (mremap: no copy),
 * and on release goes whole to a small cache (at most 32 blocks, 256 MiB, or the
 * KCBUF_CACHE_BYTES an extension's build sets; one cache per extension that links this) that
 * the next big allocation takes first, pages and all: the block last released under the same
 * tag (a caller's name for one role, such as "the values column"), else the smallest block
 * that fits, else the largest one, grown. Tags keep each column on the pages it wrote last
 * time: without them two columns reserving the same size could swap blocks, and the one
 * that writes more would fault in fresh pages at every call. Pages never written cost nothing, so a generous reservation stays
 * cheap. (No MADV_HUGEPAGE: with the usual defrag=madvise setting the first touch of such
 * memory may compact memory synchronously, which made first calls 2x slower and erratic.)
 * Elsewhere than Linux these are malloc, realloc and free, without a cache.
 *
 * Sizes are capacities: kcbuf_alloc and kcbuf_resize round *size up and report it; pass the
 * same capacity back to kcbuf_resize and kcbuf_free. Thread safe.
 */
#ifndef KCODEC_KCBUF_H
#define KCODEC_KCBUF_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#ifdef KCODEC_KCBUF_MALLOC
/* Sanitizer builds (fuzz/build_asan.sh): the C allocator with exact capacities, so ASan
 * sees a write past a column's capacity (inside a 2 MiB mapping it would not), and from
 * 256 bytes on, so fuzz-sized columns take the big-column paths of their callers too. */
#  define KCBUF_MIN ((size_t)256)
#else
/* 64 KiB: below glibc's mapping threshold too, because malloc can hand a freed column's
 * pages back by trimming the top of its heap as well, and whether it does depends on the
 * process's heap layout: columns of 64-256 KiB faulted in afresh at every call in one
 * process and not in another. */
#  define KCBUF_MIN ((size_t)1 << 16)
#endif

/* At least *size bytes (updated to the capacity), or NULL. Contents undefined. ``tag``
 * (0: none) prefers a cached block released under the same tag. */
void *kcbuf_alloc(size_t *size, unsigned tag);

/* Grow p (capacity old) to at least *size bytes keeping its contents; NULL on failure,
 * and p is then still valid with its old capacity. */
void *kcbuf_resize(void *p, size_t old, size_t *size);

/* Release a buffer (to the cache under ``tag``, or to the system). */
void kcbuf_free(void *p, size_t size, unsigned tag);

/* Drop every cached block (for tests and long idle periods). */
void kcbuf_trim(void);

/* A buffer that lives on the C heap (malloc) below KCBUF_MIN bytes and in kcbuf's blocks
 * from KCBUF_MIN on, moving over as it grows. kcbuf_grow: p (NULL or a buffer of capacity
 * *cap, of which the first ``used`` bytes are kept) becomes a buffer of at least ``want``
 * bytes; returns it and sets *cap, or returns NULL and leaves p and *cap as they were. */
void *kcbuf_grow(void *p, size_t used, size_t *cap, size_t want, unsigned tag);

/* Release such a buffer (capacity ``cap``): to kcbuf's cache under ``tag``, or to free(). */
void kcbuf_release(void *p, size_t cap, unsigned tag);

#ifdef __cplusplus
}
#endif

#endif /* KCODEC_KCBUF_H */
