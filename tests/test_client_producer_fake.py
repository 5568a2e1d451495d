"""Producer behaviour the brokers cannot show, against the scriptable fake cluster: in-flight
limits (the fake answers requests of one connection concurrently), acks on the wire, a
batch behind a retried one, an answer held back past the delivery timeout, keyless records
over many small batches. Leader moves, sequence numbers, lost answers, delivery timeout
and retries run on the kcodec broker (tests/test_broker_client.py)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from kcodec.client import AsyncProducer, KafkaTimeoutError
from kcodec.records import iter_batches
from tests.fake_kafka import FakeKafka


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
