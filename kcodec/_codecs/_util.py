"""Helpers shared by the codec modules: byte views and a bounded streaming drain."""

from __future__ import annotations

from typing import Any

from kcodec.errors import CorruptDataError, DecompressionLimitError, KcodecError

__all__ = ["view", "drain", "MIN_CHUNK", "MAX_CHUNK"]

MIN_CHUNK = 64 * 1024
MAX_CHUNK = 16 * 1024 * 1024


def view(data: Any) -> memoryview:
    """A flat unsigned-byte view of any buffer-protocol object (a copy only if not contiguous)."""
    try:
        mv = memoryview(data)
    except TypeError:
        raise TypeError(f"a bytes-like object is required, not {type(data).__name__!r}") from None
    if mv.ndim == 1 and mv.format == "B":
        if mv.c_contiguous:
            return mv
    elif mv.c_contiguous:
        return mv.cast("B")
    return memoryview(mv.tobytes())


def drain(
    dec: Any, data: Any, budget: int, hint: int, codec: str, max_size: int, offset: int,
    errors: tuple[type[BaseException], ...],
) -> tuple[list[bytes], int, bytes]:
    """Run one frame through ``dec`` (the bz2/lzma-style ``decompress(data, max_length)``
    API with ``eof``, ``needs_input`` and ``unused_data``) without ever producing more than
    ``budget`` bytes or asking for an output buffer much larger than the output so far.

    Returns (chunks, bytes produced, unused input after the frame).
    """
    chunks: list[bytes] = []
    produced = 0
    # First ask for the declared size, else a guess at the usual ratios: one call and no
    # join for most frames. (The guess is address space; only written pages are touched.)
    size = min(budget + 1, hint + 1 if hint else max(8 * len(data), MIN_CHUNK))
    stalled = 0
    try:
        out = dec.decompress(data, size)
        while True:
            if out:
                chunks.append(out)
                produced += len(out)
                stalled = 0
            else:
                stalled += 1
            if produced > budget:
                raise DecompressionLimitError(codec, max_size, offset)
            if dec.eof:
                break
            if dec.needs_input or stalled > 1:
                raise CorruptDataError(f"truncated {codec} frame", offset)
            size = min(budget - produced + 1, min(MAX_CHUNK, max(size * 2, MIN_CHUNK)))
            out = dec.decompress(b"", size)
    except KcodecError:
        raise
    except errors as exc:
        raise CorruptDataError(f"corrupt {codec} frame: {exc}", offset) from exc
    return chunks, produced, dec.unused_data or b""
