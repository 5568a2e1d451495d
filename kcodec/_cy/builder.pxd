# Compiled RecordBatch v2 builder: its fields and C methods, for compiled modules that
# append records without a Python call (kcodec._cy.accum, the producer's appender).
from libc.stdint cimport int32_t, int64_t, uint8_t

from kcodec._cy._record cimport Growable


cdef class RecordBatchBuilder:
    cdef int _codec
    cdef object _level
    cdef int64_t _base_offset
    cdef int _ts_type
    cdef int64_t _producer_id
    cdef int _producer_epoch
    cdef int32_t _base_sequence
    cdef bint _transactional
    cdef bint _control
    cdef int32_t _leader_epoch
    cdef Py_ssize_t _max_size
    cdef Growable _buf
    cdef Py_ssize_t _committed
    cdef int32_t _count
    cdef int64_t _last_delta
    cdef int64_t _first_ts
    cdef int64_t _max_ts
    cdef bint _only_smaller
    cdef object _meta_cls
    cdef object _append(self, object key, object value, object headers, object timestamp,
                        object offset_delta)
    # one record written: its size (0: the batch is full), timestamp and offset delta
    cdef Py_ssize_t _put(self, object key, object value, object headers, object timestamp,
                         object offset_delta, int64_t* ts_out, int64_t* od_out) except -1
    # build() for zstd with libzstd called from C (kcodec._cy._zstd)
    cdef object _build_zstd(self, Py_ssize_t cap, bint as_bytearray)
    # the batch_length field for plen bytes of records (EncodeError past int32)
    cdef Py_ssize_t _length(self, Py_ssize_t plen) except -1
    # the header (CRC included) before plen bytes of records (codec) at o + HEADER_SIZE
    cdef void _put_header(self, uint8_t* o, Py_ssize_t length, int codec, Py_ssize_t plen)
