"""Compiled record objects and helpers shared by kcodec._cy.batch and kcodec._cy.legacy:
Record, ControlRecord, RecordMetadata (the same fields and behaviour as kcodec/_py/_record.py),
input checks and a growable buffer for the builders.
"""

cimport cython
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE
from libc.stdint cimport int16_t, int32_t, int64_t, uint8_t, uint32_t, uint64_t

from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.mem cimport PyMem_Malloc
from cpython.object cimport PyObject
from cpython.ref cimport Py_DECREF, Py_INCREF

from kcodec._cy._reader cimport be_u16, be_u32, put_u32, put_u64, raise_corrupt

from kcodec.errors import EncodeError, EncodeTypeError

__all__ = ["Record", "ControlRecord", "RecordMetadata", "parse_control"]


cdef extern from "Python.h":
    ctypedef struct PyMemberDef:
        const char* name
        int type
        Py_ssize_t offset
        int flags
        const char* doc
    ctypedef struct PyTypeObject:
        Py_ssize_t tp_basicsize
        PyObject* tp_dict
        object (*tp_getattro)(object, object)
        object (*tp_new)(PyTypeObject*, object, PyObject*)
    object PyDescr_NewMember(PyTypeObject* t, PyMemberDef* m)
    void PyType_Modified(PyTypeObject* t)
    object PyObject_GenericGetAttr(object, object)
    object PyLong_FromLongLong(long long)
    long long PyLong_AsLongLong(object) except? -1


cdef extern from "structmember.h":
    int T_OBJECT_EX


@cython.freelist(256)
@cython.no_gc
cdef class Record:
    """One record: ``offset``, ``timestamp``, ``timestamp_type`` (-1 none, 0 create time,
    1 log append time), ``key`` and ``value`` (bytes or None), ``headers`` (a list of
    (str, bytes or None) pairs, order and duplicates kept) and ``attributes``.

    Records are not tracked by the cyclic GC (they hold bytes, ints and the headers list):
    a record put into its own headers list is never freed.

    ``size_in_bytes``, ``checksum`` and ``validate_crc()`` are as in the pure twin."""

    def __init__(self, offset, timestamp, timestamp_type, key, value, headers, attributes=0,
                 size_in_bytes=0, checksum=None, computed_crc=None):
        self.offset = offset
        self.timestamp = timestamp
        self.timestamp_type = timestamp_type
        self.key = key
        self.value = value
        self.headers = headers
        self.attributes = attributes
        self.size_ = size_in_bytes
        self.crc_ = -1 if checksum is None else <uint32_t>checksum
        self.computed_crc_ = -1 if computed_crc is None else <uint32_t>computed_crc

    @property
    def size_in_bytes(self):
        return self.size_

    @size_in_bytes.setter
    def size_in_bytes(self, Py_ssize_t value):
        self.size_ = value

    @property
    def checksum(self):
        return None if self.crc_ < 0 else self.crc_

    def validate_crc(self):
        """Whether a legacy message's stored CRC-32 matches its bytes (True for v2 records)."""
        if self.computed_crc_ <= -2:
            self.computed_crc_ = _message_crc(self)
        return self.crc_ == self.computed_crc_

    @property
    def is_control(self):
        return False

    def _tuple(self):
        return (self.offset, self.timestamp, self.timestamp_type, self.key, self.value,
                self.headers, self.attributes, self.is_control)

    def __eq__(self, other):
        if not isinstance(other, Record):
            return NotImplemented
        return self._tuple() == other._tuple()

    __hash__ = None

    def __repr__(self):
        return (f"Record(offset={self.offset}, timestamp={self.timestamp}, "
                f"key={self.key!r}, value={self.value!r}, headers={self.headers!r})")


