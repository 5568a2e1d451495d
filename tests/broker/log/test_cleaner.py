"""Log compaction: cleanup.policy=compact (and compact,delete) keeps the last record per key.

Unit tests run the cleaner on memory and disk logs; the end-to-end test has confluent-kafka
(librdkafka) produce to and read back a compacted topic on the kcodec broker, gaps and all.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from kcodec.broker.log import InvalidRecord, LogConfig, LogManager, PartitionLog
from kcodec.records import LogSegment, RecordBatchBuilder, iter_batches

NOW = 1_700_000_100_000
DAY = 86_400_000


def batch(pairs: list[tuple[bytes | None, bytes | None]], codec: int = 0, ts: int = NOW,
          **kw: object) -> bytes:
    b = RecordBatchBuilder(compression=codec, **kw)
    for i, (k, v) in enumerate(pairs):
        b.append(k, v, timestamp=ts + i, headers=[("h", b"%d" % i)])
    return bytes(b.build())


def records(log: PartitionLog) -> list[tuple[int, bytes | None, bytes | None]]:
    data = log.read(log.log_start_offset, 1 << 30)
    out = []
    offset = log.log_start_offset
    while data:
        got = [(r.offset, r.key, r.value) for b in iter_batches(data) for r in b if r.offset >= offset]
        out += got
        offset = max((o for o, _, _ in got), default=offset) + 1
        last = list(iter_batches(data))[-1]
        offset = max(offset, last.last_offset + 1)
        data = log.read(offset, 1 << 30) if offset < log.log_end_offset else b""
    return out


def compacted_log(root: Path | None, policy: str = "compact", **cfg: int) -> tuple[LogManager, PartitionLog]:
    mgr = LogManager(root)
    mgr.open()
    one = len(batch([(b"k0", b"x" * 10)] * 4))
    settings: dict = {"segment_bytes": one * 2 + 10, **cfg}
    log = mgr.create("t", 0, LogConfig(cleanup_policy=policy, **settings))
    return mgr, log


def roll(log: PartitionLog) -> None:
    """Append filler batches (keys of their own) until a new segment starts."""
    n = len(log.segments)
    i = 0
    while len(log.segments) == n:
        log.append(batch([(b"filler%d" % i, b"f")]), now_ms=NOW)
        i += 1


def fill(log: PartitionLog) -> None:
    """Offsets 0-15 in 4-record batches, keys k0-k3; k1's last is a tombstone (offset 13)."""
    for r in range(4):
        pairs: list[tuple[bytes | None, bytes | None]] = [
            (b"k%d" % i, b"r%d-%s" % (r, b"x" * 8)) for i in range(4)]
        if r == 3:
            pairs[1] = (b"k1", None)
        log.append(batch(pairs, codec=r % 2), now_ms=NOW)


@pytest.mark.parametrize("disk", [False, True])
def test_keeps_the_last_record_per_key_with_offsets_and_gaps(tmp_path: Path, disk: bool) -> None:
    mgr, log = compacted_log(tmp_path if disk else None)
    fill(log)
    log.append(batch([(b"k0", b"active")]), now_ms=NOW)         # offset 16, the active segment
    assert [s.base_offset for s in log.segments] == [0, 8, 16]
    before = records(log)
    stats = log.clean(NOW)
    assert stats.segments == 2 and stats.records == 12 and stats.tombstones == 0
    got = records(log)
    # segment 0 (offsets 0-7): every key has a later record: empty. segment 8 keeps the last
    # of each key (12-15, the tombstone too: delete.retention.ms has not passed)
    assert [(o, k) for o, k, _ in got] == [(12, b"k0"), (13, b"k1"), (14, b"k2"), (15, b"k3"),
                                           (16, b"k0")]
    assert got[1][2] is None and got[-1][2] == b"active"
    assert [x for x in before if x[0] >= 12] == got                  # values unchanged
    assert log.log_start_offset == 0 and log.log_end_offset == 17
    # a read from a removed offset starts at the next one kept
    assert next(iter(next(iter_batches(log.read(3, 1 << 20))))).offset == 12
    # re-encoded batches: valid CRCs, the codec kept, headers kept, last offset delta kept
    for b in iter_batches(log.read(12, 1 << 20)):
        assert b.validate_crc()
    if disk:
        mgr.close()
        for seg in sorted((tmp_path / "t-0").glob("*.log")):
            with LogSegment(seg, indexes=True) as ls:
                assert ls.recover().ok and ls.verify_indexes() == []
        mgr = LogManager(tmp_path)
        mgr.open()
        log = mgr.get("t", 0)
        assert log is not None and records(log) == got
    # a day later the tombstone goes too; the next pass has nothing else to do
    stats = log.clean(NOW + 2 * DAY)
    assert stats.tombstones == 1
    assert [o for o, _, _ in records(log)] == [12, 14, 15, 16]
    mgr.close()


def test_partial_batch_keeps_its_producer_fields_and_last_offset_delta() -> None:
    mgr, log = compacted_log(None)
    log.append(batch([(b"a", b"1"), (b"b", b"1"), (b"c", b"1")], codec=1, producer_id=7,
                     producer_epoch=2, base_sequence=0), now_ms=NOW)
    log.append(batch([(b"a", b"2")], producer_id=7, producer_epoch=2, base_sequence=3), now_ms=NOW)
    roll(log)                                                     # 0-3 are inactive
    log.clean(NOW)
    b0 = next(iter_batches(log.read(0, 1 << 20)))
    assert b0.validate_crc() and b0.compression == 1
    assert (b0.base_offset, b0.last_offset, b0.producer_id, b0.producer_epoch,
            b0.base_sequence) == (0, 2, 7, 2, 0)
    assert [(r.offset, r.key, r.headers) for r in b0] == [(1, b"b", [("h", b"1")]),
                                                         (2, b"c", [("h", b"2")])]
    mgr.close()


