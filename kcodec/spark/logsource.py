"""``spark.read.format("kcodec-log").load(path)``: Kafka log directories read offline.

``path`` is a broker's log directory (its ``topic-N`` folders), one ``topic-N`` folder, or
``.log`` files (several paths: comma-separated, or ``load([...])``). One input partition per
``.log`` segment; topic and partition come from the folder name. The schema is the
``kcodec`` source's (Spark's Kafka schema), plus with ``includeProducer=true`` the batch's
``producerId``, ``producerEpoch`` and ``baseSequence``.

Filters (pyspark >= 4.1 with ``spark.sql.python.filterPushdown.enabled=true``) on
``partition`` and ``offset`` skip whole segments and start inside a segment through its
``.index``; a lower bound on ``timestamp`` starts through the ``.timeindex``. Spark still
checks every row it is given against those filters.

Every segment is checked the way the broker's crash recovery does (sizes, CRCs, offsets)
before it is read. A cut (torn) or corrupt tail fails the task with the file, position and
reason, like ``kcodec dump-log``; ``failOnCorruption=false`` reads the valid part, skips the
rest and prints the same report on the worker's stderr. Nothing wrong is returned silently.
"""

from __future__ import annotations

import os
import re
import socket
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from kcodec.spark.schema import log_schema, same_schema

__all__ = ["KafkaLogSource", "LogSegmentRef", "find_segments", "read_segment", "missing_here"]

_TP_DIR = re.compile(r"^(?P<topic>.+)-(?P<partition>\d+)$")
_OPTIONS = {"path", "paths", "includeheaders", "includeproducer", "failoncorruption",
            "validatecrc"}
_CHUNK = 32 << 20        # input bytes per decode: bounds the memory of one Arrow batch


@dataclass(frozen=True)
class LogSegmentRef:
    """One ``.log`` file: its topic and partition, base offset, and the base offset of the
    next segment of the same partition (None for the last one)."""

    path: str
    topic: str
    partition: int
    base_offset: int
    next_base: int | None


def _tp_of(directory: str) -> tuple[str, int]:
    m = _TP_DIR.match(os.path.basename(os.path.normpath(directory)))
    if not m:
        raise ValueError(f"{directory}: not a topic-partition folder (NAME-N), so its topic "
                         "and partition are unknown")
    return m.group("topic"), int(m.group("partition"))


def _segments_in(directory: str) -> list[str]:
    # Regular files only: a folder named like a segment is not one (it made read_segment
    # fail with IsADirectoryError; fuzz finding F7).
    return sorted(p for p in (os.path.join(directory, n) for n in os.listdir(directory)
                              if n.endswith(".log") and n[:-4].isdigit()) if os.path.isfile(p))


def find_segments(paths: list[str]) -> list[LogSegmentRef]:
    """The segments under ``paths`` (log dirs, topic-partition dirs or .log files)."""
    files: list[str] = []
    for p in paths:
        if os.path.isdir(p):
            own = _segments_in(p)
            if own:
                files.extend(own)
                continue
            subs = sorted(os.path.join(p, n) for n in os.listdir(p)
                          if _TP_DIR.match(n) and os.path.isdir(os.path.join(p, n)))
            if not subs:
                raise ValueError(f"{p}: no .log segments and no topic-partition folders")
            for s in subs:
                files.extend(_segments_in(s))
        elif os.path.isfile(p):
            if not p.endswith(".log"):
                raise ValueError(f"{p}: not a .log segment file")
            files.append(p)
        else:
            raise FileNotFoundError(f"{p}: no such file or directory")
    by_tp: dict[tuple[str, int], list[tuple[int, str]]] = {}
    for f in sorted(set(files)):
        topic, partition = _tp_of(os.path.dirname(os.path.abspath(f)))
        base = int(os.path.basename(f)[:-4])
        by_tp.setdefault((topic, partition), []).append((base, f))
    out = []
    for (topic, partition), segs in sorted(by_tp.items()):
        segs.sort()
        for i, (base, f) in enumerate(segs):
            nxt = segs[i + 1][0] if i + 1 < len(segs) else None
            out.append(LogSegmentRef(os.path.abspath(f), topic, partition, base, nxt))
    return out


