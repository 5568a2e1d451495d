# Cold paths of the bounds-checked reader: buffer acquisition and raising kcodec errors.
from cpython.buffer cimport PyObject_GetBuffer, PyBuffer_Release, PyBUF_SIMPLE

from kcodec.errors import CorruptDataError, DecodeError, EncodeError, TruncatedError


cdef class Buf:
    def __dealloc__(self):
        if self.held:
            PyBuffer_Release(&self.view)
            self.held = False


cdef Buf get_buf(object obj):
    """A contiguous unsigned-byte view of obj, released when the Buf is collected."""
    cdef Buf b = Buf.__new__(Buf)
    try:
        PyObject_GetBuffer(obj, &b.view, PyBUF_SIMPLE)
    except (BufferError, ValueError):
        # Non-contiguous buffers (numpy says ValueError, memoryview BufferError): fall back
        # to a C-order byte copy, as the pure twins' byte_view does.
        obj = memoryview(obj).cast("B") if memoryview(obj).c_contiguous else bytes(memoryview(obj))
        PyObject_GetBuffer(obj, &b.view, PyBUF_SIMPLE)
    except TypeError:
        raise TypeError(f"a bytes-like object is required, not {type(obj).__name__!r}") from None
    b.held = True
    b.ptr = <const uint8_t*>b.view.buf
    b.size = b.view.len
    return b


cdef int raise_truncated(Py_ssize_t need, Py_ssize_t offset, Py_ssize_t available, str what) except -1:
    raise TruncatedError(need, offset, available, what)


cdef int raise_corrupt(str message, Py_ssize_t offset) except -1:
    raise CorruptDataError(message, offset)


cdef int raise_decode(str message, Py_ssize_t offset) except -1:
    raise DecodeError(message, offset)


cdef int raise_encode(str message) except -1:
    raise EncodeError(message)
