"""The broker's metrics, one registry per node, named as Kafka's broker MBeans name them.

The group is the MBean's ``domain:type`` and the name its ``name`` (the registry adds
``-total`` and ``-rate`` to a counter, Kafka's meter ``Count`` and rate)::

    kafka.server:BrokerTopicMetrics    BytesInPerSec, MessagesInPerSec, BytesOutPerSec,
                                       all topics and {topic}; {topic, partition} too (kcodec's
                                       own: Kafka stops at the topic)
    kafka.network:RequestMetrics       RequestsPerSec {request}, TotalTimeMs {request} (a
                                       histogram: -avg, -max, -p50, -p95, -p99; from the
                                       frame's arrival to its answer), ErrorsPerSec
                                       {request, error} (every error code in an answer)
    kafka.network:RequestChannel       RequestQueueSize (requests read, not yet answered)
    kafka.server:KafkaRequestHandlerPool  RequestHandlerAvgIdlePercent (0..1, since the last
                                       read: the handlers' time waiting for a request)
    kafka.server:DelayedOperationPurgatory  PurgatorySize (operations waiting: long-polling
                                       fetches, joins)
    kafka.server:ReplicaManager        PartitionCount, LeaderCount, UnderReplicatedPartitions
                                       (always 0: kcodec's nodes share one log, nothing is
                                       replicated, so nothing can be under-replicated)
    kafka.log:Log                      Size, LogStartOffset, LogEndOffset, NumLogSegments
                                       {topic, partition}
    kafka.network:SocketServer         ConnectionCount (open client connections)
    kafka.server:ClientMetrics         KIP-714: pushes received, and each pushed metric's last
                                       value {client_instance_id, metric, ...its attributes}

Every node tags its metrics ``node-id``.
"""

from __future__ import annotations

import time
from typing import Any

from kcodec.observe.metrics import Counter, Histogram, Registry
from kcodec.protocol import ApiKey, ErrorCode

__all__ = ["BrokerMetrics", "error_codes", "api_name"]

TOPIC = "kafka.server:BrokerTopicMetrics"
PARTITION = "kafka.server:BrokerTopicPartitionMetrics"
REQUEST = "kafka.network:RequestMetrics"


def api_name(api_key: int) -> str:
    try:
        return ApiKey(api_key).name.title().replace("_", "")
    except ValueError:
        return str(api_key)


