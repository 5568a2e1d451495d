"""Compiled twin of kcodec._py.engine: the same plans, bytes, objects and errors.

Wire layout: see kcodec._py.engine. Each plan (kcodec.protocol._plan.StructPlan) is
lowered once into CPlan/COp objects with C fields (cached in ``plan.cy``); the functions
below interpret that copy with the bounds-checked Reader of kcodec._cy._reader.
Every check happens in the same order as in the pure twin, so both raise the same
exception with the same message.
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_CheckExact, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.float cimport PyFloat_AsDouble, PyFloat_Check, PyFloat_FromDouble
from cpython.list cimport PyList_Check, PyList_GET_ITEM, PyList_GET_SIZE, PyList_New, PyList_SET_ITEM
from cpython.long cimport PyLong_Check, PyLong_FromLong, PyLong_FromLongLong, PyLong_FromUnsignedLongLong
from cpython.object cimport PyObject, PyTypeObject
from cpython.ref cimport Py_INCREF, Py_XDECREF
from cpython.tuple cimport PyTuple_Check, PyTuple_GET_ITEM, PyTuple_GET_SIZE
from cpython.unicode cimport PyUnicode_Check, PyUnicode_DecodeUTF8
from libc.stdint cimport INT64_MAX, INT64_MIN, int8_t, int16_t, int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t
from libc.string cimport memcpy

from kcodec._cy._reader cimport (
    Buf, Reader, be_u16, be_u32, be_u64, get_buf, need, put_u16, put_u32, put_u64, put_uvar,
    read_uvar,
)

import types as _types
import uuid as _uuid

from kcodec.errors import CorruptDataError, DecodeLimitError, EncodeError, TruncatedError, UnsupportedVersionError

__all__ = ["encode_struct", "decode_struct", "MAX_TAGGED_FIELDS", "ALL_ITEMS"]

MAX_TAGGED_FIELDS = 1024
ALL_ITEMS = "*"
cdef Py_ssize_t C_MAX_TAGGED_FIELDS = MAX_TAGGED_FIELDS
cdef str C_ALL_ITEMS = ALL_ITEMS

cdef extern from "Python.h":
    const char* PyUnicode_AsUTF8AndSize(object o, Py_ssize_t* size) except NULL
    long long PyLong_AsLongLongAndOverflow(object o, int* overflow) except? -1
    int PyObject_GenericSetAttr(object o, object name, object value) except -1
    bint PyBool_Check(object o)
    int _PyBytes_Resize(PyObject** b, Py_ssize_t newsize) except -1
    # object.__new__(cls) without the call: the classes are plain Python classes whose
    # tp_alloc is this function (object.__new__ itself ends in it)
    object PyType_GenericAlloc(PyTypeObject* cls, Py_ssize_t nitems)


# Wire codes: the same numbers as kcodec.protocol._plan (a test checks they agree).
cdef enum:
    INT8 = 1
    INT16 = 2
    INT32 = 3
    INT64 = 4
    UINT16 = 5
    UINT32 = 6
    FLOAT64 = 7
    BOOL = 8
    UUID = 9
    UVARINT = 10
    STRING = 11
    CSTRING = 12
    BYTES = 13
    CBYTES = 14
    ARRAY = 15
    CARRAY = 16
    STRUCT = 17
    RECORDS = 18
    CRECORDS = 19

CODES = {
    "INT8": INT8, "INT16": INT16, "INT32": INT32, "INT64": INT64, "UINT16": UINT16,
    "UINT32": UINT32, "FLOAT64": FLOAT64, "BOOL": BOOL, "UUID": UUID, "UVARINT": UVARINT,
    "STRING": STRING, "CSTRING": CSTRING, "BYTES": BYTES, "CBYTES": CBYTES,
    "ARRAY": ARRAY, "CARRAY": CARRAY, "STRUCT": STRUCT, "RECORDS": RECORDS, "CRECORDS": CRECORDS,
}

cdef Py_ssize_t[20] SIZE
SIZE[:] = [0, 1, 2, 4, 8, 2, 4, 8, 1, 16, 1, 2, 1, 4, 1, 4, 1, 0, 4, 1]
cdef long long[20] LO
cdef long long[20] HI
LO[:] = [0, -(1 << 7), -(1 << 15), -(1 << 31), 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]
HI[:] = [0, (1 << 7) - 1, (1 << 15) - 1, (1 << 31) - 1, 0, 0xFFFF, 0xFFFFFFFF, 0, 0, 0,
         0xFFFFFFFF, 0, 0, 0, 0, 0, 0, 0, 0, 0]
LO[INT64] = INT64_MIN
HI[INT64] = INT64_MAX

_RANGE = {INT8: (-(1 << 7), (1 << 7) - 1, "int8"), INT16: (-(1 << 15), (1 << 15) - 1, "int16"),
          INT32: (-(1 << 31), (1 << 31) - 1, "int32"), INT64: (-(1 << 63), (1 << 63) - 1, "int64"),
          UINT16: (0, 0xFFFF, "uint16"), UINT32: (0, 0xFFFFFFFF, "uint32"),
          UVARINT: (0, 0xFFFFFFFF, "uvarint")}

cdef object UUID_CLS = _uuid.UUID
cdef object UUID_NEW = _uuid.UUID.__new__
cdef object SAFE_UNKNOWN = _uuid.SafeUUID.unknown
cdef str S_INT = "int"
cdef str S_IS_SAFE = "is_safe"
cdef str S_UNKNOWN = "_unknown_tags"


# ----------------------------------------------------------------------------- lowered plans


cdef extern from "structmember.h":
    ctypedef struct PyMemberDef:
        Py_ssize_t offset

cdef extern from "Python.h":
    ctypedef struct PyMemberDescrObject:
        PyMemberDef* d_member

cdef object MEMBER_DESCRIPTOR = _types.MemberDescriptorType


cdef Py_ssize_t slot_offset(object cls, str key) except -1:
    """Where the slot ``key`` of instances of ``cls`` lives (they are __slots__ classes)."""
    desc = None
    for klass in cls.__mro__:
        desc = klass.__dict__.get(key)
        if desc is not None:
            break
    if type(desc) is not MEMBER_DESCRIPTOR:
        raise TypeError(f"{cls.__name__}.{key} is not a slot")
    return (<PyMemberDescrObject*><PyObject*>desc).d_member.offset


cdef inline PyObject** slot_ptr(object obj, Py_ssize_t offset) noexcept:
    return <PyObject**>((<char*><PyObject*>obj) + offset)


cdef inline void slot_set(object obj, Py_ssize_t offset, object value) noexcept:
    cdef PyObject** p = slot_ptr(obj, offset)
    cdef PyObject* old = p[0]
    Py_INCREF(value)
    p[0] = <PyObject*>value
    Py_XDECREF(old)


cdef class COp:
    cdef int code
    cdef int elem
    cdef bint nullable
    cdef long tag
    cdef Py_ssize_t unit
    cdef Py_ssize_t offset
    cdef object key
    cdef str what
    cdef CPlan sub
    cdef object default


cdef class Absent:
    cdef Py_ssize_t offset
    cdef object default
    cdef str what


cdef class InitSlot:
    """A slot set before decoding: an immutable default, or a fresh list/struct."""
    cdef Py_ssize_t offset
    cdef object value
    cdef Fresh fresh


cdef class ClassInit:
    """How to build a default instance of a struct class without calling __init__."""
    cdef object cls
    cdef tuple slots
    cdef Py_ssize_t unknown


cdef class Fresh:
    """A mutable default to build per decoded object: [] or a default struct."""
    cdef bint is_list
    cdef ClassInit init


cdef dict CLASS_INITS = {}


cdef ClassInit class_init(object cls):
    cdef ClassInit ci = CLASS_INITS.get(cls)
    if ci is not None:
        return ci
    ci = ClassInit.__new__(ClassInit)
    ci.cls = cls
    ci.unknown = slot_offset(cls, S_UNKNOWN)
    CLASS_INITS[cls] = ci
    ci.slots = tuple([init_slot(cls, k, v, None) for k, v in cls._defaults.items()]
                     + [init_slot(cls, k, None, f) for k, f in cls._fresh])
    return ci


cdef InitSlot init_slot(object cls, object key, object value, object factory):
    cdef InitSlot s = InitSlot.__new__(InitSlot)
    s.offset = slot_offset(cls, key)
    s.value = value
    if factory is not None:
        s.fresh = Fresh.__new__(Fresh)
        s.fresh.is_list = factory is list
        if not s.fresh.is_list:
            s.fresh.init = class_init(factory)
    return s


cdef object new_default(ClassInit ci):
    obj = PyType_GenericAlloc(<PyTypeObject*>ci.cls, 0)
    fill_slots(obj, ci.slots)
    slot_set(obj, ci.unknown, None)
    return obj


cdef inline int fill_slots(object obj, tuple slots) except -1:
    cdef InitSlot s
    for s in slots:
        if s.fresh is None:
            slot_set(obj, s.offset, s.value)
        elif s.fresh.is_list:
            slot_set(obj, s.offset, [])
        else:
            slot_set(obj, s.offset, new_default(s.fresh.init))
    return 0


cdef class CPlan:
    cdef object cls
    cdef str name
    cdef object version
    cdef bint flexible
    cdef tuple ops
    cdef tuple tagged
    cdef dict tag_map
    cdef tuple absent
    cdef tuple init
    cdef Py_ssize_t unknown
    cdef Py_ssize_t min_size
    cdef Py_ssize_t size_hint


cdef COp lower_op(object cls, tuple t):
    cdef COp op = COp.__new__(COp)
    op.code = t[0]
    op.key = t[1]
    op.offset = slot_offset(cls, t[1])
    op.what = t[2]
    op.nullable = t[3]
    op.elem = t[4]
    op.sub = lower(t[5]) if t[5] is not None else None
    op.tag = t[6]
    op.default = t[7]
    if op.elem == STRUCT:
        op.unit = op.sub.min_size
    elif op.elem:
        op.unit = SIZE[op.elem]
    if op.unit <= 0:
        op.unit = 1
    return op


cdef Absent lower_absent(object cls, tuple t):
    cdef Absent a = Absent.__new__(Absent)
    a.offset = slot_offset(cls, t[0])
    a.default = t[1]
    a.what = t[3]
    return a


cdef CPlan lower(object plan):
    cdef object c = plan.cy
    if c is not None:
        return <CPlan>c
    cdef CPlan p = CPlan.__new__(CPlan)
    cls = plan.cls
    p.cls = cls
    p.name = plan.name
    p.version = plan.version
    p.flexible = plan.flexible
    p.ops = tuple([lower_op(cls, t) for t in plan.ops])
    p.tagged = tuple([lower_op(cls, t) for t in plan.tagged])
    p.tag_map = {(<COp>op).tag: op for op in p.tagged}
    # only non-ignorable absent fields are checked on encode
    p.absent = tuple([lower_absent(cls, t) for t in plan.absent if not t[2]])
    p.init = tuple([init_slot(cls, k, v, None) for k, v in plan.defaults.items()]
                   + [init_slot(cls, k, None, f) for k, f in plan.fresh])
    p.unknown = slot_offset(cls, S_UNKNOWN)
    p.min_size = plan.min_size
    p.size_hint = 256
    plan.cy = p
    return p


# ----------------------------------------------------------------------------- encoding


cdef struct WBuf:
    # The output is written straight into a bytes object that grows as needed and is
    # shrunk to its length at the end: no second copy of large records fields.
    PyObject* obj
    uint8_t* data
    Py_ssize_t len
    Py_ssize_t cap


cdef int wb_init(WBuf* w, Py_ssize_t cap) except -1:
    o = PyBytes_FromStringAndSize(NULL, cap)
    Py_INCREF(o)
    w.obj = <PyObject*>o
    w.data = <uint8_t*>PyBytes_AS_STRING(o)
    w.len = 0
    w.cap = cap
    return 0


cdef object wb_finish(WBuf* w):
    """The bytes written so far; the WBuf gives up its reference."""
    if w.len != w.cap:
        _PyBytes_Resize(&w.obj, w.len)
    result = <object>w.obj
    Py_XDECREF(w.obj)
    w.obj = NULL
    return result


cdef inline void wb_free(WBuf* w) noexcept:
    Py_XDECREF(w.obj)
    w.obj = NULL


cdef int grow(WBuf* w, Py_ssize_t n) except -1:
    cdef Py_ssize_t want = w.len + n
    cdef Py_ssize_t cap = w.cap * 2 if w.cap else 256
    while cap < want:
        cap *= 2
    _PyBytes_Resize(&w.obj, cap)
    w.data = <uint8_t*>PyBytes_AS_STRING(<object>w.obj)
    w.cap = cap
    return 0


cdef inline int reserve(WBuf* w, Py_ssize_t n) except -1:
    if w.len + n > w.cap:
        grow(w, n)
    return 0


cdef inline int w_uvar(WBuf* w, uint64_t u) except -1:
    reserve(w, 10)
    w.len += put_uvar(w.data + w.len, u)
    return 0


cdef inline int w_raw(WBuf* w, const void* p, Py_ssize_t n) except -1:
    reserve(w, n)
    memcpy(w.data + w.len, p, n)
    w.len += n
    return 0


cdef int bad_range(object v, int code, str what) except -1:
    lo, hi, kind = _RANGE[code]
    raise EncodeError(f"{what}: value {v} out of range for {kind} ({lo}..{hi})")


cdef int enc_value(WBuf* w, int code, object v, bint nullable, CPlan sub, str what, int elem) except -1:
    cdef long long x
    cdef int overflow = 0
    cdef double f
    cdef uint64_t bits
    cdef const char* s
    cdef Py_ssize_t n, i
    cdef Buf b
    cdef object seq
    if code <= BOOL:
        if code == FLOAT64:
            if not (PyFloat_Check(v) or PyLong_Check(v)) or PyBool_Check(v):
                raise EncodeError(f"{what}: expected float, got {type(v).__name__}")
            try:
                f = PyFloat_AsDouble(v)
            except OverflowError:
                raise EncodeError(f"{what}: value out of range for float64") from None
            memcpy(&bits, &f, 8)
            reserve(w, 8)
            put_u64(w.data + w.len, bits)
            w.len += 8
            return 0
        if code == BOOL:
            if not PyLong_Check(v):
                raise EncodeError(f"{what}: expected bool, got {type(v).__name__}")
            reserve(w, 1)
            w.data[w.len] = 1 if v else 0
            w.len += 1
            return 0
        if not PyLong_Check(v):
            raise EncodeError(f"{what}: expected int, got {type(v).__name__}")
        x = PyLong_AsLongLongAndOverflow(v, &overflow)
        if overflow or x < LO[code] or x > HI[code]:
            bad_range(v, code, what)
        reserve(w, 8)
        if code == INT32:
            put_u32(w.data + w.len, <uint32_t>x)
            w.len += 4
        elif code == INT64:
            put_u64(w.data + w.len, <uint64_t>x)
            w.len += 8
        elif code == INT16 or code == UINT16:
            put_u16(w.data + w.len, <uint16_t>x)
            w.len += 2
        elif code == INT8:
            w.data[w.len] = <uint8_t>x
            w.len += 1
        else:  # UINT32
            put_u32(w.data + w.len, <uint32_t>x)
            w.len += 4
        return 0
    if code == UUID:
        if not isinstance(v, UUID_CLS):
            raise EncodeError(f"{what}: expected uuid.UUID, got {type(v).__name__}")
        seq = v.bytes
        w_raw(w, PyBytes_AS_STRING(seq), 16)
        return 0
    if code == UVARINT:
        if not PyLong_Check(v):
            raise EncodeError(f"{what}: expected int, got {type(v).__name__}")
        x = PyLong_AsLongLongAndOverflow(v, &overflow)
        if overflow or x < 0 or x > 0xFFFFFFFF:
            raise EncodeError(f"{what}: value {v} out of range for uvarint (0..4294967295)")
        w_uvar(w, <uint64_t>x)
        return 0
    if v is None:
        if not nullable:
            raise EncodeError(f"{what}: None is not allowed (not nullable in this version)")
        if code == STRING:
            w_raw(w, b"\xff\xff", 2)
        elif code == BYTES or code == ARRAY or code == RECORDS:
            w_raw(w, b"\xff\xff\xff\xff", 4)
        elif code == STRUCT:
            w_raw(w, b"\xff", 1)
        else:
            w_raw(w, b"\x00", 1)
        return 0
    if code == STRING or code == CSTRING:
        if not PyUnicode_Check(v):
            raise EncodeError(f"{what}: expected str, got {type(v).__name__}")
        try:
            s = PyUnicode_AsUTF8AndSize(v, &n)
        except UnicodeEncodeError:
            raise EncodeError(f"{what}: string is not encodable as UTF-8") from None
        if code == STRING:
            if n > 0x7FFF:
                raise EncodeError(f"{what}: string of {n} bytes is longer than 32767")
            reserve(w, 2 + n)
            put_u16(w.data + w.len, <uint16_t>n)
            w.len += 2
        else:
            if n > 0x7FFFFFFE:
                raise EncodeError(f"{what}: string of {n} bytes is too long")
            reserve(w, 5 + n)
            w.len += put_uvar(w.data + w.len, <uint64_t>(n + 1))
        memcpy(w.data + w.len, s, n)
        w.len += n
        return 0
    if code == BYTES or code == CBYTES or code == RECORDS or code == CRECORDS:
        if PyBytes_CheckExact(v):
            s = PyBytes_AS_STRING(v)
            n = PyBytes_GET_SIZE(v)
        else:
            try:
                b = get_buf(v)
            except TypeError:
                raise EncodeError(f"{what}: expected a bytes-like object, got {type(v).__name__}") from None
            s = <const char*>b.ptr
            n = b.size
        if n > 0x7FFFFFFE:
            raise EncodeError(f"{what}: {n} bytes is too long")
        reserve(w, 5 + n)
        if code == BYTES or code == RECORDS:
            put_u32(w.data + w.len, <uint32_t>n)
            w.len += 4
        else:
            w.len += put_uvar(w.data + w.len, <uint64_t>(n + 1))
        memcpy(w.data + w.len, s, n)
        w.len += n
        return 0
    if code == STRUCT:
        if nullable:
            w_raw(w, b"\x01", 1)
        enc_struct(w, sub, v)
        return 0
    # ARRAY / CARRAY
    if not (PyList_Check(v) or PyTuple_Check(v)):
        raise EncodeError(f"{what}: expected a list, got {type(v).__name__}")
    n = len(v)
    if n > 0x7FFFFFFE:
        raise EncodeError(f"{what}: {n} elements is too many")
    reserve(w, 5)
    if code == ARRAY:
        put_u32(w.data + w.len, <uint32_t>n)
        w.len += 4
    else:
        w.len += put_uvar(w.data + w.len, <uint64_t>(n + 1))
    if PyList_Check(v):
        if elem == STRUCT:
            i = 0
            while i < PyList_GET_SIZE(v):
                enc_struct(w, sub, <object>PyList_GET_ITEM(v, i))
                i += 1
        else:
            i = 0
            while i < PyList_GET_SIZE(v):
                enc_value(w, elem, <object>PyList_GET_ITEM(v, i), False, None, what, 0)
                i += 1
    else:
        for x_obj in v:
            if elem == STRUCT:
                enc_struct(w, sub, x_obj)
            else:
                enc_value(w, elem, x_obj, False, None, what, 0)
    return 0


cdef int enc_struct(WBuf* w, CPlan plan, object obj) except -1:
    cdef COp op
    cdef Absent a
    cdef PyObject* p
    cdef Py_ssize_t i, n
    cdef tuple ops
    if not isinstance(obj, plan.cls):
        raise EncodeError(f"{plan.name}: expected {plan.cls.__name__}, got {type(obj).__name__}")
    if plan.absent:
        for a in plan.absent:
            p = slot_ptr(obj, a.offset)[0]
            if p != NULL and p != <PyObject*>a.default and <object>p != a.default:
                raise UnsupportedVersionError(
                    f"{a.what} is not supported in version {plan.version} (it has a non-default value)")
    ops = plan.ops
    n = PyTuple_GET_SIZE(ops)
    for i in range(n):
        op = <COp>PyTuple_GET_ITEM(ops, i)
        p = slot_ptr(obj, op.offset)[0]
        if p == NULL:
            raise EncodeError(f"{op.what}: the attribute is missing")
        enc_value(w, op.code, <object>p, op.nullable, op.sub, op.what, op.elem)
    if plan.flexible:
        enc_tags(w, plan, obj)
    return 0


cdef int enc_tags(WBuf* w, CPlan plan, object obj) except -1:
    cdef COp op
    cdef WBuf tmp
    cdef list fields = None
    cdef object unknown
    cdef PyObject* p
    if plan.tagged:
        for op in plan.tagged:
            p = slot_ptr(obj, op.offset)[0]
            if p == NULL:
                continue
            v = <object>p
            if v is op.default or v == op.default:
                continue
            tmp.obj = NULL
            wb_init(&tmp, 64)
            try:
                enc_value(&tmp, op.code, v, op.nullable, op.sub, op.what, op.elem)
                raw = wb_finish(&tmp)
            finally:
                wb_free(&tmp)
            if fields is None:
                fields = []
            fields.append((op.tag, raw))
    p = slot_ptr(obj, plan.unknown)[0]
    unknown = <object>p if p != NULL else None
    if unknown:
        if fields is None:
            fields = []
        for tag, raw in unknown.items():
            if tag not in plan.tag_map:
                fields.append((tag, bytes(raw)))
        fields.sort(key=_first)
    if fields is None:
        reserve(w, 1)
        w.data[w.len] = 0
        w.len += 1
        return 0
    w_uvar(w, len(fields))
    for tag, raw in fields:
        w_uvar(w, tag)
        w_uvar(w, len(raw))
        w_raw(w, PyBytes_AS_STRING(raw), PyBytes_GET_SIZE(raw))
    return 0


def _first(t):
    return t[0]


def encode_struct(plan, obj):
    """Encode ``obj`` (an instance of ``plan.cls``) following ``plan``."""
    cdef CPlan p = lower(plan)
    cdef WBuf w
    w.obj = NULL
    wb_init(&w, p.size_hint)
    try:
        enc_struct(&w, p, obj)
        # the next call starts with room for a message of this size
        p.size_hint = w.len + 64 if w.len + 64 > 256 else 256
        return wb_finish(&w)
    finally:
        wb_free(&w)


# ----------------------------------------------------------------------------- decoding


cdef inline int r_uvar(Reader* r, Py_ssize_t* out, str what) except -1:
    cdef uint64_t u
    read_uvar(r, &u, 5, 32, what)
    out[0] = <Py_ssize_t>u
    return 0


cdef object make_uuid(const uint8_t* p):
    cdef uint64_t hi = be_u64(p)
    cdef uint64_t lo = be_u64(p + 8)
    cdef object u = UUID_NEW(UUID_CLS)
    PyObject_GenericSetAttr(u, S_INT, (PyLong_FromUnsignedLongLong(hi) << 64) | PyLong_FromUnsignedLongLong(lo))
    PyObject_GenericSetAttr(u, S_IS_SAFE, SAFE_UNKNOWN)
    return u


cdef object dec_prim(Reader* r, int code, str what):
    cdef const uint8_t* p
    cdef uint64_t bits
    cdef double f
    cdef Py_ssize_t u
    need(r, SIZE[code], what)
    p = r.data + r.pos
    if code == INT32:
        r.pos += 4
        return PyLong_FromLong(<int32_t>be_u32(p))
    if code == INT16:
        r.pos += 2
        return PyLong_FromLong(<int16_t>be_u16(p))
    if code == INT64:
        r.pos += 8
        return PyLong_FromLongLong(<int64_t>be_u64(p))
    if code == INT8:
        r.pos += 1
        return PyLong_FromLong(<int8_t>p[0])
    if code == BOOL:
        r.pos += 1
        return p[0] != 0
    if code == UINT16:
        r.pos += 2
        return PyLong_FromLong(be_u16(p))
    if code == UINT32:
        r.pos += 4
        return PyLong_FromLongLong(be_u32(p))
    if code == FLOAT64:
        bits = be_u64(p)
        memcpy(&f, &bits, 8)
        r.pos += 8
        return PyFloat_FromDouble(f)
    if code == UUID:
        r.pos += 16
        return make_uuid(p)
    # UVARINT
    r_uvar(r, &u, what)
    return PyLong_FromLongLong(u)


cdef class Ctx:
    """Per-call decoding state: the input, for zero-copy views of records fields, and
    the limits' allowances (field path -> [left, limit]; None: no limits)."""
    cdef object src
    cdef object view
    cdef bint readonly
    cdef dict lim

    cdef object records(self, Py_ssize_t pos, Py_ssize_t n):
        if not self.readonly:
            return None
        if self.view is None:
            mv = memoryview(self.src)
            self.view = mv if (mv.ndim == 1 and mv.format == "B") else mv.cast("B")
        return self.view[pos:pos + n]


