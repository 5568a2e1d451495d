"""Compiled twin of kcodec._py.batch (see its docstring for the RecordBatch v2 layout)."""

cimport cython
from cpython.buffer cimport PyBUF_READ
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.bytearray cimport PyByteArray_AS_STRING, PyByteArray_FromStringAndSize
from cpython.list cimport PyList_GET_ITEM, PyList_GET_SIZE, PyList_New, PyList_SET_ITEM
from cpython.object cimport PyObject
from cpython.ref cimport Py_DECREF, Py_INCREF
from cpython.tuple cimport PyTuple_GET_ITEM, PyTuple_GET_SIZE, PyTuple_New, PyTuple_SET_ITEM
from cpython.memoryview cimport PyMemoryView_FromMemory
from libc.stdint cimport INT64_MIN, INT64_MAX, int8_t, int16_t, int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t
from libc.string cimport memcmp, memcpy, memmove

from kcodec._cy._reader cimport (
    Buf, Reader, be_u16, be_u32, be_u64, get_buf, need, put_u16, put_u32, put_u64, put_uvar,
    raise_corrupt, read_i8, read_varint, read_varlong, uvar_size, zigzag32, zigzag64,
)
from kcodec._cy._record cimport (
    Growable, check_i64, crc32_ieee, make_control, new_metadata, new_metadata_of,
    new_metadata_ts, new_record, take_bytes,
)
from kcodec._cy._record import parse_control
from kcodec._cy._record cimport Record as CRecord
from cpython.ref cimport Py_XDECREF
from kcodec._cy.crc cimport crc32c_update
from kcodec._cy._zstd cimport zstd_bound, zstd_compress_into
from kcodec._cy.compression cimport decompress_codec
from cpython.bytearray cimport PyByteArray_Resize
from cpython.bytes cimport _PyBytes_Resize


cdef extern from "Python.h":
    # PyBytes_FromStringAndSize as an owned PyObject* that _PyBytes_Resize can take
    PyObject* _bytes_new "PyBytes_FromStringAndSize"(const char* s, Py_ssize_t n) except NULL
from kcodec._cy.legacy cimport LegacyBatch, message_at

from cpython.time cimport PyTime_TimeRaw

from kcodec._limits import DEFAULT_MAX_SIZE, check_max_size

from kcodec._cy._record import ControlRecord, Record, RecordMetadata
from kcodec._cy.compression import compress
from kcodec.errors import (
    ChecksumError, CorruptDataError, DecodeError, EncodeError, EncodeTypeError, TruncatedError,
)

__all__ = [
    "DEFAULT_MAX_DECOMPRESSED",
    "Record",
    "ControlRecord",
    "RecordMetadata",
    "RecordBatch",
    "BatchIterator",
    "iter_batches",
    "RecordBatchBuilder",
    "parse_control",
    "record_size",
    "estimate_batch_size",
]

DEFAULT_MAX_DECOMPRESSED = DEFAULT_MAX_SIZE

cdef enum:
    HEADER_SIZE = 61
    MIN_LENGTH = 49
    MIN_RECORD = 7

cdef int64_t _I64_MIN = INT64_MIN
cdef int64_t _I64_MAX = INT64_MAX
cdef int64_t _I32_MIN = -0x80000000
cdef int64_t _I32_MAX = 0x7FFFFFFF


cdef inline uint32_t _crc32c(const uint8_t* p, Py_ssize_t n) noexcept:
    if n >= 65536:
        with nogil:
            return crc32c_update(0, p, <size_t>n)
    return crc32c_update(0, p, <size_t>n)


