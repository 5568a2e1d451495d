"""The group protocol a consumer uses by default, and pattern subscriptions.

* ``group_protocol`` defaults to ``consumer`` (KIP-848) where the group's coordinator offers
  ConsumerGroupHeartbeat, and falls back to classic with one notice on the ``kcodec.client``
  logger where it does not (Tansu, noida-db, a kcodec broker with the API taken away);
* ``subscribe(pattern=...)``: broker-side RE2/J matching under the consumer protocol (kcodec's
  broker), client-side matching under classic; new matching topics picked up, deleted ones
  dropped; a pattern RE2 rejects is INVALID_REGULAR_EXPRESSION;
* classic members rejoin when a subscribed topic's partition count changes.
"""

from __future__ import annotations

import logging
import time
import uuid

import pytest

from kcodec.broker import Cluster
from kcodec.client import Consumer, KafkaError, Producer, TopicPartition
from kcodec.client.config import ConsumerConfig
from kcodec.client.consumer.classic_group import ClassicGroupMember
from kcodec.client.consumer.consumer_group import ConsumerGroupMember

pytestmark = [pytest.mark.broker]
FAST = dict(api_timeout_ms=15000, request_timeout_ms=10000, auto_offset_reset="earliest",
            session_timeout_ms=6000, heartbeat_interval_ms=200)


def _fill(bootstrap: str, topic: str, n: int, partitions: int = 1) -> None:
    with Producer(bootstrap_servers=bootstrap) as p:
        for i in range(n):
            p.send(topic, f"{topic}-{i}".encode(), partition=i % partitions)
        p.flush()


