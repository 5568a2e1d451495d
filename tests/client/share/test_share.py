"""The share consumer (kcodec.client.share) against kcodec's broker: settings, the
acknowledgement batches, the async consumer, one blocking consumer shared by threads,
columns, the commit callback, gaps, and share sessions that the broker forgot."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from kcodec.broker import Cluster
from kcodec.client import AsyncShareConsumer, Producer, ShareConsumer, TopicPartition
from kcodec.client.share import ACCEPT, AcknowledgeType, ShareConsumerConfig, ShareStateError
from kcodec.client.share.acks import Acknowledgements, batches, runs
from kcodec.protocol import ErrorCode

TP = TopicPartition("t", 0)


def refuse_sessions(cluster, *codes: int) -> None:
    """The next ShareFetches are answered with these top-level errors, unhandled (as a
    broker that lost its share sessions would)."""
    from kcodec.protocol import ShareFetchResponse

    left = list(codes)

    def hook(req):
        return ShareFetchResponse(error_code=left.pop(0)) if left else None
    cluster.hook("ShareFetch", hook)


def produce(bootstrap: str, n: int, topic: str = "t") -> None:
    with Producer(bootstrap_servers=bootstrap) as p:
        for i in range(n):
            p.send(topic, value=b"v%05d" % i, partition=0)
        p.flush()


@pytest.fixture
def cluster():
    with Cluster(1) as c:
        c.create_topic("t", 1)
        c.share.configs.set("g", {"share.auto.offset.reset": "earliest"})
        yield c


# ---------------------------------------------------------------------- settings, batches
def test_settings_take_java_names_and_check_values() -> None:
    cfg = ShareConsumerConfig.from_kwargs({"group.id": "g", "share.acknowledgement.mode":
                                           "EXPLICIT", "share.acquire.mode": "record_limit",
                                           "max.poll.records": "7"})
    assert (cfg.share_acknowledgement_mode, cfg.share_acquire_mode, cfg.max_poll_records) == \
        ("explicit", "record_limit", 7)
    with pytest.raises(ValueError, match="needs a group_id"):
        ShareConsumerConfig()
    with pytest.raises(ValueError, match="share_acknowledgement_mode must be implicit or "
                                         "explicit, got 'manual'"):
        ShareConsumerConfig(group_id="g", share_acknowledgement_mode="manual")
    with pytest.raises(ValueError, match="share_acquire_mode must be batch_optimized or "
                                         "record_limit"):
        ShareConsumerConfig(group_id="g", share_acquire_mode="strict")
    with pytest.raises(ValueError, match="max_poll_records must be a positive integer"):
        ShareConsumerConfig(group_id="g", max_poll_records=0)
    with pytest.raises(ValueError, match="unknown ShareConsumerConfig property"):
        ShareConsumerConfig.from_kwargs(group_id="g", enable_auto_commit=True)


def test_acknowledgement_batches() -> None:
    assert batches({5: 1, 6: 1, 7: 1}) == [(5, 7, [1])]
    assert batches({5: 1, 6: 2, 9: 3}) == [(5, 6, [1, 2]), (9, 9, [3])]
    assert runs(range(10, 20), 1) == [(10, 19, [1])]
    assert runs([1, 2, 4], 3) == [(1, 2, [3]), (4, 4, [3])]
    assert runs([], 1) == []
    a = Acknowledgements()
    a.add(TP, [(10, 12, [1])])
    a.add_offsets(TP, [3, 2], AcknowledgeType.GAP)
    assert a.take() == {TP: [(2, 3, [0]), (10, 12, [1])]}
    assert not a


def test_records_received_but_not_yet_decoded_are_released_on_close() -> None:
    """An answer is decoded after the next fetch goes out; a close in between releases
    its records (they are the consumer's until then), and the late decode adds nothing."""
    from kcodec.client.share.fetcher import Delivery, ShareFetcher
    from kcodec.records import RecordBatchBuilder

    b = RecordBatchBuilder(base_offset=10)
    for i in range(3):
        b.append(None, b"v%d" % i)
    loop = asyncio.new_event_loop()
    try:
        f = ShareFetcher(ShareConsumerConfig(group_id="g"), loop, None, None)  # type: ignore[arg-type]
        kept, late = Delivery(TP, b.build(), [(10, 12, 1)]), Delivery(TP, b.build(), [(10, 12, 1)])
        f.undecoded += [kept, late]
        f.decoding = 6
        f._decoded([kept])                        # decoded: in the buffer
        assert f.buffered == 3 and f.decoding == 3
        assert f.drop_unpolled() == {TP: [10, 11, 12, 10, 11, 12]}
        f._decoded([late])                        # after the close: not buffered
        assert (f.buffered, f.decoding, list(f.buffer)) == (0, 0, [])
    finally:
        loop.close()


def test_share_records_from_decoded_records(twin, impl) -> None:
    """Both twins make the same ShareRecords from a batch's records, and refuse the same
    wrong inputs with the same errors. The compiled ones, like its Records, are not
    tracked by the cyclic GC, nor are their headers lists (a consumer makes millions)."""
    import gc

    from kcodec.errors import EncodeTypeError

    rec, share = twin("_record"), twin("share")
    got = share.share_records([rec.Record(7, 1000, 0, b"k", b"v", [("h", b"1")]),
                               rec.Record(8, 1001, 1, None, b"w", [])], "t", 2, 3)
    assert [type(s) for s in got] == [share.ShareRecord] * 2
    a, b = got
    assert isinstance(a, rec.Record)
    if impl == "cython":
        assert not gc.is_tracked(a) and not gc.is_tracked(a.headers)
    assert (a.topic, a.partition, a.offset, a.timestamp, a.timestamp_type, a.key, a.value,
            a.headers, a.delivery_count) == ("t", 2, 7, 1000, 0, b"k", b"v", [("h", b"1")], 3)
    assert (b.offset, b.timestamp_type, b.key, b.checksum, b.validate_crc()) == (8, 1, None,
                                                                                 None, True)
    assert a == share.ShareRecord("t", 2, 7, 1000, 0, b"k", b"v", [("h", b"1")], 0, 3)
    assert a != share.ShareRecord("t", 2, 7, 1000, 0, b"k", b"v", [("h", b"1")], 0, 4)
    assert repr(b) == ("ShareRecord(topic='t', partition=2, offset=8, delivery_count=3, "
                       "key=None, value=b'w')")
    assert share.share_records([], "t", 0, 1) == []
    assert share.share_records(iter([rec.Record(9, 0, 0, None, None, [])]), "t", 0, 1) == [
        share.ShareRecord("t", 0, 9, 0, 0, None, None, [], 0, 1)]
    with pytest.raises(EncodeTypeError, match="records must be an iterable of Record "
                                              "objects, not int"):
        share.share_records(5, "t", 0, 1)
    with pytest.raises(EncodeTypeError, match="records must hold Record objects, not int"):
        share.share_records([rec.Record(1, 0, 0, None, None, []), 5], "t", 0, 1)


# ---------------------------------------------------------------------- consumers
def test_async_share_consumer(cluster) -> None:
    produce(cluster.bootstrap, 50)

    async def go() -> list:
        async with AsyncShareConsumer("t", bootstrap_servers=cluster.bootstrap, group_id="g",
                                      share_acknowledgement_mode="explicit") as c:
            got: list = []
            while len(got) < 50:
                recs = await c.poll(1.0)
                for r in recs:
                    c.acknowledge(r, ACCEPT)
                got += recs
            assert await c.commit_sync() == {TP: None}
            assert c.assignment() == {TP}
            return got
    got = asyncio.run(go())
    assert [r.value for r in got] == [b"v%05d" % i for i in range(50)]
    assert cluster.share.start_offset("g", "t", 0) == 50


def test_one_blocking_consumer_shared_by_threads(cluster) -> None:
    produce(cluster.bootstrap, 2000)
    got: list[int] = []
    lock = threading.Lock()
    with ShareConsumer("t", bootstrap_servers=cluster.bootstrap, group_id="g",
                       max_poll_records=30) as c:
        def run() -> None:
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline:
                with lock:
                    if len(got) >= 2000:
                        return
                recs = c.poll(0.1)
                with lock:
                    got.extend(r.offset for r in recs)
        threads = [threading.Thread(target=run) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        c.commit_sync()
    assert sorted(got) == list(range(2000))
    assert cluster.share.start_offset("g", "t", 0) == 2000


def test_poll_columns_and_not_both(cluster) -> None:
    pytest.importorskip("numpy")
    produce(cluster.bootstrap, 300)
    with ShareConsumer("t", bootstrap_servers=cluster.bootstrap, group_id="g") as c:
        rows = []
        deadline = time.monotonic() + 10
        while len(rows) < 300 and time.monotonic() < deadline:
            for sc in c.poll_columns(0.5):
                assert (sc.topic, sc.partition, sc.delivery_count) == ("t", 0, 1)
                rows += sc.columns.value.to_pylist()
        assert rows == [b"v%05d" % i for i in range(300)]
        with pytest.raises(ShareStateError, match="polls records or columns, not both"):
            c.poll(0)
    assert cluster.share.start_offset("g", "t", 0) == 300
    with ShareConsumer("t", bootstrap_servers=cluster.bootstrap, group_id="h",
                       share_acknowledgement_mode="explicit") as c:
        with pytest.raises(ShareStateError, match="poll_columns is for "
                                                  "share_acknowledgement_mode='implicit'"):
            c.poll_columns(0)


def test_the_commit_callback_hears_every_answer(cluster) -> None:
    produce(cluster.bootstrap, 10)
    heard: list = []
    with ShareConsumer("t", bootstrap_servers=cluster.bootstrap, group_id="g",
                       share_acknowledgement_mode="explicit") as c:
        c.set_acknowledgement_commit_callback(lambda offs, err: heard.append((offs, err)))
        recs = []
        while len(recs) < 10:
            recs += c.poll(0.5)
        for r in recs:
            c.acknowledge(r)
        done = threading.Event()
        fut = c.commit_async(lambda results: done.set())
        assert fut.result(5) == {TP: None} and done.wait(5)
    assert heard and heard[0] == ({TP: list(range(10))}, None)


def test_offsets_acquired_without_a_record_are_acknowledged_as_gaps() -> None:
    """A compacted log hands out offset ranges with holes: the consumer acknowledges the
    holes as GAP, so the start offset moves past them."""
    from kcodec.client.share.acknowledger import Acknowledger
    from kcodec.client.share.fetcher import Delivery, ShareFetcher
    from kcodec.records import RecordBatchBuilder

    b = RecordBatchBuilder(base_offset=10)
    for off in (10, 11, 14):                     # 12 and 13 compacted away
        b.append_with_offset(off, 1, b"k", b"v%d" % off)
    f = ShareFetcher.__new__(ShareFetcher)
    f.acks = Acknowledger(None, None, lambda: None, lambda: None)  # type: ignore[arg-type]
    recs = f._decode(Delivery(TP, b.build(), [(10, 14, 2)]), True)
    assert [(r.offset, r.delivery_count, r.value) for r in recs] == \
        [(10, 2, b"v10"), (11, 2, b"v11"), (14, 2, b"v14")]
    assert f.acks.take_pending() == {TP: [(12, 13, [AcknowledgeType.GAP])]}
    # a batch only partly acquired (a strict record limit cut it): the rest is not handed out
    assert [r.offset for r in f._decode(Delivery(TP, b.build(), [(10, 10, 1)]), True)] == [10]


def test_a_forgotten_share_session_starts_over(cluster) -> None:
    produce(cluster.bootstrap, 5)
    with ShareConsumer("t", bootstrap_servers=cluster.bootstrap, group_id="g") as c:
        first = []
        while len(first) < 5:
            first += c.poll(0.5)
        produce(cluster.bootstrap, 5)
        refuse_sessions(cluster, ErrorCode.SHARE_SESSION_NOT_FOUND,
                        ErrorCode.INVALID_SHARE_SESSION_EPOCH)
        more = []
        deadline = time.monotonic() + 10
        while len(more) < 5 and time.monotonic() < deadline:
            more += c.poll(0.3)
        assert [r.offset for r in more] == [5, 6, 7, 8, 9]
        c.commit_sync()
    assert cluster.share.start_offset("g", "t", 0) == 10


def test_closed_and_misused(cluster) -> None:
    c = ShareConsumer("t", bootstrap_servers=cluster.bootstrap, group_id="g",
                      share_acknowledgement_mode="explicit")
    c.close()
    from kcodec.client import ClientClosedError

    with pytest.raises(ClientClosedError, match="closed"):
        c.poll(0)
    with pytest.raises(TypeError, match="topics are names"):
        ShareConsumer(5, group_id="g")


def test_acknowledgements_of_a_forgotten_session_go_in_the_next_one(cluster) -> None:
    """The broker keeps records by member, not by session: acknowledgements that rode on
    a fetch the broker refused for its session are sent again, not lost until the locks
    time out (30 s here)."""
    produce(cluster.bootstrap, 5)
    with ShareConsumer("t", bootstrap_servers=cluster.bootstrap, group_id="g",
                       share_acknowledgement_mode="explicit") as c:
        recs = []
        while len(recs) < 5:
            recs += c.poll(0.5)
        for r in recs:
            c.acknowledge(r)
        time.sleep(0.6)                   # the prefetch's long poll ends: the next fetch
        cluster.record()                  # carries the acknowledgements
        refuse_sessions(cluster, ErrorCode.SHARE_SESSION_NOT_FOUND)
        deadline = time.monotonic() + 5
        while cluster.share.start_offset("g", "t", 0) != 5 and time.monotonic() < deadline:
            c.poll(0.2)
        refused = [r for r in cluster.recorded("ShareFetch") if r.body.share_session_epoch > 0
                   and any(p.acknowledgement_batches for t in r.body.topics for p in t.partitions)]
        assert refused                    # acknowledgements rode on the refused fetch
        assert cluster.share.start_offset("g", "t", 0) == 5


def test_the_guide_example_runs_as_written(cluster) -> None:
    """The share-group guide's example (docs/guide/share-groups.md), against a broker here
    (its address swapped in, ``handle`` and ``ok`` given)."""
    from tests.support import project_text

    text = project_text("docs", "guide", "share-groups.md")
    section = text[text.index("## The share consumer"):]
    code = section[section.index("```python") + len("```python"):section.index("```\n", 10)]
    cluster.create_topic("jobs", 1)
    cluster.share.configs.set("workers", {"share.auto.offset.reset": "earliest"})
    produce(cluster.bootstrap, 4, topic="jobs")
    handled: list = []
    ns = {"handle": handled.append, "ok": lambda r: True}
    exec(code.replace("127.0.0.1:9092", cluster.bootstrap), ns)   # noqa: S102 - our docs
    # the implicit consumer's one poll handles the 4 records and accepts them at close
    assert [r.value for r in handled] == [b"v%05d" % i for i in range(4)]
    assert cluster.share.start_offset("workers", "jobs", 0) == 4
