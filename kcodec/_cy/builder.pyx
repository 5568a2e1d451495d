"""Compiled twin of kcodec._py.builder (see it, and kcodec._py.batch for the RecordBatch v2
layout): one v2 batch built in a C buffer, the records written without a Python object
each, compressed (zstd from C through kcodec._cy._zstd), the CRC-32C filled in."""

from cpython.buffer cimport PyBUF_READ
from cpython.bytearray cimport PyByteArray_AS_STRING, PyByteArray_FromStringAndSize, PyByteArray_Resize
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE, _PyBytes_Resize
from cpython.memoryview cimport PyMemoryView_FromMemory
from cpython.object cimport PyObject
from cpython.ref cimport Py_DECREF, Py_XDECREF
from cpython.time cimport PyTime_TimeRaw
from cpython.tuple cimport PyTuple_GET_ITEM, PyTuple_GET_SIZE
from libc.stdint cimport INT64_MIN, INT64_MAX, int16_t, int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t
from libc.string cimport memcpy, memmove

from kcodec._cy._reader cimport put_u16, put_u32, put_u64, put_uvar, uvar_size, zigzag32, zigzag64
from kcodec._cy._record cimport Growable, check_i64, new_metadata_of, new_metadata_ts, take_bytes
from kcodec._cy._zstd cimport zstd_bound, zstd_compress_into
from kcodec._cy.crc cimport crc32c_of

from kcodec._cy._record import RecordMetadata
from kcodec._cy.compression import compress
from kcodec.errors import EncodeError, EncodeTypeError

__all__ = ["RecordBatchBuilder", "RecordMetadata", "record_size", "estimate_batch_size",
           "encode_values"]

cdef enum:
    HEADER_SIZE = 61

cdef int64_t _I64_MIN = INT64_MIN
cdef int64_t _I64_MAX = INT64_MAX
cdef int64_t _I32_MIN = -0x80000000
cdef int64_t _I32_MAX = 0x7FFFFFFF


cdef extern from "Python.h":
    # PyBytes_FromStringAndSize as an owned PyObject* that _PyBytes_Resize can take
    PyObject* _bytes_new "PyBytes_FromStringAndSize"(const char* s, Py_ssize_t n) except NULL
    const char* PyUnicode_AsUTF8AndSize(object s, Py_ssize_t* size) except NULL
    long long PyLong_AsLongLongAndOverflow(object, int*) except? -1
    Py_ssize_t PyUnicode_GET_LENGTH(object o)
    int PyUnicode_IS_COMPACT_ASCII(object o)
    void* PyUnicode_DATA(object o)


cdef inline int _put_len(Growable g, Py_ssize_t n, str what) except -1:
    if n > _I32_MAX:
        raise EncodeError(f"{what} of {n} bytes too long")
    g.length += put_uvar(g.data + g.length, <uint32_t>(<uint64_t>n << 1))
    return 0


cdef inline int _reserve(Growable g, Py_ssize_t extra) except -1:
    # the capacity check inline; growing is the rare call
    if g.length + extra > g.capacity:
        g.reserve(extra)
    return 0


cdef inline int _put_bytes(Growable g, const uint8_t* p, Py_ssize_t n, str what) except -1:
    """Length (zigzag varint, -1 for null) and bytes."""
    if n < 0:
        _reserve(g, 1)
        g.data[g.length] = 1
        g.length += 1
        return 0
    _reserve(g, 5 + n)
    _put_len(g, n, what)
    memcpy(g.data + g.length, p, n)
    g.length += n
    return 0


