"""Compiled twin of kcodec._py.legacy (see its docstring for the MessageSet v0/v1 layout)."""

cimport cython
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.mem cimport PyMem_Free, PyMem_Realloc
from cpython.list cimport PyList_New, PyList_SET_ITEM
from cpython.memoryview cimport PyMemoryView_FromMemory
from cpython.ref cimport Py_INCREF
from cpython.buffer cimport PyBUF_READ
from libc.stdint cimport INT64_MIN, INT64_MAX, int8_t, int32_t, int64_t, uint8_t, uint32_t, uint64_t
from libc.string cimport memcpy

from kcodec._cy.compression cimport decompress_codec
from kcodec._cy._reader cimport (
    Buf, be_u32, be_u64, put_u32, put_u64, raise_corrupt, raise_truncated, get_buf,
)
from kcodec._cy._record cimport (
    Growable, check_i64, crc32_ieee, new_metadata, new_record, take_bytes,
)
from kcodec._cy._record cimport Record as CRecord

import time


from kcodec._cy.compression import compress
from kcodec._limits import DEFAULT_MAX_SIZE
from kcodec.errors import ChecksumError, CorruptDataError, EncodeError

__all__ = ["LegacyBatch", "MessageSetBuilder"]

cdef int64_t _I64_MIN = INT64_MIN
cdef int64_t _I64_MAX = INT64_MAX
cdef Py_ssize_t _I32_MAX = 0x7FFFFFFF


cdef inline int _need(Py_ssize_t pos, Py_ssize_t end, Py_ssize_t n, str what,
                      Py_ssize_t base) except -1:
    if n < 0:
        raise_corrupt(f"negative length {n} for {what}", pos + base)
    if n > end - pos:
        raise_truncated(n, pos + base, end - pos, what)
    return 0


cdef inline uint32_t _crc32(const uint8_t* p, Py_ssize_t n) noexcept:
    if n >= 65536:
        with nogil:
            return crc32_ieee(0, p, <size_t>n)
    return crc32_ieee(0, p, <size_t>n)


cdef struct Msg:
    int64_t offset
    int32_t size
    uint32_t crc
    int magic
    int attributes
    int64_t timestamp
    Py_ssize_t kpos
    Py_ssize_t klen          # -1: null
    Py_ssize_t vpos
    Py_ssize_t vlen
    Py_ssize_t end


cdef int _parse(const uint8_t* data, Py_ssize_t pos, Py_ssize_t end, Py_ssize_t base,
                Msg* m) except -1:
    cdef Py_ssize_t p, mend
    cdef int32_t n
    _need(pos, end, 18, "message header", base)
    m.offset = <int64_t>be_u64(data + pos)
    m.size = <int32_t>be_u32(data + pos + 8)
    m.crc = be_u32(data + pos + 12)
    m.magic = <int8_t>data[pos + 16]
    m.attributes = <int8_t>data[pos + 17]
    _need(pos + 12, end, m.size, "message", base)
    mend = pos + 12 + m.size
    p = pos + 18
    m.timestamp = -1
    if m.magic == 1:
        _need(p, mend, 8, "message timestamp", base)
        m.timestamp = <int64_t>be_u64(data + p)
        p += 8
    elif m.magic != 0:
        raise_corrupt(f"unknown magic byte {m.magic}", pos + 16 + base)
    _need(p, mend, 4, "message key length", base)
    n = <int32_t>be_u32(data + p)
    p += 4
    m.klen = -1
    m.kpos = p
    if n != -1:
        _need(p, mend, n, "message key", base)
        m.klen = n
        p += n
    _need(p, mend, 4, "message value length", base)
    n = <int32_t>be_u32(data + p)
    p += 4
    m.vlen = -1
    m.vpos = p
    if n != -1:
        _need(p, mend, n, "message value", base)
        m.vlen = n
        p += n
    if p != mend:
        raise_corrupt(f"message size {m.size} but its fields took {p - pos - 12} bytes",
                      pos + 8 + base)
    m.end = mend
    return 0


cdef inline object _bytes_or_none(const uint8_t* data, Py_ssize_t pos, Py_ssize_t n):
    if n < 0:
        return None
    return PyBytes_FromStringAndSize(<const char*>data + pos, n)


