"""The broker's partition log in memory: validation, offsets, reads, lookups, retention.

On-disk behaviour (segments, indexes, recovery, the crash test) is in test_partition_disk.py.
"""

from __future__ import annotations

import struct

import pytest

from kcodec.broker.log import (
    AppendResult,
    BatchInfo,
    CorruptMessage,
    InvalidConfig,
    InvalidRecord,
    InvalidTimestamp,
    LogConfig,
    LogError,
    LogManager,
    MessageTooLarge,
    OffsetOutOfRange,
    PartitionLog,
    RecordListTooLarge,
    UnsupportedCompressionType,
    peek_batches,
)
from kcodec.crc import crc32, crc32c
from kcodec.protocol import ErrorCode
from kcodec.records import MessageSetBuilder, RecordBatchBuilder, iter_batches

NOW = 1_700_000_100_000


def batch(n: int = 3, ts: int = 1_700_000_000_000, codec: int = 0, **kw: object) -> bytes:
    b = RecordBatchBuilder(compression=codec, **kw)  # type: ignore[arg-type]
    for i in range(n):
        b.append(b"k%d" % i, b"v%d" % i, [("h", b"x")], timestamp=ts + i)
    return bytes(b.build())


def fix_crc(data: bytearray) -> bytearray:
    struct.pack_into(">I", data, 17, crc32c(bytes(data[21:])))
    return data


def records(data: bytes) -> list[tuple[int, bytes | None, int]]:
    return [(r.offset, r.value, r.timestamp) for b in iter_batches(data) for r in b]


@pytest.fixture
def log() -> PartitionLog:
    mgr = LogManager(None)
    mgr.open()
    return mgr.create("t", 0, LogConfig())


# -- append and read -----------------------------------------------------------------------


def test_offsets_assigned_in_place_bytes_kept(log: PartitionLog) -> None:
    raw = [batch(3), batch(2, codec=1), batch(4, codec=3)]
    results = [log.append(r, now_ms=NOW) for r in raw]
    assert [(r.base_offset, r.last_offset, r.record_count) for r in results] == [
        (0, 2, 3), (3, 4, 2), (5, 8, 4)]
    assert all(r.log_append_time_ms == -1 for r in results)
    assert results[0].batches == [BatchInfo(0, 2, -1, -1, -1, False, False)]
    assert results[0].max_timestamp == 1_700_000_000_002
    stored = log.read(0, 1 << 20)
    assert len(stored) == sum(map(len, raw))
    pos = 0
    for r, res in zip(raw, results, strict=False):
        part = stored[pos:pos + len(r)]
        # stored as received: only the base offset differs; the CRC is untouched
        assert part[8:] == r[8:]
        assert struct.unpack_from(">q", part)[0] == res.base_offset
        pos += len(r)
    assert [b.validate_crc() for b in iter_batches(stored)] == [True] * 3
    assert [o for o, _, _ in records(stored)] == list(range(9))
    assert log.log_end_offset == 9 == log.high_watermark
    assert log.log_start_offset == 0
    assert log.size_bytes == len(stored)


def test_leader_epoch_written(log: PartitionLog) -> None:
    log.append(batch(1), now_ms=NOW, leader_epoch=7)
    b = next(iter_batches(log.read(0, 100)))
    assert b.partition_leader_epoch == 7 and b.validate_crc()


def test_log_append_time_rewrites_max_timestamp_and_crc() -> None:
    log = LogManager(None).create("t", 0, LogConfig(message_timestamp_type="LogAppendTime"))
    for codec in (0, 2):
        res = log.append(batch(3, codec=codec), now_ms=NOW)
        assert res.log_append_time_ms == NOW and res.max_timestamp == NOW
        b = next(iter_batches(log.read(res.base_offset, 1)))
        assert b.validate_crc() and b.timestamp_type == 1 and b.max_timestamp == NOW
        assert [r.timestamp for r in b] == [NOW] * 3


def test_wrong_producer_max_timestamp_corrected(log: PartitionLog) -> None:
    data = bytearray(batch(2))
    struct.pack_into(">q", data, 35, 5)       # a max timestamp below the records'
    log.append(bytes(fix_crc(data)), now_ms=NOW)
    b = next(iter_batches(log.read(0, 100)))
    assert b.validate_crc() and b.max_timestamp == 1_700_000_000_001


def test_producer_fields_reported(log: PartitionLog) -> None:
    raw = batch(2, producer_id=42, producer_epoch=3, base_sequence=10, is_transactional=True)
    assert peek_batches(raw) == [BatchInfo(0, 1, 42, 3, 10, True, False)]
    assert peek_batches(memoryview(raw)) == peek_batches(raw)
    res = log.append(memoryview(raw), now_ms=NOW)
    assert res.batches == [BatchInfo(0, 1, 42, 3, 10, True, False)]


