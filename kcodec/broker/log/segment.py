"""One segment of a partition log: its bytes (in memory, or a ``.log`` file with its
``.index`` and ``.timeindex``) and an in-memory table of its batches.

Files, named by the segment's base offset (20 digits) as Kafka names them:

    00000000000000001234.log         batches back to back, as received (offsets assigned)
    00000000000000001234.index       { relative_offset:int32 position:int32 }*
    00000000000000001234.timeindex   { timestamp:int64 relative_offset:int32 }*
    00000000000000001234.txnindex    aborted transactions (see ``SegmentHook``)

The table holds, per batch, its last offset, file position and max timestamp (24 bytes a
batch), so a lookup is one binary search and a read one contiguous slice. The index files are
written as Kafka writes them (an entry when more than ``index.interval.bytes`` were appended
since the last one: the batch's last offset and position; the time index gets the largest
timestamp so far and its offset) so Kafka's tools and ``kcodec dump-log`` can use them; the
broker itself rebuilds them from the log on start-up and never trusts them.
"""

from __future__ import annotations

import dataclasses
import os
import struct
from array import array
from bisect import bisect_left
from typing import Any, Protocol

from kcodec.broker.log.files import SEGMENT_FILES
from kcodec.errors import CorruptDataError, KcodecError
from kcodec.records import iter_batches
from kcodec.records.segment import LogSegment, RecoveryResult

__all__ = ["Segment", "SegmentHook", "segment_name"]

_BINARY = getattr(os, "O_BINARY", 0)
_LOG_FLAGS = os.O_RDWR | _BINARY
_INDEX_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_APPEND | _BINARY
_INDEX_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")
INT32_MAX = (1 << 31) - 1


def _seek_write(fd: int, data: Any, position: int) -> int:
    os.lseek(fd, position, os.SEEK_SET)
    return os.write(fd, data)


def _seek_read(fd: int, n: int, position: int) -> bytes:
    os.lseek(fd, position, os.SEEK_SET)
    return os.read(fd, n)


# Windows has no positional I/O; there the partition log's lock serialises every access
_pwrite = getattr(os, "pwrite", _seek_write)
_pread = getattr(os, "pread", _seek_read)

# Windows cannot truncate a file that is still mapped (batches may keep the map alive)
_MMAP_ON_LOAD = os.name != "nt"


def segment_name(base_offset: int, suffix: str = ".log") -> str:
    """Kafka's file name for a segment: ``00000000000000001234.log``."""
    return f"{base_offset:020d}{suffix}"


class SegmentHook(Protocol):
    """Something that keeps a per-segment file of its own beside the log (the aborted
    transactions index, ``txnindex``, is the intended user). Every method is optional in
    spirit: the log calls them at the moments named."""

    def on_open(self, segment: Segment) -> None: ...        # created or loaded
    def on_truncate(self, segment: Segment, offset: int) -> None: ...  # offsets >= offset gone
    def on_delete(self, segment: Segment) -> None: ...      # the segment is being removed
    def on_flush(self, segment: Segment) -> None: ...
    def on_close(self, segment: Segment) -> None: ...


def _walk_headers(buf: Any, base: int, entries: list[tuple[int, int, int]],
                  epochs: list[tuple[int, int]]) -> int:
    """Walk the batch headers of ``buf`` (no CRC checks), filling ``entries`` (position,
    last offset, max timestamp) and ``epochs``; the bytes walked, or -1 if the batches do
    not follow each other (a gap, offsets not increasing, a malformed header)."""
    prev, end = base - 1, 0
    try:
        for batch in iter_batches(buf, validate_crc=False):
            v2 = batch.magic == 2
            first = batch.base_offset if v2 else batch.last_offset
            if first <= prev or batch.position != end:
                return -1
            prev, end = batch.last_offset, batch.position + batch.size
            entries.append((batch.position, prev, batch.max_timestamp))
            if v2:
                epoch = batch.partition_leader_epoch
                if epoch >= 0 and (not epochs or epoch > epochs[-1][0]):
                    epochs.append((epoch, first))
    except KcodecError:
        return -1
    return end


