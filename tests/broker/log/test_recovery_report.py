"""A log cut at start-up is reported: which partition, the segment, the offset it now ends
at, the bytes and later segments removed and the offsets lost; an ERROR when the cut falls
below the recovery point (flushed records lost), a WARNING for an unflushed tail; and the
node's metrics count it."""

from __future__ import annotations

from pathlib import Path

from kcodec.broker.log import LogConfig, LogManager
from kcodec.records import RecordBatchBuilder

NOW = 1_700_000_100_000


def batch(n: int = 2) -> bytes:
    b = RecordBatchBuilder()
    for i in range(n):
        b.append(b"k%d" % i, b"v%d" % i, timestamp=NOW + i)
    return bytes(b.build())


def _write(tmp_path: Path, flush: bool) -> None:
    """Segments 0, 4, 8 (two 2-record batches each), 12 records; a clean close (flushed)
    or a crash after the writes (nothing flushed, no checkpoint)."""
    mgr = LogManager(tmp_path)
    mgr.open()
    log = mgr.create("t", 0, LogConfig(segment_bytes=len(batch()) * 2))
    for _ in range(6):
        log.append(batch(), now_ms=NOW)
    if flush:
        mgr.close()
    else:
        for seg in log.segments:
            seg.close()
        log.closed = True


def _damage_length(path: Path, at: int = 0) -> None:
    """Make the batch-length field of the batch at ``at`` absurd (the header is damaged)."""
    data = bytearray(path.read_bytes())
    data[at + 8:at + 12] = (0x7FFFFFF0).to_bytes(4, "big")
    path.write_bytes(bytes(data))


def _seg(root: Path, base: int) -> Path:
    return root / "t-0" / f"{base:020d}.log"


def test_a_cut_below_the_recovery_point_is_an_error(tmp_path, caplog):
    _write(tmp_path, flush=True)
    size = _seg(tmp_path, 4).stat().st_size
    later = _seg(tmp_path, 8).stat().st_size
    _damage_length(_seg(tmp_path, 4), at=len(batch()))          # the second batch of 4
    caplog.set_level("WARNING", "kcodec.broker.log")
    mgr = LogManager(tmp_path)
    mgr.open()
    try:
        (cut,) = mgr.truncations
        assert (cut.topic, cut.partition, cut.offset, cut.recovery_point) == ("t", 0, 6, 12)
        assert cut.bytes_removed == size - len(batch()) and cut.segments_removed == 1
        assert cut.segment_bytes_removed == later and cut.lost_through == 11
        assert cut.below_recovery_point
        (rec,) = [r for r in caplog.records if r.name.startswith("kcodec.broker.log")]
        assert rec.levelname == "ERROR"
        text = rec.getMessage()
        for part in ("t-0", "00000000000000000004.log", "truncated to offset 6",
                     f"{size - len(batch())} bytes", f"{later} bytes", "offsets 6 to at least 11",
                     "recovery point was 12"):
            assert part in text, (part, text)
        assert mgr.get("t", 0).log_end_offset == 6
    finally:
        mgr.close()


def test_an_unflushed_torn_tail_is_a_warning(tmp_path, caplog):
    _write(tmp_path, flush=False)
    path = _seg(tmp_path, 8)
    path.write_bytes(path.read_bytes()[:-5])                      # a torn last batch
    caplog.set_level("WARNING", "kcodec.broker.log")
    mgr = LogManager(tmp_path)
    mgr.open()
    try:
        (cut,) = mgr.truncations
        assert cut.offset == 10 and not cut.below_recovery_point and cut.segments_removed == 0
        (rec,) = [r for r in caplog.records if r.name.startswith("kcodec.broker.log")]
        assert rec.levelname == "WARNING" and "truncated to offset 10" in rec.getMessage()
    finally:
        mgr.close()


def test_the_broker_metrics_count_truncations(tmp_path):
    from kcodec.broker import Cluster
    from kcodec.client import Producer

    with Cluster(1, data_dir=tmp_path) as c:
        c.create_topic("t", 1)
        with Producer(bootstrap_servers=c.bootstrap, linger_ms=0) as p:
            for i in range(3):
                p.send("t", b"v%d" % i).result(10)
                p.flush()
    (log,) = sorted((tmp_path / "logs" / "t-0").glob("*.log"))
    _damage_length(log, at=0)
    with Cluster(1, data_dir=tmp_path) as c:
        samples = {(n, tuple(sorted(tags.items()))): v
                   for g, n, tags, v, kind in c.nodes[0].metrics._logs()
                   if g == "kcodec.log:LogRecovery"}
        assert samples[("TruncatedPartitions", ())] == 1
        assert samples[("TruncatedBelowRecoveryPoint", ())] == 1
        assert samples[("TruncatedBytes", ())] > 0
        assert samples[("TruncatedAtOffset", (("partition", 0), ("topic", "t")))] == 0
