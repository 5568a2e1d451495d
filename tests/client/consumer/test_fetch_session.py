"""Incremental fetch sessions (KIP-227): the sans-I/O session, and the consumer against the
kcodec broker, which keeps sessions as Kafka does (its recorded requests show what the
consumer asked). Tansu, noida-db and librdkafka's mock cluster all answer session id 0, "no
sessions": against them the consumer stays on full, sessionless fetches, which the
end-to-end tests cover; a fake broker answering that way checks every fetch stays full (the
kcodec broker always keeps sessions from Fetch v7 on)."""

from __future__ import annotations

import asyncio
import itertools
import time
from typing import Any

from kcodec.client import AsyncConsumer, TopicPartition
from kcodec.client.consumer.fetch_session import FetchSession
from kcodec.protocol import FetchResponse, encode_response
from kcodec.records import RecordBatchBuilder
from tests.support.fake_kafka import FakeKafka


def test_session_full_then_incremental_then_forget():
    s = FetchSession()
    assert s.build({"a": 0, "b": 5}) == (0, 0, {"a": 0, "b": 5}, [])
    assert s.on_response(0, 77)
    assert (s.session_id, s.epoch) == (77, 1)
    # nothing moved: an empty incremental fetch
    assert s.build({"a": 0, "b": 5}) == (77, 1, {}, [])
    assert s.on_response(0, 77) and s.epoch == 2
    # a moved, c new, b gone
    assert s.build({"a": 3, "c": 0}) == (77, 2, {"a": 3, "c": 0}, ["b"])
    assert s.on_response(0, 77)
    assert s.offsets == {"a": 3, "c": 0} and s.epoch == 3
    assert s.incremental_fetches == 2 and s.full_fetches == 1


def test_session_errors_and_lost_requests_start_over():
    s = FetchSession()
    s.build({"a": 0})
    s.on_response(0, 9)
    s.build({"a": 1})
    assert not s.on_response(70, 0)                 # FETCH_SESSION_ID_NOT_FOUND
    assert s.build({"a": 1}) == (0, 0, {"a": 1}, [])
    s.on_response(0, 10)
    s.build({"a": 2})
    s.on_error()                                    # no answer: the state is unknown
    assert s.build({"a": 2})[:2] == (0, 0)
    s.on_response(0, 11)
    s.epoch = 0x7FFFFFFF
    s.build({"a": 2})
    s.on_response(0, 11)
    assert s.epoch == 1                             # epochs wrap to 1, never 0


def test_broker_without_sessions_means_full_sessionless_fetches():
    s = FetchSession()
    s.build({"a": 0})
    assert s.on_response(0, 0)                      # "no session": stay sessionless
    for _ in range(3):
        assert s.build({"a": 1, "b": 2}) == (0, -1, {"a": 1, "b": 2}, [])
        assert s.on_response(0, 0)
    assert not s.enabled and s.incremental_fetches == 0


class SessionFake(FakeKafka):
    """A fake broker with fetch sessions: it remembers each session's partitions and fetch
    offsets, checks epochs, and answers only partitions with new records."""

    def __init__(self, *a: Any, sessions: bool = True, **kw: Any) -> None:
        super().__init__(*a, **kw)
        self.sessions_on = sessions
        self.sessions: dict[int, dict] = {}
        self.ids = itertools.count(101)
        self.seen: list[tuple[int, int, int, int]] = []   # (id, epoch, partitions, forgotten)

    def evict(self) -> None:
        self.sessions.clear()

    async def _fetch(self, node: int, header: Any, body: Any, writer: Any) -> None:
        F = FetchResponse
        sent = {(t.topic, p.partition): p.fetch_offset for t in body.topics for p in t.partitions}
        forgotten = [(t.topic, p) for t in body.forgotten_topics_data for p in t.partitions]
        self.seen.append((body.session_id, body.session_epoch, len(sent), len(forgotten)))
        error, sid, full = 0, 0, True
        if body.session_epoch == -1 or not self.sessions_on:
            wanted = sent
        elif body.session_epoch == 0:
            sid = next(self.ids)
            self.sessions[sid] = {"epoch": 1, "parts": dict(sent)}
            wanted = sent
        else:
            sess = self.sessions.get(body.session_id)
            if sess is None:
                error = 70
            elif sess["epoch"] != body.session_epoch:
                error = 71
            else:
                sess["epoch"] += 1
                sess["parts"].update(sent)
                for tp in forgotten:
                    sess["parts"].pop(tp, None)
                wanted, sid, full = sess["parts"], body.session_id, False
        topics: dict[str, list] = {}
        any_data = False
        if not error:
            for (t, p), off in wanted.items():
                vals = self.values.get((t, p), [])
                records = b""
                if off < len(vals):
                    b = RecordBatchBuilder(base_offset=off)
                    for v in vals[off:]:
                        b.append(None, v, None, 1000)
                    records = b.build()
                    any_data = True
                if records or full:
                    topics.setdefault(t, []).append(F.PartitionData(
                        partition_index=p, error_code=0, high_watermark=len(vals), records=records))
        if not any_data and not error:
            await asyncio.sleep(min(body.max_wait_ms, 50) / 1000)
        resp = F(error_code=error, session_id=sid, responses=[
            F.FetchableTopicResponse(topic=t, partitions=ps) for t, ps in topics.items()])
        writer.write(encode_response(resp, header.request_api_version, header.correlation_id))


