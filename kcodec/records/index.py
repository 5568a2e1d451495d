"""Kafka segment index files: the offset index (``.index``) and the time index (``.timeindex``).

Wire layout (big-endian, fixed-size entries, offsets relative to the segment's base offset,
which is the file name: ``00000000000000001234.index`` has base offset 1234):

    offset_index := { relative_offset:int32  position:int32 }        8 bytes per entry
    time_index   := { timestamp:int64        relative_offset:int32 } 12 bytes per entry

The broker adds an entry about every ``index.interval.bytes`` (4096) of log: the offset
index maps the LAST offset of a batch to the file position where that batch starts; the
time index maps the largest timestamp seen so far to its offset. Both are sorted, so a
lookup is a binary search for the floor entry followed by a short scan of the log.

The broker preallocates index files (``segment.index.bytes``, 10 MiB) and trims them on a
clean shutdown; after a crash they end in zeros. Trailing all-zero entries are therefore
not entries, and a partial last entry is ignored (both are reported in ``problems()``).
Lookups never trust an index blindly: ``LogSegment`` checks what it finds in the log.
"""

from __future__ import annotations

import os
import re
import struct
from collections.abc import Iterator
from typing import NamedTuple, Union

from kcodec.errors import EncodeError

__all__ = [
    "IndexEntry",
    "TimeIndexEntry",
    "OffsetIndex",
    "TimeIndex",
    "base_offset_from_name",
    "sibling_path",
]

PathLike = Union[str, "os.PathLike[str]"]

_OFFSET_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")
_INT32_MAX = (1 << 31) - 1
_NAME = re.compile(r"^(\d{1,20})(\..*)?$")


class IndexEntry(NamedTuple):
    """An offset index entry: ``offset`` (absolute) is in the batch starting at ``position``."""

    offset: int
    position: int


class TimeIndexEntry(NamedTuple):
    """A time index entry: records up to ``offset`` (absolute) have timestamps <= ``timestamp``."""

    timestamp: int
    offset: int


def base_offset_from_name(path: PathLike) -> int | None:
    """The base offset a Kafka segment file name encodes (``00000000000000000042.log`` -> 42).

    The digits before the first dot, as the broker reads them (it writes 20, zero-padded);
    suffixes such as ``.log.deleted`` or ``.index.swap`` are allowed. None if not such a name.
    """
    m = _NAME.match(os.path.basename(os.fspath(path)))
    if m is None:
        return None
    value = int(m.group(1))
    return value if value < (1 << 63) else None


def sibling_path(path: PathLike, suffix: str) -> str:
    """``path`` with its first suffix replaced: (``…/0042.log``, ``.index``) -> ``…/0042.index``."""
    path = os.fspath(path)
    head, name = os.path.split(path)
    stem = name.split(".", 1)[0]
    return os.path.join(head, stem + suffix)


def _read_file(path: PathLike) -> bytes:
    with open(path, "rb") as f:
        return f.read()


