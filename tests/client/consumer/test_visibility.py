"""Client pieces without a broker: transaction filtering, control batches, column trimming."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from kcodec.client.consumer.visibility import Fetched as _Fetched
from kcodec.client.consumer.visibility import decode as _decode
from kcodec.client.consumer.visibility import trim_columns as _trim_columns
from kcodec.client.structs import TopicPartition
from kcodec.records import RecordBatchBuilder
from kcodec.records.header import next_offset

TP = TopicPartition("t", 0)


def _batch(base: int, values: list, pid: int = -1, txn: bool = False) -> bytes:
    b = RecordBatchBuilder(base_offset=base, producer_id=pid, producer_epoch=0 if pid >= 0 else -1,
                           base_sequence=0 if pid >= 0 else -1, is_transactional=txn)
    for v in values:
        b.append(None, v, None, 1000)
    return b.build()


def _marker(base: int, pid: int, commit: bool) -> bytes:
    b = RecordBatchBuilder(base_offset=base, producer_id=pid, producer_epoch=0, base_sequence=-1,
                           is_transactional=True, is_control=True)
    b.append_control(1 if commit else 0, 0, 1000)
    return b.build()


def _log() -> tuple[bytes, list]:
    """0-1 plain, 2-3 txn pid 7 (aborted, marker 4), 5-6 txn pid 8 (committed, marker 7), 8 plain."""
    blob = (_batch(0, [b"a", b"b"]) + _batch(2, [b"x1", b"x2"], 7, True) + _marker(4, 7, False)
            + _batch(5, [b"c1", b"c2"], 8, True) + _marker(7, 8, True) + _batch(8, [b"z"]))
    return blob, [SimpleNamespace(producer_id=7, first_offset=2)]


def test_read_committed_drops_aborted_and_hides_markers() -> None:
    blob, aborted = _log()
    recs, nxt = _decode(_Fetched(TP, 0, blob, aborted, 0), 0, True, True)
    assert [r.value for r in recs] == [b"a", b"b", b"c1", b"c2", b"z"]
    assert nxt == 9 and next_offset(blob, 0) == 9


def test_read_uncommitted_keeps_aborted_hides_markers() -> None:
    blob, aborted = _log()
    recs, _ = _decode(_Fetched(TP, 0, blob, aborted, 0), 0, True, False)
    assert [r.value for r in recs] == [b"a", b"b", b"x1", b"x2", b"c1", b"c2", b"z"]
    assert [r.offset for r in recs] == [0, 1, 2, 3, 5, 6, 8]


def test_position_inside_a_batch() -> None:
    blob, aborted = _log()
    recs, nxt = _decode(_Fetched(TP, 0, blob, aborted, 0), 6, True, False)
    assert [r.offset for r in recs] == [6, 8] and nxt == 9


def test_trailing_partial_batch_is_ignored() -> None:
    blob, _ = _log()
    cut = blob + _batch(9, [b"late"])[:30]
    recs, nxt = _decode(_Fetched(TP, 0, cut, None, 0), 0, True, False)
    assert len(recs) == 7 and nxt == 9


@pytest.mark.arrow
def test_trim_columns_shares_and_drops_rows() -> None:
    from kcodec.records import decode_columns

    b = RecordBatchBuilder(base_offset=10)
    for i in range(6):
        b.append(None if i == 4 else b"k%d" % i, b"v%d" % i, [("h", b"%d" % i)], 2000 + i)
    cols = decode_columns(b.build())
    t = _trim_columns(cols, 13)
    rows = t.to_pylist()
    assert [r["offset"] for r in rows] == [13, 14, 15]
    assert [r["key"] for r in rows] == [b"k3", None, b"k5"]
    assert [r["headers"] for r in rows] == [[("h", b"3")], [("h", b"4")], [("h", b"5")]]
    arrow = t.to_arrow().to_pylist()
    assert [(r["offset"], r["key"], r["value"]) for r in arrow] == \
        [(r["offset"], r["key"], r["value"]) for r in rows]
    assert [r["headers"] for r in arrow] == [[{"key": "h", "value": b"%d" % i}] for i in (3, 4, 5)]
    assert len(_trim_columns(cols, 100)) == 0


@pytest.mark.parametrize("bad", [b"\x00" * 11, b"\x00" * 8 + b"\x00\x00\x00\x01" + b"\x00" * 5])
def test_next_offset_on_garbage_does_not_raise(bad: bytes) -> None:
    assert next_offset(bad, 5) == 5


def _engine(read_committed: bool):
    import asyncio

    from kcodec.client.config import ConsumerConfig
    from kcodec.client.consumer.engine import ConsumerEngine

    cfg = ConsumerConfig(bootstrap_servers="127.0.0.1:1",
                         isolation_level="read_committed" if read_committed else "read_uncommitted")
    loop = asyncio.new_event_loop()
    eng = ConsumerEngine(cfg, loop)
    eng.set_assignment([TP])
    return eng, loop


def _feed(eng, blob: bytes, aborted, position: int = 0) -> None:
    eng.subs.states[TP].position = eng.subs.states[TP].fetch_position = position
    eng.fetcher.buffer.append(_Fetched(TP, position, blob, aborted, eng.subs.states[TP].epoch))


@pytest.mark.parametrize("read_committed", [True, False])
@pytest.mark.parametrize("position", [0, 3, 6])
def test_poll_and_poll_columns_agree_on_transactions(read_committed: bool, position: int) -> None:
    """The same records, offsets and next position from poll() and poll_columns():
    markers hidden always, aborted transactions dropped only under read_committed."""
    blob, aborted = _log()
    eng, loop = _engine(read_committed)
    try:
        _feed(eng, blob, aborted, position)
        rows = eng.fetcher.take(1000)[TP]
        pos_rows = eng.subs.states[TP].position
        _feed(eng, blob, aborted, position)
        cols = eng.fetcher.take_columns()[TP]
        pos_cols = eng.subs.states[TP].position
    finally:
        loop.close()
    want = [(0, b"a"), (1, b"b"), (2, b"x1"), (3, b"x2"), (5, b"c1"), (6, b"c2"), (8, b"z")]
    if read_committed:
        want = [w for w in want if not w[1].startswith(b"x")]
    want = [w for w in want if w[0] >= position]
    assert [(r.offset, r.value) for r in rows] == want
    assert list(zip(cols.offset.tolist(), cols.value.to_pylist(), strict=False)) == want
    assert pos_rows == pos_cols == 9


def test_poll_columns_blob_of_only_aborted_and_markers() -> None:
    """Nothing visible: no entry for the partition, but the position moves past the blob."""
    blob = _batch(2, [b"x1", b"x2"], 7, True) + _marker(4, 7, False)
    aborted = [SimpleNamespace(producer_id=7, first_offset=2)]
    eng, loop = _engine(True)
    try:
        _feed(eng, blob, aborted, 2)
        assert eng.fetcher.take_columns() == {}
        assert eng.subs.states[TP].position == 5
        _feed(eng, blob, aborted, 2)
        assert eng.fetcher.take(100) == {} and eng.subs.states[TP].position == 5
    finally:
        loop.close()


def test_consumer_record_is_a_record() -> None:
    """One record type for the consumer: iteration's ConsumerRecord is the Record poll
    returns, naming its topic and partition; the named tuple it was still reads, warning."""
    import warnings

    from kcodec.client import ConsumerRecord
    from kcodec.records import Record, iter_batches

    (src,) = [r for b in iter_batches(_batch(4, [b"v"])) for r in b]
    r = ConsumerRecord("t", 2, src.offset, src.timestamp, src.timestamp_type, src.key,
                       src.value, src.headers, src.attributes)
    assert isinstance(r, Record) and Record.__eq__(r, src)
    assert (r.topic, r.partition, r.offset, r.value, r.headers) == ("t", 2, 4, b"v", [])
    assert r == ConsumerRecord("t", 2, 4, src.timestamp, src.timestamp_type, None, b"v", [])
    assert r != ConsumerRecord("t", 3, 4, src.timestamp, src.timestamp_type, None, b"v", [])
    assert "topic='t', partition=2, offset=4" in repr(r)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        topic, partition, offset, *_ = r
        assert (topic, partition, offset, r[6], len(r)) == ("t", 2, 4, b"v", 8)
        assert r._asdict()["value"] == b"v"
        assert r == ("t", 2, 4, src.timestamp, src.timestamp_type, None, b"v", [])
    assert len(seen) == 5 and all(w.category is DeprecationWarning for w in seen)
    assert "use its attributes" in str(seen[0].message)
    assert seen[0].filename == __file__
