"""The compiled legacy CRC-32 (IEEE): tables, and folding with carry-less multiplication for
runs from 64 bytes where the CPU has it; both must equal zlib.crc32 at every length, start
alignment and starting value."""

from __future__ import annotations

import random
import zlib

import pytest

from tests.conftest import NO_EXT

pytestmark = pytest.mark.skipif(NO_EXT, reason="compiled CRC-32 only")


def test_equals_zlib_at_every_length_and_offset() -> None:
    from kcodec._cy._record import _crc32_ieee

    rnd = random.Random(12)
    buf = bytes(rnd.getrandbits(8) for _ in range(70_000))
    sizes = list(range(0, 260)) + [511, 512, 1000, 4096, 65_535, 69_990]
    for n in sizes:
        for off in (0, 1, 3, 8):
            data = buf[off:off + n]
            for start in (0, 0xFFFFFFFF, 0x12345678):
                assert _crc32_ieee(data, start) == zlib.crc32(data, start), (n, off, start)


def test_chains_across_calls() -> None:
    from kcodec._cy._record import _crc32_ieee

    data = bytes(range(256)) * 9
    for cut in (0, 1, 63, 64, 65, 200, len(data)):
        assert _crc32_ieee(data[cut:], _crc32_ieee(data[:cut])) == zlib.crc32(data)