@cython.no_gc
cdef class ControlRecord(Record):
    """A record of a control batch: ``control_type`` (0 abort, 1 commit; KRaft uses more),
    ``version`` of the control key, and ``coordinator_epoch`` (commit and abort markers;
    None for other types)."""

    @property
    def is_control(self):
        return True

    def _tuple(self):
        return Record._tuple(self) + (self.control_type, self.version, self.coordinator_epoch)

    def __repr__(self):
        return (f"ControlRecord(offset={self.offset}, timestamp={self.timestamp}, "
                f"control_type={self.control_type}, coordinator_epoch={self.coordinator_epoch})")


@cython.freelist(64)
@cython.no_gc
cdef class RecordMetadata:
    """What a builder's ``append`` returns: ``offset_delta`` (from the base offset),
    ``timestamp`` (as written), ``size`` (bytes the record takes in the batch) and ``crc``
    (a legacy message's CRC-32; None for v2 records). Its fields are declared in
    _record.pxd, so that kcodec._cy.peer can subclass it in C."""

    def __init__(self, offset_delta, timestamp, size, crc=None):
        self.offset_delta = offset_delta
        self.timestamp = timestamp
        self.size = size
        self.crc = crc

    def __eq__(self, other):
        if not isinstance(other, RecordMetadata):
            return NotImplemented
        return (self.offset_delta, self.timestamp, self.size) == (
            other.offset_delta, other.timestamp, other.size)

    __hash__ = None

    def __repr__(self):
        return (f"RecordMetadata(offset_delta={self.offset_delta}, "
                f"timestamp={self.timestamp}, size={self.size})")


# -- plain member descriptors --------------------------------------------------------------
# Cython exposes object fields through getset properties; CPython's specialising interpreter
# only turns ``record.value`` into a direct slot load (LOAD_ATTR_SLOT) for member descriptors
# of type T_OBJECT_EX, as __slots__ make. Reading fields is most of what a consumer does, so
# each field gets such a descriptor (measured: 4-5x faster attribute reads). The field
# offsets are found by planting a sentinel in each field of a fresh instance.

cdef list _descriptor_names = []   # keeps the C strings of the names alive


