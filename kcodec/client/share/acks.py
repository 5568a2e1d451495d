"""Acknowledgements: what the application said of each delivered record, until it is sent.

Each partition keeps ``offset -> type``; ``batches`` turns them into the wire's
acknowledgement batches (KIP-932): runs of consecutive offsets, with one type for the run
when all agree, else one type per offset::

    AcknowledgementBatch := first_offset int64, last_offset int64,
                            acknowledge_types [int8]   (one, or one per offset)
    types: 0 GAP (no record at that offset), 1 ACCEPT, 2 RELEASE, 3 REJECT, 4 RENEW

RENEW (KIP-1222) only extends the acquisition lock: the record still needs a final type.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence

from kcodec.client.structs import TopicPartition

__all__ = ["AcknowledgeType", "Acknowledgements", "batches", "runs"]


class AcknowledgeType(enum.IntEnum):
    """How a delivered record was handled (the wire's numbers)."""

    GAP = 0
    ACCEPT = 1          # processed: never delivered again
    RELEASE = 2         # give it back: delivered again at once (to any member)
    REJECT = 3          # unprocessable: never delivered again
    RENEW = 4           # still working on it: a new acquisition lock (KIP-1222)


Batch = tuple[int, int, list[int]]


def batches(acks: dict[int, int]) -> list[Batch]:
    """The acknowledgement batches for ``offset -> type``."""
    out: list[Batch] = []
    if not acks:
        return out
    offsets = sorted(acks)
    first = prev = offsets[0]
    types = [acks[first]]
    for off in offsets[1:]:
        if off == prev + 1:
            types.append(acks[off])
        else:
            out.append(_batch(first, prev, types))
            first, types = off, [acks[off]]
        prev = off
    out.append(_batch(first, prev, types))
    return out


def _batch(first: int, last: int, types: list[int]) -> Batch:
    if all(t == types[0] for t in types):
        return (first, last, [types[0]])
    return (first, last, types)


def runs(offsets: Sequence[int], kind: int) -> list[Batch]:
    """The batches of sorted ``offsets``, all of one type (one batch when they are
    consecutive, the common case, found without a loop)."""
    if not offsets:
        return []
    if offsets[-1] - offsets[0] + 1 == len(offsets):
        return [(offsets[0], offsets[-1], [kind])]
    return batches(dict.fromkeys(offsets, kind))


class Acknowledgements:
    """The acknowledgements not yet sent, as batches by partition (not thread-safe: the
    owner locks). Batches of one partition never overlap: each offset is acknowledged
    once (RENEW aside, which the broker takes as often as it comes)."""

    def __init__(self) -> None:
        self.by_tp: dict[TopicPartition, list[Batch]] = {}

    def __bool__(self) -> bool:
        return any(self.by_tp.values())

    def add(self, tp: TopicPartition, batches: list[Batch]) -> None:
        if batches:
            self.by_tp.setdefault(tp, []).extend(batches)

    def add_offsets(self, tp: TopicPartition, offsets: Iterable[int], kind: int) -> None:
        self.add(tp, runs(sorted(offsets), int(kind)))

    def take(self, tps: Iterable[TopicPartition] | None = None) -> dict[TopicPartition, list[Batch]]:
        """Remove and return the batches of ``tps`` (default: every partition), in offset
        order."""
        keys = list(self.by_tp) if tps is None else [tp for tp in tps if tp in self.by_tp]
        out = {}
        for tp in keys:
            got = self.by_tp.pop(tp)
            if got:
                got.sort(key=lambda b: b[0])
                out[tp] = got
        return out
