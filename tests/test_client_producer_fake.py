"""Producer behaviour the real broker cannot show, against the scriptable fake cluster:
leader moves, idempotent sequence numbers and retries, delivery timeout, in-flight limits, acks."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from kcodec.client import AsyncProducer, KafkaError, KafkaTimeoutError
from kcodec.records import iter_batches
from tests.fake_kafka import CLOSE, FakeKafka


def run(coro_fn: Any, **fake_kw: Any) -> Any:
    async def main() -> Any:
        fake = await FakeKafka(**fake_kw).start()
        try:
            return await asyncio.wait_for(coro_fn(fake), 20)
        finally:
            await fake.stop()
    return asyncio.run(main())


def producer(fake: FakeKafka, **kw: Any) -> AsyncProducer:
    cfg = dict(bootstrap_servers=fake.bootstrap, linger_ms=0, retry_backoff_ms=20,
               request_timeout_ms=2000)
    return AsyncProducer(**{**cfg, **kw})


def batches(body: Any) -> list[tuple[str, int, int, int, int, int]]:
    """(topic, partition, producer_id, epoch, base_sequence, count) of a Produce request."""
    return [(t.name, p.index, b.producer_id, b.producer_epoch, b.base_sequence, b.record_count)
            for t in body.topic_data for p in t.partition_data for b in iter_batches(p.records)]


@pytest.mark.parametrize("code", [6, 3])   # NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION
def test_stale_leader_refreshes_metadata_and_reroutes(code: int) -> None:
    async def go(fake: FakeKafka) -> None:
        async with producer(fake) as p:
            assert (await p.send_and_wait("t", b"one")).offset == 0
            fake.topics["t"][0] = 1          # the partition moves to node 1; node 0 says so
            fake.on_produce = lambda node, t, part, recs: code if node == 0 else None
            metadata_before = len(fake.produced(3))
            r = await p.send_and_wait("t", b"two")
        assert r.offset == 1                 # the log continues on the new leader
        assert [n for n, _ in fake.produced(0)] == [0, 0, 1]
        assert len(fake.produced(3)) > metadata_before
    run(go)


def test_idempotent_sequence_numbers_per_partition() -> None:
    async def go(fake: FakeKafka) -> None:
        async with producer(fake) as p:
            for n in (2, 3, 1):
                futs = [await p.send("t", b"v", partition=0) for _ in range(n)]
                futs.append(await p.send("t", b"w", partition=1))
                await p.flush()
                assert all(r.offset >= 0 for r in [await f for f in futs])
        sent = [b for _n, body in fake.produced(0) for b in batches(body)]
        assert {(pid, epoch) for _t, _p, pid, epoch, _s, _c in sent} == {(1000, 0)}
        p0 = [(s, c) for _t, part, _pid, _e, s, c in sent if part == 0]
        p1 = [s for _t, part, _pid, _e, s, _c in sent if part == 1]
        assert p0 == [(0, 2), (2, 3), (5, 1)] and p1 == [0, 1, 2]
        assert [r[0] for r in fake.produced(22)] == [fake.produced(22)[0][0]]   # one InitProducerId
    run(go, topics={"t": {0: 0, 1: 1}})


def test_retry_after_a_lost_answer_keeps_the_sequence_and_writes_once() -> None:
    """The first Produce is written but its connection drops before the answer: the retry
    carries the same producer id and sequence; the broker's duplicate answer counts as
    delivered, and the log holds the batch once."""
    async def go(fake: FakeKafka) -> None:
        def drop_first(node: int, topic: str, part: int, recs: Any) -> Any:
            fake.on_produce = None
            fake.write(node, topic, part, recs)   # written ...
            return CLOSE                          # ... but never answered

        async with producer(fake) as p:
            fake.on_produce = drop_first
            fut = await p.send("t", b"once")
            await p.flush()
            r = await fut
        sent = [batches(body)[0] for _n, body in fake.produced(0)]
        assert len(sent) == 2 and sent[0] == sent[1] == ("t", 0, 1000, 0, 0, 1)
        assert fake.logs[("t", 0)] == [(1000, 0, 1)]
        assert r.partition == 0
    run(go)


def test_delivery_timeout_fails_the_record_in_time() -> None:
    async def go(fake: FakeKafka) -> None:
        fake.on_produce = lambda *a: 19   # NOT_ENOUGH_REPLICAS, retriable, forever
        async with producer(fake, delivery_timeout_ms=400) as p:
            fut = await p.send("t", b"x")
            t0 = time.monotonic()
            with pytest.raises(KafkaTimeoutError, match=r"delivery to t\[0\] timed out after 400 ms"):
                await fut
            assert time.monotonic() - t0 < 1.5
        assert len(fake.produced(0)) >= 3    # retried with backoff meanwhile
    run(go)


def test_retriable_error_after_the_delivery_timeout_reports_the_timeout() -> None:
    """Java reports the delivery timeout, not a retriable error that came after it (the
    answer here is held back past the deadline, as a loaded machine makes it)."""
    async def go(fake: FakeKafka) -> None:
        fake.on_produce = lambda *a: 19   # NOT_ENOUGH_REPLICAS, retriable
        fake.produce_delay = 0.6
        async with producer(fake, delivery_timeout_ms=300, request_timeout_ms=5000) as p:
            fut = await p.send("t", b"x")
            t0 = time.monotonic()
            with pytest.raises(KafkaTimeoutError, match=r"timed out after 300 ms \(1 attempts; "
                                                        r"last error: .*timed out"):
                await fut
            assert time.monotonic() - t0 < 0.55    # the answer is not waited for
    run(go)


def test_keyless_records_spread_over_partitions_when_linger_seals_small_batches() -> None:
    """seq 1 50000 | kcodec produce: input slower than linger_ms makes many small batches;
    the sticky partitioner still moves on after batch_size bytes (KIP-794)."""
    async def go(fake: FakeKafka) -> None:
        async with producer(fake, linger_ms=0) as p:
            futs = []
            for i in range(20000):
                futs.append(await p.send("spread", b"%099d" % i))
                if i % 50 == 0:
                    await asyncio.sleep(0.0005)   # let the sender send what it has
            for f in futs:
                await f
        per = {part: sum(c for _p, _s, c in log) for (t, part), log in fake.logs.items()}
        assert sum(per.values()) == 20000 and sorted(per) == [0, 1, 2, 3]
        assert max(per.values()) < 0.4 * 20000, per
    run(go, topics={"spread": {0: 0, 1: 1, 2: 0, 3: 1}})


def test_retries_exhausted_raise_the_broker_error() -> None:
    async def go(fake: FakeKafka) -> None:
        fake.on_produce = lambda *a: 19
        async with producer(fake, retries=2) as p:
            with pytest.raises(KafkaError, match="NOT_ENOUGH_REPLICAS") as ei:
                await p.send_and_wait("t", b"x")
            assert ei.value.code == 19 and ei.value.retriable
        assert len(fake.produced(0)) == 3    # the first try and two retries
    run(go)


def test_non_retriable_error_is_not_retried() -> None:
    async def go(fake: FakeKafka) -> None:
        fake.on_produce = lambda *a: 10   # MESSAGE_TOO_LARGE
        async with producer(fake) as p:
            with pytest.raises(KafkaError, match="MESSAGE_TOO_LARGE"):
                await p.send_and_wait("t", b"x")
        assert len(fake.produced(0)) == 1
    run(go)


@pytest.mark.parametrize("limit", [1, 3])
def test_max_in_flight_requests_per_connection(limit: int) -> None:
    async def go(fake: FakeKafka) -> None:
        fake.produce_delay = 0.05
        async with producer(fake, max_in_flight_requests_per_connection=limit, batch_size=100) as p:
            futs = [await p.send("t", b"%060d" % i) for i in range(12)]   # one batch each
            await p.flush()
            assert [(await f).offset for f in futs] == list(range(12))
        assert fake.max_inflight == limit
    run(go)


@pytest.mark.parametrize("acks,wire", [("all", -1), (1, 1), (0, 0)])
def test_acks_on_the_wire(acks: Any, wire: int) -> None:
    """acks=0: the broker sends nothing back (the fake, unlike Tansu, is silent) and the
    records still complete, with offset -1."""
    async def go(fake: FakeKafka) -> None:
        async with producer(fake, acks=acks, enable_idempotence=acks == "all") as p:
            futs = [await p.send("t", b"%d" % i) for i in range(5)]
            await p.flush()
            offsets = [(await f).offset for f in futs]
        assert set(fake.acks) == {wire}
        assert offsets == ([-1] * 5 if acks == 0 else list(range(5)))
    run(go)


def test_out_of_order_behind_a_retried_batch_resends_in_order_same_producer() -> None:
    """Two batches of one partition in flight; the first fails (retriable), so the broker
    answers the second OUT_OF_ORDER_SEQUENCE: both are resent in order with the same
    producer id and sequences (no new producer id, nothing written twice or reordered)."""
    async def go(fake: FakeKafka) -> None:
        failed: list[int] = []

        def fail_first(node: int, topic: str, part: int, recs: Any) -> Any:
            seq = next(iter(iter_batches(recs))).base_sequence
            if seq == 0 and not failed:
                failed.append(seq)
                return 19   # NOT_ENOUGH_REPLICAS
            return None

        fake.produce_delay = 0.05
        fake.on_produce = fail_first
        async with producer(fake, max_in_flight_requests_per_connection=2, batch_size=100) as p:
            futs = [await p.send("t", b"%060d" % i) for i in range(4)]
            await p.flush()
            offsets = [(await f).offset for f in futs]
        assert offsets == [0, 1, 2, 3]
        assert fake.logs[("t", 0)] == [(1000, i, 1) for i in range(4)]
        assert len(fake.produced(22)) == 1
    run(go)
