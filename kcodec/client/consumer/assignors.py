"""Partition assignors for classic consumer groups, and the consumer-protocol metadata
(encoded with ``kcodec.protocol.consumer``).

Protocol names are the Java/librdkafka ones (``range``, ``roundrobin``,
``cooperative-sticky``) so mixed groups with other clients agree on a protocol.

Wire layout of the embedded consumer protocol (big-endian, never flexible)::

    Subscription => version:int16 topics:[string] user_data:nullable_bytes
                    owned_partitions:[topic:string partitions:[int32]]   (version >= 1)
                    generation_id:int32                                  (version >= 2)
                    rack_id:nullable_string                              (version >= 3)
    Assignment   => version:int16 assigned_partitions:[topic:string partitions:[int32]]
                    user_data:nullable_bytes
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kcodec.errors import KcodecError, ProtocolError
from kcodec.protocol.consumer import (
    ConsumerProtocolAssignment,
    ConsumerProtocolSubscription,
    decode_versioned,
    encode_versioned,
)

__all__ = [
    "Subscription", "Assignment", "RangeAssignor", "RoundRobinAssignor",
    "CooperativeStickyAssignor", "ASSIGNORS", "get_assignor",
]

TopicPartitions = dict[str, list[int]]


def _to_struct(tps: Mapping[str, Sequence[int]], cls: Any) -> list:
    return [cls(topic=t, partitions=list(tps[t])) for t in sorted(tps)]


def _from_struct(items: Any) -> TopicPartitions:
    return {tp.topic: list(tp.partitions) for tp in items or []}


def _decode(cls: Any, data: bytes, what: str) -> tuple[int, Any]:
    try:
        return decode_versioned(cls, data)
    except KcodecError as exc:   # a peer's bytes: malformed metadata breaks the protocol
        raise ProtocolError(f"bad consumer protocol {what}: {exc}") from None


@dataclass
class Subscription:
    """A member's subscription (JoinGroup protocol metadata)."""

    topics: list[str]
    user_data: bytes | None = None
    owned_partitions: TopicPartitions = field(default_factory=dict)
    generation_id: int = -1
    rack_id: str | None = None
    version: int = 1

    def encode(self) -> bytes:
        cls: Any = ConsumerProtocolSubscription
        msg = cls(topics=list(self.topics), user_data=self.user_data)
        if self.version >= 1:
            msg.owned_partitions = _to_struct(self.owned_partitions, cls.TopicPartition)
        if self.version >= 2:
            msg.generation_id = self.generation_id
        if self.version >= 3:
            msg.rack_id = self.rack_id
        return encode_versioned(msg, self.version)

    @classmethod
    def decode(cls, data: bytes) -> Subscription:
        version, m = _decode(ConsumerProtocolSubscription, data, "subscription")
        return cls(list(m.topics), m.user_data, _from_struct(m.owned_partitions),
                   m.generation_id, m.rack_id, version)


@dataclass
class Assignment:
    """A member's assignment (SyncGroup assignment bytes)."""

    assigned_partitions: TopicPartitions = field(default_factory=dict)
    user_data: bytes | None = None
    version: int = 1

    def encode(self) -> bytes:
        cls: Any = ConsumerProtocolAssignment
        msg = cls(assigned_partitions=_to_struct(self.assigned_partitions, cls.TopicPartition),
                  user_data=self.user_data)
        return encode_versioned(msg, self.version)

    @classmethod
    def decode(cls, data: bytes) -> Assignment:
        if not data:
            return cls()
        version, m = _decode(ConsumerProtocolAssignment, data, "assignment")
        return cls(_from_struct(m.assigned_partitions), m.user_data, version)


# ---------------------------------------------------------------------------------------- assignors

Members = Mapping[str, Subscription]          # member id -> its subscription
PartitionCounts = Mapping[str, int]           # topic -> number of partitions


