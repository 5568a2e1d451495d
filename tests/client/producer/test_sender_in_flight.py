"""Producer behaviour the brokers cannot show, against the scriptable fake cluster: in-flight
limits. The fake answers the requests of one connection concurrently and counts how many are
outstanding; a real broker (Kafka, and the kcodec broker) mutes a connection while it
handles one request, so it never sees the client's in-flight window. Everything else that
ran here (acks on the wire, a batch behind a retried one, an answer held back past the
delivery timeout, keyless records over many small batches) runs on the kcodec broker with
its hooks, beside leader moves, sequence numbers, lost answers and retries
(tests/broker/test_broker_client.py)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from kcodec.client import AsyncProducer
from tests.support.fake_kafka import FakeKafka


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
