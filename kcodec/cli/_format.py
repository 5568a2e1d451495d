"""kcat's ``-f`` format strings for ``kcodec consume -f``.

Tokens, as kcat takes them::

    %t topic     %p partition    %o offset    %T timestamp (ms since the epoch)
    %k key       %K key length (-1: null)     %s value     %S value length (-1: null)
    %R value length as a 4-byte big-endian signed integer (-1: null)
    %h headers as name=value pairs joined by commas (a null value: NULL)
    %%  a percent sign;   \\n \\r \\t \\\\ \\0 \\xNN  the escapes of kcodec's delimiters

A null key or value prints nothing. Keys, values and header values are written as the
bytes they are.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

from kcodec.cli._client import UsageError

__all__ = ["compile_format", "TOKENS"]

TOKENS = "tpoTkKsSRh%"


def _length(b: bytes | None) -> bytes:
    return b"-1" if b is None else str(len(b)).encode()


def _headers(headers: Any) -> bytes:
    out = []
    for k, v in headers:
        name = k.encode() if isinstance(k, str) else k
        out.append(name + b"=" + (b"NULL" if v is None else v))
    return b",".join(out)


_FIELDS: dict[str, Callable[[Any, Any], bytes]] = {
    "t": lambda tp, r: tp.topic.encode(),
    "p": lambda tp, r: str(tp.partition).encode(),
    "o": lambda tp, r: str(r.offset).encode(),
    "T": lambda tp, r: str(r.timestamp).encode(),
    "k": lambda tp, r: r.key or b"",
    "K": lambda tp, r: _length(r.key),
    "s": lambda tp, r: r.value or b"",
    "S": lambda tp, r: _length(r.value),
    "R": lambda tp, r: struct.pack(">i", -1 if r.value is None else len(r.value)),
    "h": lambda tp, r: _headers(r.headers),
}


def compile_format(spec: str) -> Callable[[Any, Any], bytes]:
    """The function ``(partition, record) -> bytes`` that ``spec`` describes; an unknown
    token or escape is a usage error naming it."""
    from kcodec.cli._io import arg_bytes, parse_delimiter

    raw = arg_bytes(spec)
    parts: list[bytes | Callable[[Any, Any], bytes]] = []
    literal = bytearray()
    i = 0
    while i < len(raw):
        c = raw[i]
        if c == 0x25:                                  # %
            tok = chr(raw[i + 1]) if i + 1 < len(raw) else ""
            if tok == "%":
                literal.append(0x25)
            elif tok in _FIELDS:
                if literal:
                    parts.append(bytes(literal))
                    literal.clear()
                parts.append(_FIELDS[tok])
            else:
                raise UsageError(f"-f {spec!r}: unknown token %{tok} (tokens: "
                                 + " ".join(f"%{t}" for t in TOKENS) + ")")
            i += 2
        elif c == 0x5C:                                # a backslash escape
            width = 4 if raw[i + 1:i + 2] == b"x" else 2
            literal += parse_delimiter(raw[i:i + width].decode("latin-1"), "-f")
            i += width
        else:
            literal.append(c)
            i += 1
    if literal:
        parts.append(bytes(literal))
    if not parts:
        raise UsageError("-f must not be empty")
    fields = [p for p in parts if not isinstance(p, bytes)]
    if not fields:
        text = b"".join(p for p in parts if isinstance(p, bytes))
        return lambda tp, r: text

    def render(tp: Any, r: Any) -> bytes:
        return b"".join([p if isinstance(p, bytes) else p(tp, r) for p in parts])
    return render
