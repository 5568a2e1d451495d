"""Group assignments name topics by id: a topic deleted and created again under its name,
with the same partition count, is another topic, and live members of share groups and of
consumer-protocol groups get the new id (before, they kept fetching the old one and got
nothing, while a new member got everything)."""

from __future__ import annotations

import time

import pytest

from kcodec.broker import Cluster
from kcodec.protocol import ConsumerGroupHeartbeatRequest, ShareGroupHeartbeatRequest
from tests.support.broker_raw import Raw


@pytest.fixture(scope="module")
def kb():
    with Cluster(1) as c:
        yield c


def _ids(r: object) -> set:
    a = r.assignment
    return set() if a is None else {tp.topic_id for tp in a.topic_partitions}


def _recreate(c: Cluster, name: str) -> object:
    old = c.state.topics[name].topic_id
    c.delete_topic(name)
    c.create_topic(name, 2)
    new = c.state.topics[name].topic_id
    assert new != old
    return new


def test_a_share_member_is_given_a_recreated_topics_new_id(kb):
    H = ShareGroupHeartbeatRequest
    kb.create_topic("sr", 2)
    def until_assigned(raw: Raw, epoch: int) -> object:
        # a topic is assigned once its share state is set up (a heartbeat or two later)
        for _ in range(20):
            r = raw.call(H(group_id="sg", member_id="m", member_epoch=epoch), 1)
            assert r.error_code == 0
            if _ids(r):
                return r
            epoch = r.member_epoch
            time.sleep(r.heartbeat_interval_ms / 1000)
        raise AssertionError("never assigned")

    with Raw(kb.bootstrap) as raw:
        r = raw.call(H(group_id="sg", member_id="m", member_epoch=0,
                       subscribed_topic_names=["sr"]), 1)
        assert r.error_code == 0
        r = until_assigned(raw, r.member_epoch)
        assert _ids(r) == {kb.state.topics["sr"].topic_id}
        r = raw.call(H(group_id="sg", member_id="m", member_epoch=r.member_epoch), 1)
        assert r.error_code == 0 and r.assignment is None      # nothing new
        new = _recreate(kb, "sr")
        r = until_assigned(raw, r.member_epoch)
        assert _ids(r) == {new}


def test_a_consumer_protocol_member_is_given_a_recreated_topics_new_id(kb):
    H = ConsumerGroupHeartbeatRequest
    kb.create_topic("cr", 2)
    with Raw(kb.bootstrap) as raw:
        r = raw.call(H(group_id="cg", member_id="m", member_epoch=0, rebalance_timeout_ms=30000,
                       subscribed_topic_names=["cr"], topic_partitions=[]), 0)
        assert r.error_code == 0 and _ids(r) == {kb.state.topics["cr"].topic_id}
        owned = [H.TopicPartitions(topic_id=tp.topic_id, partitions=tp.partitions)
                 for tp in r.assignment.topic_partitions]
        r = raw.call(H(group_id="cg", member_id="m", member_epoch=r.member_epoch,
                       topic_partitions=owned), 0)
        assert r.error_code == 0 and r.assignment is None
        new = _recreate(kb, "cr")
        r = raw.call(H(group_id="cg", member_id="m", member_epoch=r.member_epoch), 0)
        assert r.error_code == 0 and _ids(r) == {new}


def test_a_static_instance_id_in_use_is_refused(kb):
    """KIP-848 static membership as Kafka: joining with an instance id that a live member
    holds is UNRELEASED_INSTANCE_ID (librdkafka's 0102 fenced-member case); once that
    member leaves with epoch -2 the id can be taken."""
    from kcodec.protocol import ErrorCode

    H = ConsumerGroupHeartbeatRequest
    kb.create_topic("st", 1)
    with Raw(kb.bootstrap) as raw:
        def join(member: str) -> object:
            return raw.call(H(group_id="static", member_id=member, member_epoch=0,
                              instance_id="consumer2", rebalance_timeout_ms=30000,
                              subscribed_topic_names=["st"], topic_partitions=[]), 0)
        first = join("a")
        assert first.error_code == 0
        assert join("b").error_code == ErrorCode.UNRELEASED_INSTANCE_ID
        assert join("a").error_code == 0               # the holder itself may rejoin
        raw.call(H(group_id="static", member_id="a", member_epoch=-2, instance_id="consumer2"), 0)
        assert join("b").error_code == 0
