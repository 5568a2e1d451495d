"""JoinGroup's session timeout bounds: group.min/max.session.timeout.ms (Kafka's 6000 and
1800000), answered INVALID_SESSION_TIMEOUT as Kafka does."""

from __future__ import annotations

import pytest

from kcodec.broker import Cluster
from kcodec.protocol import ErrorCode, JoinGroupRequest
from tests.support.broker_raw import Raw

J = JoinGroupRequest


def join(raw: Raw, session_ms: int, group: str = "g", version: int = 3) -> int:
    return raw.call(J(group_id=group, session_timeout_ms=session_ms, rebalance_timeout_ms=10000,
                      member_id="", protocol_type="consumer",
                      protocols=[J.JoinGroupRequestProtocol(name="range", metadata=b"")]),
                    version).error_code


@pytest.fixture(scope="module")
def kafka_defaults():
    """A broker with Kafka's group bounds (no suite-wide base config)."""
    saved = dict(Cluster.base_config)
    Cluster.base_config.clear()
    try:
        with Cluster(config={"group.initial.rebalance.delay.ms": 0}) as c:
            yield c
    finally:
        Cluster.base_config.update(saved)


@pytest.mark.parametrize("session_ms, code", [
    (100, ErrorCode.INVALID_SESSION_TIMEOUT),
    (5999, ErrorCode.INVALID_SESSION_TIMEOUT),
    (6000, ErrorCode.NONE),
    (1800000, ErrorCode.NONE),
    (1800001, ErrorCode.INVALID_SESSION_TIMEOUT),
])
def test_join_group_session_timeout_within_kafkas_bounds(kafka_defaults, session_ms, code):
    with Raw(kafka_defaults.bootstrap) as raw:
        assert join(raw, session_ms, group=f"g-{session_ms}") == code


def test_the_bounds_are_broker_configs():
    with Cluster(config={"group.initial.rebalance.delay.ms": 0,
                         "group.min.session.timeout.ms": 100,
                         "group.max.session.timeout.ms": 20000}) as c, Raw(c.bootstrap) as raw:
        assert join(raw, 100, "a") == ErrorCode.NONE
        assert join(raw, 20001, "b") == ErrorCode.INVALID_SESSION_TIMEOUT
        assert join(raw, 99, "c", version=9) == ErrorCode.INVALID_SESSION_TIMEOUT
