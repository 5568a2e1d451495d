"""Result containers of the columnar decode, shared by both twins of ``kcodec.records.columns``.

Every column uses the Apache Arrow memory layout, held in numpy arrays, so ``to_arrow()`` can
hand the very same memory to pyarrow without copying it:

    fixed width   offset: int64[n]   timestamp: int64[n]   timestamp_type: int8[n]
    binary        offsets: int32[n+1] (int64 when the data exceeds 2 GiB, or ``large=True``)
                  data: uint8[offsets[n]]   value i = data[offsets[i]:offsets[i+1]]
                  validity: uint8[ceil(n/8)], bit i (LSB first) set when value i is not null;
                  None when nothing is null
    headers       list<struct<key: string, value: binary>>:
                  offsets: int32[n+1], headers of record i = children[offsets[i]:offsets[i+1]]
                  keys: a binary column (never null, UTF-8), values: a binary column

Two layouts (``decode_columns(..., layout=...)``):

    "kcodec"      the above: timestamp int64 milliseconds, timestamp_type int8, every
                  record's headers a (possibly empty) list, fields non-null where Kafka
                  has no null
    "spark"       Spark's Arrow layout for its Kafka schema, written directly by the decode:
                  timestamp int64 MICROseconds (Arrow timestamp[us, tz=UTC]),
                  timestamp_type int32, binary offsets always int32 (a decode whose column
                  would pass 2 GiB raises instead of widening), headers null (validity bit
                  clear) for a record without headers, every field nullable. ``to_spark()``
                  adds the topic and partition columns and orders them as Spark does.

numpy is imported on first use (it is needed only here), pyarrow only by ``to_arrow()``.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "BinaryColumn", "HeadersColumn", "RecordColumns", "LAYOUTS", "check_layout", "numpy",
    "pyarrow",
]

LAYOUTS = ("kcodec", "spark")


def check_layout(layout: Any, large: Any) -> bool:
    """Validate decode_columns' ``layout`` (and ``large`` against it); True for "spark"."""
    if layout == "kcodec":
        return False
    if layout == "spark":
        if large:
            raise ValueError("layout='spark' has int32 binary offsets: large=True is not allowed")
        return True
    raise ValueError(f"layout must be one of {', '.join(map(repr, LAYOUTS))}, not {layout!r}")

_np: Any = None


def numpy() -> Any:
    """The numpy module, or an ImportError that says how to get it."""
    global _np
    if _np is None:
        try:
            import numpy as np
        except ImportError as exc:
            raise ImportError(
                "kcodec.records.decode_columns needs numpy: pip install numpy "
                "(or pip install 'kcodec[arrow]' for numpy and pyarrow)"
            ) from exc
        _np = np
    return _np


def pyarrow() -> Any:
    """The pyarrow module, or an ImportError that says how to get it."""
    try:
        import pyarrow as pa
    except ImportError as exc:
        raise ImportError(
            "to_arrow() needs pyarrow: pip install pyarrow (or pip install 'kcodec[arrow]')"
        ) from exc
    return pa


_TYPES: dict[Any, Any] = {}


def _arrow_types(key: Any, make: Any) -> Any:
    """pyarrow types and schemas, built once per layout (building them costs microseconds)."""
    t = _TYPES.get(key)
    if t is None:
        t = _TYPES[key] = make(pyarrow())
    return t


def _binary_type(pa: Any, utf8: bool, large: bool) -> Any:
    if utf8:
        return pa.large_string() if large else pa.string()
    return pa.large_binary() if large else pa.binary()


def _headers_type(pa: Any, key_large: bool, value_large: bool, list_large: bool,
                  spark: bool = False) -> Any:
    if spark:
        # pyspark's to_arrow_type(ArrayType(StructType([key string, value binary])))
        entry = pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())])
        return pa.list_(pa.field("element", entry))
    entry = pa.struct([pa.field("key", _binary_type(pa, True, key_large), nullable=False),
                       pa.field("value", _binary_type(pa, False, value_large))])
    item = pa.field("item", entry, nullable=False)
    return pa.large_list(item) if list_large else pa.list_(item)


