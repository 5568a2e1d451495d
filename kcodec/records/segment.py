"""Kafka log segments: a memory-mapped ``.log`` file with its ``.index`` and ``.timeindex``.

Layout of a partition directory (``topic-0/``), one segment per base offset:

    00000000000000001234.log        := batch*      record batches back to back (any magic)
    00000000000000001234.index      := { relative_offset:int32 position:int32 }*
    00000000000000001234.timeindex  := { timestamp:int64 relative_offset:int32 }*

    batch (every magic) := base_offset:int64 batch_length:int32 partition_leader_epoch:int32
                           magic:int8 crc:uint32 ...           size = 12 + batch_length

The name is the segment's base offset (20 digits, zero-padded); index offsets are relative
to it and must fit an int32. The broker writes whole batches, so a batch cut short at the end
of the file is a torn write (a crash mid-append) that recovery truncates, as it truncates
everything from the first batch that is malformed or fails its CRC.

``LogSegment`` is pure Python over the twinned batch reader (``iter_batches``): the
per-batch work is in the reader, the segment only moves positions around. Its recovery scan
skips runs of valid v2 batches with the ``segscan`` twins (compiled: no Python object per
batch, the GIL released) and reads anything else with the full reader.
"""

from __future__ import annotations

import mmap
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, NamedTuple, Union

from kcodec.errors import ChecksumError, CorruptDataError, KcodecError, TruncatedError
from kcodec.records.batch import iter_batches
from kcodec.records.index import (
    IndexEntry,
    OffsetIndex,
    TimeIndex,
    TimeIndexEntry,
    base_offset_from_name,
    sibling_path,
)
from kcodec.records.segscan import scan_valid_v2

__all__ = ["LogSegment", "RecoveryResult", "TimestampOffset", "DEFAULT_INDEX_INTERVAL"]

PathLike = Union[str, "os.PathLike[str]"]

#: the broker's ``index.interval.bytes`` default
DEFAULT_INDEX_INTERVAL = 4096
_INT32_MAX = (1 << 31) - 1
_ZERO_CHECK_CHUNK = 1 << 20
_UNCHECKED: Any = object()

def record_count(batch: Any) -> int:
    """A batch's record count without failing: a legacy compressed wrapper must be
    decompressed to count its messages, and if that fails it counts 0 here (the broker's
    recovery never looks inside; ``recover(deep=True)`` reports it as a bad record)."""
    try:
        return batch.record_count  # type: ignore[no-any-return]
    except KcodecError:
        return 0


def _iter_batches(buf: Any, position: int) -> Any:
    """Batches of ``buf`` from ``position`` on (positions absolute in ``buf``), CRCs unchecked."""
    return iter_batches(buf, validate_crc=False, start=position)


class TimestampOffset(NamedTuple):
    """Where a time lookup landed: the first record at or after the time asked for."""

    timestamp: int
    offset: int
    position: int  #: file position of the batch holding the record


@dataclass(frozen=True)
class RecoveryResult:
    """What the broker's recovery would do with a segment (nothing is modified).

    ``valid_bytes`` is where the log should be truncated (``truncate_at``); everything
    before it is whole batches with good sizes and CRCs. ``reason`` says why the scan
    stopped early (None when the whole file is valid) and ``error`` carries the kcodec
    error behind it, if any. ``position`` is where the bad data starts (== valid_bytes).
    """

    path: str | None
    size: int
    valid_bytes: int
    batches: int
    records: int
    first_offset: int | None
    last_offset: int | None
    max_timestamp: int
    reason: str | None = None
    error: KcodecError | None = None

    @property
    def ok(self) -> bool:
        """True when nothing needs truncating."""
        return self.valid_bytes == self.size

    @property
    def truncate_at(self) -> int:
        """The byte position the broker would truncate the segment at (``valid_bytes``)."""
        return self.valid_bytes

    @property
    def truncated_bytes(self) -> int:
        """Bytes recovery would drop from the end."""
        return self.size - self.valid_bytes

    def summary(self) -> str:
        """One line for people."""
        span = ("no valid batches" if self.last_offset is None
                else f"offsets {self.first_offset}-{self.last_offset}")
        head = f"{self.batches} batches, {self.records} records, {span}"
        if self.ok:
            return f"{head}; all {self.size} bytes valid"
        why = self.reason or "invalid data"
        if self.error is not None:
            why = f"{why}: {self.error}"
        return (f"{head}; {why}; truncate at position {self.valid_bytes} "
                f"(drops {self.truncated_bytes} of {self.size} bytes)")