cdef inline void _lazy_crc(CRecord r, int magic, int attributes, int64_t timestamp) noexcept:
    # What the record needs to compute its message's CRC-32 on demand (see _record.pyx):
    # no second pass over the bytes for a check most consumers never make
    r.computed_crc_ = -2 - (magic | ((attributes & 0xFF) << 1))
    r.raw_key_ = r.key
    r.raw_value_ = r.value
    r.raw_ts_ = timestamp


@cython.freelist(64)
cdef class LegacyBatch:
    """One top-level legacy message: a plain message (one record) or a compressed wrapper
    (its inner messages are the records). Fields follow RecordBatch where they apply."""

    @property
    def partition_leader_epoch(self):
        return -1

    @property
    def producer_id(self):
        return -1

    @property
    def producer_epoch(self):
        return -1

    @property
    def base_sequence(self):
        return -1

    @property
    def is_transactional(self):
        return False

    @property
    def is_control(self):
        return False

    @property
    def size(self):
        return self.message_size + 12

    @property
    def compression(self):
        return self.attributes & 0x07

    @property
    def timestamp_type(self):
        return -1 if self.magic == 0 else (self.attributes >> 3) & 1

    @property
    def first_timestamp(self):
        return self.timestamp

    @property
    def max_timestamp(self):
        return self.timestamp

    @property
    def last_offset(self):
        return self.offset

    @property
    def next_offset(self):
        return <int64_t>(<uint64_t>self.offset + 1)

    @property
    def base_offset(self):
        """The first record's offset (decompresses a wrapper)."""
        if self.attributes & 0x07 == 0:
            return self.offset
        self._prepare()
        return <int64_t>(<uint64_t>self._first + <uint64_t>self._shift)

    @property
    def record_count(self):
        """1 for a plain message; the inner message count of a wrapper (decompresses it)."""
        if self.attributes & 0x07 == 0:
            return 1
        self._prepare()
        return self._n

    @property
    def key(self):
        return _bytes_or_none(self._buf.ptr, self._kpos, self._klen)

    @property
    def value(self):
        return _bytes_or_none(self._buf.ptr, self._vpos, self._vlen)

    def computed_crc(self):
        return _crc32(self._buf.ptr + self.position + 16, self.message_size - 4)

    def validate_crc(self):
        return self.computed_crc() == self.crc

    def check_crc(self):
        actual = self.computed_crc()
        if actual != self.crc:
            raise ChecksumError(self.crc, actual, self.position, "message CRC-32")

    def records(self):
        return list(self.__iter__())

    def __iter__(self):
        cdef LegacyIterator it
        cdef CRecord r
        cdef One one
        if self.attributes & 0x07 == 0:
            r = new_record(self.offset, self.timestamp,
                           -1 if self.magic == 0 else (self.attributes >> 3) & 1,
                           _bytes_or_none(self._buf.ptr, self._kpos, self._klen),
                           _bytes_or_none(self._buf.ptr, self._vpos, self._vlen), [],
                           self.attributes, 12 + self.message_size)
            r.crc_ = self.crc
            # With validation the iterator checked this CRC before handing out the batch;
            # without, it is computed when validate_crc() first asks
            if self._validate:
                r.computed_crc_ = self.crc
            else:
                _lazy_crc(r, self.magic, self.attributes, self.timestamp)
            one = One.__new__(One)
            one.record = r
            return one
        self._prepare()
        it = LegacyIterator.__new__(LegacyIterator)
        it.inner = self._inner
        it.data = <const uint8_t*>PyBytes_AS_STRING(self._inner)
        it.end = PyBytes_GET_SIZE(self._inner)
        it.pos = 0
        it.left = self._n
        it.shift = self._shift
        it.log_append = self.magic == 1 and (self.attributes >> 3) & 1
        it.wts = self.timestamp
        it.checked = self._validate   # _prepare checked every inner CRC then
        return it

    def __next__(self):
        """The next record of one iteration kept by the batch (``next(batch)``)."""
        if self._it is None:
            self._it = self.__iter__()
        return next(self._it)

    @staticmethod
    def from_bytes(buf, *, validate_crc=True, max_decompressed_size=DEFAULT_MAX_SIZE):
        """The one top-level legacy message that ``buf`` holds, exactly (TruncatedError when
        it is cut short, CorruptDataError for magic 2 or bytes after it)."""
        from kcodec._cy.batch import single_batch

        return single_batch(buf, validate_crc, max_decompressed_size, False)

    def __repr__(self):
        return (f"LegacyBatch(position={self.position}, offset={self.offset}, "
                f"magic={self.magic}, compression={self.compression}, size={self.size})")

    cdef int _prepare(self) except -1:
        """Decompress a wrapper once and check every inner message (the errors the pure
        twin raises, in its order), noting the count, the first offset and the shift that
        makes magic-1 relative offsets absolute."""
        cdef int codec = self.attributes & 0x07
        cdef const uint8_t* data
        cdef Py_ssize_t end, pos = 0, n = 0
        cdef Msg m
        cdef int wmagic = self.magic
        cdef int64_t first = 0, last = 0, shift = 0
        cdef uint32_t actual
        if self._inner is not None:
            return 0
        if self._vlen < 0:
            raise_corrupt("compressed message with a null value", self.position)
        inner = decompress_codec(codec, PyMemoryView_FromMemory(
            <char*>self._buf.ptr + self._vpos, self._vlen, PyBUF_READ), self._max_size,
            self.magic)
        if type(inner) is not bytes:
            inner = bytes(inner)
        data = <const uint8_t*>PyBytes_AS_STRING(inner)
        end = PyBytes_GET_SIZE(inner)
        while pos < end:
            _need(pos, end, 12, "inner message", 0)
            _parse(data, pos, end, 0, &m)
            if m.magic != wmagic:
                raise_corrupt(f"inner message magic {m.magic} differs from the wrapper's "
                              f"{wmagic}", pos + 16)
            if m.attributes & 0x07:
                raise_corrupt("compressed message inside a compressed message", pos + 17)
            if self._validate:
                actual = _crc32(data + pos + 16, m.end - pos - 16)
                if actual != m.crc:
                    raise ChecksumError(m.crc, actual, pos, "inner message CRC-32")
            if n == 0:
                first = m.offset
            last = m.offset
            n += 1
            pos = m.end
        if n == 0:
            raise_corrupt("compressed message holds no inner messages", self.position)
        if wmagic == 1:
            # The absolute offset of relative offset 0; a wrapper written without its last
            # offset (0, as some clients do) keeps the inner offsets as they are, as Java does.
            shift = <int64_t>(<uint64_t>self.offset - <uint64_t>last)
            if shift < 0:
                shift = 0
        self._n = n
        self._first = first
        self._shift = shift
        self._inner = inner
        return 0


