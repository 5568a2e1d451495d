"""Metrics: one registry per client (and per broker node), named as Kafka names them.

A metric is ``(group, name, tags)`` -- the Java client's ``MetricName``: group
``producer-metrics``, name ``record-send-total``, tags ``{"client-id": "p1"}``. Three kinds:

    Counter     a total that only grows (``-total``); its ``-rate`` is derived when read
    Gauge       a value read when asked, from a function (lag, buffer available, queue size)
    Histogram   a distribution (latency, batch size) in log-spaced buckets: ``-avg``, ``-max``,
                ``-p50``, ``-p95``, ``-p99`` derived when read

Cost: an update is an attribute add (counters) or one ``bisect`` and three adds
(histograms); the hooks update them per request, per batch and per poll, never per record.
Each metric has one writer thread in kcodec (the client's loop, or the thread that polls),
so the totals are exact; reads from other threads see a consistent-enough snapshot.

``Registry.snapshot()`` is a list of :class:`Sample`; ``Registry.as_dict()`` nests them as
``{group: {name: value or [{"tags": .., "value": ..}]}}`` for ``client.metrics()``.
"""

from __future__ import annotations

import bisect
import math
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

__all__ = ["Registry", "Counter", "Gauge", "Histogram", "Sample", "RATE_WINDOW_S",
           "BUCKETS"]

RATE_WINDOW_S = 30.0     # Java's metrics.sample.window.ms: a rate covers at least this long

# Histogram bucket upper bounds: 4 per power of two (each ~19 % wider than the last) from
# 2^-10 to 2^40 -- a microsecond to ~35 years in ms, a byte to a terabyte. A percentile is
# reported as its bucket's upper bound, so it is at most ~19 % above the true value.
BUCKETS: tuple[float, ...] = tuple(2.0 ** (e / 4) for e in range(-40, 161))

Tags = tuple[tuple[str, str], ...]


def _tags(tags: dict[str, Any] | None) -> Tags:
    return tuple(sorted((str(k), str(v)) for k, v in tags.items())) if tags else ()


@dataclass(frozen=True)
class Sample:
    """One reading: ``group``, ``name``, ``tags`` (sorted pairs), ``value``, ``kind``
    (counter, gauge, rate, summary part) and the metric's description."""

    group: str
    name: str
    tags: Tags
    value: float
    kind: str
    doc: str = ""


class Counter:
    """A total that only grows. ``inc(n)``, or ``value += n`` from its one writer."""

    __slots__ = ("value", "_mark_t", "_mark_v", "doc")

    def __init__(self, doc: str = "") -> None:
        self.value: float = 0
        self._mark_t = time.monotonic()
        self._mark_v: float = 0
        self.doc = doc

    def inc(self, n: float = 1) -> None:
        self.value += n

    def rate(self, now: float) -> float:
        """Per second since the window's mark; the mark moves once it is older than the
        window, so a rate read regularly covers the last 30 to 60 s (as Java's two
        30 s samples do)."""
        span = now - self._mark_t
        r = (self.value - self._mark_v) / span if span > 0 else 0.0
        if span >= RATE_WINDOW_S:
            self._mark_t, self._mark_v = now, self.value
        return r


class Gauge:
    """A value read from ``fn()`` when the registry is read (never updated in a hot path)."""

    __slots__ = ("fn", "doc")

    def __init__(self, fn: Callable[[], float], doc: str = "") -> None:
        self.fn = fn
        self.doc = doc

    def read(self) -> float:
        try:
            return float(self.fn())
        except Exception:            # a gauge of a closed object reads as NaN, never raises
            return math.nan


class Histogram:
    """A distribution in log-spaced buckets (``BUCKETS``): count, sum, max, percentiles."""

    __slots__ = ("counts", "count", "total", "max", "doc")

    def __init__(self, doc: str = "") -> None:
        self.counts = [0] * (len(BUCKETS) + 1)
        self.count = 0
        self.total = 0.0
        self.max = 0.0
        self.doc = doc

    def record(self, v: float) -> None:
        self.counts[bisect.bisect_left(BUCKETS, v)] += 1
        self.count += 1
        self.total += v
        if v > self.max:
            self.max = v

    def percentile(self, q: float) -> float:
        """The upper bound of the bucket holding the ``q`` quantile (0 with no samples;
        the max for the top bucket, and never more than the max)."""
        if not self.count:
            return 0.0
        rank = q * self.count
        seen = 0
        for i, c in enumerate(self.counts):
            seen += c
            if seen >= rank and c:
                return min(BUCKETS[i] if i < len(BUCKETS) else self.max, self.max)
        return self.max

    @property
    def avg(self) -> float:
        return self.total / self.count if self.count else 0.0

    def buckets(self) -> list[tuple[float, int]]:
        """(upper bound, cumulative count) of the non-empty span, for Prometheus."""
        out, seen = [], 0
        last = max((i for i, c in enumerate(self.counts) if c), default=-1)
        for i in range(min(last + 1, len(BUCKETS))):
            seen += self.counts[i]
            if seen:
                out.append((BUCKETS[i], seen))
        return out


