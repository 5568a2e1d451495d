"""pytest fixtures for the kcodec broker.

    # conftest.py
    pytest_plugins = ["kcodec.testing.fixtures"]

    def test_roundtrip(kafka_broker):           # one node, memory storage, a free port
        produce_to(kafka_broker.bootstrap) ...

    def test_failover(kafka_cluster):           # three nodes
        kafka_cluster.stop_node(1) ...

Each test gets its own broker; it is stopped after the test. The fixtures' brokers form
classic groups at once (``group.initial.rebalance.delay.ms=0``, as Kafka's own test
clusters); otherwise they have the broker's defaults (Kafka's).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kcodec.broker.cluster import Cluster

__all__ = ["kafka_broker", "kafka_cluster", "TEST_CONFIG"]

#: the broker configs of the fixtures' brokers (Kafka's defaults otherwise)
TEST_CONFIG = {"group.initial.rebalance.delay.ms": 0}


@pytest.fixture
def kafka_broker() -> Iterator[Cluster]:
    with Cluster(1, config=TEST_CONFIG) as c:
        yield c


@pytest.fixture
def kafka_cluster() -> Iterator[Cluster]:
    with Cluster(3, config=TEST_CONFIG) as c:
        yield c
