"""The .index and .timeindex readers (kcodec.records.index): layout, lookups, zero tails."""

from __future__ import annotations

import struct

import pytest

from kcodec.errors import EncodeError
from kcodec.records.index import (
    IndexEntry,
    OffsetIndex,
    TimeIndex,
    TimeIndexEntry,
    base_offset_from_name,
    sibling_path,
)


def offset_index_bytes(pairs: list[tuple[int, int]]) -> bytes:
    """Hand-built .index bytes: big-endian (relative offset int32, position int32)."""
    return b"".join(struct.pack(">ii", r, p) for r, p in pairs)


def time_index_bytes(pairs: list[tuple[int, int]]) -> bytes:
    """Hand-built .timeindex bytes: big-endian (timestamp int64, relative offset int32)."""
    return b"".join(struct.pack(">qi", t, r) for t, r in pairs)


@pytest.mark.parametrize("name, expected", [
    ("00000000000000000000.log", 0),
    ("00000000000000001234.index", 1234),
    ("/a/b/00000000000000000042.timeindex", 42),
    ("00000000000000000042.log.deleted", 42),
    ("09223372036854775807.log", (1 << 63) - 1),
    ("99999999999999999999.log", None),   # beyond int64
    ("segment.log", None),
    ("0x10.log", None),
    ("", None),
])
def test_base_offset_from_name(name: str, expected: object) -> None:
    assert base_offset_from_name(name) == expected


def test_sibling_path() -> None:
    assert sibling_path("/d/00000000000000000007.log", ".index") == "/d/00000000000000000007.index"
    assert sibling_path("00000000000000000007.log.deleted", ".timeindex") == \
        "00000000000000000007.timeindex"


def test_offset_index_layout_and_lookup() -> None:
    # base 100: entries at absolute offsets 110, 150, 200
    idx = OffsetIndex(offset_index_bytes([(10, 4100), (50, 8300), (100, 12500)]), 100)
    assert len(idx) == 3
    assert list(idx) == [IndexEntry(110, 4100), IndexEntry(150, 8300), IndexEntry(200, 12500)]
    assert idx[-1] == IndexEntry(200, 12500)
    assert idx.lookup(99) == IndexEntry(100, 0)      # before every entry: the segment start
    assert idx.lookup(100) == IndexEntry(100, 0)
    assert idx.lookup(109) == IndexEntry(100, 0)
    assert idx.lookup(110) == IndexEntry(110, 4100)
    assert idx.lookup(149) == IndexEntry(110, 4100)
    assert idx.lookup(150) == IndexEntry(150, 8300)
    assert idx.lookup(10**12) == IndexEntry(200, 12500)
    assert idx.problems(20000) == []
    with pytest.raises(IndexError):
        idx[3]


def test_offset_index_zero_tail_is_preallocation() -> None:
    real = offset_index_bytes([(10, 4100), (20, 8192)])
    idx = OffsetIndex(real + bytes(8 * 1000), 0)
    assert len(idx) == 2
    assert idx.zero_tail_bytes == 8000
    assert idx.lookup(10**6) == IndexEntry(20, 8192)
    assert idx.to_bytes() == real
    # an entry whose last bytes are zero is still an entry (position 0x1000_0000 ends in 00s)
    idx = OffsetIndex(offset_index_bytes([(7, 0x10000000)]) + bytes(16), 0)
    assert list(idx) == [IndexEntry(7, 0x10000000)]
    # a wholly preallocated (all-zero) index has no entries
    idx = OffsetIndex(bytes(10 * 1024 * 1024), 5)
    assert len(idx) == 0 and idx.lookup(77) == IndexEntry(5, 0)