class Registry:
    """The metrics of one client or broker node; ``common`` tags go on every metric
    (``client-id``, ``node-id``)."""

    def __init__(self, common: dict[str, Any] | None = None) -> None:
        self.common = dict(common or {})
        self._lock = threading.Lock()
        self._metrics: dict[tuple[str, str, Tags], Counter | Gauge | Histogram] = {}
        self._collectors: list[Callable[[], Iterable[tuple[str, str, dict, float, str]]]] = []
        self.created = time.monotonic()

    def collect(self, fn: Callable[[], Iterable[tuple[str, str, dict, float, str]]]) -> None:
        """Add ``fn``, called at every read for readings of a changing set of things (the
        broker's partitions): ``(group, name, tags, value, kind)`` tuples, kind ``gauge`` or
        ``counter``."""
        self._collectors.append(fn)

    # ------------------------------------------------------------------ making
    def _get(self, cls: type, group: str, name: str, tags: dict[str, Any] | None,
             doc: str, *args: Any) -> Any:
        key = (group, name, _tags({**self.common, **(tags or {})}))
        m = self._metrics.get(key)
        if m is None:
            with self._lock:
                m = self._metrics.get(key)
                if m is None:
                    m = self._metrics[key] = cls(*args, doc)
        if not isinstance(m, cls):
            raise TypeError(f"metric {group}/{name} is a {type(m).__name__}, not a {cls.__name__}")
        return m

    def counter(self, group: str, name: str, tags: dict[str, Any] | None = None,
                doc: str = "") -> Counter:
        """The counter ``group/name-total`` with ``tags`` (made on first use); read as
        ``name-total`` and ``name-rate``."""
        return self._get(Counter, group, name, tags, doc)

    def histogram(self, group: str, name: str, tags: dict[str, Any] | None = None,
                  doc: str = "") -> Histogram:
        """The histogram ``group/name``; read as ``name-avg``, ``-max``, ``-p50``, ``-p95``,
        ``-p99`` (and ``-count``)."""
        return self._get(Histogram, group, name, tags, doc)

    def gauge(self, group: str, name: str, fn: Callable[[], float],
              tags: dict[str, Any] | None = None, doc: str = "") -> Gauge:
        """A gauge read from ``fn`` (a later call with the same name replaces ``fn``)."""
        g: Gauge = self._get(Gauge, group, name, tags, doc, fn)
        g.fn = fn
        return g

    def remove(self, group: str, name: str | None = None,
               match: dict[str, Any] | None = None) -> None:
        """Forget metrics of ``group`` (``name``: only that one; ``match``: only those whose
        tags include these), e.g. the lag of a partition no longer assigned."""
        want = set(_tags(match))
        with self._lock:
            for key in [k for k in self._metrics if k[0] == group and
                        (name is None or k[1] == name) and want <= set(k[2])]:
                del self._metrics[key]

    # ------------------------------------------------------------------ reading
    def metrics(self) -> list[tuple[str, str, Tags, Counter | Gauge | Histogram]]:
        with self._lock:
            return [(g, n, t, m) for (g, n, t), m in self._metrics.items()]

    def snapshot(self) -> list[Sample]:
        """Every metric's readings now."""
        now = time.monotonic()
        out: list[Sample] = []
        for group, name, tags, m in self.metrics():
            if isinstance(m, Counter):
                out.append(Sample(group, f"{name}-total", tags, m.value, "counter", m.doc))
                out.append(Sample(group, f"{name}-rate", tags, m.rate(now), "rate", m.doc))
            elif isinstance(m, Gauge):
                out.append(Sample(group, name, tags, m.read(), "gauge", m.doc))
            else:
                for part, v in (("avg", m.avg), ("max", m.max), ("p50", m.percentile(0.5)),
                                ("p95", m.percentile(0.95)), ("p99", m.percentile(0.99))):
                    out.append(Sample(group, f"{name}-{part}", tags, v, "summary", m.doc))
                out.append(Sample(group, f"{name}-count", tags, m.count, "counter", m.doc))
        return out + self.snapshot_collected()

    def snapshot_collected(self) -> list[Sample]:
        """The readings of the ``collect`` functions alone."""
        out = []
        for fn in list(self._collectors):
            try:
                got = list(fn())
            except Exception:          # a collector of something closing: nothing this time
                continue
            for group, name, tags, value, kind in got:
                out.append(Sample(group, name, _tags({**self.common, **tags}), value, kind))
        return out

    def as_dict(self) -> dict[str, dict[str, Any]]:
        """``{group: {name: value}}``, where a metric with tags beyond the common ones is a
        list of ``{"tags": {...}, "value": v}``."""
        common = set(_tags(self.common))
        out: dict[str, dict[str, Any]] = {}
        for s in self.snapshot():
            extra = {k: v for k, v in s.tags if (k, v) not in common}
            names = out.setdefault(s.group, {})
            if not extra:
                names[s.name] = s.value
            else:
                lst = names.setdefault(s.name, [])
                if isinstance(lst, list):
                    lst.append({"tags": extra, "value": s.value})
        return out

    def value(self, group: str, name: str, **tags: Any) -> float | None:
        """One reading by its full name (``record-send-total``) and extra tags (keyword
        names with ``_`` for ``-``), or None; for tests and quick looks."""
        want = {k.replace("_", "-"): str(v) for k, v in tags.items()}
        common = dict(_tags(self.common))
        for s in self.snapshot():
            if s.group == group and s.name == name and \
                    {k: v for k, v in s.tags if common.get(k) != v} == want:
                return s.value
        return None


def merge(registries: Iterable[Registry]) -> list[Sample]:
    """The samples of several registries (a process's clients, for one exporter)."""
    return [s for r in registries for s in r.snapshot()]
