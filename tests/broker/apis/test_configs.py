"""DescribeConfigs, AlterConfigs and IncrementalAlterConfigs as Kafka 4.x answers them:
the whole topic config set with Kafka's checks, sources, synonyms and documentation;
APPEND / SUBTRACT; dynamic broker configs; and the topic configs acted on (recompression,
min.insync.replicas, timestamps)."""

from __future__ import annotations

import time

import pytest

from kcodec.broker import Cluster
from kcodec.broker.config.topic import INERT, TOPIC_CONFIGS
from kcodec.protocol import (
    AlterConfigsRequest,
    CreateTopicsRequest,
    DescribeConfigsRequest,
    ErrorCode,
    IncrementalAlterConfigsRequest,
    ProduceRequest,
)
from kcodec.records import RecordBatchBuilder, iter_batches
from tests.support.broker_raw import Raw

E = ErrorCode
TOPIC, BROKER = 2, 4
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
C, D, Inc, A = CreateTopicsRequest, DescribeConfigsRequest, IncrementalAlterConfigsRequest, \
    AlterConfigsRequest


@pytest.fixture(scope="module")
def kb():
    with Cluster(config={"log.retention.hours": 48}) as c:
        yield c


@pytest.fixture
def raw(kb):
    with Raw(kb.bootstrap) as r:
        yield r


_n = iter(range(10**6))


def create(raw: Raw, configs: dict[str, str | None], name: str | None = None) -> tuple:
    name = name or f"t{next(_n)}"
    r = raw.call(C(topics=[C.CreatableTopic(
        name=name, num_partitions=1, replication_factor=1, assignments=[],
        configs=[C.CreatableTopicConfig(name=k, value=v) for k, v in configs.items()])],
        timeout_ms=5000, validate_only=False), 7).topics[0]
    return name, r.error_code, r.error_message


def describe(raw: Raw, rtype: int, name: str, keys=None, version=4, synonyms=True, docs=True):
    r = raw.call(D(resources=[D.DescribeConfigsResource(resource_type=rtype, resource_name=name,
                                                        configuration_keys=keys)],
                   include_synonyms=synonyms, include_documentation=docs), version).results[0]
    return r, {c.name: c for c in r.configs}


def incremental(raw: Raw, rtype: int, name: str, ops: list, validate_only=False):
    r = raw.call(Inc(resources=[Inc.AlterConfigsResource(
        resource_type=rtype, resource_name=name,
        configs=[Inc.AlterableConfig(name=k, config_operation=op, value=v) for k, op, v in ops])],
        validate_only=validate_only), 1).responses[0]
    return r.error_code, r.error_message


def alter(raw: Raw, rtype: int, name: str, configs: dict[str, str]):
    r = raw.call(A(resources=[A.AlterConfigsResource(
        resource_type=rtype, resource_name=name,
        configs=[A.AlterableConfig(name=k, value=v) for k, v in configs.items()])],
        validate_only=False), 2).responses[0]
    return r.error_code, r.error_message


# ---------------------------------------------------------------- the topic config set
ISSUE_CONFIGS = {
    "compression.type": "zstd", "min.insync.replicas": "1", "min.cleanable.dirty.ratio": "0.2",
    "max.compaction.lag.ms": "600000", "file.delete.delay.ms": "1000",
    "segment.index.bytes": "4096", "segment.jitter.ms": "10", "preallocate": "true",
    "unclean.leader.election.enable": "false", "local.retention.ms": "-2",
    "remote.storage.enable": "false", "compression.gzip.level": "5",
}


def test_kafkas_standard_topic_configs_are_accepted(raw):
    _, code, msg = create(raw, ISSUE_CONFIGS)
    assert (code, msg) == (0, None)
    name, code, _ = create(raw, {})
    assert code == 0
    for k, v in ISSUE_CONFIGS.items():       # and by the alter calls
        assert incremental(raw, TOPIC, name, [(k, SET, v)]) == (0, None), k
    assert alter(raw, TOPIC, name, ISSUE_CONFIGS) == (0, None)


