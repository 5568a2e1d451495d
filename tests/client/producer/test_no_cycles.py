"""A delivered record leaves no reference cycle behind: its batch, its future and its
callbacks are freed by reference counting when the delivery is done. Cycles there (the
batch kept each callback, the callback its record's future, the future the batch) left
~17 objects a record for the cyclic GC, whose full collection every few thousand records
paused the sender 20-30 ms: the p99.9 of bench/latency.py at 1,000 records/s."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Iterator

import pytest

from kcodec.broker import Cluster
from kcodec.client import AsyncProducer, Producer
from kcodec.client.producer.batch import ProducerBatch, RecordFuture

N = 300


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    with Cluster(1) as c:
        c.create_topic("t", 1)
        yield c


def _cyclic_garbage() -> list[str]:
    """What the cyclic GC finds unreachable now, of the producer's delivery objects."""
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        gc.collect()
        return [type(o).__name__ for o in gc.garbage
                if isinstance(o, (ProducerBatch, RecordFuture))]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()


def test_blocking_sends_with_callbacks_leave_no_cycle(cluster: Cluster) -> None:
    delivered: list[int] = []
    with Producer(bootstrap_servers=cluster.bootstrap, acks="all", linger_ms=0) as p:
        p.send("t", b"first").result(30)
        gc.collect()
        for i in range(N):
            f = p.send("t", b"v%d" % i)
            f.add_callback(lambda e, r: delivered.append(r.offset))
            if i % 50 == 0:
                f.result(30)          # a mix: some callbacks come after the delivery
                f.add_callback(lambda e, r: delivered.append(r.offset))
        p.flush()
        assert sorted(set(delivered)) == list(range(1, N + 1))
        assert _cyclic_garbage() == []


def test_async_sends_with_callbacks_leave_no_cycle(cluster: Cluster) -> None:
    async def run() -> list[str]:
        delivered: list[int] = []
        async with AsyncProducer(bootstrap_servers=cluster.bootstrap, acks="all",
                                 linger_ms=0) as p:
            await (await p.send("t", b"first"))
            gc.collect()
            for i in range(N):
                f = await p.send("t", b"v%d" % i)
                f.add_callback(lambda e, r: delivered.append(r.offset))
                if i % 50 == 0:
                    await f
            await p.flush()
            assert sorted(delivered) == list(range(1, N + 1))
            return _cyclic_garbage()
    assert asyncio.run(run()) == []
