"""The metrics registry: counters, gauges, histograms and what a reading gives."""

from __future__ import annotations

import math

import pytest

from kcodec.observe.metrics import BUCKETS, Histogram, Registry


def test_counter_total_and_tags():
    r = Registry({"client-id": "c1"})
    c = r.counter("producer-metrics", "record-send")
    c.inc(3)
    c.value += 2
    t = r.counter("producer-topic-metrics", "record-send", {"topic": "a"})
    t.inc()
    assert r.value("producer-metrics", "record-send-total") == 5
    assert r.value("producer-topic-metrics", "record-send-total", topic="a") == 1
    assert r.counter("producer-metrics", "record-send") is c      # one per name and tags
    d = r.as_dict()
    assert d["producer-metrics"]["record-send-total"] == 5
    assert d["producer-topic-metrics"]["record-send-total"] == [{"tags": {"topic": "a"},
                                                                 "value": 1}]


def test_a_name_keeps_its_kind():
    r = Registry()
    r.counter("g", "x")
    with pytest.raises(TypeError, match="is a Counter"):
        r.histogram("g", "x")


def test_histogram_percentiles_are_bucket_bounds_within_19_percent():
    h = Histogram()
    for v in range(1, 1001):
        h.record(float(v))
    assert h.count == 1000 and h.total == sum(range(1, 1001)) and h.max == 1000
    assert h.avg == pytest.approx(500.5)
    for q, true in ((0.5, 500), (0.95, 950), (0.99, 990)):
        got = h.percentile(q)
        assert true <= got <= true * 2 ** 0.25 + 1e-9, (q, got)
    assert h.percentile(1.0) == 1000          # never above the max


def test_histogram_edges():
    h = Histogram()
    assert h.percentile(0.5) == 0 and h.avg == 0
    h.record(0.0)
    h.record(1e30)                             # beyond the last bucket: the overflow one
    assert h.percentile(0.99) == 1e30 and h.count == 2
    assert sum(c for c in h.counts) == 2
    assert len(BUCKETS) == 201


def test_gauges_read_when_asked_and_a_failing_one_is_nan():
    r = Registry()
    box = [1]
    r.gauge("g", "size", lambda: box[0])
    r.gauge("g", "broken", lambda: 1 / 0)
    box[0] = 7
    assert r.value("g", "size") == 7
    assert math.isnan(r.value("g", "broken"))


def test_remove_by_tags_and_collectors():
    r = Registry()
    r.gauge("lag", "records-lag", lambda: 1, {"topic": "a", "partition": 0})
    r.gauge("lag", "records-lag", lambda: 2, {"topic": "a", "partition": 1})
    r.remove("lag", "records-lag", {"partition": 0})
    assert [s.value for s in r.snapshot() if s.name == "records-lag"] == [2]
    r.collect(lambda: [("kafka.log:Log", "Size", {"topic": "t", "partition": 0}, 42, "gauge")])
    r.collect(lambda: 1 / 0)                   # a failing collector gives nothing
    assert r.value("kafka.log:Log", "Size", topic="t", partition=0) == 42


def test_rate_is_per_second_since_the_mark():
    r = Registry()
    c = r.counter("g", "n")
    c._mark_t -= 10.0                           # the window began 10 s ago
    c.inc(50)
    assert r.value("g", "n-rate") == pytest.approx(5.0, rel=0.01)