def test_read_bounds(log: PartitionLog) -> None:
    sizes = [len(batch(2))] * 3
    for _ in range(3):
        log.append(batch(2), now_ms=NOW)
    # from the batch holding the offset, whole batches only
    assert [o for o, _, _ in records(log.read(3, 1 << 20))] == [2, 3, 4, 5]
    assert len(log.read(0, sizes[0] * 2)) == sizes[0] * 2
    assert len(log.read(0, sizes[0] * 2 - 1)) == sizes[0]
    # min_one: at least one batch even when it is larger than max_bytes
    assert len(log.read(0, 1)) == sizes[0]
    assert log.read(0, 1, min_one=False) == b""
    # never past the upper bound (a batch straddling it is left out)
    assert [o for o, _, _ in records(log.read(0, 1 << 20, upper_bound=4))] == [0, 1, 2, 3]
    assert log.read(0, 1 << 20, upper_bound=1) == b""
    assert log.read(4, 1 << 20, upper_bound=4) == b""
    assert log.read(6, 100) == b""          # the log end: nothing yet
    for bad in (-1, 7):
        with pytest.raises(OffsetOutOfRange) as ei:
            log.read(bad, 100)
        assert ei.value.error_code == ErrorCode.OFFSET_OUT_OF_RANGE


def test_high_watermark_settable(log: PartitionLog) -> None:
    log.auto_high_watermark = False
    log.append(batch(2), now_ms=NOW)
    assert log.high_watermark == 0 and log.log_end_offset == 2
    log.high_watermark = 5
    assert log.high_watermark == 2
    log.high_watermark = 1
    assert log.high_watermark == 1


# -- validation errors ---------------------------------------------------------------------


def _raises(log: PartitionLog, data: bytes, cls: type, code: ErrorCode) -> LogError:
    end = log.log_end_offset
    with pytest.raises(cls) as ei:
        log.append(data, now_ms=NOW)
    assert ei.value.error_code == code
    assert log.log_end_offset == end           # nothing stored
    return ei.value


def test_bad_crc(log: PartitionLog) -> None:
    data = bytearray(batch(2))
    data[-1] ^= 1
    _raises(log, bytes(data), CorruptMessage, ErrorCode.CORRUPT_MESSAGE)


def test_truncated_and_garbage(log: PartitionLog) -> None:
    raw = batch(2)
    for bad in (raw[:-1], raw[:10], raw + b"\0" * 5, b"\x00" * 8 + b"\x00\x00\x00\x05"):
        with pytest.raises((CorruptMessage, InvalidRecord)):
            log.append(bad, now_ms=NOW)
    _raises(log, b"", InvalidRecord, ErrorCode.INVALID_RECORD)
    data = bytearray(raw)
    data[16] = 7                                # unknown magic
    _raises(log, bytes(data), CorruptMessage, ErrorCode.CORRUPT_MESSAGE)
    assert log.log_end_offset == 0


def test_too_large() -> None:
    raw = batch(3)
    log = LogManager(None).create("t", 0, LogConfig(max_message_bytes=len(raw) - 1))
    _raises(log, raw, MessageTooLarge, ErrorCode.MESSAGE_TOO_LARGE)
    log = LogManager(None).create("t", 0, LogConfig(segment_bytes=len(raw) - 1))
    _raises(log, raw, RecordListTooLarge, ErrorCode.RECORD_LIST_TOO_LARGE)


def test_invalid_records(log: PartitionLog) -> None:
    two = batch(1) + batch(1)
    _raises(log, two, InvalidRecord, ErrorCode.INVALID_RECORD)
    data = bytearray(batch(3))
    struct.pack_into(">i", data, 23, 5)        # last offset delta != count - 1
    _raises(log, bytes(fix_crc(data)), InvalidRecord, ErrorCode.INVALID_RECORD)
    data = bytearray(batch(3))
    struct.pack_into(">i", data, 23, 3)        # header says 4 records, 3 inside
    struct.pack_into(">i", data, 57, 4)
    _raises(log, bytes(fix_crc(data)), CorruptMessage, ErrorCode.CORRUPT_MESSAGE)
    data = bytearray(batch(2))
    struct.pack_into(">q", data, 0, 10)        # a producer sends base offset 0
    _raises(log, bytes(data), InvalidRecord, ErrorCode.INVALID_RECORD)
    _raises(log, batch(2, is_transactional=True), InvalidRecord, ErrorCode.INVALID_RECORD)
    _raises(log, batch(2, producer_id=5, producer_epoch=0), InvalidRecord,
            ErrorCode.INVALID_RECORD)
    # record offset deltas must run 0, 1, 2: build with explicit deltas 0, 2
    b = RecordBatchBuilder()
    b.append(b"k", b"v", timestamp=1, offset_delta=0)
    b.append(b"k", b"v", timestamp=1, offset_delta=2)
    data = bytearray(b.build())
    struct.pack_into(">i", data, 23, 1)        # header consistent with 2 records
    _raises(log, bytes(fix_crc(data)), InvalidRecord, ErrorCode.INVALID_RECORD)
    assert log.log_end_offset == 0


