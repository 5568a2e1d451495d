"""An iterator that hands on another iterator's items and turns one family of exceptions
into another on the way (see the pure twin, kcodec/_py/remap.py, for the contract). Each
step is one C call into the wrapped iterator: no Python frame per item.
"""

cimport cython
from cpython.object cimport PyObject
from cpython.ref cimport Py_DECREF

__all__ = ["remap_errors"]


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
