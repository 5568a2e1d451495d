"""Traces: OpenTelemetry spans for sending and consuming, W3C trace context in headers.

Optional: ``pip install 'kcodec[otel]'`` (``opentelemetry-api``); without it, turning
tracing on is an ``ImportError`` naming that extra, and nothing here is imported.

Spans follow OpenTelemetry's messaging semantic conventions for Kafka::

    send <topic>      PRODUCER   from send() until the broker acknowledged the record
    poll <topic>      CLIENT     one poll that returned records (operation type receive)
    process <topic>   CONSUMER   handling one record: the child of the producer's span,
                                 its context extracted from the record's headers

with ``messaging.system=kafka``, ``messaging.operation.name`` / ``.type``,
``messaging.destination.name``, ``messaging.destination.partition.id``,
``messaging.kafka.offset``, ``messaging.kafka.message.key`` (when it is text),
``messaging.kafka.message.tombstone``, ``messaging.consumer.group.name``,
``messaging.client.id``, ``messaging.batch.message_count``, ``messaging.message.body.size``
and ``error.type`` on failure.

The context travels in the record headers ``traceparent`` (and ``tracestate``) as the W3C
Trace Context says, through the globally configured propagator -- the headers Java's, the
confluent-kafka instrumentation's and every other OpenTelemetry Kafka instrumentation
read and write, so a trace crosses clients.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["Tracing", "inject", "extract", "require"]

_EXTRA = "tracing needs OpenTelemetry: pip install 'kcodec[otel]' (opentelemetry-api)"


def require() -> Any:
    """The ``opentelemetry.trace`` module, or ``ImportError`` naming the extra."""
    try:
        from opentelemetry import trace
    except ImportError as exc:
        raise ImportError(_EXTRA) from exc
    return trace


class _Setter:
    """Writes a header into a list of (key, value) pairs, replacing one of that name."""

    def set(self, carrier: list, key: str, value: str) -> None:
        carrier[:] = [h for h in carrier if h[0] != key]
        carrier.append((key, value.encode()))


class _Getter:
    def get(self, carrier: Any, key: str) -> list[str] | None:
        out = []
        for k, v in carrier or ():
            if k == key and v is not None:
                out.append(v.decode("latin-1") if isinstance(v, (bytes, bytearray)) else str(v))
        return out or None

    def keys(self, carrier: Any) -> list[str]:
        return [k for k, _ in carrier or ()]


_SETTER, _GETTER = _Setter(), _Getter()


def inject(headers: Any, context: Any = None) -> list[tuple[str, bytes | None]]:
    """``headers`` (None, or pairs) as a new list with the current (or ``context``'s)
    trace context added."""
    from opentelemetry import propagate

    out = list(headers or ())
    propagate.inject(out, context=context, setter=_SETTER)  # type: ignore[arg-type]
    return out


def extract(headers: Any) -> Any:
    """The OpenTelemetry context carried in ``headers`` (an empty one if none)."""
    from opentelemetry import propagate

    return propagate.extract(headers or [], getter=_GETTER)  # type: ignore[arg-type]


def _key_text(key: Any) -> str | None:
    if isinstance(key, str):
        return key
    if isinstance(key, bytes):
        try:
            return key.decode("utf-8")
        except UnicodeDecodeError:
            return None
    return None


class Tracing:
    """A client's tracer and the attributes common to its spans."""

    def __init__(self, client_id: str, tracer_provider: Any = None,
                 group_id: str | None = None, server: tuple[str, int] | None = None) -> None:
        trace = require()
        from kcodec._version import __version__

        self.trace = trace
        self.tracer = trace.get_tracer("kcodec", __version__, tracer_provider=tracer_provider)
        self.common: dict[str, Any] = {"messaging.system": "kafka",
                                       "messaging.client.id": client_id}
        if server is not None:
            self.common["server.address"], self.common["server.port"] = server
        self.group_id = group_id

    # ------------------------------------------------------------------ producer
    def start_send(self, topic: str, key: Any, value: Any, partition: int | None) -> Any:
        """The ``send`` span of one record, started (the caller ends it on delivery)."""
        attrs = dict(self.common)
        attrs.update({"messaging.operation.name": "send", "messaging.operation.type": "send",
                      "messaging.destination.name": topic})
        if partition is not None:
            attrs["messaging.destination.partition.id"] = str(partition)
        k = _key_text(key)
        if k is not None:
            attrs["messaging.kafka.message.key"] = k
        if value is None:
            attrs["messaging.kafka.message.tombstone"] = True
        elif isinstance(value, (bytes, bytearray, str)):
            attrs["messaging.message.body.size"] = len(value)
        return self.tracer.start_span(f"send {topic}", kind=self.trace.SpanKind.PRODUCER,
                                      attributes=attrs)

    def headers_for(self, span: Any, headers: Any) -> list:
        """``headers`` with ``span``'s context injected."""
        return inject(headers, self.trace.set_span_in_context(span))

    def end_send(self, span: Any, error: BaseException | None, result: Any) -> None:
        if error is not None:
            span.set_attribute("error.type", type(error).__name__)
            span.set_status(self.trace.Status(self.trace.StatusCode.ERROR, str(error)))
        elif result is not None:
            span.set_attribute("messaging.destination.partition.id", str(result.partition))
            if result.offset >= 0:
                span.set_attribute("messaging.kafka.offset", result.offset)
        span.end()

    # ------------------------------------------------------------------ consumer
    def receive(self, polled: dict) -> None:
        """A ``poll`` span for one poll that returned records (started and ended now: the
        wait is not the interesting part, what came back is)."""
        if not polled:
            return
        topics = sorted({tp[0] for tp in polled})
        attrs = dict(self.common)
        attrs.update({"messaging.operation.name": "poll", "messaging.operation.type": "receive",
                      "messaging.batch.message_count": sum(len(v) for v in polled.values())})
        if len(topics) == 1:
            attrs["messaging.destination.name"] = topics[0]
        if self.group_id:
            attrs["messaging.consumer.group.name"] = self.group_id
        name = f"poll {topics[0]}" if len(topics) == 1 else "poll"
        self.tracer.start_span(name, kind=self.trace.SpanKind.CLIENT, attributes=attrs).end()

    def start_process(self, record: Any) -> Any:
        """The ``process`` span of one record, the child of the context in its headers."""
        attrs = dict(self.common)
        attrs.update({"messaging.operation.name": "process",
                      "messaging.operation.type": "process",
                      "messaging.destination.name": record.topic,
                      "messaging.destination.partition.id": str(record.partition),
                      "messaging.kafka.offset": record.offset})
        if self.group_id:
            attrs["messaging.consumer.group.name"] = self.group_id
        k = _key_text(record.key)
        if k is not None:
            attrs["messaging.kafka.message.key"] = k
        if record.value is None:
            attrs["messaging.kafka.message.tombstone"] = True
        else:
            attrs["messaging.message.body.size"] = len(record.value)
        return self.tracer.start_span(f"process {record.topic}", context=extract(record.headers),
                                      kind=self.trace.SpanKind.CONSUMER, attributes=attrs)

    @contextmanager
    def process_batch(self, records: list) -> Iterator[Any]:
        """``process`` of a batch (the runtime's handler call): one CONSUMER span linked to
        each record's producer context -- the child of that context when the batch is one
        record -- current inside the block."""
        from opentelemetry.trace import Link

        topics = sorted({r.topic for r in records})
        attrs = dict(self.common)
        attrs.update({"messaging.operation.name": "process",
                      "messaging.operation.type": "process",
                      "messaging.batch.message_count": len(records)})
        if len(topics) == 1:
            attrs["messaging.destination.name"] = topics[0]
        if self.group_id:
            attrs["messaging.consumer.group.name"] = self.group_id
        contexts = [extract(getattr(r, "headers", None)) for r in records]
        links = []
        for ctx in contexts:
            sc = self.trace.get_current_span(ctx).get_span_context()
            if sc.is_valid:
                links.append(Link(sc))
        parent = contexts[0] if len(records) == 1 else None
        span = self.tracer.start_span(f"process {topics[0]}" if len(topics) == 1 else "process",
                                      context=parent, kind=self.trace.SpanKind.CONSUMER,
                                      attributes=attrs, links=links)
        try:
            with self.trace.use_span(span, end_on_exit=False, record_exception=False,
                                     set_status_on_exception=False):
                yield span
        except Exception as exc:
            span.record_exception(exc)
            span.set_status(self.trace.Status(self.trace.StatusCode.ERROR, str(exc)))
            span.set_attribute("error.type", type(exc).__name__)
            raise
        finally:
            span.end()

    @contextmanager
    def process(self, record: Any) -> Iterator[Any]:
        """``with tracing.process(record):`` -- the record's ``process`` span, current
        inside the block (spans made there are its children), its error recorded."""
        span = self.start_process(record)
        try:
            with self.trace.use_span(span, end_on_exit=False, record_exception=False,
                                     set_status_on_exception=False):
                yield span
        except Exception as exc:     # (not GeneratorExit: an iterator left early)
            span.record_exception(exc)
            span.set_status(self.trace.Status(self.trace.StatusCode.ERROR, str(exc)))
            span.set_attribute("error.type", type(exc).__name__)
            raise
        finally:
            span.end()
