/*
 * CRC-32C (Castagnoli) with runtime CPU dispatch. See crc32c.h for the interface.
 *
 * Written from the definition: the reflected CRC with polynomial 0x82F63B78, register
 * preset to all ones and inverted at the end (RFC 3720, section 12.1 and appendix B.4).
 *
 * Hardware paths (x86 SSE4.2 crc32, AArch64 crc32c*) take one cycle per 8-byte word but
 * have a latency of about three cycles, so one dependent chain runs at a third of the
 * possible speed. We split each chunk into three equal blocks, run three independent
 * chains (the second and third starting from a zero register), and join them with the
 * zero-extension operator: advancing a raw register over L zero bytes multiplies it by
 * x^(8L) modulo P, which is linear in the register and so a 4 x 256 lookup table. For
 * blocks A, B, C of L bytes each:
 *     reg(ABC) = shift_L(shift_L(reg(A)) ^ reg0(B)) ^ reg0(C)
 *
 * The hardware intrinsics are enabled per function (target attributes), never for the
 * whole file, and used only after the CPU says it has them.
 */
#include "crc32c.h"

#include <string.h>

#define KC_POLY 0x82F63B78u

/* Chunk sizes of the three-stream loops: long blocks for the bulk, short for the tail. */
#define KC_LONG 8192
#define KC_SHORT 256

/* ------------------------------------------------------------------------------------ */
/* Platform detection                                                                   */

#if defined(__x86_64__) || defined(_M_X64) || defined(_M_AMD64)
#  define KC_X86 1
#  define KC_X86_64 1
#elif defined(__i386__) || defined(_M_IX86)
#  define KC_X86 1
#endif

#if defined(__aarch64__) || defined(_M_ARM64)
#  define KC_ARM64 1
#endif

#if defined(__BYTE_ORDER__) && defined(__ORDER_BIG_ENDIAN__) && \
    __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
#  define KC_BIG_ENDIAN 1
#endif

/* x86: the SSE4.2 crc32 instruction. */
#if defined(KC_X86)
#  if defined(_MSC_VER) && !defined(__clang__)
#    include <intrin.h>
#    include <nmmintrin.h>
#    define KC_SSE42_TARGET
#    define KC_HAVE_SSE42 1
#  elif (defined(__GNUC__) && (__GNUC__ > 4 || (__GNUC__ == 4 && __GNUC_MINOR__ >= 9))) || \
        defined(__clang__)
#    include <cpuid.h>
#    include <nmmintrin.h>
#    define KC_SSE42_TARGET __attribute__((target("sse4.2")))
#    define KC_HAVE_SSE42 1
#  endif
#endif

/* AArch64: the CRC extension (optional in ARMv8.0, mandatory from ARMv8.1). */
#if defined(KC_ARM64)
#  if defined(_MSC_VER) && !defined(__clang__)
#    include <intrin.h>
#    include <windows.h>
#    define KC_CRC_TARGET
#    define KC_CRC32CB(c, b) __crc32cb((c), (b))
#    define KC_CRC32CD(c, v) __crc32cd((c), (v))
#    define KC_HAVE_ARMV8 1
#  elif defined(__clang__)
#    define KC_CRC_TARGET __attribute__((target("crc")))
#    define KC_CRC32CB(c, b) __builtin_arm_crc32cb((c), (b))
#    define KC_CRC32CD(c, v) __builtin_arm_crc32cd((c), (v))
#    define KC_HAVE_ARMV8 1
#  elif defined(__GNUC__) && __GNUC__ >= 6
#    define KC_CRC_TARGET __attribute__((target("+crc")))
#    define KC_CRC32CB(c, b) __builtin_aarch64_crc32cb((c), (b))
#    define KC_CRC32CD(c, v) __builtin_aarch64_crc32cx((c), (v))
#    define KC_HAVE_ARMV8 1
#  endif
#  if defined(KC_HAVE_ARMV8) && !defined(__ARM_FEATURE_CRC32)
#    if defined(__linux__) || defined(__ANDROID__) || defined(__FreeBSD__)
#      include <sys/auxv.h>
#    elif defined(__APPLE__)
#      include <sys/sysctl.h>
#    endif
#  endif
#endif

/* ------------------------------------------------------------------------------------ */
/* Tables, computed once from the polynomial                                            */