cdef inline int _put_header(Growable g, object h) except -1:
    """One (key, value) header: the common (ASCII str, bytes) pair written inline."""
    cdef Py_ssize_t kn, vn
    cdef uint8_t* w
    if type(h) is tuple and PyTuple_GET_SIZE(h) == 2:
        hk = <object>PyTuple_GET_ITEM(h, 0)
        hv = <object>PyTuple_GET_ITEM(h, 1)
        if type(hk) is str and type(hv) is bytes and PyUnicode_IS_COMPACT_ASCII(hk):
            kn = PyUnicode_GET_LENGTH(hk)
            vn = PyBytes_GET_SIZE(hv)
            if kn <= _I32_MAX and vn <= _I32_MAX:
                _reserve(g, 10 + kn + vn)
                w = g.data + g.length
                w += put_uvar(w, <uint32_t>(<uint64_t>kn << 1))
                memcpy(w, PyUnicode_DATA(hk), kn)
                w += kn
                w += put_uvar(w, <uint32_t>(<uint64_t>vn << 1))
                memcpy(w, PyBytes_AS_STRING(hv), vn)
                g.length = (w + vn) - g.data
                return 0
    return _put_header_any(g, h)


cdef int _put_header_any(Growable g, object h) except -1:
    """One (key, value) header: key str (UTF-8) or bytes, value bytes-like or None."""
    cdef const uint8_t* p
    cdef Py_ssize_t n
    if type(h) is tuple and PyTuple_GET_SIZE(h) == 2:
        hk = <object>PyTuple_GET_ITEM(h, 0)
        hv = <object>PyTuple_GET_ITEM(h, 1)
    else:
        try:
            hk, hv = h
        except (TypeError, ValueError):
            raise EncodeError("a header must be a (key, value) pair") from None
    if isinstance(hk, str):
        try:
            p = <const uint8_t*>PyUnicode_AsUTF8AndSize(hk, &n)
        except UnicodeEncodeError:
            raise EncodeError("header key cannot be encoded as UTF-8") from None
    elif isinstance(hk, bytes):
        p = <const uint8_t*>PyBytes_AS_STRING(hk)
        n = PyBytes_GET_SIZE(hk)
    elif isinstance(hk, bytearray):
        hk = bytes(hk)
        p = <const uint8_t*>PyBytes_AS_STRING(hk)
        n = PyBytes_GET_SIZE(hk)
    else:
        raise EncodeError(f"header key must be str or bytes, not {type(hk).__name__}")
    _put_bytes(g, p, n, "header key")
    keep = take_bytes(hv, "header value", &p, &n)
    _put_bytes(g, p, n, "header value")
    return 0


cdef inline Py_ssize_t _len_guess(Py_ssize_t kl, Py_ssize_t vl) noexcept:
    """The likely size of a record's length varint from its key and value sizes (the other
    fields of a typical record add ~10-40 bytes); a wrong guess costs one memmove."""
    cdef Py_ssize_t est = (kl if kl > 0 else 0) + (vl if vl > 0 else 0) + 24
    if est < 64:
        return 1
    if est < 8192:
        return 2
    if est < 1048576:
        return 3
    if est < 134217728:
        return 4
    return 5


