"""Partition assignors for classic consumer groups, and the consumer-protocol metadata
(encoded with ``kcodec.protocol.consumer``).

Protocol names are the Java/librdkafka ones (``range``, ``roundrobin``, ``sticky``,
``cooperative-sticky``) so mixed groups with other clients agree on a protocol.

A user assignor (``UserAssignor`` wraps it) is any object with

    name: str                  the protocol name the group agrees on (a Java consumer with
                               an assignor of the same name() shares the group with it)
    assign(partitions, subscriptions) -> {member_id: {topic: [partition, ...]}}
                               ``partitions``: {topic: partition count} of every topic
                               subscribed; ``subscriptions``: {member_id: Subscription};
                               an ``Assignment`` per member may be returned instead
    version: int               optional: the subscription's layout version, 0 to 3
                               (default 2: owned partitions and generation included)
    user_data                  optional: bytes, or ``user_data(topics) -> bytes | None``,
                               sent in the member's subscription
    on_assignment(assigned, generation)   optional: this member's new assignment

Its rebalances are eager (every member gives up its partitions before a join), and it
runs under the classic protocol only: the consumer protocol's broker assigns.

``sticky`` is Java's eager StickyAssignor: members give up everything before each rebalance
and say what they owned in the subscription's user data, in Java's layout (no version
prefix; Kafka's old Struct types: int32 array counts, int16 string lengths)::

    StickyUserData => previous_assignment:[topic:string partitions:[int32]]
                      generation:int32                     (absent in the v0 layout)

The leader keeps each member's previous partitions as far as balance allows (a partition
claimed by two members goes to the higher generation; at the same generation to neither),
then gives the rest to the least loaded members subscribed to them.

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
from typing import Any

from kcodec.client.errors import AssignorError
from kcodec.client.hooks import resolve
from kcodec.errors import KcodecError, ProtocolError
from kcodec.protocol.consumer import (
    ConsumerProtocolAssignment,
    ConsumerProtocolSubscription,
    decode_versioned,
    encode_versioned,
)

__all__ = [
    "Subscription", "Assignment", "RangeAssignor", "RoundRobinAssignor", "StickyAssignor",
    "CooperativeStickyAssignor", "ASSIGNORS", "get_assignor", "encode_sticky_user_data",
    "decode_sticky_user_data", "UserAssignor", "user_assignor",
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


def encode_sticky_user_data(owned: Mapping[str, Sequence[int]], generation: int | None) -> bytes:
    """Java StickyAssignor's user data (v1 layout; v0 when ``generation`` is None)."""
    out = [struct.pack(">i", len(owned))]
    for topic in sorted(owned):
        name = topic.encode()
        parts = list(owned[topic])
        out.append(struct.pack(">h", len(name)) + name + struct.pack(">i", len(parts)))
        out.append(struct.pack(f">{len(parts)}i", *parts))
    if generation is not None:
        out.append(struct.pack(">i", generation))
    return b"".join(out)


def decode_sticky_user_data(data: bytes | None) -> tuple[TopicPartitions, int]:
    """(previous assignment, generation) from a member's user data, as Java reads it: the
    v1 layout, else v0 (generation -1), else nothing (unreadable user data is ignored)."""
    if not data:
        return {}, -1
    buf = bytes(data)
    try:
        pos = 0
        (n,) = struct.unpack_from(">i", buf, pos)
        pos += 4
        if n < 0 or n > len(buf):
            raise ValueError("bad count")
        owned: TopicPartitions = {}
        for _ in range(n):
            (ln,) = struct.unpack_from(">h", buf, pos)
            pos += 2
            if ln < 0 or pos + ln > len(buf):
                raise ValueError("bad string")
            topic = buf[pos:pos + ln].decode()
            pos += ln
            (k,) = struct.unpack_from(">i", buf, pos)
            pos += 4
            if k < 0 or pos + 4 * k > len(buf):
                raise ValueError("bad count")
            owned.setdefault(topic, []).extend(struct.unpack_from(f">{k}i", buf, pos))
            pos += 4 * k
        generation = struct.unpack_from(">i", buf, pos)[0] if pos + 4 <= len(buf) else -1
        return owned, generation
    except (struct.error, ValueError, UnicodeDecodeError):
        return {}, -1