cdef Py_ssize_t _find(object inst, Py_ssize_t size, object sentinel) except -1:
    cdef PyObject** p = <PyObject**><PyObject*>inst
    cdef Py_ssize_t i
    for i in range(size // <Py_ssize_t>sizeof(PyObject*)):
        if p[i] == <PyObject*>sentinel:
            return i * sizeof(PyObject*)
    raise RuntimeError("record field not found")


cdef int _install(type cls, tuple names, object inst, list sentinels) except -1:
    cdef PyTypeObject* t = <PyTypeObject*>cls
    cdef PyMemberDef* defs = <PyMemberDef*>PyMem_Malloc(sizeof(PyMemberDef) * len(names))
    cdef Py_ssize_t i
    cdef bytes bname
    if defs == NULL:
        raise MemoryError()
    for i, name in enumerate(names):
        bname = name.encode("ascii")
        _descriptor_names.append(bname)
        defs[i].name = <const char*>bname
        defs[i].type = T_OBJECT_EX
        defs[i].offset = _find(inst, t.tp_basicsize, sentinels[i])
        defs[i].flags = 0
        defs[i].doc = NULL
        (<dict><object>t.tp_dict)[name] = PyDescr_NewMember(t, &defs[i])
    t.tp_getattro = PyObject_GenericGetAttr
    PyType_Modified(t)
    return 0


cdef int _install_all() except -1:
    cdef Record r = Record.__new__(Record)
    cdef ControlRecord c = ControlRecord.__new__(ControlRecord)
    cdef RecordMetadata m = RecordMetadata.__new__(RecordMetadata)
    s = [object() for _ in range(7)]
    r.offset, r.timestamp, r.timestamp_type, r.key, r.value, r.headers, r.attributes = s
    _install(Record, ("offset", "timestamp", "timestamp_type", "key", "value", "headers",
                      "attributes"), r, s)
    s = [object() for _ in range(3)]
    c.control_type, c.version, c.coordinator_epoch = s
    _install(ControlRecord, ("control_type", "version", "coordinator_epoch"), c, s)
    s = [object() for _ in range(4)]
    m.offset_delta, m.timestamp, m.size, m.crc = s
    _install(RecordMetadata, ("offset_delta", "timestamp", "size", "crc"), m, s)
    return 0


_install_all()


cdef int64_t _message_crc(Record r) except? -1:
    """The CRC-32 of the legacy message a record was read from, rebuilt from what it kept:
    magic, attributes, [timestamp], key length, key, value length, value (the message's
    bytes after its CRC, exactly, since the reader checked that its fields fill it)."""
    cdef int64_t code = -2 - r.computed_crc_
    cdef uint8_t head[14]
    cdef Py_ssize_t n = 2
    cdef uint32_t c
    cdef object key = r.raw_key_, value = r.raw_value_
    head[0] = <uint8_t>(code & 1)
    head[1] = <uint8_t>(code >> 1)
    if code & 1:
        put_u64(head + 2, <uint64_t>r.raw_ts_)
        n = 10
    put_u32(head + n, 0xFFFFFFFF if key is None else <uint32_t>PyBytes_GET_SIZE(key))
    c = crc32_ieee(0, head, <size_t>(n + 4))
    if key is not None:
        c = crc32_ieee(c, <const uint8_t*>PyBytes_AS_STRING(key), <size_t>PyBytes_GET_SIZE(key))
    put_u32(head, 0xFFFFFFFF if value is None else <uint32_t>PyBytes_GET_SIZE(value))
    c = crc32_ieee(c, head, 4)
    if value is not None:
        c = crc32_ieee(c, <const uint8_t*>PyBytes_AS_STRING(value),
                       <size_t>PyBytes_GET_SIZE(value))
    return c


cdef object new_record(int64_t offset, int64_t timestamp, int timestamp_type, object key,
                       object value, list headers, int attributes, Py_ssize_t size):
    cdef Record r = Record.__new__(Record)
    r.size_ = size
    r.crc_ = -1
    r.computed_crc_ = -1
    r.offset = PyLong_FromLongLong(offset)
    r.timestamp = PyLong_FromLongLong(timestamp)
    r.timestamp_type = timestamp_type
    r.key = key
    r.value = value
    r.headers = headers
    r.attributes = attributes
    return r


cdef object make_control(int64_t offset, int64_t timestamp, int timestamp_type,
                         object key, object value, list headers, int attributes,
                         Py_ssize_t where, Py_ssize_t size):
    cdef const uint8_t* p
    cdef int ctype
    cdef ControlRecord r = ControlRecord.__new__(ControlRecord)
    r.size_ = size
    r.crc_ = -1
    r.computed_crc_ = -1
    r.offset = PyLong_FromLongLong(offset)
    r.timestamp = PyLong_FromLongLong(timestamp)
    r.timestamp_type = timestamp_type
    r.key = key
    r.value = value
    r.headers = headers
    r.attributes = attributes
    if key is None or PyBytes_GET_SIZE(key) < 4:
        raise_corrupt("control record key shorter than 4 bytes", where)
    p = <const uint8_t*>PyBytes_AS_STRING(key)
    ctype = <int16_t>be_u16(p + 2)
    r.version = <int>(<int16_t>be_u16(p))
    r.control_type = ctype
    r.coordinator_epoch = None
    if ctype == 0 or ctype == 1:
        if value is None or PyBytes_GET_SIZE(value) < 6:
            raise_corrupt("transaction marker value shorter than 6 bytes", where)
        p = <const uint8_t*>PyBytes_AS_STRING(value)
        r.coordinator_epoch = <int32_t>be_u32(p + 2)
    return r


cdef object new_metadata(int64_t offset_delta, int64_t timestamp, Py_ssize_t size,
                         int64_t crc=-1):
    cdef RecordMetadata m = RecordMetadata.__new__(RecordMetadata)
    m.offset_delta = PyLong_FromLongLong(offset_delta)
    m.timestamp = PyLong_FromLongLong(timestamp)
    m.size = size
    m.crc = None if crc < 0 else PyLong_FromLongLong(crc)
    return m


cdef tuple _NO_ARGS = ()


cdef object new_metadata_ts(int64_t offset_delta, int64_t timestamp, Py_ssize_t size,
                            object ts_obj):
    """A v2 append's RecordMetadata; ``ts_obj`` (an exact int equal to ``timestamp``, or
    None) is stored as the timestamp instead of a new int."""
    cdef RecordMetadata m = RecordMetadata.__new__(RecordMetadata)
    m.offset_delta = PyLong_FromLongLong(offset_delta)
    m.timestamp = PyLong_FromLongLong(timestamp) if ts_obj is None else ts_obj
    m.size = size
    m.crc = None
    return m


cdef object new_metadata_of(type cls, int64_t offset_delta, int64_t timestamp,
                            Py_ssize_t size, object ts_obj=None):
    """A RecordMetadata of subclass ``cls`` (a builder's metadata_class)."""
    cdef RecordMetadata m = (<PyTypeObject*>cls).tp_new(<PyTypeObject*>cls, _NO_ARGS, NULL)
    m.offset_delta = PyLong_FromLongLong(offset_delta)
    m.timestamp = PyLong_FromLongLong(timestamp) if ts_obj is None else ts_obj
    m.size = size
    m.crc = None
    return m


def parse_control(key, value, where=0):
    """A control record's (version, control type, coordinator epoch) from its key and value;
    see the pure twin."""
    cdef const uint8_t* p
    cdef int ctype
    if key is not None and type(key) is not bytes:
        key = bytes(key)
    if value is not None and type(value) is not bytes:
        value = bytes(value)
    if key is None or PyBytes_GET_SIZE(key) < 4:
        raise_corrupt("control record key shorter than 4 bytes", where)
    p = <const uint8_t*>PyBytes_AS_STRING(key)
    ctype = <int16_t>be_u16(p + 2)
    version = <int>(<int16_t>be_u16(p))
    epoch = None
    if ctype == 0 or ctype == 1:
        if value is None or PyBytes_GET_SIZE(value) < 6:
            raise_corrupt("transaction marker value shorter than 6 bytes", where)
        p = <const uint8_t*>PyBytes_AS_STRING(value)
        epoch = <int32_t>be_u32(p + 2)
    return version, ctype, epoch


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
        raise EncodeTypeError(f"{what} must be bytes-like or None, not str")
    h = ByteHolder.__new__(ByteHolder)
    try:
        PyObject_GetBuffer(value, &h.view, PyBUF_SIMPLE)
    except TypeError:
        raise EncodeTypeError(
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
        raise EncodeTypeError(f"{what} must be an int, not {type(value).__name__}")
    x = PyLong_AsLongLongAndOverflow(value, &overflow)
    if overflow or x < lo or x > hi:
        raise EncodeError(f"{what} {value} out of range ({lo}..{hi})")
    return x


cdef extern from "kcbuf.h":
    void* kcbuf_grow(void* p, size_t used, size_t* cap, size_t want, unsigned tag) nogil
    void kcbuf_release(void* p, size_t cap, unsigned tag) nogil

# kcbuf's tag for a builder's records (the column tags of _colbuf are 1-11, in their own cache)
cdef unsigned _BUILDER_TAG = 100


cdef class Growable:
    """A growable C byte buffer for the builders.

    From KCBUF_MIN bytes on it lives in src_c/kcbuf.c's blocks, which keep their pages when
    released: a producer fills one builder after another, each up to batch_size bytes, and
    with large batches (1 MB) the first touch of every page of every fresh buffer, a fault
    and a zeroing, was ~6% of the sending thread's time. This module's cache keeps at most
    64 MiB of released buffers (setup.py), about what Java's producer pools. Smaller
    buffers are the C heap's, which reuses them anyway."""

    def __dealloc__(self):
        if self.data != NULL:
            kcbuf_release(self.data, <size_t>self.capacity, _BUILDER_TAG)
            self.data = NULL

    cdef int reserve(self, Py_ssize_t extra) except -1:
        cdef Py_ssize_t want = self.length + extra
        cdef Py_ssize_t cap
        cdef size_t size = <size_t>self.capacity
        cdef uint8_t* p
        if want <= self.capacity:
            return 0
        cap = self.capacity * 2 if self.capacity else 4096
        if cap < want:
            cap = want
        p = <uint8_t*>kcbuf_grow(self.data, <size_t>self.length, &size, <size_t>cap,
                                 _BUILDER_TAG)
        if p == NULL:
            raise MemoryError()
        self.data = p
        self.capacity = <Py_ssize_t>size
        return 0


# -- CRC-32 (IEEE 802.3, zlib's) for legacy messages --------------------------------------
# Slicing-by-8 over tables built at import: a legacy message is ~100 bytes, where calling
# zlib.crc32 through Python costs more than the checksum itself.

cdef extern from *:
    uint32_t U32_ALL "0xFFFFFFFFu"
    uint32_t CRC32_POLY "0xEDB88320u"

cdef uint32_t _T[8][256]


cdef void _crc32_tables() noexcept:
    cdef uint32_t c
    cdef int i, k
    for i in range(256):
        c = i
        for k in range(8):
            c = (c >> 1) ^ (CRC32_POLY if (c & 1) else 0)
        _T[0][i] = c
    for i in range(256):
        c = _T[0][i]
        for k in range(1, 8):
            c = _T[0][c & 0xFF] ^ (c >> 8)
            _T[k][i] = c


_crc32_tables()


cdef extern from "crc32ieee.h":
    int kcodec_crc32_fold_available()
    uint32_t kcodec_crc32_fold(uint32_t state, const uint8_t* p, size_t n) nogil


# Runs from 64 bytes on fold 16-byte blocks with carry-less multiplication where the CPU has
# it (a 75 KB compressed wrapper: ~10x the tables); the tables take the rest.
cdef bint _fold = kcodec_crc32_fold_available()


cdef uint32_t crc32_ieee(uint32_t crc, const uint8_t* p, size_t n) noexcept nogil:
    cdef uint32_t c = crc ^ U32_ALL
    cdef uint32_t lo, hi
    cdef size_t m
    if n >= 64 and _fold:
        m = n & ~(<size_t>15)
        c = kcodec_crc32_fold(c, p, m)
        p += m
        n -= m
    while n >= 8:
        lo = c ^ (<uint32_t>p[0] | (<uint32_t>p[1] << 8) | (<uint32_t>p[2] << 16)
                  | (<uint32_t>p[3] << 24))
        hi = <uint32_t>p[4] | (<uint32_t>p[5] << 8) | (<uint32_t>p[6] << 16) | (<uint32_t>p[7] << 24)
        c = (_T[7][lo & 0xFF] ^ _T[6][(lo >> 8) & 0xFF] ^ _T[5][(lo >> 16) & 0xFF]
             ^ _T[4][lo >> 24] ^ _T[3][hi & 0xFF] ^ _T[2][(hi >> 8) & 0xFF]
             ^ _T[1][(hi >> 16) & 0xFF] ^ _T[0][hi >> 24])
        p += 8
        n -= 8
    while n:
        c = _T[0][(c ^ p[0]) & 0xFF] ^ (c >> 8)
        p += 1
        n -= 1
    return c ^ U32_ALL


def _crc32_ieee(data, value=0):
    """crc32_ieee over a bytes-like object (for tests: it must equal zlib.crc32)."""
    cdef const uint8_t* p
    cdef Py_ssize_t n
    keep = take_bytes(data, "data", &p, &n)
    return crc32_ieee(<uint32_t>value, p, <size_t>n)


def _crc32_fold_available():
    return bool(_fold)