@pytest.mark.parametrize("configs, message", [
    ({"retention.ms": "soon"}, "Invalid value soon for configuration retention.ms: Not a "
                               "number of type LONG"),
    ({"retention.ms": "-2"}, "Invalid value -2 for configuration retention.ms: Value must be "
                             "at least -1"),
    ({"min.insync.replicas": "0"}, "Value must be at least 1"),
    ({"min.cleanable.dirty.ratio": "1.5"}, "Value must be no more than 1"),
    ({"compression.type": "brotli"}, "String must be one of: uncompressed, zstd, lz4, snappy, "
                                     "gzip, producer"),
    ({"compression.gzip.level": "12"}, "Value must be between 1 and 9, or equal to -1"),
    ({"compression.zstd.level": "23"}, "Value must be no more than 22"),
    ({"cleanup.policy": "delete,archive"}, "Invalid value archive for configuration "
                                           "cleanup.policy: String must be one of: compact, "
                                           "delete"),
    ({"preallocate": "maybe"}, "Expected value to be either true or false"),
    ({"segment.bytes": "1000"}, "Value must be at least 1048576"),
    ({"no.such.config": "1"}, "Unknown topic config name: no.such.config"),
    ({"message.format.version": "3.0"}, "Unknown topic config name: message.format.version"),
    ({"message.timestamp.difference.max.ms": "1"}, "Unknown topic config name"),
    ({"remote.storage.enable": "true"}, "Tiered Storage functionality is disabled"),
    ({"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"},
     "conflict topic config setting min.compaction.lag.ms (10) > max.compaction.lag.ms (5)"),
    ({"leader.replication.throttled.replicas": "0-1"}, "[partitionId]:[brokerId]"),
])
def test_bad_topic_configs_are_invalid_config_with_kafkas_message(raw, configs, message):
    _, code, msg = create(raw, configs)
    assert code == E.INVALID_CONFIG and message in msg
    name, _, _ = create(raw, {})
    code, msg = incremental(raw, TOPIC, name, [(k, SET, v) for k, v in configs.items()])
    assert code == E.INVALID_CONFIG and message in msg


def test_describe_shows_every_config_with_source_synonyms_type_and_documentation(raw):
    name, _, _ = create(raw, {"retention.bytes": "1000", "cleanup.policy": "compact"})
    r, got = describe(raw, TOPIC, name)
    assert r.error_code == 0 and set(got) == set(TOPIC_CONFIGS)
    own = got["retention.bytes"]
    assert (own.value, own.config_source, own.config_type) == ("1000", 1, 5)
    assert [(s.name, s.value, s.source) for s in own.synonyms] == [
        ("retention.bytes", "1000", 1), ("log.retention.bytes", "-1", 5)]
    # log.retention.hours=48 given at start: a static broker config under retention.ms
    ret = got["retention.ms"]
    assert (ret.value, ret.config_source) == (str(48 * 3600_000), 4)
    assert [(s.name, s.value, s.source) for s in ret.synonyms] == [
        ("log.retention.hours", "48", 4), ("log.retention.hours", "168", 5)]
    dflt = got["message.timestamp.after.max.ms"]
    assert (dflt.value, dflt.config_source) == ("3600000", 5)     # Kafka 4.0's default
    assert got["cleanup.policy"].config_type == 7 and got["preallocate"].config_type == 1
    assert got["min.cleanable.dirty.ratio"].value == "0.5"
    assert got["compression.type"].documentation
    assert not got["follower.replication.throttled.replicas"].synonyms
    # v0: is_default instead of sources; no documentation below v3
    _, v0 = describe(raw, TOPIC, name, version=0, synonyms=False, docs=False)
    assert v0["retention.bytes"].is_default is False and v0["segment.ms"].is_default is True
    _, v2 = describe(raw, TOPIC, name, ["segment.ms"], version=2, docs=False)
    assert list(v2) == ["segment.ms"] and not v2["segment.ms"].documentation


