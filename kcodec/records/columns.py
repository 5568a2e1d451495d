"""Columnar decode: every record of a records blob, one numpy/Arrow column per field.

    >>> from kcodec.records import decode_columns
    >>> cols = decode_columns(fetch_records)           # any mix of magic 0, 1 and 2
    >>> len(cols), cols.offset[:3], cols.key.to_pylist()[:1]
    >>> table = cols.to_arrow()                        # pyarrow.RecordBatch, no data copied

``decode_columns(buf, *, validate_crc=True, include_control=False, large=False,
max_decompressed_size=100 MiB, layout="kcodec")`` returns a ``RecordColumns``: ``offset``, ``timestamp``
(int64) and ``timestamp_type`` (int8) numpy arrays, ``key`` and ``value`` as
``BinaryColumn`` (Arrow binary layout: ``offsets``, ``data``, ``validity`` bitmap),
``headers`` as ``HeadersColumn`` (Arrow list<struct<key: string, value: binary>>), and
``consumed``/``batch_count``/``next_offset``. Control batches (transaction markers) are
skipped unless ``include_control=True``, which also adds an ``is_control`` column. See
``kcodec._py.columns`` for the layout and the rules. numpy is needed (imported on the first
call); pyarrow only for ``to_arrow()``.

``layout="spark"`` writes Spark's Arrow layout straight from the decode (timestamps in
microseconds, int32 timestamp types, int32 binary offsets, null headers for records without
any); ``cols.to_spark(topic, partition, include_headers=...)`` is then a
``pyarrow.RecordBatch`` in the exact schema Spark expects from its Kafka source, sharing the
decoded memory. kcodec.spark reads with it.

The implementation is chosen once by ``kcodec._impl`` (see ``kcodec.IMPLEMENTATION``).
"""

from kcodec._columnar import BinaryColumn, HeadersColumn, RecordColumns
from kcodec._impl import IMPLEMENTATION

if IMPLEMENTATION == "cython":
    from kcodec._cy.columns import *  # noqa: F401,F403
else:
    from kcodec._py.columns import *  # noqa: F401,F403

__all__ = ["decode_columns", "join_values", "RecordColumns", "BinaryColumn", "HeadersColumn"]  # noqa: F405
