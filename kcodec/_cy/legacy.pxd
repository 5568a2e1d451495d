# Compiled legacy MessageSet v0/v1 twin: declarations cimported by kcodec._cy.batch.
from libc.stdint cimport int64_t, int32_t, uint32_t

from kcodec._cy._reader cimport Buf


cdef class LegacyBatch:
    cdef readonly Py_ssize_t position
    cdef readonly int64_t offset
    cdef readonly int32_t message_size
    cdef readonly uint32_t crc
    cdef readonly int magic
    cdef readonly int attributes
    cdef readonly int64_t timestamp
    cdef Buf _buf
    cdef Py_ssize_t _kpos, _klen, _vpos, _vlen
    cdef bint _validate
    cdef Py_ssize_t _max_size
    cdef object _inner
    cdef Py_ssize_t _n
    cdef int64_t _first
    cdef int64_t _shift
    cdef object _it  # the iteration next(batch) continues
    cdef int _prepare(self) except -1


cdef LegacyBatch message_at(Buf buf, Py_ssize_t pos, bint validate, Py_ssize_t max_size)