def test_timestamps_checked(log: PartitionLog) -> None:
    data = bytearray(batch(2))
    data[22] |= 0x08                           # producer-set LogAppendTime
    _raises(log, bytes(fix_crc(data)), InvalidTimestamp, ErrorCode.INVALID_TIMESTAMP)
    strict = LogManager(None).create("t", 0, LogConfig(message_timestamp_before_max_ms=1000,
                                                      message_timestamp_after_max_ms=1000))
    _raises(strict, batch(1, ts=NOW - 5000), InvalidTimestamp, ErrorCode.INVALID_TIMESTAMP)
    _raises(strict, batch(1, ts=NOW + 5000), InvalidTimestamp, ErrorCode.INVALID_TIMESTAMP)
    assert strict.append(batch(1, ts=NOW - 500), now_ms=NOW).base_offset == 0
    mixed = RecordBatchBuilder()
    mixed.append(b"k", b"new", timestamp=NOW)
    mixed.append(b"k", b"old", timestamp=NOW - 5000)    # not the max: still checked
    _raises(strict, mixed.build(), InvalidTimestamp, ErrorCode.INVALID_TIMESTAMP)


def test_compression_errors(log: PartitionLog) -> None:
    data = bytearray(batch(2))
    data[22] = (data[22] & ~0x07) | 0x07        # codec id 7
    _raises(log, bytes(fix_crc(data)), UnsupportedCompressionType,
            ErrorCode.UNSUPPORTED_COMPRESSION_TYPE)
    data = bytearray(batch(2, codec=1))
    data[-3] ^= 0xFF                            # broken gzip stream, good CRC
    _raises(log, bytes(fix_crc(data)), CorruptMessage, ErrorCode.CORRUPT_MESSAGE)
    # zstd below magic 2
    mb = MessageSetBuilder(magic=1, compression=1)
    mb.append(b"k", b"v", timestamp=1)
    m = bytearray(mb.build())
    m[17] = (m[17] & ~0x07) | 4
    struct.pack_into(">I", m, 12, crc32(bytes(m[16:])))
    _raises(log, bytes(m), UnsupportedCompressionType, ErrorCode.UNSUPPORTED_COMPRESSION_TYPE)


def test_errors_are_kcodec_errors() -> None:
    from kcodec.errors import KcodecError

    assert issubclass(LogError, KcodecError)
    e = InvalidRecord("x", batch_index=0)
    assert e.batch_index == 0 and e.error_code == ErrorCode.INVALID_RECORD


# -- legacy message sets -------------------------------------------------------------------


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", [0, 1, 2, 3])
def test_legacy_kcodec_builder(log: PartitionLog, magic: int, codec: int) -> None:
    log.append(batch(2), now_ms=NOW)            # legacy after v2 in the same log
    mb = MessageSetBuilder(magic=magic, compression=codec)
    for i in range(3):
        mb.append(b"k", b"m%d" % i, timestamp=1_700_000_000_000 + i)
    res = log.append(mb.build(), now_ms=NOW)
    assert (res.base_offset, res.last_offset, res.record_count) == (2, 4, 3)
    got = records(log.read(2, 1 << 20))
    assert [(o, v) for o, v, _ in got] == [(2, b"m0"), (3, b"m1"), (4, b"m2")]
    if magic == 1:
        assert [t for _, _, t in got] == [1_700_000_000_000 + i for i in range(3)]
        assert res.max_timestamp == 1_700_000_000_002
    stored = log.read(2, 1 << 20)
    assert all(b.validate_crc() for b in iter_batches(stored))
    assert len(list(iter_batches(stored))) == (1 if codec else 3)


