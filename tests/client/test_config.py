"""Configurations people already have: Java's dotted names, librdkafka's names for the same
settings, values as strings, one dict first, in every client class; unknown names say
what to use instead."""

from __future__ import annotations

import asyncio
import time

import pytest

from kcodec.client import (
    Admin,
    AsyncAdmin,
    AsyncConsumer,
    AsyncProducer,
    ClientClosedError,
    Consumer,
    ConsumerConfig,
    Producer,
    ProducerConfig,
    TopicPartition,
)

PROPS = {"enable.auto.commit": "false", "max.poll.records": "10", "group.id": "x",
         "auto.offset.reset": "earliest", "check.crcs": "TRUE",
         "session.timeout.ms": " 30000 ", "isolation.level": "READ_COMMITTED"}


@pytest.fixture(scope="module")
def cluster():
    from kcodec.broker import Cluster

    with Cluster(1) as c:
        c.create_topic("s", 1)
        yield c


def test_string_values_become_the_settings_types() -> None:
    """What a properties file holds used to be refused ("enable_auto_commit must be True or
    False, got 'false'", "max_poll_records ... got '10'")."""
    c = ConsumerConfig.from_kwargs(PROPS)
    assert (c.enable_auto_commit, c.max_poll_records, c.check_crcs) == (False, 10, True)
    assert (c.session_timeout_ms, c.isolation_level) == (30000, "read_committed")
    p = ProducerConfig.from_kwargs({"linger.ms": "7", "acks": "ALL", "enable.idempotence": "true",
                                    "compression.type": "LZ4", "compression.level": "3",
                                    "sasl.login.refresh.window.factor": "0.9"})
    assert (p.linger_ms, p.acks, p.enable_idempotence) == (7, -1, True)
    assert (p.compression_type, p.compression_level) == ("lz4", 3)
    assert p.sasl_login_refresh_window_factor == 0.9
    assert ConsumerConfig(enable_auto_commit="False").enable_auto_commit is False


@pytest.mark.parametrize("settings, message", [
    ({"enable.auto.commit": "maybe"}, "enable_auto_commit must be True or False, got 'maybe'"),
    ({"enable.auto.commit": "yes"}, "enable_auto_commit must be True or False, got 'yes'"),
    ({"max.poll.records": "ten"}, "max_poll_records must be a non-negative integer, got 'ten'"),
    ({"max.poll.records": "-3"}, "max_poll_records must be a non-negative integer, got -3"),
    ({"auto.offset.reset": "oldest"}, "auto_offset_reset must be earliest, latest or none"),
])
def test_bad_string_values_are_named(settings, message) -> None:
    with pytest.raises(ValueError, match=message):
        ConsumerConfig.from_kwargs(settings)


def test_librdkafkas_names_for_the_same_settings() -> None:
    p = ProducerConfig.from_kwargs({"metadata.broker.list": "h:1", "queue.buffering.max.ms": 9,
                                    "queue.buffering.max.kbytes": "2048",
                                    "compression.codec": "zstd", "max.in.flight": 3,
                                    "request.required.acks": "all",
                                    "message.timeout.ms": "5000", "message.max.bytes": 2000000,
                                    "ssl.ca.location": "ca.pem"})
    assert (p.bootstrap, p.linger_ms, p.buffer_memory) == ([("h", 1)], 9, 2048 * 1024)
    assert (p.compression_type, p.max_in_flight_requests_per_connection) == ("zstd", 3)
    assert (p.delivery_timeout_ms, p.max_request_size, p.ssl_cafile) == (5000, 2000000, "ca.pem")
    c = ConsumerConfig.from_kwargs({"fetch.wait.max.ms": "50", "auto.offset.reset": "smallest",
                                    "partition.assignment.strategy":
                                        "org.apache.kafka.clients.consumer.RoundRobinAssignor"})
    assert (c.fetch_max_wait_ms, c.auto_offset_reset, c.assignors) == (50, "earliest",
                                                                       ["roundrobin"])
    with pytest.raises(ValueError, match="linger_ms is given twice"):
        ProducerConfig.from_kwargs({"linger.ms": 1}, queue_buffering_max_ms=2)


@pytest.mark.parametrize("cls, name, hint", [
    (ProducerConfig, "compresion_type", "did you mean compression_type?"),
    (ConsumerConfig, "auto.ofset.reset", "did you mean auto_offset_reset?"),
    (ProducerConfig, "sasl_plain_username", "use sasl_username"),
    (ProducerConfig, "value_deserializer", "a consumer setting"),
    (ConsumerConfig, "value.serializer", "a producer setting"),
    (ConsumerConfig, "partitioner", "a producer setting"),
    (ProducerConfig, "interceptor.classes", "use interceptors"),
    (ConsumerConfig, "consumer_timeout_ms", "poll(timeout)"),
    (ConsumerConfig, "api_version", "negotiates"),
    (ProducerConfig, "sasl.jaas.config", "sasl_username and sasl_password"),
    (ProducerConfig, "group.id", "a consumer setting"),
    (ConsumerConfig, "linger_ms", "a producer setting"),
    (ProducerConfig, "frobnicate", None),
])
def test_unknown_names_get_help(cls, name, hint) -> None:
    with pytest.raises(ValueError) as info:
        cls.from_kwargs({name: 1})
    text = str(info.value)
    assert text.startswith(f"unknown {cls.__name__} property: ")
    if hint is None:
        assert text.endswith(name.replace(".", "_"))
    else:
        assert hint in text, text


