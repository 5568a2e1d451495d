"""Golden vectors assembled by hand from the record format specs, read and written by both
twins."""

from __future__ import annotations

import gzip
import struct
import zlib

import pytest

from tests.support.records_util import crc32c, legacy, simple_record, v2

TS = 1_700_000_000_000

# One record, key "k", value "v", header ("h", "1"): every byte written out.
RECORD = bytes.fromhex(
    "18"        # length 12 (zigzag)
    "00"        # attributes
    "00"        # timestamp delta 0
    "00"        # offset delta 0
    "02" "6b"   # key length 1, "k"
    "02" "76"   # value length 1, "v"
    "02"        # 1 header
    "02" "68"   # header key length 1, "h"
    "02" "31"   # header value length 1, "1"
)
BATCH_TAIL = bytes.fromhex(
    "0000"                  # attributes
    "00000000"              # last offset delta
    "0000018bcfe56800"      # first timestamp 1700000000000
    "0000018bcfe56800"      # max timestamp
    "ffffffffffffffff"      # producer id -1
    "ffff"                  # producer epoch -1
    "ffffffff"              # base sequence -1
    "00000001"              # 1 record
) + RECORD
GOLDEN_V2 = (bytes.fromhex("0000000000000005" "0000003e" "00000000" "02")
             + struct.pack(">I", crc32c(BATCH_TAIL)) + BATCH_TAIL)


def test_golden_v2_reads(twin) -> None:
    (b,) = list(twin("batch").iter_batches(GOLDEN_V2))
    assert (b.base_offset, b.last_offset, b.batch_length, b.size, b.magic, b.record_count) == (
        5, 5, 62, 74, 2, 1)
    assert (b.first_timestamp, b.max_timestamp, b.producer_id, b.producer_epoch,
            b.base_sequence, b.partition_leader_epoch) == (TS, TS, -1, -1, -1, 0)
    assert (b.compression, b.timestamp_type, b.is_transactional, b.is_control) == (
        0, 0, False, False)
    assert b.crc == crc32c(BATCH_TAIL) and b.validate_crc() and b.computed_crc() == b.crc
    (r,) = list(b)
    assert (r.offset, r.timestamp, r.timestamp_type, r.key, r.value, r.headers,
            r.attributes) == (5, TS, 0, b"k", b"v", [("h", b"1")], 0)
    assert b.records_data() == RECORD


def test_golden_v2_builds(twin) -> None:
    bb = twin("builder").RecordBatchBuilder(base_offset=5, partition_leader_epoch=0)
    m = bb.append(b"k", b"v", [("h", b"1")], TS)
    assert (m.offset_delta, m.timestamp, m.size) == (0, TS, len(RECORD))
    assert bb.build() == GOLDEN_V2


def test_golden_log_append_time_and_null_fields(twin) -> None:
    recs = simple_record(0, 7, None, None) + simple_record(2, -3, b"", b"", [(b"a", None)])
    data = v2(recs, 2, attributes=0x08, first_ts=100, max_ts=999, last_offset_delta=2,
              base_offset=40)
    (b,) = list(twin("batch").iter_batches(data))
    assert b.timestamp_type == 1
    got = [(r.offset, r.timestamp, r.timestamp_type, r.key, r.value, r.headers) for r in b]
    assert got == [(40, 999, 1, None, None, []), (42, 999, 1, b"", b"", [("a", None)])]
    data = v2(recs, 2, first_ts=100, max_ts=999, last_offset_delta=2)
    (b,) = list(twin("batch").iter_batches(data))
    assert [r.timestamp for r in b] == [107, 97]


@pytest.mark.parametrize("kind,epoch", [(0, 5), (1, -1)])
def test_golden_control_batch(twin, kind: int, epoch: int) -> None:
    rec = simple_record(0, 0, struct.pack(">hh", 0, kind), struct.pack(">hi", 0, epoch))
    data = v2(rec, 1, attributes=0x30, producer_id=77, producer_epoch=1, first_ts=TS)
    (b,) = list(twin("batch").iter_batches(data))
    assert b.is_control and b.is_transactional
    (r,) = list(b)
    assert r.is_control and (r.control_type, r.version, r.coordinator_epoch) == (kind, 0, epoch)
    bb = twin("builder").RecordBatchBuilder(is_control=True, is_transactional=True,
                                          producer_id=77, producer_epoch=1,
                                          partition_leader_epoch=0)
    bb.append_control(kind, epoch, TS)
    assert bb.build() == data


def test_golden_kraft_control_record_has_no_epoch(twin) -> None:
    rec = simple_record(0, 0, struct.pack(">hh", 0, 3), b"\x00\x00")
    (b,) = list(twin("batch").iter_batches(v2(rec, 1, attributes=0x20)))
    (r,) = list(b)
    assert (r.control_type, r.coordinator_epoch) == (3, None)


def test_golden_legacy_v0_v1(twin) -> None:
    m0 = bytes.fromhex("0000000000000007" "00000011") + struct.pack(
        ">I", zlib.crc32(bytes.fromhex("0000ffffffff00000003616263"))) + bytes.fromhex(
        "00" "00" "ffffffff" "00000003" "616263")
    assert m0 == legacy(0, 7, None, b"abc")
    m1 = legacy(1, 8, b"k", b"v", ts=TS, attributes=0x08)
    b0, b1 = list(twin("batch").iter_batches(m0 + m1))
    assert (b0.magic, b0.base_offset, b0.last_offset, b0.size, b0.timestamp_type) == (
        0, 7, 7, 29, -1)
    assert (b1.magic, b1.base_offset, b1.size, b1.timestamp_type, b1.max_timestamp) == (
        1, 8, 12 + 4 + 2 + 8 + 4 + 1 + 4 + 1, 1, TS)
    assert b0.validate_crc() and b1.validate_crc()
    assert (b0.producer_id, b0.is_control, b0.partition_leader_epoch, b0.record_count) == (
        -1, False, -1, 1)
    (r0,) = list(b0)
    (r1,) = list(b1)
    assert (r0.offset, r0.timestamp, r0.timestamp_type, r0.key, r0.value) == (
        7, -1, -1, None, b"abc")
    assert (r1.offset, r1.timestamp, r1.timestamp_type, r1.key, r1.value) == (
        8, TS, 1, b"k", b"v")
    mb = twin("legacy").MessageSetBuilder(magic=0, base_offset=7)
    mb.append(None, b"abc")
    assert mb.build() == m0


