"""KIP-714 on the broker: client metrics subscriptions, and the metrics clients push.

A :class:`ClientMetricsSubscription` is Kafka's ``client-metrics`` config resource: a
name, the metric name prefixes asked for (``metrics``; ``[""]`` for all), the push interval
and the clients it applies to (``match``: regular expressions on ``client_id``,
``client_software_name``, ``client_software_version``, ``client_source_address``,
``client_instance_id``; all must match). A client gets the union of the metrics of every
subscription that matches it, at the smallest interval among them.

``GetTelemetrySubscriptions`` gives a client (a new one: a fresh ``client_instance_id``)
its subscription; ``PushTelemetry`` is checked (the subscription id is the current one,
the client did not push sooner than half its interval, the payload fits
``telemetry_max_bytes``, decompresses and decodes) and kept: the pushes per client and each
metric's last value, exposed through the node's metrics (``kafka.server:ClientMetrics``).
"""

from __future__ import annotations

import re
import threading
import time
import uuid
import zlib
from dataclasses import dataclass, field

from kcodec.errors import KcodecError
from kcodec.observe.log import get_logger
from kcodec.protocol import ErrorCode

__all__ = ["ClientMetricsSubscription", "ClientTelemetry", "parse_subscription",
           "GET_TELEMETRY_SUBSCRIPTIONS", "PUSH_TELEMETRY"]

log = get_logger(__name__)

GET_TELEMETRY_SUBSCRIPTIONS = 71        # ApiKey.GET_TELEMETRY_SUBSCRIPTIONS (newest specs)
PUSH_TELEMETRY = 72                     # ApiKey.PUSH_TELEMETRY
MATCH_KEYS = ("client_id", "client_software_name", "client_software_version",
              "client_source_address", "client_instance_id")
# codecs a client may compress its pushes with: zstd, lz4, gzip, snappy (Kafka's ids)
ACCEPTED_COMPRESSION = [4, 3, 1, 2]


@dataclass
class ClientMetricsSubscription:
    name: str
    metrics: list[str]
    interval_ms: int = 300_000            # Kafka's default interval.ms
    match: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.name:
            raise ValueError("a client metrics subscription needs a name")
        if not 100 <= self.interval_ms <= 3_600_000:
            raise ValueError(f"client metrics {self.name!r}: interval.ms must be 100 to "
                             f"3600000, got {self.interval_ms}")
        for k, pattern in self.match.items():
            if k not in MATCH_KEYS:
                raise ValueError(f"client metrics {self.name!r}: unknown match key {k!r} "
                                 f"(known: {', '.join(MATCH_KEYS)})")
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"client metrics {self.name!r}: bad pattern for {k}: "
                                 f"{exc}") from None

    def matches(self, client: dict[str, str]) -> bool:
        return all(re.fullmatch(p, client.get(k, "")) for k, p in self.match.items())


def parse_subscription(text: str) -> ClientMetricsSubscription:
    """``NAME:metrics=P1,P2;interval.ms=N;match=client_id=REGEX,...`` (the CLI's form;
    ``metrics=*`` for all)."""
    name, _, rest = text.partition(":")
    opts: dict[str, str] = {}
    for part in filter(None, (p.strip() for p in rest.split(";"))):
        k, sep, v = part.partition("=")
        if not sep:
            raise ValueError(f"client metrics {text!r}: {part!r} is not KEY=VALUE")
        opts[k.strip()] = v.strip()
    unknown = set(opts) - {"metrics", "interval.ms", "match"}
    if unknown:
        raise ValueError(f"client metrics {text!r}: unknown {', '.join(sorted(unknown))} "
                         f"(known: metrics, interval.ms, match)")
    metrics = [m.strip() for m in opts.get("metrics", "").split(",") if m.strip()]
    metrics = [""] if metrics == ["*"] else metrics
    match = {}
    for m in filter(None, opts.get("match", "").split(",")):
        k, sep, v = m.partition("=")
        if not sep:
            raise ValueError(f"client metrics {text!r}: match {m!r} is not KEY=REGEX")
        match[k.strip()] = v.strip()
    try:
        interval = int(opts.get("interval.ms", "300000"))
    except ValueError:
        raise ValueError(f"client metrics {text!r}: interval.ms must be an integer") from None
    return ClientMetricsSubscription(name.strip(), metrics, interval, match)