cdef class RecordBatch:
    """One v2 batch of a records blob. Iterating it yields Record (or ControlRecord) objects,
    decompressing on demand. ``position`` is its byte offset in the blob, ``size`` its
    length in bytes. The batch keeps a view of the blob."""

    @property
    def size(self):
        return self.batch_length + 12

    @property
    def last_offset(self):
        return <int64_t>(<uint64_t>self.base_offset + <uint64_t><int64_t>self.last_offset_delta)

    @property
    def next_offset(self):
        return <int64_t>(<uint64_t>self.base_offset + <uint64_t><int64_t>self.last_offset_delta
                         + 1)

    @property
    def compression(self):
        return self.attributes & 0x07

    @property
    def timestamp_type(self):
        return (self.attributes >> 3) & 1

    @property
    def is_transactional(self):
        return bool(self.attributes & 0x10)

    @property
    def is_control(self):
        return bool(self.attributes & 0x20)

    def computed_crc(self):
        """CRC-32C of the batch's bytes from its attributes to its end."""
        return _crc32c(self._buf.ptr + self.position + 21, self.batch_length - 9)

    def validate_crc(self):
        """Whether the stored CRC-32C matches the bytes."""
        return self.computed_crc() == self.crc

    def check_crc(self):
        """Raise ChecksumError (stored and computed values) unless the CRC matches."""
        actual = self.computed_crc()
        if actual != self.crc:
            raise ChecksumError(self.crc, actual, self.position, "record batch CRC-32C")

    cdef object payload(self, const uint8_t** ptr, Py_ssize_t* size, Py_ssize_t* base):
        cdef int codec = self.attributes & 0x07
        cdef Py_ssize_t start = self.position + HEADER_SIZE
        cdef Py_ssize_t n = self.batch_length + 12 - HEADER_SIZE
        cdef object out
        if codec == 0:
            ptr[0] = self._buf.ptr + start
            size[0] = n
            base[0] = start
            return self._buf
        out = decompress_codec(codec, PyMemoryView_FromMemory(<char*>self._buf.ptr + start, n,
                                                              PyBUF_READ), self._max_size, 2)
        if type(out) is not bytes:
            out = bytes(out)
        ptr[0] = <const uint8_t*>PyBytes_AS_STRING(out)
        size[0] = PyBytes_GET_SIZE(out)
        base[0] = 0
        return out

    def records_data(self):
        """The records section as bytes, decompressed (bounded by the iterator's limit)."""
        cdef const uint8_t* p
        cdef Py_ssize_t n, base
        keep = self.payload(&p, &n, &base)
        if type(keep) is bytes:
            return keep
        return PyBytes_FromStringAndSize(<const char*>p, n)

    def records(self):
        """Every record of the batch, as a list."""
        return list(self.__iter__())

    def __iter__(self):
        """An iterator decoding one record per step (decompressing first if needed)."""
        cdef RecordIterator it = RecordIterator.__new__(RecordIterator)
        it.keep = self.payload(&it.r.data, &it.r.end, &it.r.base)
        it.r.pos = 0
        it.count = self.record_count
        it.i = 0
        it.base_offset = self.base_offset
        it.first_ts = self.first_timestamp
        it.max_ts = self.max_timestamp
        it.ts_type = (self.attributes >> 3) & 1
        it.control = (self.attributes & 0x20) != 0
        it.hcache = [None, None, None, None]
        if it.count > it.r.end // MIN_RECORD:
            raise_corrupt(f"record count {it.count} impossible in {it.r.end} bytes", it.r.base)
        return it

    def __next__(self):
        """The next record of one iteration kept by the batch itself, for callers that use
        the batch as an iterator (``next(batch)``); ``iter(batch)`` always starts afresh."""
        if self._it is None:
            self._it = self.__iter__()
        return next(self._it)

    @staticmethod
    def from_bytes(buf, *, validate_crc=True, max_decompressed_size=DEFAULT_MAX_DECOMPRESSED):
        """The one v2 batch that ``buf`` holds, exactly (TruncatedError when it is cut
        short, CorruptDataError for another magic or bytes after it)."""
        return single_batch(buf, validate_crc, max_decompressed_size, True)

    def __repr__(self):
        return (f"RecordBatch(position={self.position}, base_offset={self.base_offset}, "
                f"last_offset={self.last_offset}, count={self.record_count}, "
                f"magic=2, compression={self.compression}, size={self.size})")


cdef extern from "Python.h":
    object PyLong_FromLongLong(long long)
    object PyUnicode_New(Py_ssize_t size, Py_UCS4 maxchar)
    void* PyUnicode_DATA(object o)
    PyObject* PyUnicode_DecodeUTF8_raw "PyUnicode_DecodeUTF8" (const char* s, Py_ssize_t size,
                                                               const char* errors)
    void PyErr_Clear()
    PyObject* PyErr_Occurred()


cdef object _header_key(const uint8_t* p, Py_ssize_t n, Py_ssize_t where):
    """The str of a header key: ASCII by copy, else strict UTF-8 (CorruptDataError)."""
    cdef Py_ssize_t i
    cdef object s
    cdef PyObject* o
    for i in range(n):
        if p[i] >= 0x80:
            break
    else:
        s = PyUnicode_New(n, 127)
        memcpy(PyUnicode_DATA(s), p, n)
        return s
    o = PyUnicode_DecodeUTF8_raw(<const char*>p, n, NULL)
    if o == NULL:
        PyErr_Clear()
        raise_corrupt("header key is not valid UTF-8", where)
    s = <object>o
    Py_DECREF(s)
    return s


