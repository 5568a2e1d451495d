/* CRC-32 (IEEE) by folding 64 bytes at a time with PCLMULQDQ; see crc32ieee.h.
 *
 * The method is Intel's "Fast CRC Computation for Generic Polynomials Using PCLMULQDQ"
 * (Gopal et al., 2009) for a bit-reflected polynomial: four 128-bit accumulators folded
 * across 64-byte strides, folded into one, then over 16-byte blocks, reduced to 64 and
 * 32 bits and finished with a Barrett reduction. The constants are x^k mod P for the
 * reflected IEEE polynomial, as published in that paper. */
#include "crc32ieee.h"

#if (defined(__x86_64__) || defined(_M_X64)) && (defined(__GNUC__) || defined(__clang__))
#  define KC_FOLD 1
#  include <cpuid.h>
#  include <immintrin.h>
#  define KC_FOLD_TARGET __attribute__((target("pclmul,sse4.1")))
#endif

#if defined(KC_FOLD)

int kcodec_crc32_fold_available(void)
{
    unsigned int eax, ebx, ecx, edx;
    if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx))
        return 0;
    /* CPUID.01H:ECX: PCLMULQDQ (bit 1), SSE4.1 (bit 19) */
    return (ecx & (1u << 1)) != 0 && (ecx & (1u << 19)) != 0;
}

KC_FOLD_TARGET static inline __m128i kc_fold(__m128i acc, __m128i k, __m128i next)
{
    __m128i lo = _mm_clmulepi64_si128(acc, k, 0x00);
    __m128i hi = _mm_clmulepi64_si128(acc, k, 0x11);
    return _mm_xor_si128(_mm_xor_si128(lo, hi), next);
}

KC_FOLD_TARGET uint32_t kcodec_crc32_fold(uint32_t state, const uint8_t *p, size_t n)
{
    const __m128i k1k2 = _mm_set_epi64x(0x1c6e41596LL, 0x154442bd4LL);
    const __m128i k3k4 = _mm_set_epi64x(0x0ccaa009eLL, 0x1751997d0LL);
    const __m128i k5 = _mm_set_epi64x(0, 0x163cd6124LL);
    const __m128i poly_mu = _mm_set_epi64x(0x1f7011641LL, 0x1db710641LL);
    const __m128i mask32 = _mm_set_epi32(0, 0, 0, -1);
    __m128i x1 = _mm_loadu_si128((const __m128i *)p);
    __m128i x2 = _mm_loadu_si128((const __m128i *)(p + 16));
    __m128i x3 = _mm_loadu_si128((const __m128i *)(p + 32));
    __m128i x4 = _mm_loadu_si128((const __m128i *)(p + 48));
    __m128i t;

    x1 = _mm_xor_si128(x1, _mm_cvtsi32_si128((int)state));
    p += 64;
    n -= 64;
    while (n >= 64) {
        x1 = kc_fold(x1, k1k2, _mm_loadu_si128((const __m128i *)p));
        x2 = kc_fold(x2, k1k2, _mm_loadu_si128((const __m128i *)(p + 16)));
        x3 = kc_fold(x3, k1k2, _mm_loadu_si128((const __m128i *)(p + 32)));
        x4 = kc_fold(x4, k1k2, _mm_loadu_si128((const __m128i *)(p + 48)));
        p += 64;
        n -= 64;
    }
    x1 = kc_fold(x1, k3k4, x2);
    x1 = kc_fold(x1, k3k4, x3);
    x1 = kc_fold(x1, k3k4, x4);
    while (n >= 16) {
        x1 = kc_fold(x1, k3k4, _mm_loadu_si128((const __m128i *)p));
        p += 16;
        n -= 16;
    }
    /* 128 -> 64 bits: the low half times k4, plus the high half */
    t = _mm_clmulepi64_si128(k3k4, x1, 0x01);
    x1 = _mm_xor_si128(_mm_srli_si128(x1, 8), t);
    /* 64 -> 32 bits */
    t = _mm_srli_si128(x1, 4);
    x1 = _mm_clmulepi64_si128(_mm_and_si128(x1, mask32), k5, 0x00);
    x1 = _mm_xor_si128(x1, t);
    /* Barrett reduction */
    t = x1;
    x1 = _mm_clmulepi64_si128(_mm_and_si128(x1, mask32), poly_mu, 0x10);
    x1 = _mm_clmulepi64_si128(_mm_and_si128(x1, mask32), poly_mu, 0x00);
    x1 = _mm_xor_si128(x1, t);
    return (uint32_t)_mm_extract_epi32(x1, 1);
}

#else

int kcodec_crc32_fold_available(void)
{
    return 0;
}

uint32_t kcodec_crc32_fold(uint32_t state, const uint8_t *p, size_t n)
{
    (void)p;
    (void)n;
    return state;
}

#endif
