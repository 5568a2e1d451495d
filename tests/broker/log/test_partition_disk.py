"""The broker's partition log on disk: segment files, indexes, checkpoints, recovery, crash."""

from __future__ import annotations

import os
import shutil
import signal
import struct
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

import kcodec
from kcodec.broker.log import LogConfig, LogManager, OffsetOutOfRange, PartitionLog
from kcodec.records import LogSegment, RecordBatchBuilder, iter_batches
from kcodec.records.index import OffsetIndex, TimeIndex
from tests.support import REPO
from tests.support.segments import META_LOG, TOPIC_LOG, reference

NOW = 1_700_000_100_000
ROOT = REPO
# the child processes import the very kcodec under test (a checkout or an installed wheel)
KCODEC_HOME = str(Path(kcodec.__file__).resolve().parent.parent)


def batch(n: int = 3, ts: int = 1_700_000_000_000, codec: int = 0, tag: bytes = b"v") -> bytes:
    b = RecordBatchBuilder(compression=codec)
    for i in range(n):
        b.append(b"k%d" % i, tag + b"%d" % i, timestamp=ts + i)
    return bytes(b.build())


def values(data: bytes) -> list[tuple[int, bytes | None]]:
    return [(r.offset, r.value) for b in iter_batches(data) for r in b]


def read_all(log: PartitionLog) -> list[tuple[int, bytes | None]]:
    out: list[tuple[int, bytes | None]] = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        data = log.read(offset, 1 << 20)
        assert data, offset
        got = values(data)
        out += [(o, v) for o, v in got if o >= offset]
        offset = got[-1][0] + 1
    return out


def part_dir(root: Path, topic: str = "t", p: int = 0) -> Path:
    return root / f"{topic}-{p}"


def test_files_in_kafka_layout(tmp_path: Path) -> None:
    one = len(batch(2))
    cfg = LogConfig(segment_bytes=one * 4, index_interval_bytes=one)
    with LogManager(tmp_path) as mgr:
        log = mgr.create("t", 0, cfg)
        for i in range(10):
            log.append(batch(2, ts=1_700_000_000_000 + 10 * i), now_ms=NOW)
        names = sorted(os.listdir(part_dir(tmp_path)))
        assert names == sorted(f"{b:020d}{s}" for b in (0, 8, 16)
                               for s in (".log", ".index", ".timeindex"))
        # only the active segment's index files are appended to; inactive ones are sealed
        assert [s.sealed for s in log.segments] == [True, True, False]
        mgr.flush()
    # kcodec's reader (and so Kafka's tools) agree with the files: batches, indexes
    for base in (0, 8, 16):
        with LogSegment(part_dir(tmp_path) / f"{base:020d}.log") as seg:
            assert seg.recover().ok
            assert seg.verify_indexes() == []
            assert seg.base_offset == base
            if base < 16:
                assert seg.offset_index is not None and len(seg.offset_index) == 1
                assert seg.time_index is not None and len(seg.time_index) >= 1
                b = seg.find_offset(base + 5)
                assert b.base_offset <= base + 5 <= b.last_offset
    ck = (tmp_path / "log-start-offset-checkpoint").read_text()
    assert ck == "0\n1\nt 0 0\n"
    assert (tmp_path / ".kafka_cleanshutdown").exists()


def test_reopen_keeps_everything(tmp_path: Path) -> None:
    one = len(batch(2))
    cfg = LogConfig(segment_bytes=one * 3, retention_ms=-1,
                    message_timestamp_type="LogAppendTime")
    mgr = LogManager(tmp_path)
    mgr.open()
    log = mgr.create("t", 0, cfg)
    mgr.create("other.topic-x", 3, LogConfig())
    for i in range(7):
        log.append(batch(2, tag=b"r%d-" % i), now_ms=NOW + i)
    assert log.delete_records_before(5) == 5
    before = read_all(log)
    ts = log.max_timestamp_offset()
    mgr.close()
    mgr = LogManager(tmp_path)
    mgr.open()
    assert mgr.clean_shutdown and mgr.recovered == {}
    assert mgr.partitions() == [("other.topic-x", 3), ("t", 0)]
    log = mgr.get("t", 0)
    assert log is not None
    assert log.config == cfg                       # topic configs come back
    assert log.log_start_offset == 5               # checkpointed
    assert log.log_end_offset == 14 == log.high_watermark
    assert read_all(log) == before
    assert log.max_timestamp_offset() == ts
    with pytest.raises(OffsetOutOfRange):
        log.read(3, 100)
    assert log.append(batch(1), now_ms=NOW).base_offset == 14
    mgr.close()