cdef object dec_value(Reader* r, int code, bint nullable, CPlan sub, str what, int elem, Py_ssize_t unit, Ctx ctx):
    cdef Py_ssize_t start, n, i
    cdef const uint8_t* p
    cdef uint8_t marker
    cdef list out
    if code <= UVARINT:
        return dec_prim(r, code, what)
    if code == STRUCT:
        if nullable:
            need(r, 1, what)
            marker = r.data[r.pos]
            r.pos += 1
            if marker & 0x80:  # a negative int8 means null, like Kafka's own readers
                return None
        return dec_struct(r, sub, ctx)
    start = r.pos
    if code == STRING:
        need(r, 2, what)
        n = <int16_t>be_u16(r.data + r.pos)
        r.pos += 2
    elif code == BYTES or code == ARRAY or code == RECORDS:
        need(r, 4, what)
        n = <int32_t>be_u32(r.data + r.pos)
        r.pos += 4
    else:
        r_uvar(r, &n, what)
        n -= 1
    if n < 0:
        if n == -1 and nullable:
            return None
        if n == -1:
            raise CorruptDataError(f"{what}: null in a non-nullable field", start)
        raise CorruptDataError(f"{what}: negative length {n}", start)
    if code == ARRAY or code == CARRAY:
        need(r, n * unit, what)
        if ctx.lim is not None:
            if what in ctx.lim:
                charge(ctx.lim, what, n, start)
            if C_ALL_ITEMS in ctx.lim:
                charge_all(ctx.lim, what, n, start)
        out = PyList_New(n)  # NULL slots until filled: safe for GC and for dealloc on error
        if elem == STRUCT:
            for i in range(n):
                item = dec_struct(r, sub, ctx)
                Py_INCREF(item)
                PyList_SET_ITEM(out, i, item)
        else:
            for i in range(n):
                item = dec_prim(r, elem, what) if elem <= UVARINT else dec_value(r, elem, False, None, what, 0, 1, ctx)
                Py_INCREF(item)
                PyList_SET_ITEM(out, i, item)
        return out
    need(r, n, what)
    p = r.data + r.pos
    if code == STRING or code == CSTRING:
        try:
            s = PyUnicode_DecodeUTF8(<const char*>p, n, NULL)
        except UnicodeDecodeError:
            raise CorruptDataError(f"{what}: invalid UTF-8", r.pos) from None
        r.pos += n
        return s
    if code >= RECORDS and ctx.readonly:
        s = ctx.records(r.pos, n)
        r.pos += n
        return s
    r.pos += n
    return PyBytes_FromStringAndSize(<const char*>p, n)