class StickyAssignor(RangeAssignor):
    """Java's eager ``sticky`` assignor (see the module docstring): balanced, and sticky
    through the user data each member sends."""

    name = "sticky"
    rebalance_protocol = "eager"

    def __init__(self) -> None:
        self.owned: TopicPartitions = {}
        self.generation = -1

    def on_assignment(self, assigned: TopicPartitions, generation: int) -> None:
        self.owned = {t: sorted(ps) for t, ps in assigned.items()}
        self.generation = generation

    def subscription(self, topics: Sequence[str], owned: TopicPartitions, generation: int) -> Subscription:
        data = encode_sticky_user_data(self.owned, self.generation) if self.generation >= 0 \
            else None
        return Subscription(sorted(topics), user_data=data, version=1)

    def assign(self, partitions: PartitionCounts, members: Members) -> dict[str, Assignment]:
        claims = {m: decode_sticky_user_data(sub.user_data) for m, sub in members.items()}
        result = sticky_assign(partitions, {m: list(s.topics) for m, s in members.items()},
                               claims)
        out = {}
        for m, tps in result.items():
            by: TopicPartitions = {}
            for t, p in tps:
                by.setdefault(t, []).append(p)
            out[m] = Assignment({t: sorted(ps) for t, ps in by.items()})
        return out


def sticky_assign(partitions: PartitionCounts, topics: Mapping[str, list[str]],
                  claims: Mapping[str, tuple[TopicPartitions, int]]
                  ) -> dict[str, list[tuple[str, int]]]:
    """A balanced assignment that keeps previous owners where it can (``claims``: member ->
    (previous assignment, generation))."""
    ms = sorted(topics)
    all_tps = [(t, p) for t in sorted({t for ts in topics.values() for t in ts})
               for p in range(partitions.get(t, 0))]
    eligible = {tp: [m for m in ms if tp[0] in topics[m]] for tp in all_tps}
    valid = set(all_tps)
    owner: dict[tuple[str, int], str] = {}
    best: dict[tuple[str, int], int] = {}
    for m in ms:     # the highest generation wins a partition; a tie keeps it from both
        owned, gen = claims.get(m, ({}, -1))
        for t, ps in owned.items():
            for p in ps:
                tp = (t, p)
                if tp not in valid or m not in eligible[tp]:
                    continue
                if tp not in best or gen > best[tp]:
                    best[tp], owner[tp] = gen, m
                elif gen == best[tp]:
                    owner.pop(tp, None)
    result: dict[str, list[tuple[str, int]]] = {m: [] for m in ms}
    homogeneous = len({tuple(sorted(topics[m])) for m in ms}) <= 1
    if homogeneous and ms:
        low, extra = divmod(len(all_tps), len(ms))
        over = extra        # members that may hold low + 1
        for m in ms:
            mine = sorted(tp for tp, o in owner.items() if o == m)
            take = low + 1 if over > 0 and len(mine) > low else low
            if take > low:
                over -= 1
            result[m] = mine[:take]
    else:
        for tp, o in owner.items():
            result[o].append(tp)
    taken = {tp for tps in result.values() for tp in tps}
    load = {m: len(result[m]) for m in ms}
    for tp in sorted((tp for tp in all_tps if tp not in taken),
                     key=lambda tp: (len(eligible[tp]), tp)):
        cands = eligible[tp]
        if cands:
            m = min(cands, key=lambda c: (load[c], c))
            result[m].append(tp)
            load[m] += 1
    # even out what keeping previous owners left uneven (different subscriptions)
    for _ in range(len(all_tps) * max(len(ms), 1)):
        moved = False
        for a in sorted(ms, key=lambda x: -load[x]):
            for tp in sorted(result[a], key=lambda tp: owner.get(tp) == a):
                dest = min((c for c in eligible[tp] if load[c] < load[a] - 1),
                           key=lambda c: (load[c], c), default=None)
                if dest is not None:
                    result[a].remove(tp)
                    result[dest].append(tp)
                    load[a] -= 1
                    load[dest] += 1
                    moved = True
                    break
            if moved:
                break
        if not moved:
            break
    return {m: sorted(tps) for m, tps in result.items()}


def _quotas(total: int, ms: list[str]) -> dict[str, int]:
    per, extra = divmod(total, max(len(ms), 1))
    return {m: per + (1 if i < extra else 0) for i, m in enumerate(ms)}


ASSIGNORS = {a.name: a for a in (RangeAssignor, RoundRobinAssignor, StickyAssignor,
                                 CooperativeStickyAssignor)}


