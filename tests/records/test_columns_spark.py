"""The Spark layout of the columnar decode (``decode_columns(..., layout="spark")``): both
twins, the same values as the default layout, Spark's Arrow schema without a copy, bad
arguments, and the 2 GiB limit."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from kcodec import _columnar
from kcodec.errors import DecodeError
from tests.records.test_columns import kc_control, kc_legacy, kc_v2


@pytest.fixture
def cols(twin):
    return twin("columns")


def blob() -> bytes:
    """v2 (plain and lz4), a commit marker, magic 0 and magic 1."""
    return (kc_v2(0, 30, 0) + kc_v2(3, 20, 30) + kc_control(50) + kc_legacy(0, 0, 5, 51)
            + kc_legacy(1, 1, 5, 56))


def test_spark_values_match_default_layout(cols) -> None:
    data = blob()
    d = cols.decode_columns(data)
    s = cols.decode_columns(data, layout="spark")
    assert s.layout == "spark" and d.layout == "kcodec"
    assert len(s) == len(d) == 60
    assert s.timestamp_type.dtype == np.int32 and d.timestamp_type.dtype == np.int8
    assert s.timestamp.dtype == np.int64
    assert s.timestamp.tolist() == [t * 1000 for t in d.timestamp.tolist()]
    assert s.timestamp_type.tolist() == d.timestamp_type.tolist()
    assert -1 in s.timestamp_type.tolist()          # magic 0
    assert s.offset.tolist() == d.offset.tolist()
    assert s.key.to_pylist() == d.key.to_pylist()
    assert s.value.to_pylist() == d.value.to_pylist()
    dh, sh = d.headers.to_pylist(), s.headers.to_pylist()
    assert [h or None for h in dh] == sh            # empty lists became nulls
    assert sh.count(None) == s.headers.null_count > 0
    for col in (s.key, s.value, s.headers.keys, s.headers.values):
        assert col.offsets.dtype == np.int32
    assert (s.consumed, s.batch_count, s.next_offset) == (d.consumed, d.batch_count,
                                                          d.next_offset)


def test_spark_twins_agree(pair) -> None:
    cy, py = pair("columns")
    for data in (blob(), kc_v2(1, 300), b"", kc_control(0)):
        a = cy.decode_columns(data, layout="spark")
        b = py.decode_columns(data, layout="spark")
        assert a.equals(b)
        assert not a.equals(cy.decode_columns(data))   # layouts differ (counters do not)


def test_spark_timestamps_wrap_like_int64(pair) -> None:
    """ms * 1000 past int64 wraps the same way in both twins (no exception, no UB)."""
    from kcodec.records import RecordBatchBuilder

    big = (1 << 62) // 1000 * 8
    b = RecordBatchBuilder(base_offset=0)
    b.append(b"k", b"v", [], timestamp=big)
    data = b.build()
    cy, py = pair("columns")
    want = ((big * 1000 + (1 << 63)) % (1 << 64)) - (1 << 63)
    for mod in (cy, py):
        assert mod.decode_columns(data, layout="spark").timestamp.tolist() == [want]


def test_bad_layout_arguments(cols) -> None:
    with pytest.raises(ValueError, match="layout must be one of 'kcodec', 'spark'"):
        cols.decode_columns(kc_v2(), layout="arrow")
    with pytest.raises(ValueError, match="large=True is not allowed"):
        cols.decode_columns(kc_v2(), layout="spark", large=True)


def test_spark_layout_refuses_to_widen(pair) -> None:
    """Past the int32 limit the Spark layout raises the same DecodeError in both twins."""
    cy, py = pair("columns")
    data = kc_v2(0, 300)
    try:
        for mod in {cy, py}:
            mod._set_wide_limit(1000)
        errs = []
        for mod in (cy, py):
            with pytest.raises(DecodeError, match="passes 2 GiB") as e:
                mod.decode_columns(data, layout="spark")
            errs.append(str(e.value))
        assert errs[0] == errs[1]
    finally:
        for mod in {cy, py}:
            mod._set_wide_limit(None)


def test_to_spark_needs_spark_layout(cols) -> None:
    with pytest.raises(ValueError, match="layout='spark'"):
        cols.decode_columns(kc_v2()).to_spark("t", 0)


@pytest.mark.arrow
def test_to_spark_schema_and_zero_copy(cols) -> None:
    import pyarrow as pa

    c = cols.decode_columns(blob(), layout="spark")
    rb = c.to_spark("orders", 3, include_headers=True)
    rb.validate(full=True)
    assert rb.schema == _columnar.spark_schema(True)
    assert rb.schema.field("timestamp").type == pa.timestamp("us", tz="UTC")
    assert all(f.nullable for f in rb.schema)
    addr = lambda a: a.ctypes.data  # noqa: E731
    assert rb.column("offset").buffers()[1].address == addr(c.offset)
    assert rb.column("timestamp").buffers()[1].address == addr(c.timestamp)
    assert rb.column("timestampType").buffers()[1].address == addr(c.timestamp_type)
    for name, col in (("key", c.key), ("value", c.value)):
        bufs = rb.column(name).buffers()
        assert bufs[1].address == addr(col.offsets) and bufs[2].address == addr(col.data)
    h = rb.column("headers")
    assert h.buffers()[0].address == addr(c.headers.validity)
    assert h.buffers()[1].address == addr(c.headers.offsets)
    py = rb.to_pylist()
    assert {r["topic"] for r in py} == {"orders"} and {r["partition"] for r in py} == {3}
    d = cols.decode_columns(blob()).to_pylist()
    for got, want in zip(py, d, strict=False):
        assert got["offset"] == want["offset"] and got["key"] == want["key"]
        assert got["value"] == want["value"] and got["timestampType"] == want["timestamp_type"]
        us = want["timestamp"] * 1000
        assert got["timestamp"] == pa.scalar(us, pa.timestamp("us", tz="UTC")).as_py()
        hs = [{"key": k, "value": v} for k, v in want["headers"]] or None
        assert got["headers"] == hs
    assert cols.decode_columns(blob(), layout="spark").to_spark("t", 0).num_columns == 7


@pytest.mark.arrow
def test_to_spark_empty_and_empty_topic(cols) -> None:
    rb = cols.decode_columns(b"", layout="spark").to_spark("t", 0, include_headers=True)
    rb.validate(full=True)
    assert rb.num_rows == 0 and rb.schema == _columnar.spark_schema(True)
    rb = cols.decode_columns(kc_v2(0, 3), layout="spark").to_spark("", 1)
    rb.validate(full=True)
    assert rb.column("topic").to_pylist() == ["", "", ""]


@pytest.mark.arrow
def test_spark_schema_equals_pysparks() -> None:
    """Our Arrow schema is exactly what pyspark derives from kcodec.spark's StructType."""
    pytest.importorskip("pyspark", reason="pyspark is in the spark and test extras")
    import inspect

    from pyspark.sql.pandas.types import to_arrow_schema

    from kcodec.spark.schema import kafka_schema

    # as pyspark's planning worker calls it: with timezone="UTC" where it takes one (newer
    # releases), else without (timestamps are UTC by default there)
    tz = {"timezone": "UTC"} if "timezone" in inspect.signature(to_arrow_schema).parameters \
        else {}
    for headers in (False, True):
        want: Any = to_arrow_schema(kafka_schema(headers), **tz)
        assert _columnar.spark_schema(headers) == want
        assert _columnar.spark_schema(headers).to_string() == want.to_string()
