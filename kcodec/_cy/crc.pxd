# C-level CRC-32C for other compiled modules (record batches):
#
#     from kcodec._cy.crc cimport crc32c_update
#     crc = crc32c_update(0, ptr, n)      # chains like zlib: crc32c_update(crc_of_a, b, nb)
#     crc = crc32c_of(ptr, n)              # the same from 0, the GIL released from 64 KiB on
#
# Backed by src_c/crc32c.c with the backend chosen once at import of kcodec._cy.crc.
from libc.stdint cimport uint8_t, uint32_t

cdef uint32_t crc32c_update(uint32_t crc, const uint8_t* p, size_t n) noexcept nogil


cdef inline uint32_t crc32c_of(const uint8_t* p, Py_ssize_t n) noexcept:
    # Below 64 KiB, releasing the GIL costs more than the ~3 us of work it would free.
    if n >= 65536:
        with nogil:
            return crc32c_update(0, p, <size_t>n)
    return crc32c_update(0, p, <size_t>n)