def test_offset_index_partial_entry_and_problems() -> None:
    idx = OffsetIndex(offset_index_bytes([(10, 4100)]) + b"\x00\x00\x01", 0)
    assert len(idx) == 1 and idx.partial_bytes == 3
    assert any("not a multiple of 8" in p for p in idx.problems())
    bad = OffsetIndex(offset_index_bytes([(10, 4100), (5, 9000), (20, 8000), (-1, 3)]), 0)
    probs = bad.problems(log_size=8500)
    assert any("entry 1" in p for p in probs)                 # offset goes back
    assert any("entry 2" in p for p in probs)                 # position goes back
    assert any("entry 3" in p and "negative" in p for p in probs)
    assert any("beyond the log size" in p for p in probs)


def test_offset_index_round_trip_and_ranges(tmp_path) -> None:
    entries = [IndexEntry(1000 + 5, 4200), IndexEntry(1000 + 90, 9000)]
    idx = OffsetIndex.from_entries(entries, 1000)
    assert idx.to_bytes() == offset_index_bytes([(5, 4200), (90, 9000)])
    path = tmp_path / "00000000000000001000.index"
    path.write_bytes(idx.to_bytes() + bytes(800))
    again = OffsetIndex.open(path)
    assert again.base_offset == 1000 and list(again) == entries and again.path == str(path)
    with pytest.raises(EncodeError):
        OffsetIndex.from_entries([(999, 0)], 1000)             # below the base offset
    with pytest.raises(EncodeError):
        OffsetIndex.from_entries([(1000 + 2**31, 0)], 1000)    # relative offset past int32


def test_time_index_layout_and_lookup() -> None:
    data = time_index_bytes([(1_700_000_000_000, 3), (1_700_000_000_500, 9), (1_700_000_001_000, 9)])
    idx = TimeIndex(data + bytes(12 * 10), 50)
    assert len(idx) == 3 and idx.zero_tail_bytes == 120
    assert list(idx)[0] == TimeIndexEntry(1_700_000_000_000, 53)
    assert idx.lookup(0) == TimeIndexEntry(-1, 50)
    assert idx.lookup(1_700_000_000_000) == TimeIndexEntry(1_700_000_000_000, 53)
    assert idx.lookup(1_700_000_000_499) == TimeIndexEntry(1_700_000_000_000, 53)
    assert idx.lookup(1_700_000_000_500) == TimeIndexEntry(1_700_000_000_500, 59)
    assert idx.lookup(2**62) == TimeIndexEntry(1_700_000_001_000, 59)
    assert idx.problems() == []
    # a last entry with relative offset 0 ends in four zero bytes and is still kept
    one = TimeIndex(time_index_bytes([(1234, 0)]) + bytes(24), 0)
    assert list(one) == [TimeIndexEntry(1234, 0)]


def test_time_index_problems_and_round_trip(tmp_path) -> None:
    bad = TimeIndex(time_index_bytes([(500, 3), (400, 4), (600, 2)]) + b"\x01", 0)
    probs = bad.problems()
    assert len(probs) == 3 and "not a multiple of 12" in probs[0]
    idx = TimeIndex.from_entries([(10, 7), (20, 9)], 7)
    path = tmp_path / "00000000000000000007.timeindex"
    path.write_bytes(idx.to_bytes())
    assert list(TimeIndex.open(path)) == [TimeIndexEntry(10, 7), TimeIndexEntry(20, 9)]
    # the base offset given wins over the name
    assert TimeIndex.open(path, base_offset=0)[0] == TimeIndexEntry(10, 0)
    with pytest.raises(EncodeError):
        TimeIndex.from_entries([(1, 3)], 7)


def test_empty_index_files(tmp_path) -> None:
    p = tmp_path / "00000000000000000000.index"
    p.write_bytes(b"")
    idx = OffsetIndex.open(p)
    assert len(idx) == 0 and idx.problems() == [] and idx.lookup(5) == IndexEntry(0, 0)
    t = tmp_path / "00000000000000000000.timeindex"
    t.write_bytes(b"")
    assert len(TimeIndex.open(t)) == 0
