"""KIP-714 client telemetry: metrics as OTLP protobuf (``MetricsData``), both ways.

KIP-714 has the client push its metrics in OpenTelemetry's protobuf encoding. kcodec
writes and reads the part of ``opentelemetry/proto/metrics/v1/metrics.proto`` that
telemetry uses with its own small protobuf code, rather than depending on
``opentelemetry-proto`` (and protobuf's runtime, ~1 MB compiled) for a few messages; the
tests check both directions against ``opentelemetry-proto``'s generated classes::

    MetricsData      resource_metrics:1 ResourceMetrics*
    ResourceMetrics  resource:1 Resource  scope_metrics:2 ScopeMetrics*
    Resource         attributes:1 KeyValue*
    ScopeMetrics     scope:1 InstrumentationScope  metrics:2 Metric*
    Scope            name:1 string  version:2 string
    Metric           name:1 string  description:2 string  unit:3 string
                     gauge:5 Gauge | sum:7 Sum
    Gauge            data_points:1 NumberDataPoint*
    Sum              data_points:1 NumberDataPoint*  aggregation_temporality:2 enum
                     is_monotonic:3 bool
    NumberDataPoint  attributes:7 KeyValue*  start_time_unix_nano:2 fixed64
                     time_unix_nano:3 fixed64  as_double:4 double | as_int:6 sfixed64
    KeyValue         key:1 string  value:2 AnyValue
    AnyValue         string_value:1 | bool_value:2 | int_value:3 | double_value:4

Protobuf's wire format: each field is ``tag = field << 3 | wire type`` (a varint), then a
varint (type 0), 8 bytes little-endian (type 1), a varint length and that many bytes
(type 2) or 4 bytes (type 5). Reading skips fields it does not know, checks every length
against the bytes left before slicing, and raises ``TruncatedError`` or
``CorruptDataError`` (kcodec.errors) on bad input.

Names: a Java-style metric (group ``producer-node-metrics``, name ``request-latency-avg``)
is pushed as ``org.apache.kafka.producer.node.request.latency.avg`` -- the KIP's rule
(the group without ``-metrics``, dashes as dots, under ``org.apache.kafka.``); its tags are
attributes with dots for dashes (``node-id`` -> ``node.id``). A ``-total`` is a monotonic
sum, anything else a gauge.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from kcodec.errors import CorruptDataError, TruncatedError

__all__ = ["Point", "encode_metrics", "decode_metrics", "otlp_name", "points_from_samples",
           "select", "DELTA", "CUMULATIVE"]

DELTA, CUMULATIVE = 1, 2
PREFIX = "org.apache.kafka."


@dataclass
class Point:
    """One metric reading: OTLP ``name``, ``value``, ``attributes``; ``sum`` (monotonic,
    with ``temporality``) or gauge; times in Unix nanoseconds."""

    name: str
    value: float
    attributes: dict[str, Any] = field(default_factory=dict)
    sum: bool = False
    temporality: int = CUMULATIVE
    time_ns: int = 0
    start_ns: int = 0
    description: str = ""


# ---------------------------------------------------------------------------- names
def otlp_name(group: str, name: str) -> str:
    """The KIP-714 name of a Java-style metric (see the module docstring)."""
    g = group[:-len("-metrics")] if group.endswith("-metrics") else group
    return PREFIX + f"{g}.{name}".replace("-", ".")


def points_from_samples(samples: Iterable[Any], now_ns: int, start_ns: int,
                        common: Iterable[tuple[str, str]] = ()) -> list[Point]:
    """Points of registry samples (kcodec.observe.metrics.Sample); the ``common`` tags
    (the client id) are left out of the attributes (they belong to the resource)."""
    skip = set(common)
    out = []
    for s in samples:
        attrs = {k.replace("-", "."): v for k, v in s.tags if (k, v) not in skip}
        value = s.value
        if value != value:        # NaN: nothing to say yet
            continue
        is_sum = s.kind == "counter"
        out.append(Point(otlp_name(s.group, s.name), value, attrs, is_sum, CUMULATIVE,
                         now_ns, start_ns if is_sum else 0, s.doc))
    return out


def select(points: list[Point], requested: list[str]) -> list[Point]:
    """The points a subscription asked for: ``requested`` holds name prefixes; none asks
    for nothing, one empty string for everything (KIP-714)."""
    if not requested:
        return []
    if "" in requested or "*" in requested:
        return points
    return [p for p in points if any(p.name.startswith(r) for r in requested)]


# ---------------------------------------------------------------------------- writing
def _varint(n: int) -> bytes:
    n &= 0xFFFFFFFFFFFFFFFF
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _field(num: int, wire: int, payload: bytes) -> bytes:
    tag = _varint(num << 3 | wire)
    if wire == 2:
        return tag + _varint(len(payload)) + payload
    return tag + payload


def _string(num: int, s: str) -> bytes:
    return _field(num, 2, s.encode("utf-8")) if s else b""


def _any_value(v: Any) -> bytes:
    if isinstance(v, bool):
        return _field(2, 0, _varint(int(v)))
    if isinstance(v, int):
        return _field(3, 0, _varint(v))
    if isinstance(v, float):
        return _field(4, 1, struct.pack("<d", v))
    return _field(1, 2, str(v).encode("utf-8"))


def _key_values(num: int, attrs: dict[str, Any]) -> bytes:
    return b"".join(_field(num, 2, _string(1, k) + _field(2, 2, _any_value(v)))
                    for k, v in sorted(attrs.items()))


def _data_point(p: Point) -> bytes:
    out = _key_values(7, p.attributes)
    if p.start_ns:
        out += _field(2, 1, struct.pack("<Q", p.start_ns))
    out += _field(3, 1, struct.pack("<Q", p.time_ns))
    v = p.value
    if p.sum and float(v).is_integer() and abs(v) < 2 ** 63:
        out += _field(6, 1, struct.pack("<q", int(v)))
    else:
        out += _field(4, 1, struct.pack("<d", float(v)))
    return out


def encode_metrics(points: list[Point], resource: dict[str, Any] | None = None,
                   scope: tuple[str, str] = ("kcodec", "")) -> bytes:
    """``MetricsData`` holding ``points`` (one Metric per name, its points in order) under
    one resource with ``resource`` attributes."""
    by_name: dict[str, list[Point]] = {}
    for p in points:
        by_name.setdefault(p.name, []).append(p)
    metrics = b""
    for name, pts in by_name.items():
        dps = b"".join(_field(1, 2, _data_point(p)) for p in pts)
        first = pts[0]
        if first.sum:
            data = _field(7, 2, dps + _field(2, 0, _varint(first.temporality))
                          + _field(3, 0, _varint(1)))
        else:
            data = _field(5, 2, dps)
        metrics += _field(2, 2, _string(1, name) + _string(2, first.description) + data)
    scope_msg = _field(1, 2, _string(1, scope[0]) + _string(2, scope[1]))
    rm = (_field(1, 2, _key_values(1, resource or {})) + _field(2, 2, scope_msg + metrics))
    return _field(1, 2, rm)


# ---------------------------------------------------------------------------- reading
class _Reader:
    __slots__ = ("buf", "pos", "end", "base")

    def __init__(self, buf: bytes, start: int = 0, end: int | None = None) -> None:
        self.buf, self.pos = buf, start
        self.end = len(buf) if end is None else end
        self.base = start

    def varint(self) -> int:
        n = shift = 0
        for _ in range(10):
            if self.pos >= self.end:
                raise TruncatedError(1, self.pos, 0, "protobuf varint")
            b = self.buf[self.pos]
            self.pos += 1
            n |= (b & 0x7F) << shift
            if not b & 0x80:
                return n
            shift += 7
        raise CorruptDataError("protobuf varint longer than 10 bytes", self.pos)

    def take(self, n: int) -> int:
        if n > self.end - self.pos:
            raise TruncatedError(n, self.pos, self.end - self.pos, "protobuf field")
        start = self.pos
        self.pos += n
        return start

    def fields(self) -> Iterable[tuple[int, int, Any]]:
        """(field number, wire type, value): an int (varint), (start, end) for
        length-delimited, raw bytes for fixed64/fixed32."""
        while self.pos < self.end:
            tag = self.varint()
            num, wire = tag >> 3, tag & 7
            if num == 0:
                raise CorruptDataError("protobuf field number 0", self.pos)
            if wire == 0:
                yield num, wire, self.varint()
            elif wire == 1:
                s = self.take(8)
                yield num, wire, self.buf[s:s + 8]
            elif wire == 2:
                n = self.varint()
                s = self.take(n)
                yield num, wire, (s, s + n)
            elif wire == 5:
                s = self.take(4)
                yield num, wire, self.buf[s:s + 4]
            else:
                raise CorruptDataError(f"protobuf wire type {wire} is not supported",
                                       self.pos)

    def sub(self, span: tuple[int, int]) -> _Reader:
        return _Reader(self.buf, span[0], span[1])

    def text(self, span: tuple[int, int]) -> str:
        try:
            return bytes(self.buf[span[0]:span[1]]).decode("utf-8")
        except UnicodeDecodeError:
            raise CorruptDataError("protobuf string is not UTF-8", span[0]) from None


def _expect(wire: int, want: int, what: str, pos: int) -> None:
    if wire != want:
        raise CorruptDataError(f"OTLP {what}: wire type {wire}, expected {want}", pos)


def _read_any(r: _Reader) -> Any:
    value: Any = None
    for num, wire, v in r.fields():
        if num == 1 and wire == 2:
            value = r.text(v)
        elif num == 2 and wire == 0:
            value = bool(v)
        elif num == 3 and wire == 0:
            value = v - (1 << 64) if v >= 1 << 63 else v
        elif num == 4 and wire == 1:
            value = struct.unpack("<d", v)[0]
    return value


def _read_kv(r: _Reader) -> tuple[str, Any]:
    key, value = "", None
    for num, wire, v in r.fields():
        if num == 1 and wire == 2:
            key = r.text(v)
        elif num == 2 and wire == 2:
            value = _read_any(r.sub(v))
    return key, value


def _read_point(r: _Reader, name: str, is_sum: bool, desc: str) -> Point:
    p = Point(name, 0.0, {}, is_sum, description=desc)
    for num, wire, v in r.fields():
        if num == 7 and wire == 2:
            k, val = _read_kv(r.sub(v))
            p.attributes[k] = val
        elif num == 2 and wire == 1:
            p.start_ns = struct.unpack("<Q", v)[0]
        elif num == 3 and wire == 1:
            p.time_ns = struct.unpack("<Q", v)[0]
        elif num == 4 and wire == 1:
            p.value = struct.unpack("<d", v)[0]
        elif num == 6 and wire == 1:
            p.value = struct.unpack("<q", v)[0]
    return p


def _read_metric(r: _Reader) -> list[Point]:
    name = desc = ""
    data: tuple[bool, tuple[int, int]] | None = None
    for num, wire, v in r.fields():
        if num == 1 and wire == 2:
            name = r.text(v)
        elif num == 2 and wire == 2:
            desc = r.text(v)
        elif num in (5, 7):
            _expect(wire, 2, "metric data", r.pos)
            data = (num == 7, v)
    if data is None:                       # histograms and summaries: not read
        return []
    is_sum, span = data
    sub = r.sub(span)
    spans, temporality = [], CUMULATIVE
    for num, wire, v in sub.fields():
        if num == 1 and wire == 2:
            spans.append(v)
        elif num == 2 and wire == 0:
            temporality = v
    out = [_read_point(sub.sub(s), name, is_sum, desc) for s in spans]
    for p in out:
        p.temporality = temporality
    return out


def decode_metrics(data: bytes) -> tuple[dict[str, Any], list[Point]]:
    """(resource attributes, points) of an OTLP ``MetricsData``; gauges and sums are read,
    other metric kinds skipped."""
    r = _Reader(bytes(data))
    resource: dict[str, Any] = {}
    points: list[Point] = []
    for num, wire, v in r.fields():
        if num != 1:
            continue
        _expect(wire, 2, "resource_metrics", r.pos)
        rm = r.sub(v)
        for n2, w2, v2 in rm.fields():
            if n2 == 1 and w2 == 2:
                for n3, w3, v3 in rm.sub(v2).fields():
                    if n3 == 1 and w3 == 2:
                        k, val = _read_kv(rm.sub(v3))
                        resource[k] = val
            elif n2 == 2 and w2 == 2:
                sm = rm.sub(v2)
                for n3, w3, v3 in sm.fields():
                    if n3 == 2 and w3 == 2:
                        points += _read_metric(sm.sub(v3))
    return resource, points
