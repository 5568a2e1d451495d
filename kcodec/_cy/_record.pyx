"""Compiled record objects shared by kcodec._cy.batch and kcodec._cy.legacy.

The same classes, fields and control-record decoding as kcodec/_py/_record.py.
"""

cimport cython
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE
from libc.stdint cimport int16_t, int32_t, int64_t, uint8_t

from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.mem cimport PyMem_Free, PyMem_Realloc

from kcodec._cy._reader cimport be_u16, be_u32, raise_corrupt

from kcodec.errors import EncodeError

__all__ = ["Record", "ControlRecord", "RecordMetadata"]


@cython.freelist(512)
cdef class Record:
    """One record: ``offset``, ``timestamp``, ``timestamp_type`` (-1 none, 0 create, 1 log
    append), ``key`` and ``value`` (bytes or None), ``headers`` (list of (str, bytes or
    None)), ``attributes``."""

    def __init__(self, offset, timestamp, timestamp_type, key, value, headers, attributes=0):
        self.offset = offset
        self.timestamp = timestamp
        self.timestamp_type = timestamp_type
        self.key = key
        self.value = value
        self.headers = headers
        self.attributes = attributes

    @property
    def is_control(self):
        return False

    def _tuple(self):
        return (self.offset, self.timestamp, self.timestamp_type, self.key, self.value,
                self.headers, self.attributes)

    def __eq__(self, other):
        if not isinstance(other, Record):
            return NotImplemented
        return self._tuple() == other._tuple() and self.is_control == other.is_control

    __hash__ = None

    def __repr__(self):
        return (f"Record(offset={self.offset}, timestamp={self.timestamp}, "
                f"key={self.key!r}, value={self.value!r}, headers={self.headers!r})")


cdef class ControlRecord(Record):
    """A record of a control batch: ``control_type`` (0 abort, 1 commit, others from KRaft),
    ``version`` of the key, and ``coordinator_epoch`` (commit/abort markers; else None)."""

    @property
    def is_control(self):
        return True

    def __repr__(self):
        return (f"ControlRecord(offset={self.offset}, timestamp={self.timestamp}, "
                f"control_type={self.control_type}, coordinator_epoch={self.coordinator_epoch})")


@cython.freelist(256)
cdef class RecordMetadata:
    """What ``append`` returns: ``offset_delta``, ``timestamp`` and ``size`` in bytes."""

    def __init__(self, offset_delta, timestamp, size):
        self.offset_delta = offset_delta
        self.timestamp = timestamp
        self.size = size

    def __eq__(self, other):
        if not isinstance(other, RecordMetadata):
            return NotImplemented
        return (self.offset_delta, self.timestamp, self.size) == (
            other.offset_delta, other.timestamp, other.size)

    __hash__ = None

    def __repr__(self):
        return (f"RecordMetadata(offset_delta={self.offset_delta}, "
                f"timestamp={self.timestamp}, size={self.size})")


cdef Record new_record(int64_t offset, int64_t timestamp, int timestamp_type, object key,
                       object value, list headers, int attributes):
    cdef Record r = Record.__new__(Record)
    r.offset = offset
    r.timestamp = timestamp
    r.timestamp_type = timestamp_type
    r.key = key
    r.value = value
    r.headers = headers
    r.attributes = attributes
    return r


cdef ControlRecord make_control(int64_t offset, int64_t timestamp, int timestamp_type,
                                object key, object value, list headers, int attributes,
                                Py_ssize_t where):
    cdef ControlRecord r = ControlRecord.__new__(ControlRecord)
    cdef const uint8_t* p
    r.offset = offset
    r.timestamp = timestamp
    r.timestamp_type = timestamp_type
    r.key = key
    r.value = value
    r.headers = headers
    r.attributes = attributes
    if key is None or PyBytes_GET_SIZE(key) < 4:
        raise_corrupt("control record key shorter than 4 bytes", where)
    p = <const uint8_t*>PyBytes_AS_STRING(key)
    r.version = <int16_t>be_u16(p)
    r.control_type = <int16_t>be_u16(p + 2)
    r.coordinator_epoch = None
    if r.control_type == 0 or r.control_type == 1:
        if value is None or PyBytes_GET_SIZE(value) < 6:
            raise_corrupt("transaction marker value shorter than 6 bytes", where)
        p = <const uint8_t*>PyBytes_AS_STRING(value)
        r.coordinator_epoch = <int32_t>be_u32(p + 2)
    return r


cdef RecordMetadata new_metadata(int64_t offset_delta, int64_t timestamp, Py_ssize_t size):
    cdef RecordMetadata m = RecordMetadata.__new__(RecordMetadata)
    m.offset_delta = offset_delta
    m.timestamp = timestamp
    m.size = size
    return m


cdef extern from "Python.h":
    long long PyLong_AsLongLongAndOverflow(object, int*) except? -1


cdef class ByteHolder:
    """Keeps a buffer view of a key, value or header value alive for one append."""

    def __dealloc__(self):
        if self.held:
            PyBuffer_Release(&self.view)
            self.held = False


cdef object take_bytes(object value, str what, const uint8_t** ptr, Py_ssize_t* size):
    """Point ptr/size at the bytes of ``value`` (bytes-like; None gives size -1) and return
    the object that keeps them alive. Anything else: EncodeError, as the pure twin."""
    cdef ByteHolder h
    if value is None:
        ptr[0] = NULL
        size[0] = -1
        return None
    if type(value) is bytes:
        ptr[0] = <const uint8_t*>PyBytes_AS_STRING(value)
        size[0] = PyBytes_GET_SIZE(value)
        return value
    if isinstance(value, str):
        raise EncodeError(f"{what} must be bytes-like or None, not str")
    h = ByteHolder.__new__(ByteHolder)
    try:
        PyObject_GetBuffer(value, &h.view, PyBUF_SIMPLE)
    except TypeError:
        raise EncodeError(
            f"{what} must be bytes-like or None, not {type(value).__name__}") from None
    except BufferError:
        value = memoryview(value).tobytes()
        ptr[0] = <const uint8_t*>PyBytes_AS_STRING(value)
        size[0] = PyBytes_GET_SIZE(value)
        return value
    h.held = True
    ptr[0] = <const uint8_t*>h.view.buf
    size[0] = h.view.len
    return h


cdef int64_t check_i64(object value, int64_t lo, int64_t hi, str what) except? -1:
    """An int in [lo, hi] or EncodeError (the same text as the pure twin's check_int)."""
    cdef int overflow = 0
    cdef long long x
    if not isinstance(value, int):
        raise EncodeError(f"{what} must be an int, not {type(value).__name__}")
    x = PyLong_AsLongLongAndOverflow(value, &overflow)
    if overflow or x < lo or x > hi:
        raise EncodeError(f"{what} {value} out of range ({lo}..{hi})")
    return x


cdef class Growable:
    """A growable C byte buffer for the builders."""

    def __dealloc__(self):
        if self.data != NULL:
            PyMem_Free(self.data)
            self.data = NULL

    cdef int reserve(self, Py_ssize_t extra) except -1:
        cdef Py_ssize_t want = self.length + extra
        cdef Py_ssize_t cap
        cdef uint8_t* p
        if want <= self.capacity:
            return 0
        cap = self.capacity * 2 if self.capacity else 4096
        if cap < want:
            cap = want
        p = <uint8_t*>PyMem_Realloc(self.data, cap)
        if p == NULL:
            raise MemoryError()
        self.data = p
        self.capacity = cap
        return 0
