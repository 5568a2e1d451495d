"""``kcodec dump-log``: print the batches (and records) of Kafka log segments.

Like Kafka's DumpLogSegments: for each ``.log`` file one row per batch (offsets, position,
count, timestamps, size, magic, codec, CRC and whether it is valid, producer fields,
transactional/control flags), then a summary with what the broker's crash recovery would do.
``.index`` and ``.timeindex`` files are dumped as their entries and checked against the
``.log`` beside them.

Output: a plain text table (records below their batch as ``| offset: ...`` lines), or with
``--json`` one JSON object per line: ``{"type": "batch"|"record"|"error"|"summary"|
"index_entry"|"timeindex_entry"|"index_summary", "file": ..., ...}``. In JSON, keys, values
and header values are base64 strings (``--bytes base64``, lossless), lowercase hex
(``--bytes hex``), or text (``--bytes text``: UTF-8, invalid bytes as ``\\xNN`` escapes,
lossy); null stays null. The text table shows them as text with escapes, cut at
``--max-bytes``.

Exit codes: 0 all good; 1 corrupt data (bad CRC, malformed batch or record, a tail the
broker would truncate, an index that disagrees with its log) or an unreadable file; 2 usage.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import sys
import time
from collections.abc import Callable
from typing import IO, Any

from kcodec.errors import ChecksumError, KcodecError

NAME = "dump-log"
HELP = "print the batches and records of Kafka log segments (.log, .index, .timeindex)"
EXAMPLES = [
    "kcodec dump-log /var/lib/kafka/data/events-0/00000000000000000000.log",
    "kcodec dump-log -r --verify events-0/*.log",
]
DESCRIPTION = (
    "Print Kafka log segments like Kafka's DumpLogSegments: one row per batch of each .log "
    "file (offsets, position, count, timestamp, size, magic, codec, CRC and whether it is "
    "valid, producer fields, transactional/control flags), then what the broker's crash "
    "recovery would do with the file. .index and .timeindex files are listed and checked "
    "against the .log beside them. --json writes one JSON object per line, keys and values "
    "as base64 (--bytes). Exit status: 0 all good, 1 corrupt data or an unreadable file, "
    "2 usage."
)

CODECS = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}
TIMESTAMP_TYPES = {-1: "NoTimestampType", 0: "CreateTime", 1: "LogAppendTime"}
CONTROL_TYPES = {0: "ABORT", 1: "COMMIT", 2: "LEADER_CHANGE", 3: "SNAPSHOT_HEADER",
                 4: "SNAPSHOT_FOOTER", 5: "KRAFT_VERSION", 6: "KRAFT_VOTERS"}
PROGRESS_MIN_BYTES = 32 << 20
_I32_MAX = (1 << 31) - 1

COLUMNS = [
    # (header, width, right-aligned)
    ("baseOffset", 10, True), ("lastOffset", 10, True), ("count", 5, True),
    ("position", 8, True), ("tsType", 10, False), ("maxTimestamp", 13, True),
    ("size", 6, True), ("magic", 5, True), ("codec", 6, False), ("crc", 10, True),
    ("isValid", 7, False), ("producerId", 10, True), ("epoch", 5, True),
    ("baseSeq", 7, True), ("lastSeq", 7, True), ("leaderEpoch", 11, True),
    ("isTransactional", 15, False), ("isControl", 9, False),
]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("files", nargs="+", metavar="FILE",
                        help=".log segment files, .index/.timeindex files, or partition "
                             "directories (their .log files)")
    parser.add_argument("-r", "--records", action="store_true",
                        help="also print every record (offset, timestamp, key, value, headers)")
    parser.add_argument("--json", action="store_true", help="JSON lines instead of a table")
    parser.add_argument("--kafka", action="store_true",
                        help="lines in the format of Kafka's DumpLogSegments instead of a table")
    parser.add_argument("--verify", action="store_true",
                        help="only check: decode every record, check the indexes beside each "
                             "log, print one summary per file")
    parser.add_argument("--bytes", choices=("base64", "hex", "text"), default="base64",
                        dest="bytes_as", help="how --json writes keys and values "
                                              "(default base64)")
    parser.add_argument("--max-bytes", type=int, default=100, metavar="N",
                        help="show at most N bytes of a key or value in the table "
                             "(default 100; -1: no limit; 0: sizes only)")
    parser.add_argument("--no-mmap", action="store_true",
                        help="read each file into memory instead of mapping it (safe when a "
                             "live broker may truncate it meanwhile)")
    parser.add_argument("--no-progress", action="store_true",
                        help="no progress bar on stderr (shown for large files on a terminal)")


# -- rendering ------------------------------------------------------------------------------


def _escape(text: str) -> str:
    """One line of printable text: backslash escapes for the rest (and for backslash);
    lone surrogates from ``surrogateescape`` decoding become the ``\\xNN`` of their byte."""
    out = []
    for ch in text:
        cp = ord(ch)
        if ch == "\\":
            out.append("\\\\")
        elif ch.isprintable() and not 0xD800 <= cp < 0xE000:
            out.append(ch)
        elif ch in _SHORT:
            out.append(_SHORT[ch])
        elif 0xDC80 <= cp < 0xDD00:
            out.append(f"\\x{cp - 0xDC00:02x}")
        elif cp < 0x100:
            out.append(f"\\x{cp:02x}")
        else:
            out.append(f"\\u{cp:04x}" if cp < 0x10000 else f"\\U{cp:08x}")
    return "".join(out)


_SHORT = {"\n": "\\n", "\t": "\\t", "\r": "\\r"}


def render_bytes(data: bytes | None, limit: int = -1) -> str:
    """Bytes for people: UTF-8 text on one line, with backslash escapes for anything
    unprintable or not UTF-8, cut after ``limit`` bytes (``...(+N bytes)``); None -> null."""
    if data is None:
        return "null"
    data = bytes(data)
    rest = 0
    if 0 <= limit < len(data):
        rest = len(data) - limit
        data = data[:limit]
    text = _escape(data.decode("utf-8", "surrogateescape"))
    return text + (f"...(+{rest} bytes)" if rest else "")


def _bytes_json(mode: str) -> Callable[[bytes | None], str | None]:
    def conv(data: bytes | None) -> str | None:
        if data is None:
            return None
        data = bytes(data)
        if mode == "hex":
            return data.hex()
        if mode == "text":
            return data.decode("utf-8", "backslashreplace")
        return base64.b64encode(data).decode("ascii")

    return conv


def last_sequence(base_sequence: int, delta: int) -> int:
    """Kafka's lastSequence: base sequence + offset delta, wrapping at int32."""
    if base_sequence < 0:
        return -1
    if base_sequence > _I32_MAX - delta:
        return delta - (_I32_MAX - base_sequence) - 1
    return base_sequence + delta


