"""Compiled twin of kcodec._py.share: ShareRecord (a Record naming its topic, partition and
delivery count) and share_records, the same fields, behaviour and errors.

A ShareRecord is a C subclass of the compiled Record: made without Python code per record
and, like Record, not tracked by the cyclic GC (what a share consumer does most).
"""

cimport cython
from cpython.list cimport PyList_GET_ITEM, PyList_GET_SIZE, PyList_New, PyList_SET_ITEM
from cpython.ref cimport Py_INCREF

from kcodec._cy._record cimport Record

from kcodec.errors import EncodeTypeError

__all__ = ["ShareRecord", "share_records"]


@cython.no_gc
cdef class ShareRecord(Record):
    """A record a share consumer delivered: a Record with ``topic``, ``partition`` and
    ``delivery_count`` (1 the first time; more after a release or a lock timeout)."""

    cdef public object topic
    cdef public object partition
    cdef public object delivery_count

    def __init__(self, topic, partition, offset, timestamp, timestamp_type, key, value,
                 headers, attributes=0, delivery_count=1):
        Record.__init__(self, offset, timestamp, timestamp_type, key, value, headers,
                        attributes)
        self.topic = topic
        self.partition = partition
        self.delivery_count = delivery_count

    def _tuple(self):
        return (self.topic, self.partition, self.delivery_count) + Record._tuple(self)

    def __eq__(self, other):
        if not isinstance(other, ShareRecord):
            return NotImplemented
        return self._tuple() == other._tuple()

    __hash__ = None

    def __repr__(self):
        return (f"ShareRecord(topic={self.topic!r}, partition={self.partition}, "
                f"offset={self.offset}, delivery_count={self.delivery_count}, "
                f"key={self.key!r}, value={self.value!r})")


def share_records(records, topic, partition, delivery_count):
    """A ShareRecord for each Record of ``records`` (a list), in order, naming ``topic``
    and ``partition``, each with ``delivery_count``."""
    if not isinstance(records, list):
        raise EncodeTypeError(f"records must be a list, not {type(records).__name__}")
    cdef list src = <list>records
    cdef Py_ssize_t i, j, n = PyList_GET_SIZE(src)
    cdef list out = PyList_New(n)
    cdef object o
    cdef Record r
    cdef ShareRecord s
    for i in range(n):
        o = <object>PyList_GET_ITEM(src, i)
        if not isinstance(o, Record):
            # the slots not yet filled hold NULL: give them None before the list is freed
            for j in range(i, n):
                Py_INCREF(None)
                PyList_SET_ITEM(out, j, None)
            raise EncodeTypeError(f"records must hold Record objects, not {type(o).__name__}")
        r = <Record>o
        s = ShareRecord.__new__(ShareRecord)
        s.offset = r.offset
        s.timestamp = r.timestamp
        s.timestamp_type = r.timestamp_type
        s.key = r.key
        s.value = r.value
        s.headers = r.headers
        s.attributes = r.attributes
        s.size_ = r.size_
        s.crc_ = -1
        s.computed_crc_ = -1
        s.topic = topic
        s.partition = partition
        s.delivery_count = delivery_count
        Py_INCREF(s)
        PyList_SET_ITEM(out, i, s)
    return out
