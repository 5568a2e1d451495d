"""A partition's log: segments in offset order, the active one last.

    log_start_offset <= high_watermark <= log_end_offset
    [ segment 0 | segment 1 | ... | active segment ]      appends go to the active one

Appends are validated and get offsets in place (``validate``); a new segment is rolled when
the active one would pass ``segment.bytes``, spans more than ``segment.ms`` (Kafka's rule:
the new batch's max timestamp minus the segment's first batch timestamp; the time since the
segment was created when it has no timestamps) or its relative offsets would pass an int32. Retention deletes
whole segments from the front: older than ``retention.ms`` (their largest timestamp), beyond
``retention.bytes``, or wholly below the log start offset (DeleteRecords); never past the
high watermark. Every method takes the log's lock, so request handler threads may share it.
"""

from __future__ import annotations

import os
import threading
import time
from bisect import bisect_right
from collections.abc import Callable
from typing import Any

from kcodec.broker.log.cleaner import CleanStats, clean_segments
from kcodec.broker.log.config import LONG_MAX, LogConfig
from kcodec.broker.log.epochs import LeaderEpochCache
from kcodec.broker.log.errors import KafkaStorageError, OffsetOutOfRange, RecordListTooLarge
from kcodec.broker.log.recovery import Truncation
from kcodec.broker.log.segment import INT32_MAX, Segment, SegmentHook
from kcodec.broker.log.validate import AppendResult, Validated, check_replicated, validate
from kcodec.errors import KcodecError
from kcodec.records import iter_batches

__all__ = ["PartitionLog"]


def _now_ms() -> int:
    return int(time.time() * 1000)


