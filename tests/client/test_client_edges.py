"""The client at the edges, from the Python API: errors that name their cause at once,
iteration that commits only what it handed out, timeouts that bound what they say."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import pytest

from kcodec.client import Admin, BrokerNotAvailableError, Consumer, Producer
from kcodec.testing.net import free_port


@pytest.fixture
def http_port() -> Iterator[int]:
    """A loopback port where an HTTP server answers (not Kafka)."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen()
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                c, _ = srv.accept()
            except OSError:
                return
            with c:
                c.recv(4096)
                c.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    yield srv.getsockname()[1]
    stop.set()
    srv.close()


def _make(kind: str, bootstrap: str) -> None:
    if kind == "admin":
        with Admin(bootstrap_servers=bootstrap) as a:
            a.list_topics()
    elif kind == "producer":
        with Producer(bootstrap_servers=bootstrap) as p:
            p.send("t", b"x").result(5)
    else:
        with Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest") as c:
            from kcodec.client import TopicPartition
            c.assign([TopicPartition("t", 0)])
            c.poll(5)


@pytest.mark.parametrize("kind", ["admin", "producer", "consumer"])
def test_connection_refused_fails_fast_naming_the_cause(kind: str) -> None:
    port = free_port()
    t0 = time.monotonic()
    with pytest.raises(BrokerNotAvailableError,
                       match=rf"cannot connect to 127\.0\.0\.1:{port}: Connection refused") as ei:
        _make(kind, f"127.0.0.1:{port}")
    assert time.monotonic() - t0 < 1.0 and not ei.value.retriable


@pytest.mark.parametrize("kind", ["admin", "producer"])
def test_unknown_host_fails_fast_naming_the_cause(kind: str) -> None:
    t0 = time.monotonic()
    with pytest.raises(BrokerNotAvailableError, match=r"cannot resolve host 'no-such-host\.invalid'"):
        _make(kind, "no-such-host.invalid:9092")
    assert time.monotonic() - t0 < 5.0   # the resolver's own answer; no retries after it


@pytest.mark.parametrize("kind", ["admin", "producer", "consumer"])
def test_a_peer_that_is_not_kafka_fails_as_soon_as_its_answer_does_not_parse(kind: str, http_port: int) -> None:
    t0 = time.monotonic()
    with pytest.raises(BrokerNotAvailableError,
                       match=rf"127\.0\.0\.1:{http_port} is not a Kafka broker: .*does not parse"):
        _make(kind, f"127.0.0.1:{http_port}")
    assert time.monotonic() - t0 < 1.0


def test_a_peer_that_resets_the_connection_is_named_once() -> None:
    """A listener that answers the handshake with a reset (RST): the cause, said once (it
    read "connection to X lost: connection to X lost: [Errno 104] ...")."""
    import struct

    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen()

    def serve() -> None:
        while True:
            try:
                c, _ = srv.accept()
            except OSError:
                return
            c.recv(65536)
            c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            c.close()                      # linger 0: a reset, not a clean close
    threading.Thread(target=serve, daemon=True).start()
    port = srv.getsockname()[1]
    try:
        with pytest.raises(BrokerNotAvailableError) as ei:
            _make("admin", f"127.0.0.1:{port}")
    finally:
        srv.close()
    msg = str(ei.value)
    assert f"127.0.0.1:{port} closed the connection during the Kafka handshake" in msg, msg
    assert msg.count(f"connection to 127.0.0.1:{port} lost") == 1, msg


@pytest.mark.parametrize("addr", ["127.0.0.1:9092:9093", "a b:9092", "host:", "host:0",
                                  "host:70000", ":9092", "[zz]:1", "-x:1"])
def test_malformed_address_is_a_value_error_before_any_connection(addr: str) -> None:
    for cls in (Admin, Producer, Consumer):
        with pytest.raises(ValueError, match="bad address"):
            cls(bootstrap_servers=addr)


def test_ipv6_and_names_are_good_addresses() -> None:
    from kcodec.client.config import parse_bootstrap
    assert parse_bootstrap("[::1]:9093,kafka-1.example:9092,10.0.0.1,PLAINTEXT://b_2:1") == [
        ("::1", 9093), ("kafka-1.example", 9092), ("10.0.0.1", 9092), ("b_2", 1)]


def test_one_good_address_among_refused_ones_is_used(broker) -> None:
    bad = f"127.0.0.1:{free_port()}"
    with Admin(bootstrap_servers=f"{bad},{broker.bootstrap}") as a:
        assert isinstance(a.list_topics(), list)


# ------------------------------------------------------------------ iterating commits what it yielded

def _fill(broker, topic: str, n: int) -> None:
    from kcodec.client import Admin
    with Admin(bootstrap_servers=broker.bootstrap) as a:
        assert a.create_topics([topic], num_partitions=1)[topic] is None
    with Producer(bootstrap_servers=broker.bootstrap, linger_ms=20) as p:
        for i in range(n):
            p.send(topic, b"v%d" % i, partition=0)
        p.flush()


