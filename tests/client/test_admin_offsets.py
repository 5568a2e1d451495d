"""Admin.alter_consumer_group_offsets: a non-member's commit (kafka-consumer-groups
--reset-offsets), with an error per partition where the broker refuses one."""

from __future__ import annotations

import time

from kcodec.broker import Cluster
from kcodec.client import Admin, Consumer, KafkaError, TopicPartition


def test_a_groups_offsets_are_set_and_read_back() -> None:
    with Cluster(1) as c:
        c.create_topic("t", 2)
        with Admin(bootstrap_servers=c.bootstrap) as a:
            got = a.alter_consumer_group_offsets("g", {TopicPartition("t", 0): 5,
                                                       TopicPartition("t", 1): 7})
            assert got == {TopicPartition("t", 0): None, TopicPartition("t", 1): None}
            assert a.committed_offsets("g", ["t"]) == {TopicPartition("t", 0): 5,
                                                       TopicPartition("t", 1): 7}


def test_a_live_classic_groups_partitions_are_refused_per_partition() -> None:
    with Cluster(1) as c:
        c.create_topic("t", 1)
        member = Consumer(bootstrap_servers=c.bootstrap, group_id="live", group_protocol="classic",
                          auto_offset_reset="earliest")
        try:
            member.subscribe(["t"])
            deadline = time.monotonic() + 20
            while not member.assignment() and time.monotonic() < deadline:
                member.poll(0.05)
            assert member.assignment()
            with Admin(bootstrap_servers=c.bootstrap) as a:
                got = a.alter_consumer_group_offsets("live", {TopicPartition("t", 0): 3})
            err = got[TopicPartition("t", 0)]
            assert isinstance(err, KafkaError) and not err.retriable, got
            assert "live" in str(err) and "t[0]" in str(err)
        finally:
            member.close()