cdef int _rv_slow(Reader* r, int32_t* out, str what) except -1:
    return read_varint(r, out, what)


cdef int _rvl_slow(Reader* r, int64_t* out, str what) except -1:
    return read_varlong(r, out, what)


cdef extern from *:
    """
    /* Varints of one or two bytes (most lengths, deltas and counts) are read in place;
       anything longer, or cut short, goes to the exact reader in _reader.pxd. Forced
       inline: the compiler will not inline a function called eight times per record. */
    #if defined(_MSC_VER)
    #define KC_FORCE_INLINE static __forceinline
    #elif defined(__GNUC__) || defined(__clang__)
    #define KC_FORCE_INLINE static inline __attribute__((always_inline))
    #else
    #define KC_FORCE_INLINE static inline
    #endif
    KC_FORCE_INLINE int kc_var12(const uint8_t* d, Py_ssize_t* pos, Py_ssize_t end,
                                 uint64_t* u) {
        Py_ssize_t p = *pos;
        if (p < end) {
            uint8_t b = d[p];
            if (b < 0x80) { *u = b; *pos = p + 1; return 1; }
            if (p + 1 < end && d[p + 1] < 0x80) {
                *u = (uint64_t)(b & 0x7F) | ((uint64_t)d[p + 1] << 7);
                *pos = p + 2;
                return 1;
            }
        }
        return 0;
    }
    """
    bint kc_var12(const uint8_t* d, Py_ssize_t* pos, Py_ssize_t end, uint64_t* u) noexcept nogil


cdef inline int _rv(Reader* r, int32_t* out, str what) except -1:
    """A zigzag varint: one or two bytes in place, the rest through the exact reader."""
    cdef uint64_t u
    if kc_var12(r.data, &r.pos, r.end, &u):
        out[0] = <int32_t>((u >> 1) ^ (-(<int64_t>(u & 1))))
        return 0
    return _rv_slow(r, out, what)


cdef inline int _rvl(Reader* r, int64_t* out, str what) except -1:
    cdef uint64_t u
    if kc_var12(r.data, &r.pos, r.end, &u):
        out[0] = <int64_t>((u >> 1) ^ (-(<int64_t>(u & 1))))
        return 0
    return _rvl_slow(r, out, what)


cdef int _need_fail(Reader* r, Py_ssize_t n, str what) except -1:
    return need(r, n, what)


cdef inline int _need(Reader* r, Py_ssize_t n, str what) except -1:
    if n < 0 or n > r.end - r.pos:
        return _need_fail(r, n, what)
    return 0


cdef extern from "Python.h":
    Py_ssize_t PyUnicode_GET_LENGTH(object o)
    int PyUnicode_IS_COMPACT_ASCII(object o)


cdef inline object _cached_key(list cache, Py_ssize_t j, const uint8_t* p, Py_ssize_t n,
                               Py_ssize_t where):
    """Header keys repeat from record to record: reuse the previous record's str when the
    key at the same index has the same bytes."""
    cdef object c
    if j < 4:
        c = <object>PyList_GET_ITEM(cache, j)
        if (c is not None and PyUnicode_GET_LENGTH(c) == n and PyUnicode_IS_COMPACT_ASCII(c)
                and (n == 0 or ((<const uint8_t*>PyUnicode_DATA(c))[0] == p[0]
                                and memcmp(PyUnicode_DATA(c), p, n) == 0))):
            return c
        c = _header_key(p, n, where)
        cache[j] = c
        return c
    return _header_key(p, n, where)


# -- refilling records nobody holds any more ---------------------------------------------
# A consumer usually drops each record before taking the one after next. The iterator keeps
# the two records it returned last; when the older one is referenced by nothing but the
# iterator (and its headers list, tuples, bytes and strs by nothing but it), the next record
# is decoded into those same objects instead of freeing them and allocating ~10 new ones -
# the pattern of zip() and dict.items() reusing their result tuple. The caller cannot tell:
# an object is rewritten only while its reference count shows that nobody else can see it
# (and never with a free-threaded interpreter, where that count is not exact).