def _paths(options: Any) -> list[str]:
    raw = options.get("paths") or options.get("path")
    if not raw:
        raise ValueError("kcodec-log needs a path: spark.read.format('kcodec-log').load(PATH)")
    raw = str(raw)
    if raw.startswith("["):            # load([...]) hands a JSON list
        import json

        return [str(p) for p in json.loads(raw)]
    return [p.strip() for p in raw.split(",") if p.strip()]


def _bool(options: Any, name: str, default: bool) -> bool:
    v = options.get(name)
    if v is None:
        return default
    s = str(v).strip().lower()
    if s not in ("true", "false"):
        raise ValueError(f"option {name} must be true or false, got {v!r}")
    return s == "true"


class KafkaLogSource(DataSource):
    """``format("kcodec-log")``: records of Kafka log segments, no broker needed."""

    @classmethod
    def name(cls) -> str:
        """The format name: ``kcodec-log``."""
        return "kcodec-log"

    def _flags(self) -> tuple[bool, bool]:
        return (_bool(self.options, "includeHeaders", False),
                _bool(self.options, "includeProducer", False))

    def schema(self) -> StructType:
        """The records' schema (headers and producer columns when asked for)."""
        return log_schema(*self._flags())

    def reader(self, schema: StructType) -> DataSourceReader:
        """The reader of ``spark.read.format("kcodec-log").load(path)``."""
        for k in self.options:
            if str(k).lower() not in _OPTIONS:
                raise ValueError(f"unknown option {k!r} for kcodec-log (options: "
                                 "includeHeaders, includeProducer, failOnCorruption, "
                                 "validateCrc)")
        if not same_schema(schema, log_schema(*self._flags())):
            raise ValueError("kcodec-log has a fixed schema and cannot be given another one")
        headers, producer = self._flags()
        from kcodec.spark.source import pushdown_enabled

        cls = LogPushdownReader if pushdown_enabled() else LogReader
        return cls(_paths(self.options), headers, producer,
                         _bool(self.options, "failOnCorruption", True),
                         _bool(self.options, "validateCrc", True))


class LogReader(DataSourceReader):
    def __init__(self, paths: list[str], headers: bool, producer: bool, fail: bool,
                 validate_crc: bool) -> None:
        self.paths = paths
        self.headers = headers
        self.producer = producer
        self.fail = fail
        self.validate_crc = validate_crc
        self.only_partitions: set[int] | None = None
        self.offset_lo, self.offset_hi = 0, 1 << 63
        self.ts_lo: int | None = None
        self.ts_hi: int | None = None

    def partitions(self) -> Sequence[InputPartition]:
        # the reader goes to the executors pickled after this: they learn where it ran
        self.planned_on = socket.gethostname()
        segs = find_segments(self.paths)
        out = []
        for s in segs:
            if self.only_partitions is not None and s.partition not in self.only_partitions:
                continue
            if s.base_offset >= self.offset_hi:
                continue
            if s.next_base is not None and s.next_base <= self.offset_lo:
                continue
            out.append(InputPartition(s))
        return out

    def read(self, partition: InputPartition) -> Iterator[Any]:
        from kcodec.spark.workers import warn_if_pure

        warn_if_pure()
        ref = partition.value
        if not os.path.isfile(ref.path):
            raise FileNotFoundError(missing_here(ref.path, getattr(self, "planned_on", None)))
        yield from read_segment(ref, self.headers, self.producer, self.fail,
                                self.validate_crc, self.offset_lo, self.offset_hi, self.ts_lo)


def missing_here(path: str, planned_on: str | None) -> str:
    """Why a segment found at planning is not there for the task that reads it."""
    here = socket.gethostname()
    where = f"on {planned_on}" if planned_on else "where the query was planned"
    return (f"{path}: no such file on this Spark executor ({here}), though it was there "
            f"{where} when the query was planned. kcodec-log reads the files themselves, so "
            "every worker must see the same path: a filesystem shared by all machines "
            "(NFS, a mounted volume) at the same place, or a copy on each. On one machine, "
            "the segment was deleted since (retention, compaction, a deleted topic)")


class LogPushdownReader(LogReader):
    """LogReader with filter pushdown (see kcodec.spark.source.pushdown_enabled)."""

    def pushFilters(self, filters: list[Any]) -> Iterator[Any]:
        from kcodec.spark.pushdown import push

        yield from push(self, filters)