def _poll_until(consumers, cond, seen=None, timeout=40.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for c in consumers:
            for recs in c.poll(0.05).values():
                if seen is not None:
                    seen.extend(r.value for r in recs)
        if cond():
            return True
    return False


def test_consumer_protocol_is_the_default():
    assert ConsumerConfig().group_protocol == "consumer"
    assert ConsumerConfig(group_protocol="classic").group_protocol == "classic"


def test_default_uses_the_consumer_protocol_on_kcodecs_broker(caplog):
    with Cluster() as c:
        c.consumer_groups.heartbeat_interval_ms = 100
        c.create_topic("d", 2)
        _fill(c.bootstrap, "d", 10, 2)
        caplog.set_level(logging.WARNING, logger="kcodec.client")
        with Consumer("d", bootstrap_servers=c.bootstrap, group_id="dg", **FAST) as con:
            seen: list[bytes] = []
            assert _poll_until([con], lambda: len(seen) == 10, seen)
            assert isinstance(con._engine.group, ConsumerGroupMember)
            assert c.consumer_groups.describe("dg").members      # a KIP-848 member
        assert not [r for r in caplog.records if r.name.startswith("kcodec.client")]


def _falls_back(bootstrap: str, caplog, topic: str) -> None:
    caplog.set_level(logging.WARNING, logger="kcodec.client")
    with Consumer(topic, bootstrap_servers=bootstrap, group_id=f"fb-{topic}", **FAST) as con:
        seen: list[bytes] = []
        assert _poll_until([con], lambda: len(seen) == 5, seen, timeout=30)
        assert isinstance(con._engine.group, ClassicGroupMember)
        assert not isinstance(con._engine.group, ConsumerGroupMember)
        con.commit()
        assert con.committed([TopicPartition(topic, 0)])[TopicPartition(topic, 0)] == 5
    notes = [r.getMessage() for r in caplog.records if r.name.startswith("kcodec.client")]
    assert len(notes) == 1 and "classic protocol" in notes[0] and "\n" not in notes[0]
    assert "group_protocol='classic'" in notes[0]


def test_falls_back_to_classic_where_the_broker_lacks_the_api(caplog):
    with Cluster() as c:
        c.cap_versions("ConsumerGroupHeartbeat", -1)     # advertised no more
        c.create_topic("old", 1)
        _fill(c.bootstrap, "old", 5)
        _falls_back(c.bootstrap, caplog, "old")
        assert c.consumer_groups.describe("fb-old") is None     # a classic group


def test_falls_back_to_classic_on_tansu(broker, caplog):
    topic = f"tansu-{uuid.uuid4().hex[:8]}"
    from kcodec.client import Admin

    with Admin(bootstrap_servers=broker.bootstrap) as admin:
        admin.create_topics([topic], num_partitions=1)
    _fill(broker.bootstrap, topic, 5)
    _falls_back(broker.bootstrap, caplog, topic)


@pytest.mark.peers
def test_falls_back_to_classic_on_noida(caplog):
    from kcodec.testing.noida import Noida, noida_binary

    if noida_binary() is None:
        pytest.skip("noida-db is not installed (the test extra installs it on x86-64 Linux)")
    with Noida() as n:
        from kcodec.client import Admin

        with Admin(bootstrap_servers=n.bootstrap) as admin:
            admin.create_topics(["nd"], num_partitions=1)
        _fill(n.bootstrap, "nd", 5)
        _falls_back(n.bootstrap, caplog, "nd")


# ---------------------------------------------------------------------- patterns
def _topics(c: Cluster, *names: str, partitions: int = 2) -> None:
    for name in names:
        c.create_topic(name, partitions)


@pytest.mark.parametrize("protocol", ["consumer", "classic"])
def test_pattern_subscription_follows_topics_as_they_come_and_go(protocol):
    with Cluster() as c:
        c.consumer_groups.heartbeat_interval_ms = 100
        _topics(c, "orders-eu", "orders-us", "other")
        con = Consumer(bootstrap_servers=c.bootstrap, group_id=f"rx-{protocol}",
                       group_protocol=protocol, metadata_max_age_ms=200, **FAST)
        try:
            con.subscribe(pattern=r"orders-.*")
            want = {TopicPartition(t, p) for t in ("orders-eu", "orders-us") for p in (0, 1)}
            assert _poll_until([con], lambda: con.assignment() == want)
            _topics(c, "orders-asia")                           # a new matching topic
            want |= {TopicPartition("orders-asia", p) for p in (0, 1)}
            assert _poll_until([con], lambda: con.assignment() == want)
            seen: list[bytes] = []
            _fill(c.bootstrap, "orders-asia", 4, 2)
            assert _poll_until([con], lambda: len(seen) == 4, seen)
            c.delete_topic("orders-eu")                         # a deleted one
            want = {tp for tp in want if tp.topic != "orders-eu"}
            assert _poll_until([con], lambda: con.assignment() == want)
            assert isinstance(con._engine.group, ConsumerGroupMember) is (protocol == "consumer")
        finally:
            con.close()


def test_pattern_is_matched_by_the_broker_under_the_consumer_protocol():
    with Cluster() as c:
        c.consumer_groups.heartbeat_interval_ms = 100
        _topics(c, "logs.app1", "logs.app2", "logsXapp3")
        with Consumer(bootstrap_servers=c.bootstrap, group_id="rx-b", **FAST) as con:
            con.subscribe(pattern=r"logs\.app\d+")
            assert _poll_until([con], lambda: len(con.assignment()) == 4)
            g = c.consumer_groups.describe("rx-b")
            (member,) = g.members.values()
            assert member.regex == r"logs\.app\d+" and member.topics == []
            assert {tp.topic for tp in con.assignment()} == {"logs.app1", "logs.app2"}


def test_a_pattern_re2_rejects_is_refused_with_the_reason():
    with Cluster() as c:
        with Consumer(bootstrap_servers=c.bootstrap, group_id="rx-bad", **FAST) as con:
            con.subscribe(pattern=r"(a)\1")                     # a backreference: not RE2/J
            with pytest.raises(KafkaError) as err:
                con.poll(1)
        assert err.value.name == "INVALID_REGULAR_EXPRESSION"
        assert "not a valid regular expression" in str(err.value)


def test_subscribe_takes_topics_or_a_pattern():
    con = Consumer(bootstrap_servers="127.0.0.1:1", group_id="x")
    try:
        with pytest.raises(ValueError, match="one of the two"):
            con.subscribe(["a"], pattern="a.*")
        with pytest.raises(ValueError, match="one of the two"):
            con.subscribe()
        with pytest.raises(ValueError, match="non-empty"):
            con.subscribe(pattern="")
    finally:
        con.close()


@pytest.mark.peers
def test_confluent_kafka_and_kcodec_share_a_pattern_group():
    """librdkafka sends a ``^``-prefixed subscription as SubscribedTopicRegex under the
    consumer protocol; kcodec's broker matches it, and the group is split between both."""
    confluent_kafka = pytest.importorskip("confluent_kafka")
    with Cluster() as c:
        c.consumer_groups.heartbeat_interval_ms = 100
        _topics(c, "mix-a", "mix-b", partitions=2)
        cc = confluent_kafka.Consumer({"bootstrap.servers": c.bootstrap, "group.id": "rx-mix",
                                       "group.protocol": "consumer",
                                       "auto.offset.reset": "earliest"})
        con = Consumer(bootstrap_servers=c.bootstrap, group_id="rx-mix", **FAST)
        try:
            cc.subscribe(["^mix-.*"])
            con.subscribe(pattern="mix-.*")
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                cc.poll(0.1)
                con.poll(0.05)
                theirs = {(tp.topic, tp.partition) for tp in cc.assignment()}
                mine = {(tp.topic, tp.partition) for tp in con.assignment()}
                if len(theirs) == len(mine) == 2 and not theirs & mine:
                    break
            assert len(theirs) == len(mine) == 2 and not theirs & mine
            assert theirs | mine == {(t, p) for t in ("mix-a", "mix-b") for p in (0, 1)}
        finally:
            cc.close()
            con.close()


# ---------------------------------------------------------------------- partition counts
def test_classic_members_rejoin_when_a_topic_gets_partitions():
    """The group leader (the only member here) watches the partition counts it assigned
    and rejoins when one grows, so the new partitions get an owner."""
    with Cluster() as c:
        c.create_topic("grow", 2)
        con = Consumer("grow", bootstrap_servers=c.bootstrap, group_id="grow-g",
                       group_protocol="classic", metadata_max_age_ms=200, **FAST)
        try:
            assert _poll_until([con], lambda: len(con.assignment()) == 2)
            assert con._engine.group.leader
            c.state.add_partitions("grow", 4)
            assert _poll_until([con], lambda: len(con.assignment()) == 4)
            assert sorted(con.assignment()) == [TopicPartition("grow", p) for p in range(4)]
            seen: list[bytes] = []
            _fill(c.bootstrap, "grow", 8, 4)
            assert _poll_until([con], lambda: len(seen) == 8, seen)
        finally:
            con.close()
