"""The leader epoch cache of a partition: where each partition leader epoch began.

    entries := (epoch, start_offset)*       epochs increasing, start offsets not decreasing

An entry is added when a v2 batch with a larger ``partition_leader_epoch`` than the last
entry's is stored (negative epochs, as producers send, are not entries). It answers
OffsetForLeaderEpoch as Kafka's cache does, and follows the log: truncation drops the
entries at or past the new end; a new log start offset drops the entries before it but
keeps the last of them, moved up to start there.
"""

from __future__ import annotations

from bisect import bisect_right
from typing import Any

from kcodec.errors import TruncatedError
from kcodec.records.header import read_header

__all__ = ["LeaderEpochCache"]


class LeaderEpochCache:
    """(epoch, start offset) entries; not thread-safe (the partition log locks)."""

    def __init__(self) -> None:
        self.entries: list[tuple[int, int]] = []

    def assign(self, epoch: int, start_offset: int) -> None:
        """A batch of ``epoch`` was stored from ``start_offset`` on."""
        if epoch >= 0 and (not self.entries or epoch > self.entries[-1][0]):
            self.entries.append((epoch, start_offset))

    def note_batch(self, data: Any, base_offset: int) -> None:
        """``data`` (stored bytes starting with a batch) was stored at ``base_offset``."""
        try:
            h = read_header(data)
        except TruncatedError:       # shorter than a v2 header: no batch with an epoch
            return
        if h.magic == 2:
            self.assign(h.partition_leader_epoch, base_offset)

    def truncate_from_end(self, end_offset: int) -> None:
        """The log now ends at ``end_offset``: epochs starting there or later are gone."""
        self.entries = [e for e in self.entries if e[1] < end_offset]

    def truncate_from_start(self, start_offset: int) -> None:
        """The log now starts at ``start_offset`` (Kafka's rule: the last entry before it
        stays, moved up to start there)."""
        eps = self.entries
        k = bisect_right([s for _, s in eps], start_offset)
        if k:
            self.entries = [(eps[k - 1][0], max(eps[k - 1][1], start_offset))] + eps[k:]

    def clear(self) -> None:
        self.entries = []

    def end_offset_for(self, epoch: int, log_end_offset: int) -> tuple[int, int]:
        """(the largest known epoch <= ``epoch``, the start offset of the epoch after it,
        or the log end for the latest epoch); (-1, -1) when unknown."""
        eps = self.entries
        if epoch < 0 or not eps:
            return (-1, -1)
        if epoch == eps[-1][0]:
            return (epoch, log_end_offset)
        k = bisect_right([e for e, _ in eps], epoch)
        if k >= len(eps):
            return (-1, -1)
        return ((eps[k - 1][0] if k else epoch), eps[k][1])