def batch_fields(batch: Any, crc_ok: bool) -> dict[str, Any]:
    """The batch's fields as plain values (missing v2 fields of legacy messages: -1)."""
    from kcodec.records.segment import record_count

    base_seq = getattr(batch, "base_sequence", -1)
    ts_type = getattr(batch, "timestamp_type", -1)
    return {
        "base_offset": batch.base_offset,
        "last_offset": batch.last_offset,
        "count": record_count(batch),
        "position": batch.position,
        "size": batch.size,
        "magic": batch.magic,
        "compression": CODECS.get(batch.compression, str(batch.compression)),
        "timestamp_type": TIMESTAMP_TYPES.get(ts_type, str(ts_type)),
        "first_timestamp": getattr(batch, "first_timestamp", -1),
        "max_timestamp": getattr(batch, "max_timestamp", -1),
        "crc": batch.crc,
        "crc_valid": crc_ok,
        "producer_id": getattr(batch, "producer_id", -1),
        "producer_epoch": getattr(batch, "producer_epoch", -1),
        "base_sequence": base_seq,
        "last_sequence": last_sequence(base_seq, batch.last_offset - batch.base_offset),
        "partition_leader_epoch": getattr(batch, "partition_leader_epoch", -1),
        "is_transactional": bool(getattr(batch, "is_transactional", False)),
        "is_control": bool(getattr(batch, "is_control", False)),
        # attribute bit 6: first_timestamp holds the delete horizon (compacted tombstones)
        "delete_horizon_ms": (getattr(batch, "first_timestamp", -1)
                              if batch.magic >= 2 and getattr(batch, "attributes", 0) & 0x40
                              else None),
    }


