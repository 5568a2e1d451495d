"""What the adapters in kcodec.compat need from the hot paths (see the pure twin,
kcodec/_py/peer.py, for the contract): remap_errors, an iterator whose each step is one C
call into the wrapped iterator (no Python frame per item), and DefaultRecordMetadata, a C
subclass of RecordMetadata (no GC tracking per object, as a Python subclass would have).
"""

cimport cython
from cpython.object cimport PyObject
from cpython.ref cimport Py_DECREF

from kcodec._cy._record cimport RecordMetadata

__all__ = ["remap_errors", "DefaultRecordMetadata"]


cdef extern from "Python.h":
    PyObject* PyIter_Next(object o)  # NULL: exhausted, or an exception is set
    PyObject* PyErr_Occurred()


cdef object _DONE = iter(())  # an exhausted iterator: what a finished remapper holds


cdef int _pending() except -1:
    # reached with an exception set: the -1 makes Cython raise it where this is called
    return -1


@cython.final
cdef class _Remapped:
    cdef object _it
    cdef object _catch
    cdef object _convert

    def __iter__(self):
        return self

    def __next__(self):
        cdef PyObject* p = PyIter_Next(self._it)
        if p != NULL:
            item = <object>p
            Py_DECREF(item)  # the cast took a reference of its own
            return item
        # exhausted or failed: stay finished from now on, as the pure twin's generator does
        self._it = _DONE
        if PyErr_Occurred() == NULL:
            raise StopIteration
        try:
            _pending()
        except self._catch as exc:
            raise self._convert(exc) from exc
        return None  # not reached: _pending() always raises


def remap_errors(iterator, catch, convert):
    """The items of ``iterator``; an exception of ``catch`` it raises becomes
    ``convert(exc)``, raised from ``exc``."""
    cdef _Remapped r = _Remapped.__new__(_Remapped)
    r._it = iter(iterator)
    r._catch = catch
    r._convert = convert
    return r


@cython.no_gc
cdef class DefaultRecordMetadata(RecordMetadata):
    """What aiokafka's v2 builder's ``append`` returns: ``offset``, ``size``, ``timestamp``
    and ``crc`` (None)."""

    @property
    def offset(self):
        return self.offset_delta

    def __repr__(self):
        return (f"DefaultRecordMetadata(offset={self.offset_delta!r}, size={self.size!r}, "
                f"timestamp={self.timestamp!r})")
