# Record objects shared by the compiled record twins (batch, legacy); see kcodec/_py/_record.py.
from libc.stdint cimport int64_t, uint8_t


cdef class Record:
    cdef readonly int64_t offset
    cdef readonly int64_t timestamp
    cdef readonly int timestamp_type
    cdef readonly object key
    cdef readonly object value
    cdef readonly list headers
    cdef readonly int attributes


cdef class ControlRecord(Record):
    cdef readonly int control_type
    cdef readonly int version
    cdef readonly object coordinator_epoch


cdef class RecordMetadata:
    cdef readonly int64_t offset_delta
    cdef readonly int64_t timestamp
    cdef readonly Py_ssize_t size


cdef Record new_record(int64_t offset, int64_t timestamp, int timestamp_type, object key,
                       object value, list headers, int attributes)
cdef ControlRecord make_control(int64_t offset, int64_t timestamp, int timestamp_type,
                                object key, object value, list headers, int attributes,
                                Py_ssize_t where)
cdef RecordMetadata new_metadata(int64_t offset_delta, int64_t timestamp, Py_ssize_t size)


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