def test_transactional_and_control_batches_are_kept_whole() -> None:
    mgr, log = compacted_log(None)
    log.append(batch([(b"k", b"txn")], producer_id=9, producer_epoch=0, base_sequence=0,
                     is_transactional=True), now_ms=NOW)
    marker = RecordBatchBuilder(is_control=True, is_transactional=True, producer_id=9,
                                producer_epoch=0)
    marker.append_control(1)
    log.append(marker.build(), now_ms=NOW)
    log.append(batch([(b"k", b"plain")]), now_ms=NOW)
    roll(log)
    log.clean(NOW)
    kinds = [(b.base_offset, b.is_transactional, b.is_control)
             for seg in log.segments for b in iter_batches(seg.read_span(0, seg.size))]
    assert kinds[:3] == [(0, True, False), (1, True, True), (2, False, False)]
    mgr.close()


def test_null_keys_are_refused_on_a_compacted_topic() -> None:
    mgr, log = compacted_log(None)
    with pytest.raises(InvalidRecord, match="without a key"):
        log.append(batch([(b"k", b"v"), (None, b"v")]), now_ms=NOW)
    assert log.log_end_offset == 0
    mgr.close()
    mgr = LogManager(None)
    mgr.open()
    plain = mgr.create("t", 0, LogConfig())
    plain.append(batch([(None, b"v")]), now_ms=NOW)         # fine where not compacted
    mgr.close()


@pytest.mark.parametrize("policy, deleted", [("compact", False), ("compact,delete", True),
                                             ("delete", True)])
def test_retention_deletes_only_with_the_delete_policy(policy: str, deleted: bool) -> None:
    mgr, log = compacted_log(None, policy, retention_ms=DAY)
    fill(log)
    log.append(batch([(b"k9", b"v")]), now_ms=NOW)
    log.run_retention(NOW + 10 * DAY)
    assert (log.log_start_offset > 0) == deleted
    if policy == "compact":          # the retention tick ran the cleaner (tombstone gone too)
        assert [o for o, _, _ in records(log)] == [12, 14, 15, 16]
    mgr.close()


def test_the_active_segment_is_never_cleaned() -> None:
    mgr, log = compacted_log(None, segment_bytes=1 << 20)
    fill(log)
    assert log.clean(NOW).segments == 0
    assert len(records(log)) == 16
    mgr.close()


@pytest.mark.peers
def test_confluent_kafka_reads_a_compacted_topic() -> None:
    ck = pytest.importorskip("confluent_kafka")
    from kcodec.broker import Cluster

    with Cluster(1, retention_check_s=0.2) as c:
        c.create_topic("c", 1, configs={"cleanup.policy": "compact", "segment.bytes": "2000",
                                        "delete.retention.ms": "0"})
        p = ck.Producer({"bootstrap.servers": c.bootstrap, "linger.ms": 0})
        for i in range(300):
            value = None if i in (250, 251) else b"v%03d" % i     # k0 and k1 deleted last
            p.produce("c", value, key=b"k%d" % (i % 10))
            p.flush(10)                                           # one batch per record
        latest = {}
        for i in range(300):
            latest[b"k%d" % (i % 10)] = i
        log = c.state.partition("c", 0).log
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and len(records(log)) > 60:
            time.sleep(0.1)
        con = ck.Consumer({"bootstrap.servers": c.bootstrap, "group.id": "g",
                           "auto.offset.reset": "earliest", "enable.auto.commit": False})
        con.subscribe(["c"])
        got = []
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            m = con.poll(0.2)
            if m is not None and not m.error():
                got.append((m.offset(), m.key(), m.value()))
                if m.offset() == 299:
                    break
        con.close()
    offsets = [o for o, _, _ in got]
    assert offsets == sorted(offsets) and offsets[-1] == 299
    assert len(got) < 100                                   # compacted: gaps were skipped
    final = {}
    for o, k, v in got:
        final[k] = (o, v)
    # every key's last value is there, at its own offset; k0 and k1 end as deletes or gone
    for k, i in latest.items():
        if i in (250, 251):
            assert k not in final or final[k][1] is None
        else:
            assert final[k] == (i, b"v%03d" % i)


def test_the_cleaner_runs_every_backoff_apart_from_retention() -> None:
    # Kafka's cleaner threads look for dirty compacted logs every log.cleaner.backoff.ms
    # (15 s), not at the retention check (5 min): librdkafka's 0077 waits 20-30 s
    from kcodec.broker import Cluster

    with Cluster(1, config={"log.cleaner.backoff.ms": 100}) as c:
        assert c.config["log.retention.check.interval.ms"] == 300000
        c.create_topic("c", 1, configs={"cleanup.policy": "compact", "segment.bytes": "200"})
        log = c.state.partition("c", 0).log
        for i in range(40):
            log.append(batch([(b"k%d" % (i % 2), b"v%03d" % i)]), now_ms=NOW + i)
        assert len(log.segments) > 2
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and len(records(log)) > 6:
            time.sleep(0.05)
        assert len(records(log)) <= 6
    with Cluster(1, config={"log.cleaner.enable": False, "log.cleaner.backoff.ms": 100}) as c:
        c.create_topic("c", 1, configs={"cleanup.policy": "compact", "segment.bytes": "200"})
        log = c.state.partition("c", 0).log
        for i in range(40):
            log.append(batch([(b"k%d" % (i % 2), b"v%03d" % i)]), now_ms=NOW + i)
        time.sleep(0.5)
        assert len(records(log)) == 40
