"""Traces: OpenTelemetry spans on send, poll and process, and the W3C trace context in the
record headers carrying one trace across kcodec's producer and consumer and
confluent-kafka's OpenTelemetry instrumentation (the peer)."""

from __future__ import annotations

import time

import pytest

pytest.importorskip("opentelemetry.sdk", reason="pip install opentelemetry-sdk")

from opentelemetry import trace  # noqa: E402
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402

from kcodec.broker.cluster import Cluster  # noqa: E402
from kcodec.client import Consumer, Producer, TopicPartition  # noqa: E402
from kcodec.observe.tracing import extract, inject  # noqa: E402

FAST = dict(api_timeout_ms=15000, request_timeout_ms=10000)


@pytest.fixture
def spans():
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield provider, exporter
    provider.shutdown()


@pytest.fixture
def broker():
    with Cluster(1) as c:
        c.create_topic("tr", 1)
        yield c


def _consume(bootstrap: str, n: int, **kw) -> list:
    out = []
    with Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest", **FAST, **kw) as c:
        c.assign([TopicPartition("tr", 0)])
        deadline = time.monotonic() + 20
        it = iter(c)
        while len(out) < n and time.monotonic() < deadline:
            out.append(next(it))
    return out


def test_inject_and_extract_round_trip(spans):
    provider, _ = spans
    tracer = provider.get_tracer("t")
    with tracer.start_as_current_span("parent") as span:
        headers = inject([("a", b"1"), ("traceparent", b"stale")])
    assert headers[0] == ("a", b"1") and sum(k == "traceparent" for k, _ in headers) == 1
    ctx = trace.get_current_span(extract(headers)).get_span_context()
    assert ctx.trace_id == span.get_span_context().trace_id
    assert ctx.span_id == span.get_span_context().span_id
    assert not trace.get_current_span(extract(None)).get_span_context().is_valid


def test_a_trace_crosses_kcodec_producer_and_consumer(broker, spans):
    provider, exporter = spans
    with Producer(bootstrap_servers=broker.bootstrap, tracing_enabled=True,
                  tracer_provider=provider, client_id="tp", **FAST) as p:
        results = [p.send("tr", b"v%d" % i, key=b"k%d" % i, partition=0,
                          headers=[("h", b"x")]).result(10) for i in range(3)]
    consumed = _consume(broker.bootstrap, 3, tracing_enabled=True, tracer_provider=provider,
                        group_id=None)
    assert [r.value for r in consumed] == [b"v0", b"v1", b"v2"]
    assert all(r.headers[0] == ("h", b"x") and r.headers[1][0] == "traceparent"
               for r in consumed)
    done = exporter.get_finished_spans()
    sends = [s for s in done if s.name == "send tr"]
    procs = [s for s in done if s.name == "process tr"]
    polls = [s for s in done if s.name == "poll tr"]
    assert len(sends) == 3 and len(procs) >= 2 and polls   # (the last ends with the iterator)
    for s, r in zip(sends, results, strict=False):
        assert s.kind == trace.SpanKind.PRODUCER
        a = s.attributes
        assert a["messaging.system"] == "kafka" and a["messaging.operation.type"] == "send"
        assert a["messaging.destination.name"] == "tr" and a["messaging.client.id"] == "tp"
        assert a["messaging.kafka.offset"] == r.offset
        assert a["messaging.destination.partition.id"] == "0"
        assert a["messaging.kafka.message.key"].startswith("k")
    by_offset = {s.attributes["messaging.kafka.offset"]: s for s in sends}
    for proc in procs:
        send = by_offset[proc.attributes["messaging.kafka.offset"]]
        assert proc.kind == trace.SpanKind.CONSUMER
        assert proc.context.trace_id == send.context.trace_id
        assert proc.parent.span_id == send.context.span_id
    assert polls[0].attributes["messaging.batch.message_count"] >= 1


def test_a_failed_send_is_an_error_span(broker, spans):
    provider, exporter = spans
    from kcodec.client.errors import KafkaError, KafkaTimeoutError

    with Producer(bootstrap_servers=broker.bootstrap, tracing_enabled=True,
                  tracer_provider=provider, **{**FAST, "api_timeout_ms": 1000}) as p:
        fut = p.send("tr", b"v", partition=0)
        fut.result(10)
        with pytest.raises((KafkaError, KafkaTimeoutError)):
            p.send("tr", b"v", partition=7).result(10)       # no partition 7
    errs = [s for s in exporter.get_finished_spans() if s.status.status_code.name == "ERROR"]
    assert len(errs) == 1 and "error.type" in errs[0].attributes


def test_tracing_without_opentelemetry_names_the_extra(monkeypatch):
    import builtins

    real = builtins.__import__

    def no_otel(name, *a, **k):
        if name.startswith("opentelemetry"):
            raise ImportError(name)
        return real(name, *a, **k)
    monkeypatch.setattr(builtins, "__import__", no_otel)
    with pytest.raises(ImportError, match=r"kcodec\[otel\]"):
        Producer(bootstrap_servers="127.0.0.1:1", tracing_enabled=True)


def _confluent():
    ck = pytest.importorskip("confluent_kafka")
    inst = pytest.importorskip("opentelemetry.instrumentation.confluent_kafka")
    return ck, inst.ConfluentKafkaInstrumentor()


@pytest.mark.peers
def test_confluent_instrumented_producer_to_kcodec_consumer(broker, spans):
    provider, exporter = spans
    ck, instrumentor = _confluent()
    prod = instrumentor.instrument_producer(ck.Producer({"bootstrap.servers": broker.bootstrap}),
                                           tracer_provider=provider)
    prod.produce("tr", b"from-confluent", partition=0)
    assert prod.flush(10) == 0
    (rec,) = _consume(broker.bootstrap, 1, tracing_enabled=True, tracer_provider=provider)
    done = exporter.get_finished_spans()
    peer = [s for s in done if s.kind == trace.SpanKind.PRODUCER]
    ours = [s for s in done if s.name == "process tr"]
    assert len(peer) == 1 and len(ours) == 1 and rec.value == b"from-confluent"
    assert ours[0].context.trace_id == peer[0].context.trace_id
    assert ours[0].parent.span_id == peer[0].context.span_id


@pytest.mark.peers
def test_kcodec_producer_to_confluent_instrumented_consumer(broker, spans):
    provider, exporter = spans
    ck, instrumentor = _confluent()
    with Producer(bootstrap_servers=broker.bootstrap, tracing_enabled=True,
                  tracer_provider=provider, **FAST) as p:
        p.send("tr", b"to-confluent", partition=0).result(10)
    cons = instrumentor.instrument_consumer(ck.Consumer({
        "bootstrap.servers": broker.bootstrap, "group.id": "ck-tr",
        "auto.offset.reset": "earliest"}), tracer_provider=provider)
    cons.subscribe(["tr"])
    msg = None
    deadline = time.monotonic() + 30
    while msg is None and time.monotonic() < deadline:
        m = cons.poll(0.5)
        if m is not None and m.error() is None:
            msg = m
    cons.close()
    assert msg is not None and msg.value() == b"to-confluent"
    done = exporter.get_finished_spans()
    (send,) = [s for s in done if s.name == "send tr"]
    linked = [s for s in done if s.kind == trace.SpanKind.CONSUMER and s.name.endswith("process")
              and any(lk.context.trace_id == send.context.trace_id for lk in s.links)]
    assert linked, [(s.name, s.links) for s in done]