class RangeAssignor:
    """Per topic, consecutive ranges of partitions to the sorted subscribed members."""

    name = "range"
    rebalance_protocol = "eager"

    def assign(self, partitions: PartitionCounts, members: Members) -> dict[str, Assignment]:
        out: dict[str, TopicPartitions] = {m: {} for m in members}
        by_topic: dict[str, list[str]] = defaultdict(list)
        for m, sub in members.items():
            for t in sub.topics:
                by_topic[t].append(m)
        for t, ms in by_topic.items():
            n = partitions.get(t, 0)
            ms = sorted(ms)
            per, extra = divmod(n, len(ms))
            for i, m in enumerate(ms):
                start = i * per + min(i, extra)
                length = per + (1 if i < extra else 0)
                if length:
                    out[m][t] = list(range(start, start + length))
        return {m: Assignment(tps) for m, tps in out.items()}

    def subscription(self, topics: Sequence[str], owned: TopicPartitions, generation: int) -> Subscription:
        return Subscription(sorted(topics), version=1)


class RoundRobinAssignor(RangeAssignor):
    """All topic-partitions in order, dealt in turn to the sorted members subscribed to each."""

    name = "roundrobin"

    def assign(self, partitions: PartitionCounts, members: Members) -> dict[str, Assignment]:
        out: dict[str, TopicPartitions] = {m: {} for m in members}
        ms = sorted(members)
        topics = sorted({t for s in members.values() for t in s.topics})
        i = 0
        for t in topics:
            for p in range(partitions.get(t, 0)):
                for _ in range(len(ms)):
                    m = ms[i % len(ms)]
                    i += 1
                    if t in members[m].topics:
                        out[m].setdefault(t, []).append(p)
                        break
        return {m: Assignment(tps) for m, tps in out.items()}


class CooperativeStickyAssignor(RangeAssignor):
    """Balanced and sticky; partitions that change owner are first revoked (incremental).

    Each member keeps as many of its owned partitions as the balance allows; the rest are
    spread over the least loaded members. A partition still owned by another member is left
    out of this round's assignment: its owner revokes it and rejoins, and the next round
    hands it over (the cooperative protocol).
    """

    name = "cooperative-sticky"
    rebalance_protocol = "cooperative"

    def subscription(self, topics: Sequence[str], owned: TopicPartitions, generation: int) -> Subscription:
        return Subscription(sorted(topics), owned_partitions={t: sorted(p) for t, p in owned.items()},
                            generation_id=generation, version=2)

    def assign(self, partitions: PartitionCounts, members: Members) -> dict[str, Assignment]:
        ms = sorted(members)
        all_tps = [(t, p) for t in sorted({t for s in members.values() for t in s.topics})
                   for p in range(partitions.get(t, 0))]
        prev_owner: dict[tuple[str, int], str] = {}
        for m in ms:   # the highest generation wins a partition claimed twice
            for t, ps in members[m].owned_partitions.items():
                for p in ps:
                    o = prev_owner.get((t, p))
                    if o is None or members[m].generation_id > members[o].generation_id:
                        prev_owner[(t, p)] = m
        eligible = {tp: [m for m in ms if tp[0] in members[m].topics] for tp in all_tps}
        quota = _quotas(len(all_tps), ms)
        result: dict[str, list[tuple[str, int]]] = {m: [] for m in ms}
        unassigned = []
        for tp in all_tps:
            o = prev_owner.get(tp)
            if o is not None and o in eligible[tp] and len(result[o]) < quota[o]:
                result[o].append(tp)
            else:
                unassigned.append(tp)
        for tp in unassigned:
            cands = eligible[tp]
            if not cands:
                continue
            m = min(cands, key=lambda c: (len(result[c]) / max(quota[c], 1), len(result[c]), c))
            result[m].append(tp)
        out = {}
        for m in ms:
            tps: TopicPartitions = {}
            for t, p in result[m]:
                o = prev_owner.get((t, p))
                if o is not None and o != m:
                    continue   # still owned elsewhere: revoke first, hand over next round
                tps.setdefault(t, []).append(p)
            out[m] = Assignment(tps)
        return out


def _quotas(total: int, ms: list[str]) -> dict[str, int]:
    per, extra = divmod(total, max(len(ms), 1))
    return {m: per + (1 if i < extra else 0) for i, m in enumerate(ms)}


ASSIGNORS = {a.name: a for a in (RangeAssignor, RoundRobinAssignor, CooperativeStickyAssignor)}


def get_assignor(name: str):
    """The assignor instance for a protocol name (``range``, ``roundrobin``, ``cooperative-sticky``)."""
    try:
        return ASSIGNORS[name]()
    except KeyError:
        raise ValueError(f"unknown partition assignment strategy {name!r}; "
                         f"choose from {', '.join(ASSIGNORS)}") from None