cdef int charge(dict lim, str what, Py_ssize_t n, Py_ssize_t at) except -1:
    """Take ``n`` elements of ``what``'s allowance (``lim``: [left, limit] of each path)."""
    cdef list a = <list>lim[what]
    cdef object left = a[0]
    cdef object limit = a[1]
    if n > left:
        raise DecodeLimitError(what, limit - left + n, limit, at)
    a[0] = left - n
    return 0


cdef int charge_all(dict lim, str what, Py_ssize_t n, Py_ssize_t at) except -1:
    """Take ``n`` items of the message's allowance (``lim[ALL_ITEMS]``)."""
    cdef list a = <list>lim[C_ALL_ITEMS]
    cdef object left = a[0]
    cdef object limit = a[1]
    if n > left:
        raise DecodeLimitError(f"{what} (with every array and tagged field of the message)",
                               limit - left + n, limit, at)
    a[0] = left - n
    return 0


cdef object dec_struct(Reader* r, CPlan plan, Ctx ctx):
    cdef COp op
    cdef tuple ops = plan.ops
    cdef Py_ssize_t i, n = PyTuple_GET_SIZE(ops)
    obj = PyType_GenericAlloc(<PyTypeObject*>plan.cls, 0)
    if plan.init:
        fill_slots(obj, plan.init)
    slot_set(obj, plan.unknown, None)
    for i in range(n):
        op = <COp>PyTuple_GET_ITEM(ops, i)
        slot_set(obj, op.offset, dec_value(r, op.code, op.nullable, op.sub, op.what, op.elem, op.unit, ctx))
    if plan.flexible:
        dec_tags(r, plan, obj, ctx)
    return obj