@cython.final
@cython.freelist(16)
cdef class One:
    """The one record of a plain message (one object where iter((r,)) makes two)."""

    cdef object record

    def __iter__(self):
        return self

    def __next__(self):
        r = self.record
        if r is None:
            raise StopIteration
        self.record = None
        return r


cdef inline void _reparse(const uint8_t* data, Py_ssize_t pos, Msg* m) noexcept:
    # _parse for a message _prepare already parsed and checked: the same fields, no checks
    cdef Py_ssize_t p = pos + 18
    cdef int32_t n
    m.offset = <int64_t>be_u64(data + pos)
    m.size = <int32_t>be_u32(data + pos + 8)
    m.crc = be_u32(data + pos + 12)
    m.magic = <int8_t>data[pos + 16]
    m.attributes = <int8_t>data[pos + 17]
    m.timestamp = -1
    if m.magic == 1:
        m.timestamp = <int64_t>be_u64(data + p)
        p += 8
    n = <int32_t>be_u32(data + p)
    p += 4
    m.kpos = p
    m.klen = n
    if n != -1:
        p += n
    n = <int32_t>be_u32(data + p)
    p += 4
    m.vpos = p
    m.vlen = n
    m.end = pos + 12 + m.size


@cython.final
cdef class LegacyIterator:
    """The records of a checked, decompressed wrapper, one per step."""

    cdef bytes inner
    cdef const uint8_t* data
    cdef Py_ssize_t end
    cdef Py_ssize_t pos
    cdef Py_ssize_t left
    cdef int64_t shift
    cdef bint log_append
    cdef int64_t wts
    cdef bint checked

    def __iter__(self):
        return self

    def __next__(self):
        cdef Msg m
        cdef int ts_type
        cdef int64_t ts
        cdef CRecord r
        cdef Py_ssize_t start = self.pos
        if self.left <= 0:
            raise StopIteration
        _reparse(self.data, self.pos, &m)  # parsed and checked by _prepare
        self.pos = m.end
        self.left -= 1
        ts = m.timestamp
        if self.log_append:
            ts_type = 1
            ts = self.wts
        else:
            ts_type = -1 if m.magic == 0 else (m.attributes >> 3) & 1
        r = new_record(<int64_t>(<uint64_t>m.offset + <uint64_t>self.shift), ts, ts_type,
                       _bytes_or_none(self.data, m.kpos, m.klen),
                       _bytes_or_none(self.data, m.vpos, m.vlen), [], m.attributes,
                       m.end - start)
        r.crc_ = m.crc
        if self.checked:
            r.computed_crc_ = m.crc
        else:
            _lazy_crc(r, m.magic, m.attributes, m.timestamp)
        return r