def _bits(validity: Any, n: int) -> Any:
    np = numpy()
    if validity is None:
        return np.ones(n, dtype=bool)
    return np.unpackbits(validity, count=n, bitorder="little").astype(bool)


def _same_array(a: Any, b: Any) -> bool:
    if a is None or b is None:
        return a is None and b is None
    return a.dtype == b.dtype and a.shape == b.shape and bool((a == b).all())


class BinaryColumn:
    """A variable-width column in Arrow binary (or string) layout; see the module docstring."""

    __slots__ = ("offsets", "data", "validity", "null_count", "utf8")

    def __init__(
        self, offsets: Any, data: Any, validity: Any, null_count: int, utf8: bool = False
    ) -> None:
        self.offsets = offsets
        self.data = data
        self.validity = validity
        self.null_count = null_count
        self.utf8 = utf8

    def __len__(self) -> int:
        return len(self.offsets) - 1

    @property
    def is_large(self) -> bool:
        """True when the offsets are int64 (Arrow large_binary / large_string)."""
        return self.offsets.dtype.itemsize == 8

    @property
    def valid(self) -> Any:
        """numpy bool array: True where the value is not null."""
        return _bits(self.validity, len(self))

    def __getitem__(self, i: int) -> Any | None:
        n = len(self)
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError("column index out of range")
        if self.validity is not None and not (self.validity[i >> 3] >> (i & 7)) & 1:
            return None
        raw = self.data[int(self.offsets[i]) : int(self.offsets[i + 1])].tobytes()
        return raw.decode("utf-8") if self.utf8 else raw

    def to_pylist(self) -> list[Any]:
        """The values as bytes (str for a UTF-8 column) or None."""
        data = self.data.tobytes()
        offs = self.offsets.tolist()
        out: list[Any] = [data[offs[i] : offs[i + 1]] for i in range(len(offs) - 1)]
        if self.utf8:
            out = [v.decode("utf-8") for v in out]
        if self.null_count:
            for i, ok in enumerate(self.valid.tolist()):
                if not ok:
                    out[i] = None
        return out

    def equals(self, other: Any) -> bool:
        """True if ``other`` is a ``BinaryColumn`` with the same values, nulls and type."""
        return (
            isinstance(other, BinaryColumn)
            and self.utf8 == other.utf8
            and self.null_count == other.null_count
            and _same_array(self.offsets, other.offsets)
            and _same_array(self.data, other.data)
            and _same_array(self.validity, other.validity)
        )

    def arrow_type(self) -> Any:
        """The pyarrow type of the column (binary, string, or their large forms)."""
        utf8, large = self.utf8, self.is_large
        return _arrow_types(("bin", utf8, large), lambda pa: _binary_type(pa, utf8, large))

    def to_arrow(self) -> Any:
        """A pyarrow array over the same memory (no copy)."""
        pa = pyarrow()
        validity = None if self.validity is None else pa.py_buffer(self.validity)
        return pa.Array.from_buffers(
            self.arrow_type(),
            len(self),
            [validity, pa.py_buffer(self.offsets), pa.py_buffer(self.data)],
            null_count=self.null_count,
        )

    def __repr__(self) -> str:
        kind = "string" if self.utf8 else "binary"
        return f"<BinaryColumn {kind} len={len(self)} nulls={self.null_count} bytes={self.data.nbytes}>"


