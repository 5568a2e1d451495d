# cython: language_level=3
"""The objects a decoded record is made of, made with nothing else: no parsing, no checks.
bench/alloc_floor.py compiles this at run time and times it against the real decoders."""

from cpython.bytes cimport PyBytes_FromStringAndSize
from cpython.list cimport PyList_New, PyList_SET_ITEM
from cpython.ref cimport Py_INCREF
from cpython.tuple cimport PyTuple_New, PyTuple_SET_ITEM
from libc.stdint cimport int32_t, int64_t


cdef extern from "Python.h":
    object PyLong_FromLongLong(long long)
    object PyUnicode_DecodeASCII(const char*, Py_ssize_t, const char*)
    void PyObject_GC_UnTrack(object o)


cdef class Rec:
    """As many object fields as kcodec's compiled Record, and its C fields."""
    cdef public object offset, timestamp, timestamp_type, key, value, headers, attributes
    cdef Py_ssize_t size_
    cdef int64_t crc_, computed_crc_, raw_ts_
    cdef object raw_key_, raw_value_


cdef class LazyInts(Rec):
    """aiokafka's choice: offset and timestamp kept as C integers, made into ints when read."""
    cdef int64_t offset_, timestamp_

    @property
    def offset(self):
        return PyLong_FromLongLong(self.offset_)

    @property
    def timestamp(self):
        return PyLong_FromLongLong(self.timestamp_)


def lazy(Py_ssize_t n):
    """n LazyInts records (no other field set): what reading offset and timestamp costs
    when they are made on access."""
    cdef list out = PyList_New(n)
    cdef LazyInts r
    cdef Py_ssize_t i
    for i in range(n):
        r = LazyInts.__new__(LazyInts)
        r.offset_ = i
        r.timestamp_ = 1700000000000 + i
        Py_INCREF(r)
        PyList_SET_ITEM(out, i, r)
    return out


def make(Py_ssize_t n, bytes spans, bytes data, bint ints):
    """n Recs from ``spans``, native int32s per record: key at, key length, value at, value
    length, header count, then at, length of each header's key and value (into ``data``).
    Each gets bytes for key and value, a list of (str, bytes) pairs and, when ``ints``, int
    objects for offset and timestamp (kcodec keeps them; aiokafka makes them on access)."""
    cdef const char* p = data
    cdef const int32_t* s = <const int32_t*><const char*>spans
    cdef Py_ssize_t i, j, hc
    cdef list out = PyList_New(n)
    cdef list h
    cdef tuple t
    cdef Rec r
    for i in range(n):
        r = Rec.__new__(Rec)
        if ints:
            r.offset = PyLong_FromLongLong(<long long>i)
            r.timestamp = PyLong_FromLongLong(1700000000000 + i)
        r.key = PyBytes_FromStringAndSize(p + s[0], s[1])
        r.value = PyBytes_FromStringAndSize(p + s[2], s[3])
        hc = s[4]
        s += 5
        h = PyList_New(hc)
        for j in range(hc):
            t = PyTuple_New(2)
            k = PyUnicode_DecodeASCII(p + s[0], s[1], NULL)
            Py_INCREF(k)
            PyTuple_SET_ITEM(t, 0, k)
            v = PyBytes_FromStringAndSize(p + s[2], s[3])
            Py_INCREF(v)
            PyTuple_SET_ITEM(t, 1, v)
            PyObject_GC_UnTrack(t)
            Py_INCREF(t)
            PyList_SET_ITEM(h, j, t)
            s += 4
        r.headers = h
        Py_INCREF(r)
        PyList_SET_ITEM(out, i, r)
    return out