class RecoveryTracker:
    """Accumulates a recovery scan batch by batch (shared by ``recover`` and the CLI)."""

    __slots__ = ("segment", "valid_bytes", "batches", "records", "first_offset",
                 "last_offset", "max_timestamp", "reason", "error", "base", "top")

    def __init__(self, segment: LogSegment) -> None:
        self.segment = segment
        self.valid_bytes = 0
        self.batches = 0
        self.records = 0
        self.first_offset: int | None = None
        self.last_offset: int | None = None
        self.max_timestamp = -1
        self.reason: str | None = None
        self.error: KcodecError | None = None
        # the offsets a batch of the segment may hold: relative offsets must fit an int32
        self.base = segment.base_offset
        self.top = self.base + _INT32_MAX

    @property
    def stopped(self) -> bool:
        return self.reason is not None

    def check(self, batch: Any, crc_error: Any = _UNCHECKED) -> str | None:
        """Would the broker accept the next batch (which starts at ``valid_bytes``)?

        Returns None, or the reason it stops here (and remembers it). The CRC is checked
        unless the caller passes the outcome of its own ``check_crc()`` call as
        ``crc_error`` (None when it passed, the ChecksumError when not).
        """
        if self.reason is not None:
            return self.reason
        if crc_error is _UNCHECKED:
            crc_error = None
            if not batch.validate_crc():
                try:
                    batch.check_crc()
                except ChecksumError as exc:
                    crc_error = exc
        if crc_error is not None:
            self.error = crc_error
            return self._stop("checksum mismatch")
        first, last = batch.base_offset, batch.last_offset
        if not self.base <= first <= last <= self.top:
            self.error = CorruptDataError(
                f"batch offsets {first}-{last} do not fit a segment with base offset "
                f"{self.base}", batch.position)
            return self._stop("offset out of range")
        return None

    def accept(self, batch: Any) -> None:
        """Count a batch that passed ``check`` as valid."""
        self.valid_bytes = batch.position + batch.size
        self.batches += 1
        self.records += record_count(batch)
        if self.first_offset is None:
            self.first_offset = batch.base_offset
        self.last_offset = batch.last_offset
        ts = batch.max_timestamp
        if ts > self.max_timestamp:
            self.max_timestamp = ts

    def add(self, batch: Any, crc_error: Any = _UNCHECKED) -> str | None:
        """``check`` the batch and ``accept`` it if it passes; returns the stop reason."""
        reason = self.check(batch, crc_error)
        if reason is None:
            self.accept(batch)
        return reason

    def fail(self, error: KcodecError, reason: str = "corrupt batch") -> str:
        """The batch at ``valid_bytes`` could not be read (or a record in it decoded)."""
        if self.reason is None:
            self.error = error
            self._stop(reason)
        return self.reason  # type: ignore[return-value]

    def _stop(self, reason: str) -> str:
        self.reason = reason
        return reason

    def result(self) -> RecoveryResult:
        """The final result; an early end of iteration counts as a torn tail."""
        seg = self.segment
        reason, error = self.reason, self.error
        # the result keeps the error, not the scan's frames: their views of the mapped file
        # would keep it mapped (and its descriptor open) after close()
        e: BaseException | None = error
        while e is not None:
            e.__traceback__ = None
            e = e.__cause__ or e.__context__
        if reason in (None, "corrupt batch") and self.valid_bytes < seg.size:
            rest = seg.size - self.valid_bytes
            if rest >= 12 and seg.all_zero(self.valid_bytes):
                # what a preallocated segment (log.preallocate) holds after a crash
                reason, error = "zero-filled tail", None
            elif reason is None:
                reason = "incomplete batch"
                error = TruncatedError(_tail_need(seg, self.valid_bytes), self.valid_bytes,
                                       rest, "batch")
        return RecoveryResult(
            path=seg.path, size=seg.size, valid_bytes=self.valid_bytes, batches=self.batches,
            records=self.records, first_offset=self.first_offset, last_offset=self.last_offset,
            max_timestamp=self.max_timestamp, reason=reason, error=error,
        )


def _tail_need(seg: LogSegment, position: int) -> int:
    """Bytes the batch at ``position`` claims to need (12 if even its length is missing)."""
    rest = seg.size - position
    if rest < 12:
        return 12
    length = int.from_bytes(seg.buffer[position + 8: position + 12], "big", signed=True)
    return 12 + max(length, 0)