@pytest.mark.parametrize("codec", [0, 1])
def test_legacy_log_append_time(codec: int) -> None:
    log = LogManager(None).create("t", 0, LogConfig(message_timestamp_type="LogAppendTime"))
    mb = MessageSetBuilder(magic=1, compression=codec)
    for i in range(2):
        mb.append(b"k", b"m%d" % i, timestamp=5)
    res = log.append(mb.build(), now_ms=NOW)
    assert res.log_append_time_ms == NOW
    stored = log.read(0, 1 << 20)
    assert all(b.validate_crc() and b.timestamp_type == 1 for b in iter_batches(stored))
    assert [t for _, _, t in records(stored)] == [NOW, NOW]


def test_legacy_inner_offsets_must_be_relative(log: PartitionLog) -> None:
    mb = MessageSetBuilder(magic=1, compression=1)
    mb.append(b"k", b"a", timestamp=1, offset_delta=0)
    mb.append(b"k", b"b", timestamp=1, offset_delta=5)
    _raises(log, mb.build(), InvalidRecord, ErrorCode.INVALID_RECORD)


def test_legacy_bad_crc_and_mixed_magic(log: PartitionLog) -> None:
    mb = MessageSetBuilder(magic=1)
    mb.append(b"k", b"v", timestamp=1)
    m = bytearray(mb.build())
    m[-1] ^= 1
    _raises(log, bytes(m), CorruptMessage, ErrorCode.CORRUPT_MESSAGE)
    m0 = MessageSetBuilder(magic=0)
    m0.append(b"k", b"v")
    _raises(log, mb.build() + m0.build(), InvalidRecord, ErrorCode.INVALID_RECORD)
    two = MessageSetBuilder(magic=1, compression=1)
    two.append(b"k", b"v", timestamp=1)
    _raises(log, two.build() + two.build(), InvalidRecord, ErrorCode.INVALID_RECORD)


@pytest.mark.peers
@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", [0, 1, 2, 3])
def test_legacy_kafka_python_builder_and_reader(log: PartitionLog, magic: int,
                                                codec: int) -> None:
    """Old-format clients: kafka-python's legacy builder in, kafka-python's reader out."""
    from kafka.record import MemoryRecords
    from kafka.record.legacy_records import LegacyRecordBatchBuilder

    log.append(batch(1), now_ms=NOW)
    for round_ in range(2):
        b = LegacyRecordBatchBuilder(magic=magic, compression_type=codec, batch_size=1 << 20)
        for i in range(3):
            b.append(i, 1_700_000_000_000 + i if magic else None, b"k", b"r%d-%d" % (round_, i))
        log.append(bytes(b.build()), now_ms=NOW)
    got = []
    mr = MemoryRecords(log.read(1, 1 << 20))
    while True:
        rb = mr.next_batch()
        if rb is None:
            break
        got += [(r.offset, r.value) for r in rb]
    assert got == [(1 + 3 * r + i, b"r%d-%d" % (r, i)) for r in range(2) for i in range(3)]


# -- lookups -------------------------------------------------------------------------------


def test_timestamp_lookups(log: PartitionLog) -> None:
    assert log.offset_for_timestamp(0) is None and log.max_timestamp_offset() is None
    log.append(batch(3, ts=1000), now_ms=NOW)      # 1000 1001 1002
    log.append(batch(3, ts=5000), now_ms=NOW)      # 5000 5001 5002
    log.append(batch(2, ts=3000), now_ms=NOW)      # 3000 3001 (older, later)
    assert log.offset_for_timestamp(0) == (0, 1000)
    assert log.offset_for_timestamp(1001) == (1, 1001)
    assert log.offset_for_timestamp(1003) == (3, 5000)
    assert log.offset_for_timestamp(5002) == (5, 5002)
    assert log.offset_for_timestamp(5003) is None
    assert log.max_timestamp_offset() == (5, 5002)
    log.delete_records_before(4)
    assert log.offset_for_timestamp(0) == (4, 5001)


# -- deletion, truncation, retention, rolling ----------------------------------------------


def test_delete_records_before(log: PartitionLog) -> None:
    for _ in range(3):
        log.append(batch(2), now_ms=NOW)
    assert log.delete_records_before(3) == 3
    assert log.log_start_offset == 3
    assert [o for o, _, _ in records(log.read(3, 1 << 20))][0] == 2   # whole batch back
    with pytest.raises(OffsetOutOfRange):
        log.read(2, 100)
    assert log.delete_records_before(1) == 3        # never backwards
    with pytest.raises(OffsetOutOfRange):
        log.delete_records_before(7)                # above the high watermark
    assert log.delete_records_before(-1) == 6       # -1: the high watermark
    assert log.read(6, 100) == b""


