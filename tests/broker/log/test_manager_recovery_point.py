"""Recovery on start-up uses the recovery-point checkpoint (Kafka's rule).

Segments that end at or below a partition's recovery point were flushed before the
checkpoint was written: they are loaded from their batch headers without CRC checks, as
Kafka loads them. Everything past the point is recovered (CRCs, whole batches, torn tails
cut). No checkpoint (an unclean shutdown before any flush): everything is checked.
"""

from __future__ import annotations

import os
from pathlib import Path

from kcodec.broker.log import LogConfig, LogManager, PartitionLog
from kcodec.broker.log.manager import RECOVERY_CHECKPOINT, read_checkpoint
from kcodec.records import RecordBatchBuilder, iter_batches

NOW = 1_700_000_100_000


def batch(n: int = 2, tag: bytes = b"v") -> bytes:
    b = RecordBatchBuilder()
    for i in range(n):
        b.append(b"k%d" % i, tag + b"%d" % i, timestamp=NOW + i)
    return bytes(b.build())


def _dirty_close(mgr: LogManager) -> None:
    """Drop a manager as a crash would: file descriptors closed, nothing else."""
    for key in mgr.partitions():
        log = mgr.get(*key)
        assert log is not None
        for seg in log.segments:
            seg.close()
        log.closed = True


def _flip_last_byte(path: Path) -> None:
    """Damage the last record of the last batch: the header stays whole, the CRC breaks."""
    data = bytearray(path.read_bytes())
    data[-1] ^= 1
    path.write_bytes(bytes(data))


def _seg(root: Path, base: int) -> Path:
    return root / "t-0" / f"{base:020d}.log"


def _setup(tmp_path: Path, flush: bool) -> None:
    """Segments 0, 4, 8 (two 2-record batches each); optionally a flush (checkpoint at 12);
    then 12-15 written after it (segment 12), and a crash."""
    mgr = LogManager(tmp_path)
    mgr.open()
    log = mgr.create("t", 0, LogConfig(segment_bytes=len(batch()) * 2))
    for _ in range(6):
        log.append(batch(), now_ms=NOW)
    if flush:
        mgr.flush()
    for _ in range(2):
        log.append(batch(tag=b"L"), now_ms=NOW)
    assert [s.base_offset for s in log.segments] == [0, 4, 8, 12]
    _dirty_close(mgr)


def _open(tmp_path: Path) -> tuple[LogManager, PartitionLog]:
    mgr = LogManager(tmp_path)
    mgr.open()
    log = mgr.get("t", 0)
    assert log is not None
    return mgr, log


def test_segments_below_the_recovery_point_are_not_revalidated(tmp_path: Path) -> None:
    _setup(tmp_path, flush=True)
    assert read_checkpoint(str(tmp_path / RECOVERY_CHECKPOINT)) == {("t", 0): 12}
    _flip_last_byte(_seg(tmp_path, 0))       # below the point: trusted, as Kafka does
    _flip_last_byte(_seg(tmp_path, 12))      # past it: checked, the bad batch cut
    mgr, log = _open(tmp_path)
    assert not mgr.clean_shutdown
    assert [(s.base_offset, s.checked) for s in log.segments] == [
        (0, False), (4, False), (8, False), (12, True)]
    assert log.log_end_offset == 14
    assert _seg(tmp_path, 0).stat().st_size == len(batch()) * 2      # not truncated
    assert [r.recovery.valid_bytes for r in [log.segments[-1]]] == [len(batch())]
    assert list(mgr.recovered) == [("t", 0)]
    # the indexes of the trusted segments are rebuilt from the headers: reads work
    offsets = [r.offset for b in iter_batches(log.read(4, 1 << 20)) for r in b]
    assert offsets[:4] == [4, 5, 6, 7]
    # the recovery point now covers what was loaded
    assert read_checkpoint(str(tmp_path / RECOVERY_CHECKPOINT)) == {("t", 0): 14}
    mgr.close()


def test_without_a_checkpoint_every_segment_is_checked(tmp_path: Path) -> None:
    _setup(tmp_path, flush=False)
    assert ("t", 0) not in read_checkpoint(str(tmp_path / RECOVERY_CHECKPOINT))
    _flip_last_byte(_seg(tmp_path, 0))
    mgr, log = _open(tmp_path)
    assert all(s.checked for s in log.segments)
    assert log.log_end_offset == 2              # cut at the bad batch; later segments dropped
    assert not _seg(tmp_path, 4).exists()
    mgr.close()


def test_a_torn_tail_below_the_point_is_still_cut(tmp_path: Path) -> None:
    """A header walk that does not end at the end of the file falls back to recovery."""
    _setup(tmp_path, flush=True)
    path = _seg(tmp_path, 4)
    path.write_bytes(path.read_bytes()[:-5])
    mgr, log = _open(tmp_path)
    assert [s.checked for s in log.segments] == [False, True]
    assert log.log_end_offset == 6
    mgr.close()


def test_clean_shutdown_trusts_every_segment(tmp_path: Path) -> None:
    _setup(tmp_path, flush=True)
    mgr, log = _open(tmp_path)
    mgr.close()
    mgr, log = _open(tmp_path)
    assert mgr.clean_shutdown
    assert not any(s.checked for s in log.segments)
    assert log.log_end_offset == 16
    mgr.close()


def test_truncation_lowers_the_recovery_point_at_once(tmp_path: Path) -> None:
    mgr = LogManager(tmp_path)
    mgr.open()
    log = mgr.create("t", 0, LogConfig(segment_bytes=len(batch()) * 2))
    for _ in range(6):
        log.append(batch(), now_ms=NOW)
    mgr.flush()
    log.truncate_to(5)
    assert read_checkpoint(str(tmp_path / RECOVERY_CHECKPOINT)) == {("t", 0): 4}
    for _ in range(3):
        log.append(batch(tag=b"n"), now_ms=NOW)      # 4-9, not flushed
    _dirty_close(mgr)
    _flip_last_byte(_seg(tmp_path, 8))
    mgr, log = _open(tmp_path)
    assert [s.checked for s in log.segments] == [False, True, True]
    assert log.log_end_offset == 8
    assert os.path.exists(_seg(tmp_path, 8))
    mgr.close()
