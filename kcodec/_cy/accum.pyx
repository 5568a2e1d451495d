"""Compiled twin of kcodec._py.accum (see its docstring): the producer's record accumulator,
its state declared here, the per-record step written by the builder's C code without a
Python call."""

import threading
from collections import deque
from time import monotonic
from types import MemberDescriptorType

from cpython.list cimport PyList_GET_ITEM, PyList_GET_SIZE
from cpython.long cimport PyLong_AsLongAndOverflow, PyLong_FromSsize_t
from cpython.exc cimport PyErr_CheckSignals
from cpython.ref cimport Py_DECREF, Py_INCREF, PyObject
from libc.stdint cimport int64_t, uint32_t

from kcodec._cy.builder cimport RecordBatchBuilder
from kcodec._cy.murmur cimport _murmur2

__all__ = ["Accumulator"]

cdef Py_ssize_t _HEADER = 61    # a v2 batch's header: builder.size is this + its records
cdef Py_ssize_t _INDEXES_KEPT = 1 << 16     # the ints kept for futures' indexes (~2 MiB)

# Slots read and written in place. A class's ``__slots__`` are member descriptors, each the
# offset of an object pointer in the instance; ``fut.batch = b`` through Python looks the
# name up on the type, finds the descriptor and stores through it, a call chain a field. The
# per-record step stores and reads the same few slots of the same two classes (the future
# it returns, the batch it fills) through the offsets, found once per class; a class whose
# field is anything else than a plain writable object slot takes the Python path.
cdef extern from "Python.h":
    ctypedef struct PyMemberDef:
        const char* name
        int type
        Py_ssize_t offset
        int flags
    ctypedef struct PyMemberDescrObject:
        PyMemberDef* d_member
    ctypedef struct _TypeObject "PyTypeObject":
        PyObject* (*tp_alloc)(_TypeObject*, Py_ssize_t)
    PyObject* PyType_GenericAlloc(_TypeObject*, Py_ssize_t)

cdef extern from "structmember.h":
    int T_OBJECT_EX
    int READONLY


cdef Py_ssize_t _slot(type cls, str name):
    """The offset of ``cls``'s writable object slot ``name``, or 0 (the Python path)."""
    d = getattr(cls, name, None)
    if type(d) is not MemberDescriptorType or not issubclass(cls, d.__objclass__):
        return 0
    cdef PyMemberDef* m = (<PyMemberDescrObject*><PyObject*>d).d_member
    if m.type != T_OBJECT_EX or (m.flags & READONLY) or m.offset <= 0:
        return 0
    return m.offset


cdef inline PyObject* _read(object o, Py_ssize_t off) noexcept:
    return (<PyObject**>((<char*><PyObject*>o) + off))[0]


cdef extern from "pythread.h":
    ctypedef void* PyThread_type_lock
    PyThread_type_lock PyThread_allocate_lock()
    void PyThread_free_lock(PyThread_type_lock)
    int PyThread_acquire_lock(PyThread_type_lock, int waitflag) nogil
    int PyThread_acquire_lock_timed(PyThread_type_lock, long long microseconds,
                                    int intr_flag) nogil
    void PyThread_release_lock(PyThread_type_lock) nogil
    int PY_LOCK_ACQUIRED


# A GIL build's lock is a flag that the GIL guards: every taker holds the GIL while it looks
# and sets, so an uncontended take or give is a load and a store. A thread that finds it held
# sleeps on a PyThread lock used as a wake-up (released by a give that sees sleepers). A
# free-threaded build has no GIL to guard the flag: there the PyThread lock is the lock.
cdef extern from *:
    """
    #if defined(Py_GIL_DISABLED) || defined(PYPY_VERSION)
    #define KC_GIL 0
    #else
    #define KC_GIL 1
    #endif
    """
    bint KC_GIL


def _negative_timeout():
    try:
        threading.Lock().acquire(timeout=-2)
    except ValueError as exc:
        return str(exc)
    return "timeout value must be a non-negative number"


