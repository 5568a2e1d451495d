"""KIP-714 end to end: kcodec's client pushes the metrics kcodec's broker subscribes it to,
the broker keeps and exposes them; librdkafka (confluent-kafka, enable.metrics.push) pushes
to kcodec's broker too. Needs the telemetry APIs (71, 72) in kcodec's protocol classes."""

from __future__ import annotations

import time
import uuid

import pytest

from kcodec.broker.cluster import Cluster
from kcodec.broker.telemetry import ClientMetricsSubscription, ClientTelemetry, parse_subscription
from kcodec.client import Producer
from kcodec.client.telemetry import available
from kcodec.protocol import ErrorCode

needs_apis = pytest.mark.skipif(
    not available(), reason="kcodec's protocol classes lack GetTelemetrySubscriptions and "
    "PushTelemetry (API keys 71, 72: the newest spec set)")
FAST = dict(api_timeout_ms=15000, request_timeout_ms=10000)


def test_subscription_text_and_checks():
    s = parse_subscription("prod:metrics=org.apache.kafka.producer.;interval.ms=500;"
                           "match=client_id=p-.*")
    assert s == ClientMetricsSubscription("prod", ["org.apache.kafka.producer."], 500,
                                          {"client_id": "p-.*"})
    assert parse_subscription("all:metrics=*").metrics == [""]
    assert s.matches({"client_id": "p-1"}) and not s.matches({"client_id": "q"})
    for bad, why in (("x:metrics=a;interval.ms=5", "interval.ms"),
                     ("x:match=nope=1", "unknown match key"), ("x:color=red", "unknown color"),
                     ("x:match=client_id=(", "bad pattern")):
        with pytest.raises(ValueError, match=why):
            parse_subscription(bad)


def test_the_store_checks_pushes():
    from kcodec.observe.telemetry import Point, encode_metrics

    tel = ClientTelemetry([ClientMetricsSubscription("a", [""], 1000)], max_bytes=4096)
    c = tel.subscribe(uuid.UUID(int=0), {"client_id": "c1"})
    assert c.instance_id.int and c.metrics == [""] and c.interval_ms == 1000
    data = encode_metrics([Point("org.apache.kafka.x.total", 3, {"topic": "t"}, True)])
    assert tel.push(c.instance_id, c.subscription_id + 1, False, 0, data) == \
        ErrorCode.UNKNOWN_SUBSCRIPTION_ID
    assert tel.push(c.instance_id, c.subscription_id, False, 0, b"\x0a\x09") == \
        ErrorCode.INVALID_RECORD
    assert tel.push(c.instance_id, c.subscription_id, False, 0, data) == 0
    assert tel.push(c.instance_id, c.subscription_id, False, 0, data) == \
        ErrorCode.THROTTLING_QUOTA_EXCEEDED                 # sooner than half the interval
    assert tel.push(c.instance_id, c.subscription_id, True, 0, b"x" * 5000) == \
        ErrorCode.TELEMETRY_TOO_LARGE
    assert tel.push(c.instance_id, c.subscription_id, True, 0, data) == 0   # terminating
    got = {(s[1], s[2].get("topic")): s[3] for s in tel.samples()}
    assert got[("org.apache.kafka.x.total", "t")] == 3 and got[("Pushes", None)] == 2
    assert got[("PushTelemetryAccepted", None)] == 2