def test_truncate_to(log: PartitionLog) -> None:
    for _ in range(3):
        log.append(batch(2), now_ms=NOW)
    log.truncate_to(3)                              # mid batch: the whole batch goes
    assert log.log_end_offset == 2 == log.high_watermark
    assert log.append(batch(1), now_ms=NOW).base_offset == 2
    log.truncate_to(0)
    assert log.log_end_offset == 0 and log.read(0, 100) == b""
    assert log.append(batch(1), now_ms=NOW).base_offset == 0


def test_roll_by_size_and_read_across() -> None:
    one = len(batch(2))
    log = LogManager(None).create("t", 0, LogConfig(segment_bytes=one * 2))
    for _ in range(5):
        log.append(batch(2), now_ms=NOW)
    assert [s.base_offset for s in log.segments] == [0, 4, 8]
    got = []
    offset = 0
    while offset < log.log_end_offset:
        data = log.read(offset, 1 << 20)
        got += [o for o, _, _ in records(data)]
        offset = got[-1] + 1
    assert got == list(range(10))


def test_roll_by_time() -> None:
    """Kafka's rule: the new batch's max timestamp minus the segment's first one."""
    log = LogManager(None).create("t", 0, LogConfig(segment_ms=1000))
    log.append(batch(1, ts=NOW), now_ms=NOW)
    log.append(batch(1, ts=NOW + 1000), now_ms=NOW)
    assert len(log.segments) == 1
    log.append(batch(1, ts=NOW + 1001), now_ms=NOW)
    assert [s.base_offset for s in log.segments] == [0, 2]
    # old timestamps, appended much later: no roll per append
    old = LogManager(None).create("t", 0, LogConfig(segment_ms=1000))
    for i in range(5):
        old.append(batch(1, ts=1_600_000_000_000 + i), now_ms=NOW)
    assert len(old.segments) == 1
    # LogAppendTime: the broker's clock
    lat = LogManager(None).create("t", 0, LogConfig(segment_ms=1000,
                                                    message_timestamp_type="LogAppendTime"))
    lat.append(batch(1), now_ms=NOW)
    lat.append(batch(1), now_ms=NOW + 1000)
    lat.append(batch(1), now_ms=NOW + 1001)
    assert [s.base_offset for s in lat.segments] == [0, 2]


def test_roll_by_time_without_timestamps(monkeypatch: pytest.MonkeyPatch) -> None:
    """Magic 0 messages have no timestamp: the segment's age counts (creation time)."""
    from kcodec.broker.log import partition as partition_mod

    monkeypatch.setattr(partition_mod, "_now_ms", lambda: NOW)
    log = LogManager(None).create("t", 0, LogConfig(segment_ms=1000))
    for now in (NOW, NOW + 1000, NOW + 1001):
        mb = MessageSetBuilder(magic=0)
        mb.append(b"k", b"v")
        log.append(mb.build(), now_ms=now)
    assert [s.base_offset for s in log.segments] == [0, 2]


def test_retention_by_size() -> None:
    one = len(batch(2))
    log = LogManager(None).create("t", 0, LogConfig(segment_bytes=one, retention_bytes=one * 2))
    for _ in range(5):
        log.append(batch(2), now_ms=NOW)
    assert len(log.segments) == 5
    assert log.run_retention(NOW) == 3
    assert log.log_start_offset == 6 and log.size_bytes == 2 * one
    with pytest.raises(OffsetOutOfRange):
        log.read(0, 100)


def test_retention_by_time() -> None:
    one = len(batch(1))
    # the last append's records carry today's time, far after now_ms (no future limit here)
    log = LogManager(None).create("t", 0, LogConfig(segment_bytes=one, retention_ms=1000,
                                                    message_timestamp_after_max_ms=1 << 62))
    for ts in (1000, 2000, 3000):
        log.append(batch(1, ts=ts), now_ms=ts)
    assert log.run_retention(2500) == 1            # 1000 is older than 1000 ms at 2500
    assert log.log_start_offset == 1
    assert log.run_retention(10_000) == 2          # everything: rolled, start at the end
    assert log.log_start_offset == 3 == log.log_end_offset
    assert log.append(batch(1), now_ms=10_000).base_offset == 3


def test_retention_keeps_above_high_watermark() -> None:
    one = len(batch(1))
    log = LogManager(None).create("t", 0, LogConfig(segment_bytes=one, retention_ms=0))
    log.auto_high_watermark = False
    for _ in range(3):
        log.append(batch(1, ts=1), now_ms=NOW)
    assert log.run_retention(NOW) == 0
    log.high_watermark = 2
    assert log.run_retention(NOW) == 2 and log.log_start_offset == 2


