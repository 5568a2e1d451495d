"""CRC-32C (Castagnoli, record batches v2) and CRC-32 (IEEE, legacy messages): pure twin.

    crc32c(data, value=0) -> int    reflected polynomial 0x82F63B78, init/final xor 0xFFFFFFFF
    crc32(data, value=0)  -> int    reflected polynomial 0xEDB88320 (zlib.crc32)

``value`` is a previous result, so ``crc32c(b, crc32c(a)) == crc32c(a + b)``; it is taken
modulo 2**32 like zlib does. ``data`` is any buffer-protocol object (non-contiguous ones
are copied). CRC-32C comes from the ``crc32c`` package (hardware accelerated where the CPU
allows); without it, or with KCODEC_CRC32C_FORCE_TABLE=1 (read once, at import), from a
slow table in Python. ``CRC32C_BACKEND`` names what runs.

This is the pure-Python twin; ``kcodec._cy.crc`` must give the same results and errors.
"""

from __future__ import annotations

import operator
import os
import zlib
from collections.abc import Callable
from typing import Any

from kcodec._py._buf import byte_view

__all__ = ["crc32c", "crc32", "CRC32C_BACKEND"]

_POLY = 0x82F63B78


def _make_table() -> list[int]:
    table = []
    for b in range(256):
        r = b
        for _ in range(8):
            r = (r >> 1) ^ (_POLY if r & 1 else 0)
        table.append(r)
    return table


_TABLE = _make_table()


def _crc32c_table(data: Any, value: int = 0) -> int:
    """CRC-32C byte by byte from a table: the slow reference, used without the package."""
    table = _TABLE
    c = (operator.index(value) & 0xFFFFFFFF) ^ 0xFFFFFFFF
    for b in byte_view(data):
        c = (c >> 8) ^ table[(c ^ b) & 0xFF]
    return c ^ 0xFFFFFFFF


def _force_table() -> bool:
    flag = os.environ.get("KCODEC_CRC32C_FORCE_TABLE", "").strip().lower()
    return flag not in ("", "0", "false", "no", "off")


_package: Callable[..., int] | None
try:
    import crc32c as _crc32c_package
except ImportError:  # pragma: no cover - a runtime dependency; the table still works
    _package = None
    _backend = "python-table (pip install crc32c for speed)"
else:
    _package = None if _force_table() else _crc32c_package.crc32c
    _mode = "hardware" if getattr(_crc32c_package, "hardware_based", False) else "software"
    _backend = "python-table" if _package is None else f"crc32c-package ({_mode})"

CRC32C_BACKEND: str = _backend


def crc32c(data: Any, value: int = 0) -> int:
    """CRC-32C of ``data``, continuing from the CRC ``value`` of the bytes before it."""
    v = operator.index(value) & 0xFFFFFFFF
    if _package is None:
        return _crc32c_table(data, v)
    try:
        return _package(data, v)
    except (BufferError, ValueError):
        return _package(byte_view(data), v)


def crc32(data: Any, value: int = 0) -> int:
    """CRC-32 (IEEE 802.3, as zlib.crc32) of ``data``, continuing from ``value``."""
    v = operator.index(value) & 0xFFFFFFFF
    try:
        return zlib.crc32(data, v)
    except (BufferError, ValueError):
        return zlib.crc32(byte_view(data), v)