class HeadersColumn:
    """Record headers as an Arrow list<struct<key: string, value: binary>> column."""

    __slots__ = ("offsets", "keys", "values", "validity", "null_count", "spark")

    def __init__(self, offsets: Any, keys: BinaryColumn, values: BinaryColumn,
                 validity: Any = None, null_count: int = 0, spark: bool = False) -> None:
        self.offsets = offsets
        self.keys = keys
        self.values = values
        # Spark layout only: bit i clear (record i's headers are null) when it has none.
        self.validity = validity
        self.null_count = null_count
        self.spark = spark

    def __len__(self) -> int:
        return len(self.offsets) - 1

    @property
    def counts(self) -> Any:
        """numpy array: the number of headers of each record."""
        return self.offsets[1:] - self.offsets[:-1]

    def __getitem__(self, i: int) -> list[tuple[str, bytes | None]] | None:
        n = len(self)
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError("column index out of range")
        if self.validity is not None and not (self.validity[i >> 3] >> (i & 7)) & 1:
            return None
        lo, hi = int(self.offsets[i]), int(self.offsets[i + 1])
        return [(self.keys[j], self.values[j]) for j in range(lo, hi)]  # type: ignore[misc]

    def to_pylist(self) -> list[list[tuple[str, bytes | None]] | None]:
        """For each record, its headers as (key, value-or-None) pairs, order kept (None for
        a record without headers in the Spark layout)."""
        pairs = list(zip(self.keys.to_pylist(), self.values.to_pylist(), strict=False))
        offs = self.offsets.tolist()
        out: list[Any] = [pairs[offs[i] : offs[i + 1]] for i in range(len(offs) - 1)]
        if self.null_count:
            for i, ok in enumerate(_bits(self.validity, len(self)).tolist()):
                if not ok:
                    out[i] = None
        return out

    def equals(self, other: Any) -> bool:
        """True if ``other`` is a ``HeadersColumn`` with the same headers, nulls and layout."""
        return (
            isinstance(other, HeadersColumn)
            and self.spark == other.spark
            and self.null_count == other.null_count
            and _same_array(self.validity, other.validity)
            and _same_array(self.offsets, other.offsets)
            and self.keys.equals(other.keys)
            and self.values.equals(other.values)
        )

    @property
    def layout(self) -> tuple[bool, bool, bool, bool]:
        """What the Arrow type depends on: (large keys, large values, 64-bit offsets,
        Spark's shape)."""
        return (self.keys.is_large, self.values.is_large, self.offsets.dtype.itemsize == 8,
                self.spark)

    def arrow_type(self) -> Any:
        """The pyarrow type of the column: a list of key/value structs."""
        layout = self.layout
        return _arrow_types(("headers", layout), lambda pa: _headers_type(pa, *layout))

    def to_arrow(self) -> Any:
        """A pyarrow list array over the same memory (no copy)."""
        pa = pyarrow()
        typ = self.arrow_type()
        entries = pa.Array.from_buffers(
            typ.value_type, len(self.keys), [None], null_count=0,
            children=[self.keys.to_arrow(), self.values.to_arrow()],
        )
        validity = None if self.validity is None else pa.py_buffer(self.validity)
        return pa.Array.from_buffers(
            typ, len(self), [validity, pa.py_buffer(self.offsets)], null_count=self.null_count,
            children=[entries],
        )

    def __repr__(self) -> str:
        return f"<HeadersColumn len={len(self)} headers={len(self.keys)}>"


