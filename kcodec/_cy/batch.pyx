"""Compiled twin of kcodec._py.batch (see its docstring for the RecordBatch v2 layout)."""

cimport cython
from cpython.buffer cimport PyBUF_READ
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.list cimport PyList_GET_ITEM, PyList_New, PyList_SET_ITEM
from cpython.memoryview cimport PyMemoryView_FromMemory
from cpython.object cimport PyObject
from cpython.ref cimport Py_DECREF, Py_INCREF, Py_XDECREF
from cpython.tuple cimport PyTuple_New, PyTuple_SET_ITEM
from libc.stdint cimport int8_t, int16_t, int32_t, int64_t, uint8_t, uint32_t, uint64_t
from libc.string cimport memcmp, memcpy

from kcodec._cy._reader cimport (
    Buf, Reader, be_u16, be_u32, be_u64, fast_varint, fast_varlong, get_buf, need, raise_corrupt,
    read_i8, read_varint, read_varlong,
)
from kcodec._cy._record cimport Record as CRecord
from kcodec._cy._record cimport crc32_ieee, make_control, new_record
from kcodec._cy.compression cimport decompress_codec
from kcodec._cy.crc cimport crc32c_of
from kcodec._cy.legacy cimport message_at

from kcodec._cy._record import ControlRecord, Record, parse_control
from kcodec._limits import DEFAULT_MAX_SIZE, check_max_size
from kcodec.errors import ChecksumError, CorruptDataError, DecodeError, TruncatedError

__all__ = [
    "DEFAULT_MAX_DECOMPRESSED",
    "Record",
    "ControlRecord",
    "RecordBatch",
    "BatchIterator",
    "iter_batches",
    "parse_control",
]

DEFAULT_MAX_DECOMPRESSED = DEFAULT_MAX_SIZE

cdef enum:
    HEADER_SIZE = 61
    MIN_LENGTH = 49
    MIN_RECORD = 7


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
        return crc32c_of(self._buf.ptr + self.position + 21, self.batch_length - 9)

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


# The exact reads, out of line: the record loop reads varints of one or two bytes in place
# (fast_varint) and calls these for the rest.
cdef int _rv_slow(Reader* r, int32_t* out, str what) except -1:
    return read_varint(r, out, what)


cdef int _rvl_slow(Reader* r, int64_t* out, str what) except -1:
    return read_varlong(r, out, what)


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
            rec = <CRecord>self.prev2  # only the iterator held it: refill it below
            self.prev2 = None
        rstart = r.pos
        if not fast_varint(data, &r.pos, r.end, &length):
            _rv_slow(r, &length, "record length")
        _need(r, length, "record")
        body = r.pos
        saved = r.end
        r.end = r.pos + length
        read_i8(r, &attr, "record attributes")
        if not fast_varlong(data, &r.pos, r.end, &tsd):
            _rvl_slow(r, &tsd, "timestamp delta")
        if not fast_varint(data, &r.pos, r.end, &od):
            _rv_slow(r, &od, "offset delta")
        if not fast_varint(data, &r.pos, r.end, &kl):
            _rv_slow(r, &kl, "key length")
        if kl == -1:
            key = None
        else:
            _need(r, kl, "record key")
            key = kc_bytes(<PyObject*>rec.key if rec is not None else NULL,
                           <const char*>data + r.pos, kl)
            r.pos += kl
        if not fast_varint(data, &r.pos, r.end, &kl):
            _rv_slow(r, &kl, "value length")
        if kl == -1:
            value = None
        else:
            _need(r, kl, "record value")
            value = kc_bytes(<PyObject*>rec.value if rec is not None else NULL,
                             <const char*>data + r.pos, kl)
            r.pos += kl
        if not fast_varint(data, &r.pos, r.end, &hc):
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
            if not fast_varint(data, &r.pos, r.end, &kl):
                _rv_slow(r, &kl, "header key length")
            _need(r, kl, "header key")
            if t != NULL:
                hk = _refill_key(kc_item(t, 0), self.hcache, j, data + r.pos, kl,
                                 r.pos + r.base)
            else:
                hk = _cached_key(self.hcache, j, data + r.pos, kl, r.pos + r.base)
            r.pos += kl
            if not fast_varint(data, &r.pos, r.end, &kl):
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
                actual = crc32c_of(p + 21, length - 9)
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
