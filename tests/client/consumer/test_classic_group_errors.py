"""kcodec's classic group member says a refused session timeout plainly, once, instead of
rejoining in a loop."""

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