class RecordColumns:
    """Every record of a records blob, one column per field (see ``decode_columns``).

    ``offset``, ``timestamp`` (-1 for magic 0) and ``timestamp_type`` (0 create time,
    1 log-append time, -1 none: magic 0) are numpy arrays; ``key`` and ``value`` are
    ``BinaryColumn``s; ``headers`` is a ``HeadersColumn``; ``is_control`` is a numpy bool
    array when control records were asked for, else None. ``consumed`` is the number of
    input bytes of the complete batches decoded (an incomplete trailing batch is left
    unread); ``batch_count`` counts those batches (skipped control batches included);
    ``next_offset`` is the offset after the last complete batch (None when there is none).
    """

    __slots__ = (
        "offset", "timestamp", "timestamp_type", "key", "value", "headers", "is_control",
        "consumed", "batch_count", "next_offset", "layout",
    )

    FIELDS = ("offset", "timestamp", "timestamp_type", "key", "value", "headers")

    def __init__(
        self,
        offset: Any,
        timestamp: Any,
        timestamp_type: Any,
        key: BinaryColumn,
        value: BinaryColumn,
        headers: HeadersColumn,
        is_control: Any,
        consumed: int,
        batch_count: int,
        next_offset: int | None,
        layout: str = "kcodec",
    ) -> None:
        if layout == "spark":
            headers = _spark_headers(offset, key, value, headers)
        self.layout = layout
        self.offset = offset
        self.timestamp = timestamp
        self.timestamp_type = timestamp_type
        self.key = key
        self.value = value
        self.headers = headers
        self.is_control = is_control
        self.consumed = consumed
        self.batch_count = batch_count
        self.next_offset = next_offset

    def __len__(self) -> int:
        return len(self.offset)

    def __getitem__(self, name: str) -> Any:
        if name in self.FIELDS or (name == "is_control" and self.is_control is not None):
            return getattr(self, name)
        raise KeyError(name)

    @property
    def column_names(self) -> list[str]:
        """The names of the columns, in order (``is_control`` only with ``include_control``)."""
        names = list(self.FIELDS)
        if self.is_control is not None:
            names.append("is_control")
        return names

    def to_pylist(self) -> list[dict[str, Any]]:
        """One dict per record (like ``pyarrow.RecordBatch.to_pylist()``); for tests and debugging."""
        cols = {
            "offset": self.offset.tolist(),
            "timestamp": self.timestamp.tolist(),
            "timestamp_type": self.timestamp_type.tolist(),
            "key": self.key.to_pylist(),
            "value": self.value.to_pylist(),
            "headers": self.headers.to_pylist(),
        }
        if self.is_control is not None:
            cols["is_control"] = self.is_control.tolist()
        names = list(cols)
        return [dict(zip(names, row, strict=False)) for row in zip(*cols.values(), strict=False)]

    def equals(self, other: Any) -> bool:
        """Same values, dtypes and layouts in every column, and the same counters."""
        return (
            isinstance(other, RecordColumns)
            and (self.consumed, self.batch_count, self.next_offset, self.layout)
            == (other.consumed, other.batch_count, other.next_offset, other.layout)
            and _same_array(self.offset, other.offset)
            and _same_array(self.timestamp, other.timestamp)
            and _same_array(self.timestamp_type, other.timestamp_type)
            and _same_array(self.is_control, other.is_control)
            and self.key.equals(other.key)
            and self.value.equals(other.value)
            and self.headers.equals(other.headers)
        )

    def arrow_schema(self) -> Any:
        """The ``pyarrow.Schema`` of ``to_arrow()`` (it depends on the offset widths)."""
        layout = (self.key.is_large, self.value.is_large, self.headers.layout,
                  self.is_control is not None, self.layout)

        def make(pa: Any) -> Any:
            if self.layout == "spark":
                fields = [
                    pa.field("offset", pa.int64()),
                    pa.field("timestamp", pa.timestamp("us", tz="UTC")),
                    pa.field("timestamp_type", pa.int32()),
                    pa.field("key", pa.binary()),
                    pa.field("value", pa.binary()),
                    pa.field("headers", self.headers.arrow_type()),
                ]
                if layout[3]:
                    fields.append(pa.field("is_control", pa.bool_()))
                return pa.schema(fields)
            fields = [
                pa.field("offset", pa.int64(), nullable=False),
                pa.field("timestamp", pa.int64(), nullable=False),
                pa.field("timestamp_type", pa.int8(), nullable=False),
                pa.field("key", self.key.arrow_type()),
                pa.field("value", self.value.arrow_type()),
                pa.field("headers", self.headers.arrow_type(), nullable=False),
            ]
            if layout[3]:
                fields.append(pa.field("is_control", pa.bool_(), nullable=False))
            return pa.schema(fields)

        return _arrow_types(("schema", layout), make)

    def to_arrow(self) -> Any:
        """A ``pyarrow.RecordBatch`` sharing this object's memory: no data buffer is copied.

        (``is_control``, when present, is the one column Arrow stores as bits: it is packed.)
        """
        pa = pyarrow()
        schema = self.arrow_schema()
        n = len(self)
        arrays = [
            pa.Array.from_buffers(schema.field(0).type, n, [None, pa.py_buffer(self.offset)], null_count=0),
            pa.Array.from_buffers(schema.field(1).type, n, [None, pa.py_buffer(self.timestamp)], null_count=0),
            pa.Array.from_buffers(schema.field(2).type, n, [None, pa.py_buffer(self.timestamp_type)], null_count=0),
            self.key.to_arrow(),
            self.value.to_arrow(),
            self.headers.to_arrow(),
        ]
        if self.is_control is not None:
            arrays.append(pa.array(self.is_control, type=pa.bool_()))
        return pa.RecordBatch.from_arrays(arrays, schema=schema)

    def to_spark(self, topic: str, partition: int, *, include_headers: bool = False) -> Any:
        """A ``pyarrow.RecordBatch`` in Spark's Kafka source schema and Arrow layout:
        key, value, topic, partition, offset, timestamp, timestampType[, headers].

        Only for ``layout="spark"`` decodes; the record columns share this object's memory
        (no copy), topic and partition are made for the batch. It equals
        ``pyspark.sql.pandas.types.to_arrow_schema`` of kcodec.spark's schema exactly.
        """
        if self.layout != "spark":
            raise ValueError("to_spark() needs a decode_columns(..., layout='spark') result")
        np = numpy()
        pa = pyarrow()
        n = len(self)
        name = topic.encode("utf-8")
        if n * len(name) > 0x7FFFFFFF:
            raise ValueError(f"{n} records of topic {topic!r} pass 2 GiB of topic names")
        ends = np.arange(n + 1, dtype=np.int32)
        ends *= len(name)
        topics = pa.Array.from_buffers(
            pa.string(), n, [None, pa.py_buffer(ends), pa.py_buffer(name * n)], null_count=0)
        arrays = self.to_arrow()
        cols = [arrays.column(3), arrays.column(4), topics,
                pa.array(np.full(n, partition, dtype=np.int32)),
                arrays.column(0), arrays.column(1), arrays.column(2)]
        names = ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType"]
        if include_headers:
            cols.append(arrays.column(5))
            names.append("headers")
        return pa.RecordBatch.from_arrays(cols, schema=spark_schema(include_headers))

    def __repr__(self) -> str:
        return (
            f"<RecordColumns records={len(self)} batches={self.batch_count} "
            f"consumed={self.consumed} next_offset={self.next_offset}>"
        )


