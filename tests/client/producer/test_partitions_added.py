"""A record sent to a partition added since the producer's metadata waits for fresh
metadata (as Java's producer waits, up to max.block.ms), instead of failing at once.

Found by the group history matrix (tests/faults/test_group_history.py): a producer told to
write to a topic's new partition raised ``ValueError: partition 3 out of range for 'events'
(3 partitions)`` until its metadata aged out (metadata_max_age_ms, 5 minutes by default).
"""

from __future__ import annotations

import asyncio
import time

import pytest

from kcodec.client import AsyncProducer, KafkaTimeoutError, Producer
from tests.support.fake_kafka import FakeKafka
from tests.support.hostile_broker import HostileBroker


def test_a_partition_added_since_the_metadata_is_waited_for() -> None:
    with HostileBroker("good", topic="t") as hb, \
            Producer(bootstrap_servers=hb.bootstrap, api_timeout_ms=3000, linger_ms=0) as p:
        assert p.send("t", b"a", partition=0).result(5).partition == 0
        hb.fake.topics["t"][1] = 0          # the topic grows to 2 partitions
        assert p.send("t", b"b", partition=1).result(5).partition == 1
        # a partition that does not come: Java's words, after the api timeout
        t = time.monotonic()
        with pytest.raises(KafkaTimeoutError, match="partition 7 of topic 't' with partition "
                           "count 2 is not present in metadata after 3000 ms"):
            p.send("t", b"c", partition=7)
        assert 2.5 < time.monotonic() - t < 6
        with pytest.raises(ValueError, match="partition -1 out of range"):
            p.send("t", b"d", partition=-1)


def test_the_async_producer_waits_for_it_too() -> None:
    async def main() -> None:
        fake = await FakeKafka(nodes=1, topics={"t": {0: 0}}).start()
        try:
            async with AsyncProducer(bootstrap_servers=fake.bootstrap, linger_ms=0,
                                     api_timeout_ms=3000) as p:
                await (await p.send("t", b"a", partition=0))
                fake.topics["t"][1] = 0
                got = await (await p.send("t", b"b", partition=1))
                assert got.partition == 1
        finally:
            await fake.stop()
    asyncio.run(main())