static uint32_t kc_slice8[8][256];      /* slicing-by-8: kc_slice8[k][b] = b then k zero bytes */
static uint32_t kc_shift_long[4][256];  /* zero-extension over KC_LONG bytes, per register byte */
static uint32_t kc_shift_short[4][256]; /* ... over KC_SHORT bytes */
static volatile int kc_tables_ready = 0;

/* a * b modulo P, in the reflected representation (bit 31 is x^0, bit 0 is x^31). */
static uint32_t kc_gf2_mul(uint32_t a, uint32_t b)
{
    uint32_t product = 0;
    int i;
    for (i = 0; i < 32; i++) {
        if (a & (0x80000000u >> i))
            product ^= b;                               /* + b * x^i */
        b = (b >> 1) ^ (KC_POLY & (0u - (b & 1u)));     /* b *= x, reduced */
    }
    return product;
}

/* x^(8 * nbytes) modulo P: the operator that appends nbytes zero bytes to a raw register. */
static uint32_t kc_x_pow_8n(size_t nbytes)
{
    uint32_t result = 0x80000000u;   /* x^0 */
    uint32_t base = 0x00800000u;     /* x^8 */
    while (nbytes) {
        if (nbytes & 1)
            result = kc_gf2_mul(result, base);
        base = kc_gf2_mul(base, base);
        nbytes >>= 1;
    }
    return result;
}

static void kc_build_shift(uint32_t table[4][256], size_t nbytes)
{
    uint32_t op = kc_x_pow_8n(nbytes);
    int k, b;
    for (k = 0; k < 4; k++)
        for (b = 0; b < 256; b++)
            table[k][b] = kc_gf2_mul((uint32_t)b << (8 * k), op);
}

static void kc_build_tables(void)
{
    int b, k, bit;
    if (kc_tables_ready)
        return;
    for (b = 0; b < 256; b++) {
        uint32_t r = (uint32_t)b;
        for (bit = 0; bit < 8; bit++)
            r = (r >> 1) ^ (KC_POLY & (0u - (r & 1u)));
        kc_slice8[0][b] = r;
    }
    for (k = 1; k < 8; k++)
        for (b = 0; b < 256; b++) {
            uint32_t prev = kc_slice8[k - 1][b];
            kc_slice8[k][b] = (prev >> 8) ^ kc_slice8[0][prev & 0xff];
        }
    kc_build_shift(kc_shift_long, KC_LONG);
    kc_build_shift(kc_shift_short, KC_SHORT);
    kc_tables_ready = 1;
}

static inline uint32_t kc_shift(uint32_t table[4][256], uint32_t reg)
{
    return table[0][reg & 0xff] ^ table[1][(reg >> 8) & 0xff] ^
           table[2][(reg >> 16) & 0xff] ^ table[3][reg >> 24];
}

/* Little-endian loads that are correct whatever the host byte order. */
static inline uint32_t kc_le32(const uint8_t *p)
{
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) |
           ((uint32_t)p[3] << 24);
}

#if defined(KC_HAVE_ARMV8)
static inline uint64_t kc_le64(const uint8_t *p)
{
#  if defined(KC_BIG_ENDIAN)
    return (uint64_t)kc_le32(p) | ((uint64_t)kc_le32(p + 4) << 32);
#  else
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
#  endif
}
#endif

/* ------------------------------------------------------------------------------------ */
/* Portable slicing-by-8                                                                 */

static uint32_t kc_crc_table(uint32_t crc, const void *data, size_t n)
{
    const uint8_t *p = (const uint8_t *)data;
    uint32_t c = ~crc;
    while (n && ((uintptr_t)p & 7)) {
        c = (c >> 8) ^ kc_slice8[0][(c ^ *p++) & 0xff];
        n--;
    }
    while (n >= 8) {
        uint32_t lo = kc_le32(p) ^ c;
        uint32_t hi = kc_le32(p + 4);
        c = kc_slice8[7][lo & 0xff] ^ kc_slice8[6][(lo >> 8) & 0xff] ^
            kc_slice8[5][(lo >> 16) & 0xff] ^ kc_slice8[4][lo >> 24] ^
            kc_slice8[3][hi & 0xff] ^ kc_slice8[2][(hi >> 8) & 0xff] ^
            kc_slice8[1][(hi >> 16) & 0xff] ^ kc_slice8[0][hi >> 24];
        p += 8;
        n -= 8;
    }
    while (n--)
        c = (c >> 8) ^ kc_slice8[0][(c ^ *p++) & 0xff];
    return ~c;
}

