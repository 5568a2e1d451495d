"""Compiled twin of kcodec._py.msgcols (see its docstring for the columns' layout): the same
bytes out, the same Message tuples back, the same errors.

Encode walks the list of tuples at C level (one pass for the topics, one for headers and
errors when there are any, one that writes every column) into one bytes object sized
first; decode checks every count and length as the pure twin does, in the same order, then
makes each message tuple with the message type's own allocator (what ``tuple.__new__``
does, without the intermediate tuple of eleven fields).

The message tuples, their headers lists and the header pairs are made untracked by the
cyclic GC, as the compiled Record and ShareRecord are: a sinker decodes 500 messages a
chunk, and the collections their thousand tracked objects set off were half of decode's
time (0.24 -> 0.13 µs a record; more while earlier chunks are still held). None of them
can be in a cycle as made; a handler that puts a message into its own headers list makes
one the collector will not free (as for Record).

A field of the wrong type or out of its column's range raises what the pure twin raises:
the struct error comes from packing that value with struct (as the pure twin does). When a
batch holds more than one bad field, which one is reported first may differ.
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.list cimport PyList_New, PyList_SET_ITEM
from cpython.long cimport PyLong_AsLongLongAndOverflow, PyLong_FromLong, PyLong_FromLongLong
from cpython.mem cimport PyMem_Free, PyMem_Malloc
from cpython.object cimport PyObject, PyTypeObject
from cpython.ref cimport Py_INCREF
from cpython.tuple cimport PyTuple_SET_ITEM
from cpython.unicode cimport PyUnicode_AsEncodedString, PyUnicode_AsUTF8String, PyUnicode_DecodeUTF8
from libc.limits cimport INT_MAX, INT_MIN, LLONG_MAX, LLONG_MIN
from libc.stdint cimport int8_t, int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t
from libc.string cimport memcpy

from kcodec._cy._record cimport Record as CRecord
from kcodec._cy._reader cimport be_u16, be_u32, be_u64, put_u16, put_u32, put_u64

import struct

from kcodec.errors import CorruptDataError, TruncatedError

cdef extern from *:
    """
    /* A message tuple: kc_fields gives n NULL items to set, kc_finish the instance of t.
       Before 3.14 that is t's own allocator, as tuple.__new__(t, ...) uses; from 3.14 on a
       tuple caches its hash in a field tuple.__new__ resets, so there a plain tuple is made
       and tuple.__new__ itself copies it into t's instance. */
    static PyObject* kc_fields(PyTypeObject* t, Py_ssize_t n) {
    #if PY_VERSION_HEX < 0x030E0000
        return t->tp_alloc(t, n);
    #else
        (void)t;
        return PyTuple_New(n);
    #endif
    }
    static PyObject* kc_finish(PyTypeObject* t, PyObject* fields) {
    #if PY_VERSION_HEX < 0x030E0000
        (void)t;
        Py_INCREF(fields);
        return fields;
    #else
        PyObject* args = PyTuple_Pack(1, fields);
        PyObject* out;
        if (args == NULL) return NULL;
        out = PyTuple_Type.tp_new(t, args, NULL);
        Py_DECREF(args);
        return out;
    #endif
    }
    """
    object kc_fields(PyTypeObject* t, Py_ssize_t n)
    object kc_finish(PyTypeObject* t, object fields)

cdef extern from "Python.h":
    void PyObject_GC_UnTrack(void* op)

__all__ = ["MANY_VERSION", "MAX_HEADERS", "encode_many", "decode_many", "from_records"]

MANY_VERSION = 2
MAX_HEADERS = 0xFFFF
MAX_TOPICS = 0xFFFF

cdef enum:
    _VERSION = 2
    _HEAD = 7               # version u8, count u32, topic count u16
    _PER_MESSAGE = 49       # the fixed-size columns' bytes a message
    _FIELDS = 11            # a Message's fields

# struct packs a bad value for the error the pure twin raises (which packs with struct)
cdef object _S_H = struct.Struct(">H")
cdef object _S_i = struct.Struct(">i")
cdef object _S_b = struct.Struct(">b")
cdef object _S_q = struct.Struct(">q")
cdef object _NOT_YET = object()


cdef inline long long _int(object v, long long lo, long long hi, object st) except? -1:
    """``v`` as a C integer of the column ``st`` packs; its struct error when it is not one."""
    cdef int overflow = 0
    cdef long long x
    if type(v) is int:
        x = PyLong_AsLongLongAndOverflow(v, &overflow)
        if not overflow and lo <= x <= hi:
            return x
    return st.unpack(st.pack(v))[0]       # raises as the pure twin does, or an __index__ type


cdef inline long long _attempts(object a) except? -1:
    """Attempts as stored: above 0xFFFF is 0xFFFF (``min(a, 0xFFFF)`` in the pure twin)."""
    cdef int overflow = 0
    cdef long long x
    if type(a) is int:
        x = PyLong_AsLongLongAndOverflow(a, &overflow)
        if overflow > 0 or (not overflow and x > 0xFFFF):
            return 0xFFFF
        if not overflow and x >= 0:
            return x
    elif a > 0xFFFF:
        return 0xFFFF
    return _S_H.unpack(_S_H.pack(a))[0]


cdef bytes _headers_blob(object headers):
    """One message's headers (the pure twin's ``_headers_blob`` of a non-empty list)."""
    cdef Py_ssize_t count = len(headers)
    cdef Py_ssize_t size = 2, at, n, i
    cdef list keys = [], values = []
    cdef uint8_t* w
    if count > MAX_HEADERS:
        raise ValueError(f"a message has {count} headers; at most {MAX_HEADERS} can be stored")
    for item in headers:
        if type(item) is tuple and len(<tuple>item) == 2:
            k = (<tuple>item)[0]
            v = (<tuple>item)[1]
        else:
            k, v = item
        if type(k) is str:
            kb = PyUnicode_AsUTF8String(k)
        elif isinstance(k, str):
            kb = k.encode()
        else:
            kb = bytes(k)
        if PyBytes_GET_SIZE(kb) > 0xFFFF:
            _S_H.pack(PyBytes_GET_SIZE(kb))
        size += 2 + PyBytes_GET_SIZE(kb)
        if v is None:
            size += 4
        elif type(v) is bytes:
            if PyBytes_GET_SIZE(v) > 0x7FFFFFFF:
                _S_i.pack(PyBytes_GET_SIZE(v))
            size += 4 + PyBytes_GET_SIZE(v)
        else:
            vb = _S_i.pack(len(v)) + v      # a bytes-like value: the pure twin's own bytes
            v = (vb if type(vb) is bytes else _key_bytes(vb), )
            size += PyBytes_GET_SIZE((<tuple>v)[0])
        keys.append(kb)
        values.append(v)
    out = PyBytes_FromStringAndSize(NULL, size)
    w = <uint8_t*>PyBytes_AS_STRING(out)
    put_u16(w, <uint16_t>count)
    at = 2
    for i in range(len(keys)):
        kb = keys[i]
        n = PyBytes_GET_SIZE(kb)
        put_u16(w + at, <uint16_t>n)
        memcpy(w + at + 2, PyBytes_AS_STRING(kb), n)
        at += 2 + n
        v = values[i]
        if v is None:
            put_u32(w + at, 0xFFFFFFFFu)
            at += 4
        elif type(v) is bytes:
            n = PyBytes_GET_SIZE(v)
            put_u32(w + at, <uint32_t>n)
            memcpy(w + at + 4, PyBytes_AS_STRING(v), n)
            at += 4 + n
        else:
            v = (<tuple>v)[0]
            n = PyBytes_GET_SIZE(v)
            memcpy(w + at, PyBytes_AS_STRING(v), n)
            at += n
    return out


cdef list _rows(object messages):
    """The messages as a list of tuples of at least 11 items (the pure twin's transpose
    raises the same ValueError when the shortest has fewer, or all have more)."""
    cdef list rows = messages if type(messages) is list else list(messages)
    cdef Py_ssize_t shortest = -1, k
    cdef bint fixed = False
    for j in range(len(rows)):
        m = rows[j]
        if not isinstance(m, tuple):
            if not fixed:
                rows = list(rows)
                fixed = True
            m = tuple(m)
            rows[j] = m
        k = len(<tuple>m)
        if shortest < 0 or k < shortest:
            shortest = k
    if shortest < _FIELDS:
        raise ValueError(f"not enough values to unpack (expected {_FIELDS}, got {shortest})")
    if shortest > _FIELDS:
        raise ValueError(f"too many values to unpack (expected {_FIELDS})")
    return rows


cdef object _key_bytes(object k):
    """A key or value that is not bytes: its bytes (the pure twin joins any bytes-like)."""
    len(k)                                  # the pure twin's TypeError for what has no len
    return memoryview(k).tobytes()


def encode_many(messages):
    """``messages`` (Message tuples) as one blob (the columns above); ``decode_many`` reads
    it back."""
    cdef Py_ssize_t n = len(messages)
    cdef Py_ssize_t j, i, total, at, ln, ktotal = 0, vtotal = 0, htotal = 0, etotal = 0
    cdef Py_ssize_t c_tix, c_att, c_part, c_off, c_ts, c_tts, c_nb, c_kl, c_vl, c_hl, c_el
    cdef Py_ssize_t kpos, vpos, hpos, epos
    cdef list rows, names, hdrs = None, errs = None, tnames
    cdef dict where = None, subs = None
    cdef tuple m
    cdef uint32_t* tix = NULL
    cdef uint32_t li = 0
    cdef uint8_t* w
    cdef bint any_h = False, any_e = False
    if not n:
        out = PyBytes_FromStringAndSize(NULL, _HEAD)
        w = <uint8_t*>PyBytes_AS_STRING(out)
        w[0] = _VERSION
        put_u32(w + 1, 0)
        put_u16(w + 5, 0)
        return out
    rows = _rows(messages)
    n = len(rows)
    tix = <uint32_t*>PyMem_Malloc(n * sizeof(uint32_t))
    if tix == NULL:
        raise MemoryError()
    try:
        # the topics, in first-seen order (a batch is mostly one: one pointer compare a message)
        names = []
        last = _NOT_YET
        for j in range(n):
            t = (<tuple>rows[j])[0]
            if t is not last:
                if where is None:
                    where = {t: 0}
                    names.append(t)
                    li = 0
                else:
                    got = where.get(t)
                    if got is None:
                        li = <uint32_t>len(names)
                        where[t] = li
                        names.append(t)
                    else:
                        li = <uint32_t>got
                last = t
            tix[j] = li
        if len(names) > MAX_TOPICS:
            raise ValueError(f"{len(names)} topics in one batch; at most {MAX_TOPICS} can be "
                             f"stored")
        for j in range(n):
            h = (<tuple>rows[j])[7]
            if h is not None and not (type(h) is list and not <list>h) and h:
                any_h = True
                break
        if any_h:
            hdrs = []
            for j in range(n):
                h = (<tuple>rows[j])[7]
                blob = _headers_blob(h) if h else b""
                htotal += PyBytes_GET_SIZE(blob)
                hdrs.append(blob)
        for j in range(n):
            if (<tuple>rows[j])[9] is not None:
                any_e = True
                break
        if any_e:
            errs = []
            for j in range(n):
                e = (<tuple>rows[j])[9]
                if e is None:
                    errs.append(None)
                    continue
                if type(e) is str:
                    eb = PyUnicode_AsEncodedString(e, "utf-8", "replace")
                else:
                    eb = e.encode("utf-8", "replace")
                    if type(eb) is not bytes:
                        eb = _key_bytes(eb)
                etotal += len(eb)
                errs.append(eb)
        total = _HEAD
        tnames = []
        for t in names:
            tb = PyUnicode_AsUTF8String(t) if type(t) is str else t.encode()
            if type(tb) is not bytes:
                tb = _key_bytes(tb)
            if len(tb) > 0xFFFF:
                _S_H.pack(len(tb))
            total += 2 + len(tb)
            tnames.append(tb)
        for j in range(n):
            m = <tuple>rows[j]
            k = m[5]
            v = m[6]
            if type(k) is bytes:
                ktotal += PyBytes_GET_SIZE(k)
            elif k is not None:
                if subs is None:
                    subs = {}
                k = subs[(j, 5)] = _key_bytes(k)
                ktotal += PyBytes_GET_SIZE(k)
            if type(v) is bytes:
                vtotal += PyBytes_GET_SIZE(v)
            elif v is not None:
                if subs is None:
                    subs = {}
                v = subs[(j, 6)] = _key_bytes(v)
                vtotal += PyBytes_GET_SIZE(v)
        total += n * _PER_MESSAGE + ktotal + vtotal + htotal + etotal
        out = PyBytes_FromStringAndSize(NULL, total)
        w = <uint8_t*>PyBytes_AS_STRING(out)
        w[0] = _VERSION
        put_u32(w + 1, <uint32_t>n)
        put_u16(w + 5, <uint16_t>len(names))
        at = _HEAD
        for tb in tnames:
            ln = PyBytes_GET_SIZE(tb)
            put_u16(w + at, <uint16_t>ln)
            memcpy(w + at + 2, PyBytes_AS_STRING(tb), ln)
            at += 2 + ln
        c_tix = at
        c_att = c_tix + 2 * n
        c_part = c_att + 2 * n
        c_off = c_part + 4 * n
        c_ts = c_off + 8 * n
        c_tts = c_ts + 8 * n
        c_nb = c_tts + n
        c_kl = c_nb + 8 * n
        c_vl = c_kl + 4 * n
        c_hl = c_vl + 4 * n
        c_el = c_hl + 4 * n
        kpos = c_el + 4 * n
        vpos = kpos + ktotal
        hpos = vpos + vtotal
        epos = hpos + htotal
        for j in range(n):
            m = <tuple>rows[j]
            put_u16(w + c_tix + 2 * j, <uint16_t>tix[j])
            put_u16(w + c_att + 2 * j, <uint16_t>_attempts(m[8]))
            put_u32(w + c_part + 4 * j,
                    <uint32_t><int32_t>_int(m[1], INT_MIN, INT_MAX, _S_i))
            put_u64(w + c_off + 8 * j, <uint64_t>_int(m[2], LLONG_MIN, LLONG_MAX, _S_q))
            put_u64(w + c_ts + 8 * j, <uint64_t>_int(m[3], LLONG_MIN, LLONG_MAX, _S_q))
            w[c_tts + j] = <uint8_t><int8_t>_int(m[4], -128, 127, _S_b)
            put_u64(w + c_nb + 8 * j, <uint64_t>_int(m[10], LLONG_MIN, LLONG_MAX, _S_q))
            k = m[5]
            if k is None:
                put_u32(w + c_kl + 4 * j, 0xFFFFFFFFu)
            else:
                if type(k) is not bytes:
                    k = subs[(j, 5)]
                ln = PyBytes_GET_SIZE(k)
                if ln > 0x7FFFFFFF:
                    _S_i.pack(ln)
                put_u32(w + c_kl + 4 * j, <uint32_t>ln)
                memcpy(w + kpos, PyBytes_AS_STRING(k), ln)
                kpos += ln
            v = m[6]
            if v is None:
                put_u32(w + c_vl + 4 * j, 0xFFFFFFFFu)
            else:
                if type(v) is not bytes:
                    v = subs[(j, 6)]
                ln = PyBytes_GET_SIZE(v)
                if ln > 0x7FFFFFFF:
                    _S_i.pack(ln)
                put_u32(w + c_vl + 4 * j, <uint32_t>ln)
                memcpy(w + vpos, PyBytes_AS_STRING(v), ln)
                vpos += ln
            if hdrs is None:
                put_u32(w + c_hl + 4 * j, 0)
            else:
                blob = hdrs[j]
                ln = PyBytes_GET_SIZE(blob)
                if ln > 0x7FFFFFFF:
                    _S_i.pack(ln)
                put_u32(w + c_hl + 4 * j, <uint32_t>ln)
                memcpy(w + hpos, PyBytes_AS_STRING(blob), ln)
                hpos += ln
            eb = None if errs is None else errs[j]
            if eb is None:
                put_u32(w + c_el + 4 * j, 0xFFFFFFFFu)
            else:
                ln = len(eb)
                if ln > 0x7FFFFFFF:
                    _S_i.pack(ln)
                put_u32(w + c_el + 4 * j, <uint32_t>ln)
                memcpy(w + epos, PyBytes_AS_STRING(eb), ln)
                epos += ln
        return out
    finally:
        PyMem_Free(tix)


cdef int _lengths(const uint8_t* col, Py_ssize_t n, Py_ssize_t start, Py_ssize_t size,
                  str what, Py_ssize_t* end) except -1:
    """Where the pieces of the length column ``col`` (-1: null) end, from ``start``; checked
    against ``size`` (the pure twin's ``_lengths``, the same checks in the same order)."""
    cdef int32_t x, low = 0x7FFFFFFF, high = -0x7FFFFFFF - 1
    cdef Py_ssize_t j, total = 0
    end[0] = start
    if n == 0:
        return 0
    for j in range(n):
        x = <int32_t>be_u32(col + 4 * j)
        if x < low:
            low = x
        if x > high:
            high = x
        if x > 0:
            total += x
    if low < -1:
        raise CorruptDataError(f"stored messages: an impossible {what} length", start)
    if high <= 0:
        return 0
    if start + total > size:
        raise TruncatedError(total, start, size - start, f"stored messages' {what}s")
    end[0] = start + total
    return 0


cdef str _name(const uint8_t* p, Py_ssize_t start, Py_ssize_t n):
    try:
        return PyUnicode_DecodeUTF8(<char*>p + start, n, NULL)
    except UnicodeDecodeError as exc:
        raise CorruptDataError(f"stored messages: a name is not UTF-8 ({exc.reason})",
                               start) from None


cdef list _headers_at(const uint8_t* p, Py_ssize_t pos, Py_ssize_t size):
    """One message's headers: the blob ``p[pos:size]`` (offsets in errors are in the data)."""
    cdef Py_ssize_t count, i, klen
    cdef int32_t vl
    cdef list out = []
    if pos + 2 > size:
        raise TruncatedError(2, pos, size - pos, "stored message header count")
    count = be_u16(p + pos)
    pos += 2
    for i in range(count):
        if pos + 2 > size:
            raise TruncatedError(2, pos, size - pos, "stored message header key")
        klen = be_u16(p + pos)
        pos += 2
        if pos + klen > size:
            raise TruncatedError(klen, pos, size - pos, "stored message header key")
        hk = _name(p, pos, klen)
        pos += klen
        if pos + 4 > size:
            raise TruncatedError(4, pos, size - pos, "stored message header value")
        vl = <int32_t>be_u32(p + pos)
        pos += 4
        if vl == -1:
            hv = None
        elif vl < -1:
            raise CorruptDataError(f"stored message header value: impossible length {vl}",
                                   pos - 4)
        else:
            if pos + vl > size:
                raise TruncatedError(vl, pos, size - pos, "stored message header value")
            hv = PyBytes_FromStringAndSize(<const char*>p + pos, vl)
            pos += vl
        pair = (hk, hv)
        PyObject_GC_UnTrack(<void*>pair)    # a str and bytes or None: no cycle through it
        out.append(pair)
    if pos != size:
        raise CorruptDataError(f"stored message headers: {size - pos} bytes after their end", pos)
    return out


cdef inline object _piece(const uint8_t* p, int32_t n, Py_ssize_t* at):
    """The piece of length ``n`` (-1: None) at ``at[0]``, which moves past it."""
    if n < 0:
        return None
    piece = PyBytes_FromStringAndSize(<const char*>p + at[0], n)
    at[0] += n
    return piece


cdef inline void _put(object t, Py_ssize_t i, object o):
    Py_INCREF(o)                    # PyTuple_SET_ITEM steals a reference
    PyTuple_SET_ITEM(t, i, o)


def decode_many(data, message_type):
    """What ``encode_many`` wrote, as ``message_type`` tuples (the runtime's Message);
    ``CorruptDataError``/``TruncatedError`` when the bytes are not that (each count and
    length checked against the bytes left before it is used)."""
    cdef const uint8_t* p
    cdef Py_ssize_t size, pos, i, j, n, cols, tl
    cdef Py_ssize_t c_tix, c_att, c_part, c_off, c_ts, c_tts, c_nb, c_kl, c_vl, c_hl, c_el
    cdef Py_ssize_t kpos, vpos, hpos, epos, kend, vend, hend, eend
    cdef uint32_t tcount, ti
    cdef int32_t hl, el
    cdef list names, out, headers = None
    cdef PyTypeObject* tp
    if type(data) is not bytes:
        data = bytes(data)
    p = <const uint8_t*>PyBytes_AS_STRING(data)
    size = PyBytes_GET_SIZE(data)
    if size < _HEAD:
        raise TruncatedError(_HEAD, 0, size, "stored messages' header")
    if p[0] != _VERSION:
        raise CorruptDataError(f"stored messages: unknown version {p[0]}", 0)
    n = be_u32(p + 1)
    tcount = be_u16(p + 5)
    pos = _HEAD
    names = []
    for i in range(tcount):
        if pos + 2 > size:
            raise TruncatedError(2, pos, size - pos, "stored messages' topic")
        tl = be_u16(p + pos)
        pos += 2
        if pos + tl > size:
            raise TruncatedError(tl, pos, size - pos, "stored messages' topic")
        names.append(_name(p, pos, tl))
        pos += tl
    cols = n * _PER_MESSAGE
    if pos + cols > size:
        raise TruncatedError(cols, pos, size - pos, "stored messages' columns")
    c_tix = pos
    c_att = c_tix + 2 * n
    c_part = c_att + 2 * n
    c_off = c_part + 4 * n
    c_ts = c_off + 8 * n
    c_tts = c_ts + 8 * n
    c_nb = c_tts + n
    c_kl = c_nb + 8 * n
    c_vl = c_kl + 4 * n
    c_hl = c_vl + 4 * n
    c_el = c_hl + 4 * n
    pos = c_el + 4 * n
    for j in range(n):
        if be_u16(p + c_tix + 2 * j) >= tcount:
            raise CorruptDataError("stored messages: a topic index past the topics", pos)
    kpos = pos
    _lengths(p + c_kl, n, kpos, size, "key", &vpos)
    _lengths(p + c_vl, n, vpos, size, "value", &hpos)
    _lengths(p + c_hl, n, hpos, size, "header", &epos)
    _lengths(p + c_el, n, epos, size, "error", &pos)
    if hpos != epos:                # some message has headers: all parsed before any is made
        headers = []
        hend = hpos
        for j in range(n):
            hl = <int32_t>be_u32(p + c_hl + 4 * j)
            if hl > 0:
                headers.append(_headers_at(p, hend, hend + hl))
                hend += hl
            else:
                headers.append(None)
    if pos != size:
        raise CorruptDataError(f"stored messages: {size - pos} bytes after their end", pos)
    out = PyList_New(n)
    if not n:
        return out
    if not (isinstance(message_type, type) and issubclass(message_type, tuple)):
        tuple.__new__(message_type, ())     # its TypeError, as the pure twin's make raises
    tp = <PyTypeObject*>message_type
    for j in range(n):
        t = kc_fields(tp, _FIELDS)
        ti = be_u16(p + c_tix + 2 * j)
        _put(t, 0, names[ti])
        _put(t, 1, PyLong_FromLong(<int32_t>be_u32(p + c_part + 4 * j)))
        _put(t, 2, PyLong_FromLongLong(<int64_t>be_u64(p + c_off + 8 * j)))
        _put(t, 3, PyLong_FromLongLong(<int64_t>be_u64(p + c_ts + 8 * j)))
        _put(t, 4, PyLong_FromLong(<int8_t>p[c_tts + j]))
        _put(t, 5, _piece(p, <int32_t>be_u32(p + c_kl + 4 * j), &kpos))
        _put(t, 6, _piece(p, <int32_t>be_u32(p + c_vl + 4 * j), &vpos))
        h = [] if headers is None or headers[j] is None else headers[j]
        PyObject_GC_UnTrack(<void*>h)
        _put(t, 7, h)
        _put(t, 8, PyLong_FromLong(be_u16(p + c_att + 2 * j)))
        el = <int32_t>be_u32(p + c_el + 4 * j)
        if el < 0:
            _put(t, 9, None)
        else:
            _put(t, 9, PyUnicode_DecodeUTF8(<char*>p + epos, el, "replace"))
            epos += el
        _put(t, 10, PyLong_FromLongLong(<int64_t>be_u64(p + c_nb + 8 * j)))
        t = kc_finish(tp, t)
        PyObject_GC_UnTrack(<void*>t)
        Py_INCREF(t)                        # PyList_SET_ITEM steals a reference
        PyList_SET_ITEM(out, j, t)
    return out


def from_records(topic, partition, records, message_type):
    """``records`` (a consumer's, of one partition) as new ``message_type`` tuples, as the
    pure twin makes them: a compiled Record's fields are read straight, anything else's
    by attribute (its AttributeError as the pure twin's). Each tuple is made with the
    type's own allocator and untracked by the cyclic GC, as decode_many's are (it holds
    the record's headers list, which cannot lead back to it)."""
    cdef list recs = records if type(records) is list else list(records)
    cdef Py_ssize_t n = len(recs), j
    cdef list out = PyList_New(n)
    cdef PyTypeObject* tp
    cdef CRecord cr
    if not n:
        return out
    if not (isinstance(message_type, type) and issubclass(message_type, tuple)):
        tuple.__new__(message_type, ())     # its TypeError, as the pure twin's raises
    tp = <PyTypeObject*>message_type
    zero = 0
    for j in range(n):
        r = recs[j]
        if isinstance(r, CRecord):
            cr = <CRecord>r
            off, ts, tts, key, value, headers = (cr.offset, cr.timestamp, cr.timestamp_type,
                                                 cr.key, cr.value, cr.headers)
        else:
            off, ts, tts, key, value, headers = (r.offset, r.timestamp, r.timestamp_type,
                                                 r.key, r.value, r.headers)
        t = kc_fields(tp, _FIELDS)
        _put(t, 0, topic)
        _put(t, 1, partition)
        _put(t, 2, off)
        _put(t, 3, ts)
        _put(t, 4, tts)
        _put(t, 5, key)
        _put(t, 6, value)
        _put(t, 7, headers)
        _put(t, 8, zero)
        _put(t, 9, None)
        _put(t, 10, zero)
        t = kc_finish(tp, t)
        PyObject_GC_UnTrack(<void*>t)
        Py_INCREF(t)                        # PyList_SET_ITEM steals a reference
        PyList_SET_ITEM(out, j, t)
    return out
