"""Bytes in and out of the command line.

Messages, keys and header values are bytes: arguments are taken as the bytes that were
typed (``os.fsencode`` undoes Python's decoding of argv), stdin is read as bytes and split
at a delimiter, output goes to stdout's binary buffer. Delimiters are written as kcat
writes them: the characters themselves, or the escapes ``\\n \\t \\r \\0 \\\\`` and ``\\xNN``.

Input records are bounded: one longer than the limit stops the reading before it is held
whole, so a file without a single delimiter cannot take all memory.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

from kcodec.cli._client import UsageError

__all__ = ["arg_bytes", "parse_delimiter", "split_key", "read_records", "read_blocks", "TooLong",
           "CHUNK", "BLOCK"]

CHUNK = 65536   # bytes read at a time when the delimiter is not a newline
BLOCK = 1 << 20   # bytes of input split at once by read_blocks (about a producer batch)

_ESCAPES = {"n": b"\n", "t": b"\t", "r": b"\r", "0": b"\0", "\\": b"\\"}
_HEX = frozenset(b"0123456789abcdefABCDEF")


def arg_bytes(arg: str) -> bytes:
    """A command-line argument as the bytes that were typed (non-UTF-8 bytes included)."""
    return os.fsencode(arg)


def parse_delimiter(spec: str, option: str) -> bytes:
    """The bytes of a delimiter option: characters as typed, and ``\\n \\t \\r \\0 \\\\ \\xNN``."""
    raw = arg_bytes(spec)
    out = bytearray()
    i = 0
    while i < len(raw):
        if raw[i] != 0x5C:                       # not a backslash
            out.append(raw[i])
            i += 1
            continue
        nxt = chr(raw[i + 1]) if i + 1 < len(raw) else ""
        if nxt == "x":
            digits = raw[i + 2:i + 4]
            if len(digits) != 2 or not set(digits) <= _HEX:
                raise UsageError(f"{option} {spec!r}: \\x needs two hex digits, as in \\x00")
            out.append(int(digits, 16))
            i += 4
        elif nxt in _ESCAPES:
            out += _ESCAPES[nxt]
            i += 2
        else:
            raise UsageError(f"{option} {spec!r}: unknown escape \\{nxt} "
                             "(use \\n \\t \\r \\0 \\\\ or \\xNN, or the character itself)")
    if not out:
        raise UsageError(f"{option} must not be empty")
    return bytes(out)


def split_key(record: bytes, delimiter: bytes, default: bytes | None) -> tuple[bytes | None, bytes]:
    """``(key, value)`` of ``KEY DELIMITER VALUE`` (split at the first delimiter); a record
    without the delimiter is all value, with the ``default`` key (kcat's ``-K``)."""
    i = record.find(delimiter)
    if i < 0:
        return default, record
    return record[:i], record[i + len(delimiter):]


class TooLong(Exception):
    """An input record is longer than the limit (it was not read whole)."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"longer than {limit} bytes")
        self.limit = limit


def read_records(stream: Any, delimiter: bytes, limit: int) -> Iterator[bytes]:
    """The records of a binary stream, split at ``delimiter`` (which is not part of them);
    the last one need not end with it. A record over ``limit`` bytes raises ``TooLong``
    having read at most about ``limit`` bytes of it."""
    if delimiter == b"\n":
        readline = stream.readline
        while True:
            line = readline(limit + 1)
            if line[-1:] == b"\n":
                yield line[:-1]
            elif len(line) > limit:
                raise TooLong(limit)
            else:                                # the end of the input
                if line:
                    yield line
                return
    read = getattr(stream, "read1", stream.read)
    width = len(delimiter)
    buf = b""
    while True:
        chunk = read(CHUNK)
        if not chunk:
            if len(buf) > limit:
                raise TooLong(limit)
            if buf:
                yield buf
            return
        buf += chunk
        start = 0
        while True:
            i = buf.find(delimiter, start)
            if i < 0:
                break
            if i - start > limit:
                raise TooLong(limit)
            yield buf[start:i]
            start = i + width
        buf = buf[start:]
        # a delimiter that began within the limit would have been found by now
        if len(buf) >= limit + width:
            raise TooLong(limit)


def _readable_now(stream: Any) -> Any:
    """A function telling whether ``stream`` has more bytes at once (no wait), or None
    where that cannot be asked (then each block is what one read gave)."""
    try:
        import select

        fd = stream.fileno()
        select.select([fd], [], [], 0)
    except (AttributeError, OSError, ValueError, ImportError):
        return None
    return lambda: bool(select.select([fd], [], [], 0)[0])


def read_blocks(stream: Any, delimiter: bytes, limit: int, size: int = BLOCK
                ) -> Iterator[list[bytes]]:
    """The records of a binary stream as ``read_records`` splits them, a list at a time:
    as many whole records as about ``size`` bytes of input hold, or fewer when no more
    input is there yet (a slow writer's lines are not held back). The lines before one
    over ``limit`` bytes come first, then ``TooLong`` is raised, having read at most about
    ``limit + size`` bytes of it."""
    read = getattr(stream, "read1", stream.read)
    more = _readable_now(stream)
    width = len(delimiter)
    rest = b""
    eof = False
    while not eof:
        parts = [rest]
        got = len(rest)
        chunk = read(size)
        if not chunk:
            eof = True
        else:
            parts.append(chunk)
            got += len(chunk)
            while got < size and more is not None and more():
                chunk = read(size - got)
                if not chunk:
                    eof = True
                    break
                parts.append(chunk)
                got += len(chunk)
        data = b"".join(parts)
        if eof:
            lines = data.split(delimiter) if data else []
            if lines and not lines[-1]:      # the input ended with a delimiter
                lines.pop()
            rest = b""
        else:
            i = data.rfind(delimiter)
            if i < 0:
                if len(data) > limit:
                    raise TooLong(limit)
                rest = data
                continue
            lines = data[:i].split(delimiter)
            rest = data[i + width:]
        if lines and len(data) > limit and max(map(len, lines)) > limit:
            j = next(k for k, line in enumerate(lines) if len(line) > limit)
            if j:
                yield lines[:j]
            raise TooLong(limit)
        if lines:
            yield lines
        if len(rest) > limit + width:
            raise TooLong(limit)