def test_describe_an_unknown_topic(raw):
    r, _ = describe(raw, TOPIC, "no-such-topic")
    assert r.error_code == E.UNKNOWN_TOPIC_OR_PARTITION


def test_every_inert_config_is_a_topic_config():
    assert set(INERT) <= set(TOPIC_CONFIGS) and len(TOPIC_CONFIGS) == 33


# ---------------------------------------------------------------- APPEND and SUBTRACT
def test_append_and_subtract_on_a_list_config(raw):
    name, _, _ = create(raw, {})
    assert incremental(raw, TOPIC, name, [("cleanup.policy", APPEND, "compact")]) == (0, None)
    assert describe(raw, TOPIC, name)[1]["cleanup.policy"].value == "delete,compact"
    assert incremental(raw, TOPIC, name, [("cleanup.policy", APPEND, "compact")]) == (0, None)
    assert describe(raw, TOPIC, name)[1]["cleanup.policy"].value == "delete,compact"
    assert incremental(raw, TOPIC, name, [("cleanup.policy", SUBTRACT, "delete")]) == (0, None)
    assert describe(raw, TOPIC, name)[1]["cleanup.policy"].value == "compact"
    assert incremental(raw, TOPIC, name, [("cleanup.policy", DELETE, None)]) == (0, None)
    got = describe(raw, TOPIC, name)[1]["cleanup.policy"]
    assert (got.value, got.config_source) == ("delete", 5)


def test_append_and_subtract_refused_on_other_types(raw):
    name, _, _ = create(raw, {})
    assert incremental(raw, TOPIC, name, [("retention.ms", APPEND, "1")]) == (
        E.INVALID_CONFIG, "Config value append is not allowed for config key: retention.ms")
    assert incremental(raw, TOPIC, name, [("retention.ms", SUBTRACT, "1")]) == (
        E.INVALID_CONFIG, "Config value subtract is not allowed for config key: retention.ms")
    code, msg = incremental(raw, TOPIC, name, [("retention.ms", SET, "1"),
                                               ("retention.ms", DELETE, None)])
    assert code == E.INVALID_REQUEST and "duplicate" in msg
    assert incremental(raw, TOPIC, name, [("retention.ms", 7, "1")])[0] == E.INVALID_REQUEST


def test_validate_only_changes_nothing(raw):
    name, _, _ = create(raw, {})
    assert incremental(raw, TOPIC, name, [("retention.ms", SET, "5000")],
                       validate_only=True) == (0, None)
    assert describe(raw, TOPIC, name)[1]["retention.ms"].config_source == 4


# ---------------------------------------------------------------- acted on
def batch(codec: int = 0, ts: int | None = None) -> bytes:
    b = RecordBatchBuilder(compression=codec)
    now = int(time.time() * 1000) if ts is None else ts
    for i in range(3):
        b.append(b"k%d" % i, b"value-%d" % i * 20, [], now + i)
    return b.build()


def produce(raw: Raw, topic: str, records: bytes, acks: int = -1):
    P = ProduceRequest
    r = raw.call(P(acks=acks, timeout_ms=5000, topic_data=[P.TopicProduceData(
        name=topic, partition_data=[P.PartitionProduceData(index=0, records=records)])]), 9)
    return r.responses[0].partition_responses[0]


@pytest.mark.parametrize("target, stored", [("zstd", 4), ("uncompressed", 0), ("lz4", 3),
                                            ("producer", 1)])
def test_compression_type_recompresses_as_kafka(kb, raw, target, stored):
    name, _, _ = create(raw, {"compression.type": target})
    assert produce(raw, name, batch(codec=1)).error_code == 0
    log = kb.state.partition(name, 0).log
    (b,) = list(iter_batches(log.read(0, 1 << 20)))
    assert b.compression == stored
    assert [(r.offset, r.key) for r in b] == [(0, b"k0"), (1, b"k1"), (2, b"k2")]