def _wrapper(magic: int, offset: int, inner: bytes, *, log_append: bool = False,
             ts: int = 0) -> bytes:
    attrs = 1 | (0x08 if log_append else 0)
    return legacy(magic, offset, None, gzip.compress(inner), attributes=attrs, ts=ts)


def test_golden_magic1_wrapper_relative_offsets(twin) -> None:
    inner = legacy(1, 0, b"a", b"1", ts=TS) + legacy(1, 1, b"b", b"2", ts=TS + 1)
    data = _wrapper(1, 11, inner, ts=TS + 1)
    (w,) = list(twin("batch").iter_batches(data))
    assert (w.base_offset, w.last_offset, w.record_count, w.compression) == (10, 11, 2, 1)
    assert [(r.offset, r.timestamp, r.timestamp_type) for r in w] == [
        (10, TS, 0), (11, TS + 1, 0)]


def test_golden_magic1_wrapper_log_append_time_overrides(twin) -> None:
    inner = legacy(1, 0, b"a", b"1", ts=5) + legacy(1, 1, b"b", b"2", ts=6)
    data = _wrapper(1, 1, inner, log_append=True, ts=TS)
    (w,) = list(twin("batch").iter_batches(data))
    assert [(r.offset, r.timestamp, r.timestamp_type) for r in w] == [(0, TS, 1), (1, TS, 1)]


def test_golden_magic0_wrapper_absolute_offsets(twin) -> None:
    inner = legacy(0, 20, b"a", b"1") + legacy(0, 21, b"b", b"2")
    (w,) = list(twin("batch").iter_batches(_wrapper(0, 21, inner)))
    assert [(r.offset, r.timestamp, r.timestamp_type, r.key) for r in w] == [
        (20, -1, -1, b"a"), (21, -1, -1, b"b")]


@pytest.mark.parametrize("codec", [1, 2, 3])
@pytest.mark.parametrize("magic", [0, 1])
def test_legacy_wrapper_codecs_round_trip(twin, magic: int, codec: int) -> None:
    mb = twin("legacy").MessageSetBuilder(magic=magic, compression=codec, base_offset=50)
    for i in range(10):
        mb.append(b"k%d" % i, b"v" * i, TS + i)
    (w,) = list(twin("batch").iter_batches(mb.build()))
    assert (w.compression, w.base_offset, w.last_offset, w.record_count) == (codec, 50, 59, 10)
    assert [(r.offset, r.value) for r in w] == [(50 + i, b"v" * i) for i in range(10)]


def test_golden_snappy_raw_and_lz4_magic0_quirk(twin) -> None:
    import cramjam

    inner = legacy(0, 0, None, b"x" * 50) + legacy(0, 1, None, b"y")
    raw = bytes(cramjam.snappy.compress_raw(inner))
    (w,) = list(twin("batch").iter_batches(legacy(0, 1, None, raw, attributes=2)))
    assert [r.value for r in w] == [b"x" * 50, b"y"]
    from kcodec.compression import compress

    lz = compress(3, inner, magic=0)
    (w,) = list(twin("batch").iter_batches(legacy(0, 1, None, lz, attributes=3)))
    assert [r.value for r in w] == [b"x" * 50, b"y"]


@pytest.mark.parametrize("codec", [0, 1, 2, 3, 4])
def test_v2_codecs_round_trip_and_builder_fields(twin, codec: int) -> None:
    bb = twin("builder").RecordBatchBuilder(compression=codec, base_offset=3, producer_id=9,
                                          producer_epoch=4, base_sequence=100,
                                          is_transactional=True, timestamp_type=0)
    metas = [bb.append(b"k", b"v%d" % i, [("x", b"y")], TS + 10 - i) for i in range(5)]
    assert [m.offset_delta for m in metas] == list(range(5))
    data = bb.build()
    (b,) = list(twin("batch").iter_batches(data))
    assert (b.compression, b.is_transactional, b.producer_id, b.producer_epoch,
            b.base_sequence, b.first_timestamp, b.max_timestamp, b.last_offset) == (
        codec, True, 9, 4, 100, TS + 10, TS + 10, 7)
    assert [(r.offset, r.timestamp, r.value) for r in b] == [
        (3 + i, TS + 10 - i, b"v%d" % i) for i in range(5)]


def test_header_keys_repeating_and_changing(twin) -> None:
    keys = [["ab", "x"], ["ab", "y"], ["ac", "y"], ["", "\u00e9"], ["\u00e9", ""], ["ab", "x"],
            ["a", "b", "c", "d", "e", "f"], ["a", "b", "c", "d", "e", "g"]]
    bb = twin("builder").RecordBatchBuilder()
    for ks in keys:
        bb.append(None, b"", [(k, k.encode() or None) for k in ks], TS)
    (b,) = list(twin("batch").iter_batches(bb.build()))
    assert [[k for k, _ in r.headers] for r in b] == keys
    assert [[v for _, v in r.headers] for r in b] == [[k.encode() or None for k in ks]
                                                      for ks in keys]
