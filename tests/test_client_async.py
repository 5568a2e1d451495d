"""The asyncio twins, acks 0/1, idle connections, rebalance callbacks (real broker)."""

from __future__ import annotations

import asyncio
import time

import pytest

from kcodec.client import (
    Admin,
    AsyncAdmin,
    AsyncConsumer,
    AsyncProducer,
    Consumer,
    Producer,
    RebalanceListener,
    TopicPartition,
)

pytestmark = pytest.mark.broker
FAST = dict(fetch_max_wait_ms=50, session_timeout_ms=3000, heartbeat_interval_ms=300)


def test_async_producer_consumer_admin(broker, topic_name) -> None:
    async def main() -> None:
        async with AsyncAdmin(bootstrap_servers=broker.bootstrap) as admin:
            assert (await admin.create_topics([topic_name], num_partitions=2))[topic_name] is None
        async with AsyncProducer(bootstrap_servers=broker.bootstrap, compression_type="zstd") as p:
            futs = [await p.send(topic_name, b"v%d" % i, key=b"k%d" % i) for i in range(200)]
            results = [await f for f in futs]
            one = await p.send_and_wait(topic_name, b"last", partition=1)
        assert one.partition == 1 and len({(r.partition, r.offset) for r in results}) == 200
        got = []
        async with AsyncConsumer(bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest",
                                 **FAST) as c:
            c.assign([TopicPartition(topic_name, 0), TopicPartition(topic_name, 1)])
            deadline = time.monotonic() + 20
            while len(got) < 201 and time.monotonic() < deadline:
                for recs in (await c.poll(0.5)).values():
                    got += [r.value for r in recs]
            assert await c.position(TopicPartition(topic_name, 1)) == one.offset + 1
        assert sorted(got) == sorted([b"v%d" % i for i in range(200)] + [b"last"])

    asyncio.run(main())


def test_async_group_with_coroutine_listener(broker, topic_name) -> None:
    events = []

    class Listener(RebalanceListener):
        async def on_partitions_assigned(self, assigned):
            events.append(("assigned", sorted(p.partition for p in assigned)))

        async def on_partitions_revoked(self, revoked):
            events.append(("revoked", sorted(p.partition for p in revoked)))

    async def main() -> None:
        async with AsyncAdmin(bootstrap_servers=broker.bootstrap) as admin:
            await admin.create_topics([topic_name], num_partitions=3)
        async with AsyncConsumer(bootstrap_servers=broker.bootstrap, group_id=f"g-{topic_name}",
                                 **FAST) as c:
            c.subscribe([topic_name], listener=Listener())
            deadline = time.monotonic() + 20
            while len(c.assignment()) < 3 and time.monotonic() < deadline:
                await c.poll(0.1)
            assert len(c.assignment()) == 3

    asyncio.run(main())
    assert events == [("assigned", [0, 1, 2])]


def test_blocking_listener_called_in_poll_thread(broker, topic_name) -> None:
    import threading
    calls = []

    class Listener(RebalanceListener):
        def on_partitions_assigned(self, assigned):
            calls.append((threading.current_thread(), len(assigned)))

    with Admin(bootstrap_servers=broker.bootstrap) as a:
        a.create_topics([topic_name], num_partitions=2)
    with Consumer(bootstrap_servers=broker.bootstrap, group_id=f"g-{topic_name}", **FAST) as c:
        c.subscribe([topic_name], listener=Listener())
        deadline = time.monotonic() + 20
        while not calls and time.monotonic() < deadline:
            c.poll(0.1)
    assert calls == [(threading.current_thread(), 2)]


@pytest.mark.parametrize("acks", [0, 1])
def test_acks_zero_and_one(broker, topic_name, acks) -> None:
    with Producer(bootstrap_servers=broker.bootstrap, acks=acks, enable_idempotence=False) as p:
        futs = [p.send(topic_name, b"%d" % i, partition=0) for i in range(50)]
        p.flush()
        results = [f.result(5) for f in futs]
    if acks == 0:
        assert all(r.offset == -1 for r in results)   # nobody tells us
    else:
        assert [r.offset for r in results] == list(range(50))
    with Consumer(bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest", **FAST) as c:
        c.assign([TopicPartition(topic_name, 0)])
        got = []
        deadline = time.monotonic() + 10
        while len(got) < 50 and time.monotonic() < deadline:
            got += [r.value for rs in c.poll(0.2).values() for r in rs]
    assert got == [b"%d" % i for i in range(50)]


def test_idle_connections_are_closed(broker) -> None:
    with Admin(bootstrap_servers=broker.bootstrap, connections_max_idle_ms=200) as a:
        a.list_topics()
        assert a._async.cluster.connections()
        time.sleep(0.6)
        assert not a._async.cluster.connections()
        assert isinstance(a.list_topics(), list)   # and reconnects on demand


@pytest.mark.slow
def test_max_poll_interval_leaves_group_then_rejoins(broker, topic_name) -> None:
    with Admin(bootstrap_servers=broker.bootstrap) as a:
        a.create_topics([topic_name], num_partitions=2)
    with Consumer(topic_name, bootstrap_servers=broker.bootstrap, group_id=f"g-{topic_name}",
                  max_poll_interval_ms=800, **FAST) as c:
        deadline = time.monotonic() + 20
        while len(c.assignment()) < 2 and time.monotonic() < deadline:
            c.poll(0.1)
        g = c._engine.group
        member = g.member_id
        assert member and len(c.assignment()) == 2
        time.sleep(1.5)                 # no poll: the member leaves the group
        assert g.need_rejoin and g.member_id == ""
        with Admin(bootstrap_servers=broker.bootstrap) as a:
            assert a.describe_groups([f"g-{topic_name}"])[0].members == []
        deadline = time.monotonic() + 20
        while (g.need_rejoin or len(c.assignment()) < 2) and time.monotonic() < deadline:
            c.poll(0.1)
        assert len(c.assignment()) == 2 and g.member_id not in ("", member)
