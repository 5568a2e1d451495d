"""The broker's configs by Kafka's names: Kafka 4.x's defaults, ``Cluster(config=)`` and
``kcodec broker --config``, Kafka's type and range errors."""

from __future__ import annotations

import time

import pytest

from kcodec.broker import Cluster
from kcodec.broker.cluster import _KEYWORD_DEFAULTS
from kcodec.broker.config import BROKER_CONFIGS, ConfigError
from kcodec.broker.config.broker import KCODEC_DEFAULTS, REASONS, default
from kcodec.cli import main
from kcodec.protocol import JoinGroupRequest
from tests.support.broker_raw import Raw

# Kafka 4.x's defaults (GroupCoordinatorConfig, SocketServerConfigs, ServerLogConfigs, ...)
KAFKA = {
    "group.initial.rebalance.delay.ms": 3000,
    "group.min.session.timeout.ms": 6000,
    "group.max.session.timeout.ms": 1800000,
    "group.consumer.session.timeout.ms": 45000,
    "group.consumer.heartbeat.interval.ms": 5000,
    "num.partitions": 1,
    "auto.create.topics.enable": True,
    "log.retention.check.interval.ms": 300000,
    "log.cleaner.enable": True,
    "log.cleaner.backoff.ms": 15000,
    "socket.request.max.bytes": 104857600,
    "connections.max.idle.ms": 600000,
    "sasl.server.max.receive.size": 524288,
    "connections.max.reauth.ms": 0,
    "connection.failed.authentication.delay.ms": 100,
    "max.connections": 2147483647,
    "allow.everyone.if.no.acl.found": False,
    "group.consumer.migration.policy": "bidirectional",
}


@pytest.fixture
def kafka_defaults(monkeypatch):
    """No suite-wide base config: the broker's own defaults."""
    monkeypatch.setattr(Cluster, "base_config", {})


def test_the_defaults_are_kafkas(kafka_defaults):
    c = Cluster()
    for name, value in KAFKA.items():
        assert c.config[name] == value, name
    assert c.config_given == set()
    for name in KCODEC_DEFAULTS:     # where kcodec differs, it says why
        assert REASONS[name] and KCODEC_DEFAULTS[name] != BROKER_CONFIGS[name].definition.default


def test_every_keyword_default_is_its_configs_default():
    """A Cluster keyword and its config are one setting: the same default."""
    for name, s in BROKER_CONFIGS.items():
        if s.keyword is None or name.startswith(("listener", "advertised")):   # host/port
            continue
        assert s.config_value(_KEYWORD_DEFAULTS[s.keyword]) == default(name), name


def _join_seconds(cluster: Cluster) -> float:
    J = JoinGroupRequest
    with Raw(cluster.bootstrap) as raw:
        t0 = time.monotonic()
        r = raw.call(J(group_id="g", session_timeout_ms=10000, rebalance_timeout_ms=10000,
                       member_id="", protocol_type="consumer",
                       protocols=[J.JoinGroupRequestProtocol(name="range", metadata=b"")]), 3)
        assert r.error_code == 0
        return time.monotonic() - t0


def test_a_new_classic_group_waits_the_initial_rebalance_delay(kafka_defaults):
    with Cluster() as c:
        assert c.groups.initial_rebalance_delay_ms == 3000
        assert _join_seconds(c) >= 2.9
    with Cluster(config={"group.initial.rebalance.delay.ms": "0"}) as c:
        assert _join_seconds(c) < 2.0


def test_config_sets_the_keyword_and_shows_as_given(kafka_defaults):
    c = Cluster(config={"num.io.threads": "3", "connections.max.idle.ms": 1500,
                        "max.connections": "10", "group.share.delivery.count.limit": 4,
                        "queued.max.request.bytes": "-1"})
    node = c.nodes[0]
    assert (node.n_handlers, node.idle_timeout_s) == (3, 1.5)
    assert c.config["max.connections"] == 10
    assert node.queued_max_bytes > 1 << 60
    assert c.share_group_configs == {"group.share.delivery.count.limit": 4}
    assert c.config["num.io.threads"] == 3
    assert {"num.io.threads", "max.connections", "group.share.delivery.count.limit"} \
        <= c.config_given
    # a keyword shows as its config
    assert Cluster(idle_timeout_s=2.0).config["connections.max.idle.ms"] == 2000


