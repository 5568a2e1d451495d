"""Partition assignors for classic consumer groups, and the consumer-protocol metadata.

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

import struct
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from kcodec.errors import ProtocolError

__all__ = [
    "Subscription", "Assignment", "RangeAssignor", "RoundRobinAssignor",
    "CooperativeStickyAssignor", "ASSIGNORS", "get_assignor",
]

TopicPartitions = dict[str, list[int]]


@dataclass
class Subscription:
    topics: list[str]
    user_data: bytes | None = None
    owned_partitions: TopicPartitions = field(default_factory=dict)
    generation_id: int = -1
    rack_id: str | None = None
    version: int = 1

    def encode(self) -> bytes:
        out = [struct.pack(">hi", self.version, len(self.topics))]
        out += [_str(t) for t in self.topics]
        out.append(_nbytes(self.user_data))
        if self.version >= 1:
            out.append(_tps(self.owned_partitions))
        if self.version >= 2:
            out.append(struct.pack(">i", self.generation_id))
        if self.version >= 3:
            out.append(_str(self.rack_id) if self.rack_id is not None else b"\xff\xff")
        return b"".join(out)

    @classmethod
    def decode(cls, data: bytes) -> Subscription:
        r = _R(data)
        version = r.i16()
        topics = [r.string() for _ in range(r.count())]
        user_data = r.nbytes()
        sub = cls(topics, user_data, version=version)
        if version >= 1 and r.more():
            sub.owned_partitions = r.tps()
        if version >= 2 and r.more():
            sub.generation_id = r.i32()
        if version >= 3 and r.more():
            sub.rack_id = r.nstring()
        return sub


@dataclass
class Assignment:
    assigned_partitions: TopicPartitions = field(default_factory=dict)
    user_data: bytes | None = None
    version: int = 1

    def encode(self) -> bytes:
        return struct.pack(">h", self.version) + _tps(self.assigned_partitions) + _nbytes(self.user_data)

    @classmethod
    def decode(cls, data: bytes) -> Assignment:
        if not data:
            return cls()
        r = _R(data)
        version = r.i16()
        tps = r.tps()
        return cls(tps, r.nbytes() if r.more() else None, version)


def _str(s: str) -> bytes:
    b = s.encode()
    return struct.pack(">h", len(b)) + b


def _nbytes(b: bytes | None) -> bytes:
    return b"\xff\xff\xff\xff" if b is None else struct.pack(">i", len(b)) + b


def _tps(tps: Mapping[str, Sequence[int]]) -> bytes:
    out = [struct.pack(">i", len(tps))]
    for t in sorted(tps):
        ps = list(tps[t])
        out.append(_str(t) + struct.pack(f">i{len(ps)}i", len(ps), *ps))
    return b"".join(out)


class _R:
    """A bounds-checked reader of the consumer-protocol blobs (a peer's bytes)."""

    def __init__(self, data: bytes) -> None:
        self.b = bytes(data)
        self.p = 0

    def take(self, n: int) -> bytes:
        if n < 0 or self.p + n > len(self.b):
            raise ProtocolError(f"truncated consumer protocol metadata at offset {self.p}")
        v = self.b[self.p:self.p + n]
        self.p += n
        return v

    def more(self) -> bool:
        return self.p < len(self.b)

    def i16(self) -> int:
        return struct.unpack(">h", self.take(2))[0]

    def i32(self) -> int:
        return struct.unpack(">i", self.take(4))[0]

    def count(self) -> int:
        n = self.i32()
        if n < 0:
            return 0
        if n > len(self.b) - self.p:
            raise ProtocolError(f"impossible array length {n} in consumer protocol metadata")
        return n

    def string(self) -> str:
        n = self.i16()
        try:
            return self.take(n).decode()
        except UnicodeDecodeError as exc:
            raise ProtocolError("invalid UTF-8 in consumer protocol metadata") from exc

    def nstring(self) -> str | None:
        if self.b[self.p:self.p + 2] == b"\xff\xff":
            self.p += 2
            return None
        return self.string()

    def nbytes(self) -> bytes | None:
        n = self.i32()
        return None if n < 0 else self.take(n)

    def tps(self) -> TopicPartitions:
        out: TopicPartitions = {}
        for _ in range(self.count()):
            t = self.string()
            n = self.count()
            out[t] = list(struct.unpack(f">{n}i", self.take(4 * n)))
        return out


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