cdef class RecordBatchBuilder:
    """Builds one v2 record batch.

    ``append`` returns a RecordMetadata, or None when the record would take the batch past
    ``max_size`` bytes (the first record is always accepted). ``build`` returns the batch
    bytes with the CRC-32C filled in; the records are compressed with ``compression``
    (a codec id 0-4) at ``compression_level`` (None: the codec's default).
    """

    # fields: see builder.pxd (the producer's appender writes records without a Python call)

    def __init__(self, *, compression=0, compression_level=None, base_offset=0,
                 timestamp_type=0, producer_id=-1, producer_epoch=-1, base_sequence=-1,
                 is_transactional=False, is_control=False, partition_leader_epoch=-1,
                 max_size=1048576, compress_only_if_smaller=False, metadata_class=None):
        self._only_smaller = bool(compress_only_if_smaller)
        if metadata_class is not None and not (isinstance(metadata_class, type) and
                                               issubclass(metadata_class, RecordMetadata)):
            raise EncodeTypeError("metadata_class must be a subclass of RecordMetadata")
        self._meta_cls = metadata_class
        self._codec = check_i64(compression, 0, 4, "compression codec")
        if compression_level is not None:
            compress(self._codec, b"", compression_level)  # EncodeError for a bad level
        self._level = compression_level
        self._base_offset = check_i64(base_offset, _I64_MIN, _I64_MAX, "base offset")
        self._ts_type = check_i64(timestamp_type, 0, 1, "timestamp type")
        self._producer_id = check_i64(producer_id, _I64_MIN, _I64_MAX, "producer id")
        self._producer_epoch = check_i64(producer_epoch, -32768, 32767, "producer epoch")
        self._base_sequence = check_i64(base_sequence, _I32_MIN, _I32_MAX, "base sequence")
        self._transactional = bool(is_transactional)
        self._control = bool(is_control)
        self._leader_epoch = check_i64(partition_leader_epoch, _I32_MIN, _I32_MAX,
                                       "partition leader epoch")
        self._max_size = check_i64(max_size, 0, _I32_MAX, "max size")
        self._buf = Growable.__new__(Growable)
        self._committed = 0
        self._count = 0
        self._last_delta = -1
        self._first_ts = -1
        self._max_ts = -1

    @property
    def record_count(self):
        return self._count

    @property
    def size(self):
        """Bytes the batch takes so far, before compression."""
        return HEADER_SIZE + self._committed

    @property
    def first_timestamp(self):
        """The first record's timestamp (None before the first append)."""
        return self._first_ts if self._count else None

    @property
    def producer_id(self):
        return self._producer_id

    @property
    def producer_epoch(self):
        return self._producer_epoch

    @property
    def base_sequence(self):
        return self._base_sequence

    @property
    def is_transactional(self):
        return self._transactional

    def set_producer_state(self, producer_id, producer_epoch, base_sequence,
                           is_transactional=None):
        """Set the producer id, epoch, base sequence (and, unless None, the transactional
        flag) written by ``build``: allowed at any time before it, records appended or not."""
        pid = check_i64(producer_id, _I64_MIN, _I64_MAX, "producer id")
        epoch = check_i64(producer_epoch, -32768, 32767, "producer epoch")
        seq = check_i64(base_sequence, _I32_MIN, _I32_MAX, "base sequence")
        self._producer_id, self._producer_epoch, self._base_sequence = pid, epoch, seq
        if is_transactional is not None:
            self._transactional = bool(is_transactional)

    def append(self, key, value, headers=None, timestamp=None, offset_delta=None):
        """Add a record; its metadata, or None if the batch is full."""
        return self._append(key, value, headers, timestamp, offset_delta)

    def add(self, key, value, headers, timestamp, timestamps):
        """The producer's append: as ``append`` (the next offset delta), but the record's
        timestamp goes on the end of ``timestamps`` and its size in bytes is returned (0:
        the batch is full, nothing added). No metadata object is made."""
        cdef int64_t ts, od
        cdef Py_ssize_t size
        if type(timestamps) is not list:
            raise TypeError(f"timestamps must be a list, not {type(timestamps).__name__}")
        size = self._put(key, value, headers, timestamp, None, &ts, &od)
        if size == 0:
            return 0
        (<list>timestamps).append(timestamp if type(timestamp) is int else ts)
        return size

    cdef object _append(self, object key, object value, object headers, object timestamp,
                        object offset_delta):
        # append's body, also reached from append_with_offset without a Python call
        cdef int64_t ts, od
        cdef Py_ssize_t size = self._put(key, value, headers, timestamp, offset_delta, &ts, &od)
        if size == 0:
            return None
        # the metadata shares the caller's timestamp int (same value, no new one)
        ts_obj = timestamp if type(timestamp) is int else None
        if self._meta_cls is not None:
            return new_metadata_of(self._meta_cls, od, ts, size, ts_obj)
        return new_metadata_ts(od, ts, size, ts_obj)

    cdef Py_ssize_t _put(self, object key, object value, object headers, object timestamp,
                         object offset_delta, int64_t* ts_out, int64_t* od_out) except -1:
        # writes one record; its size (0: the batch is full), its timestamp and offset delta
        cdef int64_t od, ts, first_ts, delta
        cdef const uint8_t* kp
        cdef const uint8_t* vp
        cdef Py_ssize_t kl, vl, start, body_start, body, lsz, guess, size
        cdef int overflow = 0
        cdef object kh = None
        cdef object vh = None
        cdef uint8_t* w
        cdef Growable g = self._buf
        if offset_delta is None:
            if self._last_delta >= _I32_MAX:
                raise EncodeError(f"offset delta {self._last_delta + 1} out of range "
                                  f"({_I32_MIN}..{_I32_MAX})")
            od = self._last_delta + 1
        else:
            od = check_i64(offset_delta, _I32_MIN, _I32_MAX, "offset delta")
            if od <= self._last_delta:
                raise EncodeError(f"offset delta {od} not above the previous {self._last_delta}")
        if timestamp is None:
            # now, in ms: the interpreter's wall clock read in C (time.time() through
            # Python costs a module attribute lookup and a float per record)
            ts = <int64_t>(PyTime_TimeRaw() // 1000000)
        elif type(timestamp) is int:
            ts = PyLong_AsLongLongAndOverflow(timestamp, &overflow)
            if overflow:
                check_i64(timestamp, _I64_MIN, _I64_MAX, "timestamp")   # raises
        else:
            ts = check_i64(timestamp, _I64_MIN, _I64_MAX, "timestamp")
        if type(key) is bytes:
            kp = <const uint8_t*>PyBytes_AS_STRING(key)
            kl = PyBytes_GET_SIZE(key)
        else:
            kh = take_bytes(key, "record key", &kp, &kl)
        if type(value) is bytes:
            vp = <const uint8_t*>PyBytes_AS_STRING(value)
            vl = PyBytes_GET_SIZE(value)
        else:
            vh = take_bytes(value, "record value", &vp, &vl)
        first_ts = ts if self._count == 0 else self._first_ts
        if (first_ts < 0 and ts > _I64_MAX + first_ts) or (
                first_ts > 0 and ts < _I64_MIN + first_ts):
            raise EncodeError(f"timestamp delta {(<object>ts) - first_ts} out of range "
                              f"({_I64_MIN}..{_I64_MAX})")
        delta = ts - first_ts
        if kl > _I32_MAX:
            raise EncodeError(f"record key of {kl} bytes too long")
        if vl > _I32_MAX:
            raise EncodeError(f"record value of {vl} bytes too long")
        # Anything written past the committed length by a failed append is overwritten by
        # the next one: no rollback needed on errors. The record is written after room for
        # its length varint of the guessed size; the length goes in front at the end.
        start = self._committed
        g.length = start
        guess = _len_guess(kl, vl)
        _reserve(g, guess + 1 + 10 + 5 + 5 + (kl if kl > 0 else 0) + 5 + (vl if vl > 0 else 0)
                 + 5)
        body_start = start + guess
        w = g.data + body_start
        w[0] = 0
        w += 1
        w += put_uvar(w, zigzag64(delta))
        w += put_uvar(w, zigzag32(<int32_t>od))
        if kl < 0:
            w[0] = 1
            w += 1
        else:
            w += put_uvar(w, <uint32_t>(<uint64_t>kl << 1))
            memcpy(w, kp, kl)
            w += kl
        if vl < 0:
            w[0] = 1
            w += 1
        else:
            w += put_uvar(w, <uint32_t>(<uint64_t>vl << 1))
            memcpy(w, vp, vl)
            w += vl
        if headers is None:
            w[0] = 0
            g.length = (w + 1) - g.data
        else:
            g.length = w - g.data
            hs = headers if type(headers) is list or type(headers) is tuple else list(headers)
            _put_len(g, len(hs), "header count")
            for h in hs:
                _put_header(g, h)
        body = g.length - body_start
        if body > _I32_MAX:
            raise EncodeError(f"record of {body} bytes too large")
        lsz = uvar_size(<uint32_t>(<uint64_t>body << 1))
        size = lsz + body
        if self._count and HEADER_SIZE + start + size > self._max_size:
            g.length = start
            return 0
        if lsz != guess:
            if lsz > guess:
                _reserve(g, lsz - guess)
            memmove(g.data + start + lsz, g.data + body_start, body)
        put_uvar(g.data + start, <uint32_t>(<uint64_t>body << 1))
        g.length = start + size
        self._committed = g.length
        if self._count == 0:
            self._first_ts = ts
            self._max_ts = ts
        elif ts > self._max_ts:
            self._max_ts = ts
        self._count += 1
        self._last_delta = od
        ts_out[0] = ts
        od_out[0] = od
        return size

    def append_with_offset(self, offset, timestamp, key, value, headers=None):
        """``append`` in the argument order of Java's appendWithOffset (and of the Python
        clients' builders): ``offset`` is absolute, its delta from ``base_offset`` is used."""
        if type(offset) is not int:
            check_i64(offset, _I64_MIN, _I64_MAX, "offset")
        if self._base_offset == 0:
            # the clients' builders all start at 0: no int object made for the delta
            return self._append(key, value, headers, timestamp, offset)
        return self._append(key, value, headers, timestamp, offset - self._base_offset)

    def append_control(self, control_type, coordinator_epoch=0, timestamp=None):
        """Add a transaction marker (control_type 0 abort, 1 commit) to a control batch."""
        cdef uint8_t k[4]
        cdef uint8_t v[6]
        if not self._control:
            raise EncodeError("append_control needs a builder made with is_control=True")
        ct = check_i64(control_type, -32768, 32767, "control type")
        ce = check_i64(coordinator_epoch, _I32_MIN, _I32_MAX, "coordinator epoch")
        put_u16(k, 0)
        put_u16(k + 2, <uint16_t><int16_t>ct)
        put_u16(v, 0)
        put_u32(v + 2, <uint32_t><int32_t>ce)
        return self.append(PyBytes_FromStringAndSize(<char*>k, 4),
                           PyBytes_FromStringAndSize(<char*>v, 6), None, timestamp)

    def build(self, *, as_bytearray=False):
        """The batch bytes, records compressed and the CRC-32C filled in (a new bytearray
        instead of bytes with ``as_bytearray``). With ``compress_only_if_smaller`` the records
        stay uncompressed (codec 0 in the attributes) unless compressing made them smaller."""
        cdef int codec = self._codec
        cdef const uint8_t* pp
        cdef Py_ssize_t plen, length
        cdef object out
        cdef uint8_t* o
        cdef object payload = None
        cdef Py_ssize_t cap
        if codec == 4:
            cap = zstd_bound(self._committed, self._level)
            if cap >= 0:
                return self._build_zstd(cap, as_bytearray)
        if codec:
            # The codec reads the records straight from the builder's buffer (a view
            # released right after: no codec keeps its input), not from a copy.
            if self._committed == 0:
                src = memoryview(b"")
            else:
                src = PyMemoryView_FromMemory(<char*>self._buf.data, self._committed,
                                              PyBUF_READ)
            try:
                payload = compress(codec, src, self._level)
            finally:
                src.release()
            if type(payload) is not bytes:
                payload = bytes(payload)
            pp = <const uint8_t*>PyBytes_AS_STRING(payload)
            plen = PyBytes_GET_SIZE(payload)
            if self._only_smaller and plen >= self._committed:
                codec = 0
                pp = self._buf.data
                plen = self._committed
        else:
            pp = self._buf.data
            plen = self._committed
        length = self._length(plen)
        if as_bytearray:
            out = PyByteArray_FromStringAndSize(NULL, HEADER_SIZE + plen)
            o = <uint8_t*>PyByteArray_AS_STRING(out)
        else:
            out = PyBytes_FromStringAndSize(NULL, HEADER_SIZE + plen)
            o = <uint8_t*>PyBytes_AS_STRING(out)
        if plen:
            memcpy(o + HEADER_SIZE, pp, plen)
        self._put_header(o, length, codec, plen)
        return out

    cdef object _build_zstd(self, Py_ssize_t cap, bint as_bytearray):
        """``build`` for zstd through libzstd called from C: the records are compressed
        from the builder's buffer straight into the output, after room for the header, and
        the output is then shrunk to size (no payload bytes object, no copy of it)."""
        cdef Py_ssize_t plen, length
        cdef int codec = 4
        cdef uint8_t* o
        cdef PyObject* raw = NULL
        cdef object out
        if as_bytearray:
            out = PyByteArray_FromStringAndSize(NULL, HEADER_SIZE + cap)
            o = <uint8_t*>PyByteArray_AS_STRING(out)
        else:
            raw = _bytes_new(NULL, HEADER_SIZE + cap)
            o = <uint8_t*>PyBytes_AS_STRING(<object>raw)
        try:
            plen = zstd_compress_into(o + HEADER_SIZE, cap, self._buf.data, self._committed,
                                      self._level)
        except BaseException:
            Py_XDECREF(raw)
            raise
        if self._only_smaller and plen >= self._committed:
            codec = 0
            plen = self._committed
            if plen:
                memcpy(o + HEADER_SIZE, self._buf.data, plen)
        if as_bytearray:
            PyByteArray_Resize(out, HEADER_SIZE + plen)
            o = <uint8_t*>PyByteArray_AS_STRING(out)
        else:
            _PyBytes_Resize(&raw, HEADER_SIZE + plen)  # on failure raw is freed and NULL
            out = <object>raw
            Py_DECREF(out)  # the cast took a reference of its own
            o = <uint8_t*>PyBytes_AS_STRING(out)
        length = self._length(plen)
        self._put_header(o, length, codec, plen)
        return out

    cdef Py_ssize_t _length(self, Py_ssize_t plen) except -1:
        """The batch_length field for ``plen`` bytes of records (EncodeError past int32)."""
        cdef Py_ssize_t length = HEADER_SIZE - 12 + plen
        if length > _I32_MAX:
            raise EncodeError(f"batch of {length + 12} bytes too large")
        return length

    cdef void _put_header(self, uint8_t* o, Py_ssize_t length, int codec, Py_ssize_t plen):
        """The batch header at ``o``, before ``plen`` bytes of records (compressed with
        ``codec``) already in place at ``o + HEADER_SIZE``; the CRC-32C last, over both."""
        cdef int attrs = codec | (self._ts_type << 3)
        if self._transactional:
            attrs |= 0x10
        if self._control:
            attrs |= 0x20
        put_u64(o, <uint64_t>self._base_offset)
        put_u32(o + 8, <uint32_t>length)
        put_u32(o + 12, <uint32_t>self._leader_epoch)
        o[16] = 2
        put_u16(o + 21, <uint16_t>attrs)
        put_u32(o + 23, <uint32_t><int32_t>self._last_delta)
        put_u64(o + 27, <uint64_t>self._first_ts)
        put_u64(o + 35, <uint64_t>self._max_ts)
        put_u64(o + 43, <uint64_t>self._producer_id)
        put_u16(o + 51, <uint16_t><int16_t>self._producer_epoch)
        put_u32(o + 53, <uint32_t>self._base_sequence)
        put_u32(o + 57, <uint32_t>self._count)
        put_u32(o + 17, crc32c_of(o + 21, HEADER_SIZE - 21 + plen))


cdef inline Py_ssize_t _field_size(object b, str what) except -1:
    cdef Py_ssize_t n
    if b is None:
        return 1
    n = len(b)
    if n > _I32_MAX:
        raise EncodeError(f"{what} of {n} bytes too long")
    return uvar_size(<uint32_t>(<uint64_t>n << 1)) + n


cdef Py_ssize_t _body_size(object key, object value, object headers) except -1:
    cdef Py_ssize_t size = _field_size(key, "record key") + _field_size(value, "record value")
    cdef Py_ssize_t n
    if headers is None:
        return size + 1
    hs = headers if type(headers) is list or type(headers) is tuple else list(headers)
    size += _field_size(hs, "header count") - len(hs)
    for hk, hv in hs:
        n = len(hk.encode() if isinstance(hk, str) else hk)
        if n > _I32_MAX:
            raise EncodeError(f"header key of {n} bytes too long")
        size += uvar_size(<uint32_t>(<uint64_t>n << 1)) + n + _field_size(hv, "header value")
    return size


def record_size(key, value, headers=None, offset_delta=0, timestamp_delta=0):
    """Bytes a v2 record takes in its batch (length varint included): what ``append`` would
    report as its size, without building it."""
    cdef int64_t od = check_i64(offset_delta, _I32_MIN, _I32_MAX, "offset delta")
    cdef int64_t td = check_i64(timestamp_delta, _I64_MIN, _I64_MAX, "timestamp delta")
    cdef Py_ssize_t body = (1 + uvar_size(zigzag64(td)) + uvar_size(zigzag32(<int32_t>od))
                            + _body_size(key, value, headers))
    return uvar_size(<uint32_t>(<uint64_t>body << 1)) + body


def estimate_batch_size(key, value, headers=None):
    """An upper bound of the bytes of an uncompressed v2 batch holding this one record: the
    batch header, the largest record overhead (length 5, attributes 1, timestamp delta 10,
    offset delta 5 bytes) and the key, value and headers."""
    return HEADER_SIZE + 21 + _body_size(key, value, headers)


def encode_values(list values, Py_ssize_t start, object key, Py_ssize_t max_bytes):
    """``(section, end)``: the records section of a v2 batch holding ``values[start:end]``
    (bytes each), every record with ``key`` (bytes, or None: none), no headers, timestamp
    delta 0 and offset deltas from 0 (the bytes ``RecordBatchBuilder.append`` writes for
    them), ``end`` as far as the section stays within ``max_bytes`` (one record at least)."""
    cdef Py_ssize_t n = len(values), i, total = 0, kl = -1, vl, body, od
    cdef const uint8_t* kp = NULL
    cdef uint32_t kz
    cdef object v
    cdef bytes out
    cdef uint8_t* w
    if start < 0 or start >= n:
        raise ValueError(f"start {start} is not an index of the {n} values")
    if key is not None:
        if type(key) is not bytes:
            raise EncodeTypeError(f"key must be bytes or None, not {type(key).__name__}")
        kl = PyBytes_GET_SIZE(key)
        if kl > _I32_MAX:
            raise EncodeError(f"key of {kl} bytes too long")
        kp = <const uint8_t*>PyBytes_AS_STRING(key)
    kz = zigzag32(<int32_t>kl)
    i = start
    while i < n:
        v = values[i]
        if type(v) is not bytes:
            raise EncodeTypeError(f"value {i} must be bytes, not {type(v).__name__}")
        vl = PyBytes_GET_SIZE(v)
        if vl > _I32_MAX - 64 - (kl if kl > 0 else 0) or i - start > _I32_MAX:
            raise EncodeError(f"value {i} of {vl} bytes too long")
        od = i - start
        body = 3 + uvar_size(zigzag32(<int32_t>od)) + uvar_size(kz) + (kl if kl > 0 else 0) \
            + uvar_size(zigzag32(<int32_t>vl)) + vl
        body += uvar_size(zigzag32(<int32_t>body))
        if i > start and total + body > max_bytes:
            break
        total += body
        i += 1
    out = PyBytes_FromStringAndSize(NULL, total)
    w = <uint8_t*>PyBytes_AS_STRING(out)
    for od in range(i - start):
        v = values[start + od]
        vl = PyBytes_GET_SIZE(v)
        body = 3 + uvar_size(zigzag32(<int32_t>od)) + uvar_size(kz) + (kl if kl > 0 else 0) \
            + uvar_size(zigzag32(<int32_t>vl)) + vl
        w += put_uvar(w, zigzag32(<int32_t>body))
        w[0] = 0                   # attributes
        w[1] = 0                   # timestamp delta 0
        w += 2
        w += put_uvar(w, zigzag32(<int32_t>od))
        w += put_uvar(w, kz)
        if kl > 0:
            memcpy(w, kp, kl)
            w += kl
        w += put_uvar(w, zigzag32(<int32_t>vl))
        memcpy(w, PyBytes_AS_STRING(v), vl)
        w += vl
        w[0] = 0                   # no headers
        w += 1
    return out, i