cdef extern from *:
    """
    #if defined(Py_GIL_DISABLED) || defined(PYPY_VERSION)
    #define KC_SOLE(o) 0
    #else
    #define KC_SOLE(o) ((o) != NULL && Py_REFCNT(o) == 1)
    #endif
    #if defined(__GNUC__) || defined(__clang__)
    #pragma GCC diagnostic push
    #pragma GCC diagnostic ignored "-Wdeprecated-declarations"
    #endif
    /* A new reference to bytes holding the n bytes at p: `old` rewritten in place when
       nothing else holds it and its size matches (never the shared 0/1-byte objects). */
    static PyObject* kc_bytes(PyObject* old, const char* p, Py_ssize_t n) {
        if (n > 1 && KC_SOLE(old) && PyBytes_CheckExact(old) && Py_SIZE(old) == n) {
            memcpy(PyBytes_AS_STRING(old), p, (size_t)n);
            ((PyBytesObject*)old)->ob_shash = -1;
            Py_INCREF(old);
            return old;
        }
        return PyBytes_FromStringAndSize(p, n);
    }
    /* Whether `o` is a compact ASCII str with exactly the n bytes at p. */
    static inline int kc_str_equal(PyObject* o, const uint8_t* p, Py_ssize_t n) {
        return (o != NULL && PyUnicode_CheckExact(o) && PyUnicode_IS_COMPACT_ASCII(o)
                && PyUnicode_GET_LENGTH(o) == n
                && (n == 0 || (((const uint8_t*)PyUnicode_DATA(o))[0] == p[0]
                               && memcmp(PyUnicode_DATA(o), p, (size_t)n) == 0)));
    }
    /* Rewrite the str `o` with the n ASCII bytes at p when nothing else holds it. */
    static int kc_str_refill(PyObject* o, const uint8_t* p, Py_ssize_t n) {
        Py_ssize_t i;
        if (n < 2 || !KC_SOLE(o) || !PyUnicode_CheckExact(o) || !PyUnicode_IS_COMPACT_ASCII(o)
                || PyUnicode_CHECK_INTERNED(o) || PyUnicode_GET_LENGTH(o) != n)
            return 0;
    #if PY_VERSION_HEX < 0x030C0000
        if (((PyASCIIObject*)o)->wstr != NULL)
            return 0;
    #endif
        for (i = 0; i < n; i++)
            if (p[i] >= 0x80)
                return 0;
        memcpy(PyUnicode_DATA(o), p, (size_t)n);
        ((PyASCIIObject*)o)->hash = -1;
        return 1;
    }
    #if defined(__GNUC__) || defined(__clang__)
    #pragma GCC diagnostic pop
    #endif
    /* A new reference to an int of value v: `old` rewritten in place when nothing else
       holds it and it has the same sign and number of digits (ints made by
       PyLong_FromLongLong; the digit layout of CPython 3.11, and of 3.12+ with its tag). */
    static PyObject* kc_long(PyObject* old, long long v) {
    #if PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030F0000 && PyLong_SHIFT == 30
        if (v != 0 && KC_SOLE(old) && PyLong_CheckExact(old)) {
            unsigned long long a = v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v;
            digit d[3];
            Py_ssize_t n = 0, i;
            while (a) {
                d[n++] = (digit)(a & PyLong_MASK);
                a >>= PyLong_SHIFT;
            }
            /* n <= 3: 64 bits in 30-bit digits */
    #if PY_VERSION_HEX < 0x030C0000
            if (Py_SIZE(old) == (v < 0 ? -n : n)) {
                for (i = 0; i < n; i++)
                    ((PyLongObject*)old)->ob_digit[i] = d[i];
                Py_INCREF(old);
                return old;
            }
    #else
            if (((PyLongObject*)old)->long_value.lv_tag
                    == (((uintptr_t)n << 3) | (uintptr_t)(v < 0 ? 2 : 0))) {
                for (i = 0; i < n; i++)
                    ((PyLongObject*)old)->long_value.ob_digit[i] = d[i];
                Py_INCREF(old);
                return old;
            }
    #endif
        }
    #endif
        return PyLong_FromLongLong(v);
    }
    /* A list of exactly n items nobody else holds; a (key, value) tuple likewise. */
    #define KC_LIST_REUSABLE(o, n) (KC_SOLE(o) && PyList_CheckExact(o) && PyList_GET_SIZE(o) == (n))
    #define KC_PAIR_REUSABLE(o) (KC_SOLE(o) && PyTuple_CheckExact(o) && PyTuple_GET_SIZE(o) == 2)
    #define KC_SOLE_RECORD(o, t) (KC_SOLE(o) && Py_TYPE(o) == (PyTypeObject*)(t))
    /* Tuples cache their hash from CPython 3.14: a refilled pair must forget it. */
    #if PY_VERSION_HEX >= 0x030E0000
    #define KC_PAIR_REHASH(o) (((PyTupleObject*)(o))->ob_hash = -1)
    #else
    #define KC_PAIR_REHASH(o) ((void)0)
    #endif
    """
    bint KC_SOLE(PyObject* o) noexcept
    object kc_long(PyObject* old, long long v)
    object kc_bytes(PyObject* old, const char* p, Py_ssize_t n)
    bint kc_str_equal(PyObject* o, const uint8_t* p, Py_ssize_t n) noexcept
    bint kc_str_refill(PyObject* o, const uint8_t* p, Py_ssize_t n) noexcept
    bint KC_LIST_REUSABLE(PyObject* o, Py_ssize_t n) noexcept
    bint KC_PAIR_REUSABLE(PyObject* o) noexcept
    bint KC_SOLE_RECORD(PyObject* o, PyObject* t) noexcept
    void KC_PAIR_REHASH(PyObject* o) noexcept
    PyObject* kc_item "PyTuple_GET_ITEM" (PyObject* t, Py_ssize_t i) noexcept
    void PyObject_GC_UnTrack(object o) noexcept
    void kc_set_item "PyTuple_SET_ITEM" (PyObject* t, Py_ssize_t i, PyObject* o) noexcept