# -- the manager and the config ------------------------------------------------------------


def test_manager_memory() -> None:
    mgr = LogManager(None)
    mgr.open()
    a = mgr.create("a", 0, LogConfig())
    assert mgr.create("a", 0) is a
    mgr.create("a", 1, LogConfig())
    mgr.create("b", 0, LogConfig())
    assert mgr.partitions() == [("a", 0), ("a", 1), ("b", 0)]
    assert mgr.get("a", 1) is not None and mgr.get("c", 0) is None
    assert mgr.delete_topic("a") == [0, 1]
    assert mgr.partitions() == [("b", 0)]
    with pytest.raises(InvalidConfig):
        mgr.create("bad/name", 0, LogConfig())
    mgr.flush()
    assert mgr.run_retention(NOW) == 0
    mgr.close()


def test_config_names() -> None:
    cfg = LogConfig.from_topic_configs({"segment.bytes": "1000", "retention.ms": "-1",
                                        "message.timestamp.type": "LogAppendTime",
                                        "min.insync.replicas": "2",
                                        "message.timestamp.difference.max.ms": "60000"})
    assert cfg.segment_bytes == 1000 and cfg.retention_ms == -1 and cfg.log_append_time
    assert cfg.message_timestamp_before_max_ms == cfg.message_timestamp_after_max_ms == 60000
    back = cfg.to_topic_configs()
    assert back["segment.bytes"] == "1000" and back["cleanup.policy"] == "delete"
    assert LogConfig.from_topic_configs(back) == cfg
    for bad in ({"segment.bytes": "x"}, {"segment.bytes": "5"},
                {"message.timestamp.type": "Now"}, {"cleanup.policy": "compacted"},
                {"retention.ms": "-2"}):
        with pytest.raises(InvalidConfig) as ei:
            LogConfig.from_topic_configs(bad)
        assert ei.value.error_code == ErrorCode.INVALID_CONFIG


def test_update_config_applies_to_next_append(log: PartitionLog) -> None:
    log.append(batch(1), now_ms=NOW)
    log.update_config(LogConfig(message_timestamp_type="LogAppendTime"))
    assert log.append(batch(1), now_ms=NOW).log_append_time_ms == NOW


def test_append_result_is_a_tuple() -> None:
    r = AppendResult(0, 1, -1, 5, 2, [])
    assert r.base_offset == 0 and r._replace(last_offset=3).last_offset == 3


# -- hostile input -------------------------------------------------------------------------


def _samples() -> list[bytes]:
    out = [batch(3, codec=c) for c in range(5)]
    out.append(batch(2, producer_id=1, producer_epoch=0, base_sequence=0))
    for magic in (0, 1):
        for codec in (0, 1, 3):
            mb = MessageSetBuilder(magic=magic, compression=codec)
            for i in range(3):
                mb.append(b"k", b"m%d" % i, timestamp=5)
            out.append(mb.build())
    return out


def _fix_any_crc(data: bytearray) -> None:
    if len(data) >= 61 and data[16] == 2:
        struct.pack_into(">I", data, 17, crc32c(bytes(data[21:])))
    elif len(data) >= 18 and data[16] in (0, 1):
        length = struct.unpack_from(">i", data, 8)[0]
        if 0 < length <= len(data) - 12:
            struct.pack_into(">I", data, 12, crc32(bytes(data[16:12 + length])))


def test_mutated_input_gives_log_errors_only(seed: int = 1234, rounds: int = 1500) -> None:
    """Flipped bytes, cut and extended inputs (CRCs fixed up half the time, so the checks
    behind the CRC run too): an append succeeds or raises a LogError, and what is stored
    always reads back with good CRCs."""
    import random

    rng = random.Random(seed)
    log = LogManager(None).create("t", 0, LogConfig())
    samples = _samples()
    ok = failed = 0
    for _ in range(rounds):
        data = bytearray(rng.choice(samples))
        for _ in range(rng.randint(1, 4)):
            kind = rng.random()
            if kind < 0.6 and data:
                data[rng.randrange(len(data))] = rng.randrange(256)
            elif kind < 0.8:
                del data[rng.randrange(len(data) + 1):]
            else:
                data += bytes(rng.randrange(256) for _ in range(rng.randint(1, 20)))
        if rng.random() < 0.5:
            _fix_any_crc(data)
        try:
            log.append(bytes(data), now_ms=NOW)
            ok += 1
        except LogError:
            failed += 1
    assert ok and failed
    offset = 0
    while offset < log.log_end_offset:
        stored = log.read(offset, 1 << 20)
        bs = list(iter_batches(stored))
        assert bs and all(b.validate_crc() for b in bs)
        offset = bs[-1].last_offset + 1
    assert offset == log.log_end_offset


