"""What a log's recovery at start cut off, and how it is reported.

Loading a partition checks every segment past the recovery point (and any whose trusted
header walk fails); a torn or damaged batch ends the log there: the segment is truncated at
the last whole, valid batch and the segments after it are deleted (their offsets would not
follow). :class:`Truncation` is that event for one partition: where the log now ends, the
bytes and segments removed, the offsets known lost, and the recovery point the partition had
(every offset below it had been flushed and checkpointed).

:func:`report` logs each one on ``kcodec.broker.log`` as Kafka's log recovery does, with the
partition, the segment, the offsets and the byte counts: a WARNING for a cut at or above the
recovery point (a tail that was never flushed: what a crash leaves), an ERROR when the cut
falls below it (records that had been flushed, and so acknowledged as durable, are gone:
damaged storage, not a crash).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

__all__ = ["Truncation", "report"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Truncation:
    """One partition's recovery cut."""

    topic: str
    partition: int
    segment: str                  # the file name of the segment cut short
    offset: int                   # the log's end now: the first offset lost
    bytes_removed: int            # from that segment
    segments_removed: int         # later segments deleted with it
    segment_bytes_removed: int    # their bytes
    lost_through: int | None      # the last offset known lost (of the deleted segments)
    recovery_point: int           # the partition's recovery point before the cut
    reason: str

    @property
    def below_recovery_point(self) -> bool:
        """The cut took offsets that had been flushed (and checkpointed) before."""
        return self.offset < self.recovery_point

    @property
    def total_bytes(self) -> int:
        return self.bytes_removed + self.segment_bytes_removed

    def describe(self) -> str:
        lost = (f"offsets {self.offset} to at least {self.lost_through}"
                if self.lost_through is not None and self.lost_through >= self.offset
                else f"offsets from {self.offset}")
        later = (f" and {self.segments_removed} later segment(s) of "
                 f"{self.segment_bytes_removed} bytes" if self.segments_removed else "")
        return (f"partition {self.topic}-{self.partition}: segment {self.segment} truncated "
                f"to offset {self.offset} ({self.reason}): {self.bytes_removed} bytes"
                f"{later} removed, {lost} lost; recovery point was {self.recovery_point}")


def report(truncations: list[Truncation]) -> None:
    """Log every truncation (see the module's docstring)."""
    for t in truncations:
        if t.below_recovery_point:
            log.error("kcodec broker: log recovery cut FLUSHED records below the recovery "
                      "point: %s", t.describe())
        else:
            log.warning("kcodec broker: log recovery truncated an unflushed tail: %s",
                        t.describe())