def _dirty_close(mgr: LogManager) -> None:
    """Drop a manager as a crash would: file descriptors closed, nothing else."""
    for key in mgr.partitions():
        log = mgr.get(*key)
        assert log is not None
        for seg in log.segments:
            seg.close()
        log.closed = True


@pytest.mark.parametrize("damage", ["cut", "garbage", "flip", "zeros"])
def test_recovery_truncates_bad_tail(tmp_path: Path, damage: str) -> None:
    mgr = LogManager(tmp_path)
    mgr.open()
    log = mgr.create("t", 0, LogConfig(index_interval_bytes=0))
    for i in range(5):
        log.append(batch(3, codec=i % 2, tag=b"b%d-" % i), now_ms=NOW)
    good = read_all(log)
    last_size = len(batch(3, codec=0, tag=b"b4-"))
    _dirty_close(mgr)
    path = part_dir(tmp_path) / f"{0:020d}.log"
    size = path.stat().st_size
    data = bytearray(path.read_bytes())
    if damage == "cut":               # a torn write: half the last batch
        data = data[: size - last_size // 2]
        expect = good[:12]
    elif damage == "garbage":         # bytes after the last batch
        data += b"\x00\x00\x00\x00\x00\x00\x00\x63\x00\x00\x00\x30garbage"
        expect = good
    elif damage == "flip":            # a bad CRC in the last batch
        data[size - 3] ^= 0xFF
        expect = good[:12]
    else:                             # a preallocated, zero-filled tail
        data += bytes(4096)
        expect = good
    path.write_bytes(bytes(data))
    mgr = LogManager(tmp_path)
    mgr.open()
    assert not mgr.clean_shutdown
    log = mgr.get("t", 0)
    assert log is not None
    assert ("t", 0) in mgr.recovered
    assert read_all(log) == expect
    assert log.log_end_offset == expect[-1][0] + 1
    with LogSegment(path, indexes=True) as seg:       # indexes rebuilt to match
        assert seg.recover().ok and seg.verify_indexes() == []
    res = log.append(batch(2), now_ms=NOW)
    assert res.base_offset == expect[-1][0] + 1
    mgr.close()
    with LogSegment(path) as seg:
        assert seg.recover().ok


def test_recovery_drops_segments_after_a_corrupt_one(tmp_path: Path) -> None:
    one = len(batch(2))
    mgr = LogManager(tmp_path)
    mgr.open()
    log = mgr.create("t", 0, LogConfig(segment_bytes=one * 2))
    for _ in range(6):
        log.append(batch(2), now_ms=NOW)
    assert [s.base_offset for s in log.segments] == [0, 4, 8]
    _dirty_close(mgr)
    mid = part_dir(tmp_path) / f"{4:020d}.log"
    data = bytearray(mid.read_bytes())
    data[-1] ^= 1                                   # the second batch of segment 4 is bad
    mid.write_bytes(bytes(data))
    mgr = LogManager(tmp_path)
    mgr.open()
    log = mgr.get("t", 0)
    assert log is not None
    assert log.log_end_offset == 6                  # up to the corrupt batch, no gap after
    assert [o for o, _ in read_all(log)] == list(range(6))
    assert not (part_dir(tmp_path) / f"{8:020d}.log").exists()
    assert not (part_dir(tmp_path) / f"{8:020d}.index").exists()
    mgr.close()


def test_retention_and_delete_topic_remove_files(tmp_path: Path) -> None:
    one = len(batch(1))
    with LogManager(tmp_path) as mgr:
        log = mgr.create("t", 0, LogConfig(segment_bytes=one, retention_bytes=one))
        for _ in range(4):
            log.append(batch(1), now_ms=NOW)
        assert mgr.run_retention(NOW) == 3
        assert sorted(os.listdir(part_dir(tmp_path)))[0].startswith(f"{3:020d}")
        assert (tmp_path / "log-start-offset-checkpoint").read_text() == "0\n1\nt 0 3\n"
        assert mgr.delete_topic("t") == [0]
        assert not part_dir(tmp_path).exists()
        assert "t" not in (tmp_path / "kcodec-topic-configs.json").read_text()


def test_truncate_to_on_disk(tmp_path: Path) -> None:
    one = len(batch(2))
    with LogManager(tmp_path) as mgr:
        log = mgr.create("t", 0, LogConfig(segment_bytes=one * 2, index_interval_bytes=0))
        for _ in range(5):
            log.append(batch(2), now_ms=NOW)
        log.truncate_to(7)                              # into the sealed segment 4
        assert log.log_end_offset == 6
        assert [s.base_offset for s in log.segments] == [0, 4]
        assert sorted(os.listdir(part_dir(tmp_path)))[-1].startswith(f"{4:020d}")
        assert log.append(batch(2), now_ms=NOW).base_offset == 6   # it is active again
        with LogSegment(part_dir(tmp_path) / f"{4:020d}.log") as seg:
            assert seg.verify_indexes() == [] and len(seg.offset_index or ()) == 1
    with LogManager(tmp_path) as mgr:
        log = mgr.get("t", 0)
        assert log is not None and log.log_end_offset == 8
        assert [s.base_offset for s in log.segments] == [0, 4]
        for base in (0, 4):
            with LogSegment(part_dir(tmp_path) / f"{base:020d}.log") as seg:
                assert seg.verify_indexes() == []


def test_flush_messages_fsyncs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    synced: list[str] = []
    real = os.fsync
    files: dict[int, str] = {}
    real_open = os.open

    def open_(path: str, flags: int, mode: int = 0o777) -> int:
        fd = real_open(path, flags, mode)
        files[fd] = os.path.basename(path)
        return fd

    def fsync(fd: int) -> None:
        synced.append(files.get(fd, "?"))
        real(fd)

    monkeypatch.setattr(os, "open", open_)
    monkeypatch.setattr(os, "fsync", fsync)
    with LogManager(tmp_path) as mgr:
        lazy = mgr.create("lazy", 0, LogConfig())
        synced.clear()
        lazy.append(batch(1), now_ms=NOW)
        assert synced == []                         # Kafka's default: no fsync per append
        eager = mgr.create("eager", 0, LogConfig(flush_messages=1))
        synced.clear()
        eager.append(batch(1), now_ms=NOW)
        assert sorted(synced) == [f"{0:020d}{s}" for s in (".index", ".log", ".timeindex")]
        timed = mgr.create("timed", 0, LogConfig(flush_ms=1000))
        synced.clear()
        timed.append(batch(1), now_ms=int(time.time() * 1000))
        assert synced == []
        mgr.run_retention(int(time.time() * 1000) + 2000)
        assert f"{0:020d}.log" in synced


@pytest.mark.reference
def test_opens_kafkas_metadata_log(tmp_path: Path) -> None:
    """Kafka's own KRaft metadata partition (4,814 batches, control batches among them)."""
    src = reference(META_LOG)
    dst = tmp_path / "__cluster_metadata-0"
    dst.mkdir()
    shutil.copy(src, dst / src.name)
    os.chmod(dst / src.name, 0o644)
    with LogManager(tmp_path) as mgr:
        log = mgr.get("__cluster_metadata", 0)
        assert log is not None and mgr.recovered == {}
        assert (log.log_start_offset, log.log_end_offset) == (0, 4929)
        assert len(read_all(log)) == 4929
        found = log.offset_for_timestamp(0)
        assert found is not None and found[0] == 0
    assert (dst / src.name).read_bytes() == src.read_bytes()     # nothing rewritten


@pytest.mark.reference
def test_opens_a_kafka_written_partition(tmp_path: Path) -> None:
    """A partition directory written by a real Kafka broker loads, reads and takes appends."""
    src = reference(TOPIC_LOG)
    dst = tmp_path / "TestTopicPatient-0"
    dst.mkdir()
    shutil.copy(src, dst / src.name)
    os.chmod(dst / src.name, 0o644)
    with LogManager(tmp_path) as mgr:
        log = mgr.get("TestTopicPatient", 0)
        assert log is not None and mgr.recovered == {}
        assert (log.log_start_offset, log.log_end_offset) == (0, 3)
        assert [o for o, _ in read_all(log)] == [0, 1, 2]
        assert log.append(batch(1), now_ms=NOW).base_offset == 3
    with LogSegment(dst / src.name) as seg:
        assert seg.recover().ok and seg.verify_indexes() == []


# -- the crash test ------------------------------------------------------------------------

_CHILD = textwrap.dedent("""
    import sys, time
    from kcodec.broker.log import LogConfig, LogManager
    from kcodec.records import RecordBatchBuilder
    mgr = LogManager(sys.argv[1]); mgr.open()
    log = mgr.create("crash", 0, LogConfig(segment_bytes=64 * 1024, index_interval_bytes=512))
    i = 0
    while True:
        b = RecordBatchBuilder(compression=i % 4)
        for j in range(1 + i % 5):
            b.append(b"k", b"payload-%d-%d" % (i, j) * (1 + i % 7), timestamp=1_700_000_000_000 + i)
        res = log.append(b.build(), now_ms=1_700_000_000_000 + i)
        # acknowledged: the append returned
        print("ack", i, res.base_offset, res.last_offset, flush=True)
        i += 1
""")


def test_crash_sigkill_then_recover(tmp_path: Path) -> None:
    """SIGKILL a process that appends and acknowledges; reopen: every acknowledged batch is
    there with a good CRC, and a torn tail write is truncated."""
    env = dict(os.environ, PYTHONPATH=KCODEC_HOME)
    child = subprocess.Popen([sys.executable, "-c", _CHILD, str(tmp_path)],
                             stdout=subprocess.PIPE, env=env, cwd=str(ROOT))
    assert child.stdout is not None
    acks: dict[int, tuple[int, int]] = {}
    deadline = time.monotonic() + 60
    try:
        while len(acks) < 600 and time.monotonic() < deadline:
            line = child.stdout.readline()
            if not line:
                break
            _, i, first, last = line.split()
            acks[int(i)] = (int(first), int(last))
    finally:
        child.send_signal(signal.SIGKILL)
        rest = child.stdout.read()              # acks printed before the kill still count
        child.wait()
    for line in rest.splitlines():
        parts = line.split()
        if len(parts) == 4:
            acks[int(parts[1])] = (int(parts[2]), int(parts[3]))
    assert len(acks) >= 600, "the child did not get going"
    pdir = part_dir(tmp_path, "crash")
    logs = sorted(pdir.glob("*.log"))
    assert len(logs) > 1                            # it rolled segments
    # a torn write at the tail: half of a batch, as a crash in the middle of a write leaves
    with open(logs[-1], "ab") as f:
        f.write(batch(5)[:40])
    mgr = LogManager(tmp_path)
    mgr.open()
    log = mgr.get("crash", 0)
    assert log is not None
    assert ("crash", 0) in mgr.recovered
    last_acked = max(last for _, last in acks.values())
    assert log.log_end_offset >= last_acked + 1
    got = {}
    offset = 0
    while offset < log.log_end_offset:
        data = log.read(offset, 1 << 20)
        for b in iter_batches(data):                # validates every CRC
            assert b.validate_crc()
            for r in b:
                got[r.offset] = r.value
            offset = b.last_offset + 1
    for i, (first, last) in acks.items():
        n = 1 + i % 5
        assert last - first + 1 == n
        for j in range(n):
            assert got[first + j] == b"payload-%d-%d" % (i, j) * (1 + i % 7)
    for p in sorted(pdir.glob("*.log")):
        with LogSegment(p) as seg:
            assert seg.recover().ok and seg.verify_indexes() == []
    assert log.append(batch(1), now_ms=NOW).base_offset == log.log_end_offset - 1
    mgr.close()


def test_index_files_parse(tmp_path: Path) -> None:
    with LogManager(tmp_path) as mgr:
        log = mgr.create("t", 0, LogConfig(index_interval_bytes=0))
        for i in range(4):
            log.append(batch(2, ts=NOW + i), now_ms=NOW)
    idx = OffsetIndex.open(part_dir(tmp_path) / f"{0:020d}.index")
    tix = TimeIndex.open(part_dir(tmp_path) / f"{0:020d}.timeindex")
    # an entry for each batch after the first (the index interval is 0): last offset and
    # position; the time index has the max timestamp so far and its offset
    one = len(batch(2))
    assert [tuple(e) for e in idx] == [(3, one), (5, 2 * one), (7, 3 * one)]
    assert [tuple(e) for e in tix] == [(NOW + 2, 3), (NOW + 3, 5), (NOW + 4, 7)]
    assert len(os.listdir(part_dir(tmp_path))) == 3     # one segment
    assert idx.problems() == [] and tix.problems() == []
    assert struct.calcsize(">ii") == idx.ENTRY_SIZE


def test_recovery_stops_at_offsets_going_back(tmp_path: Path) -> None:
    """A v2 CRC does not cover the base offset: a rewritten one ends the valid log."""
    with LogManager(tmp_path) as mgr:
        log = mgr.create("t", 0, LogConfig())
        for _ in range(3):
            log.append(batch(2), now_ms=NOW)
    path = part_dir(tmp_path) / f"{0:020d}.log"
    data = bytearray(path.read_bytes())
    one = len(batch(2))
    struct.pack_into(">q", data, 2 * one, 1)        # third batch claims offsets 1-2
    path.write_bytes(bytes(data))
    with LogManager(tmp_path) as mgr:
        log = mgr.get("t", 0)
        assert log is not None and log.log_end_offset == 4
        assert mgr.recovered[("t", 0)][0].reason == "offsets not increasing"
        assert path.stat().st_size == 2 * one


def test_leader_epochs_survive_a_restart(tmp_path: Path) -> None:
    with LogManager(tmp_path) as mgr:
        log = mgr.create("t", 0, LogConfig())
        for epoch in (1, 1, 4, 7):
            log.append(batch(2), now_ms=NOW, leader_epoch=epoch)
        assert log.leader_epochs() == [(1, 0), (4, 4), (7, 6)]
        log.delete_records_before(5)
    with LogManager(tmp_path) as mgr:
        log = mgr.get("t", 0)
        assert log is not None
        assert log.leader_epochs() == [(4, 5), (7, 6)]
        assert log.end_offset_for_epoch(4) == (4, 6)
        assert log.end_offset_for_epoch(7) == (7, 8)


def test_without_positional_io(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The seek-then-read/write fallback used where os.pread/pwrite do not exist (Windows)."""
    from kcodec.broker.log import segment as segment_mod

    monkeypatch.setattr(segment_mod, "_pwrite", segment_mod._seek_write)
    monkeypatch.setattr(segment_mod, "_pread", segment_mod._seek_read)
    monkeypatch.setattr(segment_mod, "_MMAP_ON_LOAD", False)
    one = len(batch(2))
    with LogManager(tmp_path) as mgr:
        log = mgr.create("t", 0, LogConfig(segment_bytes=one * 2))
        for i in range(5):
            log.append(batch(2, tag=b"w%d-" % i), now_ms=NOW)
        before = read_all(log)
        log.truncate_to(8)
    with LogManager(tmp_path) as mgr:
        log = mgr.get("t", 0)
        assert log is not None and read_all(log) == before[:8]


_SOAK_CHILD = textwrap.dedent("""
    import sys
    from kcodec.broker.log import LogConfig, LogManager
    from kcodec.records import RecordBatchBuilder
    mgr = LogManager(sys.argv[1]); mgr.open()
    cfg = LogConfig(segment_bytes=16 * 1024, retention_bytes=256 * 1024,
                    index_interval_bytes=256, flush_messages=int(sys.argv[2]))
    log = mgr.create("soak", 0, cfg)
    i = log.log_end_offset
    while True:
        b = RecordBatchBuilder(compression=i % 4)
        b.append(b"k", b"record-%d" % i, timestamp=1_700_000_000_000 + i)
        res = log.append(b.build(), now_ms=1_700_000_000_000 + i)
        print(res.base_offset, flush=True)
        if i % 50 == 0:
            mgr.run_retention(1_700_000_000_000 + i)
        i = res.base_offset + 1
""")


@pytest.mark.slow
def test_crash_soak_repeated_kills(tmp_path: Path) -> None:
    """Kill, reopen, check, continue: ten rounds, with rolling, retention and (half the
    rounds) an fsync per append; a torn write left at the tail before every restart."""
    import random

    rng = random.Random(7)
    env = dict(os.environ, PYTHONPATH=KCODEC_HOME)
    acked: set[int] = set()
    for round_ in range(10):
        child = subprocess.Popen(
            [sys.executable, "-c", _SOAK_CHILD, str(tmp_path), "1" if round_ % 2 else "1000000"],
            stdout=subprocess.PIPE, env=env, cwd=str(ROOT))
        assert child.stdout is not None
        want = rng.randint(50, 400)
        got = 0
        try:
            while got < want:
                line = child.stdout.readline()
                if not line:
                    break
                acked.add(int(line))
                got += 1
        finally:
            child.send_signal(signal.SIGKILL)
            rest = child.stdout.read()
            child.wait()
        acked.update(int(x) for x in rest.split())
        assert got == want, "the child stopped early"
        logs = sorted(part_dir(tmp_path, "soak").glob("*.log"))
        with open(logs[-1], "ab") as f:
            f.write(batch(3)[: rng.randint(1, 60)])
        mgr = LogManager(tmp_path)
        mgr.open()
        log = mgr.get("soak", 0)
        assert log is not None
        present = {o for o, v in read_all(log)}
        for o, v in read_all(log):
            assert v == b"record-%d" % o
        kept = {o for o in acked if o >= log.log_start_offset}
        assert kept <= present
        assert max(acked) < log.log_end_offset
        mgr.close()


class _Recorder:
    def __init__(self, events: list[tuple], topic: str) -> None:
        self.events, self.topic = events, topic

    def _note(self, what: str, seg: Any, *args: int) -> None:
        self.events.append((what, self.topic, seg.base_offset, *args))

    def on_open(self, seg: object) -> None:
        self._note("open", seg)

    def on_truncate(self, seg: object, offset: int) -> None:
        self._note("truncate", seg, offset)

    def on_delete(self, seg: object) -> None:
        self._note("delete", seg)

    def on_flush(self, seg: object) -> None:
        self._note("flush", seg)

    def on_close(self, seg: object) -> None:
        self._note("close", seg)


def test_segment_hooks(tmp_path: Path) -> None:
    """The place the aborted-transactions index plugs in: per-segment events."""
    events: list[tuple] = []
    one = len(batch(1))
    mgr = LogManager(tmp_path, segment_hooks=[lambda t, p: _Recorder(events, t)])
    mgr.open()
    log = mgr.create("t", 0, LogConfig(segment_bytes=one, retention_bytes=one))
    for _ in range(3):
        log.append(batch(1), now_ms=NOW)
    log.truncate_to(2)
    mgr.run_retention(NOW)
    mgr.flush()
    mgr.close()
    assert events == [("open", "t", 0), ("open", "t", 1), ("open", "t", 2),
                      ("truncate", "t", 2, 2),      # segment 2 emptied, kept as the end
                      ("delete", "t", 0),           # retention
                      ("flush", "t", 2),            # mgr.flush (1 was flushed at its roll)
                      ("flush", "t", 2), ("close", "t", 1), ("close", "t", 2)]
    events.clear()
    with LogManager(tmp_path, segment_hooks=[lambda t, p: _Recorder(events, t)]) as mgr:
        assert events == [("open", "t", 1), ("open", "t", 2)]
        assert mgr.get("t", 0).segments[0].file(".txnindex").endswith(  # type: ignore[union-attr]
            f"{1:020d}.txnindex")


def test_replica_gap_survives_a_restart(tmp_path: Path) -> None:
    leader = LogManager(None).create("t", 0, LogConfig())
    for _ in range(4):
        leader.append(batch(2), now_ms=NOW)
    with LogManager(tmp_path) as mgr:
        log = mgr.create("t", 0, LogConfig())
        log.append_as_follower(leader.read(0, 1))           # 0-1
        log.append_as_follower(leader.read(4, 1 << 20))     # 4-7: a gap (as compaction leaves)
        assert [s.base_offset for s in log.segments] == [0, 4]
        before = [o for o, _ in read_all(log)]
    with LogManager(tmp_path) as mgr:
        log = mgr.get("t", 0)
        assert log is not None and mgr.recovered == {}
        assert [o for o, _ in read_all(log)] == before == [0, 1, 4, 5, 6, 7]


def test_concurrent_checkpoints(tmp_path: Path) -> None:
    """Logs moving their start offsets from several threads at once share one checkpoint."""
    import threading

    with LogManager(tmp_path) as mgr:
        logs = [mgr.create("t", p, LogConfig()) for p in range(6)]
        for log in logs:
            for _ in range(30):
                log.append(batch(1), now_ms=NOW)
        errors: list[BaseException] = []

        def move(log: PartitionLog) -> None:
            try:
                for o in range(3, 31, 3):
                    log.delete_records_before(o)
            except BaseException as exc:  # noqa: BLE001 - reported below
                errors.append(exc)

        threads = [threading.Thread(target=move, args=(log,)) for log in logs]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert errors == []
    text = (tmp_path / "log-start-offset-checkpoint").read_text()
    assert text == "0\n6\n" + "".join(f"t {p} 30\n" for p in range(6))


def test_damaged_data_directory_files(tmp_path: Path) -> None:
    """Broken checkpoints and configs, stray files and directories: the logs still load."""
    with LogManager(tmp_path) as mgr:
        log = mgr.create("t", 0, LogConfig(retention_ms=-1))
        for _ in range(3):
            log.append(batch(1), now_ms=NOW)
        log.delete_records_before(2)
    (tmp_path / "log-start-offset-checkpoint").write_text("0\n5\nt 0 x\n")
    (tmp_path / "kcodec-topic-configs.json").write_text("{not json")
    (tmp_path / "stray.txt").write_text("hello")
    (tmp_path / "not-a-partition").mkdir()
    (tmp_path / "old-topic-0.abc-delete").mkdir()       # a deleted topic's leftovers
    (part_dir(tmp_path) / "notes.log.bak").write_text("x")
    (part_dir(tmp_path) / f"{99:020d}.index").write_bytes(b"\0" * 8)   # orphaned index
    with LogManager(tmp_path) as mgr:
        assert mgr.partitions() == [("t", 0)]
        log = mgr.get("t", 0)
        assert log is not None
        assert log.log_start_offset == 0               # the checkpoint was unreadable
        assert log.config == LogConfig()                # so was the config file
        assert [o for o, _ in read_all(log)] == [0, 1, 2]
    assert not (tmp_path / "old-topic-0.abc-delete").exists()
    assert not (part_dir(tmp_path) / f"{99:020d}.index").exists()
    assert (part_dir(tmp_path) / "notes.log.bak").exists()  # not ours: left alone
