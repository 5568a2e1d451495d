"""Resetting a consumer group's committed offsets, as Kafka's ``kafka-consumer-groups
--reset-offsets`` does (``AsyncAdmin.reset_consumer_group_offsets``).

One target per call: ``to_earliest``, ``to_latest``, ``to_offset`` (clamped into the
partition's earliest..latest, as Kafka does), ``to_datetime`` (milliseconds since the
epoch: the first offset at or after it, or the end when none is), ``shift_by`` (the
committed offset plus N, clamped; a partition without a committed offset is an error, as in
Kafka). The group must be inactive (no members): its live members own their offsets. The
plan is made first; only ``execute`` commits it (through ``alter_consumer_group_offsets``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kcodec.client.errors import KafkaError
from kcodec.client.structs import TopicPartition
from kcodec.errors import KcodecError

__all__ = ["OffsetReset", "reset_target", "plan_reset"]


@dataclass
class OffsetReset:
    """One partition of a reset: the committed offset before (None: none), the new one, and
    the error committing it (None: committed, or not asked to)."""
    topic: str
    partition: int
    current: int | None
    new: int
    error: KafkaError | None = None


def reset_target(to_earliest: bool = False, to_latest: bool = False, to_offset: int | None = None,
                 to_datetime: int | None = None, shift_by: int | None = None) -> tuple[str, int]:
    """``(kind, value)`` of the one target given; none or several is a ValueError."""
    given = [(k, v) for k, v in (("earliest", 0 if to_earliest else None),
                                 ("latest", 0 if to_latest else None),
                                 ("offset", to_offset), ("datetime", to_datetime),
                                 ("shift", shift_by)) if v is not None]
    if len(given) != 1:
        raise ValueError("give exactly one of to_earliest, to_latest, to_offset, to_datetime, "
                         f"shift_by (got {len(given)})")
    return given[0]


async def plan_reset(admin: Any, group_id: str, topics: dict[str, list[int] | None] | None,
                     kind: str, value: int) -> list[OffsetReset]:
    """The new offset of each partition (``topics``: name -> partitions, None for all of
    them; None: every partition the group has committed offsets for)."""
    groups = await admin.describe_groups([group_id])
    for g in groups:
        if g.members:
            raise KcodecError(f"the offsets of group {group_id!r} can only be reset while it is "
                              f"inactive, and it has {len(g.members)} member"
                              f"{'s' * (len(g.members) != 1)} (state {g.state}): stop its "
                              "consumers first")
    if topics is None:
        committed = await admin.committed_offsets(group_id, None)
        tps = sorted(committed)
    else:
        md = await admin.describe_cluster(sorted(topics))   # an unknown topic fails here
        committed = await admin.committed_offsets(group_id, sorted(topics))
        have = {t.name: [p.partition for p in t.partitions] for t in md.topics}
        tps = []
        for name, parts in topics.items():
            if parts is None:
                tps += [TopicPartition(name, p) for p in have[name]]
                continue
            bad = [p for p in parts if p not in have[name]]
            if bad:
                raise KcodecError(f"topic {name!r} has partitions 0..{len(have[name]) - 1}: no "
                                  f"partition {', '.join(map(str, bad))}")
            tps += [TopicPartition(name, p) for p in parts]
        tps = sorted(set(tps))
    if not tps:
        return []
    earliest = await admin.list_offsets(tps, "earliest")
    latest = await admin.list_offsets(tps, "latest")
    at = await admin.list_offsets(tps, value) if kind == "datetime" else {}
    out = []
    for tp in tps:
        lo, hi, cur = earliest[tp], latest[tp], committed.get(tp)
        if kind == "earliest":
            new = lo
        elif kind == "latest":
            new = hi
        elif kind == "datetime":
            new = at.get(tp, -1)
            new = hi if new < 0 else new
        elif kind == "offset":
            new = value
        else:
            if cur is None:
                raise KcodecError(f"cannot shift the offset of {tp.topic}[{tp.partition}]: group "
                                  f"{group_id!r} has no committed offset there")
            new = cur + value
        out.append(OffsetReset(tp.topic, tp.partition, cur, min(max(new, lo), hi)))
    return out