async def _consume(c: AsyncConsumer, got: list, n: int, timeout: float = 5) -> None:
    deadline = time.monotonic() + timeout
    while len(got) < n and time.monotonic() < deadline:
        for rs in (await c.poll(0.1)).values():
            got += [r.value for r in rs]


def test_consumer_uses_incremental_fetches_and_recovers_an_evicted_session():
    """On the kcodec broker, which keeps sessions as Kafka does; the requests it recorded
    show what the consumer asked (session id, epoch, partitions, forgotten partitions)."""
    from kcodec.broker import Cluster
    from kcodec.client import Producer

    def seen(b: Cluster) -> list[tuple[int, int, int, int]]:
        return [(r.body.session_id, r.body.session_epoch,
                 sum(len(t.partitions) for t in r.body.topics),
                 sum(len(t.partitions) for t in r.body.forgotten_topics_data))
                for r in b.recorded("Fetch")]

    def send(b: Cluster, value: bytes, partition: int) -> None:
        with Producer(bootstrap_servers=b.bootstrap) as p:
            p.send("t", value, partition=partition).result(10)

    async def main(b: Cluster) -> None:
        async with AsyncConsumer(bootstrap_servers=b.bootstrap, auto_offset_reset="earliest",
                                 fetch_max_wait_ms=50, retry_backoff_ms=20) as c:
            c.assign([TopicPartition("t", p) for p in range(3)])
            got: list[bytes] = []
            await _consume(c, got, 3)
            await asyncio.sleep(0.3)                         # idle: nothing moves
            assert seen(b)[0][:2] == (0, 0)                  # the first fetch creates it
            sid = seen(b)[1][0]
            assert sid != 0
            idle = seen(b)[2:]
            assert idle and all(x[0] == sid and x[2] == 0 for x in idle), seen(b)
            n = len(seen(b))
            await asyncio.to_thread(send, b, b"1-1", 1)
            await _consume(c, got, 4)
            await asyncio.sleep(0.2)
            # the fetch after the new record names only the partition that moved
            assert [x[2] for x in seen(b)[n:]].count(1) == 1, seen(b)[n:]
            assert all(x[2] <= 1 for x in seen(b)[n:])
            epochs = [x[1] for x in seen(b) if x[0] == sid]
            assert epochs == list(range(1, len(epochs) + 1))
            b.nodes[0].fetch_sessions.close(sid)             # the broker forgot it
            await asyncio.to_thread(send, b, b"2-1", 2)
            await _consume(c, got, 5)
            assert sorted(got) == sorted([b"0-0", b"1-0", b"2-0", b"1-1", b"2-1"])
            assert len(got) == 5                             # nothing twice
            # a new session was created after FETCH_SESSION_ID_NOT_FOUND (2-1 may have come
            # in the answer to the fetch already waiting when the session was closed: the
            # next fetch is the one refused, and the one after it creates the session)
            deadline = time.monotonic() + 5
            while sum(1 for x in seen(b) if x[:2] == (0, 0)) < 2 and time.monotonic() < deadline:
                for rs in (await c.poll(0.1)).values():
                    got += [r.value for r in rs]
            assert sum(1 for x in seen(b) if x[:2] == (0, 0)) >= 2, seen(b)
            assert len(got) == 5
            n = len(seen(b))
            c.pause(TopicPartition("t", 0))
            await asyncio.sleep(0.3)
            # the paused partition leaves the session (forgotten), once
            assert [x[3] for x in seen(b)[n:]].count(1) == 1, seen(b)[n:]

    with Cluster(1) as b:
        b.create_topic("t", 3)
        for part in range(3):
            send(b, f"{part}-0".encode(), part)
        b.record()
        asyncio.run(main(b))