def _start_position(seg: Any, offset_lo: int, ts_lo: int | None) -> int:
    """A batch boundary at or before the first record that can pass the filters."""
    pos = 0
    if offset_lo > seg.base_offset:
        b = seg.find_offset(offset_lo)
        if b is None:
            return seg.size
        pos = b.position
    if ts_lo is not None:
        hit = seg.find_timestamp(ts_lo)
        if hit is None:
            return seg.size
        pos = max(pos, hit.position)
    return pos


def read_segment(ref: LogSegmentRef, headers: bool, producer: bool, fail: bool,
                 validate_crc: bool, offset_lo: int = 0, offset_hi: int = 1 << 63,
                 ts_lo: int | None = None) -> Iterator[Any]:
    """The records of one segment as Arrow batches in kcodec-log's schema."""
    import numpy as np

    from kcodec.records import decode_columns
    from kcodec.records.segment import LogSegment

    with LogSegment(ref.path, base_offset=ref.base_offset) as seg:
        if seg.size == 0:
            return
        rec = seg.recover() if validate_crc else None
        end = rec.valid_bytes if rec is not None else seg.size
        if rec is not None and not rec.ok:
            report = (f"{ref.path}: {rec.reason} at byte {rec.valid_bytes} of {rec.size}; "
                      f"{rec.size - rec.valid_bytes} bytes after it are not read")
            if rec.error is not None:
                report += f" ({rec.error})"
            if fail:
                raise ValueError(report + " (set failOnCorruption=false to read the valid "
                                 "part only)")
            print(f"kcodec-log: warning: {report}", file=sys.stderr, flush=True)
        pos = _start_position(seg, offset_lo, ts_lo)
        buf = seg.buffer
        chunk = _CHUNK
        while pos < end:
            piece = buf[pos:min(pos + chunk, end)]
            cols = decode_columns(piece, validate_crc=False, layout="spark")
            if cols.consumed == 0:
                if pos + chunk >= end:
                    # an incomplete batch at the end, found without the recovery check
                    raise ValueError(f"{ref.path}: incomplete batch at byte {pos}")
                chunk *= 2          # one batch larger than the chunk
                continue
            rb = cols.to_spark(ref.topic, ref.partition, include_headers=headers)
            if producer:
                rb = _with_producer(rb, piece[:cols.consumed], cols.offset)
            offs = cols.offset
            lo = int(np.searchsorted(offs, offset_lo)) if offset_lo > 0 else 0
            hi = int(np.searchsorted(offs, offset_hi)) if offset_hi < (1 << 63) else len(offs)
            if lo or hi < len(offs):
                rb = rb.slice(lo, max(hi - lo, 0))
            if rb.num_rows:
                yield rb
            pos += cols.consumed
            if len(offs) and int(offs[-1]) >= offset_hi:
                break
            piece.release()


def _with_producer(rb: Any, data: Any, offsets: Any) -> Any:
    """Append producerId, producerEpoch, baseSequence: each record gets its batch's."""
    import numpy as np
    import pyarrow as pa

    from kcodec.records import iter_batches

    last, pid, epoch, seq = [], [], [], []
    for b in iter_batches(data, validate_crc=False):
        if b.is_control:
            continue
        last.append(b.last_offset)
        pid.append(getattr(b, "producer_id", -1))
        epoch.append(getattr(b, "producer_epoch", -1))
        seq.append(getattr(b, "base_sequence", -1))
    idx = np.searchsorted(np.array(last, dtype=np.int64), offsets)
    idx = np.minimum(idx, max(len(last) - 1, 0))
    cols = [rb.column(i) for i in range(rb.num_columns)]
    names = list(rb.schema.names)
    for name, vals, typ in (("producerId", pid, np.int64), ("producerEpoch", epoch, np.int16),
                            ("baseSequence", seq, np.int32)):
        arr = np.array(vals, dtype=typ)[idx] if len(vals) else np.zeros(0, dtype=typ)
        cols.append(pa.array(arr))
        names.append(name)
    from kcodec._columnar import spark_schema
    from kcodec.spark.schema import LOG_EXTRA

    extra = tuple((n, pa.from_numpy_dtype(np.dtype(t))) for _o, n, _s, t in LOG_EXTRA)
    schema = spark_schema("headers" in names, extra)
    return pa.RecordBatch.from_arrays(cols, schema=schema)