@pytest.mark.slow
def test_mutated_input_soak() -> None:
    """The mutation test above with many more inputs and seeds."""
    for seed in range(20):
        test_mutated_input_gives_log_errors_only(seed=seed, rounds=5000)


def test_concurrent_appends_and_reads() -> None:
    import threading

    log = LogManager(None).create("t", 0, LogConfig(segment_bytes=4096))
    errors: list[BaseException] = []

    def produce() -> None:
        try:
            for _ in range(200):
                log.append(batch(2), now_ms=NOW)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    def consume() -> None:
        import time

        deadline = time.monotonic() + 60
        try:
            offset = 0
            while offset < 1600 and time.monotonic() < deadline:
                data = log.read(offset, 10_000)
                for b in iter_batches(data):
                    assert b.base_offset <= offset <= b.last_offset or b.base_offset > offset
                    offset = b.last_offset + 1
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=produce, daemon=True) for _ in range(4)]
    threads.append(threading.Thread(target=consume, daemon=True))
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert errors == []
    assert log.log_end_offset == 1600
    assert len(log.segments) > 1


# -- leader epochs and replica appends -----------------------------------------------------


def test_leader_epoch_cache(log: PartitionLog) -> None:
    assert log.end_offset_for_epoch(0) == (-1, -1)
    log.append(batch(2), now_ms=NOW, leader_epoch=0)     # 0-1
    log.append(batch(2), now_ms=NOW, leader_epoch=0)     # 2-3
    log.append(batch(2), now_ms=NOW, leader_epoch=2)     # 4-5
    log.append(batch(2), now_ms=NOW, leader_epoch=5)     # 6-7
    log.append(batch(1), now_ms=NOW, leader_epoch=4)     # 8: an older epoch is not an entry
    assert log.leader_epochs() == [(0, 0), (2, 4), (5, 6)]
    assert log.end_offset_for_epoch(5) == (5, 9)         # the latest: the log end
    assert log.end_offset_for_epoch(2) == (2, 6)
    assert log.end_offset_for_epoch(1) == (0, 4)         # largest epoch <= 1 is 0
    assert log.end_offset_for_epoch(0) == (0, 4)
    assert log.end_offset_for_epoch(9) == (-1, -1)
    assert log.end_offset_for_epoch(-1) == (-1, -1)
    log.truncate_to(6)
    assert log.leader_epochs() == [(0, 0), (2, 4)]
    log.delete_records_before(5)
    assert log.leader_epochs() == [(2, 5)]


def test_append_as_follower_keeps_bytes() -> None:
    leader = LogManager(None).create("t", 0, LogConfig(message_timestamp_type="LogAppendTime"))
    for i in range(3):
        leader.append(batch(2, codec=i % 2), now_ms=NOW, leader_epoch=3)
    follower = LogManager(None).create("t", 0, LogConfig())
    data = leader.read(0, 1 << 20)
    res = follower.append_as_follower(data)
    assert (res.base_offset, res.last_offset, res.record_count) == (0, 5, 6)
    assert follower.read(0, 1 << 20) == data                # byte for byte
    assert follower.leader_epochs() == [(3, 0)]
    with pytest.raises(InvalidRecord):                      # offsets must follow the end
        follower.append_as_follower(leader.read(2, 1 << 20))
    bad = bytearray(leader.read(4, 1 << 20))
    bad[-1] ^= 1
    with pytest.raises(CorruptMessage):
        follower.append_as_follower(bytes(bad))
    assert follower.log_end_offset == 6
    fresh = LogManager(None).create("t", 0, LogConfig())
    fresh.append_as_follower(leader.read(4, 1 << 20))      # an empty replica joins late
    assert fresh.log_start_offset == 4 and fresh.log_end_offset == 6


# -- down-conversion for old fetchers ------------------------------------------------------


def test_magic_for_fetch_version() -> None:
    from kcodec.broker.log import magic_for_fetch_version

    assert [magic_for_fetch_version(v) for v in range(6)] == [0, 0, 1, 1, 2, 2]


