"""XXH32 (seed 0), for LZ4 frame header checksums: a few bytes per frame, so pure Python."""

from __future__ import annotations

__all__ = ["xxh32"]

_P1, _P2, _P3, _P4, _P5 = 0x9E3779B1, 0x85EBCA77, 0xC2B2AE3D, 0x27D4EB2F, 0x165667B1
_M = 0xFFFFFFFF


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _M


def xxh32(data: bytes, seed: int = 0) -> int:
    """The 32-bit xxHash of ``data``."""
    n = len(data)
    pos = 0
    if n >= 16:
        v = [(seed + _P1 + _P2) & _M, (seed + _P2) & _M, seed & _M, (seed - _P1) & _M]
        while pos + 16 <= n:
            for i in range(4):
                lane = int.from_bytes(data[pos : pos + 4], "little")
                v[i] = (_rotl((v[i] + lane * _P2) & _M, 13) * _P1) & _M
                pos += 4
        acc = (_rotl(v[0], 1) + _rotl(v[1], 7) + _rotl(v[2], 12) + _rotl(v[3], 18)) & _M
    else:
        acc = (seed + _P5) & _M
    acc = (acc + n) & _M
    while pos + 4 <= n:
        lane = int.from_bytes(data[pos : pos + 4], "little")
        acc = (_rotl((acc + lane * _P3) & _M, 17) * _P4) & _M
        pos += 4
    while pos < n:
        acc = (_rotl((acc + data[pos] * _P5) & _M, 11) * _P1) & _M
        pos += 1
    acc ^= acc >> 15
    acc = (acc * _P2) & _M
    acc ^= acc >> 13
    acc = (acc * _P3) & _M
    acc ^= acc >> 16
    return acc