cdef LegacyBatch message_at(Buf buf, Py_ssize_t pos, bint validate, Py_ssize_t max_size):
    """The top-level message at ``pos`` (whose framing the caller checked, and with
    ``validate`` its CRC-32: its records then take the stored CRC as computed)."""
    cdef Msg m
    cdef LegacyBatch b = LegacyBatch.__new__(LegacyBatch)
    _parse(buf.ptr, pos, buf.size, 0, &m)
    b.position = pos
    b.offset = m.offset
    b.message_size = m.size
    b.crc = m.crc
    b.magic = m.magic
    b.attributes = m.attributes
    b.timestamp = m.timestamp
    b._kpos = m.kpos
    b._klen = m.klen
    b._vpos = m.vpos
    b._vlen = m.vlen
    b._buf = buf
    b._validate = validate
    b._max_size = max_size
    b._inner = None
    return b




cdef Py_ssize_t _write_message(Growable g, int64_t offset, int magic, int attributes,
                               int64_t ts, const uint8_t* k, Py_ssize_t kl, const uint8_t* v,
                               Py_ssize_t vl) except -1:
    """Write one entry after g.length (not committed); its size in bytes."""
    cdef Py_ssize_t body, size, total
    cdef uint8_t* p
    cdef uint8_t* q
    if kl > _I32_MAX:
        raise EncodeError(f"message field of {kl} bytes too long")
    if vl > _I32_MAX:
        raise EncodeError(f"message field of {vl} bytes too long")
    body = 2 + (8 if magic else 0) + 8 + (kl if kl > 0 else 0) + (vl if vl > 0 else 0)
    size = body + 4
    if size > _I32_MAX:
        raise EncodeError(f"message of {size} bytes too large")
    total = 12 + size
    g.reserve(total)
    p = g.data + g.length
    put_u64(p, <uint64_t>offset)
    put_u32(p + 8, <uint32_t>size)
    q = p + 16
    q[0] = <uint8_t>magic
    q[1] = <uint8_t>attributes
    q += 2
    if magic:
        put_u64(q, <uint64_t>ts)
        q += 8
    put_u32(q, <uint32_t>(<int32_t>kl if kl >= 0 else -1))
    q += 4
    if kl > 0:
        memcpy(q, k, kl)
        q += kl
    put_u32(q, <uint32_t>(<int32_t>vl if vl >= 0 else -1))
    q += 4
    if vl > 0:
        memcpy(q, v, vl)
    put_u32(p + 12, _crc32(p + 16, body))
    return total


