/*
 * CRC-32 (IEEE 802.3, reflected polynomial 0xEDB88320, zlib's) folded with carry-less
 * multiplication (x86 PCLMULQDQ), for the legacy message CRCs; kcodec._cy._record keeps the
 * portable tables and calls this for the 16-byte blocks of runs from 64 bytes on.
 *
 * The state is the running register (the finished CRC xor 0xFFFFFFFF), as the tables use it.
 */
#ifndef KCODEC_CRC32IEEE_H
#define KCODEC_CRC32IEEE_H

#include <stddef.h>
#include <stdint.h>

/* Whether this build and CPU can fold (PCLMULQDQ and SSE4.1 on x86-64); 0 elsewhere. */
int kcodec_crc32_fold_available(void);

/* The register after n bytes (n >= 64 and a multiple of 16) from state; only when
 * kcodec_crc32_fold_available() said so. */
uint32_t kcodec_crc32_fold(uint32_t state, const uint8_t *p, size_t n);

#endif /* KCODEC_CRC32IEEE_H */