def test_base_config_lies_below_keywords_and_config(monkeypatch):
    monkeypatch.setattr(Cluster, "base_config", {"group.initial.rebalance.delay.ms": 0})
    assert Cluster()._initial_delay == 0
    assert Cluster(initial_rebalance_delay_ms=50)._initial_delay == 50
    assert Cluster(config={"group.initial.rebalance.delay.ms": 70})._initial_delay == 70


@pytest.mark.parametrize("config, message", [
    ({"num.partitions": "x"}, "Invalid value x for configuration num.partitions: Not a number "
                              "of type INT"),
    ({"num.partitions": 0}, "Invalid value 0 for configuration num.partitions: Value must be "
                            "at least 1"),
    ({"num.partitions": 1 << 40}, "Not a number of type INT"),
    ({"auto.create.topics.enable": "yes"}, "Expected value to be either true or false"),
    ({"group.consumer.migration.policy": "sideways"}, "String must be one of: disabled, "
                                                      "downgrade, upgrade, bidirectional"),
    ({"group.initial.rebalance.delay.ms": -1}, "Value must be at least 0"),
    ({"no.such.config": 1}, "unknown broker config 'no.such.config'"),
    ({"authorizer.class.name": "com.example.Mine"}, "StandardAuthorizer only"),
])
def test_bad_configs_are_refused_as_kafka_refuses_them(config, message):
    with pytest.raises(ConfigError, match=message.replace(".", r"\.")):
        Cluster(config=config)


def test_a_config_and_its_keyword_together_are_refused():
    with pytest.raises(ConfigError, match="num.network.threads given twice"):
        Cluster(processors=3, config={"num.network.threads": 4})


def test_kafka_names_reach_the_authorizer():
    c = Cluster(config={"authorizer.class.name":
                        "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                        "super.users": "User:admin", "allow.everyone.if.no.acl.found": "true"})
    assert c.authorizer is not None


def test_cli_config_is_checked_before_the_broker_starts(capsys):
    assert main(["broker", "--config", "num.partitions=0"]) == 2
    assert "Invalid value 0 for configuration num.partitions" in capsys.readouterr().err
    assert main(["broker", "--config", "num.partitions"]) == 2
    assert "give NAME=VALUE" in capsys.readouterr().err


def test_a_kafka_test_clusters_usual_configs_are_accepted_and_inert():
    from kcodec.broker.config.broker import INERT

    c = Cluster(config={"offsets.topic.replication.factor": "1", "node.id": "1",
                        "transaction.state.log.min.isr": "1", "log.dirs": "/tmp/x",
                        "group.coordinator.rebalance.protocols": "classic,consumer"})
    assert c.config["offsets.topic.replication.factor"] == 1
    assert set(INERT) <= set(BROKER_CONFIGS)
    with pytest.raises(ConfigError, match="Not a number of type SHORT"):
        Cluster(config={"offsets.topic.replication.factor": "100000"})


def _sasl_listener(lifetime_ms: int = 0):
    from kcodec.broker.security import ListenerSecurity
    from kcodec.broker.security.sasl import PlainServer

    return ListenerSecurity(sasl={"PLAIN": lambda: PlainServer({"alice": "pw"})},
                            connections_max_reauth_ms=lifetime_ms)


def _described(c: Cluster, name: str) -> tuple[str | None, int]:
    from kcodec.broker.config.dynamic import describe_broker

    entry = next(e for e in describe_broker(c, "0") if e.name == name)
    return entry.value, entry.source


def test_the_session_lifetime_config_reaches_the_sasl_listeners():
    # librdkafka's re-authentication test reads it with DescribeConfigs and skips at 0
    sec = _sasl_listener()
    c = Cluster(security=sec, config={"connections.max.reauth.ms": 5000})
    assert sec.connections_max_reauth_ms == 5000
    assert sec.gate().auth.max_reauth_ms == 5000
    assert _described(c, "connections.max.reauth.ms") == ("5000", 4)   # STATIC_BROKER_CONFIG


def test_a_listeners_own_session_lifetime_is_what_the_config_shows():
    c = Cluster(security=_sasl_listener(7000))
    assert c.config["connections.max.reauth.ms"] == 7000
    assert _described(c, "connections.max.reauth.ms") == ("7000", 4)
    plain = Cluster()
    assert _described(plain, "connections.max.reauth.ms") == ("0", 5)   # DEFAULT_CONFIG
