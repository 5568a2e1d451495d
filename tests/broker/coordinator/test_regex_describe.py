"""A pattern subscription matches only the topics its member's principal may DESCRIBE (as
Kafka since KAFKA-18813), and ConsumerGroupDescribe refuses a group whose topics the caller
may not describe, naming none of them."""

from __future__ import annotations

import time

from kcodec.broker import Cluster
from kcodec.broker.authorizer import allow
from kcodec.broker.security import ListenerSecurity, PlainServer
from kcodec.client import Consumer, TopicPartition
from kcodec.protocol import ConsumerGroupDescribeRequest, ErrorCode
from tests.support.raw_client import Raw

USERS = {"alice": "pw", "bob": "pw", "admin": "pw"}


def test_a_pattern_matches_only_describable_topics():
    sec = ListenerSecurity(sasl={"PLAIN": lambda: PlainServer(USERS)})
    with Cluster(1, security=sec, authorizer=True, super_users=["User:admin"]) as c:
        c.consumer_groups.heartbeat_interval_ms = 100
        for name in ("pub-a", "pub-b", "hidden"):
            c.create_topic(name, 1)
        c.authorizer.add(allow("User:alice", "read", "group", "rx"),
                         allow("User:alice", "read", "topic", "pub-", prefixed=True),
                         allow("User:bob", "describe", "group", "rx"),
                         allow("User:bob", "describe", "topic", "pub-a"))
        con = Consumer(bootstrap_servers=c.bootstrap, group_id="rx", group_protocol="consumer",
                       security_protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN",
                       sasl_username="alice", sasl_password="pw", metadata_max_age_ms=200,
                       api_timeout_ms=15000, request_timeout_ms=10000)
        try:
            con.subscribe(pattern=".*")
            want = {TopicPartition("pub-a", 0), TopicPartition("pub-b", 0)}
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and con.assignment() != want:
                con.poll(0.05)
            assert con.assignment() == want
            g = c.consumer_groups.describe("rx")
            assert {t for ts in g.target.values() for t in ts} == {"pub-a", "pub-b"}
            host, port = c.bootstrap.split(",")[0].rsplit(":", 1)
            # bob may describe the group but not pub-b: refused, no topic named
            bob = Raw((host, int(port)), "bob")
            try:
                (got,) = bob.call(ConsumerGroupDescribeRequest(group_ids=["rx"]), 0).groups
                assert got.error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED
                assert got.members == [] and "pub-b" not in (got.error_message or "")
            finally:
                bob.close()
            admin = Raw((host, int(port)), "admin")
            try:
                (got,) = admin.call(ConsumerGroupDescribeRequest(group_ids=["rx"]), 0).groups
                assert got.error_code == 0 and len(got.members) == 1
            finally:
                admin.close()
        finally:
            con.close()
