"""Prometheus exposition of kcodec registries (the ``prometheus`` extra: prometheus_client).

Names: the group and name joined, lower case, every run of other characters an
underscore; a client's groups get the prefix ``kcodec_`` (``producer-metrics`` /
``record-send`` -> ``kcodec_producer_metrics_record_send_total``), a broker's keep Kafka's
domain (``kafka.server:BrokerTopicMetrics`` / ``BytesInPerSec`` ->
``kafka_server_brokertopicmetrics_bytesinpersec_total``, as the JMX exporter's default
rules spell them), and the runtime's keep theirs (``kcodec.runtime:Worker`` / ``done`` ->
``kcodec_runtime_worker_done_total``). Tags are labels (``client-id`` -> ``client_id``).

Kinds: a counter is a Prometheus counter (``_total``: take ``rate()`` in PromQL; the
registry's own ``-rate`` is left out), a gauge a gauge, a histogram a histogram with the
registry's log-spaced buckets (``_bucket``, ``_sum``, ``_count``: ``histogram_quantile()``).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from kcodec.observe.metrics import Counter, Gauge, Histogram, Registry

__all__ = ["Exporter", "serve", "metric_name", "render"]

_EXTRA = ("Prometheus metrics need prometheus_client: pip install 'kcodec[prometheus]'")
_BAD = re.compile(r"[^a-zA-Z0-9]+")


def _require() -> Any:
    try:
        import prometheus_client
    except ImportError as exc:
        raise ImportError(_EXTRA) from exc
    return prometheus_client


def metric_name(group: str, name: str) -> str:
    """The Prometheus name of ``group``/``name`` (see the module docstring)."""
    base = f"{group}_{name}"
    if not group.startswith(("kafka.", "kcodec.")):
        base = f"kcodec_{base}"
    return _BAD.sub("_", base).strip("_").lower()


def _label(key: str) -> str:
    return _BAD.sub("_", key).strip("_").lower()


class _Collector:
    """A prometheus_client collector reading registries at every scrape."""

    def __init__(self, sources: Callable[[], Iterable[Registry]]) -> None:
        self.sources = sources

    def describe(self) -> list:      # no fixed set: checked at collection only
        return []

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import (
            CounterMetricFamily,
            GaugeMetricFamily,
            HistogramMetricFamily,
        )

        families: dict[str, Any] = {}

        def family(kind: str, name: str, doc: str, labels: list[str]) -> Any:
            key = f"{kind}:{name}:{','.join(labels)}"
            f = families.get(key)
            if f is None:
                cls = {"counter": CounterMetricFamily, "gauge": GaugeMetricFamily,
                       "histogram": HistogramMetricFamily}[kind]
                f = families[key] = cls(name, doc or name, labels=labels)
            return f

        for reg in self.sources():
            for group, name, tags, m in reg.metrics():
                labels = [_label(k) for k, _ in tags]
                values = [v for _, v in tags]
                pname = metric_name(group, name)
                if isinstance(m, Counter):
                    family("counter", pname, m.doc, labels).add_metric(values, m.value)
                elif isinstance(m, Gauge):
                    family("gauge", pname, m.doc, labels).add_metric(values, m.read())
                elif isinstance(m, Histogram):
                    buckets = [(repr(b), c) for b, c in m.buckets()]
                    buckets.append(("+Inf", m.count))
                    family("histogram", pname, m.doc, labels).add_metric(values, buckets,
                                                                         m.total)
            for s in reg.snapshot_collected():
                labels = [_label(k) for k, _ in s.tags]
                kind = "counter" if s.kind == "counter" else "gauge"
                family(kind, metric_name(s.group, s.name), s.doc, labels).add_metric(
                    [v for _, v in s.tags], s.value)
        return iter(families.values())


class Exporter:
    """An HTTP server answering ``/metrics`` with the registries ``sources()`` gives."""

    def __init__(self, sources: Callable[[], Iterable[Registry]], port: int,
                 addr: str = "127.0.0.1") -> None:
        pc = _require()
        self.registry = pc.CollectorRegistry(auto_describe=False)
        self.registry.register(_Collector(sources))
        started = pc.start_http_server(port, addr=addr, registry=self.registry)
        self._server, self._thread = started if isinstance(started, tuple) else (None, None)
        self.port = self._server.server_port if self._server is not None else port
        self.addr = addr

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    def __enter__(self) -> Exporter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def serve(port: int, *registries: Registry, addr: str = "127.0.0.1",
          sources: Callable[[], Iterable[Registry]] | None = None) -> Exporter:
    """Serve ``registries`` (or what ``sources()`` gives at each scrape) on
    ``http://addr:port/metrics`` from a daemon thread (port 0: a free one, see
    ``Exporter.port``)."""
    fixed = list(registries)
    lock = threading.Lock()

    def all_sources() -> list[Registry]:
        with lock:
            return fixed + (list(sources()) if sources is not None else [])
    return Exporter(all_sources, port, addr)


def render(*registries: Registry) -> str:
    """The exposition text of ``registries`` (what a scrape would get)."""
    pc = _require()
    reg = pc.CollectorRegistry(auto_describe=False)
    reg.register(_Collector(lambda: registries))
    return pc.generate_latest(reg).decode()
