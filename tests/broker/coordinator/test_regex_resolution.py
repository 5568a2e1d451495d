"""KIP-848 regular-expression subscriptions are resolved apart from the heartbeat, as in
Kafka: a member subscribing to a pattern and a name gets the named topic at once and the
matched ones at a later heartbeat (librdkafka's 0045 resubscribe_with_regex expects it),
with a short heartbeat interval meanwhile."""

from __future__ import annotations

import time

from kcodec.broker import Cluster
from kcodec.protocol import ConsumerGroupHeartbeatRequest as H
from tests.support.broker_raw import Raw


def test_named_topics_first_then_the_matched_ones():
    with Cluster(1) as c:
        c.create_topic("re-one", 2)
        c.create_topic("re-two", 2)
        c.create_topic("named", 1)
        ids = {c.state.topics[t].topic_id: t for t in ("re-one", "re-two", "named")}
        with Raw(c.bootstrap) as raw:
            r = raw.call(H(group_id="g", member_id="m", member_epoch=0, rebalance_timeout_ms=30000,
                           subscribed_topic_names=["named"], subscribed_topic_regex="re-.*",
                           topic_partitions=[]), 1)
            assert r.error_code == 0
            assert {ids[tp.topic_id] for tp in r.assignment.topic_partitions} == {"named"}
            assert r.heartbeat_interval_ms <= 250
            owned = [H.TopicPartitions(topic_id=tp.topic_id, partitions=tp.partitions)
                     for tp in r.assignment.topic_partitions]
            got = None
            for _ in range(20):
                time.sleep(r.heartbeat_interval_ms / 1000)
                r = raw.call(H(group_id="g", member_id="m", member_epoch=r.member_epoch,
                               topic_partitions=owned), 1)
                assert r.error_code == 0
                if r.assignment is not None:
                    got = {ids[tp.topic_id] for tp in r.assignment.topic_partitions}
                    break
            assert got == {"named", "re-one", "re-two"}
            assert r.heartbeat_interval_ms == 5000     # resolved: the group's interval again


def test_a_pattern_no_member_uses_any_more_is_resolved_again():
    with Cluster(1) as c:
        c.create_topic("re-one", 1)
        c.create_topic("named", 1)
        with Raw(c.bootstrap) as raw:
            def join() -> set:
                r = raw.call(H(group_id="g", member_id="m", member_epoch=0,
                               rebalance_timeout_ms=30000, subscribed_topic_names=["named"],
                               subscribed_topic_regex="re-.*", topic_partitions=[]), 1)
                assert r.error_code == 0
                return {tp.topic_id for tp in r.assignment.topic_partitions}
            assert join() == {c.state.topics["named"].topic_id}
            time.sleep(0.3)
            raw.call(H(group_id="g", member_id="m", member_epoch=-1), 1)     # leaves
            assert join() == {c.state.topics["named"].topic_id}              # again later


def test_a_topic_created_after_the_subscription_is_assigned():
    # librdkafka's 0113 n_wildcard: a pattern subscription gets topics created later
    with Cluster(1) as c:
        with Raw(c.bootstrap) as raw:
            r = raw.call(H(group_id="g", member_id="m", member_epoch=0, rebalance_timeout_ms=30000,
                           subscribed_topic_regex="late-.*", topic_partitions=[]), 1)
            assert r.error_code == 0
            c.create_topic("late-1", 2)
            tid = c.state.topics["late-1"].topic_id
            got: set = set()
            deadline = time.monotonic() + 15
            while time.monotonic() < deadline and not got:
                time.sleep(min(r.heartbeat_interval_ms, 500) / 1000)
                r = raw.call(H(group_id="g", member_id="m", member_epoch=r.member_epoch,
                               topic_partitions=[]), 1)
                assert r.error_code == 0
                if r.assignment is not None:
                    got = {(tp.topic_id, p) for tp in r.assignment.topic_partitions
                           for p in tp.partitions}
            assert got == {(tid, 0), (tid, 1)}