def test_a_consumer_takes_a_dict_first_like_the_producer(cluster) -> None:
    """Consumer({...}) used to take the dict as a topic list: "subscribe needs a group_id"."""
    conf = {"bootstrap.servers": cluster.bootstrap, **PROPS}
    with Producer({"bootstrap.servers": cluster.bootstrap}) as p:
        p.send("s", b"v", partition=0).result(10)
    with Consumer(conf) as c:
        assert c.config.group_id == "x" and c.config.enable_auto_commit is False
        assert c.subscription() == []
    with Consumer(conf, "s") as c:                   # a dict first, then topics
        assert c.subscription() == ["s"]
        got: list[bytes] = []
        deadline = time.monotonic() + 20
        while not got and time.monotonic() < deadline:
            got += [r.value for rs in c.poll(0.2).values() for r in rs]
        assert got == [b"v"]
    with pytest.raises(TypeError, match="given twice"):
        Consumer(conf, config=conf)
    with pytest.raises(TypeError, match="topics are names"):
        Consumer("s", conf)

    async def main() -> None:
        async with AsyncConsumer(conf, "s") as ac:
            assert ac.config.max_poll_records == 10 and ac.subscription() == ["s"]
        async with AsyncProducer({"bootstrap.servers": cluster.bootstrap, "linger.ms": "1"}) as ap:
            assert (await ap.send_and_wait("s", b"a", partition=0)).offset >= 0
        async with AsyncAdmin({"bootstrap.servers": cluster.bootstrap,
                               "request.timeout.ms": "5000"}) as aa:
            assert "s" in await aa.list_topics()
    asyncio.run(main())
    with Admin({"bootstrap.servers": cluster.bootstrap, "api.timeout.ms": "20000"}) as a:
        assert a.config.api_timeout_ms == 20000 and "s" in a.list_topics()


def test_a_consumer_takes_a_built_config_as_it_is(cluster) -> None:
    """A ConsumerConfig given as config= is the consumer's own (its hooks with it): the
    blocking Consumer drives an AsyncConsumer on the very configuration it built."""
    cfg = ConsumerConfig.from_kwargs(bootstrap_servers=cluster.bootstrap, group_id="x",
                                     interceptors=[_Counting])
    assert AsyncConsumer(config=cfg).config is cfg
    with pytest.raises(TypeError, match="beside a ConsumerConfig"):
        AsyncConsumer(config=cfg, group_id="y")
    with pytest.raises(ClientClosedError, match="not started"):
        _ = AsyncConsumer(config=cfg).rebalancer
    with Consumer(config=cfg) as c:
        assert c.config is cfg and c.poll(0.1) == {}
    assert _Counting.made == 1                     # one set of interceptors for both faces


class _Counting:
    made = 0

    def __init__(self) -> None:
        type(self).made += 1

    def on_consume(self, records):
        return records


def test_topics_without_a_group_point_to_assign() -> None:
    """Refused before connecting, saying how to read without a group."""
    with pytest.raises(ValueError, match=r"subscribe needs a group_id.*assign\(\[TopicPartition"):
        Consumer("events", bootstrap_servers="127.0.0.1:1")
    with pytest.raises(ValueError, match="assign"):
        AsyncConsumer("events", bootstrap_servers="127.0.0.1:1")


def test_the_transactional_path_takes_a_properties_dict(cluster) -> None:
    conf = {"bootstrap.servers": cluster.bootstrap, "transactional.id": "props-txn",
            "transaction.timeout.ms": "30000", "enable.idempotence": "true", "acks": "all"}
    with Producer(conf) as p:
        assert p.config.transaction_timeout_ms == 30000
        p.init_transactions()
        p.begin_transaction()
        p.send("s", b"t", partition=0)
        p.commit_transaction()
    with Consumer({"bootstrap.servers": cluster.bootstrap, "isolation.level": "read_committed",
                   "auto.offset.reset": "earliest"}) as c:
        c.assign([TopicPartition("s", 0)])
        got: list[bytes] = []
        deadline = time.monotonic() + 20
        while b"t" not in got and time.monotonic() < deadline:
            got += [r.value for rs in c.poll(0.2).values() for r in rs]
        assert b"t" in got