cdef str _NEGATIVE = _negative_timeout()     # threading.Lock's words, this Python's


cdef class Lock:
    """The accumulator's lock: ``threading.Lock``'s methods (``acquire(blocking=True,
    timeout=-1)``, ``release``, ``locked``, the with statement; ``threading.Condition`` takes
    it), and taken by the per-record step from C. ``threading.Lock`` costs a send ~60 ns:
    ``acquire()`` parses its keyword arguments, ``release()`` is a second call, and
    CPython 3.11's non-blocking acquire still reads the monotonic clock.

    Like ``threading.Lock`` it is not reentrant and any thread may release it. A wait in
    ``acquire`` lets signal handlers run every 50 ms (Ctrl-C is seen); the C step waits
    without that, for a lock held a few microseconds at a time."""

    cdef PyThread_type_lock _lock
    cdef bint _held
    cdef int _sleepers

    def __cinit__(self):
        self._lock = PyThread_allocate_lock()
        if self._lock == NULL:
            raise MemoryError()
        if KC_GIL:
            PyThread_acquire_lock(self._lock, 1)   # the wake-up starts taken: sleepers wait

    def __dealloc__(self):
        if self._lock != NULL:
            if self._held and not KC_GIL:
                PyThread_release_lock(self._lock)
            PyThread_free_lock(self._lock)
            self._lock = NULL

    cdef inline void take(self) noexcept:
        if not KC_GIL:
            if not PyThread_acquire_lock(self._lock, 0):
                with nogil:
                    PyThread_acquire_lock(self._lock, 1)
            self._held = True
            return
        while self._held:
            self._sleepers += 1
            with nogil:
                PyThread_acquire_lock(self._lock, 1)
            self._sleepers -= 1
        self._held = True

    cdef inline void give(self) noexcept:
        self._held = False
        if not KC_GIL or self._sleepers:
            PyThread_release_lock(self._lock)

    def acquire(self, bint blocking=True, double timeout=-1):
        """As ``threading.Lock.acquire``: True once held, False when not in time."""
        cdef long long step
        cdef int r
        cdef double left
        if timeout != -1 and not blocking:
            raise ValueError("can't specify a timeout for a non-blocking call")
        if timeout < 0 and timeout != -1:
            raise ValueError(_NEGATIVE)
        if KC_GIL and not self._held:
            self._held = True
            return True
        if not KC_GIL and PyThread_acquire_lock(self._lock, 0):
            self._held = True
            return True
        if not blocking:
            return False
        deadline = None if timeout == -1 else monotonic() + timeout
        while True:
            left = 0.05 if deadline is None else min(0.05, max(deadline - monotonic(), 0.0))
            step = <long long>(left * 1e6)
            if KC_GIL:
                self._sleepers += 1
            with nogil:
                r = PyThread_acquire_lock_timed(self._lock, step, 0)
            if KC_GIL:
                self._sleepers -= 1
                if not self._held:
                    self._held = True
                    return True
            elif r == PY_LOCK_ACQUIRED:
                self._held = True
                return True
            if deadline is not None and monotonic() >= deadline:
                return False
            PyErr_CheckSignals()

    def release(self):
        """As ``threading.Lock.release``: RuntimeError when not held."""
        if not self._held:
            raise RuntimeError("release unlocked lock")
        self.give()

    def locked(self):
        return bool(self._held)

    def __enter__(self):
        return self.acquire()

    def __exit__(self, *exc):
        self.release()

    def __repr__(self):
        return f"<kcodec accumulator lock {'locked' if self._held else 'unlocked'}>"


