"""The client's metrics, named as the Java client names them (kcodec.observe.metrics).

One ``ClientMetrics`` per client (its ``Cluster`` holds it; None with
``metrics_enabled=False``, and every hook then skips on one ``is None`` test). ``kind`` is
``producer``, ``consumer`` or ``admin``, which prefixes the groups as in Java::

    <kind>-metrics               connection-creation-total, connection-close-total,
                                 connection-count, request-errors-total {api, error},
                                 request-retry-total {api}, incoming-byte-total,
                                 outgoing-byte-total, request-total
    <kind>-node-metrics          {node-id}: request-total, request-latency-avg/max/p50/p95/
                                 p99, outgoing-byte-total, incoming-byte-total,
                                 requests-in-flight; {node-id, api}: request-total,
                                 request-latency-*, throttle-time-*
    producer-metrics             record-send-total, record-retry-total, record-error-total,
                                 batch-size-*, compression-rate-*, record-queue-time-*,
                                 records-per-request-*, produce-throttle-time-*,
                                 buffer-available-bytes, buffer-total-bytes, batch-split
    producer-topic-metrics       {topic}: record-send-total, byte-total, record-retry-total,
                                 record-error-total, compression-rate-*
    consumer-fetch-manager-metrics  records-consumed-total, bytes-consumed-total,
                                 fetch-total, fetch-latency-*, fetch-throttle-time-*,
                                 records-lag-max; {topic}: records-consumed-total,
                                 bytes-consumed-total; {topic, partition}: records-lag,
                                 records-lead
    consumer-coordinator-metrics commit-total, commit-latency-*, rebalance-total,
                                 rebalance-latency-*, failed-rebalance-total,
                                 last-rebalance-seconds-ago, assigned-partitions
    consumer-metrics             poll-idle-ratio-avg, time-between-poll-*,
                                 last-poll-seconds-ago

Latencies are in milliseconds, sizes in bytes, as Java reports them; ``-total`` is a
counter, ``-rate`` its per-second rate over the last 30 to 60 s.
"""

from __future__ import annotations

import math
import time
from typing import Any

from kcodec.observe.metrics import Counter, Histogram, Registry
from kcodec.protocol import ApiKey, ErrorCode

__all__ = ["ClientMetrics", "NodeMetrics", "cluster_of"]


def _api(api_key: int) -> str:
    try:
        return ApiKey(api_key).name.title().replace("_", "")
    except ValueError:
        return str(api_key)


