"""kcodec.records.header: the one owner of the entry and batch header layouts.

What its view reads agrees with the batch readers; what its patch functions write is what
a reader then sees, with the CRC recomputed exactly when a covered field changed; the
header walk (``next_offset``, ``iter_entries``) agrees with a walk by the batch iterator.
"""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kcodec.errors import ChecksumError, KcodecError, TruncatedError
from kcodec.records import MessageSetBuilder, RecordBatchBuilder, iter_batches
from kcodec.records.header import (
    HEADER_SIZE,
    BatchHeader,
    compute_crc,
    entry_frame,
    iter_entries,
    new_header,
    next_offset,
    patch_header,
    patch_message,
    read_header,
    set_crc,
)


def _batch(base: int = 0, n: int = 3, **kw) -> bytes:
    b = RecordBatchBuilder(base_offset=base, **kw)
    for i in range(n):
        b.append(b"k%d" % i, b"v" * i, [("h", b"x")], timestamp=1_700_000_000_000 + i)
    return b.build()


def _legacy(magic: int, base: int = 0, n: int = 2, codec: int = 0) -> bytes:
    b = MessageSetBuilder(magic=magic, base_offset=base, compression=codec)
    for i in range(n):
        b.append(b"k", b"v%d" % i, **({"timestamp": 1_600_000_000_000 + i} if magic else {}))
    return b.build()


def _walk_by_iterator(blob: bytes, start: int) -> int:
    """What the consumer did before the header owner: the batch iterator, no CRC."""
    nxt = start
    try:
        for b in iter_batches(blob, validate_crc=False):
            nxt = max(nxt, b.next_offset)
    except KcodecError:
        pass
    return nxt


def test_the_view_reads_what_the_reader_reads() -> None:
    data = _batch(base=40, n=5, producer_id=7, producer_epoch=3, base_sequence=11,
                  is_transactional=True, partition_leader_epoch=9, compression=1)
    h = read_header(data)
    (b,) = iter_batches(data)
    assert isinstance(h, BatchHeader) and h.magic == 2 and h.size == len(data) == b.size
    for name in ("base_offset", "partition_leader_epoch", "crc", "attributes",
                 "last_offset_delta", "first_timestamp", "max_timestamp", "producer_id",
                 "producer_epoch", "base_sequence", "record_count", "last_offset",
                 "next_offset", "is_transactional", "is_control"):
        assert getattr(h, name) == getattr(b, name), name
    assert h.codec == 1 and not h.log_append_time and h.crc == compute_crc(data)


def test_a_short_header_is_a_truncation_not_a_crash() -> None:
    data = _batch()
    with pytest.raises(TruncatedError) as info:
        read_header(data[:HEADER_SIZE - 1])
    assert info.value.need == HEADER_SIZE and info.value.available == HEADER_SIZE - 1
    with pytest.raises(TruncatedError):
        read_header(data, len(data) - 10)
    with pytest.raises(TruncatedError):
        entry_frame(data[:16])
    assert entry_frame(data) == (0, len(data) - 12, 2)


def test_patching_producer_fields_recomputes_the_crc() -> None:
    data = _batch(producer_id=1, producer_epoch=0, base_sequence=0)
    buf = bytearray(data)
    patch_header(buf, producer_id=123456789012, producer_epoch=7, base_sequence=99)
    (b,) = iter_batches(bytes(buf))          # validate_crc: the new CRC is right
    assert (b.producer_id, b.producer_epoch, b.base_sequence) == (123456789012, 7, 99)
    assert [r.value for r in b] == [r.value for r in next(iter(iter_batches(data)))]
    with pytest.raises(ValueError, match="go together"):
        patch_header(buf, producer_id=5)


def test_offset_and_leader_epoch_are_outside_the_crc() -> None:
    data = _batch()
    buf = bytearray(data)
    patch_header(buf, base_offset=1000, partition_leader_epoch=4)
    assert buf[17:] == data[17:]              # CRC and everything after it untouched
    (b,) = iter_batches(bytes(buf))
    assert (b.base_offset, b.partition_leader_epoch, b.next_offset) == (1000, 4, 1003)