cdef class Accumulator:
    """The producer's batches and their counts (see kcodec._py.accum)."""

    cdef readonly Lock lock
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
    # the future's slots (0: set through Python); the batch class looked at last, and the
    # same class if its builder and timestamps are slots (their offsets), else None
    cdef Py_ssize_t _fut_batch
    cdef Py_ssize_t _fut_index
    cdef object _bseen
    cdef object _btype
    cdef Py_ssize_t _b_builder
    cdef Py_ssize_t _b_ts
    # ints 0, 1, ... for the futures' indexes (one batch's records count up from 0 again),
    # and the last timestamp taken from the clock (a millisecond holds ~1,000 records)
    cdef list _ints
    cdef object _t_obj
    cdef int64_t _t_val

    def __init__(self, seal_size, buffer_memory, wake):
        self.lock = Lock()
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
        self._ints = []

    def bind(self, future_type, slow=None):
        """``keyed`` makes ``future_type()`` futures; ``send`` hands what it does not take
        to ``slow``."""
        self.future = future_type
        self.slow = slow
        self._fut_batch = self._fut_index = 0
        if type(future_type) is type and future_type.__new__ is object.__new__ \
                and future_type.__init__ is object.__init__ \
                and (<_TypeObject*><PyObject*>future_type).tp_alloc == PyType_GenericAlloc:
            self._fut_batch = _slot(future_type, "batch")
            self._fut_index = _slot(future_type, "index")
            if not self._fut_index:
                self._fut_batch = 0

    cdef inline object _index(self, Py_ssize_t idx):
        """The int ``idx``: the same object for the same index of every batch."""
        cdef list ints = self._ints
        if idx < PyList_GET_SIZE(ints):
            return <object>PyList_GET_ITEM(ints, idx)
        if idx >= _INDEXES_KEPT:
            return PyLong_FromSsize_t(idx)
        while PyList_GET_SIZE(ints) <= idx:
            ints.append(PyList_GET_SIZE(ints))
        return <object>PyList_GET_ITEM(ints, idx)

    cdef object _learn(self, object b):
        """The slots of ``b``'s class, for the next records of its batches."""
        cls = self._bseen = type(b)
        self._b_builder = _slot(cls, "builder")
        self._b_ts = _slot(cls, "timestamps")
        self._btype = cls if self._b_builder and self._b_ts else None

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
        cdef PyObject* o
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
        self.lock.take()
        try:
            if self.closed or self.fatal is not None:
                return None
            b = self.open.get(tp)
            if b is None:
                return None
            if KC_GIL and type(b) is self._btype and _read(b, self._b_ts) != NULL \
                    and _read(b, self._b_builder) != NULL:
                ts = <object>_read(b, self._b_ts)
                builder = <object>_read(b, self._b_builder)
            else:
                ts = b.timestamps
                builder = b.builder
                if type(b) is not self._bseen:
                    self._learn(b)
            if type(builder) is RecordBatchBuilder and type(ts) is list:
                bb = <RecordBatchBuilder>builder
                if bb._put(key, value, headers, timestamp, None, &t, &od) == 0:
                    return None
                if type(timestamp) is int:
                    (<list>ts).append(timestamp)
                else:
                    if self._t_obj is None or t != self._t_val:
                        self._t_obj = t
                        self._t_val = t
                    (<list>ts).append(self._t_obj)
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
            if self._fut_batch:
                i = self._index(idx)    # under the lock: _index appends to a shared list
        finally:
            self.lock.give()
        if self._fut_batch:
            # future_type() without the call: zeroed and GC-tracked, its two slots stored
            o = PyType_GenericAlloc(<_TypeObject*><PyObject*>self.future, 0)
            if o == NULL:
                raise MemoryError()
            fut = <object>o
            Py_DECREF(fut)          # the allocation's reference: fut holds one
            Py_INCREF(b)
            (<PyObject**>(<char*>o + self._fut_batch))[0] = <PyObject*>b
            Py_INCREF(i)
            (<PyObject**>(<char*>o + self._fut_index))[0] = <PyObject*>i
            return fut
        fut = self.future()
        fut.batch = b
        fut.index = idx
        return fut
