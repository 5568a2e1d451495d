"""The record walk the broker log validates produced v2 batches with (segscan twins)."""

from __future__ import annotations

import random

import pytest

from kcodec.errors import CorruptDataError, KcodecError, TruncatedError
from kcodec.records import RecordBatchBuilder, iter_batches


def _section(n: int = 5, ts: int = 1_700_000_000_000, **kw: object) -> tuple[bytes, int, int]:
    b = RecordBatchBuilder(**kw)  # type: ignore[arg-type]
    for i in range(n):
        key = None if i % 3 == 0 else b"key%d" % i
        value = None if i % 4 == 1 else b"value" * i
        headers = [(f"h{j}", None if j == 1 else b"x" * j) for j in range(i % 3)]
        b.append(key, value, headers, timestamp=ts + (i * 7919) % 13 - 6)
    data = b.build()
    batch = next(iter_batches(data))
    return bytes(data[61:]), batch.record_count, batch.first_timestamp


def _expected(n: int = 5) -> tuple[int, int]:
    b = RecordBatchBuilder()
    for i in range(n):
        b.append(b"k", b"v", timestamp=1_700_000_000_000 + (i * 7919) % 13 - 6)
    stamps = [r.timestamp for r in next(iter_batches(b.build()))]
    return min(stamps), max(stamps)


def test_valid_sections(twin) -> None:
    scan = twin("segscan").scan_records_v2
    for n in (1, 2, 5, 40):
        section, count, first = _section(n)
        assert scan(section, count, first) == (*_expected(n), -1)
        assert scan(memoryview(section), count, first) == (*_expected(n), -1)
        assert scan(bytearray(section), count, first) == (*_expected(n), -1)


def test_bad_offset_delta(twin) -> None:
    scan = twin("segscan").scan_records_v2
    b = RecordBatchBuilder()
    for d in (0, 1, 3, 4):
        b.append(b"k", b"v", timestamp=10, offset_delta=d)
    section = bytes(b.build()[61:])
    assert scan(section, 4, 10) == (10, 10, 2)


def test_count_and_length_mismatch(twin) -> None:
    scan = twin("segscan").scan_records_v2
    section, count, first = _section(4)
    with pytest.raises(TruncatedError):
        scan(section, count + 1, first)                 # fewer records than declared
    with pytest.raises(CorruptDataError, match="after the last"):
        scan(section, count - 1, first)                 # more records than declared
    with pytest.raises(CorruptDataError, match="after the last"):
        scan(section + b"\0", count, first)
    with pytest.raises(ValueError):
        scan(section, -1, first)
    assert scan(b"", 0, first) == (-1, -1, -1)


def test_twins_agree_on_mutations(pair) -> None:
    cy, py = pair("segscan")
    rng = random.Random(99)
    sections = [_section(n) for n in (1, 3, 8)]
    for _ in range(3000):
        section, count, first = rng.choice(sections)
        data = bytearray(section)
        for _ in range(rng.randint(1, 3)):
            if rng.random() < 0.7 and data:
                data[rng.randrange(len(data))] = rng.randrange(256)
            else:
                del data[rng.randrange(len(data) + 1):]
        outcomes = []
        for mod in (cy, py):
            try:
                outcomes.append(("ok", mod.scan_records_v2(bytes(data), count, first)))
            except KcodecError as exc:
                outcomes.append((type(exc).__name__, str(exc)))
        assert outcomes[0] == outcomes[1], bytes(data).hex()


def test_long_varints_take_the_same_walk(pair) -> None:
    """Fields whose lengths and deltas need three to ten varint bytes (big values, headers,
    timestamps far from the first): both twins, and a section cut anywhere, agree."""
    cy, py = pair("segscan")
    b = RecordBatchBuilder()
    ts = 1_700_000_000_000
    for i, delta in enumerate((0, 9_000, -70_000_000, 2**40, -(2**50), 5)):
        b.append(b"k" * (i * 3000), b"v" * (20_000 + i), [("h" * 200, b"x" * 17_000)],
                 timestamp=ts + delta)
    data = b.build()
    batch = next(iter_batches(data))
    section = bytes(data[61:])
    stamps = [r.timestamp for r in batch]
    assert cy.scan_records_v2(section, 6, ts) == (min(stamps), max(stamps), -1)
    assert py.scan_records_v2(section, 6, ts) == (min(stamps), max(stamps), -1)
    for cut in list(range(0, 40)) + list(range(len(section) - 40, len(section))):
        outcomes = []
        for mod in (cy, py):
            try:
                outcomes.append(("ok", mod.scan_records_v2(section[:cut], 6, ts)))
            except KcodecError as exc:
                outcomes.append((type(exc).__name__, str(exc)))
        assert outcomes[0] == outcomes[1], cut