cdef class MessageSetBuilder:
    """Builds a legacy message set (magic 0 or 1). With a codec, the messages are written
    as one compressed wrapper message, as the Java client did: inner offsets relative for
    magic 1 (absolute for magic 0), the wrapper carrying the last offset and the largest
    timestamp. ``append`` returns a RecordMetadata (``crc``: the message's CRC-32) or None
    when ``max_size`` is reached. The accounting options are as in the pure twin."""

    cdef int _magic
    cdef int _codec
    cdef object _level
    cdef int64_t _base_offset
    cdef int _ts_type
    cdef Py_ssize_t _max_size
    cdef Growable _buf
    cdef Py_ssize_t _count
    cdef int64_t _last_delta
    cdef int64_t _max_ts
    cdef bint _overhead
    cdef bint _full_at_max
    cdef bint _zero_wrapper

    def __init__(self, *, magic=1, compression=0, compression_level=None, base_offset=0,
                 timestamp_type=0, max_size=1048576, wrapper_overhead=True, full_at_max=False,
                 zero_wrapper=False):
        self._overhead = bool(wrapper_overhead)
        self._full_at_max = bool(full_at_max)
        self._zero_wrapper = bool(zero_wrapper)
        self._magic = check_i64(magic, 0, 1, "magic")
        self._codec = check_i64(compression, 0, 4, "compression codec")
        if self._codec == 4:
            raise EncodeError("zstd needs magic 2")
        if compression_level is not None:
            compress(self._codec, b"", compression_level, magic=self._magic)
        self._level = compression_level
        self._base_offset = check_i64(base_offset, _I64_MIN, _I64_MAX, "base offset")
        self._ts_type = check_i64(timestamp_type, 0, 1, "timestamp type")
        self._max_size = check_i64(max_size, 0, _I32_MAX, "max size")
        self._buf = Growable.__new__(Growable)
        self._count = 0
        self._last_delta = -1
        self._max_ts = -1

    @property
    def record_count(self):
        return self._count

    @property
    def size(self):
        """Bytes the set takes so far (uncompressed, with a wrapper's overhead unless made
        with ``wrapper_overhead=False``)."""
        if self._codec and self._overhead:
            return self._buf.length + (26 if self._magic == 0 else 34)
        return self._buf.length

    def append(self, key, value, timestamp=None, offset_delta=None):
        """Add a message; its metadata, or None if the set is full."""
        cdef int64_t od, ts, inner
        cdef const uint8_t* kp
        cdef const uint8_t* vp
        cdef Py_ssize_t kl, vl, size, cur
        cdef uint32_t crc
        if offset_delta is None:
            if self._last_delta == _I64_MAX:
                raise EncodeError(f"offset delta {(<object>self._last_delta) + 1} out of range "
                                  f"(0..{_I64_MAX})")
            od = self._last_delta + 1
        else:
            od = check_i64(offset_delta, 0, _I64_MAX, "offset delta")
            if od <= self._last_delta:
                raise EncodeError(f"offset delta {od} not above the previous {self._last_delta}")
        if self._magic == 0:
            ts = -1
        elif timestamp is None:
            ts = <int64_t>(time.time() * 1000)
        else:
            ts = check_i64(timestamp, _I64_MIN, _I64_MAX, "timestamp")
        kh = take_bytes(key, "record key", &kp, &kl)
        vh = take_bytes(value, "record value", &vp, &vl)
        if self._codec and self._magic == 1:
            inner = od
        else:
            if self._base_offset > 0 and od > _I64_MAX - self._base_offset:
                raise EncodeError(f"offset {(<object>self._base_offset) + od} out of range")
            inner = self._base_offset + od
        size = _write_message(self._buf, inner, self._magic,
                              self._ts_type << 3 if self._magic else 0, ts, kp, kl, vp, vl)
        cur = self._buf.length + ((26 if self._magic == 0 else 34)
                                  if self._codec and self._overhead else 0)
        if self._count and (cur + size > self._max_size
                            or (self._full_at_max and cur + size == self._max_size)):
            return None
        crc = be_u32(self._buf.data + self._buf.length + 12)
        self._buf.length += size
        self._count += 1
        self._last_delta = od
        if ts > self._max_ts or self._count == 1:
            self._max_ts = ts
        return new_metadata(od, ts, size, crc)

    def build(self):
        """The message set bytes (one wrapper message when compressed)."""
        cdef Growable w
        cdef bytes payload
        cdef Py_ssize_t size
        if not self._codec or not self._count:
            return PyBytes_FromStringAndSize(<char*>self._buf.data, self._buf.length)
        payload = compress(self._codec, PyBytes_FromStringAndSize(
            <char*>self._buf.data, self._buf.length), self._level, magic=self._magic)
        w = Growable.__new__(Growable)
        if self._zero_wrapper:
            size = _write_message(w, 0, self._magic, self._codec, 0, NULL, -1,
                                  <const uint8_t*>PyBytes_AS_STRING(payload),
                                  PyBytes_GET_SIZE(payload))
            return PyBytes_FromStringAndSize(<char*>w.data, size)
        if self._base_offset > 0 and self._last_delta > _I64_MAX - self._base_offset:
            raise EncodeError(f"offset {(<object>self._base_offset) + self._last_delta} out of range")
        size = _write_message(w, self._base_offset + self._last_delta, self._magic,
                              self._codec | (self._ts_type << 3 if self._magic else 0),
                              self._max_ts, NULL, -1,
                              <const uint8_t*>PyBytes_AS_STRING(payload),
                              PyBytes_GET_SIZE(payload))
        return PyBytes_FromStringAndSize(<char*>w.data, size)