cdef inline object _refill_key(PyObject* old, list cache, Py_ssize_t j, const uint8_t* p,
                               Py_ssize_t n, Py_ssize_t where):
    """A header key str for the n bytes at p: the old one when equal or rewritable."""
    if kc_str_equal(old, p, n):
        return <object>old
    if j < 4 and PyList_GET_ITEM(cache, j) == old:
        # The key changed: the cache lets go of the old str, so that it can be rewritten
        # when the pair was its only other holder (else every changing key is a new str).
        cache[j] = None
    if kc_str_refill(old, p, n):
        return <object>old
    return _cached_key(cache, j, p, n, where)


@cython.final
cdef class RecordIterator:
    """Decodes one record of a v2 batch per step (what iterating a RecordBatch returns)."""

    cdef object keep
    cdef Reader r
    cdef int32_t count
    cdef int32_t i
    cdef int64_t base_offset
    cdef int64_t first_ts
    cdef int64_t max_ts
    cdef int ts_type
    cdef bint control
    cdef list hcache
    cdef object prev1  # the record returned last
    cdef object prev2  # the one before: refilled when nothing else holds it

    def __iter__(self):
        return self

    def __next__(self):
        cdef Reader* r = &self.r
        cdef const uint8_t* data = r.data
        cdef int32_t j, length, od, kl, hc
        cdef int8_t attr
        cdef uint64_t u
        cdef int64_t tsd, ts, offset
        cdef Py_ssize_t rstart, body, saved
        cdef list headers
        cdef object key, value, hk, hv
        cdef tuple pair
        cdef int32_t i
        cdef CRecord rec = None
        cdef PyObject* old
        cdef PyObject* t
        cdef bint reuse
        if self.i >= self.count:
            self.prev1 = None
            self.prev2 = None
            if self.i == self.count:
                self.i += 1  # report leftover bytes once, then stay exhausted
                if r.pos != r.end:
                    raise_corrupt(f"{r.end - r.pos} bytes left after the last of {self.count} "
                                  f"records", r.pos + r.base)
            raise StopIteration
        i = self.i
        self.i = self.count + 1  # until this record decodes: a malformed one ends it
        if KC_SOLE_RECORD(<PyObject*>self.prev2, <PyObject*>CRecord) and not self.control:
            rec = self.prev2  # only the iterator held it: refill it below
            self.prev2 = None
        rstart = r.pos
        if kc_var12(data, &r.pos, r.end, &u):
            length = <int32_t>((u >> 1) ^ (-(<int64_t>(u & 1))))
        else:
            _rv_slow(r, &length, "record length")
        _need(r, length, "record")
        body = r.pos
        saved = r.end
        r.end = r.pos + length
        read_i8(r, &attr, "record attributes")
        if kc_var12(data, &r.pos, r.end, &u):
            tsd = <int64_t>((u >> 1) ^ (-(<int64_t>(u & 1))))
        else:
            _rvl_slow(r, &tsd, "timestamp delta")
        if kc_var12(data, &r.pos, r.end, &u):
            od = <int32_t>((u >> 1) ^ (-(<int64_t>(u & 1))))
        else:
            _rv_slow(r, &od, "offset delta")
        if kc_var12(data, &r.pos, r.end, &u):
            kl = <int32_t>((u >> 1) ^ (-(<int64_t>(u & 1))))
        else:
            _rv_slow(r, &kl, "key length")
        if kl == -1:
            key = None
        else:
            _need(r, kl, "record key")
            key = kc_bytes(<PyObject*>rec.key if rec is not None else NULL,
                           <const char*>data + r.pos, kl)
            r.pos += kl
        if kc_var12(data, &r.pos, r.end, &u):
            kl = <int32_t>((u >> 1) ^ (-(<int64_t>(u & 1))))
        else:
            _rv_slow(r, &kl, "value length")
        if kl == -1:
            value = None
        else:
            _need(r, kl, "record value")
            value = kc_bytes(<PyObject*>rec.value if rec is not None else NULL,
                             <const char*>data + r.pos, kl)
            r.pos += kl
        if kc_var12(data, &r.pos, r.end, &u):
            hc = <int32_t>((u >> 1) ^ (-(<int64_t>(u & 1))))
        else:
            _rv_slow(r, &hc, "header count")
        if hc < 0:
            raise_corrupt(f"negative header count {hc}", r.pos + r.base)
        if hc > (r.end - r.pos) // 2:
            raise_corrupt(f"header count {hc} impossible in {r.end - r.pos} bytes",
                          r.pos + r.base)
        reuse = rec is not None and KC_LIST_REUSABLE(<PyObject*>rec.headers, hc)
        if reuse:
            headers = rec.headers
        else:
            headers = PyList_New(hc)
        for j in range(hc):
            # In a reused list, item j is a pair to refill (or an object to replace).
            t = PyList_GET_ITEM(headers, j) if reuse else NULL
            if t != NULL and not KC_PAIR_REUSABLE(t):
                t = NULL
            if kc_var12(data, &r.pos, r.end, &u):
                kl = <int32_t>((u >> 1) ^ (-(<int64_t>(u & 1))))
            else:
                _rv_slow(r, &kl, "header key length")
            _need(r, kl, "header key")
            if t != NULL:
                hk = _refill_key(kc_item(t, 0), self.hcache, j, data + r.pos, kl,
                                 r.pos + r.base)
            else:
                hk = _cached_key(self.hcache, j, data + r.pos, kl, r.pos + r.base)
            r.pos += kl
            if kc_var12(data, &r.pos, r.end, &u):
                kl = <int32_t>((u >> 1) ^ (-(<int64_t>(u & 1))))
            else:
                _rv_slow(r, &kl, "header value length")
            if kl == -1:
                hv = None
            else:
                _need(r, kl, "header value")
                hv = kc_bytes(kc_item(t, 1) if t != NULL else NULL,
                              <const char*>data + r.pos, kl)
                r.pos += kl
            if t != NULL:
                old = kc_item(t, 0)
                if old != <PyObject*>hk:
                    Py_INCREF(hk)
                    kc_set_item(t, 0, <PyObject*>hk)
                    Py_XDECREF(old)
                old = kc_item(t, 1)
                if old != <PyObject*>hv:
                    Py_INCREF(hv)
                    kc_set_item(t, 1, <PyObject*>hv)
                    Py_XDECREF(old)
                KC_PAIR_REHASH(t)
                continue
            pair = PyTuple_New(2)
            Py_INCREF(hk)
            PyTuple_SET_ITEM(pair, 0, hk)
            Py_INCREF(hv)
            PyTuple_SET_ITEM(pair, 1, hv)
            # A str and bytes (or None) cannot form a cycle: the collector would untrack the
            # pair at its first pass anyway (as CPython does for such tuples); untracked now,
            # a consumer keeping its records does not have every pair traversed meanwhile.
            PyObject_GC_UnTrack(pair)
            Py_INCREF(pair)
            if reuse:
                old = PyList_GET_ITEM(headers, j)
                PyList_SET_ITEM(headers, j, pair)
                Py_XDECREF(old)
            else:
                PyList_SET_ITEM(headers, j, pair)
        if r.pos != r.end:
            raise_corrupt(f"record length {length} but its fields took {r.pos - body} bytes",
                          body + r.base)
        r.end = saved
        if self.ts_type:
            ts = self.max_ts
        else:
            ts = <int64_t>(<uint64_t>self.first_ts + <uint64_t>tsd)
        offset = <int64_t>(<uint64_t>self.base_offset + <uint64_t><int64_t>od)
        if self.control:
            rec = make_control(offset, ts, self.ts_type, key, value, headers, attr,
                               rstart + r.base, r.pos - rstart)
            self.i = i + 1
            return rec
        if rec is None:
            rec = new_record(offset, ts, self.ts_type, key, value, headers, attr, r.pos - rstart)
        else:
            rec.size_ = r.pos - rstart
            rec.offset = kc_long(<PyObject*>rec.offset, offset)
            rec.timestamp = kc_long(<PyObject*>rec.timestamp, ts)
            rec.timestamp_type = self.ts_type
            rec.key = key
            rec.value = value
            rec.headers = headers
            rec.attributes = attr
        self.prev2 = self.prev1
        self.prev1 = rec
        self.i = i + 1
        return rec