class _Index:
    """What both index kinds share: fixed-size entries over bytes, zero tail trimmed."""

    ENTRY_SIZE = 0
    KIND = ""

    def __init__(self, data: bytes | bytearray | memoryview, base_offset: int = 0,
                 path: str | None = None) -> None:
        self._data = bytes(data)
        self.base_offset = int(base_offset)
        self.path = path
        size = len(self._data)
        es = self.ENTRY_SIZE
        #: bytes of a partial entry at the end (not an entry; Kafka rounds the file down)
        self.partial_bytes = size % es
        whole = size - self.partial_bytes
        # Trailing zero entries are the broker's preallocation, not data. rstrip runs in C;
        # rounding up restores a real last entry whose final bytes happen to be zero.
        used = len(self._data[:whole].rstrip(b"\0"))
        used = -(-used // es) * es
        #: bytes of all-zero entries after the last real one
        self.zero_tail_bytes = whole - used
        self._count = used // es

    @classmethod
    def open(cls, path: PathLike, base_offset: int | None = None):  # type: ignore[no-untyped-def]
        """Read an index file; the base offset comes from its name unless given."""
        if base_offset is None:
            base_offset = base_offset_from_name(path)
            if base_offset is None:
                base_offset = 0
        return cls(_read_file(path), base_offset, os.fspath(path))

    @property
    def size(self) -> int:
        """Bytes in the file, zero tail included."""
        return len(self._data)

    def __len__(self) -> int:
        return self._count

    def __iter__(self) -> Iterator:  # type: ignore[type-arg]
        for i in range(self._count):
            yield self[i]

    def __getitem__(self, i: int):  # type: ignore[no-untyped-def]
        if i < 0:
            i += self._count
        if not 0 <= i < self._count:
            raise IndexError(f"{self.KIND} entry {i} out of range ({self._count} entries)")
        return self._entry(i)

    def _entry(self, i: int):  # type: ignore[no-untyped-def]
        raise NotImplementedError

    def _key(self, i: int) -> int:
        raise NotImplementedError

    def _floor(self, key: int) -> int:
        """Index of the last entry whose key is <= key, or -1 (entries assumed sorted)."""
        lo, hi = 0, self._count
        while lo < hi:
            mid = (lo + hi) // 2
            if self._key(mid) <= key:
                lo = mid + 1
            else:
                hi = mid
        return lo - 1

    def _tail_problems(self) -> list[str]:
        out = []
        if self.partial_bytes:
            out.append(f"{self.partial_bytes} bytes after the last whole entry "
                       f"(the file size {self.size} is not a multiple of {self.ENTRY_SIZE})")
        return out

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(path={self.path!r}, base_offset={self.base_offset}, "
                f"entries={self._count})")


class OffsetIndex(_Index):
    """A ``.index`` file: sorted (offset, position) entries; ``lookup`` finds the floor entry."""

    ENTRY_SIZE = 8
    KIND = "offset index"

    def _entry(self, i: int) -> IndexEntry:
        rel, pos = _OFFSET_ENTRY.unpack_from(self._data, i * 8)
        return IndexEntry(self.base_offset + rel, pos)

    def _key(self, i: int) -> int:
        return self.base_offset + _OFFSET_ENTRY.unpack_from(self._data, i * 8)[0]

    def lookup(self, offset: int) -> IndexEntry:
        """The last entry with an offset <= ``offset``; ``(base_offset, 0)`` if there is none.

        As in the broker, the batch holding ``offset`` starts at or after that position.
        """
        i = self._floor(offset)
        return self._entry(i) if i >= 0 else IndexEntry(self.base_offset, 0)

    def problems(self, log_size: int | None = None) -> list[str]:
        """What is wrong with this index (empty when sane): order, ranges, partial tail."""
        out = self._tail_problems()
        prev: IndexEntry | None = None
        for i, (rel, pos) in enumerate(_OFFSET_ENTRY.iter_unpack(self._data[: self._count * 8])):
            e = IndexEntry(self.base_offset + rel, pos)
            if rel < 0 or pos < 0:
                out.append(f"entry {i} {tuple(e)}: negative relative offset or position")
            elif log_size is not None and pos >= log_size:
                out.append(f"entry {i} {tuple(e)}: position beyond the log size {log_size}")
            if prev is not None and (e.offset <= prev.offset or e.position <= prev.position):
                out.append(f"entry {i} {tuple(e)} does not follow entry {i - 1} {tuple(prev)}")
            prev = e
            if len(out) >= 100:
                out.append("(more problems not listed)")
                break
        return out

    def to_bytes(self) -> bytes:
        """The entries as file bytes (without the zero tail or partial entry)."""
        return self._data[: self._count * 8]

    @classmethod
    def from_entries(cls, entries: list[IndexEntry] | list[tuple[int, int]],
                     base_offset: int = 0, path: str | None = None) -> OffsetIndex:
        """Build an index from absolute (offset, position) pairs (they must fit int32)."""
        out = bytearray()
        for offset, position in entries:
            rel = offset - base_offset
            if not (0 <= rel <= _INT32_MAX and 0 <= position <= _INT32_MAX):
                raise EncodeError(f"index entry ({offset}, {position}) out of range for base "
                                 f"offset {base_offset}")
            out += _OFFSET_ENTRY.pack(rel, position)
        return cls(out, base_offset, path)


class TimeIndex(_Index):
    """A ``.timeindex`` file: sorted (timestamp, offset) entries."""

    ENTRY_SIZE = 12
    KIND = "time index"

    def _entry(self, i: int) -> TimeIndexEntry:
        ts, rel = _TIME_ENTRY.unpack_from(self._data, i * 12)
        return TimeIndexEntry(ts, self.base_offset + rel)

    def _key(self, i: int) -> int:
        return int(_TIME_ENTRY.unpack_from(self._data, i * 12)[0])

    def lookup(self, timestamp: int) -> TimeIndexEntry:
        """The last entry with a timestamp <= ``timestamp``; ``(-1, base_offset)`` if none.

        Records with a timestamp >= ``timestamp`` are all at or after that entry's offset.
        """
        i = self._floor(timestamp)
        return self._entry(i) if i >= 0 else TimeIndexEntry(-1, self.base_offset)

    def problems(self, log_size: int | None = None) -> list[str]:
        """What is wrong with this index (empty when sane): order, ranges, partial tail."""
        out = self._tail_problems()
        prev: TimeIndexEntry | None = None
        for i, (ts, rel) in enumerate(_TIME_ENTRY.iter_unpack(self._data[: self._count * 12])):
            e = TimeIndexEntry(ts, self.base_offset + rel)
            if rel < 0:
                out.append(f"entry {i} {tuple(e)}: negative relative offset")
            if prev is not None and (e.timestamp < prev.timestamp or e.offset < prev.offset):
                out.append(f"entry {i} {tuple(e)} goes back from entry {i - 1} {tuple(prev)}")
            prev = e
            if len(out) >= 100:
                out.append("(more problems not listed)")
                break
        return out

    def to_bytes(self) -> bytes:
        """The entries as file bytes (without the zero tail or partial entry)."""
        return self._data[: self._count * 12]

    @classmethod
    def from_entries(cls, entries: list[TimeIndexEntry] | list[tuple[int, int]],
                     base_offset: int = 0, path: str | None = None) -> TimeIndex:
        """Build a time index from (timestamp, absolute offset) pairs."""
        out = bytearray()
        for timestamp, offset in entries:
            rel = offset - base_offset
            if not 0 <= rel <= _INT32_MAX:
                raise EncodeError(f"time index entry ({timestamp}, {offset}) out of range for "
                                 f"base offset {base_offset}")
            out += _TIME_ENTRY.pack(timestamp, rel)
        return cls(out, base_offset, path)