def test_compression_type_follows_a_change(kb, raw):
    name, _, _ = create(raw, {})
    assert incremental(raw, TOPIC, name, [("compression.type", SET, "gzip"),
                                          ("compression.gzip.level", SET, "1")]) == (0, None)
    produce(raw, name, batch(codec=0))
    (b,) = list(iter_batches(kb.state.partition(name, 0).log.read(0, 1 << 20)))
    assert b.compression == 1


def test_min_insync_replicas_against_acks_all(raw):
    name, _, _ = create(raw, {"min.insync.replicas": "2"})
    r = produce(raw, name, batch(), acks=-1)
    assert r.error_code == E.NOT_ENOUGH_REPLICAS and "min.insync.replicas" in r.error_message
    assert produce(raw, name, batch(), acks=1).error_code == 0


def test_a_timestamp_more_than_an_hour_ahead_is_refused_by_default(raw):
    name, _, _ = create(raw, {})
    ahead = int(time.time() * 1000) + 2 * 3600_000
    assert produce(raw, name, batch(ts=ahead)).error_code == E.INVALID_TIMESTAMP
    name, _, _ = create(raw, {"message.timestamp.after.max.ms": str(3 * 3600_000)})
    assert produce(raw, name, batch(ts=ahead)).error_code == 0


# ---------------------------------------------------------------- dynamic broker configs
def test_a_cluster_default_broker_config_reaches_every_topic(tmp_path):
    with Cluster(data_dir=tmp_path) as c, Raw(c.bootstrap) as raw:
        name, _, _ = create(raw, {})
        own, _, _ = create(raw, {"retention.ms": "1000"})
        assert incremental(raw, BROKER, "", [("log.retention.ms", SET, "7200000"),
                                             ("compression.type", SET, "lz4")]) == (0, None)
        got = describe(raw, TOPIC, name)[1]
        assert (got["retention.ms"].value, got["retention.ms"].config_source) == ("7200000", 3)
        assert c.state.partition(name, 0).log.config.retention_ms == 7200000
        assert c.state.partition(own, 0).log.config.retention_ms == 1000   # its own wins
        produce(raw, name, batch(codec=0))
        (b,) = list(iter_batches(c.state.partition(name, 0).log.read(0, 1 << 20)))
        assert b.compression == 3
        r, dflt = describe(raw, BROKER, "")
        assert r.error_code == 0 and dflt["log.retention.ms"].config_source == 3
        _, node0 = describe(raw, BROKER, "0")
        assert node0["log.retention.ms"].value == "7200000"
        assert node0["group.initial.rebalance.delay.ms"].read_only
        assert node0["group.initial.rebalance.delay.ms"].config_source in (4, 5)
    with Cluster(data_dir=tmp_path) as c:       # kept in the data dir
        assert c.state.partition(name, 0).log.config.retention_ms == 7200000


def test_broker_config_rules(raw):
    assert incremental(raw, BROKER, "", [("num.partitions", SET, "3")]) == (
        E.INVALID_CONFIG, "Cannot update these configs dynamically: Set(num.partitions)")
    code, msg = incremental(raw, BROKER, "", [("no.such", SET, "3")])
    assert code == E.INVALID_CONFIG and "no.such" in msg
    code, msg = incremental(raw, BROKER, "", [("log.retention.ms", SET, "-5")])
    assert code == E.INVALID_CONFIG and "Value must be at least -1" in msg
    assert incremental(raw, BROKER, "7", [("log.retention.ms", SET, "1")])[0] == E.INVALID_REQUEST
    assert incremental(raw, BROKER, "", [("log.retention.ms", APPEND, "1")]) == (
        E.INVALID_CONFIG, "Config value append is not allowed for config key: log.retention.ms")
    assert alter(raw, BROKER, "0", {"log.cleaner.delete.retention.ms": "1000"}) == (0, None)
    _, node0 = describe(raw, BROKER, "0")
    assert node0["log.cleaner.delete.retention.ms"].config_source == 2
    assert alter(raw, BROKER, "0", {}) == (0, None)      # AlterConfigs replaces the whole set
    _, node0 = describe(raw, BROKER, "0")
    assert node0["log.cleaner.delete.retention.ms"].config_source == 5
    r, _ = describe(raw, BROKER, "9")
    assert r.error_code == E.INVALID_REQUEST