def _fsync_dir(directory: str) -> None:
    """Make a rename in ``directory`` durable (where the platform allows opening it)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


class _Use:
    """``with seg._use(suffix) as fd``: the file's descriptor from the process's bounded
    cache (opened if it is not open), pinned for the block."""

    __slots__ = ("owner", "path", "flags")

    def __init__(self, owner: Any, path: str, flags: int) -> None:
        self.owner, self.path, self.flags = owner, path, flags

    def __enter__(self) -> int:
        return SEGMENT_FILES.acquire(self.owner, self.path, self.flags)

    def __exit__(self, *exc: object) -> None:
        SEGMENT_FILES.release(self.owner, self.path)


class Segment:
    """A segment's bytes and batch table. Not thread-safe: the partition log locks.

    On disk its files are opened when used, through the bounded descriptor cache of
    :mod:`kcodec.broker.log.files` (Kafka keeps them open); ``sealed`` says the index files
    are complete (the segment is not the active one)."""

    def __init__(self, base_offset: int, directory: str | None, *, created_ms: int,
                 index_interval: int = 4096, _load: bool = False) -> None:
        self.base_offset = base_offset
        self.directory = directory
        self.created_ms = created_ms
        self.index_interval = index_interval
        self._lasts = array("q")
        self._pos = array("q")
        self._ts = array("q")
        self.size = 0
        self.max_timestamp = -1
        self.offset_of_max_timestamp = -1
        self._rolling_ts: int | None = None
        self._since_index = 0
        self._index = bytearray()
        self._tindex = bytearray()
        self._tindex_last_ts = -1
        self.unflushed = 0
        self.closed = False
        self.recovery: RecoveryResult | None = None
        #: False for a segment loaded below the recovery point without re-validation
        self.checked = True
        #: (leader epoch, first offset) where the partition leader epoch of the v2 batches
        #: went up, as found by ``load`` (the partition log keeps the live list)
        self.loaded_epochs: list[tuple[int, int]] = []
        self._buf: bytearray | None = None
        #: the index files are complete and no longer appended to (not the active segment)
        self.sealed = True
        if directory is None:
            self._buf = bytearray()
            self.path = None
            return
        self.path = os.path.join(directory, segment_name(base_offset))
        if not _load:
            os.close(os.open(self.path, _LOG_FLAGS | os.O_CREAT | os.O_TRUNC, 0o644))
            self._open_indexes(truncate=True)

    # -- files ----------------------------------------------------------------------------

    def file(self, suffix: str) -> str:
        """The path of this segment's file with ``suffix`` (``.index``, ``.txnindex``...)."""
        if self.directory is None:
            raise ValueError("a memory segment has no files")
        return os.path.join(self.directory, segment_name(self.base_offset, suffix))

    def _use(self, suffix: str = ".log") -> _Use:
        assert self.path is not None
        if suffix == ".log":
            return _Use(self, self.path, _LOG_FLAGS)
        return _Use(self, self.file(suffix), _INDEX_FLAGS)

    def _open_indexes(self, truncate: bool) -> None:
        """The index files become the active segment's (appended to); emptied first with
        ``truncate``."""
        if truncate:
            for suffix in (".index", ".timeindex"):
                with self._use(suffix) as fd:
                    os.ftruncate(fd, 0)
        self.sealed = False

    @classmethod
    def load(cls, path: str, *, created_ms: int, index_interval: int = 4096,
             recovery_point: int = 0) -> Segment:
        """Open an existing ``.log`` file: the broker's recovery (whole batches, good CRCs,
        offsets that fit the segment; the rest truncated), then the table and both indexes
        rebuilt from what is valid. ``segment.recovery`` says what was found.

        A segment that ends at or below ``recovery_point`` (everything before it was flushed
        when the checkpoint was written) is trusted as Kafka trusts it: its batch headers are
        walked to rebuild the table, without CRC checks (``segment.checked`` is False). A
        header walk that does not end cleanly at the end of the file, or a segment reaching
        past the point, gets the full recovery."""
        directory, name = os.path.split(path)
        base = int(name.split(".", 1)[0])
        seg = cls(base, directory, created_ms=created_ms, index_interval=index_interval,
                  _load=True)
        try:
            if recovery_point > base and seg._trusted_load(path, recovery_point):
                return seg
            seg._recover(path)
        except BaseException:
            seg.close()
            raise
        return seg

    def _trusted_load(self, path: str, recovery_point: int) -> bool:
        """The header walk of a segment below the recovery point; False (nothing changed)
        if it must be recovered instead."""
        size = os.path.getsize(path)
        entries: list[tuple[int, int, int]] = []
        epochs: list[tuple[int, int]] = []
        if size:
            ls = LogSegment(path, base_offset=self.base_offset, indexes=False, use_mmap=_MMAP_ON_LOAD)
            try:
                end = _walk_headers(ls.buffer, self.base_offset, entries, epochs)
            finally:
                ls.close()
            if end != size or entries[-1][1] + 1 > recovery_point:
                return False
        self.loaded_epochs = epochs
        self.checked = False
        for pos, last, ts in entries:
            self._add(pos, last, ts, 0)
        self.size = size
        self._rebuild_index()
        self._open_indexes(truncate=True)
        self._write_indexes(self._index, self._tindex)
        self.created_ms = int(os.stat(path).st_mtime * 1000)
        return True

    def _recover(self, path: str) -> None:
        seg, base = self, self.base_offset
        entries: list[tuple[int, int, int]] = []
        size = os.path.getsize(path)
        if size:
            ls = LogSegment(path, base_offset=base, indexes=False, use_mmap=_MMAP_ON_LOAD)
            try:
                rec = ls.recover()
                # the CRC of a v2 batch does not cover its base offset: offsets must also
                # increase from batch to batch, or the log ends there
                prev = base - 1
                valid = ls.buffer[: rec.valid_bytes]
                for batch in iter_batches(valid, validate_crc=False):
                    v2 = batch.magic == 2
                    first = batch.base_offset if v2 else batch.last_offset
                    if first <= prev:
                        rec = dataclasses.replace(
                            rec, valid_bytes=batch.position, reason="offsets not increasing",
                            error=CorruptDataError(
                                f"batch offset {first} does not follow {prev}",
                                batch.position))
                        break
                    prev = batch.last_offset
                    entries.append((batch.position, prev, batch.max_timestamp))
                    if v2:
                        epoch = batch.partition_leader_epoch
                        if epoch >= 0 and (not seg.loaded_epochs
                                           or epoch > seg.loaded_epochs[-1][0]):
                            seg.loaded_epochs.append((epoch, first))
                del valid
            finally:
                ls.close()
            seg.recovery = rec
            if rec.valid_bytes < size:
                with seg._use() as fd:
                    os.ftruncate(fd, rec.valid_bytes)
                    os.fsync(fd)
                size = rec.valid_bytes
        for pos, last, ts in entries:
            seg._add(pos, last, ts, 0)
        seg.size = size
        seg._rebuild_index()
        seg._open_indexes(truncate=True)
        seg._write_indexes(seg._index, seg._tindex)
        st = os.stat(path)
        seg.created_ms = int(st.st_mtime * 1000)

    # -- the table ------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._lasts)

    @property
    def next_offset(self) -> int:
        """One past the last offset held (the base offset when empty)."""
        return self._lasts[-1] + 1 if self._lasts else self.base_offset

    def time_waited_for_roll(self, now_ms: int, max_timestamp: int) -> int:
        """What ``segment.ms`` is compared with, as Kafka computes it: the appended
        messages' max timestamp minus the first batch's, or, when the segment has no
        timestamp, the time since the segment was created."""
        first = self._rolling_ts
        if first is not None and first >= 0:
            return max_timestamp - first
        return now_ms - self.created_ms

    @property
    def largest_timestamp(self) -> int:
        """What ``retention.ms`` counts from: the largest timestamp, else creation time."""
        return self.max_timestamp if self.max_timestamp >= 0 else self.created_ms

    def _add(self, pos: int, last: int, ts: int, size: int) -> None:
        """Record a batch at ``pos`` in the table (and the index entries it earns)."""
        if not self._lasts:
            self._rolling_ts = ts
        if ts > self.max_timestamp:
            self.max_timestamp, self.offset_of_max_timestamp = ts, last
        if self._since_index > self.index_interval:
            self._index += _INDEX_ENTRY.pack(last - self.base_offset, pos)
            self._time_entry()
            self._since_index = 0
        self._since_index += size
        self._lasts.append(last)
        self._pos.append(pos)
        self._ts.append(ts)

    def _time_entry(self) -> None:
        ts = self.max_timestamp
        if ts > self._tindex_last_ts:
            self._tindex += _TIME_ENTRY.pack(ts, self.offset_of_max_timestamp - self.base_offset)
            self._tindex_last_ts = ts

    def _rebuild_index(self) -> None:
        """The table's index entries again from scratch (after a load or truncation)."""
        lasts, pos, ts = self._lasts, self._pos, self._ts
        self._lasts, self._pos, self._ts = array("q"), array("q"), array("q")
        self._index, self._tindex = bytearray(), bytearray()
        self._tindex_last_ts = self.max_timestamp = self.offset_of_max_timestamp = -1
        self._since_index = 0
        self._rolling_ts = None
        n = len(lasts)
        for i in range(n):
            end = pos[i + 1] if i + 1 < n else self.size
            self._add(pos[i], lasts[i], ts[i], end - pos[i])

    def _write_indexes(self, index: bytes | bytearray, tindex: bytes | bytearray) -> None:
        if self.sealed or self.path is None:
            return
        for suffix, data in ((".index", index), (".timeindex", tindex)):
            if data:
                with self._use(suffix) as fd:
                    os.write(fd, data)

    def append(self, data: bytes | bytearray, entries: list[tuple[int, int, int]]) -> None:
        """Append validated bytes; ``entries`` are (position in ``data``, last offset, max
        timestamp) per batch."""
        start = self.size
        if self._buf is not None:
            self._buf += data
        else:
            with self._use() as fd:
                n = _pwrite(fd, data, start)
                if n != len(data):
                    view = memoryview(data)
                    while n < len(data):
                        n += _pwrite(fd, view[n:], start + n)
        ni, nt = len(self._index), len(self._tindex)
        count = len(entries)
        for k, (rel, last, ts) in enumerate(entries):
            end = entries[k + 1][0] if k + 1 < count else len(data)
            self._add(start + rel, last, ts, end - rel)
        self.size = start + len(data)
        self.unflushed += count
        if self._buf is None and (len(self._index) != ni or len(self._tindex) != nt):
            self._write_indexes(self._index[ni:], self._tindex[nt:])

    def seal(self) -> None:
        """The segment stops being the active one: a last time index entry, as Kafka adds;
        its index files are synced and closed."""
        nt = len(self._tindex)
        self._time_entry()
        if self.sealed or self.path is None:
            return
        if len(self._tindex) != nt:
            self._write_indexes(b"", self._tindex[nt:])
        for suffix in (".index", ".timeindex"):
            with self._use(suffix) as fd:
                os.fsync(fd)
            SEGMENT_FILES.forget(self, self.file(suffix))
        self.sealed = True

    def activate(self) -> None:
        """The segment becomes the active one again (after a truncation): its index files
        are rewritten from the table and kept open for appends."""
        if self.directory is None or self.closed:
            return
        if self.sealed:
            self._open_indexes(truncate=True)
            self._write_indexes(self._index, self._tindex)

    def find(self, offset: int) -> int:
        """Index of the batch holding ``offset`` or the first one after it (== len if none)."""
        return bisect_left(self._lasts, offset)

    def last_offset_of(self, i: int) -> int:
        return self._lasts[i]

    def position_of(self, i: int) -> int:
        return self._pos[i] if i < len(self._pos) else self.size

    def timestamp_of(self, i: int) -> int:
        return self._ts[i]

    def read_span(self, start: int, end: int) -> bytes:
        """The bytes between two positions (batch boundaries)."""
        if end <= start:
            return b""
        if self._buf is not None:
            with memoryview(self._buf) as view:
                return view[start:end].tobytes()
        with self._use() as fd:
            out = _pread(fd, end - start, start)
            while len(out) < end - start:   # a short read: keep going
                more = _pread(fd, end - start - len(out), start + len(out))
                if not more:
                    raise OSError(f"{self.path}: unexpected end of file at {start + len(out)}")
                out += more
        return out

    def replace(self, data: bytes) -> None:
        """Swap in new contents with the same base offset (the cleaner's output: the same
        offsets, fewer records). On disk: written to ``<name>.cleaned``, fsynced, renamed
        over the segment; the table and both indexes rebuilt."""
        entries: list[tuple[int, int, int]] = []
        epochs: list[tuple[int, int]] = []
        if data and _walk_headers(data, self.base_offset, entries, epochs) != len(data):
            raise ValueError(f"segment {self.base_offset}: the new contents do not walk cleanly")
        sealed = self.sealed
        if self._buf is not None:
            self._buf = bytearray(data)
        else:
            assert self.path is not None and self.directory is not None
            tmp = self.path + ".cleaned"
            fd = os.open(tmp, _LOG_FLAGS | os.O_CREAT | os.O_TRUNC, 0o644)
            try:
                view, n = memoryview(data), 0
                while n < len(data):
                    n += _pwrite(fd, view[n:], n)
                os.fsync(fd)
                os.replace(tmp, self.path)
            except BaseException:
                if os.path.exists(tmp):
                    os.unlink(tmp)
                raise
            finally:
                os.close(fd)
            SEGMENT_FILES.forget(self, self.path)     # the old file's descriptor
            _fsync_dir(self.directory)
        self._lasts, self._pos, self._ts = array("q"), array("q"), array("q")
        for pos, last, ts in entries:
            self._add(pos, last, ts, 0)
        self.size = len(data)
        self._rebuild_index()
        if self.directory is not None:
            self._open_indexes(truncate=True)
            self._write_indexes(self._index, self._tindex)
            if sealed:
                self.sealed = False
                self.seal()

    def truncate_batches(self, i: int) -> None:
        """Drop batch ``i`` and everything after it."""
        if i >= len(self._lasts):
            return
        new_size = self._pos[i]
        del self._lasts[i:], self._pos[i:], self._ts[i:]
        self.size = new_size
        if self._buf is not None:
            del self._buf[new_size:]
        else:
            with self._use() as fd:
                os.ftruncate(fd, new_size)
        self._rebuild_index()
        if self._buf is not None:
            return
        if not self.sealed:
            self._open_indexes(truncate=True)
            self._write_indexes(self._index, self._tindex)
        else:
            self.activate()

    # -- life cycle -----------------------------------------------------------------------

    def flush(self) -> None:
        """fsync the log and its indexes (nothing to do in memory). A descriptor the cache
        closed since the writes is opened again: fsync covers the file, not the
        descriptor that wrote."""
        if self.path is not None and not self.closed:
            for suffix in (".log",) if self.sealed else (".log", ".index", ".timeindex"):
                with self._use(suffix) as fd:
                    os.fsync(fd)
        self.unflushed = 0

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        self.sealed = True
        if self.path is not None:
            for suffix in (".log", ".index", ".timeindex"):
                SEGMENT_FILES.forget(self, self.file(suffix))

    def delete(self) -> None:
        """Close and remove the segment's files (every suffix of its base offset)."""
        self.close()
        self._buf = bytearray()
        if self.directory is None:
            return
        for suffix in (".log", ".index", ".timeindex", ".txnindex"):
            try:
                os.unlink(self.file(suffix))
            except FileNotFoundError:
                pass

    def __repr__(self) -> str:
        where = self.path or "memory"
        return (f"Segment({where}, base_offset={self.base_offset}, batches={len(self)}, "
                f"size={self.size})")

