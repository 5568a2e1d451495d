/*
 * CRC-32C (Castagnoli, reflected polynomial 0x82F63B78) with runtime CPU dispatch.
 *
 * Plain C, no Python API. Backends, chosen once by kcodec_crc32c_init():
 *   KCODEC_CRC32C_SSE42   x86/x86-64 SSE4.2 crc32 instruction, three interleaved streams
 *   KCODEC_CRC32C_ARMV8   AArch64 CRC extension (crc32c*), three interleaved streams
 *   KCODEC_CRC32C_TABLE   portable slicing-by-8 tables (any endianness)
 *
 * CRC values are the finished ones (as zlib.crc32 returns), so updates chain:
 *   kcodec_crc32c_update(kcodec_crc32c_update(0, a, na), b, nb) == crc of a followed by b.
 */
#ifndef KCODEC_CRC32C_H
#define KCODEC_CRC32C_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define KCODEC_CRC32C_TABLE 0
#define KCODEC_CRC32C_SSE42 1
#define KCODEC_CRC32C_ARMV8 2

/* Build the tables and pick the backend; force_table != 0 selects the portable tables.
 * Call once before concurrent use (the Python module does at import); later calls
 * re-select. Returns the backend id. */
int kcodec_crc32c_init(int force_table);

/* CRC-32C of n bytes at data, continuing from the finished CRC value crc (0 to start). */
uint32_t kcodec_crc32c_update(uint32_t crc, const void *data, size_t n);

/* The same through the portable table backend, whatever the CPU (for tests). */
uint32_t kcodec_crc32c_update_table(uint32_t crc, const void *data, size_t n);

/* The selected backend: KCODEC_CRC32C_* and its name ("sse4.2", "armv8-crc", "table"). */
int kcodec_crc32c_backend(void);
const char *kcodec_crc32c_backend_name(void);

/* Whether this CPU could run the hardware backend (independent of force_table). */
int kcodec_crc32c_hw_available(void);

#ifdef __cplusplus
}
#endif

#endif /* KCODEC_CRC32C_H */
