"""Compiled twin of kcodec._py.share: ShareRecord (a Record naming its topic, partition and
delivery count) and share_records, the same fields, behaviour and errors.

A ShareRecord is a C subclass of the compiled Record: made without Python code per record
and, like Record, not tracked by the cyclic GC, nor is its headers list (a record put into
its own headers list is never freed, as for Record). That is what a share consumer does
most, and the GC's full collections were a third of its time.
"""

cimport cython

from kcodec._cy._record cimport Record

cdef extern from "Python.h":
    void PyObject_GC_UnTrack(void* op)

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


cdef inline ShareRecord _share(Record r, object topic, object partition,
                               object delivery_count):
    cdef ShareRecord s = ShareRecord.__new__(ShareRecord)
    s.offset = r.offset
    s.timestamp = r.timestamp
    s.timestamp_type = r.timestamp_type
    s.key = r.key
    s.value = r.value
    s.headers = r.headers
    if type(r.headers) is list:
        # out of the cyclic GC's sight, as the record is: else, while records wait to be
        # polled, every record's list is promoted into the oldest generation and full
        # collections follow (a third of a share consumer's time, measured)
        PyObject_GC_UnTrack(<void*>r.headers)
    s.attributes = r.attributes
    s.size_ = r.size_
    s.crc_ = -1
    s.computed_crc_ = -1
    s.topic = topic
    s.partition = partition
    s.delivery_count = delivery_count
    return s


def share_records(records, topic, partition, delivery_count):
    """A ShareRecord for each Record of ``records`` (an iterable: a list, or a batch, whose
    records are then made one at a time), in order, naming ``topic`` and ``partition``,
    each with ``delivery_count``."""
    cdef list out = []
    cdef object it
    try:
        it = iter(records)
    except TypeError:
        raise EncodeTypeError(f"records must be an iterable of Record objects, not "
                              f"{type(records).__name__}") from None
    for o in it:
        if not isinstance(o, Record):
            raise EncodeTypeError(f"records must hold Record objects, not {type(o).__name__}")
        out.append(_share(<Record>o, topic, partition, delivery_count))
    return out
