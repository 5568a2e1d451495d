"""Assignors and the consumer-protocol metadata blobs."""

from __future__ import annotations

import pytest

from kcodec.client.config import ConsumerConfig, ProducerConfig, parse_bootstrap
from kcodec.client.consumer.assignors import (
    Assignment,
    CooperativeStickyAssignor,
    RangeAssignor,
    RoundRobinAssignor,
    Subscription,
    get_assignor,
)
from kcodec.errors import ProtocolError

# kafka-python 3 reads its bundled specs with a deprecated importlib.resources call
pytestmark = pytest.mark.filterwarnings("ignore:read_text is deprecated:DeprecationWarning")


@pytest.mark.peers
def test_subscription_roundtrip_and_kafka_python() -> None:
    from kafka.protocol.old.consumer_protocol import (
        ConsumerProtocolMemberAssignment_v0,
        ConsumerProtocolMemberMetadata_v0,
    )

    s = Subscription(["a", "b"], b"ud", version=0)
    assert s.encode() == ConsumerProtocolMemberMetadata_v0(0, ["a", "b"], b"ud").encode()
    a = Assignment({"t": [0, 1], "u": [3]}, b"x", version=0)
    assert a.encode() == ConsumerProtocolMemberAssignment_v0(0, [("t", [0, 1]), ("u", [3])], b"x").encode()
    for v in (0, 1, 2, 3):
        s = Subscription(["x"], None, {"x": [0, 2]}, 7, "r1", version=v)
        d = Subscription.decode(s.encode())
        assert d.topics == ["x"] and d.version == v
        if v >= 1:
            assert d.owned_partitions == {"x": [0, 2]}


def test_assignment_roundtrip() -> None:
    a = Assignment({"t": [0, 1], "u": [3]}, b"x")
    assert Assignment.decode(a.encode()) == a
    assert Assignment.decode(b"") == Assignment()


@pytest.mark.parametrize("blob", [b"\x00", b"\x00\x00\x7f\xff\xff\xff", b"\x00\x00\x00\x00\x00\x01\x00\x09ab"])
def test_bad_blobs(blob: bytes) -> None:
    with pytest.raises(ProtocolError):
        Subscription.decode(blob)


def _subs(topics, members, owned=None):
    return {m: Subscription(list(topics), owned_partitions=(owned or {}).get(m, {}), generation_id=1)
            for m in members}


def test_range() -> None:
    a = RangeAssignor().assign({"t": 5, "u": 2}, _subs(["t", "u"], ["c1", "c2"]))
    assert a["c1"].assigned_partitions == {"t": [0, 1, 2], "u": [0]}
    assert a["c2"].assigned_partitions == {"t": [3, 4], "u": [1]}


def test_roundrobin() -> None:
    a = RoundRobinAssignor().assign({"t": 3, "u": 2}, _subs(["t", "u"], ["c1", "c2"]))
    assert a["c1"].assigned_partitions == {"t": [0, 2], "u": [1]}
    assert a["c2"].assigned_partitions == {"t": [1], "u": [0]}


def test_cooperative_sticky_keeps_and_revokes() -> None:
    ca = CooperativeStickyAssignor()
    first = ca.assign({"t": 4}, _subs(["t"], ["c1"]))
    assert first["c1"].assigned_partitions == {"t": [0, 1, 2, 3]}
    # c2 joins: c1 keeps two, the other two are withheld until c1 revokes them
    owned = {"c1": {"t": [0, 1, 2, 3]}}
    second = ca.assign({"t": 4}, _subs(["t"], ["c1", "c2"], owned))
    kept = second["c1"].assigned_partitions["t"]
    assert len(kept) == 2 and second["c2"].assigned_partitions == {}
    third = ca.assign({"t": 4}, _subs(["t"], ["c1", "c2"], {"c1": {"t": kept}}))
    assert third["c1"].assigned_partitions["t"] == kept
    assert sorted(third["c2"].assigned_partitions["t"]) == sorted(set(range(4)) - set(kept))


