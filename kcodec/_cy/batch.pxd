# Compiled RecordBatch v2 reader: declarations other compiled modules may cimport (a batch's
# fields and its decompressed records payload, without Python calls).
from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t

from kcodec._cy._reader cimport Buf


cdef class RecordBatch:
    cdef readonly Py_ssize_t position
    cdef readonly int64_t base_offset
    cdef readonly int32_t batch_length
    cdef readonly int32_t partition_leader_epoch
    cdef readonly int magic
    cdef readonly uint32_t crc
    cdef readonly int attributes
    cdef readonly int32_t last_offset_delta
    cdef readonly int64_t first_timestamp
    cdef readonly int64_t max_timestamp
    cdef readonly int64_t producer_id
    cdef readonly int producer_epoch
    cdef readonly int32_t base_sequence
    cdef readonly int32_t record_count
    cdef Buf _buf
    cdef Py_ssize_t _max_size
    cdef bint _validate
    cdef object _it  # the iteration next(batch) continues
    # The records section, decompressed if needed: sets ptr/size and the offset ``base`` to
    # add to positions in errors; returns the object that keeps the bytes alive.
    cdef object payload(self, const uint8_t** ptr, Py_ssize_t* size, Py_ssize_t* base)
