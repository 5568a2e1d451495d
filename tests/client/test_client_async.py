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
FAST = dict(fetch_max_wait_ms=50, session_timeout_ms=2000, heartbeat_interval_ms=200)


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
    # close() revokes what the subscription owns before leaving the group, as in Java
    assert events == [("assigned", [0, 1, 2]), ("revoked", [0, 1, 2])]


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
    events = []

    class Listener(RebalanceListener):
        def on_partitions_assigned(self, assigned):
            events.append(("assigned", len(assigned)))

        def on_partitions_revoked(self, revoked):
            events.append(("revoked", len(revoked)))

        def on_partitions_lost(self, lost):
            events.append(("lost", len(lost)))

    with Consumer(bootstrap_servers=broker.bootstrap, group_id=f"g-{topic_name}",
                  max_poll_interval_ms=800, **FAST) as c:
        c.subscribe([topic_name], Listener())
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
    # gone without revoking: the partitions were lost, then assigned again; close revokes
    assert events == [("assigned", 2), ("lost", 2), ("assigned", 2), ("revoked", 2)]


@pytest.mark.parametrize("strategy", ["range", pytest.param("cooperative-sticky", marks=pytest.mark.slow)])
def test_blocking_revocation_runs_before_the_partitions_move(broker, topic_name, strategy) -> None:
    """c1's on_partitions_revoked runs in c1's polling thread while c1 still owns the
    partitions and is still a member of the old generation (it can commit there), before c2
    is given any of them (eager: all four before JoinGroup; cooperative: the two that move,
    before the follow-up round); on close, c2's partitions are revoked too."""
    import threading

    with Admin(bootstrap_servers=broker.bootstrap) as a:
        a.create_topics([topic_name], num_partitions=4)
    events: list[tuple] = []

    class Listener(RebalanceListener):
        def __init__(self, name: str, consumer: Consumer) -> None:
            self.name, self.c = name, consumer

        def _note(self, what: str, tps: list) -> None:
            events.append((self.name, what, sorted(p.partition for p in tps),
                           self.c._engine.group.generation,
                           sorted(p.partition for p in self.c.assignment()),
                           threading.current_thread().name))

        def on_partitions_revoked(self, revoked):
            self._note("revoked", revoked)
            self.c.commit()   # the positions of what is being given up, old generation

        def on_partitions_assigned(self, assigned):
            self._note("assigned", assigned)

    cfg = dict(bootstrap_servers=broker.bootstrap, group_id=f"g-{topic_name}",
               partition_assignment_strategy=strategy, enable_auto_commit=False,
               auto_offset_reset="earliest", **FAST)
    c1 = Consumer(**cfg)
    c2 = Consumer(**cfg)
    stop = threading.Event()
    errors: list = []

    def loop(c: Consumer) -> None:
        try:
            while not stop.is_set():
                c.poll(0.05)
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    try:
        c1.subscribe([topic_name], Listener("c1", c1))
        deadline = time.monotonic() + 20
        while len(c1.assignment()) < 4 and time.monotonic() < deadline:
            c1.poll(0.05)
        gen1 = c1._engine.group.generation
        t1 = threading.Thread(target=loop, args=(c1,), name="poll-c1")
        t1.start()
        c2.subscribe([topic_name], Listener("c2", c2))
        t2 = threading.Thread(target=loop, args=(c2,), name="poll-c2")
        t2.start()
        deadline = time.monotonic() + 20
        while not (len(c1.assignment()) == 2 and len(c2.assignment()) == 2) \
                and time.monotonic() < deadline:
            time.sleep(0.05)
        stop.set()
        t1.join()
        t2.join()
        assert not errors, errors
        c2.close()   # revokes in this (the closing) thread
    finally:
        stop.set()
        c1.close()
        c2.close()
    c2_assigned = next(e for e in events if e[:2] == ("c2", "assigned"))
    assert events[-2][:3] == ("c2", "revoked", c2_assigned[2])
    assert events[-2][5] == threading.current_thread().name
    assert events[-1][:2] == ("c1", "revoked")   # c1.close()
    rev = events[1]
    assert rev[:2] == ("c1", "revoked") and events.index(rev) < events.index(c2_assigned)
    if strategy == "range":
        names = [(e[0], e[1]) for e in events]
        assert names[:4] == [("c1", "assigned"), ("c1", "revoked"), ("c1", "assigned"),
                             ("c2", "assigned")] or names[:4] == [
            ("c1", "assigned"), ("c1", "revoked"), ("c2", "assigned"), ("c1", "assigned")]
        # still owned, still the old generation, in the polling thread
        assert rev[2:] == ([0, 1, 2, 3], gen1, [0, 1, 2, 3], "poll-c1")
        assert c2_assigned[3] > gen1 and len(c2_assigned[2]) == 2
    else:   # only the two that move are revoked, while all four are still owned
        assert len(rev[2]) == 2 and rev[4] == [0, 1, 2, 3] and rev[5] == "poll-c1"
        assert rev[3] > gen1 and c2_assigned[2] == rev[2]
