"""Buffer helpers shared by the pure-Python twins (not a twin itself)."""

from __future__ import annotations

from typing import Any

__all__ = ["byte_view"]


def byte_view(buf: Any) -> bytes | bytearray | memoryview:
    """A flat unsigned-byte view of any buffer-protocol object, copying only if it must.

    bytes and bytearray come back as they are; other C-contiguous buffers (memoryview
    slices, mmap, numpy arrays of any dtype) as a 1-D ``"B"`` memoryview over the same
    memory; non-contiguous ones as a C-order copy. The compiled twins' ``get_buf`` does the
    same, so both see the same bytes and raise the same TypeError for non-buffers.
    """
    if isinstance(buf, (bytes, bytearray)):
        return buf
    try:
        mv = memoryview(buf)
    except TypeError:
        raise TypeError(f"a bytes-like object is required, not {type(buf).__name__!r}") from None
    if not mv.c_contiguous:
        return mv.tobytes()
    if mv.format != "B" or mv.ndim != 1:
        mv = mv.cast("B")
    return mv
