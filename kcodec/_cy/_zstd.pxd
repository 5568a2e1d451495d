# zstd compression straight from a C buffer into a C buffer (see _zstd.pyx).

from libc.stdint cimport uint8_t

cdef Py_ssize_t zstd_bound(Py_ssize_t n, object level) except -2
cdef Py_ssize_t zstd_compress_into(uint8_t* dst, Py_ssize_t cap, const uint8_t* src,
                                   Py_ssize_t n, object level) except -1