def test_covered_fields_change_the_crc_and_read_back() -> None:
    data = _batch()
    buf = bytearray(data)
    patch_header(buf, attributes=read_header(data).attributes | 0x08, max_timestamp=5,
                 first_timestamp=4, last_offset_delta=2)
    h = read_header(buf)
    assert (h.log_append_time, h.max_timestamp, h.first_timestamp) == (True, 5, 4)
    assert h.crc != read_header(data).crc and h.crc == compute_crc(buf)
    list(iter_batches(bytes(buf)))            # the CRC checks
    stale = bytearray(buf)
    stale[-1] ^= 0xFF
    with pytest.raises(ChecksumError):
        list(iter_batches(bytes(stale)))


def test_a_new_header_is_the_builders() -> None:
    """new_header + set_crc around a builder's records give the builder's bytes."""
    data = _batch(n=4, producer_id=3, producer_epoch=1, base_sequence=8)
    h = read_header(data)
    out = new_header(batch_length=h.batch_length, attributes=h.attributes,
                     last_offset_delta=h.last_offset_delta, first_timestamp=h.first_timestamp,
                     max_timestamp=h.max_timestamp, record_count=h.record_count,
                     producer_id=3, producer_epoch=1, base_sequence=8,
                     partition_leader_epoch=h.partition_leader_epoch)
    out += data[HEADER_SIZE:]
    set_crc(out)
    assert bytes(out) == data


@pytest.mark.parametrize("magic", [0, 1])
def test_patching_a_legacy_message(magic: int) -> None:
    data = _legacy(magic, n=2)
    buf = bytearray(data)
    first, second = iter_batches(data)
    patch_message(buf, second.position, offset=77)
    if magic == 1:
        patch_message(buf, 0, offset=70, attributes=first.attributes | 0x08, timestamp=42)
    else:
        patch_message(buf, 0, offset=70)
        with pytest.raises(ValueError, match="magic 1"):
            patch_message(bytearray(data), 0, timestamp=1)
    a, b = iter_batches(bytes(buf))           # CRC-32 checked
    assert (a.offset, b.offset, b.value) == (70, 77, second.value)
    assert a.validate_crc() and b.validate_crc()
    if magic == 1:
        assert (a.timestamp, a.timestamp_type) == (42, 1)


def _mixed_blob() -> bytes:
    return b"".join([_legacy(0, base=0, n=2), _legacy(1, base=2, n=1),
                     _legacy(1, base=3, n=3, codec=1), _batch(base=6, n=4),
                     _batch(base=10, n=1, compression=3)])


def test_entries_are_walked_whole() -> None:
    blob = _mixed_blob()
    got = list(iter_entries(blob))
    want = [(b.position, b.size, b.magic) for b in iter_batches(blob)]
    assert got == want and sum(size for _, size, _ in got) == len(blob)
    assert list(iter_entries(blob[:-1])) == want[:-1]       # a partial last one: not walked


def test_next_offset_is_the_end_of_the_last_whole_entry() -> None:
    blob = _mixed_blob()
    assert next_offset(blob, 0) == 11 == _walk_by_iterator(blob, 0)
    assert next_offset(blob, 50) == 50                    # nothing past the start
    assert next_offset(b"", 5) == 5
    for cut in range(len(blob)):                          # every truncation
        assert next_offset(blob[:cut], 0) == _walk_by_iterator(blob[:cut], 0), cut


@given(st.data())
def test_next_offset_agrees_with_the_iterator_on_mangled_blobs(data) -> None:
    """Random byte changes in a valid v2 blob: the header walk and the batch iterator find
    the same end (the iterator decodes nothing either, the CRC unchecked)."""
    blob = bytearray(b"".join(_batch(base=i * 3, n=3) for i in range(4)))
    rnd = random.Random(data.draw(st.integers(0, 2**32)))
    for _ in range(data.draw(st.integers(1, 4))):
        blob[rnd.randrange(len(blob))] = rnd.randrange(256)
    blob = bytes(blob)
    assert next_offset(blob, 0) == _walk_by_iterator(blob, 0)
