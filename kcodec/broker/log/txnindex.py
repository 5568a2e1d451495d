"""The aborted-transactions index of one partition: a ``.txnindex`` file per segment.

Layout of ``00000000000000001234.txnindex`` (Kafka's, entries appended in marker order)::

    entry := version:int16 (0) producer_id:int64 first_offset:int64 last_offset:int64
             last_stable_offset:int64                              -- 34 bytes, big-endian

An entry is one aborted transaction: the producer, the offset of its first record in the
partition and the offset of its ABORT marker (``last_offset``). It lives in the segment
that holds the marker. ``TxnIndex`` is a :class:`~kcodec.broker.log.segment.SegmentHook`:
the log tells it when segments are opened (the file is read back, a torn last entry
dropped), truncated, deleted (retention, DeleteRecords) and flushed, so the index always
matches the log, also after a restart. Memory logs keep the entries in memory only.
"""

from __future__ import annotations

import os
import struct
import threading
from typing import Any

__all__ = ["TxnIndex", "AbortedTxn"]

_ENTRY = struct.Struct(">hqqqq")
AbortedTxn = tuple[int, int, int, int]    # (producer id, first offset, last offset, lso)


class TxnIndex:
    """Per-segment lists of aborted transactions (see the module doc)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: dict[int, list[AbortedTxn]] = {}   # segment base -> entries
        self._segments: dict[int, Any] = {}

    # -- SegmentHook ----------------------------------------------------------------------
    def on_open(self, segment: Any) -> None:
        entries: list[AbortedTxn] = []
        if segment.directory is not None:
            try:
                with open(segment.file(".txnindex"), "rb") as f:
                    data = f.read()
            except FileNotFoundError:
                data = b""
            for pos in range(0, len(data) - _ENTRY.size + 1, _ENTRY.size):
                version, pid, first, last, lso = _ENTRY.unpack_from(data, pos)
                if version != 0:
                    break
                entries.append((pid, first, last, lso))
        with self._lock:
            self._entries[segment.base_offset] = entries
            self._segments[segment.base_offset] = segment

    def on_truncate(self, segment: Any, offset: int) -> None:
        with self._lock:
            kept = [e for e in self._entries.get(segment.base_offset, []) if e[2] < offset]
            self._entries[segment.base_offset] = kept
        self._rewrite(segment, kept)

    def on_delete(self, segment: Any) -> None:
        with self._lock:
            self._entries.pop(segment.base_offset, None)
            self._segments.pop(segment.base_offset, None)
        if segment.directory is not None:
            try:
                os.unlink(segment.file(".txnindex"))
            except FileNotFoundError:
                pass

    def on_flush(self, segment: Any) -> None:
        pass   # entries are written as they come; the log's own flush covers the markers

    def on_close(self, segment: Any) -> None:
        pass

    # -- use ------------------------------------------------------------------------------
    def append(self, segment: Any, producer_id: int, first: int, last: int, lso: int) -> None:
        """Record an aborted transaction whose ABORT marker ``last`` is in ``segment``."""
        entry = (producer_id, first, last, lso)
        with self._lock:
            self._entries.setdefault(segment.base_offset, []).append(entry)
            self._segments[segment.base_offset] = segment
        if segment.directory is not None:
            with open(segment.file(".txnindex"), "ab") as f:
                f.write(_ENTRY.pack(0, *entry))

    def aborted_between(self, start: int, end: int) -> list[tuple[int, int]]:
        """``(producer id, first offset)`` of aborted transactions with records in
        [start, end), in marker order."""
        with self._lock:
            out = []
            for base in sorted(self._entries):
                for pid, first, last, _ in self._entries[base]:
                    if last >= start and first < end:
                        out.append((pid, first))
            return out

    def __len__(self) -> int:
        with self._lock:
            return sum(len(v) for v in self._entries.values())

    def _rewrite(self, segment: Any, entries: list[AbortedTxn]) -> None:
        if segment.directory is None:
            return
        path = segment.file(".txnindex")
        if not entries:
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass
            return
        with open(path, "wb") as f:
            f.write(b"".join(_ENTRY.pack(0, *e) for e in entries))