def test_sasl_listener_configs_are_per_broker_dynamic(raw):
    # Kafka reconfigures a listener's SASL settings per broker (librdkafka's 0081 sets
    # sasl.kerberos.min.time.before.relogin on broker 0 and expects success)
    assert alter(raw, BROKER, "0", {"sasl.kerberos.min.time.before.relogin": "58000"}) == (0, None)
    _, node0 = describe(raw, BROKER, "0")
    e = node0["sasl.kerberos.min.time.before.relogin"]
    assert (e.value, e.config_source, e.read_only) == ("58000", 2, False)
    code, msg = incremental(raw, BROKER, "", [("sasl.kerberos.min.time.before.relogin", SET,
                                               "1000")])
    assert code == E.INVALID_CONFIG and "broker id must be specified" in msg
    code, msg = incremental(raw, BROKER, "0", [("sasl.login.refresh.window.factor", SET,
                                                "0.2")])
    assert code == E.INVALID_CONFIG and "Value must be at least 0.5" in msg


def test_confluent_kafka_admin_describes_and_alters_configs(kb):
    ck = pytest.importorskip("confluent_kafka")
    from confluent_kafka.admin import (
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        NewTopic,
    )

    admin = AdminClient({"bootstrap.servers": kb.bootstrap})
    name = f"ck{next(_n)}"
    fs = admin.create_topics([NewTopic(name, 1, 1, config={"compression.type": "zstd",
                                                           "min.insync.replicas": "1"})])
    fs[name].result(10)
    res = ConfigResource(ConfigResource.Type.TOPIC, name, incremental_configs=[
        ConfigEntry("cleanup.policy", "compact",
                    incremental_operation=AlterConfigOpType.APPEND)])
    admin.incremental_alter_configs([res])[res].result(10)
    got = admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, name)])
    entries = list(got.values())[0].result(10)
    assert entries["compression.type"].value == "zstd"
    assert entries["cleanup.policy"].value == "delete,compact"
    assert entries["retention.ms"].source == ck.admin.ConfigSource.STATIC_BROKER_CONFIG.value
    broker = admin.describe_configs([ConfigResource(ConfigResource.Type.BROKER, "0")])
    assert "group.initial.rebalance.delay.ms" in list(broker.values())[0].result(10)


# ---------------------------------------------------------------- group configs
GROUP = 32


def test_consumer_group_configs_within_the_brokers_bounds(kb, raw):
    assert incremental(raw, GROUP, "g1", [("consumer.session.timeout.ms", SET, "50000"),
                                          ("consumer.heartbeat.interval.ms", SET, "6000")]) \
        == (0, None)
    got = describe(raw, GROUP, "g1")[1]
    assert (got["consumer.session.timeout.ms"].value,
            got["consumer.session.timeout.ms"].config_source) == ("50000", 8)
    assert got["consumer.heartbeat.interval.ms"].value == "6000"
    assert describe(raw, GROUP, "other")[1]["consumer.session.timeout.ms"].value == "45000"
    assert kb.consumer_groups.session_timeout_for("g1") == 50000
    assert kb.consumer_groups.heartbeat_interval_for("g1") == 6000
    assert incremental(raw, GROUP, "g1", [("consumer.session.timeout.ms", SET, "100")]) == (
        E.INVALID_CONFIG, "consumer.session.timeout.ms must be greater than or equal to "
                          "group.consumer.min.session.timeout.ms")
    assert incremental(raw, GROUP, "g1", [("consumer.session.timeout.ms", SET, "60001")]) == (
        E.INVALID_CONFIG, "consumer.session.timeout.ms must be less than or equal to "
                          "group.consumer.max.session.timeout.ms")
    assert incremental(raw, GROUP, "g1", [("consumer.heartbeat.interval.ms", SET, "4999")])[0] \
        == E.INVALID_CONFIG
    code, msg = incremental(raw, GROUP, "g1", [("consumer.heartbeat.interval.ms", APPEND, "1")])
    assert code == E.INVALID_CONFIG and "append is not allowed" in msg


