"""Compiled twin of kcodec._py.accum (see its docstring): the producer's record accumulator,
its state declared here, the per-record step written by the builder's C code without a
Python call."""

import threading
from collections import deque

from cpython.list cimport PyList_GET_SIZE
from cpython.long cimport PyLong_AsLongAndOverflow
from libc.stdint cimport int64_t, uint32_t

from kcodec._cy.builder cimport RecordBatchBuilder
from kcodec._cy.murmur cimport _murmur2

__all__ = ["Accumulator"]

cdef Py_ssize_t _HEADER = 61    # a v2 batch's header: builder.size is this + its records


cdef class Accumulator:
    """The producer's batches and their counts (see kcodec._py.accum)."""

    cdef public object lock
    cdef public dict open
    cdef public dict queues
    cdef public dict next_seq
    cdef public dict counts
    cdef public Py_ssize_t pending
    cdef public Py_ssize_t buffered
    cdef public bint closed
    cdef public object fatal
    cdef public Py_ssize_t seal_size
    cdef public Py_ssize_t limit
    cdef public object wake
    cdef public object future
    cdef public object slow
    cdef object _acquire
    cdef object _release

    def __init__(self, seal_size, buffer_memory, wake):
        self.lock = threading.Lock()
        self._acquire = self.lock.acquire
        self._release = self.lock.release
        self.open = {}
        self.queues = {}
        self.next_seq = {}
        self.counts = {}
        self.pending = 0
        self.buffered = 0
        self.closed = False
        self.fatal = None
        self.seal_size = seal_size
        self.limit = buffer_memory
        self.wake = wake
        self.future = None
        self.slow = None

    def bind(self, future_type, slow=None):
        """``keyed`` makes ``future_type()`` futures; ``send`` hands what it does not take
        to ``slow``."""
        self.future = future_type
        self.slow = slow

    cpdef account(self, b):
        """A batch leaves ``open``: its size, its records pending and its bytes buffered
        (lock held)."""
        builder = b.builder
        if builder is not None:
            b.size = builder.size - _HEADER
        self.pending += len(b.timestamps)
        self.buffered += b.size

    cpdef seal(self, object tp, b):
        """Move the open batch of ``tp`` (or a batch made elsewhere) to its send queue, and
        advance the partition's next sequence past it (lock held)."""
        cdef object q
        if self.open.get(tp) is b:
            del self.open[tp]
            self.account(b)
        seq = b.sequence
        if seq >= 0:
            self.next_seq[tp] = (seq + len(b.timestamps)) & 0x7FFFFFFF
        q = self.queues.get(tp)
        if q is None:
            q = self.queues[tp] = deque()
        q.append(b)

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
        return self.slow(topic, value, key, partition, headers, timestamp)

    cdef object _keyed(self, topic, key, value, headers, timestamp):
        cdef long n
        cdef int overflow = 0
        cdef tuple tp
        cdef object b, ts, builder
        cdef RecordBatchBuilder bb
        cdef int64_t t = 0, od = 0
        cdef Py_ssize_t idx = 0
        if type(key) is not bytes or (value is not None and type(value) is not bytes):
            return None
        count = self.counts.get(topic)
        if type(count) is not int:
            return None
        n = PyLong_AsLongAndOverflow(count, &overflow)
        if overflow or n <= 0 or self.buffered > self.limit:
            return None
        tp = (topic, <long>(<uint32_t>_murmur2(<const unsigned char*><char*>key, len(<bytes>key))
                            & 0x7FFFFFFFu) % n)
        self._acquire()
        try:
            if self.closed or self.fatal is not None:
                return None
            b = self.open.get(tp)
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
                if _HEADER + bb._committed >= self.seal_size:
                    self.seal(tp, b)
                    self.wake()
            else:
                if not builder.add(key, value, headers, timestamp, ts):
                    return None
                idx = len(ts) - 1
                if builder.size >= self.seal_size:
                    self.seal(tp, b)
                    self.wake()
        finally:
            self._release()
        fut = self.future()
        fut.batch = b
        fut.index = idx
        return fut