cdef int dec_tags(Reader* r, CPlan plan, object obj, Ctx ctx) except -1:
    cdef str what = f"{plan.name} tagged fields"
    cdef Py_ssize_t count, tag, size, stop, saved_end, i
    cdef dict unknown = None
    cdef COp op
    cdef Py_ssize_t start = r.pos
    r_uvar(r, &count, what)
    if count == 0:
        return 0
    need(r, count * 2, what)
    if count > C_MAX_TAGGED_FIELDS:
        raise DecodeLimitError(what, count, C_MAX_TAGGED_FIELDS, start)
    if ctx.lim is not None and C_ALL_ITEMS in ctx.lim:
        charge_all(ctx.lim, what, count, start)
    for i in range(count):
        r_uvar(r, &tag, what)
        r_uvar(r, &size, what)
        need(r, size, what)
        o = plan.tag_map.get(tag)
        if o is None:
            if unknown is None:
                unknown = {}
            unknown[tag] = PyBytes_FromStringAndSize(<const char*>(r.data + r.pos), size)
            r.pos += size
            continue
        op = <COp>o
        stop = r.pos + size
        saved_end = r.end
        r.end = stop
        try:
            value = dec_value(r, op.code, op.nullable, op.sub, op.what, op.elem, op.unit, ctx)
        finally:
            r.end = saved_end
        slot_set(obj, op.offset, value)
        if r.pos != stop:
            raise CorruptDataError(
                f"{op.what}: tagged field of {size} bytes has {stop - r.pos} unread", stop - size)
        r.pos = stop
    if unknown is not None:
        slot_set(obj, plan.unknown, unknown)
    return 0


def decode_struct(plan, buf, Py_ssize_t pos=0, bint exact=True, limits=None):
    """Decode one ``plan.cls`` at ``pos`` of any bytes-like ``buf``: ``(object, next_pos)``.

    With ``exact``, bytes left after the struct are an error (CorruptDataError).
    ``limits``: a mapping of array field paths (``"MetadataResponse.topics"``) to the most
    elements those arrays may hold in all (DecodeLimitError past it).
    """
    cdef CPlan p = lower(plan)
    cdef Buf b = get_buf(buf)
    cdef Reader r
    r.data = b.ptr
    r.end = b.size
    r.base = 0
    if pos < 0 or pos > r.end:
        raise CorruptDataError(f"position {pos} outside a buffer of {r.end} bytes", pos)
    r.pos = pos
    cdef Ctx ctx = Ctx.__new__(Ctx)
    ctx.src = buf
    ctx.readonly = b.view.readonly
    ctx.lim = {what: [int(n), int(n)] for what, n in limits.items()} if limits else None
    obj = dec_struct(&r, p, ctx)
    if exact and r.pos != r.end:
        raise CorruptDataError(f"{r.end - r.pos} trailing bytes after {p.name}", r.pos)
    return obj, r.pos
