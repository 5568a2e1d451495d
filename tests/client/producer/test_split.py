"""A batch the broker refuses as too large (MESSAGE_TOO_LARGE: the topic's max.message.bytes
is below the producer's batch) is split and sent again, as Java's producer does, instead of
failing every record in it; a single record too large still fails, with that error."""

from __future__ import annotations

import asyncio
import random

import pytest

from kcodec.broker import Cluster
from kcodec.client import AsyncProducer, Consumer, KafkaError, Producer
from kcodec.protocol import ApiKey

pytestmark = [pytest.mark.broker]


def _read(bootstrap: str, topic: str, n: int) -> list[bytes]:
    with Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest") as c:
        c.assign([(topic, 0)])
        got: list[bytes] = []
        for _ in range(100):
            for recs in c.poll(0.2).values():
                got += [r.value for r in recs]
            if len(got) >= n:
                break
        return got


@pytest.mark.parametrize("idempotent", [True, False])
@pytest.mark.parametrize("compression", ["none", "lz4"])
def test_oversized_batch_is_split_and_every_record_delivered(idempotent, compression):
    with Cluster() as c:
        c.create_topic("small", 1, configs={"max.message.bytes": "1000"})
        rng = random.Random(7)      # incompressible values: compression does not help
        values = [b"%03d" % i + rng.randbytes(150) for i in range(24)]
        c.record()
        with Producer(bootstrap_servers=c.bootstrap, linger_ms=200, batch_size=16384,
                      enable_idempotence=idempotent, acks="all" if idempotent else 1,
                      compression_type=compression) as p:
            futs = [p.send("small", v, partition=0) for v in values]
            results = [f.result(20) for f in futs]
        produces = [r for r in c.requests if r.api_key == ApiKey.PRODUCE]
        c.record(False)
        assert len(produces) > 2                        # the first was refused, then halves
        assert [r.offset for r in results] == list(range(24))   # each record its own offset
        assert _read(c.bootstrap, "small", 24) == values          # once each, in order


def test_a_single_record_too_large_still_fails():
    with Cluster() as c:
        c.create_topic("tiny", 1, configs={"max.message.bytes": "200"})
        with Producer(bootstrap_servers=c.bootstrap, linger_ms=100) as p:
            futs = [p.send("tiny", b"x" * 400, partition=0), p.send("tiny", b"ok", partition=0)]
            with pytest.raises(KafkaError) as err:
                futs[0].result(20)
            assert err.value.name == "MESSAGE_TOO_LARGE"
            assert futs[1].result(20).offset == 0     # its neighbour went through


def test_async_futures_of_a_split_batch():
    async def run(bootstrap: str) -> list[int]:
        async with AsyncProducer(bootstrap_servers=bootstrap, linger_ms=200) as p:
            futs = [await p.send("small", b"v" * 300, partition=0) for _ in range(8)]
            return [(await f).offset for f in futs]
    with Cluster() as c:
        c.create_topic("small", 1, configs={"max.message.bytes": "1000"})
        assert asyncio.run(run(c.bootstrap)) == list(range(8))