def test_streams_group_configs_with_kafkas_types_and_bounds(kb, raw):
    # KIP-1071's group configs: accepted, described and checked as Kafka's GroupConfig
    got = describe(raw, GROUP, "s")[1]
    assert {k: got[k].value for k in got if k.startswith("streams.")} == {
        "streams.heartbeat.interval.ms": "5000", "streams.initial.rebalance.delay.ms": "3000",
        "streams.num.standby.replicas": "0", "streams.session.timeout.ms": "45000"}
    assert incremental(raw, GROUP, "s", [("streams.session.timeout.ms", SET, "50000"),
                                         ("streams.num.standby.replicas", SET, "2"),
                                         ("streams.initial.rebalance.delay.ms", SET, "0")]) \
        == (0, None)
    got = describe(raw, GROUP, "s")[1]
    assert (got["streams.session.timeout.ms"].value,
            got["streams.session.timeout.ms"].config_source) == ("50000", 8)
    assert got["streams.num.standby.replicas"].value == "2"
    assert incremental(raw, GROUP, "s", [("streams.num.standby.replicas", SET, "3")]) == (
        E.INVALID_CONFIG, "streams.num.standby.replicas must be less than or equal to "
                          "group.streams.max.standby.replicas")
    assert incremental(raw, GROUP, "s", [("streams.session.timeout.ms", SET, "44999")]) == (
        E.INVALID_CONFIG, "streams.session.timeout.ms must be greater than or equal to "
                          "group.streams.min.session.timeout.ms")
    assert incremental(raw, GROUP, "s", [("streams.heartbeat.interval.ms", SET, "15001")]) == (
        E.INVALID_CONFIG, "streams.heartbeat.interval.ms must be less than or equal to "
                          "group.streams.max.heartbeat.interval.ms")
    code, msg = incremental(raw, GROUP, "s", [("streams.initial.rebalance.delay.ms", SET, "-1")])
    assert code == E.INVALID_CONFIG and "at least 0" in msg
    code, msg = incremental(raw, GROUP, "s", [("streams.num.standby.replicas", SET, "x")])
    assert code == E.INVALID_CONFIG
    with Cluster(config={"group.streams.max.standby.replicas": 5}) as c, Raw(c.bootstrap) as r2:
        assert incremental(r2, GROUP, "s", [("streams.num.standby.replicas", SET, "5")]) == (
            0, None)


def test_group_config_bounds_are_broker_configs():
    with Cluster(config={"group.consumer.min.session.timeout.ms": 1000,
                         "group.consumer.min.heartbeat.interval.ms": 100}) as c, \
            Raw(c.bootstrap) as raw:
        assert incremental(raw, GROUP, "g", [("consumer.session.timeout.ms", SET, "1000"),
                                             ("consumer.heartbeat.interval.ms", SET, "200")]) \
            == (0, None)
        code, msg = incremental(raw, GROUP, "g", [("consumer.heartbeat.interval.ms", SET,
                                                   "1000")])
        assert code == E.INVALID_CONFIG and "must be less than consumer.session" in msg