def _error(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return str(code)


class NodeMetrics:
    """The sensors of one broker connection, resolved once (a dict look-up per request)."""

    __slots__ = ("reg", "group", "node", "requests", "latency", "out_bytes", "in_bytes",
                 "per_api", "all_requests", "all_out", "all_in", "throttle_of")

    def __init__(self, cm: ClientMetrics, node_id: int) -> None:
        reg = self.reg = cm.registry
        self.group = g = f"{cm.kind}-node-metrics"
        self.node = {"node-id": f"node-{node_id}"}
        self.requests = reg.counter(g, "request", self.node, "requests sent to the node")
        self.latency = reg.histogram(g, "request-latency", self.node,
                                     "request latency to the node, ms")
        self.out_bytes = reg.counter(g, "outgoing-byte", self.node, "bytes sent to the node")
        self.in_bytes = reg.counter(g, "incoming-byte", self.node, "bytes read from the node")
        self.all_requests = cm.requests
        self.all_out = cm.out_bytes
        self.all_in = cm.in_bytes
        self.per_api: dict[int, tuple[Counter, Histogram, Histogram]] = {}
        self.throttle_of = cm.throttle_of

    def _api(self, api_key: int) -> tuple[Counter, Histogram, Histogram]:
        tags = {**self.node, "api": _api(api_key)}
        s = self.per_api[api_key] = (
            self.reg.counter(self.group, "request", tags, "requests of this API to the node"),
            self.reg.histogram(self.group, "request-latency", tags, "latency, ms"),
            self.reg.histogram(self.group, "throttle-time", tags,
                               "throttle time the broker asked for, ms"))
        return s

    def sent(self, nbytes: int) -> None:
        self.requests.value += 1
        self.all_requests.value += 1
        self.out_bytes.value += nbytes
        self.all_out.value += nbytes

    def received(self, nbytes: int) -> None:
        self.in_bytes.value += nbytes
        self.all_in.value += nbytes

    def answered(self, api_key: int, ms: float, body: Any) -> None:
        """One response of ``api_key`` after ``ms`` milliseconds."""
        s = self.per_api.get(api_key)
        if s is None:
            s = self._api(api_key)
        s[0].value += 1
        s[1].record(ms)
        self.latency.record(ms)
        throttle = getattr(body, "throttle_time_ms", None)
        if throttle is not None:
            s[2].record(throttle)
            also = self.throttle_of.get(api_key)
            if also is not None:
                also.record(throttle)


class ClientMetrics:
    """One client's registry and the sensors its hooks update (see the module docstring)."""

    def __init__(self, kind: str, client_id: str) -> None:
        self.kind = kind
        self.registry = reg = Registry({"client-id": client_id})
        g = self.group = f"{kind}-metrics"
        self.requests = reg.counter(g, "request", doc="requests sent to all brokers")
        self.out_bytes = reg.counter(g, "outgoing-byte", doc="bytes sent to all brokers")
        self.in_bytes = reg.counter(g, "incoming-byte", doc="bytes read from all brokers")
        self.conn_created = reg.counter(g, "connection-creation", doc="connections opened")
        self.conn_closed = reg.counter(g, "connection-close", doc="connections closed or lost")
        self.nodes: dict[int, NodeMetrics] = {}
        self.throttle_of: dict[int, Histogram] = {}
        self._errors: dict[tuple[str, int], Counter] = {}
        self._retries: dict[str, Counter] = {}
        if kind == "producer":
            self._producer(reg)
        elif kind == "consumer":
            self._consumer(reg)

    # ------------------------------------------------------------------ common
    def node(self, node_id: int) -> NodeMetrics:
        m = self.nodes.get(node_id)
        if m is None:
            m = self.nodes[node_id] = NodeMetrics(self, node_id)
        return m

    def in_flight(self, node_id: int, fn: Any) -> None:
        self.registry.gauge(f"{self.kind}-node-metrics", "requests-in-flight", fn,
                            {"node-id": f"node-{node_id}"}, "requests awaiting an answer")

    def error(self, api: str, code: int, n: int = 1) -> None:
        """``n`` answers of ``api`` (a name) carried error ``code``."""
        key = (api, code)
        c = self._errors.get(key)
        if c is None:
            c = self._errors[key] = self.registry.counter(
                self.group, "request-errors", {"api": api, "error": _error(code)},
                "error codes in answers, by API and code")
        c.value += n

    def retry(self, what: str) -> None:
        c = self._retries.get(what)
        if c is None:
            c = self._retries[what] = self.registry.counter(
                self.group, "request-retry", {"api": what}, "requests retried")
        c.value += 1

    # ------------------------------------------------------------------ producer
    def _producer(self, reg: Registry) -> None:
        g = "producer-metrics"
        self.record_send = reg.counter(g, "record-send", doc="records acknowledged")
        self.record_retry = reg.counter(g, "record-retry", doc="records sent again")
        self.record_error = reg.counter(g, "record-error", doc="records failed")
        self.batch_size = reg.histogram(g, "batch-size", doc="bytes per batch sent")
        self.compression = reg.histogram(g, "compression-rate",
                                         doc="compressed / uncompressed size of each batch")
        self.queue_time = reg.histogram(g, "record-queue-time",
                                        doc="ms a batch waited before its first send")
        self.per_request = reg.histogram(g, "records-per-request",
                                         doc="records per Produce request")
        self.batch_split = reg.counter(g, "batch-split", doc="batches split to fit")
        self.throttle_of[ApiKey.PRODUCE] = reg.histogram(
            g, "produce-throttle-time", doc="throttle time of Produce answers, ms")
        self._topics: dict[str, tuple[Counter, Counter, Counter, Counter, Histogram]] = {}

    def producer_topic(self, topic: str) -> tuple[Counter, Counter, Counter, Counter, Histogram]:
        s = self._topics.get(topic)
        if s is None:
            g, t, reg = "producer-topic-metrics", {"topic": topic}, self.registry
            s = self._topics[topic] = (
                reg.counter(g, "record-send", t), reg.counter(g, "byte", t),
                reg.counter(g, "record-retry", t), reg.counter(g, "record-error", t),
                reg.histogram(g, "compression-rate", t))
        return s

    def batch_sent(self, topic: str, records: int, nbytes: int, raw: int, waited_s: float,
                   first: bool) -> None:
        """A batch written into a Produce request (``first``: its first attempt)."""
        if first:
            self.queue_time.record(waited_s * 1000)
        else:
            self.record_retry.value += records
            self.producer_topic(topic)[2].value += records
        self.batch_size.record(nbytes)
        rate = nbytes / raw if raw else 1.0
        self.compression.record(rate)
        t = self.producer_topic(topic)
        t[4].record(rate)

    def batch_done(self, topic: str, records: int, nbytes: int, error: bool) -> None:
        t = self.producer_topic(topic)
        if error:
            self.record_error.value += records
            t[3].value += records
        else:
            self.record_send.value += records
            t[0].value += records
            t[1].value += nbytes

    def buffer(self, total: int, used: Any) -> None:
        g = "producer-metrics"
        self.registry.gauge(g, "buffer-total-bytes", lambda: total, doc="buffer_memory")
        self.registry.gauge(g, "buffer-available-bytes", lambda: total - used(),
                            doc="buffer_memory not taken by queued batches")

    # ------------------------------------------------------------------ consumer
    def _consumer(self, reg: Registry) -> None:
        g = "consumer-fetch-manager-metrics"
        self.consumed = reg.counter(g, "records-consumed", doc="records returned by poll")
        self.consumed_bytes = reg.counter(g, "bytes-consumed", doc="record bytes fetched")
        self.fetches = reg.counter(g, "fetch", doc="Fetch requests answered")
        self.fetch_latency = reg.histogram(g, "fetch-latency", doc="Fetch latency, ms")
        self.throttle_of[ApiKey.FETCH] = reg.histogram(g, "fetch-throttle-time",
                                                       doc="throttle time of Fetch answers, ms")
        c = "consumer-coordinator-metrics"
        self.commits = reg.counter(c, "commit", doc="offset commits")
        self.commit_latency = reg.histogram(c, "commit-latency", doc="OffsetCommit latency, ms")
        self.rebalances = reg.counter(c, "rebalance", doc="rebalances completed")
        self.failed_rebalances = reg.counter(c, "failed-rebalance", doc="rebalances failed")
        self.rebalance_latency = reg.histogram(c, "rebalance-latency",
                                               doc="ms from the start of a rebalance to its end")
        self.last_rebalance = 0.0
        reg.gauge(c, "last-rebalance-seconds-ago",
                  lambda: time.monotonic() - self.last_rebalance if self.last_rebalance
                  else -1, doc="seconds since the last rebalance ended (-1: none yet)")
        m = "consumer-metrics"
        self.poll_idle = reg.histogram(m, "poll-idle-ratio",
                                       doc="fraction of time spent inside poll")
        self.between_polls = reg.histogram(m, "time-between-poll",
                                           doc="ms between the ends of two polls")
        self.last_poll_end = 0.0
        self.poll_start = 0.0
        reg.gauge(m, "last-poll-seconds-ago",
                  lambda: time.monotonic() - self.last_poll_end if self.last_poll_end else -1,
                  doc="seconds since the last poll returned (-1: none yet)")
        self._ctopics: dict[str, tuple[Counter, Counter]] = {}

    def consumer_topic(self, topic: str) -> tuple[Counter, Counter]:
        s = self._ctopics.get(topic)
        if s is None:
            g, t = "consumer-fetch-manager-metrics", {"topic": topic}
            s = self._ctopics[topic] = (self.registry.counter(g, "records-consumed", t),
                                        self.registry.counter(g, "bytes-consumed", t))
        return s

    def polled(self, start: float, end: float, records: dict) -> None:
        """One poll from ``start`` to ``end`` (monotonic) that returned ``records``."""
        n = 0
        for tp, recs in records.items():
            k = len(recs)
            n += k
            self.consumer_topic(tp[0])[0].value += k
        self.consumed.value += n
        last = self.last_poll_end
        if last:
            span = end - last
            self.between_polls.record(span * 1000)
            if span > 0:
                self.poll_idle.record(min((end - start) / span, 1.0))
        self.last_poll_end = end

    def assigned(self, states: dict) -> None:
        """Lag and lead gauges for the partitions in ``states`` (tp -> PartitionState),
        those of partitions no longer there removed."""
        g = "consumer-fetch-manager-metrics"
        reg = self.registry
        reg.remove(g, "records-lag")
        reg.remove(g, "records-lead")
        for tp, st in states.items():
            tags = {"topic": tp[0], "partition": tp[1]}
            reg.gauge(g, "records-lag", _lag(st), tags, "high watermark - position")
            reg.gauge(g, "records-lead", _lead(st), tags, "position - log start offset")

        def lag_max() -> float:
            lags = [_lag(st)() for st in list(states.values())]
            lags = [x for x in lags if not math.isnan(x)]
            return max(lags) if lags else math.nan
        reg.gauge(g, "records-lag-max", lag_max, doc="the largest records-lag")
        reg.gauge("consumer-coordinator-metrics", "assigned-partitions", lambda: len(states),
                  doc="partitions assigned")


def _lag(st: Any) -> Any:
    def lag() -> float:
        if st.high_watermark < 0 or st.position is None:
            return math.nan
        return max(st.high_watermark - st.position, 0)
    return lag


def _lead(st: Any) -> Any:
    def lead() -> float:
        start = getattr(st, "log_start", -1)
        if start < 0 or st.position is None:
            return math.nan
        return st.position - start
    return lead


def cluster_of(client: Any) -> Any:
    """The ``Cluster`` of any kcodec client (producer, consumer, admin; blocking or async)."""
    for path in (("_engine", "cluster"), ("_eng", "cluster"), ("cluster",),
                 ("_async", "cluster"), ("_async", "_eng", "cluster")):
        obj = client
        try:
            for name in path:
                obj = getattr(obj, name)
        except (AttributeError, ValueError):
            continue
        if obj is not None and hasattr(obj, "metrics"):
            return obj
    raise TypeError(f"{type(client).__name__} is not a started kcodec client")


def registry_of(client: Any) -> Registry:
    """The metrics registry of ``client``; ``ValueError`` if its metrics are off."""
    cm = cluster_of(client).metrics
    if cm is None:
        raise ValueError(f"{type(client).__name__}'s metrics are off (metrics_enabled=False)")
    return cm.registry


def metrics_of(client: Any) -> dict[str, dict[str, Any]]:
    """``client.metrics()``: ``{group: {name: value or [{"tags": .., "value": ..}]}}``."""
    return registry_of(client).as_dict()


def serve_prometheus(*clients: Any, port: int = 0, addr: str = "127.0.0.1") -> Any:
    """Serve the metrics of ``clients`` on ``http://addr:port/metrics`` for Prometheus, in one
    call (port 0: a free one, read ``.port``); ``.close()`` stops it. Needs the
    ``prometheus`` extra (prometheus_client)."""
    from kcodec.observe.prometheus import serve

    return serve(port, *(registry_of(c) for c in clients), addr=addr)
