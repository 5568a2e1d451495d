/*
 * Stand-alone check of src_c/crc32c.c, for cross-compiled runs under qemu (aarch64,
 * big-endian s390x, 32-bit x86) where Python is not at hand:
 *
 *   cc -O2 -Isrc_c tests/c/crc32c_check.c src_c/crc32c.c -o /tmp/crc32c_check && /tmp/crc32c_check
 *
 * Prints the backend and exits non-zero on the first mismatch. tests/codec/test_crc.py builds and
 * runs it with the host compiler too.
 */
#include <stdio.h>
#include <string.h>
#include <stdlib.h>

#include "crc32c.h"

static int failures = 0;

static void expect(const char *what, uint32_t got, uint32_t want)
{
    if (got != want) {
        printf("FAIL %s: got 0x%08x, want 0x%08x\n", what, (unsigned)got, (unsigned)want);
        failures++;
    }
}

/* Bit-at-a-time reference straight from the definition. */
static uint32_t reference(uint32_t crc, const uint8_t *p, size_t n)
{
    uint32_t c = ~crc;
    while (n--) {
        int k;
        c ^= *p++;
        for (k = 0; k < 8; k++)
            c = (c >> 1) ^ (0x82F63B78u & (0u - (c & 1u)));
    }
    return ~c;
}

int main(void)
{
    static uint8_t buf[3 * 8192 * 2 + 4096];
    uint8_t v[48];
    uint32_t x = 12345;
    size_t i, len, off;
    int backend = kcodec_crc32c_init(0);
    printf("backend %s (hw available: %d)\n", kcodec_crc32c_backend_name(),
           kcodec_crc32c_hw_available());

    expect("123456789", kcodec_crc32c_update(0, "123456789", 9), 0xE3069283u);
    memset(v, 0, 32);
    expect("32 x 00", kcodec_crc32c_update(0, v, 32), 0x8A9136AAu);
    memset(v, 0xff, 32);
    expect("32 x ff", kcodec_crc32c_update(0, v, 32), 0x62A8AB43u);
    for (i = 0; i < 32; i++) v[i] = (uint8_t)i;
    expect("incrementing", kcodec_crc32c_update(0, v, 32), 0x46DD794Eu);
    for (i = 0; i < 32; i++) v[i] = (uint8_t)(31 - i);
    expect("decrementing", kcodec_crc32c_update(0, v, 32), 0x113FDB5Cu);

    for (i = 0; i < sizeof buf; i++) {
        x = x * 1103515245u + 12345u;
        buf[i] = (uint8_t)(x >> 16);
    }
    for (off = 0; off < 16; off++)
        for (len = 0; len < 1600 && off + len <= sizeof buf; len++) {
            uint32_t want = reference(0, buf + off, len);
            expect("hw short", kcodec_crc32c_update(0, buf + off, len), want);
            expect("table short", kcodec_crc32c_update_table(0, buf + off, len), want);
        }
    for (len = 0; len + 16 <= sizeof buf; len += 997) {
        uint32_t want = reference(0, buf + 3, len);
        uint32_t half = kcodec_crc32c_update(0, buf + 3, len / 3);
        expect("hw long", kcodec_crc32c_update(0, buf + 3, len), want);
        expect("table long", kcodec_crc32c_update_table(0, buf + 3, len), want);
        expect("incremental", kcodec_crc32c_update(half, buf + 3 + len / 3, len - len / 3), want);
    }
    kcodec_crc32c_init(1);
    expect("forced table", (uint32_t)kcodec_crc32c_backend(), KCODEC_CRC32C_TABLE);
    expect("forced table value", kcodec_crc32c_update(0, buf, sizeof buf),
           reference(0, buf, sizeof buf));
    kcodec_crc32c_init(0);
    expect("reinit", (uint32_t)kcodec_crc32c_backend(), (uint32_t)backend);
    printf(failures ? "FAILED (%d)\n" : "ok\n", failures);
    return failures != 0;
}
