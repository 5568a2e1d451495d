# Record objects shared by the compiled record twins (batch, legacy); see kcodec/_py/_record.py.
cimport cython
from libc.stdint cimport int64_t, uint8_t, uint32_t


@cython.no_gc
cdef class Record:
    # Declared here so kcodec._cy.batch can refill a record nobody else holds any more.
    cdef object offset
    cdef object timestamp
    cdef object timestamp_type
    cdef object key
    cdef object value
    cdef object headers
    cdef object attributes
    # size_in_bytes; a legacy message's stored and computed CRC-32 (-1: none, as in v2)
    cdef Py_ssize_t size_
    cdef int64_t crc_
    cdef int64_t computed_crc_
    # A legacy message whose CRC-32 is computed on first use (computed_crc_ <= -2 holds
    # -2 - (magic | attributes << 1)): its key and value as read and its own timestamp.
    cdef object raw_key_
    cdef object raw_value_
    cdef int64_t raw_ts_


@cython.no_gc
cdef class ControlRecord(Record):
    cdef object control_type
    cdef object version
    cdef object coordinator_epoch


@cython.no_gc
cdef class RecordMetadata:
    cdef object offset_delta
    cdef object timestamp
    cdef object size
    cdef object crc


# Record, ControlRecord and RecordMetadata (defined in _record.pyx) are made through these.
cdef object new_record(int64_t offset, int64_t timestamp, int timestamp_type, object key,
                       object value, list headers, int attributes, Py_ssize_t size)
cdef object make_control(int64_t offset, int64_t timestamp, int timestamp_type,
                         object key, object value, list headers, int attributes,
                         Py_ssize_t where, Py_ssize_t size)
cdef object new_metadata(int64_t offset_delta, int64_t timestamp, Py_ssize_t size,
                         int64_t crc=*)
cdef object new_metadata_ts(int64_t offset_delta, int64_t timestamp, Py_ssize_t size,
                            object ts_obj)
cdef object new_metadata_of(type cls, int64_t offset_delta, int64_t timestamp,
                            Py_ssize_t size, object ts_obj=*)


cdef class ByteHolder:
    cdef Py_buffer view
    cdef bint held


cdef object take_bytes(object value, str what, const uint8_t** ptr, Py_ssize_t* size)
cdef int64_t check_i64(object value, int64_t lo, int64_t hi, str what) except? -1


cdef class Growable:
    cdef uint8_t* data
    cdef Py_ssize_t length
    cdef Py_ssize_t capacity
    cdef int reserve(self, Py_ssize_t extra) except -1


cdef uint32_t crc32_ieee(uint32_t crc, const uint8_t* p, size_t n) noexcept nogil
