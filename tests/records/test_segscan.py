"""The recovery fast path (kcodec._py/_cy.segscan.scan_valid_v2): both twins, same answers."""

from __future__ import annotations

import random
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kcodec import _impl
from tests.support.segments import (
    META_LOG,
    fix_crc,
    legacy_message,
    reference,
    shallow_scan,
    simple_batches,
    v2_batch,
)

PY = _impl.twin("segscan", "python")
CY = PY if _impl._truthy("KCODEC_NO_EXTENSIONS") else _impl.twin("segscan", "cython")


def expected(data: bytes, start: int = 0, base: int = 0) -> tuple:
    """What the scan must return, from the struct-based scanner of the tests."""
    batches, _ = shallow_scan(data[start:])
    good = []
    for b in batches:
        if not (b.crc_ok and b.record_count >= 0 and base <= b.base_offset <= b.last_offset
                <= base + 2**31 - 1):
            break
        good.append(b)
    if not good:
        return (start, 0, 0, None, None, -1)
    return (start + good[-1].position + good[-1].size, len(good),
            sum(b.record_count for b in good), good[0].base_offset, good[-1].last_offset,
            max(-1, *(b.max_timestamp for b in good)))


def test_simple(twin) -> None:
    scan = twin("segscan").scan_valid_v2
    parts = simple_batches(first_offset=10, n_batches=4, per_batch=3)
    data = b"".join(parts)
    assert scan(data, 0, 10) == (len(data), 4, 12, 10, 21, 1_700_000_000_110)
    assert scan(data, 0, 10) == expected(data, 0, 10)
    assert scan(data, len(parts[0]), 10) == (len(data), 3, 9, 13, 21, 1_700_000_000_110)
    assert scan(data, len(data), 10) == (len(data), 0, 0, None, None, -1)
    assert scan(b"", 0, 0) == (0, 0, 0, None, None, -1)
    # every kind of buffer
    for buf in (bytearray(data), memoryview(data), memoryview(bytearray(data))):
        assert scan(buf, 0, 10) == (len(data), 4, 12, 10, 21, 1_700_000_000_110)


@pytest.mark.reference
def test_real_segment(twin) -> None:
    data = reference(META_LOG).read_bytes()
    assert twin("segscan").scan_valid_v2(data) == (len(data), 4814, 4929, 0, 4928,
                                                   1769793835851) == expected(data)


def test_stops_before_what_it_cannot_vouch_for(twin) -> None:
    scan = twin("segscan").scan_valid_v2
    parts = simple_batches(n_batches=3, per_batch=2)
    p0, p1 = len(parts[0]), len(parts[0]) + len(parts[1])
    full = b"".join(parts)
    # a bad CRC in the middle
    bad = bytearray(full)
    bad[p1 - 2] ^= 1
    assert scan(bytes(bad))[:3] == (p0, 1, 2)
    # a torn last batch, a short tail, a zero tail
    assert scan(full[:-1])[:2] == (p1, 2)
    assert scan(full + b"\x00" * 11)[:2] == (len(full), 3)
    assert scan(full + bytes(100))[:2] == (len(full), 3)
    # a legacy message stops it (the full reader handles those)
    mixed = parts[0] + legacy_message(1, 2, 5, b"k", b"v") + parts[1]
    assert scan(mixed)[:2] == (p0, 1)
    # offsets outside the segment: below the base, beyond base + 2**31 - 1
    assert scan(full, 0, 1)[:2] == (0, 0)
    far = v2_batch(2**31, [(1, None, b"x", [])])
    assert scan(parts[0] + far, 0, 0)[:2] == (p0, 1)
    assert scan(parts[0] + far, p0, 1)[:2] == (len(parts[0] + far), 1)
    # a negative record count or last offset delta, even with a good CRC
    for field, value in ((57, -1), (23, -1)):
        b = bytearray(parts[1])
        struct.pack_into(">i", b, field, value)
        fix_crc(b)
        assert scan(parts[0] + bytes(b))[:2] == (p0, 1)
    # a length below the v2 minimum, or past the end
    for length in (48, 14, -1, 10**9):
        b = bytearray(parts[1])
        struct.pack_into(">i", b, 8, length)
        assert scan(parts[0] + bytes(b))[:2] == (p0, 1)


def test_bad_arguments(twin) -> None:
    scan = twin("segscan").scan_valid_v2
    for start in (-1, 5):
        with pytest.raises(ValueError, match=f"start {start} outside a buffer of 4 bytes"):
            scan(b"abcd", start)
    for base in (2**63, -(2**63) - 1):
        with pytest.raises(ValueError, match="is not an int64"):
            scan(b"", 0, base)
    with pytest.raises(TypeError):
        scan("text")
    # extreme base offsets: top clamps at int64
    big = 2**63 - 10
    data = v2_batch(big, [(1, None, b"x", []), (2, None, b"y", [])])
    assert scan(data, 0, big)[:5] == (len(data), 1, 2, big, big + 1)


def _mutated(seed: int) -> bytes:
    rng = random.Random(seed)
    parts = simple_batches(n_batches=5, per_batch=2) + [
        v2_batch(10, [(5, b"k", b"q" * 200, [])], codec=1), legacy_message(1, 11, 7, b"k", b"v")]
    data = bytearray(b"".join(parts))
    for _ in range(rng.randint(0, 4)):
        data[rng.randrange(len(data))] = rng.randrange(256)
    if rng.random() < 0.3:
        del data[rng.randrange(len(data)):]
    return bytes(data)


@settings(max_examples=300)
@given(seed=st.integers(0, 2**32), base=st.sampled_from([0, 1, 3, -5]),
       start=st.integers(0, 250))
def test_twins_agree_on_mutated_input(seed: int, base: int, start: int) -> None:
    cy, py = CY, PY
    data = _mutated(seed)
    start = min(start, len(data))
    got = cy.scan_valid_v2(data, start, base)
    assert got == py.scan_valid_v2(data, start, base)
    assert got == expected(data, start, base)


@given(data=st.binary(max_size=300), start=st.integers(0, 300))
def test_twins_agree_on_random_bytes(data: bytes, start: int) -> None:
    cy, py = CY, PY
    start = min(start, len(data))
    assert cy.scan_valid_v2(data, start) == py.scan_valid_v2(data, start)