@pytest.mark.parametrize("to_magic", [0, 1])
@pytest.mark.parametrize("lat", [False, True])
def test_down_convert(to_magic: int, lat: bool) -> None:
    from kcodec.broker.log import down_convert

    cfg = LogConfig(message_timestamp_type="LogAppendTime" if lat else "CreateTime",
                    segment_ms=1 << 62)          # one segment (reads stop at its end)
    log = LogManager(None).create("t", 0, cfg)
    for codec in (0, 1, 2, 3):
        log.append(batch(3, codec=codec), now_ms=NOW)           # 0-2 3-5 6-8 9-11
    control = RecordBatchBuilder(is_control=True, is_transactional=True, producer_id=1,
                                 producer_epoch=0)
    control.append_control(1)
    log.append(control.build(), now_ms=NOW)                   # 12: dropped
    mb = MessageSetBuilder(magic=0)
    mb.append(b"k", b"old")
    log.append(mb.build(), now_ms=NOW)                        # 13: kept as it is
    stored = log.read(1, 1 << 20)
    out = down_convert(stored, to_magic, first_offset=1)
    got = [(b.magic, b.validate_crc()) for b in iter_batches(out)]
    assert {m for m, _ in got} == {to_magic} | {0} and all(ok for _, ok in got)
    recs = [(r.offset, r.value, r.timestamp) for b in iter_batches(out) for r in b]
    # offset 0 (uncompressed batch, below the fetch offset) is left out
    want_ts = [NOW if lat else 1_700_000_000_000 + i % 3 for i in range(1, 12)]
    assert [(o, v) for o, v, _ in recs] == (
        [(i, b"v%d" % (i % 3)) for i in range(1, 12)] + [(13, b"old")])
    if to_magic == 1:
        assert [t for _, _, t in recs][:11] == want_ts
    else:
        assert all(t == -1 for _, _, t in recs)
    assert down_convert(stored, 2) == stored


@pytest.mark.peers
@pytest.mark.parametrize("to_magic", [0, 1])
def test_down_converted_read_by_kafka_python(to_magic: int) -> None:
    from kafka.record import MemoryRecords

    from kcodec.broker.log import down_convert

    log = LogManager(None).create("t", 0, LogConfig())
    for codec in (0, 1, 2, 3):
        log.append(batch(3, codec=codec), now_ms=NOW)
    mr = MemoryRecords(down_convert(log.read(0, 1 << 20), to_magic))
    got = []
    while (rb := mr.next_batch()) is not None:
        assert rb.validate_crc()
        got += [(r.offset, r.value) for r in rb]
    assert got == [(i, b"v%d" % (i % 3)) for i in range(12)]


def test_down_convert_zstd_unsupported() -> None:
    from kcodec.broker.log import down_convert

    log = LogManager(None).create("t", 0, LogConfig())
    log.append(batch(2, codec=4), now_ms=NOW)
    with pytest.raises(UnsupportedCompressionType) as ei:
        down_convert(log.read(0, 1 << 20), 1)
    assert ei.value.error_code == ErrorCode.UNSUPPORTED_COMPRESSION_TYPE


# -- batches built by the peers ------------------------------------------------------------


@pytest.mark.peers
@pytest.mark.parametrize("peer", ["kafka-python", "aiokafka"])
@pytest.mark.parametrize("codec", [0, 1, 2, 3, 4])
def test_peer_built_batches(peer: str, codec: int) -> None:
    """v2 batches from the peers' producers' builders append, and read back in the peers'
    readers with the assigned offsets and good CRCs."""
    if peer == "kafka-python":
        from kafka.record.default_records import DefaultRecordBatchBuilder
        from kafka.record.memory_records import MemoryRecords
    else:
        from aiokafka.record.default_records import DefaultRecordBatchBuilder
        from aiokafka.record.memory_records import MemoryRecords

    log = LogManager(None).create("t", 0, LogConfig())
    log.append(batch(2), now_ms=NOW)
    for round_ in range(3):
        b = DefaultRecordBatchBuilder(magic=2, compression_type=codec, is_transactional=False,
                                      producer_id=7, producer_epoch=1,
                                      base_sequence=round_ * 4, batch_size=1 << 20)
        for i in range(4):
            b.append(i, timestamp=NOW - 10 + i, key=b"k%d" % i, value=b"r%d-%d" % (round_, i),
                     headers=[("h", b"x")])
        res = log.append(bytes(b.build()), now_ms=NOW)
        assert res.batches[0].producer_id == 7
        assert res.batches[0].base_sequence == round_ * 4
    mr = MemoryRecords(log.read(2, 1 << 20))
    got = []
    while (rb := mr.next_batch()) is not None:
        assert rb.validate_crc()
        got += [(r.offset, r.value) for r in rb]
    assert got == [(2 + 4 * r + i, b"r%d-%d" % (r, i)) for r in range(3) for i in range(4)]