class PartitionLog:
    """The log of one topic partition (on disk under ``directory``, or in memory if None).

    Made by ``LogManager.create``/``get``; see the broker guide's Log section (docs/guide/broker.md).
    """

    def __init__(self, topic: str, partition: int, config: LogConfig,
                 directory: str | None = None, *, log_start_offset: int = 0,
                 on_start_offset: Callable[[PartitionLog], None] | None = None,
                 hooks: list[SegmentHook] | None = None, _load: bool = False,
                 recovery_point: int = 0,
                 on_truncated: Callable[[PartitionLog], None] | None = None) -> None:
        self.topic = topic
        self.partition = partition
        self.config = config
        self.directory = directory
        self.closed = False
        #: when True (the default), every append moves the high watermark to the log end
        self.auto_high_watermark = True
        #: per-segment file hooks (the aborted-transactions index, ``txnindex``)
        self.hooks: list[SegmentHook] = list(hooks or ())
        self._lock = threading.RLock()
        self._on_start_offset = on_start_offset
        self._on_truncated = on_truncated
        #: every offset below it is on disk (flushed): the recovery-point checkpoint's value
        self.recovery_point = recovery_point
        self._clean_state: Any = None          # what the last cleaner pass saw
        self._tombstones_waiting = False
        self._last_flush_ms = _now_ms()
        self.segments: list[Segment] = []
        self._bases: list[int] = []
        #: what loading cut off (a damaged or torn segment), None if nothing
        self.truncation: Truncation | None = None
        self._epochs = LeaderEpochCache()
        if directory is not None:
            os.makedirs(directory, exist_ok=True)
        if _load and directory is not None:
            self._load_segments()
        if not self.segments:
            self._new_segment(log_start_offset)
        self._log_start = max(log_start_offset, self.segments[0].base_offset)
        if self._log_start > self.log_end_offset:
            # a checkpoint ahead of what survived on disk: start an empty log there
            self._truncate_fully(self._log_start)
        self._epochs.truncate_from_start(self._log_start)
        self._hw = self.log_end_offset
        self.recovery_point = self.log_end_offset   # loaded: trusted or checked up to here

    # -- loading and segments -------------------------------------------------------------

    def _load_segments(self) -> None:
        assert self.directory is not None
        names = sorted(n for n in os.listdir(self.directory)
                       if n.endswith(".log") and n[:-4].isdigit())
        now = _now_ms()
        segs = []
        for name in names:
            path = os.path.join(self.directory, name)
            segs.append(Segment.load(path, created_ms=now,
                                     index_interval=self.config.index_interval_bytes,
                                     recovery_point=self.recovery_point))
        # a segment whose recovery cut it short ends the log: later segments are dropped
        # (their offsets would not follow); so is one that overlaps its predecessor, and an
        # empty segment that is not the last
        keep: list[Segment] = []
        cut: Segment | None = None
        dropped: list[tuple[int, int]] = []          # (bytes, last offset) of each deleted
        for seg in segs:
            if cut is not None or (keep and seg.base_offset < keep[-1].next_offset):
                if cut is not None:
                    dropped.append((seg.size, seg.next_offset - 1))
                seg.delete()
                continue
            if keep and not len(keep[-1]):
                keep.pop().delete()
            keep.append(seg)
            if seg.recovery is not None and not seg.recovery.ok:
                cut = seg
        if cut is not None and cut.recovery is not None:
            rec = cut.recovery
            lost = max((last for _, last in dropped), default=None)
            self.truncation = Truncation(
                self.topic, self.partition, os.path.basename(rec.path or f"{cut.base_offset}.log"),
                cut.next_offset, rec.size - rec.valid_bytes, len(dropped),
                sum(size for size, _ in dropped), lost, self.recovery_point,
                rec.reason or "damaged data")
        # orphaned index files of segments that no longer exist
        bases = {s.base_offset for s in keep}
        for n in os.listdir(self.directory):
            if n.endswith(".cleaned"):          # a cleaner pass cut short: the old one stays
                os.unlink(os.path.join(self.directory, n))
                continue
            stem, _, suffix = n.partition(".")
            if stem.isdigit() and suffix in ("index", "timeindex", "txnindex") \
                    and int(stem) not in bases:
                os.unlink(os.path.join(self.directory, n))
        for seg in keep:
            for epoch, start in seg.loaded_epochs:
                self._epochs.assign(epoch, start)
        for seg in keep[:-1]:
            seg.seal()          # the final time index entry of an inactive segment
        self.segments = keep
        self._bases = [s.base_offset for s in keep]
        for seg in keep:
            self._hook("on_open", seg)

    def _new_segment(self, base: int) -> Segment:
        seg = Segment(base, self.directory, created_ms=_now_ms(),
                      index_interval=self.config.index_interval_bytes)
        self.segments.append(seg)
        self._bases.append(base)
        self._hook("on_open", seg)
        return seg

    def _hook(self, name: str, seg: Segment, *args: Any) -> None:
        for h in self.hooks:
            fn = getattr(h, name, None)
            if fn is not None:
                fn(seg, *args)

    def _roll(self) -> Segment:
        active = self.segments[-1]
        active.seal()
        if self.directory is not None:
            active.flush()       # Kafka flushes a segment when it stops being active
        return self._new_segment(active.next_offset)

    def _maybe_roll(self, size: int, last_offset: int, now_ms: int, max_timestamp: int
                    ) -> Segment:
        active = self.segments[-1]
        if not len(active):
            return active
        cfg = self.config
        if (active.size + size > cfg.segment_bytes
                or active.time_waited_for_roll(now_ms, max_timestamp) > cfg.segment_ms
                or last_offset - active.base_offset > INT32_MAX):
            return self._roll()
        return active

    # -- offsets --------------------------------------------------------------------------

    @property
    def log_start_offset(self) -> int:
        return self._log_start

    @property
    def log_end_offset(self) -> int:
        """The next offset to be assigned."""
        return self.segments[-1].next_offset

    @property
    def high_watermark(self) -> int:
        return self._hw

    @high_watermark.setter
    def high_watermark(self, value: int) -> None:
        with self._lock:
            self._hw = min(max(int(value), self._log_start), self.log_end_offset)

    @property
    def size_bytes(self) -> int:
        return sum(s.size for s in self.segments)

    # -- append ---------------------------------------------------------------------------

    def append(self, records: Any, *, now_ms: int, leader_epoch: int | None = None
               ) -> AppendResult:
        """Validate ``records`` (one produced set), assign offsets and store it."""
        with self._lock:
            self._check_open()
            v = validate(records, self.log_end_offset, now_ms, self.config, leader_epoch)
            return self._store(v, now_ms)

    def append_as_follower(self, records: Any, *, now_ms: int | None = None) -> AppendResult:
        """Store batches that already carry their offsets (a replica copying its leader):
        whole batches with good CRCs whose offsets start at or after the log end and
        increase; stored byte for byte (no offsets or timestamps rewritten)."""
        with self._lock:
            self._check_open()
            v = check_replicated(records, self.log_end_offset, self.config)
            return self._store(v, _now_ms() if now_ms is None else now_ms)

    def _store(self, v: Validated, now_ms: int) -> AppendResult:
        size = len(v.data)
        if size > self.config.segment_bytes:
            raise RecordListTooLarge(f"{size} bytes are more than segment.bytes "
                                     f"({self.config.segment_bytes})")
        try:
            seg = self._maybe_roll(size, v.result.last_offset, now_ms, v.result.max_timestamp)
            if v.result.base_offset > seg.next_offset and len(seg):
                # a replicated gap: a new segment starts at the first offset received
                seg.seal()
                seg = self._new_segment(v.result.base_offset)
            elif v.result.base_offset > seg.next_offset:
                self._replace_empty_active(v.result.base_offset)
                seg = self.segments[-1]
            seg.append(v.data, v.entries)
        except OSError as exc:
            raise KafkaStorageError(f"{self.topic}-{self.partition}: {exc}") from exc
        self._epochs.note_batch(v.data, v.result.base_offset)
        if self.auto_high_watermark:
            self._hw = self.log_end_offset
        if self.directory is not None:
            cfg = self.config
            if (seg.unflushed >= cfg.flush_messages
                    or (cfg.flush_ms != LONG_MAX
                        and now_ms - self._last_flush_ms >= cfg.flush_ms)):
                self._flush(now_ms)
        return v.result

    def _replace_empty_active(self, base: int) -> None:
        old = self.segments.pop()
        self._bases.pop()
        self._hook("on_delete", old)
        old.delete()
        self._new_segment(base)
        if len(self.segments) == 1:
            self._set_log_start(max(self._log_start, base))

    # -- read -----------------------------------------------------------------------------

    def _segment_index(self, offset: int) -> int:
        return max(bisect_right(self._bases, offset) - 1, 0)

    def read(self, offset: int, max_bytes: int, *, upper_bound: int | None = None,
             min_one: bool = True) -> bytes:
        """Whole batches from the one holding ``offset``: at most ``max_bytes`` (but at
        least one batch when ``min_one``), only batches wholly below ``upper_bound``
        (default: the log end). Empty at the end. Raises OffsetOutOfRange outside
        [log_start_offset, log_end_offset]."""
        with self._lock:
            self._check_open()
            if offset < self._log_start or offset > self.log_end_offset:
                raise OffsetOutOfRange(
                    f"offset {offset} outside {self.topic}-{self.partition}'s range "
                    f"[{self._log_start}, {self.log_end_offset}]")
            limit = self.log_end_offset if upper_bound is None else upper_bound
            if offset >= limit:
                return b""
            for si in range(self._segment_index(offset), len(self.segments)):
                seg = self.segments[si]
                i = seg.find(offset)
                n = len(seg)
                if i >= n:
                    continue
                start = seg.position_of(i)
                j = i
                while j < n and seg.last_offset_of(j) < limit:
                    end = seg.position_of(j + 1)
                    if end - start > max_bytes and not (j == i and min_one):
                        break
                    j += 1
                try:
                    return seg.read_span(start, seg.position_of(j))
                except OSError as exc:
                    raise KafkaStorageError(f"{self.topic}-{self.partition}: {exc}") from exc
            return b""

    # -- timestamps -----------------------------------------------------------------------

    def _records_of_batch(self, seg: Segment, i: int) -> Any:
        data = seg.read_span(seg.position_of(i), seg.position_of(i + 1))
        batch = next(iter_batches(data, validate_crc=False))
        return batch

    def offset_for_timestamp(self, ts_ms: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record with a timestamp >= ``ts_ms`` at or
        after the log start offset; None if there is none (ListOffsets by time)."""
        with self._lock:
            self._check_open()
            start = self._log_start
            for seg in self.segments:
                if seg.max_timestamp < ts_ms or seg.next_offset <= start:
                    continue
                for i in range(seg.find(start), len(seg)):
                    if seg.timestamp_of(i) < ts_ms:
                        continue
                    try:
                        for r in self._records_of_batch(seg, i):
                            if r.offset >= start and r.timestamp >= ts_ms:
                                return (r.offset, r.timestamp)
                    except KcodecError:
                        continue
            return None

    def max_timestamp_offset(self) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record holding the largest timestamp (ListOffsets
        MAX_TIMESTAMP); None for an empty log."""
        with self._lock:
            self._check_open()
            best: Segment | None = None
            for seg in self.segments:
                if len(seg) and seg.next_offset > self._log_start and (
                        best is None or seg.max_timestamp > best.max_timestamp):
                    best = seg
            if best is None:
                return None
            top = best.max_timestamp
            start = self._log_start
            for i in range(best.find(start), len(best)):
                if best.timestamp_of(i) != top:
                    continue
                try:
                    for r in self._records_of_batch(best, i):
                        if r.offset >= start and r.timestamp == top:
                            return (r.offset, top)
                except KcodecError:
                    pass
                return (best.last_offset_of(i), top)
            return None

    # -- leader epochs ----------------------------------------------------------------------

    def leader_epochs(self) -> list[tuple[int, int]]:
        """The leader epoch cache: (epoch, start offset) for every epoch that wrote batches
        (from the v2 batches' partition leader epoch), oldest first."""
        with self._lock:
            return list(self._epochs.entries)

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """OffsetForLeaderEpoch: (the largest epoch <= ``epoch`` known, the offset where the
        epoch after it starts, or the log end for the latest epoch); (-1, -1) when unknown."""
        with self._lock:
            return self._epochs.end_offset_for(epoch, self.log_end_offset)

    # -- truncation, deletion, retention --------------------------------------------------

    def delete_records_before(self, offset: int) -> int:
        """Move the log start offset up to ``offset`` (-1: the high watermark), deleting
        segments wholly below it; returns the new log start offset (DeleteRecords)."""
        with self._lock:
            self._check_open()
            if offset == -1:
                offset = self._hw
            if offset < 0 or offset > self._hw:
                raise OffsetOutOfRange(
                    f"cannot move {self.topic}-{self.partition}'s log start offset to "
                    f"{offset}: outside [0, high watermark {self._hw}]")
            if offset > self._log_start:
                self._set_log_start(offset)
                self._delete_segments(self._below_start())
            return self._log_start

    def _set_log_start(self, offset: int) -> None:
        self._log_start = offset
        self._epochs.truncate_from_start(offset)
        if self._on_start_offset is not None:
            self._on_start_offset(self)

    def _below_start(self) -> int:
        """How many leading segments lie wholly below the log start offset."""
        n = 0
        for k in range(len(self.segments) - 1):
            if self.segments[k + 1].base_offset <= self._log_start:
                n = k + 1
            else:
                break
        return n

    def _delete_segments(self, n: int) -> int:
        """Delete the first ``n`` segments (rolling first if the active one goes too)."""
        if n <= 0:
            return 0
        if n >= len(self.segments):
            n = len(self.segments)
            if not len(self.segments[-1]):
                n -= 1          # an empty active segment stays: it is the log's end
            else:
                self._roll()
        doomed = self.segments[:n]
        del self.segments[:n]
        del self._bases[:n]
        for seg in doomed:
            self._hook("on_delete", seg)
            seg.delete()
        first = self.segments[0].base_offset
        if first > self._log_start:
            self._set_log_start(first)
        return n

    def run_retention(self, now_ms: int) -> int:
        """Apply retention.ms, retention.bytes and the log start offset; returns the number
        of segments deleted. Only segments wholly below the high watermark go."""
        with self._lock:
            self._check_open()
            cfg = self.config
            segs = self.segments
            deleted = self._delete_segments(self._below_start())
            n = 0
            if cfg.delete and cfg.retention_ms >= 0:
                for seg in segs:
                    if (not len(seg) or seg.next_offset > self._hw
                            or now_ms - seg.largest_timestamp <= cfg.retention_ms):
                        break
                    n += 1
            if cfg.delete and cfg.retention_bytes >= 0:
                excess = self.size_bytes - cfg.retention_bytes
                m = 0
                for seg in segs[:-1]:
                    if excess - seg.size < 0 or seg.next_offset > self._hw:
                        break
                    excess -= seg.size
                    m += 1
                n = max(n, m)
            deleted += self._delete_segments(n)
            if cfg.compact:
                self._clean(now_ms)
            if (self.directory is not None and self.config.flush_ms != LONG_MAX
                    and now_ms - self._last_flush_ms >= self.config.flush_ms):
                self._flush(now_ms)
            return deleted

    def run_cleaner(self, now_ms: int) -> int:
        """A compaction pass if the topic is compacted and the log changed since the last
        one (or tombstones wait for delete.retention.ms); the records removed."""
        with self._lock:
            if self.closed or not self.config.compact:
                return 0
            return self._clean(now_ms).records

    def clean(self, now_ms: int | None = None) -> CleanStats:
        """One compaction pass now (see ``kcodec.broker.log.cleaner``), whatever the
        cleanup.policy; ``run_retention`` runs it on compacted topics when there is new
        data to clean or tombstones waiting."""
        with self._lock:
            self._check_open()
            return self._clean(_now_ms() if now_ms is None else now_ms, force=True)

    def _clean(self, now_ms: int, force: bool = False) -> CleanStats:
        state = (self.segments[-1].base_offset, self.high_watermark, self.config)
        if not force and state == self._clean_state and not self._tombstones_waiting:
            return CleanStats()
        try:
            stats = clean_segments(self, now_ms)
        except OSError as exc:
            raise KafkaStorageError(f"{self.topic}-{self.partition}: {exc}") from exc
        self._clean_state = state
        self._tombstones_waiting = stats.tombstones_kept > 0
        return stats

    def truncate_to(self, offset: int) -> None:
        """Remove every batch holding an offset >= ``offset`` (a batch is removed whole, so
        the log end becomes the base offset of the batch holding ``offset``)."""
        with self._lock:
            self._check_open()
            if offset >= self.log_end_offset:
                return
            if offset <= self._log_start:
                self._truncate_fully(offset if offset >= 0 else 0)
                return
            si = self._segment_index(offset)
            for seg in self.segments[si + 1:]:
                self._hook("on_delete", seg)
                seg.delete()
            del self.segments[si + 1:], self._bases[si + 1:]
            seg = self.segments[si]
            try:
                seg.truncate_batches(seg.find(offset))
                seg.activate()
            except OSError as exc:
                raise KafkaStorageError(f"{self.topic}-{self.partition}: {exc}") from exc
            self._hook("on_truncate", seg, seg.next_offset)
            end = self.log_end_offset
            self._epochs.truncate_from_end(end)
            self._hw = min(self._hw, end)
            self._lower_recovery_point(end)

    def _lower_recovery_point(self, end: int) -> None:
        # what is appended after a truncation is not flushed yet: the checkpoint must not
        # vouch for it (the manager rewrites the checkpoint at once)
        if self.recovery_point > end:
            self.recovery_point = end
            if self._on_truncated is not None:
                self._on_truncated(self)

    def _truncate_fully(self, offset: int) -> None:
        for seg in self.segments:
            self._hook("on_delete", seg)
            seg.delete()
        self.segments, self._bases = [], []
        self._epochs.clear()
        self._new_segment(offset)
        self._log_start = offset
        if self._on_start_offset is not None:
            self._on_start_offset(self)
        self._hw = offset
        lowered = self.recovery_point > offset
        self.recovery_point = offset          # nothing below it is left to vouch for
        if lowered and self._on_truncated is not None:
            self._on_truncated(self)

    # -- life cycle -----------------------------------------------------------------------

    def update_config(self, config: LogConfig) -> None:
        """New settings; they apply from the next append or retention run."""
        with self._lock:
            self.config = config
            for seg in self.segments:
                seg.index_interval = config.index_interval_bytes

    def _flush(self, now_ms: int | None = None) -> None:
        try:
            for seg in self.segments:
                if seg.unflushed or seg is self.segments[-1]:
                    seg.flush()
                    self._hook("on_flush", seg)
        except OSError as exc:
            raise KafkaStorageError(f"{self.topic}-{self.partition}: {exc}") from exc
        self._last_flush_ms = _now_ms() if now_ms is None else now_ms
        self.recovery_point = self.log_end_offset

    def flush(self) -> None:
        """fsync every segment written since the last flush (no-op in memory)."""
        with self._lock:
            if not self.closed and self.directory is not None:
                self._flush()

    def close(self) -> None:
        with self._lock:
            if self.closed:
                return
            if self.directory is not None:
                self.segments[-1].seal()     # as Kafka closes a segment
                self._flush()
            for seg in self.segments:
                self._hook("on_close", seg)
                seg.close()
            self.closed = True

    def delete(self) -> None:
        """Close and remove every segment (the directory itself is the manager's)."""
        with self._lock:
            for seg in self.segments:
                self._hook("on_delete", seg)
                seg.delete()
            self.segments, self._bases = [], []
            self.closed = True

    def _check_open(self) -> None:
        if self.closed:
            raise KafkaStorageError(f"the log of {self.topic}-{self.partition} is closed")

    def __repr__(self) -> str:
        return (f"PartitionLog({self.topic!r}, {self.partition}, start={self._log_start}, "
                f"hw={self._hw}, end={self.log_end_offset}, segments={len(self.segments)})")