cdef class BatchIterator:
    """Iterates the batches of a records blob (any mix of magic 0, 1 and 2).

    ``consumed`` is the number of bytes (from the start of ``buf``) covered by the batches
    yielded or skipped so far; ``incomplete`` becomes True when iteration stopped at a
    trailing batch that is cut short (normal at the end of a Fetch response).

    A complete but malformed entry raises CorruptDataError and ends the iteration (the next
    call raises StopIteration; ``consumed`` stays at the bad entry). A CRC mismatch raises
    ChecksumError after moving past the batch: calling ``next()`` again continues with the
    following batch.
    """

    cdef readonly Py_ssize_t consumed
    cdef readonly bint incomplete
    cdef Buf _buf
    cdef Py_ssize_t _end
    cdef bint _validate
    cdef bint _done
    cdef Py_ssize_t _max_size

    def __init__(self, buf, validate_crc=True, max_decompressed_size=DEFAULT_MAX_DECOMPRESSED,
                 start=0):
        self._buf = get_buf(buf)
        self._end = self._buf.size
        if start < 0 or start > self._end:
            raise ValueError(f"start {start} outside a buffer of {self._end} bytes")
        self._validate = bool(validate_crc)
        self._max_size = check_max_size(max_decompressed_size)
        self.consumed = start
        self.incomplete = False
        self._done = False

    def __iter__(self):
        return self

    def __next__(self):
        cdef const uint8_t* data = self._buf.ptr
        cdef Py_ssize_t pos = self.consumed
        cdef Py_ssize_t rem = self._end - pos
        cdef Py_ssize_t nxt
        cdef int32_t length
        cdef int magic, minimum
        cdef uint32_t stored, actual
        cdef RecordBatch b
        cdef const uint8_t* p
        if self._done:
            raise StopIteration
        if rem < 12:
            self._done = True
            self.incomplete = rem > 0
            raise StopIteration
        length = <int32_t>be_u32(data + pos + 8)
        if length < 14:
            self._done = True
            raise CorruptDataError(f"batch length {length} below the minimum of 14", pos + 8)
        if length > rem - 12:
            self._done = True
            self.incomplete = True
            raise StopIteration
        magic = data[pos + 16]
        nxt = pos + length + 12
        if magic == 2:
            if length < MIN_LENGTH:
                self._done = True
                raise CorruptDataError(
                    f"batch length {length} below the minimum of {MIN_LENGTH} for magic 2",
                    pos + 8)
            p = data + pos
            stored = be_u32(p + 17)
            if self._validate:
                actual = _crc32c(p + 21, length - 9)
                if actual != stored:
                    self.consumed = nxt
                    raise ChecksumError(stored, actual, pos, "record batch CRC-32C")
            b = RecordBatch.__new__(RecordBatch)
            b.record_count = <int32_t>be_u32(p + 57)
            if b.record_count < 0:
                self._done = True
                raise CorruptDataError(f"negative record count {b.record_count}", pos + 57)
            b.base_offset = <int64_t>be_u64(p)
            b.batch_length = length
            b.partition_leader_epoch = <int32_t>be_u32(p + 12)
            b.magic = 2
            b.crc = stored
            b.attributes = <int16_t>be_u16(p + 21)
            b.last_offset_delta = <int32_t>be_u32(p + 23)
            b.first_timestamp = <int64_t>be_u64(p + 27)
            b.max_timestamp = <int64_t>be_u64(p + 35)
            b.producer_id = <int64_t>be_u64(p + 43)
            b.producer_epoch = <int16_t>be_u16(p + 51)
            b.base_sequence = <int32_t>be_u32(p + 53)
            b.position = pos
            b._buf = self._buf
            b._max_size = self._max_size
            b._validate = self._validate
            self.consumed = nxt
            return b
        if magic == 0 or magic == 1:
            minimum = 14 if magic == 0 else 22
            if length < minimum:
                self._done = True
                raise CorruptDataError(
                    f"message length {length} below the minimum of {minimum} for magic {magic}",
                    pos + 8)
            if self._validate:
                stored = be_u32(data + pos + 12)
                actual = crc32_ieee(0, data + pos + 16, <size_t>(length - 4))
                if actual != stored:
                    self.consumed = nxt
                    raise ChecksumError(stored, actual, pos, "message CRC-32")
            try:
                m = message_at(self._buf, pos, self._validate, self._max_size)
            except DecodeError:
                self._done = True
                raise
            self.consumed = nxt
            return m
        self._done = True
        raise CorruptDataError(f"unknown magic byte {magic}", pos + 16)


