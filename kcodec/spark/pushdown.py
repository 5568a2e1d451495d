"""Filter pushdown of the ``kcodec`` batch source (pyspark >= 4.1, with
``spark.sql.python.filterPushdown.enabled=true``).

Filters on ``partition`` (=, IN, <, <=, >, >=) and ``offset`` (=, <, <=, >, >=) narrow
the planned offset ranges exactly, so Spark does not apply them again. Filters on
``timestamp`` with a lower bound (>, >=, =) move each range's start to ListOffsets by time
(the first offset whose timestamp is at or after the bound: every record before it is
older) and stay with Spark as well, which checks each row. An upper bound on timestamp does
not cut ranges: CreateTime timestamps need not grow with offsets, so a later record may
still be older than the bound. Everything else is left to Spark.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Iterator
from typing import Any

from kcodec.spark._kafka import KafkaRange

__all__ = ["push", "narrow"]


_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)


def _ms(v: Any) -> int | None:
    """A filter's timestamp in milliseconds, rounded down (never past a matching row)."""
    if isinstance(v, _dt.datetime):
        if v.tzinfo is None:          # Spark hands naive datetimes in the local time zone
            v = v.astimezone()
        return (v - _EPOCH) // _dt.timedelta(milliseconds=1)
    return None


def push(reader: Any, filters: list[Any]) -> Iterator[Any]:
    """Take what narrows the ranges; yield the filters Spark must still apply."""
    from pyspark.sql import datasource as ds

    for f in filters:
        col = getattr(f, "attribute", None)
        name = col[0] if isinstance(col, tuple) and len(col) == 1 else None
        value = getattr(f, "value", None)
        if name == "partition" and _partition(reader, f, value, ds):
            continue
        if name == "offset" and isinstance(value, int) and _bounds(reader, f, value, ds,
                                                                  "offset"):
            continue
        if name == "timestamp":
            ms = _ms(value)
            if ms is not None:
                _bounds(reader, f, ms, ds, "ts")
        yield f


def _partition(reader: Any, f: Any, value: Any, ds: Any) -> bool:
    if isinstance(f, ds.EqualTo) and isinstance(value, int):
        allowed = {value}
    elif isinstance(f, ds.In) and all(isinstance(v, int) for v in value):
        allowed = set(value)
    elif isinstance(value, int) and isinstance(
            f, (ds.GreaterThan, ds.GreaterThanOrEqual, ds.LessThan, ds.LessThanOrEqual)):
        lo = value + 1 if isinstance(f, ds.GreaterThan) else value
        if isinstance(f, (ds.GreaterThan, ds.GreaterThanOrEqual)):
            allowed = set(range(max(lo, 0), 1 << 16))
        else:
            hi = value if isinstance(f, ds.LessThan) else value + 1
            allowed = set(range(0, max(hi, 0)))
    else:
        return False
    cur = reader.only_partitions
    reader.only_partitions = allowed if cur is None else cur & allowed
    return True


def _bounds(reader: Any, f: Any, v: int, ds: Any, what: str) -> bool:
    """Offsets: [lo, hi). Timestamps: [ts_lo, ts_hi)."""
    if isinstance(f, ds.EqualTo):
        lo, hi = v, v + 1
    elif isinstance(f, ds.GreaterThan):
        lo, hi = v + 1, None
    elif isinstance(f, ds.GreaterThanOrEqual):
        lo, hi = v, None
    elif isinstance(f, ds.LessThan):
        lo, hi = None, v
    elif isinstance(f, ds.LessThanOrEqual):
        lo, hi = None, v + 1
    else:
        return False
    if what == "offset":
        if lo is not None:
            reader.offset_lo = max(reader.offset_lo, lo)
        if hi is not None:
            reader.offset_hi = min(reader.offset_hi, hi)
    else:
        if lo is not None:
            reader.ts_lo = lo if reader.ts_lo is None else max(reader.ts_lo, lo)
        if hi is not None:
            reader.ts_hi = hi if reader.ts_hi is None else min(reader.ts_hi, hi)
    return True


def narrow(reader: Any, ranges: list[KafkaRange]) -> list[KafkaRange]:
    """The planned ranges cut down to what the pushed filters allow."""
    out = []
    if reader.only_partitions is not None:
        ranges = [r for r in ranges if r.partition in reader.only_partitions]
    ts_start: dict[tuple[str, int], int] = {}
    if ranges and reader.ts_lo is not None:
        from kcodec.client import Admin
        from kcodec.spark._kafka import admin_kwargs, list_offsets

        tps = [(r.topic, r.partition) for r in ranges]
        with Admin(**admin_kwargs(reader.opts)) as admin:
            ts_start = list_offsets(admin, tps, reader.ts_lo)
    for r in ranges:
        s = max(r.start, reader.offset_lo)
        e = min(r.end, reader.offset_hi)
        tp = (r.topic, r.partition)
        if tp in ts_start:
            off = ts_start[tp]
            s = max(s, off) if off >= 0 else e        # no record at or after ts_lo
        if e > s:
            out.append(KafkaRange(r.topic, r.partition, s, e))
    return out