@dataclass
class _Client:
    instance_id: uuid.UUID
    info: dict[str, str]
    subscription_id: int = 0
    interval_ms: int = 0
    metrics: list[str] = field(default_factory=list)
    pushes: int = 0
    last_push: float = 0.0
    terminated: bool = False
    values: dict[tuple[str, tuple[tuple[str, str], ...]], tuple[float, bool]] = \
        field(default_factory=dict)


class ClientTelemetry:
    """The subscriptions and what clients pushed (one per broker cluster)."""

    def __init__(self, subscriptions: list[ClientMetricsSubscription] | None = None,
                 max_bytes: int = 1024 * 1024) -> None:
        self.subscriptions = list(subscriptions or [])
        self.max_bytes = max_bytes
        self.clients: dict[uuid.UUID, _Client] = {}
        self.pushes = 0
        self.rejected = 0
        self._lock = threading.Lock()

    def _plan(self, info: dict[str, str]) -> tuple[list[str], int]:
        wanted: list[str] = []
        interval = 0
        for s in self.subscriptions:
            if s.matches(info):
                wanted += [m for m in s.metrics if m not in wanted]
                interval = s.interval_ms if not interval else min(interval, s.interval_ms)
        return wanted, interval or 300_000

    def subscribe(self, instance_id: uuid.UUID, info: dict[str, str]) -> _Client:
        """GetTelemetrySubscriptions: the client's record (new: a fresh instance id), its
        subscription worked out again."""
        with self._lock:
            if instance_id.int == 0 or instance_id not in self.clients:
                if instance_id.int == 0:
                    instance_id = uuid.uuid4()
                self.clients[instance_id] = _Client(instance_id, dict(info))
            c = self.clients[instance_id]
            c.info.update(info)
            c.info["client_instance_id"] = str(instance_id)
            c.metrics, c.interval_ms = self._plan(c.info)
            key = f"{instance_id}|{c.interval_ms}|{','.join(sorted(c.metrics))}"
            c.subscription_id = zlib.crc32(key.encode()) - (1 << 31)
            c.terminated = False
            return c

    def push(self, instance_id: uuid.UUID, subscription_id: int, terminating: bool,
             compression: int, payload: bytes) -> int:
        """PushTelemetry: the error code to answer (0: kept)."""
        from kcodec.compression import decompress
        from kcodec.observe.telemetry import decode_metrics

        with self._lock:
            c = self.clients.get(instance_id)
            if c is None or c.subscription_id != subscription_id:
                self.rejected += 1
                return ErrorCode.UNKNOWN_SUBSCRIPTION_ID
            now = time.monotonic()
            if (not terminating and c.last_push
                    and now - c.last_push < c.interval_ms / 2000):
                self.rejected += 1
                return ErrorCode.THROTTLING_QUOTA_EXCEEDED
            if c.terminated:
                self.rejected += 1
                return ErrorCode.INVALID_REQUEST
        if len(payload) > self.max_bytes:
            self.rejected += 1
            return ErrorCode.TELEMETRY_TOO_LARGE
        if compression and compression not in ACCEPTED_COMPRESSION:
            self.rejected += 1
            return ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
        try:
            data = decompress(compression, payload, self.max_bytes * 16) if compression \
                else payload
            _resource, points = decode_metrics(data)
        except KcodecError as exc:
            log.info("client %s: PushTelemetry refused: %s", instance_id, exc)
            self.rejected += 1
            return ErrorCode.INVALID_RECORD
        with self._lock:
            c.pushes += 1
            self.pushes += 1
            c.last_push = time.monotonic()
            c.terminated = terminating
            for p in points:
                attrs = tuple(sorted((str(k), str(v)) for k, v in p.attributes.items()))
                c.values[(p.name, attrs)] = (p.value, p.sum)
        return ErrorCode.NONE

    def samples(self) -> list[tuple[str, str, dict, float, str]]:
        """Readings for the node's metrics (kcodec.broker.metrics)."""
        g = "kafka.server:ClientMetrics"
        out: list[tuple[str, str, dict, float, str]] = [
            (g, "PushTelemetryAccepted", {}, self.pushes, "counter"),
            (g, "PushTelemetryRejected", {}, self.rejected, "counter"),
            (g, "ClientInstances", {}, len(self.clients), "gauge")]
        with self._lock:
            clients = list(self.clients.values())
        for c in clients:
            who = {"client_instance_id": str(c.instance_id),
                   "client_id": c.info.get("client_id", "")}
            out.append((g, "Pushes", who, c.pushes, "counter"))
            for (name, attrs), (value, is_sum) in list(c.values.items()):
                out.append((g, name, {**who, **dict(attrs)}, value,
                            "counter" if is_sum else "gauge"))
        return out
