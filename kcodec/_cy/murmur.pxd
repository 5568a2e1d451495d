# The Java client's murmur2, inline for other compiled modules (the producer's appender).
from libc.stdint cimport int32_t, uint32_t


cdef inline int32_t _murmur2(const unsigned char* p, Py_ssize_t length) noexcept nogil:
    cdef uint32_t m = 0x5BD1E995
    cdef uint32_t seed = 0x9747B28C
    cdef uint32_t h = seed ^ <uint32_t>length
    cdef uint32_t k
    cdef Py_ssize_t i, end = length & ~3
    for i in range(0, end, 4):
        k = (<uint32_t>p[i]) | (<uint32_t>p[i + 1] << 8) | (<uint32_t>p[i + 2] << 16) \
            | (<uint32_t>p[i + 3] << 24)
        k *= m
        k ^= k >> 24
        k *= m
        h *= m
        h ^= k
    cdef Py_ssize_t rest = length & 3
    if rest == 3:
        h ^= <uint32_t>p[end + 2] << 16
    if rest >= 2:
        h ^= <uint32_t>p[end + 1] << 8
    if rest >= 1:
        h ^= <uint32_t>p[end]
        h *= m
    h ^= h >> 13
    h *= m
    h ^= h >> 15
    return <int32_t>h