/* ------------------------------------------------------------------------------------ */
/* x86 SSE4.2                                                                           */

#if defined(KC_HAVE_SSE42)
#  if defined(KC_X86_64)
#    define KC_W 8
typedef uint64_t kc_reg;
KC_SSE42_TARGET static inline kc_reg kc_sse42_word(kc_reg c, const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return _mm_crc32_u64(c, v);
}
#  else
#    define KC_W 4
typedef uint32_t kc_reg;
KC_SSE42_TARGET static inline kc_reg kc_sse42_word(kc_reg c, const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return _mm_crc32_u32(c, v);
}
#  endif

/* Three chains over consecutive blocks of `block` bytes at p, joined into one register. */
KC_SSE42_TARGET static inline uint32_t kc_sse42_three(uint32_t reg, const uint8_t *p, size_t block,
                                                      uint32_t shift[4][256])
{
    kc_reg a = reg, b = 0, c = 0;
    const uint8_t *end = p + block;
    do {
        a = kc_sse42_word(a, p);
        b = kc_sse42_word(b, p + block);
        c = kc_sse42_word(c, p + 2 * block);
        p += KC_W;
    } while (p < end);
    reg = kc_shift(shift, (uint32_t)a) ^ (uint32_t)b;
    return kc_shift(shift, reg) ^ (uint32_t)c;
}

KC_SSE42_TARGET static uint32_t kc_crc_sse42(uint32_t crc, const void *data, size_t n)
{
    const uint8_t *p = (const uint8_t *)data;
    uint32_t reg = ~crc;
    while (n && ((uintptr_t)p & (KC_W - 1))) {
        reg = _mm_crc32_u8(reg, *p++);
        n--;
    }
    while (n >= 3 * KC_LONG) {
        reg = kc_sse42_three(reg, p, KC_LONG, kc_shift_long);
        p += 3 * KC_LONG;
        n -= 3 * KC_LONG;
    }
    while (n >= 3 * KC_SHORT) {
        reg = kc_sse42_three(reg, p, KC_SHORT, kc_shift_short);
        p += 3 * KC_SHORT;
        n -= 3 * KC_SHORT;
    }
    {
        kc_reg r = reg;
        while (n >= KC_W) {
            r = kc_sse42_word(r, p);
            p += KC_W;
            n -= KC_W;
        }
        reg = (uint32_t)r;
    }
    while (n--)
        reg = _mm_crc32_u8(reg, *p++);
    return ~reg;
}

static int kc_sse42_available(void)
{
#  if defined(_MSC_VER) && !defined(__clang__)
    int info[4];
    __cpuid(info, 1);
    return (info[2] & (1 << 20)) != 0;
#  else
    unsigned int eax, ebx, ecx, edx;
    if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx))
        return 0;
    return (ecx & (1u << 20)) != 0;   /* CPUID.01H:ECX.SSE4_2 */
#  endif
}
#endif /* KC_HAVE_SSE42 */

/* ------------------------------------------------------------------------------------ */
/* AArch64 CRC extension                                                                */

#if defined(KC_HAVE_ARMV8)
KC_CRC_TARGET static inline uint32_t kc_armv8_three(uint32_t reg, const uint8_t *p, size_t block,
                                                    uint32_t shift[4][256])
{
    uint32_t a = reg, b = 0, c = 0;
    const uint8_t *end = p + block;
    do {
        a = KC_CRC32CD(a, kc_le64(p));
        b = KC_CRC32CD(b, kc_le64(p + block));
        c = KC_CRC32CD(c, kc_le64(p + 2 * block));
        p += 8;
    } while (p < end);
    reg = kc_shift(shift, a) ^ b;
    return kc_shift(shift, reg) ^ c;
}

