"""Compiled twin of kcodec._py.accum (see its docstring): the producer's per-record step,
the record written by the builder's C code without a Python call."""

from cpython.list cimport PyList_GET_SIZE
from cpython.long cimport PyLong_AsLongAndOverflow
from libc.stdint cimport int64_t, uint32_t

from kcodec._cy.builder cimport RecordBatchBuilder
from kcodec._cy.murmur cimport _murmur2

__all__ = ["Appender"]

cdef Py_ssize_t _HEADER = 61    # a v2 batch's header: builder.size is this + its records


cdef class Appender:
    """The fast path of the producer's ``append`` (no transaction, partition chosen)."""

    cdef object _engine
    cdef object _acquire
    cdef object _release
    cdef dict _open
    cdef object _fut
    cdef Py_ssize_t _seal_size
    cdef dict _counts
    cdef object _limit
    cdef object _slow

    def __init__(self, engine, future_type, seal_size, buffer_memory, slow=None):
        self._engine = engine
        self._slow = slow
        self._counts = engine.counts
        self._limit = buffer_memory
        self._acquire = engine.lock.acquire
        self._release = engine.lock.release
        self._open = engine.open
        self._fut = future_type
        self._seal_size = seal_size

    def keyed(self, topic, key, value, headers, timestamp):
        """The record's future, or None: the producer's own path must take it."""
        return self._keyed(topic, key, value, headers, timestamp)

    def send(self, topic, value=None, key=None, partition=None, headers=None, timestamp=None):
        """``Producer.send`` itself: ``keyed`` when no partition is given, else (or when
        ``keyed`` returns None) ``slow(topic, value, key, partition, headers, timestamp)``.
        The producer binds this as its instance's ``send``, so a send is one C call."""
        cdef object fut
        if partition is None:
            fut = self._keyed(topic, key, value, headers, timestamp)
            if fut is not None:
                return fut
        return self._slow(topic, value, key, partition, headers, timestamp)

    cdef object _keyed(self, topic, key, value, headers, timestamp):
        cdef object eng = self._engine
        cdef long n
        cdef int overflow = 0
        cdef tuple tp
        cdef object b, ts, builder
        cdef RecordBatchBuilder bb
        cdef int64_t t = 0, od = 0
        cdef Py_ssize_t idx = 0
        if type(key) is not bytes or (value is not None and type(value) is not bytes):
            return None
        count = self._counts.get(topic)
        if type(count) is not int:
            return None
        n = PyLong_AsLongAndOverflow(count, &overflow)
        if overflow or n <= 0 or eng.buffered > self._limit:
            return None
        tp = (topic, <long>(<uint32_t>_murmur2(<const unsigned char*><char*>key, len(<bytes>key))
                            & 0x7FFFFFFFu) % n)
        self._acquire()
        try:
            if eng.closed or eng.fatal is not None:
                return None
            b = self._open.get(tp)
            if b is None:
                return None
            ts = b.timestamps
            builder = b.builder
            if type(builder) is RecordBatchBuilder and type(ts) is list:
                bb = <RecordBatchBuilder>builder
                if bb._put(key, value, headers, timestamp, None, &t, &od) == 0:
                    return None
                (<list>ts).append(timestamp if type(timestamp) is int else t)
                idx = PyList_GET_SIZE(ts) - 1
                if _HEADER + bb._committed >= self._seal_size:
                    eng._seal(tp, b)
                    eng._kick()
            else:
                if not builder.add(key, value, headers, timestamp, ts):
                    return None
                idx = len(ts) - 1
                if builder.size >= self._seal_size:
                    eng._seal(tp, b)
                    eng._kick()
        finally:
            self._release()
        fut = self._fut()
        fut._batch = b
        fut._index = idx
        return fut