def _cell(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def table_header() -> str:
    return " ".join(h.rjust(w) if right else h.ljust(w) for h, w, right in COLUMNS).rstrip()


def table_row(f: dict[str, Any]) -> str:
    values = [f["base_offset"], f["last_offset"], f["count"], f["position"],
              f["timestamp_type"], f["max_timestamp"], f["size"], f["magic"],
              f["compression"], f["crc"], f["crc_valid"], f["producer_id"],
              f["producer_epoch"], f["base_sequence"], f["last_sequence"],
              f["partition_leader_epoch"], f["is_transactional"], f["is_control"]]
    cells = []
    for (_, w, right), v in zip(COLUMNS, values, strict=False):
        s = _cell(v)
        cells.append(s.rjust(w) if right else s.ljust(w))
    return " ".join(cells).rstrip()


def kafka_line(f: dict[str, Any]) -> str:
    """A batch in the line format of Kafka's DumpLogSegments."""
    if f["magic"] >= 2:
        dh = f["delete_horizon_ms"]
        head = (f"baseOffset: {f['base_offset']} lastOffset: {f['last_offset']} "
                f"count: {f['count']} baseSequence: {f['base_sequence']} "
                f"lastSequence: {f['last_sequence']} producerId: {f['producer_id']} "
                f"producerEpoch: {f['producer_epoch']} "
                f"partitionLeaderEpoch: {f['partition_leader_epoch']} "
                f"isTransactional: {_cell(f['is_transactional'])} "
                f"isControl: {_cell(f['is_control'])} deleteHorizonMs: "
                + ("OptionalLong.empty" if dh is None else f"OptionalLong[{dh}]"))
    else:
        head = f"offset: {f['last_offset']}"
    return (f"{head} position: {f['position']} {f['timestamp_type']}: {f['max_timestamp']} "
            f"size: {f['size']} magic: {f['magic']} compresscodec: {f['compression']} "
            f"crc: {f['crc']} isvalid: {_cell(f['crc_valid'])}")


def kafka_record_line(record: Any, batch: Any, limit: int) -> str:
    """A record in the line format of Kafka's DumpLogSegments (``--print-data-log`` when
    ``limit`` is not 0)."""
    base_seq = getattr(batch, "base_sequence", -1)
    seq = last_sequence(base_seq, record.offset - batch.base_offset) if base_seq >= 0 else -1
    parts = [f"| offset: {record.offset}",
             f"{TIMESTAMP_TYPES.get(record.timestamp_type, 'NoTimestampType')}: "
             f"{record.timestamp}",
             f"keySize: {-1 if record.key is None else len(record.key)}",
             f"valueSize: {-1 if record.value is None else len(record.value)}"]
    if batch.magic >= 2:
        parts.append(f"sequence: {seq}")
        parts.append("headerKeys: [" + ",".join(_escape(k) for k, _ in record.headers) + "]")
    if getattr(record, "is_control", False):
        ctype = record.control_type
        parts.append(f"controlType: {CONTROL_TYPES.get(ctype, str(ctype))}({ctype})")
        if record.coordinator_epoch is not None:
            parts.append(f"coordinatorEpoch: {record.coordinator_epoch}")
    elif limit != 0:
        if record.key is not None:
            parts.append(f"key: {render_bytes(record.key, limit)}")
        parts.append(f"payload: {render_bytes(record.value, limit)}")
    return " ".join(parts)


def record_fields(record: Any, conv: Callable[[bytes | None], Any]) -> dict[str, Any]:
    out: dict[str, Any] = {
        "offset": record.offset,
        "timestamp": record.timestamp,
        "timestamp_type": TIMESTAMP_TYPES.get(record.timestamp_type, str(record.timestamp_type)),
        "key_size": -1 if record.key is None else len(record.key),
        "value_size": -1 if record.value is None else len(record.value),
        "key": conv(record.key),
        "value": conv(record.value),
        "headers": [[k, conv(v)] for k, v in record.headers],
    }
    if getattr(record, "is_control", False):
        ctype = record.control_type
        out["control"] = {"type": CONTROL_TYPES.get(ctype, str(ctype)),
                          "coordinator_epoch": record.coordinator_epoch}
    return out


def record_line(record: Any, limit: int) -> str:
    parts = [f"| offset: {record.offset}",
             f"{TIMESTAMP_TYPES.get(record.timestamp_type, 'NoTimestampType')}: {record.timestamp}",
             f"keySize: {-1 if record.key is None else len(record.key)}",
             f"valueSize: {-1 if record.value is None else len(record.value)}"]
    if getattr(record, "is_control", False):
        ctype = record.control_type
        parts.append(f"control: {CONTROL_TYPES.get(ctype, str(ctype))}")
        if record.coordinator_epoch is not None:
            parts.append(f"coordinatorEpoch: {record.coordinator_epoch}")
    if limit != 0:
        parts.append(f"key: {render_bytes(record.key, limit)}")
        parts.append(f"value: {render_bytes(record.value, limit)}")
        if record.headers:
            hs = ", ".join(f"{_escape(k)}={render_bytes(v, limit)}" for k, v in record.headers)
            parts.append(f"headers: [{hs}]")
    elif record.headers:
        parts.append("headerKeys: [" + ", ".join(_escape(k) for k, _ in record.headers) + "]")
    return " ".join(parts)


# -- progress -------------------------------------------------------------------------------


class Progress:
    """A one-line progress bar on a terminal stream, redrawn at most every ``interval`` s."""

    def __init__(self, total: int, stream: IO[str], label: str = "", width: int = 30,
                 interval: float = 0.2) -> None:
        self.total = max(total, 1)
        self.stream = stream
        self.label = label
        self.width = width
        self.interval = interval
        self._last = 0.0
        self.drawn = False

    def update(self, done: int, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self._last < self.interval:
            return
        self._last = now
        frac = min(max(done / self.total, 0.0), 1.0)
        fill = int(frac * self.width)
        bar = "#" * fill + "." * (self.width - fill)
        self.stream.write(f"\r{self.label} [{bar}] {frac * 100:5.1f}% "
                          f"{done >> 20}/{self.total >> 20} MiB")
        self.stream.flush()
        self.drawn = True

    def close(self) -> None:
        if self.drawn:
            self.stream.write("\r\x1b[K")
            self.stream.flush()


def _progress_for(args: argparse.Namespace, size: int, label: str) -> Progress | None:
    stream = sys.stderr
    if args.no_progress or size < PROGRESS_MIN_BYTES:
        return None
    try:
        if not stream.isatty():
            return None
        # rows going to the same terminal would scribble over the bar
        if not args.verify and sys.stdout.isatty():
            return None
    except (AttributeError, ValueError):
        return None
    return Progress(size, stream, os.path.basename(label))


# -- output sink ----------------------------------------------------------------------------


class _Out:
    def __init__(self, args: argparse.Namespace, stream: IO[str]) -> None:
        self.json = args.json
        self.stream = stream
        self.conv = _bytes_json(args.bytes_as)

    def obj(self, kind: str, path: str, fields: dict[str, Any]) -> None:
        d = {"type": kind, "file": path}
        d.update(fields)
        self.stream.write(json.dumps(d, ensure_ascii=False) + "\n")

    def line(self, text: str) -> None:
        self.stream.write(text + "\n")


# -- dumping --------------------------------------------------------------------------------


def dump_log(path: str, args: argparse.Namespace, out: _Out) -> int:
    """Dump one .log file; returns 1 if anything is wrong with it."""
    from kcodec.records.segment import LogSegment, record_count

    status = 0
    limit = args.max_bytes
    with LogSegment(path, use_mmap=not args.no_mmap) as seg:
        if not out.json:
            out.line(f"Dumping {path}")
            out.line(f"Log starting offset: {seg.base_offset}  size: {seg.size} bytes")
            if not args.verify and not args.kafka:
                out.line(table_header())
        track = seg.tracker()
        progress = _progress_for(args, seg.size, path)
        total_batches = total_records = crc_errors = record_errors = 0
        end_pos, broken = 0, False
        it = seg.batches(0)
        try:
            while True:
                try:
                    batch = next(it)
                except StopIteration:
                    break
                except KcodecError as exc:
                    track.fail(exc)
                    status, broken = 1, True
                    _error(out, path, getattr(exc, "offset", None), "corrupt batch", exc)
                    break
                end_pos = batch.position + batch.size
                try:
                    batch.check_crc()
                    crc_error: ChecksumError | None = None
                except ChecksumError as exc:
                    crc_error = exc
                    crc_errors += 1
                    status = 1
                records: list[Any] = []
                record_error: KcodecError | None = None
                if args.records or args.verify:
                    try:
                        records = list(batch)
                    except KcodecError as exc:
                        record_error = exc
                        record_errors += 1
                        status = 1
                # the broker's order: size and CRC, then offsets; then (deep) the records
                if record_error is None:
                    track.add(batch, crc_error)
                elif track.check(batch, crc_error) is None:
                    track.fail(record_error, "bad record")
                total_batches += 1
                total_records += record_count(batch)
                if not args.verify:
                    fields = batch_fields(batch, crc_error is None)
                    if out.json:
                        out.obj("batch", path, fields)
                    elif args.kafka:
                        out.line(kafka_line(fields))
                    else:
                        out.line(table_row(fields))
                    for r in records:
                        if out.json:
                            d = record_fields(r, out.conv)
                            d["batch_position"] = batch.position
                            out.obj("record", path, d)
                        elif args.kafka:
                            out.line(kafka_record_line(r, batch, limit))
                        else:
                            out.line(record_line(r, limit))
                if record_error is not None:
                    _error(out, path, batch.position, "bad record", record_error)
                if progress is not None:
                    progress.update(end_pos)
        finally:
            if progress is not None:
                progress.close()
        trailing = seg.size - end_pos
        if trailing:
            status = 1
            kind = ("zero-filled" if trailing >= 12 and seg.all_zero(end_pos)
                    else "unreadable" if broken else "incomplete batch")
            if not out.json:
                out.line(f"Trailing bytes: {trailing} at position {end_pos} ({kind})")
        result = track.result()
        if not result.ok:
            status = 1
        index_problems: list[str] = []
        if args.verify:
            index_problems = seg.verify_indexes()
            if index_problems:
                status = 1
        if out.json:
            out.obj("summary", path, {
                "size": result.size, "batches": total_batches, "records": total_records,
                "crc_errors": crc_errors, "record_errors": record_errors,
                "valid_bytes": result.valid_bytes, "truncate_at": result.truncate_at,
                "valid_batches": result.batches, "first_offset": result.first_offset,
                "last_valid_offset": result.last_offset, "ok": status == 0,
                "reason": result.reason,
                "error": None if result.error is None else str(result.error),
                "trailing_bytes": trailing, "index_problems": index_problems,
            })
        else:
            for p in index_problems:
                out.line(f"index problem: {p}")
            extra = []
            if crc_errors:
                extra.append(f"{crc_errors} with a bad CRC")
            if record_errors:
                extra.append(f"{record_errors} with bad records")
            out.line(f"Batches: {total_batches}{' (' + ', '.join(extra) + ')' if extra else ''}"
                     f", records: {total_records}")
            out.line(f"Recovery: {'OK' if result.ok else 'CORRUPT'}: {result.summary()}")
            if result.last_offset is not None:
                out.line(f"Last valid offset: {result.last_offset}, truncate at position "
                         f"{result.truncate_at}")
    return status


def _error(out: _Out, path: str, position: int | None, reason: str, exc: Exception) -> None:
    if out.json:
        out.obj("error", path, {"position": position, "reason": reason, "error": str(exc)})
    else:
        out.line(f"ERROR ({reason}): {exc}")


def dump_index(path: str, args: argparse.Namespace, out: _Out, time_index: bool) -> int:
    """Dump one .index or .timeindex file, checked against the .log beside it."""
    from kcodec.records.index import OffsetIndex, TimeIndex, sibling_path
    from kcodec.records.segment import LogSegment

    index = (TimeIndex if time_index else OffsetIndex).open(path)
    log_path = sibling_path(path, ".log")
    problems: list[str]
    if os.path.isfile(log_path):
        with LogSegment(log_path, indexes=False) as seg:
            if time_index:
                seg.time_index = index  # type: ignore[assignment]
            else:
                seg.offset_index = index  # type: ignore[assignment]
            problems = seg.verify_indexes()
    else:
        problems = [f"{path}: {p}" for p in index.problems()]
    if not out.json:
        out.line(f"Dumping {path}")
        out.line(f"Base offset: {index.base_offset}  entries: {len(index)}"
                 + (f"  zero-filled tail: {index.zero_tail_bytes} bytes"
                    if index.zero_tail_bytes else ""))
    if not args.verify:
        for e in index:
            if time_index:
                if out.json:
                    out.obj("timeindex_entry", path, {"timestamp": e.timestamp, "offset": e.offset})
                else:
                    out.line(f"timestamp: {e.timestamp} offset: {e.offset}")
            elif out.json:
                out.obj("index_entry", path, {"offset": e.offset, "position": e.position})
            else:
                out.line(f"offset: {e.offset} position: {e.position}")
    if out.json:
        out.obj("index_summary", path, {
            "kind": "timeindex" if time_index else "index", "base_offset": index.base_offset,
            "entries": len(index), "zero_tail_bytes": index.zero_tail_bytes,
            "checked_against": log_path if os.path.isfile(log_path) else None,
            "problems": problems, "ok": not problems})
    else:
        for p in problems:
            out.line(f"index problem: {p}")
        out.line(f"Index: {'OK' if not problems else 'PROBLEMS'}"
                 + ("" if os.path.isfile(log_path) else " (no .log beside it to check against)"))
    return 1 if problems else 0


def _segments(d: str) -> list[str]:
    return [os.path.join(d, n) for n in sorted(os.listdir(d)) if n.endswith(".log")]


def _partition_key(d: str) -> tuple[str, int, str]:
    topic, _, part = os.path.basename(d).rpartition("-")
    return (topic, int(part), d) if part.isdigit() else (d, -1, d)


def _partition_dirs(d: str) -> list[str]:
    """The partition directories (``<topic>-<partition>``, holding .log files) in a data
    directory: directly in it (a Kafka log dir) or under its ``logs/`` (a kcodec broker's
    data dir), in topic then partition order."""
    found = []
    for base in (d, os.path.join(d, "logs")):
        if not os.path.isdir(base):
            continue
        for n in os.listdir(base):
            sub = os.path.join(base, n)
            if os.path.isdir(sub) and any(x.endswith(".log") for x in os.listdir(sub)):
                found.append(sub)
    return sorted(found, key=_partition_key)


def _expand(paths: list[str]) -> list[str]:
    """A directory stands for the .log segments in it, in offset (name) order; a data
    directory (no segments of its own) for those of every partition directory in it."""
    out: list[str] = []
    for p in paths:
        if os.path.isdir(p):
            logs = _segments(p)
            if not logs:
                logs = [s for d in _partition_dirs(p) for s in _segments(d)]
            out += logs or [p]
        else:
            out.append(p)
    return out


def run(args: argparse.Namespace) -> int:
    out = _Out(args, sys.stdout)
    status = 0
    for i, path in enumerate(_expand(args.files)):
        if i and not out.json:
            out.line("")
        name = os.path.basename(path)
        try:
            if os.path.isdir(path):
                raise OSError(f"no log segments (.log files) in directory {path}, nor in "
                              "partition directories (<topic>-<partition>/) in it or under its logs/")
            if ".timeindex" in name:
                status |= dump_index(path, args, out, time_index=True)
            elif ".index" in name:
                status |= dump_index(path, args, out, time_index=False)
            else:
                status |= dump_log(path, args, out)
        except BrokenPipeError:
            # the reader went away (``| head``): stop quietly, and keep the interpreter's
            # final flush from complaining about the closed pipe
            _silence_stdout()
            raise
        except (OSError, KcodecError, ValueError) as exc:
            sys.stdout.flush()
            where = "" if os.path.isdir(path) else f"{path}: "
            print(f"kcodec {NAME}: error: {where}{exc}", file=sys.stderr)
            status = 1
    return status


def _silence_stdout() -> None:
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):
        pass