def _consumer(broker, group: str, **kw) -> Consumer:
    return Consumer(bootstrap_servers=broker.bootstrap, group_id=group, auto_offset_reset="earliest",
                    fetch_max_wait_ms=50, **kw)


def test_iterator_break_commits_only_what_it_yielded(broker, topic_name) -> None:
    """`for r in consumer: break` with auto-commit commits offset 1, not the poll's end,
    and the next iteration starts with the record after the one handed out."""
    from kcodec.client import TopicPartition

    tp = TopicPartition(topic_name, 0)
    _fill(broker, topic_name, 10)
    group = f"g-{topic_name}"
    with _consumer(broker, group) as c:
        c.assign([tp])
        for r in c:
            assert r.offset == 0
            break
        assert c.position(tp) == 1
        got = []
        for r in c:
            got.append(r.offset)
            if len(got) == 3:
                break
        assert got == [1, 2, 3]
    with _consumer(broker, group, enable_auto_commit=False) as c:
        assert c.committed([tp]) == {tp: 4}


def test_iterator_kept_open_when_closing_commits_only_what_it_yielded(broker, topic_name) -> None:
    from kcodec.client import TopicPartition

    tp = TopicPartition(topic_name, 0)
    _fill(broker, topic_name, 10)
    group = f"g-{topic_name}"
    c = _consumer(broker, group)
    c.assign([tp])
    it = iter(c)
    assert [next(it).offset for _ in range(2)] == [0, 1]
    c.close()          # the iterator is still alive: offsets 2.. were polled, never handed out
    with _consumer(broker, group, enable_auto_commit=False) as c2:
        assert c2.committed([tp]) == {tp: 2}
    del it


def test_poll_counts_everything_it_returned_as_consumed(broker, topic_name) -> None:
    """poll() keeps Java's semantics: what a poll returned is consumed."""
    from kcodec.client import TopicPartition

    tp = TopicPartition(topic_name, 0)
    _fill(broker, topic_name, 10)
    group = f"g-{topic_name}"
    with _consumer(broker, group) as c:
        c.assign([tp])
        n = 0
        deadline = time.monotonic() + 20
        while n < 10 and time.monotonic() < deadline:
            n += sum(len(v) for v in c.poll(0.5).values())
        assert n == 10
    with _consumer(broker, group, enable_auto_commit=False) as c:
        assert c.committed([tp]) == {tp: 10}


# ------------------------------------------------------------------ a lost broker is surfaced

def test_consumer_poll_names_a_lost_broker_within_api_timeout() -> None:
    import asyncio

    from kcodec.broker import Cluster
    from kcodec.client import AsyncConsumer, Producer, TopicPartition

    async def main(broker: Cluster) -> None:
        async with AsyncConsumer(bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest",
                                 api_timeout_ms=1000, request_timeout_ms=500,
                                 fetch_max_wait_ms=50) as c:
            c.assign([TopicPartition("t", 0)])
            got: list = []
            while len(got) < 2:
                got += (await c.poll(5)).get(TopicPartition("t", 0), [])
            assert [r.value for r in got] == [b"a", b"b"]
            broker.stop_node(0)          # its port stops answering, its connections drop
            t0 = time.monotonic()
            with pytest.raises(BrokerNotAvailableError,
                               match=r"no broker answered for 1\.0 s; last error: .*127\.0\.0\.1"):
                while time.monotonic() - t0 < 10:
                    await c.poll(0.2)
            assert time.monotonic() - t0 < 6   # before: never

    with Cluster(1) as broker:
        broker.create_topic("t")
        with Producer(bootstrap_servers=broker.bootstrap) as p:
            for v in (b"a", b"b"):
                p.send("t", v, partition=0).result(10)
        asyncio.run(main(broker))


def test_an_old_failure_without_further_requests_is_not_a_lost_broker() -> None:
    """A transient failure, then nothing asked of the brokers (paused partitions, a slow
    application): poll must not call the broker lost."""
    import asyncio

    from kcodec.broker import Cluster
    from kcodec.client import AsyncConsumer, Producer, TopicPartition

    async def main(broker: Cluster) -> None:
        async with AsyncConsumer(bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest",
                                 api_timeout_ms=300, fetch_max_wait_ms=50,
                                 reconnect_backoff_max_ms=100) as c:
            tp = TopicPartition("t", 0)
            c.assign([tp])
            assert await c.poll(5)
            c.pause(tp)
            c._engine.fetcher.failed(BrokerNotAvailableError("a blip"))
            t0 = time.monotonic()
            while time.monotonic() - t0 < 1.0:
                assert await c.poll(0.1) == {}

    with Cluster(1) as broker:
        broker.create_topic("t")
        with Producer(bootstrap_servers=broker.bootstrap) as p:
            p.send("t", b"a", partition=0).result(10)
        asyncio.run(main(broker))