def spark_schema(include_headers: bool = False, extra: tuple[Any, ...] = ()) -> Any:
    """Spark's Arrow schema for its Kafka source's columns (``to_arrow_schema`` of
    key binary, value binary, topic string, partition int, offset long, timestamp timestamp,
    timestampType int[, headers array<struct<key: string, value: binary>>]), every field
    nullable, as Spark declares them; ``extra`` appends (name, arrow type) pairs."""
    def make(pa: Any) -> Any:
        fields = [
            pa.field("key", pa.binary()),
            pa.field("value", pa.binary()),
            pa.field("topic", pa.string()),
            pa.field("partition", pa.int32()),
            pa.field("offset", pa.int64()),
            pa.field("timestamp", pa.timestamp("us", tz="UTC")),
            pa.field("timestampType", pa.int32()),
        ]
        if include_headers:
            fields.append(pa.field("headers", _headers_type(pa, False, False, False, True)))
        fields.extend(pa.field(name, typ) for name, typ in extra)
        return pa.schema(fields)

    return _arrow_types(("spark-schema", include_headers, extra), make)


def _spark_headers(offset: Any, key: BinaryColumn, value: BinaryColumn,
                   headers: HeadersColumn) -> HeadersColumn:
    """The Spark layout's last step, the same for both twins: refuse widened (over 2 GiB)
    columns, and mark the records without headers null (a bitmap made from the list
    offsets; no data moves)."""
    from kcodec.errors import DecodeError

    for what, col in (("key", key), ("value", value), ("header key", headers.keys),
                      ("header value", headers.values)):
        if col.is_large:
            raise DecodeError(
                f"the {what} column passes 2 GiB, the most Spark's Arrow layout (int32 "
                "offsets) holds: decode fewer batches at a time"
            )
    if headers.offsets.dtype.itemsize == 8:
        raise DecodeError("more than 2**31 headers: decode fewer batches at a time")
    np = numpy()
    n = len(offset)
    has = headers.offsets[1:] != headers.offsets[:-1]
    nulls = n - int(np.count_nonzero(has))
    validity = np.packbits(has, bitorder="little") if nulls else None
    return HeadersColumn(headers.offsets, headers.keys, headers.values, validity, nulls, True)
