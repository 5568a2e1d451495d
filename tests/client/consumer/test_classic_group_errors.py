"""kcodec's classic group member says a refused session timeout plainly, once, instead of
rejoining in a loop; and a member (classic or consumer protocol) whose rejoin finds its
membership gone loses its partitions, as Java's."""

from __future__ import annotations

import time

import pytest

from kcodec.broker import Cluster
from kcodec.client import Consumer, KafkaError
from kcodec.protocol import ErrorCode


def test_a_session_timeout_the_broker_refuses_is_one_clear_error(monkeypatch):
    monkeypatch.setattr(Cluster, "base_config", {})    # Kafka's bounds: 6000..1800000
    with Cluster(config={"group.initial.rebalance.delay.ms": 0}) as c:
        c.create_topic("t")
        with Consumer(bootstrap_servers=c.bootstrap, group_id="g", group_protocol="classic",
                      session_timeout_ms=100, heartbeat_interval_ms=30) as consumer:
            consumer.subscribe(["t"])
            t0 = time.monotonic()
            with pytest.raises(KafkaError) as err:
                consumer.poll(5.0)
            assert time.monotonic() - t0 < 4
    assert err.value.code == ErrorCode.INVALID_SESSION_TIMEOUT
    assert "session_timeout_ms=100" in str(err.value)
    assert "group.min.session.timeout.ms" in str(err.value)


def test_a_join_that_finds_the_membership_gone_loses_the_partitions_it_owned():
    """A cooperative member whose membership the coordinator no longer has (a restarted
    broker, a member removed) and that learns it from JoinGroup, not a heartbeat: its
    partitions are lost (``on_partitions_lost``; another member may have owned them and
    committed meanwhile), it claims none at the next join and starts again from the
    committed offsets, as Java's consumer (a member that kept them revoked them into a
    commit the new generation accepted, moving the group's offset back, and went on from
    its own position)."""
    from kcodec.client import Producer, RebalanceListener, TopicPartition
    from kcodec.protocol import LeaveGroupRequest
    from tests.support.protocol_conn import Conn

    events: list[tuple[str, list[str]]] = []

    def names(tps):
        return sorted(f"{tp.topic}{tp.partition}" for tp in tps)

    class Listener(RebalanceListener):
        def on_partitions_assigned(self, assigned):
            events.append(("assigned", names(assigned)))

        def on_partitions_revoked(self, revoked):
            events.append(("revoked", names(revoked)))

        def on_partitions_lost(self, lost):
            events.append(("lost", names(lost)))

    with Cluster(config={"group.initial.rebalance.delay.ms": 0}) as c:
        c.create_topic("t", 2)
        c.create_topic("u", 1)
        with Producer(bootstrap_servers=c.bootstrap) as p:
            for i in range(20):
                p.send("t", b"%d" % i, partition=0)
            p.flush(10)
        # heartbeats far apart: the rejoin below comes before the next one
        with Consumer(bootstrap_servers=c.bootstrap, group_id="g", group_protocol="classic",
                      partition_assignment_strategy="cooperative-sticky",
                      session_timeout_ms=30000, heartbeat_interval_ms=10000,
                      enable_auto_commit=False, auto_offset_reset="earliest",
                      max_poll_records=10) as consumer:
            consumer.subscribe(["t"], listener=Listener())
            got: list[int] = []
            deadline = time.monotonic() + 20
            while len(got) < 10 and time.monotonic() < deadline:
                got += [r.offset for rs in consumer.poll(0.5).values() for r in rs]
            assert got == list(range(10)) and events == [("assigned", ["t0", "t1"])], (got, events)
            consumer.commit({TopicPartition("t", 0): 5})
            member_id = consumer._async._engine.group.member_id
            # the coordinator forgets the member (as a restarted broker that lost the group)
            with Conn(c.bootstrap) as conn:
                M = LeaveGroupRequest.MemberIdentity
                left = conn.call(LeaveGroupRequest(group_id="g", members=[
                    M(member_id=member_id, reason="the test removes it")]), 3)
            assert left.error_code == 0 and left.members[0].error_code == 0, left
            consumer.subscribe(["t", "u"], listener=Listener())    # a rejoin, at once
            again: list[tuple[int, int]] = []
            deadline = time.monotonic() + 20
            while not any(tp == "t0" for tp, _ in again) and time.monotonic() < deadline:
                again += [(f"{tp.topic}{tp.partition}", r.offset)
                          for tp, rs in consumer.poll(0.5).items() for r in rs]
            after = list(events[1:])
    assert after == [("lost", ["t0", "t1"]), ("assigned", ["t0", "t1", "u0"])], events
    assert min(off for tp, off in again if tp == "t0") == 5, again   # the committed offset