class BrokerMetrics:
    """One node's registry and the sensors its hooks update."""

    def __init__(self, node: Any) -> None:
        self.node = node
        reg = self.registry = Registry({"node-id": node.id})
        self.bytes_in = reg.counter(TOPIC, "BytesInPerSec", doc="record bytes appended")
        self.messages_in = reg.counter(TOPIC, "MessagesInPerSec", doc="records appended")
        self.bytes_out = reg.counter(TOPIC, "BytesOutPerSec", doc="record bytes fetched")
        self._topic: dict[str, tuple[Counter, Counter, Counter]] = {}
        self._part: dict[tuple[str, int], tuple[Counter, Counter, Counter]] = {}
        self._api: dict[int, tuple[Counter, Histogram]] = {}
        self._errors: dict[tuple[int, int], Counter] = {}
        self._idle_mark = (time.monotonic(), 0.0)
        reg.gauge("kafka.network:RequestChannel", "RequestQueueSize", self._queue_size,
                  doc="requests read and not yet taken by a handler")
        reg.gauge("kafka.server:KafkaRequestHandlerPool", "RequestHandlerAvgIdlePercent",
                  self._idle, doc="fraction of the handlers' time spent waiting (0..1)")
        reg.gauge("kafka.server:DelayedOperationPurgatory", "PurgatorySize", self._purgatory,
                  doc="delayed operations waiting")
        reg.gauge("kafka.server:ReplicaManager", "UnderReplicatedPartitions", lambda: 0,
                  doc="always 0: kcodec's nodes share one log (no replication)")
        reg.gauge("kafka.network:SocketServer", "ConnectionCount", lambda: node.connections,
                  doc="open client connections")
        reg.collect(self._logs)

    # ------------------------------------------------------------------ hooks
    def _sensors(self, topic: str, index: int) -> tuple[tuple[Counter, Counter, Counter],
                                                       tuple[Counter, Counter, Counter]]:
        t = self._topic.get(topic)
        reg = self.registry
        if t is None:
            tags: dict[str, Any] = {"topic": topic}
            t = self._topic[topic] = (reg.counter(TOPIC, "BytesInPerSec", tags),
                                      reg.counter(TOPIC, "MessagesInPerSec", tags),
                                      reg.counter(TOPIC, "BytesOutPerSec", tags))
        p = self._part.get((topic, index))
        if p is None:
            tags = {"topic": topic, "partition": index}
            p = self._part[(topic, index)] = (reg.counter(PARTITION, "BytesInPerSec", tags),
                                              reg.counter(PARTITION, "MessagesInPerSec", tags),
                                              reg.counter(PARTITION, "BytesOutPerSec", tags))
        return t, p

    def appended(self, topic: str, index: int, records: int, nbytes: int) -> None:
        t, p = self._sensors(topic, index)
        self.bytes_in.value += nbytes
        self.messages_in.value += records
        t[0].value += nbytes
        t[1].value += records
        p[0].value += nbytes
        p[1].value += records

    def fetched(self, topic: str, index: int, nbytes: int) -> None:
        t, p = self._sensors(topic, index)
        self.bytes_out.value += nbytes
        t[2].value += nbytes
        p[2].value += nbytes

    def answered(self, api_key: int, total_ms: float, answer: Any) -> None:
        """A request of ``api_key`` answered ``total_ms`` after its frame arrived."""
        s = self._api.get(api_key)
        if s is None:
            tags = {"request": api_name(api_key)}
            s = self._api[api_key] = (
                self.registry.counter(REQUEST, "RequestsPerSec", tags, "requests answered"),
                self.registry.histogram(REQUEST, "TotalTimeMs", tags,
                                        "ms from the frame's arrival to its answer"))
        s[0].value += 1
        s[1].record(total_ms)
        if answer is not None and not isinstance(answer, (bytes, str)):
            for code, n in error_codes(answer).items():
                c = self._errors.get((api_key, code))
                if c is None:
                    c = self._errors[(api_key, code)] = self.registry.counter(
                        REQUEST, "ErrorsPerSec", {"request": api_name(api_key),
                                                  "error": _error(code)},
                        "error codes in answers")
                c.value += n

    # ------------------------------------------------------------------ gauges
    def _queue_size(self) -> int:
        ch = getattr(self.node, "channel", None)
        return ch.queue_size() if ch is not None and self.node.running else 0

    def _idle(self) -> float:
        now, total = time.monotonic(), self.node.handler_idle_s
        t, idle = self._idle_mark
        if total < idle:                  # the node restarted: a new pool
            idle = 0.0
        span = (now - t) * max(self.node.n_handlers, 1)
        self._idle_mark = (now, total)
        return min(max((total - idle) / span, 0.0), 1.0) if span > 0 else 1.0

    def _purgatory(self) -> int:
        p = getattr(self.node.cluster, "purgatory", None)
        return p.size() if p is not None else 0

    def _logs(self) -> list[tuple[str, str, dict, float, str]]:
        state = self.node.cluster.state
        out: list[tuple[str, str, dict, float, str]] = []
        parts = leaders = 0
        with state.lock:
            topics = list(state.topics.values())
        for t in topics:
            for index, p in list(t.partitions.items()):
                parts += 1
                if p.leader != self.node.id:
                    continue
                leaders += 1
                log = p.log
                tags = {"topic": t.name, "partition": index}
                out += [("kafka.log:Log", "Size", tags, log.size_bytes, "gauge"),
                        ("kafka.log:Log", "LogStartOffset", tags, log.log_start_offset, "gauge"),
                        ("kafka.log:Log", "LogEndOffset", tags, log.log_end_offset, "gauge"),
                        ("kafka.log:Log", "NumLogSegments", tags, len(log.segments), "gauge")]
        out += [("kafka.server:ReplicaManager", "PartitionCount", {}, parts, "gauge"),
                ("kafka.server:ReplicaManager", "LeaderCount", {}, leaders, "gauge")]
        # what the log recovery at start cut off (kcodec.broker.log.recovery)
        cuts = list(getattr(getattr(state, "logs", None), "truncations", ()) or ())
        out += [("kcodec.log:LogRecovery", "TruncatedPartitions", {}, len(cuts), "gauge"),
                ("kcodec.log:LogRecovery", "TruncatedBytes", {},
                 sum(c.total_bytes for c in cuts), "gauge"),
                ("kcodec.log:LogRecovery", "TruncatedBelowRecoveryPoint", {},
                 sum(c.below_recovery_point for c in cuts), "gauge")]
        for c in cuts:
            out.append(("kcodec.log:LogRecovery", "TruncatedAtOffset",
                        {"topic": c.topic, "partition": c.partition}, c.offset, "gauge"))
        telemetry = getattr(self.node.cluster, "telemetry", None)
        if telemetry is not None:
            out += telemetry.samples()
        return out


def _error(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return str(code)


#: per message class, the names of its fields that are arrays of structs (None: not a
#: generated message, walk every slot)
_NESTED: dict[type, tuple[str, ...] | None] = {}


def _nested(cls: type) -> tuple[str, ...] | None:
    try:
        return _NESTED[cls]
    except KeyError:
        pass
    info = getattr(cls, "_info", None)
    names = None if info is None else tuple(
        fi.name for fi in info if fi.is_array and fi.struct_cls is not None)
    _NESTED[cls] = names
    return names


def error_codes(body: Any, depth: int = 0) -> dict[int, int]:
    """Every non-zero ``error_code`` in a response body and its nested lists, counted."""
    out: dict[int, int] = {}
    _count_errors(body, depth, out)
    return out


def _count_errors(body: Any, depth: int, out: dict[int, int]) -> None:
    code = getattr(body, "error_code", 0)
    if code:
        out[code] = out.get(code, 0) + 1
    if depth > 3:
        return
    names = _nested(type(body))
    if names is None:
        names = getattr(body, "__slots__", ())
    for name in names:
        v = getattr(body, name, None)
        if isinstance(v, list) and v and hasattr(v[0], "__slots__"):
            for item in v:
                _count_errors(item, depth + 1, out)