@needs_apis
def test_kcodec_client_pushes_to_kcodec_broker():
    sub = "prod:metrics=org.apache.kafka.producer.record.send,org.apache.kafka.producer.node.;interval.ms=300"
    with Cluster(1, client_metrics=[sub]) as b:
        with Producer(bootstrap_servers=b.bootstrap, client_id="tele-1", **FAST) as p:
            for i in range(17):
                p.send("tele", b"v%d" % i, partition=0)
            p.flush()
            deadline = time.monotonic() + 15
            reg = b.nodes[0].metrics.registry
            want = {"client_id": "tele-1", "node-id": "0",
                    "client_instance_id": str(p._engine.cluster._telemetry.instance_id)}
            rep = p._engine.cluster._telemetry
            got = None
            # the broker keeps a push before its answer reaches the client, which counts it
            # only then: wait for both sides
            while (got != 17 or rep.pushes < 1) and time.monotonic() < deadline:
                time.sleep(0.1)
                got = next((s.value for s in reg.snapshot()
                            if s.group == "kafka.server:ClientMetrics"
                            and s.name == "org.apache.kafka.producer.record.send.total"
                            and dict(s.tags) == want), None)
            assert got == 17
            assert rep.pushes >= 1 and rep.subscription.push_interval_ms == 300
        (client,) = b.telemetry.clients.values()
        assert client.info["client_software_name"] == "kcodec"
        assert client.terminated                     # the closing push said so
        names = {k[0] for k in client.values}
        assert "org.apache.kafka.producer.record.send.rate" in names
        assert any(n.startswith("org.apache.kafka.producer.node.request.latency") for n in names)
        assert not any(n.startswith("org.apache.kafka.producer.batch") for n in names)


@needs_apis
def test_no_subscription_no_push():
    with Cluster(1) as b:
        with Producer(bootstrap_servers=b.bootstrap, **FAST) as p:
            p.send("tele", b"v", partition=0).result(10)
            time.sleep(0.5)
            rep = p._engine.cluster._telemetry
            assert rep.subscription is not None and rep.subscription.requested_metrics == []
        assert b.telemetry.pushes == 0


@needs_apis
@pytest.mark.peers
def test_librdkafka_pushes_to_kcodec_broker():
    ck = pytest.importorskip("confluent_kafka")
    with Cluster(1, client_metrics=["all:metrics=*;interval.ms=500"]) as b:
        p = ck.Producer({"bootstrap.servers": b.bootstrap, "enable.metrics.push": True,
                         "client.id": "rdk-1"})
        for i in range(5):
            p.produce("tele", b"v%d" % i, partition=0)
        assert p.flush(10) == 0
        deadline = time.monotonic() + 20
        while b.telemetry.pushes == 0 and time.monotonic() < deadline:
            p.poll(0.2)
        assert b.telemetry.pushes >= 1, (b.telemetry.rejected, b.telemetry.clients)
        (client,) = [c for c in b.telemetry.clients.values() if c.pushes]
        assert client.info["client_id"] == "rdk-1"
        assert client.info["client_software_name"] == "confluent-kafka-python" or \
            "librdkafka" in client.info["client_software_name"]
        names = {k[0] for k in client.values}
        assert any(n.startswith("org.apache.kafka.producer.") for n in names), names


def test_failing_telemetry_requests_back_off():
    """A broker that drops the connection on every telemetry request is asked less and less
    often (doubling from retry_backoff_ms), not every retry_backoff_ms."""
    import asyncio
    from types import SimpleNamespace

    from kcodec.client.errors import BrokerNotAvailableError
    from kcodec.client.telemetry import TelemetryReporter

    attempts = []

    class Dropping(SimpleNamespace):
        async def any_connection(self):
            attempts.append(time.monotonic())
            raise BrokerNotAvailableError("connection closed by the broker")

    cluster = Dropping(closed=False, debug=SimpleNamespace(telemetry=False),
                       config=SimpleNamespace(retry_backoff_ms=10))

    async def go():
        task = asyncio.ensure_future(TelemetryReporter(cluster).run())
        await asyncio.sleep(0.6)
        cluster.closed = True
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(go())
    # 10 + 20 + 40 + 80 + 160 + 320 ms: at most 6 attempts in 0.6 s (60 without the backoff)
    assert 2 <= len(attempts) <= 6, len(attempts)
    gaps = [b - a for a, b in zip(attempts, attempts[1:], strict=False)]      # a sleep never ends early
    assert all(g >= 0.010 * 2 ** i * 0.99 for i, g in enumerate(gaps)), gaps
