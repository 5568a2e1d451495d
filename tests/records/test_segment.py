"""kcodec.records.LogSegment: real Kafka segments, synthetic ones, seeking and recovery."""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import os
import random
import shutil
import struct
from pathlib import Path

import pytest

from kcodec import _impl
from kcodec.errors import ChecksumError, CorruptDataError, KcodecError, TruncatedError
from kcodec.records import segment as segment_mod
from kcodec.records.index import IndexEntry, OffsetIndex, TimeIndex, TimeIndexEntry
from kcodec.records.segment import LogSegment, RecoveryResult, TimestampOffset
from tests.support.segments import (
    META_LOG,
    TOPIC_LOG,
    broker_index_entries,
    fix_crc,
    index_bytes,
    legacy_message,
    reference,
    shallow_scan,
    simple_batches,
    timeindex_bytes,
    v2_batch,
    write_segment,
)


@pytest.fixture(autouse=True)
def reader(impl: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run every test over both twins of the batch reader."""
    monkeypatch.setattr(segment_mod, "iter_batches", _impl.twin("batch", impl).iter_batches)
    monkeypatch.setattr(segment_mod, "scan_valid_v2", _impl.twin("segscan", impl).scan_valid_v2)
    return impl


def linear_find(batches: list, offset: int):
    return next((b for b in batches if b.last_offset >= offset), None)


# -- the real segments -------------------------------------------------------------------------


@pytest.mark.reference
def test_topic_segment_decodes_completely() -> None:
    path = reference(TOPIC_LOG)
    expected, end = shallow_scan(path.read_bytes())
    assert end == path.stat().st_size == 3271
    with LogSegment(path) as seg:
        assert seg.base_offset == 0 and seg.size == 3271
        assert seg.offset_index is None and seg.time_index is None   # none beside it
        batches = list(seg)
        assert [(b.position, b.base_offset, b.last_offset, b.size) for b in batches] == \
            [(0, 0, 0, 1901), (1901, 1, 1, 976), (2877, 2, 2, 394)]
        assert [(e.position, e.size, e.max_timestamp) for e in expected] == \
            [(b.position, b.size, b.max_timestamp) for b in batches]
        assert all(b.validate_crc() for b in batches)
        assert [b.producer_id for b in batches] == [1, 2, 3]
        records = [r for b in batches for r in b]
        assert [r.offset for r in records] == [0, 1, 2]
        assert [len(r.value) for r in records] == [1831, 906, 324]
        assert records[0].value.startswith(b'{\r\n  "resourceType" : "Patient"')
        assert records[2].value.startswith(b'{\r\n  "resourceType": "Bundle"')
        assert all(r.key is None and r.headers == [] for r in records)
        res = seg.recover(deep=True)
    assert res.ok and res.reason is None and res.error is None
    assert (res.valid_bytes, res.truncate_at, res.truncated_bytes) == (3271, 3271, 0)
    assert (res.batches, res.records, res.first_offset, res.last_offset) == (3, 3, 0, 2)
    assert res.max_timestamp == 1769793578165


@pytest.mark.reference
def test_metadata_segment_decodes_completely() -> None:
    path = reference(META_LOG)
    data = path.read_bytes()
    expected, end = shallow_scan(data)
    assert end == len(data) == 353439 and len(expected) == 4814
    assert all(e.crc_ok for e in expected)
    with LogSegment(path) as seg:
        batches = list(seg)
        assert [(b.position, b.base_offset, b.last_offset, b.size, b.record_count)
                for b in batches] == [(e.position, e.base_offset, e.last_offset, e.size,
                                       e.record_count) for e in expected]
        assert all(b.validate_crc() for b in batches)
        assert (batches[1000].position, batches[1000].base_offset) == (76583, 1059)
        assert batches[0].is_control and sum(b.is_control for b in batches) == 1
        offsets = [r.offset for b in batches for r in b]
        assert offsets == list(range(4929))
        control = next(iter(batches[0]))
        assert control.is_control and control.control_type == 2   # KRaft LEADER_CHANGE
        res = seg.recover(deep=True)
    assert res.ok and (res.batches, res.records, res.last_offset) == (4814, 4929, 4928)


@pytest.fixture
def meta_with_indexes(tmp_path: Path) -> tuple[Path, list, list, list]:
    """The metadata segment in tmp_path with the .index/.timeindex the broker's recovery
    rule gives (computed independently here), preallocated-style zero tails included."""
    src = reference(META_LOG)
    log = tmp_path / src.name
    shutil.copyfile(src, log)
    batches, _ = shallow_scan(log.read_bytes())
    offsets, times = broker_index_entries(batches)
    assert len(offsets) == 85 and len(times) == 85
    log.with_suffix(".index").write_bytes(index_bytes(offsets, 0) + bytes(8 * 64))
    log.with_suffix(".timeindex").write_bytes(timeindex_bytes(times, 0) + bytes(12 * 64))
    return log, batches, offsets, times


@pytest.mark.reference
def test_metadata_segment_indexes(meta_with_indexes) -> None:
    log, expected, offsets, times = meta_with_indexes
    with LogSegment(log) as seg:
        assert list(seg.offset_index) == [IndexEntry(*e) for e in offsets]
        assert list(seg.time_index) == [TimeIndexEntry(*e) for e in times]
        assert seg.offset_index.zero_tail_bytes == 512
        assert seg.verify_indexes() == []
        built_offsets, built_times = seg.build_indexes()
        assert built_offsets.to_bytes() == seg.offset_index.to_bytes()
        assert built_times.to_bytes() == seg.time_index.to_bytes()
        # every offset: indexed lookup == linear scan; the index is really used
        for off in list(range(0, 4929, 7)) + [4927, 4928]:
            got = seg.find_offset(off)
            want = linear_find(expected, off)
            assert (got.position, got.base_offset) == (want.position, want.base_offset)
        assert seg._start_for(4928) == offsets[-1][1] > 0
        assert seg.find_offset(4929) is None
        assert [b.base_offset for b in seg.batches_from(4925)] == [4871, 4926, 4927, 4928]
        assert seg.find_offset(4900).record_count == 55     # the one multi-record batch


@pytest.mark.reference
def test_metadata_segment_find_timestamp(meta_with_indexes) -> None:
    log, _, _, times = meta_with_indexes
    with LogSegment(log) as seg:
        records = [(r.timestamp, r.offset, b.position) for b in seg for r in b]
        lo, hi = records[0][0], records[-1][0]
        rng = random.Random(7)
        probes = [lo - 1, lo, hi, hi + 1, times[10][0], times[10][0] + 1] + \
            [rng.randint(lo, hi) for _ in range(40)]
        for ts in probes:
            want = next((TimestampOffset(*r) for r in records if r[0] >= ts), None)
            assert seg.find_timestamp(ts) == want, ts
        # without indexes the answers are the same
        with LogSegment(log, indexes=False) as bare:
            for ts in probes[:10]:
                assert bare.find_timestamp(ts) == seg.find_timestamp(ts)


# -- synthetic segments ------------------------------------------------------------------------


def test_synthetic_round_trip_and_fields(tmp_path: Path) -> None:
    parts = [
        v2_batch(100, [(5000, b"k", b"v", [("a", b"1"), ("b", None)])], producer_id=7,
                 producer_epoch=2, base_sequence=40, transactional=True, leader_epoch=3),
        v2_batch(101, [(5001, None, None, []), (5002, b"x", b"y" * 5000, [])], codec=1),
    ]
    log = write_segment(tmp_path, 100, parts)
    with LogSegment(log) as seg:
        assert seg.base_offset == 100
        b0, b1 = list(seg)
        assert (b0.producer_id, b0.producer_epoch, b0.base_sequence) == (7, 2, 40)
        assert b0.is_transactional and b0.partition_leader_epoch == 3
        assert (b1.position, b1.compression, b1.last_offset) == (len(parts[0]), 1, 102)
        recs = [r for b in seg for r in b]
        assert [(r.offset, r.key, r.headers) for r in recs] == [
            (100, b"k", [("a", b"1"), ("b", None)]), (101, None, []), (102, b"x", [])]
        assert recs[2].value == b"y" * 5000
        assert seg.recover(deep=True).ok


def test_mixed_magics(tmp_path: Path) -> None:
    parts = [legacy_message(0, 0, None, b"k0", b"v0"),
             legacy_message(1, 1, 1234, b"k1", b"v1"),
             v2_batch(2, [(2000, None, b"v2", [])])]
    log = write_segment(tmp_path, 0, parts)
    with LogSegment(log) as seg:
        assert [(b.magic, b.base_offset, b.last_offset) for b in seg] == [(0, 0, 0), (1, 1, 1),
                                                                         (2, 2, 2)]
        assert [r.value for b in seg for r in b] == [b"v0", b"v1", b"v2"]
        assert seg.find_offset(1).magic == 1
        assert seg.find_timestamp(1000) == TimestampOffset(1234, 1, len(parts[0]))
        res = seg.recover(deep=True)
        assert res.ok and res.last_offset == 2


@pytest.mark.peers
def test_peer_built_segment(tmp_path: Path) -> None:
    """Batches kafka-python builds (every codec, magics 0, 1 and 2) read back intact."""
    parts, want = [], []
    off = 0
    for codec in (0, 1, 2, 3, 4):
        recs = [(1_700_000_000_000 + off + i, b"k%d" % i, b"v" * (i * 50), [("h", None)])
                for i in range(3)]
        parts.append(v2_batch(off, recs, codec=codec, peer=True, producer_id=9,
                              producer_epoch=1, base_sequence=off))
        want += [(off + i, r[1], r[2], r[3]) for i, r in enumerate(recs)]
        off += 3
    for magic in (0, 1):
        for codec in (0, 1, 2, 3):
            parts.append(legacy_message(magic, off, 1_700_000_100_000 + off, b"key", b"x" * 90,
                                        codec=codec, peer=True))
            want.append((off, b"key", b"x" * 90, []))
            off += 1
    log = write_segment(tmp_path, 0, parts)
    with LogSegment(log) as seg:
        got = [(r.offset, r.key, r.value, r.headers) for b in seg for r in b]
        assert got == want
        assert [b.compression for b in seg][:5] == [0, 1, 2, 3, 4]
        res = seg.recover(deep=True)
        assert res.ok and res.last_offset == off - 1 and res.records == len(want)
        assert seg.find_offset(16).magic == 0


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="counts descriptors in /proc")
def test_closed_segment_is_unmapped_while_its_recovery_result_lives(tmp_path: Path) -> None:
    """``close()`` unmaps the file even though the result (and the error in it) is kept:
    the error must not carry the scan's frames, whose views held the map, and with it the
    file's descriptor, until the garbage collector ran."""
    import gc

    def open_fds(path: Path) -> int:
        n = 0
        for fd in os.listdir("/proc/self/fd"):
            with contextlib.suppress(OSError):
                n += os.readlink(f"/proc/self/fd/{fd}") == str(path)
        return n

    good = b"".join(simple_batches(n_batches=3))
    bad_crc = bytearray(v2_batch(6, [(1, b"k", b"v", [])]))
    bad_crc[-1] ^= 0xFF
    bad_record = bytearray(v2_batch(6, [(1, b"k", b"v", [])]))
    bad_record[61 + 4] = 3    # after the header: length, attributes, deltas, key length -2
    fix_crc(bad_record)
    results = []
    gc.disable()
    try:
        for tail, deep, reason in ((bad_crc, False, "checksum mismatch"),
                                   (bad_record, True, "bad record")):
            d = tmp_path / reason.replace(" ", "-")
            d.mkdir()
            log = write_segment(d, 0, [good, bytes(tail)])
            with LogSegment(log) as seg:
                res = seg.recover(deep=deep)
            assert (res.reason, res.valid_bytes) == (reason, len(good)), res
            assert isinstance(res.error, KcodecError)
            assert open_fds(log) == 0, f"{log} still open after close() ({reason})"
            results.append(res)
    finally:
        gc.enable()


def test_empty_segment(tmp_path: Path) -> None:
    log = write_segment(tmp_path, 42, [], index=b"", timeindex=bytes(120))
    with LogSegment(log) as seg:
        assert seg.size == 0 and list(seg) == [] and seg.base_offset == 42
        assert seg.find_offset(42) is None and seg.find_timestamp(0) is None
        assert list(seg.batches_from(0)) == []
        res = seg.recover(deep=True)
        assert res == RecoveryResult(str(log), 0, 0, 0, 0, None, None, -1)
        assert res.ok and "no valid batches" in res.summary()
        assert seg.verify_indexes() == []
        idx, tidx = seg.build_indexes()
        assert len(idx) == 0 and len(tidx) == 0


def test_gaps_after_compaction(tmp_path: Path) -> None:
    parts = [v2_batch(0, [(10, b"a", b"1", [])]), v2_batch(5, [(20, b"b", b"2", [])]),
             v2_batch(9, [(30, b"c", b"3", []), (40, b"d", b"4", [])])]
    log = write_segment(tmp_path, 0, parts)
    with LogSegment(log) as seg:
        assert seg.find_offset(0).base_offset == 0
        assert seg.find_offset(3).base_offset == 5      # in the gap: the next batch
        assert seg.find_offset(10).base_offset == 9     # inside a batch
        assert seg.find_offset(11) is None
        assert seg.find_timestamp(25) == TimestampOffset(30, 9, len(parts[0]) + len(parts[1]))
        assert seg.find_timestamp(35).offset == 10
        assert seg.find_timestamp(41) is None


def test_base_offset_from_name_and_fallbacks(tmp_path: Path) -> None:
    parts = simple_batches(first_offset=500)
    named = write_segment(tmp_path, 500, parts)
    with LogSegment(named) as seg:
        assert seg.base_offset == 500 and seg.recover().ok
    other = tmp_path / "copy.log"
    other.write_bytes(b"".join(parts))
    with LogSegment(other) as seg:                 # no offset in the name: the first batch's
        assert seg.base_offset == 500
    with LogSegment(other, base_offset=0) as seg:  # given explicitly
        assert seg.base_offset == 0 and seg.recover().ok


def test_offsets_outside_the_segment(tmp_path: Path) -> None:
    parts = simple_batches(first_offset=500)
    log = write_segment(tmp_path, 501, parts)       # a batch below the base offset
    with LogSegment(log) as seg:
        res = seg.recover()
    assert res.reason == "offset out of range" and res.valid_bytes == 0
    assert isinstance(res.error, CorruptDataError)
    far = write_segment(tmp_path, 0, [v2_batch(2**31, [(1, None, b"x", [])])])
    with LogSegment(far) as seg:
        assert seg.recover().reason == "offset out of range"


# -- recovery ----------------------------------------------------------------------------------


def three(tmp_path: Path, tail: bytes = b"", damage=None) -> tuple[Path, list[bytes]]:
    parts = simple_batches(first_offset=0, n_batches=3, per_batch=2)
    data = bytearray(b"".join(parts) + tail)
    if damage is not None:
        damage(data, parts)
    log = tmp_path / "00000000000000000000.log"
    log.write_bytes(bytes(data))
    return log, parts


def test_recover_torn_last_batch(tmp_path: Path) -> None:
    parts = simple_batches(n_batches=3, per_batch=2)
    full = b"".join(parts)
    for cut in (1, 10, len(parts[2]) - 12, len(parts[2]) - 1):
        (tmp_path / str(cut)).mkdir()     # a new file each time: Windows keeps maps locked
        log = tmp_path / str(cut) / "00000000000000000000.log"
        log.write_bytes(full[: len(full) - cut])
        with LogSegment(log) as seg:
            assert [b.base_offset for b in seg] == [0, 2]   # stops quietly at the torn batch
            res = seg.recover()
        good = len(parts[0]) + len(parts[1])
        assert (res.valid_bytes, res.last_offset, res.batches, res.records) == (good, 3, 2, 4)
        assert res.reason == "incomplete batch" and not res.ok
        assert isinstance(res.error, TruncatedError)
        assert res.truncated_bytes == len(parts[2]) - cut


def test_recover_crc_corrupted_in_the_middle(tmp_path: Path) -> None:
    def flip(data: bytearray, parts: list[bytes]) -> None:
        data[len(parts[0]) + len(parts[1]) - 3] ^= 0x40     # a value byte of batch 2
    log, parts = three(tmp_path, damage=flip)
    with LogSegment(log) as seg:
        batches = list(seg)
        assert len(batches) == 3                        # the structure is intact
        assert [b.validate_crc() for b in batches] == [True, False, True]
        with pytest.raises(ChecksumError):
            batches[1].check_crc()
        res = seg.recover()
    assert res.reason == "checksum mismatch" and isinstance(res.error, ChecksumError)
    assert (res.valid_bytes, res.last_offset, res.batches) == (len(parts[0]), 1, 1)
    assert res.truncated_bytes == len(parts[1]) + len(parts[2])
    assert "truncate at position" in res.summary()


@pytest.mark.parametrize("tail, reason", [
    (b"garbage!" * 5, "incomplete batch"),                     # length reads as ~1.7 GB
    (struct.pack(">qi", 6, 5) + b"xxxxx", "corrupt batch"),    # length below any minimum
    (struct.pack(">qiib", 6, 60, 0, 7) + bytes(56), "corrupt batch"),   # magic 7
    (bytes(4096), "zero-filled tail"),                          # preallocated, then a crash
    (bytes(5), "incomplete batch"),        # too short to tell from a torn batch start
])
def test_recover_garbage_tail(tmp_path: Path, tail: bytes, reason: str) -> None:
    log, parts = three(tmp_path, tail=tail)
    with LogSegment(log) as seg:
        res = seg.recover()
    assert res.reason == reason
    assert res.valid_bytes == sum(map(len, parts)) and res.last_offset == 5
    assert res.truncated_bytes == len(tail)


def test_recover_deep_finds_bad_records(tmp_path: Path) -> None:
    parts = simple_batches(n_batches=2, per_batch=2)
    bad = bytearray(parts[1])
    struct.pack_into(">i", bad, 57, 3)        # claims 3 records, holds 2; CRC fixed to match
    fix_crc(bad)
    log = write_segment(tmp_path, 0, [parts[0], bytes(bad)])
    with LogSegment(log) as seg:
        assert seg.recover().ok                # the broker's check passes...
        res = seg.recover(deep=True)           # ...decoding the records does not
    assert res.reason == "bad record" and isinstance(res.error, KcodecError)
    assert (res.valid_bytes, res.last_offset) == (len(parts[0]), 1)


# -- indexes that lie --------------------------------------------------------------------------


def test_broken_indexes_do_not_change_answers(tmp_path: Path) -> None:
    parts = simple_batches(n_batches=20, per_batch=3)
    data = b"".join(parts)
    batches, _ = shallow_scan(data)
    bad_index = index_bytes([(5, 7), (30, 10**6), (40, batches[10].position)], 0)  # mid-batch,
    bad_time = timeindex_bytes([(1_700_000_000_300, 55)], 0)     # past end, wrong batch
    log = write_segment(tmp_path, 0, parts, index=bad_index, timeindex=bad_time)
    with LogSegment(log) as seg, LogSegment(log, indexes=False) as bare:
        for off in range(0, 62):
            a, b = seg.find_offset(off), bare.find_offset(off)
            assert (a and a.position) == (b and b.position), off
        for ts in range(1_700_000_000_000 - 5, 1_700_000_000_000 + 600, 7):
            assert seg.find_timestamp(ts) == bare.find_timestamp(ts), ts
        problems = seg.verify_indexes()
    assert any("no batch at position 7" in p for p in problems)
    assert any("beyond the log size" in p for p in problems)
    assert any("last offset" in p for p in problems)
    assert any(".timeindex" in p for p in problems)


def test_index_from_build_indexes_round_trips(tmp_path: Path) -> None:
    parts = simple_batches(n_batches=200, per_batch=5)
    log = write_segment(tmp_path, 0, parts)
    with LogSegment(log) as seg:
        idx, tidx = seg.build_indexes(interval_bytes=1024)
        expected_o, expected_t = broker_index_entries(shallow_scan(log.read_bytes())[0], 1024)
        assert [tuple(e) for e in idx] == expected_o and len(idx) > 10
        assert [tuple(e) for e in tidx] == expected_t
    log.with_suffix(".index").write_bytes(idx.to_bytes())
    log.with_suffix(".timeindex").write_bytes(tidx.to_bytes())
    with LogSegment(log) as seg:
        assert seg.verify_indexes() == []
        assert isinstance(seg.offset_index, OffsetIndex) and isinstance(seg.time_index, TimeIndex)
        assert seg.find_offset(777).base_offset == 775


# -- life cycle and bad input ------------------------------------------------------------------


def test_close_and_context_manager(tmp_path: Path) -> None:
    log = write_segment(tmp_path, 0, simple_batches())
    seg = LogSegment(log)
    kept = next(iter(seg))
    with seg:
        assert not seg.closed
    assert seg.closed
    with pytest.raises(ValueError):
        _ = seg.buffer
    with pytest.raises(ValueError):
        list(seg)
    seg.close()                                # idempotent
    assert [r.offset for r in kept] == [0, 1]  # a batch kept past close stays readable
    del kept


def test_unreadable_index_is_reported_not_fatal(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    log = write_segment(tmp_path, 0, simple_batches(), index=b"\x00" * 8)

    def refuse(cls, path, base_offset=None):
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(OffsetIndex, "open", classmethod(refuse))
    with LogSegment(log) as seg:
        assert seg.offset_index is None and seg.find_offset(3).base_offset == 2
        assert "Permission denied" in seg.verify_indexes()[0]


def test_index_that_is_a_directory_is_ignored(tmp_path: Path) -> None:
    log = write_segment(tmp_path, 0, simple_batches())
    log.with_suffix(".index").mkdir()
    with LogSegment(log) as seg:
        assert seg.offset_index is None and seg.index_errors == []
        assert seg.recover().ok


def test_read_instead_of_map(tmp_path: Path) -> None:
    parts = simple_batches(n_batches=5)
    log = write_segment(tmp_path, 0, parts)
    with LogSegment(log) as mapped, LogSegment(log, use_mmap=False) as read:
        assert read._map is None and mapped._map is not None
        assert [(b.position, b.base_offset) for b in read] == \
            [(b.position, b.base_offset) for b in mapped]
        assert read.recover() == mapped.recover()
        assert read.find_timestamp(1_700_000_000_045) == mapped.find_timestamp(1_700_000_000_045)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes are POSIX")
def test_pipe(tmp_path: Path) -> None:
    import threading

    data = b"".join(simple_batches(first_offset=70, n_batches=3))
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)

    def feed() -> None:
        with open(fifo, "wb") as w:
            w.write(data)

    t = threading.Thread(target=feed)
    t.start()
    with LogSegment(fifo) as seg:              # not a regular file: read, not mapped
        assert seg.size == len(data) and seg.base_offset == 70
        assert [b.base_offset for b in seg] == [70, 72, 74] and seg.recover().ok
    t.join()


def test_missing_and_odd_files(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        LogSegment(tmp_path / "nope.log")
    with pytest.raises(IsADirectoryError):
        LogSegment(tmp_path)
    with pytest.raises(ValueError):
        with LogSegment(write_segment(tmp_path, 0, simple_batches())) as seg:
            seg.batches(10**9)


def tracked_recovery(seg: LogSegment, deep: bool = True) -> RecoveryResult:
    """recover() the slow way, batch by batch through RecoveryTracker (what dump-log uses;
    recover() itself inlines it and skips valid v2 runs with the segscan fast path)."""
    track = seg.tracker()
    try:
        for b in seg.batches(0):
            if track.check(b) is not None:
                break
            if deep:
                try:
                    list(b)
                except KcodecError as exc:
                    track.fail(exc, "bad record")
                    break
            track.accept(b)
    except KcodecError as exc:
        track.fail(exc)
    return track.result()


def same_result(a: RecoveryResult, b: RecoveryResult) -> bool:
    return (dataclasses.replace(a, error=None) == dataclasses.replace(b, error=None)
            and type(a.error) is type(b.error) and str(a.error) == str(b.error))


def fuzz_segments(tmp_path: Path, seed: int, rounds: int, cli: bool) -> None:
    """Mutate and cut a segment of every magic and codec; every API (and dump-log) must
    finish with a result or a kcodec error, and dump-log's exit code must agree with
    recover(deep=True)."""
    rng = random.Random(seed)
    parts = (simple_batches(n_batches=4, per_batch=3)
             + [v2_batch(12 + c, [(1, b"z", b"q" * 300, [])], codec=c) for c in (1, 2, 3, 4)]
             + [legacy_message(1, 17, 5, b"k", b"v" * 100, codec=1),
                legacy_message(0, 18, None, b"k", b"v", codec=2)])
    base = b"".join(parts)
    for i in range(rounds):
        (tmp_path / str(i)).mkdir()       # a new file each time: Windows keeps maps locked
        log = tmp_path / str(i) / "00000000000000000000.log"
        data = bytearray(base)
        for _ in range(rng.randint(1, 6)):
            data[rng.randrange(len(data))] = rng.randrange(256)
        if rng.random() < 0.3:
            del data[rng.randrange(len(data)):]
        log.write_bytes(bytes(data))
        with LogSegment(log) as seg:
            res = seg.recover(deep=True)
            assert 0 <= res.valid_bytes <= len(data)
            assert same_result(res, tracked_recovery(seg))
            assert same_result(seg.recover(), tracked_recovery(seg, deep=False))
            try:
                for b in seg:
                    list(b)
            except KcodecError:
                pass
            for off in (0, 5, 13, 17):
                try:
                    seg.find_offset(off)
                    seg.find_timestamp(off)
                except KcodecError:
                    pass
            seg.build_indexes(100)
            seg.verify_indexes()
        if cli:
            from kcodec.cli import main

            with contextlib.redirect_stdout(io.StringIO()):
                code = main(["dump-log", "--records", str(log)])
            assert code == (0 if res.ok else 1)
            buf = io.StringIO()
            with contextlib.redirect_stdout(buf):
                main(["dump-log", "--verify", "--json", str(log)])
            summary = json.loads(buf.getvalue().splitlines()[-1])
            assert summary["type"] == "summary", buf.getvalue()
            assert (summary["truncate_at"], summary["last_valid_offset"], summary["reason"]) \
                == (res.valid_bytes, res.last_offset, res.reason)


def test_mutated_segments_never_crash(tmp_path: Path) -> None:
    fuzz_segments(tmp_path, 1234, 150, cli=False)


@pytest.mark.slow
def test_mutated_segments_never_crash_long(tmp_path: Path) -> None:
    fuzz_segments(tmp_path, 99, 1500, cli=True)