def test_a_consumer_protocol_join_that_finds_the_member_fenced_loses_its_partitions():
    """The same under the consumer protocol: a rejoin whose heartbeat says the member is
    unknown (the coordinator removed it) calls ``on_partitions_lost``, not
    ``on_partitions_revoked`` (a commit there would be for partitions another member may
    own), and starts again from the committed offsets."""
    from kcodec.client import Producer, RebalanceListener, TopicPartition
    from kcodec.client.net import requests
    from tests.support.protocol_conn import Conn

    events: list[tuple[str, list[str]]] = []

    def names(tps):
        return sorted(f"{tp.topic}{tp.partition}" for tp in tps)

    class Listener(RebalanceListener):
        def on_partitions_assigned(self, assigned):
            events.append(("assigned", names(assigned)))

        def on_partitions_revoked(self, revoked):
            events.append(("revoked", names(revoked)))

        def on_partitions_lost(self, lost):
            events.append(("lost", names(lost)))

    # heartbeats far apart: the rejoin below comes before the next one
    with Cluster(config={"group.consumer.heartbeat.interval.ms": 15000}) as c:
        c.create_topic("t", 2)
        c.create_topic("u", 1)
        with Producer(bootstrap_servers=c.bootstrap) as p:
            for i in range(20):
                p.send("t", b"%d" % i, partition=0)
            p.flush(10)
        with Consumer(bootstrap_servers=c.bootstrap, group_id="g", group_protocol="consumer",
                      enable_auto_commit=False, auto_offset_reset="earliest",
                      max_poll_records=10) as consumer:
            consumer.subscribe(["t"], listener=Listener())
            got: list[int] = []
            deadline = time.monotonic() + 20
            while len(got) < 10 and time.monotonic() < deadline:
                got += [r.offset for rs in consumer.poll(0.5).values() for r in rs]
            assert got == list(range(10)) and events == [("assigned", ["t0", "t1"])], (got, events)
            consumer.commit({TopicPartition("t", 0): 5})
            member_id = consumer._async._engine.group.member_id
            with Conn(c.bootstrap) as conn:    # the coordinator removes the member
                left = conn.call(requests.consumer_group_heartbeat(
                    "g", member_id, -1, None, -1, None, None, None), 0)
            assert left.error_code == 0, left
            consumer.subscribe(["t", "u"], listener=Listener())    # a rejoin, at once
            again: list[tuple[str, int]] = []
            deadline = time.monotonic() + 20
            while not any(tp == "t0" for tp, _ in again) and time.monotonic() < deadline:
                again += [(f"{tp.topic}{tp.partition}", r.offset)
                          for tp, rs in consumer.poll(0.5).items() for r in rs]
            after = list(events[1:])
    assert after[0] == ("lost", ["t0", "t1"]), events
    assert "revoked" not in [e for e, _ in after], events
    assert min(off for tp, off in again if tp == "t0") == 5, again   # the committed offset


def test_a_consumer_protocol_member_fenced_by_a_heartbeat_in_flight_during_its_join():
    """A heartbeat sent before a join began and answered "fenced" while the join's own
    heartbeat goes on (at epoch 0, a new membership): the join returns None, so the
    consumer calls ``on_partitions_lost`` before it owns anything again, instead of
    keeping the partitions with its old positions until the next rebalance."""
    import asyncio

    from kcodec.client.config import ConsumerConfig
    from kcodec.client.consumer.consumer_group import ConsumerGroupMember
    from kcodec.client.structs import TopicPartition

    async def go():
        config = ConsumerConfig(bootstrap_servers="127.0.0.1:1", group_id="g")
        m = ConsumerGroupMember(None, config)   # type: ignore[arg-type]
        tp = TopicPartition("t", 0)

        calls = []

        async def heartbeat(owned):            # the join's heartbeat answers fine ...
            if not calls:
                m.lost = True                  # ... after the loop's said "fenced"
            calls.append(owned)
            m.epoch, m.pending = 1, {tp}
        m._heartbeat = heartbeat               # type: ignore[method-assign]
        m._start_heartbeat = lambda: None      # type: ignore[method-assign]
        assert await m.join(["t"], {tp}) is None and m.lost
        m.lost = False                         # (the caller says so, then joins owning none)
        assert await m.join(["t"], set()) == {tp} and not m.lost
    asyncio.run(go())