def test_config_validation() -> None:
    assert parse_bootstrap("a:1, b:2") == [("a", 1), ("b", 2)]
    for bad in ("a:x", "", "a:0"):
        with pytest.raises(ValueError):
            parse_bootstrap(bad)
    assert ProducerConfig(acks="all").acks == -1
    with pytest.raises(ValueError, match="compression_type"):
        ProducerConfig(compression_type="brotli")
    with pytest.raises(ValueError, match="idempotence"):
        ProducerConfig(acks=1)
    assert ProducerConfig(acks=1, enable_idempotence=False).acks == 1
    with pytest.raises(ValueError, match="unknown"):
        ProducerConfig.from_kwargs(lingr_ms=3)
    assert ProducerConfig.from_kwargs({"linger.ms": 3}).linger_ms == 3
    with pytest.raises(ValueError, match="linger_ms"):
        ProducerConfig(linger_ms=-1)
    with pytest.raises(ValueError, match="assignor"):
        ConsumerConfig(partition_assignment_strategy="sticky-ish")
    with pytest.raises(ValueError):
        get_assignor("nope")


@pytest.mark.parametrize("cls,kw,msg", [
    (ProducerConfig, {"batch_size": "x"}, "batch_size must be a non-negative integer, got 'x'"),
    (ProducerConfig, {"batch_size": 0}, "batch_size must be positive"),
    (ProducerConfig, {"buffer_memory": -1}, "buffer_memory must be a non-negative integer"),
    (ProducerConfig, {"retries": True}, "retries must be a non-negative integer"),
    (ProducerConfig, {"max_in_flight_requests_per_connection": 0}, "at least 1"),
    (ProducerConfig, {"max_in_flight_requests_per_connection": 6}, "<= 5"),
    (ProducerConfig, {"acks": 2}, "acks must be 0, 1 or 'all'"),
    (ProducerConfig, {"enable_idempotence": 1}, "enable_idempotence must be True or False"),
    (ProducerConfig, {"compression_type": "gzip", "compression_level": 99},
     "compression_level 99 is not valid for gzip"),
    (ProducerConfig, {"compression_level": 3}, "compression_level 3 is not valid for none"),
    (ProducerConfig, {"transactional_id": "tx", "enable_idempotence": False, "acks": 1},
     "transactional_id requires enable_idempotence"),
    (ProducerConfig, {"transactional_id": ""}, "transactional_id must be a non-empty string"),
    (ProducerConfig, {"client_id": 5}, "client_id must be a string"),
    (ProducerConfig, {"request_timeout_ms": 1.5}, "request_timeout_ms must be a non-negative integer"),
    (ProducerConfig, {"bootstrap_servers": "host:99999"}, "bootstrap_servers: bad address"),
    (ConsumerConfig, {"auto_offset_reset": "smallest"}, "auto_offset_reset must be earliest, latest or none"),
    (ConsumerConfig, {"isolation_level": "committed"}, "isolation_level must be read_uncommitted or"),
    (ConsumerConfig, {"fetch_min_bytes": -1}, "fetch_min_bytes must be a non-negative integer"),
    (ConsumerConfig, {"check_crcs": "yes"}, "check_crcs must be True or False"),
    (ConsumerConfig, {"max_poll_records": 0}, "max_poll_records must be at least 1"),
    (ConsumerConfig, {"group_id": ""}, "group_id must be a non-empty string or None"),
    (ConsumerConfig, {"heartbeat_interval_ms": 5000, "session_timeout_ms": 5000},
     "heartbeat_interval_ms must be lower than session_timeout_ms"),
])
def test_config_errors_name_the_property(cls, kw, msg) -> None:
    with pytest.raises(ValueError, match=msg.replace("(", r"\(").replace(")", r"\)")):
        cls(**kw)


def test_clients_validate_config_before_connecting() -> None:
    """Bad config fails at construction with ValueError, before any connection is tried."""
    from kcodec.client import Admin, Consumer, Producer

    for make in (lambda: Producer(bootstrap_servers="127.0.0.1:1", linger_ms=-5),
                 lambda: Consumer(bootstrap_servers="127.0.0.1:1", auto_offset_reset="nope"),
                 lambda: Admin(bootstrap_servers="127.0.0.1:1", not_a_property=1)):
        with pytest.raises(ValueError):
            make()