class LogSegment:
    """A Kafka ``.log`` segment, memory-mapped read-only, with its indexes when present.

        with LogSegment("topic-0/00000000000000000000.log") as seg:
            for batch in seg:                 # batch.position: file position
                ...
            batch = seg.find_offset(42)       # the batch holding offset 42 (via .index)
            hit = seg.find_timestamp(ts)      # first record with timestamp >= ts
            print(seg.recover().summary())    # what the broker's crash recovery would do

    ``base_offset`` defaults to the file name's (or the first batch's, or 0). Indexes are
    read from the ``.index``/``.timeindex`` files beside the log unless ``indexes=False``;
    they only speed lookups up: a missing, empty or broken index gives the same answers.
    Closing unmaps the file; batches and records still referenced keep it mapped until
    they go away (their bytes stay valid). A mapped file that another process truncates
    while it is open (a live broker's active segment) can kill the reading process with
    SIGBUS; ``use_mmap=False`` reads the file into memory instead.
    """

    def __init__(self, path: PathLike, *, base_offset: int | None = None,
                 indexes: bool = True, use_mmap: bool = True) -> None:
        self.path = os.fspath(path)
        self._map: mmap.mmap | None = None
        data: bytes = b""
        with open(self.path, "rb") as f:
            st = os.fstat(f.fileno())
            if not stat.S_ISREG(st.st_mode):
                data = f.read()          # a pipe or device (/dev/stdin): read it all
            elif st.st_size and use_mmap:
                try:
                    self._map = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
                except (OSError, ValueError):
                    data = f.read()      # a file system that cannot map files
            elif st.st_size:
                data = f.read()
        #: bytes in the segment (as mapped or read when it was opened)
        self.size = len(self._map) if self._map is not None else len(data)
        self._view: memoryview = memoryview(self._map if self._map is not None else data)
        self.closed = False
        if base_offset is None:
            base_offset = base_offset_from_name(self.path)
        self._base_offset = base_offset
        self.offset_index: OffsetIndex | None = None
        self.time_index: TimeIndex | None = None
        #: index files beside the log that exist but could not be read (then not used)
        self.index_errors: list[str] = []
        if indexes:
            self.offset_index = self._load(OffsetIndex, ".index")
            self.time_index = self._load(TimeIndex, ".timeindex")

    def _load(self, cls: Any, suffix: str) -> Any:
        p = sibling_path(self.path, suffix)
        if p == self.path or not os.path.isfile(p):
            return None
        try:
            return cls.open(p, self.base_offset)
        except OSError as exc:      # an unreadable index must not stop reading the log
            self.index_errors.append(f"{p}: {exc}")
            return None

    # -- life cycle ---------------------------------------------------------------------

    def close(self) -> None:
        """Unmap the file (idempotent)."""
        if self.closed:
            return
        self.closed = True
        view, self._view = self._view, memoryview(b"")
        m, self._map = self._map, None
        try:
            view.release()
            if m is not None:
                m.close()
        except BufferError:
            # batches or iterators still hold views into the map: it is unmapped when the
            # last of them is freed, and their bytes stay valid until then.
            pass

    def __enter__(self) -> LogSegment:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return (f"LogSegment({self.path!r}, base_offset={self.base_offset}, size={self.size}"
                f"{', closed' if self.closed else ''})")

    # -- basics -------------------------------------------------------------------------

    @property
    def buffer(self) -> memoryview:
        """The mapped bytes (read-only)."""
        if self.closed:
            raise ValueError("I/O operation on a closed LogSegment")
        return self._view

    @property
    def base_offset(self) -> int:
        """The file name's base offset; else the first batch's base offset; else 0."""
        if self._base_offset is None:
            self._base_offset = 0
            if self.size >= 8:
                self._base_offset = max(
                    int.from_bytes(self._view[0:8], "big", signed=True), 0)
        return self._base_offset

    def all_zero(self, position: int) -> bool:
        """Whether every byte from ``position`` to the end is zero (a preallocated or
        zero-filled tail, not a torn batch)."""
        view = self.buffer
        for start in range(position, self.size, _ZERO_CHECK_CHUNK):
            if view[start: start + _ZERO_CHECK_CHUNK].tobytes().strip(b"\0"):
                return False
        return True

    # -- iteration ----------------------------------------------------------------------

    def batches(self, position: int = 0) -> Iterator[Any]:
        """Batches from file ``position`` (a batch boundary) on; ``batch.position`` is the
        file position. Stops quietly at an incomplete batch at the end (a torn write);
        a complete but malformed batch raises. CRCs are not checked here: call
        ``batch.check_crc()``/``validate_crc()`` or use ``recover()``."""
        if not 0 <= position <= self.size:
            raise ValueError(f"position {position} outside the segment (size {self.size})")
        return _iter_batches(self.buffer, position)

    def __iter__(self) -> Iterator[Any]:
        return self.batches(0)

    def _start_for(self, offset: int) -> int:
        """A batch boundary at or before the batch holding ``offset`` (index or 0)."""
        if self.offset_index is None or not len(self.offset_index):
            return 0
        entry = self.offset_index.lookup(offset)
        pos = entry.position
        if pos <= 0 or pos >= self.size or entry.offset > offset:
            return 0
        # Trust the entry only if a whole batch with a good CRC starts there (bytes in the
        # middle of a batch will not pass) and it does not begin past the target.
        first = self._batch_at(pos)
        if first is None or first.base_offset > offset or not first.validate_crc():
            return 0
        return pos

    def batches_from(self, offset: int) -> Iterator[Any]:
        """Batches from the one holding ``offset`` (or the first after it) to the end."""
        it = self.batches(self._start_for(offset))
        for batch in it:
            if batch.last_offset >= offset:
                yield batch
                yield from it
                return

    def find_offset(self, offset: int) -> Any | None:
        """The batch holding ``offset``, or the first batch after it (a gap, as compaction
        leaves), or None when the segment ends before it (the broker's lookup)."""
        return next(iter(self.batches_from(offset)), None)

    def find_timestamp(self, timestamp: int) -> TimestampOffset | None:
        """The first record with a timestamp >= ``timestamp``, or None: the broker's
        ListOffsets-by-time lookup within a segment (time index, then offset index, then
        a scan of the batches whose max timestamp reaches the target)."""
        start_offset = self.base_offset
        if self.time_index is not None and len(self.time_index):
            entry = self.time_index.lookup(timestamp)
            if entry.timestamp >= 0 and self._time_entry_ok(entry):
                start_offset = max(entry.offset, self.base_offset)
        for batch in self.batches(self._start_for(start_offset)):
            if batch.max_timestamp < timestamp:
                continue
            for record in batch:
                if record.timestamp >= timestamp:
                    return TimestampOffset(record.timestamp, record.offset, batch.position)
        return None

    def _time_entry_ok(self, entry: TimeIndexEntry) -> bool:
        """A time index entry is used only if the log agrees with it."""
        try:
            batch = self.find_offset(entry.offset)
        except KcodecError:
            return False
        return (batch is not None and batch.base_offset <= entry.offset
                and batch.max_timestamp == entry.timestamp)

    # -- recovery and indexes -------------------------------------------------------------

    def tracker(self) -> RecoveryTracker:
        """A fresh recovery accumulator over this segment (see ``recover``)."""
        return RecoveryTracker(self)

    def recover(self, *, deep: bool = False) -> RecoveryResult:
        """Check the segment as the broker does after a crash, without changing the file.

        From position 0: every batch must be whole, well-formed, pass its CRC and have
        offsets that fit this segment. The first one that does not (or a torn or
        zero-filled tail) ends the valid part. ``deep=True`` also decodes every record
        (decompressing), which the broker does not do.
        """
        buf = self.buffer
        track = RecoveryTracker(self)
        self._scan(buf, track)
        if deep and track.valid_bytes:
            # decode the records of the valid part; a bad one ends it at its batch
            it = _iter_batches(buf[: track.valid_bytes], 0)
            try:
                for batch in it:
                    try:
                        for _ in batch:
                            pass
                    except KcodecError as exc:
                        track = RecoveryTracker(self)
                        self._scan(buf[: batch.position], track)
                        track.fail(exc, "bad record")
                        break
            except KcodecError as exc:   # not expected: these batches were read once already
                track = RecoveryTracker(self)
                self._scan(buf[: it.consumed], track)
                track.fail(exc)
        return track.result()

    def _scan(self, buf: Any, track: RecoveryTracker) -> None:
        """The broker's recovery scan of ``buf`` into ``track`` (no record decoding)."""
        base, top = track.base, track.top
        valid, count, records, first, last, max_ts = 0, 0, 0, None, None, -1
        pos, done = 0, False
        # The fast path skips runs of valid v2 batches (compiled: in C, no objects); the
        # entry it stops at goes through the full reader, with the rules of
        # RecoveryTracker.check/accept inlined, and then the fast path goes on.
        try:
            while not done:
                pos, n, nrec, f, lo, ts = scan_valid_v2(buf, pos, base)
                if n:
                    valid = pos
                    count += n
                    records += nrec
                    if first is None:
                        first = f
                    last = lo
                    if ts > max_ts:
                        max_ts = ts
                done = True
                for batch in _iter_batches(buf, pos):
                    if not batch.validate_crc():
                        try:
                            batch.check_crc()
                        except ChecksumError as exc:
                            track.error = exc
                        track.reason = "checksum mismatch"
                        break
                    bo, lo = batch.base_offset, batch.last_offset
                    if not base <= bo <= lo <= top:
                        track.check(batch, None)      # records the reason and the error
                        break
                    valid = batch.position + batch.size
                    count += 1
                    records += record_count(batch)
                    if first is None:
                        first = bo
                    last = lo
                    ts = batch.max_timestamp
                    if ts > max_ts:
                        max_ts = ts
                    pos, done = valid, False      # back to the fast path after this entry
                    break
        except KcodecError as exc:
            track.fail(exc)
        track.valid_bytes, track.batches, track.records = valid, count, records
        track.first_offset, track.last_offset, track.max_timestamp = first, last, max_ts

    def build_indexes(self, interval_bytes: int = DEFAULT_INDEX_INTERVAL
                      ) -> tuple[OffsetIndex, TimeIndex]:
        """The indexes the broker would rebuild for this segment (its recovery rule: an
        entry whenever more than ``interval_bytes`` were appended since the last one).
        Stops at the first invalid batch. Write them with ``to_bytes()``."""
        offsets: list[IndexEntry] = []
        times: list[TimeIndexEntry] = []
        last_entry_pos = 0
        max_ts, offset_of_max = -1, -1
        track = RecoveryTracker(self)
        try:
            for batch in self.batches(0):
                if track.add(batch) is not None:
                    break
                if batch.max_timestamp > max_ts:
                    max_ts, offset_of_max = batch.max_timestamp, batch.last_offset
                if batch.position - last_entry_pos > interval_bytes:
                    offsets.append(IndexEntry(batch.last_offset, batch.position))
                    if max_ts >= 0 and (not times or max_ts > times[-1].timestamp):
                        times.append(TimeIndexEntry(max_ts, offset_of_max))
                    last_entry_pos = batch.position
        except KcodecError:
            pass
        return (OffsetIndex.from_entries(offsets, self.base_offset),
                TimeIndex.from_entries(times, self.base_offset))

    def verify_indexes(self) -> list[str]:
        """Problems of the indexes beside this log (empty when they agree with it): each
        offset index entry must point at a batch whose last offset is the entry's offset,
        each time index entry at a batch whose max timestamp is the entry's timestamp."""
        out: list[str] = list(self.index_errors)
        if self.offset_index is not None:
            out += [f"{self.offset_index.path}: {p}"
                    for p in self.offset_index.problems(self.size)]
            out += self._verify_offset_index(self.offset_index)
        if self.time_index is not None:
            out += [f"{self.time_index.path}: {p}" for p in self.time_index.problems()]
            out += self._verify_time_index(self.time_index)
        return out

    def _batch_at(self, position: int) -> Any | None:
        if not 0 <= position < self.size:
            return None
        try:
            return next(_iter_batches(self.buffer, position), None)
        except KcodecError:
            return None

    def _verify_offset_index(self, index: OffsetIndex) -> list[str]:
        out = []
        for i, e in enumerate(index):
            batch = self._batch_at(e.position)
            if batch is None:
                out.append(f"{index.path}: entry {i} {tuple(e)}: no batch at position "
                           f"{e.position}")
            elif batch.last_offset != e.offset:
                out.append(f"{index.path}: entry {i} {tuple(e)}: the batch there has last "
                           f"offset {batch.last_offset}")
            if len(out) >= 100:
                out.append("(more problems not listed)")
                break
        return out

    def _verify_time_index(self, index: TimeIndex) -> list[str]:
        out: list[str] = []
        entries = list(index)
        if any(b.offset < a.offset for a, b in zip(entries, entries[1:], strict=False)):
            return out  # out of order: problems() already says so; no merge possible
        # one pass: walk batches and entries (both in offset order) side by side
        batches = self.batches(0)
        batch = None
        for i, e in enumerate(entries):
            try:
                while batch is None or batch.last_offset < e.offset:
                    batch = next(batches)
            except (StopIteration, KcodecError):
                out.append(f"{index.path}: entry {i} {tuple(e)}: offset not in the log")
                break
            if batch.base_offset > e.offset:
                out.append(f"{index.path}: entry {i} {tuple(e)}: offset not in the log")
            elif batch.max_timestamp != e.timestamp:
                out.append(f"{index.path}: entry {i} {tuple(e)}: the batch holding that "
                           f"offset has max timestamp {batch.max_timestamp}")
            if len(out) >= 100:
                out.append("(more problems not listed)")
                break
        return out