def single_batch(buf, validate_crc, max_size, bint v2):
    """The one batch (v2 when ``v2``, else one legacy message) that ``buf`` holds, exactly."""
    cdef BatchIterator it = BatchIterator(buf, validate_crc, max_size)
    cdef Py_ssize_t n = it._buf.size
    cdef const uint8_t* p = it._buf.ptr
    if n >= 17 and (p[16] == 2) != v2:
        raise CorruptDataError(f"magic byte {p[16]} where a "
                               f"{'v2 batch' if v2 else 'legacy message'} was expected", 16)
    batch = next(it, None)
    if batch is None:
        want = 12 if n < 12 else 12 + <int32_t>be_u32(p + 8)
        raise TruncatedError(want, 0, n, "batch")
    if it.consumed != n:
        raise CorruptDataError(f"{n - it.consumed} bytes after the batch", it.consumed)
    return batch


def iter_batches(buf, *, validate_crc=True, max_decompressed_size=DEFAULT_MAX_DECOMPRESSED,
                 start=0):
    """Iterate the batches of a records blob from byte ``start``; see BatchIterator."""
    return BatchIterator(buf, validate_crc, max_decompressed_size, start)


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


cdef extern from "Python.h":
    const char* PyUnicode_AsUTF8AndSize(object s, Py_ssize_t* size) except NULL
    long long PyLong_AsLongLongAndOverflow(object, int*) except? -1


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

    # fields: see batch.pxd (the producer's appender writes records without a Python call)

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
        cdef int attrs
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
        attrs = codec | (self._ts_type << 3)
        if self._transactional:
            attrs |= 0x10
        if self._control:
            attrs |= 0x20
        length = HEADER_SIZE - 12 + plen
        if length > _I32_MAX:
            raise EncodeError(f"batch of {length + 12} bytes too large")
        if as_bytearray:
            out = PyByteArray_FromStringAndSize(NULL, HEADER_SIZE + plen)
            o = <uint8_t*>PyByteArray_AS_STRING(out)
        else:
            out = PyBytes_FromStringAndSize(NULL, HEADER_SIZE + plen)
            o = <uint8_t*>PyBytes_AS_STRING(out)
        if plen:
            memcpy(o + HEADER_SIZE, pp, plen)
        self._put_header(o, length, attrs, plen)
        return out

    cdef object _build_zstd(self, Py_ssize_t cap, bint as_bytearray):
        """``build`` for zstd through libzstd called from C: the records are compressed
        from the builder's buffer straight into the output, after room for the header, and
        the output is then shrunk to size (no payload bytes object, no copy of it)."""
        cdef Py_ssize_t plen, length
        cdef int codec = 4
        cdef int attrs
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
        attrs = codec | (self._ts_type << 3)
        if self._transactional:
            attrs |= 0x10
        if self._control:
            attrs |= 0x20
        length = HEADER_SIZE - 12 + plen
        if length > _I32_MAX:
            raise EncodeError(f"batch of {length + 12} bytes too large")
        self._put_header(o, length, attrs, plen)
        return out

    cdef void _put_header(self, uint8_t* o, Py_ssize_t length, int attrs, Py_ssize_t plen):
        """The batch header at ``o``, before ``plen`` bytes of records already in place at
        ``o + HEADER_SIZE``; the CRC-32C last, over both."""
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
        put_u32(o + 17, _crc32c(o + 21, HEADER_SIZE - 21 + plen))


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
