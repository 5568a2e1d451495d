"""Test data for log segments: the real Kafka-written segments, and synthetic ones.

The real segments are outside reference data (``tests.support.reference`` finds them); they
are read in place and never copied into the repository. Tests that read them are marked
``reference``.
Synthetic batches come from kcodec's builders, or from kafka-python's (``peer=True``, an
independent implementation; those tests are marked ``peers``). Expectations are computed
here with ``struct`` from the wire layout, not with kcodec's reader.
"""

from __future__ import annotations

import struct
from pathlib import Path
from typing import NamedTuple

import crc32c

from tests.support.reference import reference_file

#: the two real segments, inside the reference directory (tests.support.reference)
TOPIC_LOG = "segments/TestTopicPatient-0/00000000000000000000.log"
META_LOG = "segments/__cluster_metadata-0/00000000000000000000.log"


def reference(relative: str) -> Path:
    """A reference segment (``TOPIC_LOG``, ``META_LOG``); the test must be marked
    ``reference``, and a missing file is a failure, not a skip."""
    return reference_file(relative)


# -- independent expectations ------------------------------------------------------------------

class Shallow(NamedTuple):
    position: int
    base_offset: int
    last_offset: int
    size: int
    magic: int
    max_timestamp: int
    record_count: int
    crc_ok: bool


_V2 = struct.Struct(">qiibIhiqqqhii")


def shallow_scan(data: bytes) -> tuple[list[Shallow], int]:
    """Whole v2 batches of ``data`` by struct (CRC checked with crc32c); and where they end."""
    out, pos = [], 0
    while pos + 12 <= len(data):
        length = struct.unpack_from(">i", data, pos + 8)[0]
        if length < 49 or pos + 12 + length > len(data) or data[pos + 16] != 2:
            break
        (base, _, _, magic, crc, _, lod, _, max_ts, _, _, _, count) = _V2.unpack_from(data, pos)
        ok = crc32c.crc32c(data[pos + 21: pos + 12 + length]) == crc
        out.append(Shallow(pos, base, base + lod, 12 + length, magic, max_ts, count, ok))
        pos += 12 + length
    return out, pos


def broker_index_entries(batches: list[Shallow], interval: int = 4096
                         ) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """The entries Kafka's LogSegment.recover writes: (last offset, position) whenever more
    than ``interval`` bytes passed since the last entry, and (max timestamp so far, its
    offset) when that timestamp grew."""
    offsets: list[tuple[int, int]] = []
    times: list[tuple[int, int]] = []
    last_entry, max_ts, off_of_max = 0, -1, -1
    for b in batches:
        if b.max_timestamp > max_ts:
            max_ts, off_of_max = b.max_timestamp, b.last_offset
        if b.position - last_entry > interval:
            offsets.append((b.last_offset, b.position))
            if not times or max_ts > times[-1][0]:
                times.append((max_ts, off_of_max))
            last_entry = b.position
    return offsets, times


def index_bytes(entries: list[tuple[int, int]], base: int) -> bytes:
    return b"".join(struct.pack(">ii", o - base, p) for o, p in entries)


def timeindex_bytes(entries: list[tuple[int, int]], base: int) -> bytes:
    return b"".join(struct.pack(">qi", t, o - base) for t, o in entries)


# -- synthetic segments ------------------------------------------------------------------------

Rec = tuple  # (timestamp, key, value, headers)


def v2_batch(base_offset: int, records: list[Rec], codec: int = 0, producer_id: int = -1,
             producer_epoch: int = -1, base_sequence: int = -1, transactional: bool = False,
             leader_epoch: int = 0, peer: bool = False) -> bytes:
    """A magic 2 batch, by kcodec's builder, or by kafka-python's with ``peer=True`` (then
    given its base offset and leader epoch, both outside the CRC)."""
    if not peer:
        from kcodec.records import RecordBatchBuilder

        kb = RecordBatchBuilder(compression=codec, base_offset=base_offset,
                                producer_id=producer_id, producer_epoch=producer_epoch,
                                base_sequence=base_sequence, is_transactional=transactional,
                                partition_leader_epoch=leader_epoch, max_size=1 << 30)
        for ts, key, value, headers in records:
            assert kb.append(key, value, list(headers), timestamp=ts) is not None
        return bytes(kb.build())
    from kafka.record.default_records import DefaultRecordBatchBuilder

    b = DefaultRecordBatchBuilder(magic=2, compression_type=codec,
                                  is_transactional=transactional, producer_id=producer_id,
                                  producer_epoch=producer_epoch, base_sequence=base_sequence,
                                  batch_size=1 << 30)
    for i, (ts, key, value, headers) in enumerate(records):
        b.append(i, timestamp=ts, key=key, value=value, headers=list(headers))
    data = bytearray(b.build())
    struct.pack_into(">q", data, 0, base_offset)
    struct.pack_into(">i", data, 12, leader_epoch)
    return bytes(data)


def legacy_message(magic: int, offset: int, timestamp: int | None, key: bytes | None,
                   value: bytes | None, codec: int = 0, peer: bool = False) -> bytes:
    """One magic 0/1 message (a wrapper around it when compressed), by kcodec's builder or
    by kafka-python's with ``peer=True``."""
    if not peer:
        from kcodec.records import MessageSetBuilder

        mb = MessageSetBuilder(magic=magic, compression=codec, base_offset=offset,
                               max_size=1 << 30)
        assert mb.append(key, value, timestamp=timestamp if magic else None) is not None
        return bytes(mb.build())
    from kafka.record.legacy_records import LegacyRecordBatchBuilder

    b = LegacyRecordBatchBuilder(magic=magic, compression_type=codec, batch_size=1 << 30)
    # inside a compressed wrapper, magic 0 offsets are absolute and magic 1 ones relative
    b.append(offset if magic == 0 else 0, timestamp, key, value)
    data = bytearray(b.build())
    struct.pack_into(">q", data, 0, offset)
    return bytes(data)


def fix_crc(batch: bytearray, position: int = 0) -> None:
    """Recompute a v2 batch's CRC-32C in place (to make malformed-but-valid batches)."""
    length = struct.unpack_from(">i", batch, position + 8)[0]
    crc = crc32c.crc32c(bytes(batch[position + 21: position + 12 + length]))
    struct.pack_into(">I", batch, position + 17, crc)


def simple_batches(first_offset: int = 0, n_batches: int = 3, per_batch: int = 2,
                   t0: int = 1_700_000_000_000, step: int = 10) -> list[bytes]:
    """``n_batches`` uncompressed batches of ``per_batch`` records with increasing timestamps."""
    out, off, ts = [], first_offset, t0
    for _ in range(n_batches):
        recs = []
        for _ in range(per_batch):
            recs.append((ts, f"k{off}".encode(), f"value-{off}".encode(), [("h", b"v")]))
            off += 1
            ts += step
        out.append(v2_batch(off - per_batch, recs))
    return out


def write_segment(directory: Path, base_offset: int, parts: list[bytes],
                  index: bytes | None = None, timeindex: bytes | None = None) -> Path:
    """Write ``<base offset, 20 digits>.log`` (and its indexes when given); returns the log."""
    stem = directory / f"{base_offset:020d}"
    log = stem.with_suffix(".log")
    log.write_bytes(b"".join(parts))
    if index is not None:
        stem.with_suffix(".index").write_bytes(index)
    if timeindex is not None:
        stem.with_suffix(".timeindex").write_bytes(timeindex)
    return log
