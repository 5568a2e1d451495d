# cython: freethreading_compatible = False
# (the one shared compression context is guarded by a flag taken and given back with the GIL
# held; without a GIL two threads could take it at once, so a free-threaded interpreter
# re-enables the GIL when this module loads. setup.py marks every other module compatible.)
"""zstd compression for the compiled batch builder: libzstd called from C, the records
compressed straight from the builder's buffer into the batch's output (no intermediate
bytes object, no copy of the compressed payload), through one reused compression context.

Which libzstd: the one the ``zstandard`` package carries, in the shared object of its CFFI
module ``zstandard._cffi``, which exports the libzstd functions: loaded with ``ctypes`` as a
plain library (no import of the module, so the cffi package is not needed), each function's
address taken once. That is the same library version the pure twin's ``zstandard`` backend runs, so
both twins write the same bytes: a single frame with its content size, no checksum, at the
given level, with the source size pledged (``ZSTD_compress2``), exactly what
``zstandard.ZstdCompressor(level=L).compress(data)`` writes. When that module is missing,
or its library is not the version the ``zstandard`` backend reports, or kcodec's zstd
backend is another package (``compression.zstd`` on Python 3.14+, ``backports.zstd``),
``zstd_bound`` returns -1 and the builder takes the codec's Python call instead.
"""

from libc.stdint cimport uint8_t, uintptr_t

ctypedef void* (*create_t)() noexcept nogil
ctypedef size_t (*free_t)(void*) noexcept nogil
ctypedef size_t (*setparam_t)(void*, int, int) noexcept nogil
ctypedef size_t (*compress2_t)(void*, void*, size_t, const void*, size_t) noexcept nogil
ctypedef size_t (*bound_t)(size_t) noexcept nogil
ctypedef unsigned (*iserror_t)(size_t) noexcept nogil
ctypedef const char* (*errname_t)(size_t) noexcept nogil

cdef enum:
    ZSTD_c_compressionLevel = 100

cdef int _state = 0          # 0: not looked up yet, 1: ready, -1: not available
cdef create_t _create = NULL
cdef free_t _free = NULL
cdef setparam_t _setparam = NULL
cdef compress2_t _compress2 = NULL
cdef bound_t _bound = NULL
cdef iserror_t _iserror = NULL
cdef errname_t _errname = NULL
cdef void* _cctx = NULL      # the shared context, used by one call at a time
cdef bint _busy = False      # (taken and given back with the GIL held)
cdef const uint8_t _empty = 0

_handle = None
_library = None  # what was found, for tests and diagnostics: (module, version) or None


cdef int _load() except -1:
    global _state, _create, _free, _setparam, _compress2, _bound, _iserror, _errname
    global _library, _handle
    _state = -1
    try:
        import ctypes
        import importlib.util

        from kcodec._codecs import zstd_codec
        if zstd_codec.backend().name != "zstandard":
            return 0
        import zstandard
        spec = importlib.util.find_spec("zstandard._cffi")
        if spec is None or not spec.origin:
            return 0
        # the extension module's shared object, loaded as a library: its exported libzstd
        # functions, without importing the module (which would need the cffi package)
        lib = ctypes.CDLL(spec.origin)
        major, minor, patch = zstandard.ZSTD_VERSION
        version = lib.ZSTD_versionNumber()
        if version != major * 10000 + minor * 100 + patch:
            return 0

        def addr(name):
            return ctypes.cast(getattr(lib, name), ctypes.c_void_p).value or 0

        funcs = [addr(n) for n in ("ZSTD_createCCtx", "ZSTD_freeCCtx", "ZSTD_CCtx_setParameter",
                                   "ZSTD_compress2", "ZSTD_compressBound", "ZSTD_isError",
                                   "ZSTD_getErrorName")]
    except Exception:  # noqa: BLE001 - any failure: the Python call is used
        return 0
    if not all(funcs):
        return 0
    _create = <create_t><uintptr_t>funcs[0]
    _free = <free_t><uintptr_t>funcs[1]
    _setparam = <setparam_t><uintptr_t>funcs[2]
    _compress2 = <compress2_t><uintptr_t>funcs[3]
    _bound = <bound_t><uintptr_t>funcs[4]
    _iserror = <iserror_t><uintptr_t>funcs[5]
    _errname = <errname_t><uintptr_t>funcs[6]
    _handle = lib   # kept, so the library stays loaded
    _library = ("zstandard._cffi", version)
    import os
    if hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_child=_after_fork_in_child)
    _state = 1
    return 0


def _after_fork_in_child():
    """A fork taken while another thread compressed leaves the shared context marked busy in
    the child, where that thread does not exist: the child takes it back (each call resets
    the context's session first)."""
    global _busy
    _busy = False


cdef Py_ssize_t zstd_bound(Py_ssize_t n, object level) except -2:
    """Most bytes a frame of ``n`` input bytes can take, or -1 when the direct path is not
    available (the caller compresses through the codec module then)."""
    if _state == 0:
        _load()
    if _state != 1:
        return -1
    return <Py_ssize_t>_bound(<size_t>n)


cdef Py_ssize_t zstd_compress_into(uint8_t* dst, Py_ssize_t cap, const uint8_t* src,
                                   Py_ssize_t n, object level) except -1:
    """One zstd frame of ``src[:n]`` written at ``dst`` (``cap`` >= ``zstd_bound(n)``);
    returns its size. Only after ``zstd_bound`` returned >= 0. ``level``: an int already
    checked by the codec (None: 3, Kafka's default)."""
    global _cctx, _busy
    cdef int lvl = 3 if level is None else <int>level
    cdef void* ctx
    cdef bint shared = not _busy
    cdef size_t r
    if shared:
        if _cctx == NULL:
            _cctx = _create()
            if _cctx == NULL:
                raise MemoryError()
        ctx = _cctx
        _busy = True
    else:
        # another thread is compressing with the shared context (the GIL is released
        # while libzstd runs): this call gets a context of its own
        ctx = _create()
        if ctx == NULL:
            raise MemoryError()
    if n == 0:
        src = &_empty
    try:
        with nogil:
            r = _setparam(ctx, ZSTD_c_compressionLevel, lvl)
            if not _iserror(r):
                r = _compress2(ctx, dst, <size_t>cap, src, <size_t>n)
    finally:
        if shared:
            _busy = False
        else:
            _free(ctx)
    if _iserror(r):
        from kcodec.errors import EncodeError
        raise EncodeError(f"zstd compression failed: {(<bytes>_errname(r)).decode()}")
    return <Py_ssize_t>r


def library():
    """(module, libzstd version number) the compiled builder calls, or None when it
    compresses through the codec module's Python call."""
    if _state == 0:
        _load()
    return _library