KC_CRC_TARGET static uint32_t kc_crc_armv8(uint32_t crc, const void *data, size_t n)
{
    const uint8_t *p = (const uint8_t *)data;
    uint32_t reg = ~crc;
    while (n && ((uintptr_t)p & 7)) {
        reg = KC_CRC32CB(reg, *p++);
        n--;
    }
    while (n >= 3 * KC_LONG) {
        reg = kc_armv8_three(reg, p, KC_LONG, kc_shift_long);
        p += 3 * KC_LONG;
        n -= 3 * KC_LONG;
    }
    while (n >= 3 * KC_SHORT) {
        reg = kc_armv8_three(reg, p, KC_SHORT, kc_shift_short);
        p += 3 * KC_SHORT;
        n -= 3 * KC_SHORT;
    }
    while (n >= 8) {
        reg = KC_CRC32CD(reg, kc_le64(p));
        p += 8;
        n -= 8;
    }
    while (n--)
        reg = KC_CRC32CB(reg, *p++);
    return ~reg;
}

#  ifndef HWCAP_CRC32
#    define HWCAP_CRC32 (1 << 7)
#  endif
#  ifndef PF_ARM_V8_CRC32_INSTRUCTIONS_AVAILABLE
#    define PF_ARM_V8_CRC32_INSTRUCTIONS_AVAILABLE 31
#  endif

static int kc_armv8_available(void)
{
#  if defined(__ARM_FEATURE_CRC32)
    return 1;   /* the compiler already assumes it for the whole program */
#  elif defined(__linux__) || defined(__ANDROID__)
    return (getauxval(AT_HWCAP) & HWCAP_CRC32) != 0;
#  elif defined(__FreeBSD__)
    unsigned long hwcap = 0;
    if (elf_aux_info(AT_HWCAP, &hwcap, sizeof hwcap) != 0)
        return 0;
    return (hwcap & HWCAP_CRC32) != 0;
#  elif defined(__APPLE__)
    int value = 0;
    size_t len = sizeof value;
    if (sysctlbyname("hw.optional.armv8_crc32", &value, &len, NULL, 0) != 0)
        return 0;
    return value != 0;
#  elif defined(_WIN32)
    return IsProcessorFeaturePresent(PF_ARM_V8_CRC32_INSTRUCTIONS_AVAILABLE) != 0;
#  else
    return 0;
#  endif
}
#endif /* KC_HAVE_ARMV8 */

/* ------------------------------------------------------------------------------------ */
/* Dispatch                                                                             */

typedef uint32_t (*kc_crc_fn)(uint32_t, const void *, size_t);

static uint32_t kc_crc_first(uint32_t crc, const void *data, size_t n);

static kc_crc_fn kc_impl = kc_crc_first;
static int kc_backend_id = -1;

int kcodec_crc32c_hw_available(void)
{
#if defined(KC_HAVE_SSE42)
    return kc_sse42_available();
#elif defined(KC_HAVE_ARMV8)
    return kc_armv8_available();
#else
    return 0;
#endif
}

int kcodec_crc32c_init(int force_table)
{
    kc_crc_fn fn = kc_crc_table;
    int id = KCODEC_CRC32C_TABLE;
    kc_build_tables();
    if (!force_table && kcodec_crc32c_hw_available()) {
#if defined(KC_HAVE_SSE42)
        fn = kc_crc_sse42;
        id = KCODEC_CRC32C_SSE42;
#elif defined(KC_HAVE_ARMV8)
        fn = kc_crc_armv8;
        id = KCODEC_CRC32C_ARMV8;
#endif
    }
    kc_backend_id = id;
    kc_impl = fn;
    return id;
}

/* First call without an explicit init: choose, then run. */
static uint32_t kc_crc_first(uint32_t crc, const void *data, size_t n)
{
    kcodec_crc32c_init(0);
    return kc_impl(crc, data, n);
}

uint32_t kcodec_crc32c_update(uint32_t crc, const void *data, size_t n)
{
    return kc_impl(crc, data, n);
}

uint32_t kcodec_crc32c_update_table(uint32_t crc, const void *data, size_t n)
{
    kc_build_tables();
    return kc_crc_table(crc, data, n);
}

int kcodec_crc32c_backend(void)
{
    if (kc_backend_id < 0)
        kcodec_crc32c_init(0);
    return kc_backend_id;
}

const char *kcodec_crc32c_backend_name(void)
{
    switch (kcodec_crc32c_backend()) {
    case KCODEC_CRC32C_SSE42:
        return "sse4.2";
    case KCODEC_CRC32C_ARMV8:
        return "armv8-crc";
    default:
        return "table";
    }
}
