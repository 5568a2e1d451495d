"""Spark schemas of the ``kcodec`` source (Spark's Kafka schema) and the ``kcodec-log``
source (the same, plus opt-in batch columns)."""

from __future__ import annotations

from typing import Any

from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    ShortType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

__all__ = ["kafka_schema", "log_schema", "HEADERS_TYPE", "SINK_COLUMNS"]

HEADERS_TYPE = ArrayType(StructType([StructField("key", StringType()),
                                     StructField("value", BinaryType())]))

#: the sink's columns and the types each accepts
SINK_COLUMNS = {"key", "value", "headers", "topic", "partition"}

#: opt-in columns of kcodec-log: (option name, column, Spark type, Arrow type name)
LOG_EXTRA = (
    ("includeproducer", "producerId", LongType(), "int64"),
    ("includeproducer", "producerEpoch", ShortType(), "int16"),
    ("includeproducer", "baseSequence", IntegerType(), "int32"),
)


def kafka_schema(include_headers: bool = False) -> StructType:
    """key binary, value binary, topic string, partition int, offset long, timestamp
    timestamp, timestampType int[, headers array<struct<key: string, value: binary>>]."""
    fields = [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("timestampType", IntegerType()),
    ]
    if include_headers:
        fields.append(StructField("headers", HEADERS_TYPE))
    return StructType(fields)


def log_schema(include_headers: bool = False, include_producer: bool = False) -> StructType:
    s = kafka_schema(include_headers)
    if include_producer:
        for _opt, name, typ, _arrow in LOG_EXTRA:
            s = s.add(StructField(name, typ))
    return s


def same_schema(a: Any, b: Any) -> bool:
    return a.jsonValue() == b.jsonValue()
