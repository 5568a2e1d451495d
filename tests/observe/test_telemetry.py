"""KIP-714's OTLP metrics encoding, written and read by kcodec, checked both ways against
opentelemetry-proto's generated classes (the independent peer), and bad input."""

from __future__ import annotations

import pytest

from kcodec.errors import CorruptDataError, DecodeError, TruncatedError
from kcodec.observe.metrics import Registry
from kcodec.observe.telemetry import (
    CUMULATIVE,
    Point,
    decode_metrics,
    encode_metrics,
    otlp_name,
    points_from_samples,
    select,
)

POINTS = [
    Point("org.apache.kafka.producer.record.send.total", 1234, {"topic": "a"}, True,
          CUMULATIVE, 2_000_000_000, 1_000_000_000),
    Point("org.apache.kafka.producer.record.send.total", 5, {"topic": "b"}, True,
          CUMULATIVE, 2_000_000_000, 1_000_000_000),
    Point("org.apache.kafka.producer.node.request.latency.avg", 1.5,
          {"node.id": "node-0", "flag": True, "n": -3, "x": 0.25}, False, CUMULATIVE,
          2_000_000_000, 0, "latency, ms"),
]


def test_names_follow_the_kip():
    assert otlp_name("producer-node-metrics", "request-latency-avg") == \
        "org.apache.kafka.producer.node.request.latency.avg"
    assert otlp_name("consumer-fetch-manager-metrics", "records-lag") == \
        "org.apache.kafka.consumer.fetch.manager.records.lag"


def test_round_trip_and_selection():
    data = encode_metrics(POINTS, {"client_id": "c1"})
    resource, points = decode_metrics(data)
    assert resource == {"client_id": "c1"}
    assert [(p.name, p.value, p.attributes, p.sum) for p in points] == \
        [(p.name, p.value, p.attributes, p.sum) for p in POINTS]
    assert points[0].start_ns == 1_000_000_000 and points[2].time_ns == 2_000_000_000
    assert select(points, []) == []
    assert select(points, [""]) == points
    assert [p.name for p in select(points, ["org.apache.kafka.producer.node."])] == \
        [POINTS[2].name]


def test_registry_samples_become_points():
    r = Registry({"client-id": "c1"})
    r.counter("producer-metrics", "record-send").inc(7)
    r.gauge("producer-metrics", "buffer-available-bytes", lambda: 99)
    common = tuple(r.common.items())
    pts = {p.name: p for p in points_from_samples(r.snapshot(), 5, 1, common)}
    assert pts["org.apache.kafka.producer.record.send.total"].sum
    assert pts["org.apache.kafka.producer.record.send.total"].value == 7
    assert pts["org.apache.kafka.producer.buffer.available.bytes"].value == 99
    assert all("client.id" not in p.attributes for p in pts.values())


def test_opentelemetry_proto_reads_what_kcodec_writes():
    pb = pytest.importorskip("opentelemetry.proto.metrics.v1.metrics_pb2")
    msg = pb.MetricsData.FromString(encode_metrics(POINTS, {"client_id": "c1"}))
    (rm,) = msg.resource_metrics
    assert rm.resource.attributes[0].key == "client_id"
    assert rm.resource.attributes[0].value.string_value == "c1"
    (sm,) = rm.scope_metrics
    assert sm.scope.name == "kcodec"
    sends, lat = sm.metrics
    assert sends.name == POINTS[0].name and sends.sum.is_monotonic
    assert sends.sum.aggregation_temporality == CUMULATIVE
    assert [d.as_int for d in sends.sum.data_points] == [1234, 5]
    assert sends.sum.data_points[0].start_time_unix_nano == 1_000_000_000
    assert lat.description == "latency, ms"
    (d,) = lat.gauge.data_points
    assert d.as_double == 1.5 and d.time_unix_nano == 2_000_000_000
    attrs = {a.key: a.value for a in d.attributes}
    assert attrs["node.id"].string_value == "node-0" and attrs["flag"].bool_value
    assert attrs["n"].int_value == -3 and attrs["x"].double_value == 0.25


def test_kcodec_reads_what_opentelemetry_proto_writes():
    pb = pytest.importorskip("opentelemetry.proto.metrics.v1.metrics_pb2")
    common = pytest.importorskip("opentelemetry.proto.common.v1.common_pb2")
    msg = pb.MetricsData()
    rm = msg.resource_metrics.add()
    rm.resource.attributes.add(key="client_software_name", value=common.AnyValue(
        string_value="librdkafka"))
    sm = rm.scope_metrics.add()
    m = sm.metrics.add(name="org.apache.kafka.consumer.poll.idle.ratio.avg")
    dp = m.gauge.data_points.add(as_double=0.75, time_unix_nano=7)
    dp.attributes.add(key="node.id", value=common.AnyValue(int_value=3))
    s = sm.metrics.add(name="org.apache.kafka.consumer.coordinator.rebalance.latency.total")
    s.sum.aggregation_temporality = 1
    s.sum.is_monotonic = True
    s.sum.data_points.add(as_int=42)
    h = sm.metrics.add(name="a.histogram")
    h.histogram.data_points.add(count=3)              # a kind kcodec skips
    resource, points = decode_metrics(msg.SerializeToString())
    assert resource == {"client_software_name": "librdkafka"}
    assert [(p.name, p.value, p.attributes, p.sum, p.temporality) for p in points] == [
        ("org.apache.kafka.consumer.poll.idle.ratio.avg", 0.75, {"node.id": 3}, False, 2),
        ("org.apache.kafka.consumer.coordinator.rebalance.latency.total", 42, {}, True, 1)]


@pytest.mark.parametrize("bad, err", [
    (b"\x0a\x05ab", TruncatedError),                  # length past the end
    (b"\x0a", TruncatedError),                        # a varint cut off
    (b"\x0a" + b"\xff" * 11, CorruptDataError),       # a varint too long
    (b"\x0b", CorruptDataError),                      # wire type 3 (groups)
    (b"\x00\x00", CorruptDataError),                  # field number 0
    (b"\x0a\x04\x12\x02\x0a\xff", TruncatedError),    # nested length past its parent
])
def test_bad_input_is_a_decode_error(bad, err):
    with pytest.raises(err) as info:
        decode_metrics(bad)
    assert isinstance(info.value, DecodeError)


def test_unknown_fields_are_skipped():
    data = encode_metrics(POINTS[:1]) + b"\x10\x01" + b"\x1d\x00\x00\x00\x00"
    assert len(decode_metrics(data)[1]) == 1