def test_consumer_against_a_broker_without_sessions_fetches_in_full():
    async def main() -> None:
        fake = await SessionFake(nodes=1, topics={"t": {0: 0, 1: 0}}, sessions=False).start()
        fake.values[("t", 0)] = [b"a"]
        fake.values[("t", 1)] = [b"b"]
        try:
            async with AsyncConsumer(bootstrap_servers=fake.bootstrap, auto_offset_reset="earliest",
                                     fetch_max_wait_ms=50) as c:
                c.assign([TopicPartition("t", 0), TopicPartition("t", 1)])
                got: list[bytes] = []
                await _consume(c, got, 2)
                await asyncio.sleep(0.2)
                assert sorted(got) == [b"a", b"b"]
                assert fake.seen[0][:2] == (0, 0)
                assert all(s[:2] == (0, -1) and s[2] == 2 for s in fake.seen[1:])
        finally:
            await fake.stop()

    asyncio.run(main())


def test_incremental_fetches_against_kcodecs_broker():
    """kcodec's broker keeps fetch sessions: after the first fetch the consumer's fetches
    are incremental, and every record arrives once."""
    from kcodec.broker import Cluster
    from kcodec.client import Consumer, Producer

    with Cluster(1, num_partitions=3) as b:
        with Producer(bootstrap_servers=b.bootstrap) as p:
            for i in range(30):
                p.send("fs", f"{i}".encode(), partition=i % 3)
        with Consumer(bootstrap_servers=b.bootstrap, auto_offset_reset="earliest",
                      fetch_max_wait_ms=50) as c:
            c.assign([("fs", 0), ("fs", 1), ("fs", 2)])
            got: list[bytes] = []
            deadline = time.monotonic() + 10
            while len(got) < 30 and time.monotonic() < deadline:
                for recs in c.poll(0.2).values():
                    got += [r.value for r in recs]
            with Producer(bootstrap_servers=b.bootstrap) as p:
                p.send("fs", b"late", partition=1).result(10)
            while len(got) < 31 and time.monotonic() < deadline:
                for recs in c.poll(0.2).values():
                    got += [r.value for r in recs]
            sessions = [(s.enabled, s.session_id, s.incremental_fetches, s.full_fetches)
                        for s in c._engine.fetcher.sessions.values()]    # before close() ends them
    assert sorted(got) == sorted([f"{i}".encode() for i in range(30)] + [b"late"])
    assert sessions and all(enabled and sid != 0 for enabled, sid, _i, _f in sessions)
    assert sum(s[2] for s in sessions) > sum(s[3] for s in sessions)


def test_a_partition_held_back_for_its_full_buffer_is_not_left_waiting_on_the_others():
    """A partition with two blobs buffered is left out of the next Fetch; if that Fetch
    waited fetch_max_wait_ms for the other (caught-up) partitions, the held-back one would
    sit idle until it came back once the application had freed its buffer: reading a
    partition stalled for fetch_max_wait_ms again and again, and the last records of a
    topic came that much late. While a partition is held back the broker is asked to wait
    20 ms at most."""
    from kcodec.broker import Cluster
    from kcodec.client import Consumer, Producer

    with Cluster(1) as b:
        b.create_topic("t", 2)
        with Producer(bootstrap_servers=b.bootstrap, linger_ms=0, batch_size=16384) as p:
            for i in range(200):
                p.send("t", b"%04d" % i + b"x" * 1000, partition=0)
            p.flush(10)
        b.record()
        with Consumer(bootstrap_servers=b.bootstrap, auto_offset_reset="earliest",
                      fetch_max_wait_ms=5000, max_partition_fetch_bytes=16384) as c:
            c.assign([TopicPartition("t", 0), TopicPartition("t", 1)])
            got: list[bytes] = []
            t0 = time.monotonic()
            while len(got) < 200 and time.monotonic() - t0 < 60:
                for recs in c.poll(1.0, max_records=5).values():
                    got += [r.value[:4] for r in recs]
                time.sleep(0.005)                  # slower than fetching: buffers fill
            took = time.monotonic() - t0
        assert got == [b"%04d" % i for i in range(200)]
        fetches = b.recorded("Fetch")
        # the Fetches that took partition 0 out of the session: it was held back then
        held = [f.body.max_wait_ms for f in fetches
                if any(0 in t.partitions for t in f.body.forgotten_topics_data)]
        assert held and set(held) == {20}, held
        assert took < 4, f"{took:.1f} s: a held-back partition waited out fetch_max_wait_ms"
