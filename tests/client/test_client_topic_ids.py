"""Topic ids (KIP-516): Fetch v13+ and Produce v13 name topics by id when the metadata
gives ids (the kcodec broker), fall back to the last named version when it does not (the
scriptable fake, whose metadata has no ids, as brokers before Kafka 2.8), and
UNKNOWN_TOPIC_ID makes the client re-learn the metadata."""

from __future__ import annotations

import asyncio
import time

import pytest

from kcodec.client import AsyncConsumer, AsyncProducer, TopicPartition
from kcodec.protocol import MetadataResponse
from tests.support.fake_kafka import FakeKafka


@pytest.fixture
def versions(monkeypatch):
    """(api_key, version) of every request the client's connections send."""
    import kcodec.client.net.conn as cm

    seen: list[tuple[int, int]] = []
    orig = cm.BrokerConnection.request

    async def spy(self, req, version=None, *a, **k):
        r = await orig(self, req, version, *a, **k)
        seen.append((int(req.API_KEY), r.version))
        return r
    monkeypatch.setattr(cm.BrokerConnection, "request", spy)
    return seen


def test_fetch_by_topic_id_against_tansu(broker, topic_name, versions):
    from kcodec.client import Admin, Consumer, Producer

    with Admin(bootstrap_servers=broker.bootstrap) as admin:
        admin.create_topics([topic_name], num_partitions=2)
    with Producer(bootstrap_servers=broker.bootstrap) as p:
        for i in range(10):
            p.send(topic_name, f"{i}".encode(), partition=i % 2)
    with Consumer(bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest") as c:
        c.assign([(topic_name, 0), (topic_name, 1)])
        got: list[bytes] = []
        deadline = time.monotonic() + 10
        while len(got) < 10 and time.monotonic() < deadline:
            for recs in c.poll(0.5).values():
                got += [r.value for r in recs]
    assert sorted(got) == sorted(f"{i}".encode() for i in range(10))
    fetch_versions = {v for k, v in versions if k == 1}
    assert fetch_versions and min(fetch_versions) >= 13     # by topic id (Tansu: up to 17)


def test_produce_v13_and_fetch_by_id_with_unknown_topic_id_recovery(versions):
    """On the kcodec broker (topic ids in Metadata, Produce v13 and Fetch v17 by id); two
    fetches are answered UNKNOWN_TOPIC_ID (pushed errors), and the consumer re-learns the
    metadata and goes on."""
    from kcodec.broker import Cluster

    async def main(b: Cluster) -> None:
        async with AsyncProducer(bootstrap_servers=b.bootstrap) as p:
            results = [await p.send_and_wait("t", f"v{i}".encode(), partition=0)
                       for i in range(3)]
        assert [r.offset for r in results] == [0, 1, 2]
        assert (0, 13) in versions                     # Produce by topic id
        assert {r.api_version for r in b.recorded("Produce")} == {13}
        b.push_errors("Fetch", [100, 100])             # UNKNOWN_TOPIC_ID, twice
        metadata_before = sum(1 for k, _ in versions if k == 3)
        async with AsyncConsumer(bootstrap_servers=b.bootstrap,
                                 auto_offset_reset="earliest", retry_backoff_ms=20) as c:
            c.assign([TopicPartition("t", 0)])
            got: list[bytes] = []
            deadline = time.monotonic() + 5
            while len(got) < 3 and time.monotonic() < deadline:
                got += [r.value for rs in (await c.poll(0.1)).values() for r in rs]
        assert got == [b"v0", b"v1", b"v2"]
        assert {v for k, v in versions if k == 1} >= {17}   # Fetch by id
        assert sum(1 for k, _ in versions if k == 3) > metadata_before + 1   # re-learnt

    with Cluster(1) as b:
        b.create_topic("t")
        b.record()
        asyncio.run(main(b))


def test_without_topic_ids_the_named_versions_are_used(versions):
    async def main() -> None:
        fake = await FakeKafka(nodes=1, topics={"t": {0: 0}}).start()   # no ids in metadata
        try:
            async with AsyncProducer(bootstrap_servers=fake.bootstrap) as p:
                await p.send_and_wait("t", b"x", partition=0)
            fake.values[("t", 0)] = [b"x"]
            async with AsyncConsumer(bootstrap_servers=fake.bootstrap,
                                     auto_offset_reset="earliest") as c:
                c.assign([TopicPartition("t", 0)])
                got: list[bytes] = []
                deadline = time.monotonic() + 5
                while not got and time.monotonic() < deadline:
                    got += [r.value for rs in (await c.poll(0.1)).values() for r in rs]
            assert got == [b"x"]
            assert {v for k, v in versions if k == 0} == {12}
            assert {v for k, v in versions if k == 1} == {12}
        finally:
            await fake.stop()

    asyncio.run(main())


def test_metadata_zero_uuid_means_no_id():
    m = MetadataResponse.MetadataResponseTopic(name="t", error_code=0)
    assert m.topic_id is not None and m.topic_id.int == 0