class UserAssignor:
    """A user's assignor (see the module docstring), checked once and guarded: what its
    ``assign`` raises or returns wrong is an ``AssignorError`` naming it."""

    rebalance_protocol = "eager"

    def __init__(self, obj: Any) -> None:
        name = getattr(obj, "name", None)
        if callable(name):          # Java's name() method, as a Python port may keep it
            name = name()
        if not isinstance(name, str) or not name:
            raise ValueError(f"partition_assignment_strategy: an assignor needs a name (a "
                             f"non-empty str attribute); {type(obj).__name__} has {name!r}")
        if not callable(getattr(obj, "assign", None)):
            raise ValueError(f"partition_assignment_strategy: assignor {name!r} has no "
                             "assign(partitions, subscriptions) method")
        version = getattr(obj, "version", 2)
        if callable(version):
            version = version()
        if not isinstance(version, int) or isinstance(version, bool) or not 0 <= version <= 3:
            raise ValueError(f"partition_assignment_strategy: assignor {name!r}: version "
                             f"is the subscription layout, 0 to 3, not {version!r}")
        self.obj, self.name, self.version = obj, name, version

    def subscription(self, topics: Sequence[str], owned: TopicPartitions,
                     generation: int) -> Subscription:
        data = getattr(self.obj, "user_data", None)
        if callable(data):
            data = self._call("user_data", list(topics))
        if data is not None and not isinstance(data, (bytes, bytearray, memoryview)):
            raise AssignorError(f"assignor {self.name!r}: user_data must be bytes or None, "
                                f"not {type(data).__name__}")
        return Subscription(sorted(topics), None if data is None else bytes(data),
                            {t: sorted(p) for t, p in owned.items()}, generation,
                            version=self.version)

    def assign(self, partitions: PartitionCounts, members: Members) -> dict[str, Assignment]:
        result = self._call("assign", dict(partitions), dict(members))
        if not isinstance(result, Mapping):
            raise AssignorError(f"assignor {self.name!r} returned {type(result).__name__}, "
                                "not {member_id: {topic: [partition, ...]}}")
        out = {m: Assignment() for m in members}
        owner: dict[tuple[str, int], str] = {}
        for m, a in result.items():
            if m not in members:
                raise AssignorError(f"assignor {self.name!r} assigned to {m!r}, not a member "
                                    f"of the group ({', '.join(sorted(members))})")
            tps = a.assigned_partitions if isinstance(a, Assignment) else a
            if not isinstance(tps, Mapping):
                raise AssignorError(f"assignor {self.name!r}: the assignment of {m!r} is "
                                    f"{type(tps).__name__}, not {{topic: [partition, ...]}}")
            clean: TopicPartitions = {}
            for t, ps in tps.items():
                n = partitions.get(t)
                for p in ps:
                    if n is None or not isinstance(p, int) or not 0 <= p < n:
                        raise AssignorError(f"assignor {self.name!r} assigned {t}[{p}] to "
                                            f"{m!r}, which is not a partition of the "
                                            "subscribed topics")
                    if (t, p) in owner:
                        raise AssignorError(f"assignor {self.name!r} assigned {t}[{p}] to "
                                            f"both {owner[(t, p)]!r} and {m!r}")
                    owner[(t, p)] = m
                if ps:
                    clean[t] = sorted(ps)
            out[m] = Assignment(clean, a.user_data if isinstance(a, Assignment) else None)
        return out

    def on_assignment(self, assigned: TopicPartitions, generation: int) -> None:
        if callable(getattr(self.obj, "on_assignment", None)):
            self._call("on_assignment", assigned, generation)

    def _call(self, method: str, *args: Any) -> Any:
        try:
            return getattr(self.obj, method)(*args)
        except Exception as exc:
            raise AssignorError(f"assignor {self.name!r}: {method} raised "
                                f"{type(exc).__name__}: {exc}") from exc

    def __repr__(self) -> str:
        return f"UserAssignor({self.name!r})"


def user_assignor(value: Any) -> str | UserAssignor:
    """A ``partition_assignment_strategy`` item: a built-in name as it is, else the user
    assignor it is or names (``"module:attr"``; a class is instantiated once)."""
    if isinstance(value, UserAssignor):
        return value
    if isinstance(value, str) and ":" not in value:
        if value not in ASSIGNORS:
            raise ValueError(f"partition_assignment_strategy: unknown assignor {value!r}; "
                             f"the built-in ones are {', '.join(ASSIGNORS)}, or give an "
                             "assignor object (or 'module:attr' naming one)")
        return value
    obj = resolve(value, "partition_assignment_strategy")
    if isinstance(obj, str):
        return user_assignor(obj)
    if isinstance(obj, type):
        obj = obj()
    return UserAssignor(obj)


def get_assignor(name: Any):
    """The assignor instance for a protocol name (``range``, ``roundrobin``, ``sticky``,
    ``cooperative-sticky``), or the user assignor given."""
    if isinstance(name, UserAssignor):
        return name
    try:
        return ASSIGNORS[name]()
    except KeyError:
        raise ValueError(f"unknown partition assignment strategy {name!r}; "
                         f"choose from {', '.join(ASSIGNORS)}") from None
