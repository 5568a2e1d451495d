"""What ``describe-groups``, ``offsets`` and ``lag`` share: finding groups and a group's
partitions with their committed and end offsets.

A group's partitions are those its members are assigned plus those it has committed
offsets for, as Kafka's ``kafka-consumer-groups --describe`` shows them: a busy group
that has not committed yet has partitions (no committed offset, no lag to speak of), a
topic the group never read has none.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kcodec.errors import KcodecError

__all__ = ["PartitionOffsets", "describe", "partition_offsets", "unknown_groups", "why_none"]


@dataclass
class PartitionOffsets:
    topic: str
    partition: int
    committed: int | None        # None: the group has committed nothing here yet
    end_offset: int
    member: str | None           # the member assigned the partition (None: none is)

    @property
    def lag(self) -> int | None:
        """Records after the committed offset; None where nothing is committed."""
        if self.committed is None:
            return None
        return max(self.end_offset - self.committed, 0)


def unknown_groups(missing: list[str], known: list[str]) -> str:
    from kcodec.cli._client import did_you_mean

    what = "; ".join(f"group {g!r} does not exist{did_you_mean(g, known)}" for g in missing)
    return f"{what}: 'kcodec groups list' shows the groups"


def describe(admin: Any, group_ids: list[str]) -> list[Any]:
    """``admin.describe_groups``, and an error naming each group the cluster does not know.
    Brokers describe an unknown group as Dead, or as Empty (Tansu): a group described so
    without members exists if ListGroups lists it (it has committed offsets)."""
    groups = admin.describe_groups(group_ids)
    maybe = [g.group_id for g in groups if not g.members and g.state in ("Dead", "Empty", "")]
    if maybe:
        listed = [g.group_id for g in admin.list_groups()]
        missing = [g for g in maybe if g not in listed]
        if missing:
            raise KcodecError(unknown_groups(missing, listed))
    return groups


def partition_offsets(admin: Any, group: Any, topics: list[str] | None) -> list[PartitionOffsets]:
    """The group's partitions (assigned to a member, or with a committed offset), of
    ``topics`` only if given, with committed and end offsets, sorted."""
    from kcodec.client import TopicPartition

    wanted = None if topics is None else set(topics)
    assigned = {TopicPartition(t, p): m.member_id for m in group.members
                for t, ps in m.assignment.items() for p in ps
                if wanted is None or t in wanted}
    committed = admin.committed_offsets(group.group_id, topics)
    tps = sorted(set(assigned) | set(committed))
    ends = admin.list_offsets(tps, "latest") if tps else {}
    return [PartitionOffsets(tp.topic, tp.partition, committed.get(tp), ends.get(tp, -1),
                             assigned.get(tp)) for tp in tps]


def why_none(group: Any, topics: list[str] | None) -> str:
    """Why a group has no partitions (of ``topics``) to show."""
    of = "" if not topics else " of " + ", ".join(repr(t) for t in topics)
    if group.members and not any(m.assignment for m in group.members):
        n = len(group.members)
        return (f"no committed offsets{of}, and the broker's description of its {n} "
                f"member{'s' * (n != 1)} names no partitions")
    return f"no partitions{of}: no member is assigned one and nothing is committed"
