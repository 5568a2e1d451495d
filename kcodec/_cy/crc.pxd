# C-level CRC-32C for other compiled modules (record batches):
#
#     from kcodec._cy.crc cimport crc32c_update
#     crc = crc32c_update(0, ptr, n)      # chains like zlib: crc32c_update(crc_of_a, b, nb)
#
# Backed by src_c/crc32c.c with the backend chosen once at import of kcodec._cy.crc.
from libc.stdint cimport uint8_t, uint32_t

cdef uint32_t crc32c_update(uint32_t crc, const uint8_t* p, size_t n) noexcept nogil
