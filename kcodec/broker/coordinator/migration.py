"""Online migration between the classic group protocol and the consumer protocol (KIP-848),
as Kafka's ``group.consumer.migration.policy`` rules it (``bidirectional``, the default here
as in Kafka 4.0; ``upgrade``, ``downgrade`` or ``disabled``):

* **upgrade**: a consumer-protocol member (ConsumerGroupHeartbeat at epoch 0) joins a classic
  group that has members of protocol type ``consumer``. The group becomes a consumer group
  whose members are the classic ones, each keeping its subscription (from its JoinGroup
  metadata), its current assignment (from the last SyncGroup) and, as its member epoch, the
  classic generation; the target assignment starts as that assignment, so nothing moves
  until the new member's join bumps the group epoch. From then on the server assigns: a
  classic member is told REBALANCE_IN_PROGRESS in a Heartbeat when its assignment changes,
  rejoins, gives up what it must first (revocation before reassignment), and the new member
  gets a partition only once no other member holds it. A rebalance the classic group had in
  flight is answered REBALANCE_IN_PROGRESS; the members rejoin into the converted group.
* **downgrade**: the last consumer-protocol member leaves (or is dropped) and classic members
  remain. The group becomes a classic group again: the same member ids, protocols and
  assignments, the group epoch as generation, and a rebalance begins (their next Heartbeat
  says REBALANCE_IN_PROGRESS) so the classic leader assigns the partitions the leaver had.

Committed offsets live in the offset store (:mod:`kcodec.broker.coordinator.offsets`), which
neither direction touches, so neither loses them.
"""

from __future__ import annotations

from typing import Any

from kcodec.errors import KcodecError
from kcodec.protocol import ConsumerProtocolAssignment
from kcodec.protocol.consumer import (
    ConsumerProtocolSubscription,
    decode_versioned,
    encode_versioned,
)

__all__ = ["POLICIES", "upgrade_allowed", "downgrade_allowed", "upgrade", "downgrade"]

POLICIES = ("bidirectional", "upgrade", "downgrade", "disabled")


def check_policy(policy: str) -> str:
    p = policy.lower()
    if p not in POLICIES:
        raise ValueError(f"group_consumer_migration_policy must be one of {', '.join(POLICIES)}, "
                         f"got {policy!r}")
    return p


def upgrade_allowed(policy: str) -> bool:
    return policy in ("bidirectional", "upgrade")


def downgrade_allowed(policy: str) -> bool:
    return policy in ("bidirectional", "downgrade")


def _subscription(meta: bytes) -> list[str]:
    try:
        _, sub = decode_versioned(ConsumerProtocolSubscription, meta)
    except (KcodecError, ValueError):
        return []
    return sorted(sub.topics or [])


def _assignment(data: bytes) -> dict[str, set[int]]:
    if not data:
        return {}
    try:
        _, a = decode_versioned(ConsumerProtocolAssignment, data)
    except (KcodecError, ValueError):
        return {}
    out: dict[str, set[int]] = {}
    for tp in a.assigned_partitions or []:
        out.setdefault(tp.topic, set()).update(tp.partitions)
    return out


def upgrade(consumer: Any, classic: Any, group_id: str) -> bool:
    """Turn the non-empty classic group ``group_id`` into a consumer group (the caller holds
    ``consumer.lock``). False when it cannot be converted: not a ``consumer`` protocol group."""
    from kcodec.broker.coordinator.classic_group import JoinResult
    from kcodec.broker.coordinator.consumer_group import ConsumerGroup, ConsumerMember
    from kcodec.protocol import ErrorCode

    with classic.lock:
        g = classic.groups.get(group_id)
        if g is None or not g.members:
            return True
        if g.protocol_type != "consumer":
            return False
        cg = ConsumerGroup(group_id, epoch=g.generation, assignment_epoch=g.generation,
                           assignor=consumer.default_assignor)
        taken: set[tuple[str, int]] = set()
        for m in g.members.values():
            meta = m.metadata(g.protocol_name) or (m.protocols[0][1] if m.protocols else b"")
            owned = _assignment(m.assignment)
            # a partition two members claim (assignments of different generations) goes
            # to neither until the server assigns it
            mine = {t: {p for p in ps if (t, p) not in taken} for t, ps in owned.items()}
            mine = {t: ps for t, ps in mine.items() if ps}
            taken.update((t, p) for t, ps in owned.items() for p in ps)
            cm = ConsumerMember(m.member_id, m.client_id, m.client_host, m.instance_id,
                                epoch=g.generation, classic=True,
                                session_timeout_ms=m.session_timeout_ms)
            cm.topics = _subscription(meta)
            cm.rebalance_timeout_ms = m.rebalance_timeout_ms
            cm.protocols = list(m.protocols)
            cm.assigned = mine
            cm.sent = {t: set(ps) for t, ps in mine.items()}
            cm.last_seen = m.last_seen
            cg.members[m.member_id] = cm
            cg.target[m.member_id] = {t: set(ps) for t, ps in mine.items()}
        cg.partition_counts = consumer.count_partitions({t for m in cg.members.values() for t in m.topics})
        # the classic record stays, Empty (the offsets are the store's); a rebalance in
        # flight is answered
        for m in g.members.values():
            if m.join is not None and not m.join.done():
                m.join.set_result(JoinResult(ErrorCode.REBALANCE_IN_PROGRESS,
                                             member_id=m.member_id))
            if m.sync is not None and not m.sync.done():
                m.sync.set_result((ErrorCode.REBALANCE_IN_PROGRESS, b""))
            m.join = m.sync = None
        g.members.clear()
        g.static.clear()
        g.rebalance_token += 1
        g.state, g.leader, g.protocol_name, g.protocol_type = "Empty", None, None, None
        classic.log_group(g)   # a restart must not bring the classic members back
        consumer.groups[group_id] = cg
        return True


def downgrade(consumer: Any, classic: Any, cg: Any) -> None:
    """Turn the consumer group ``cg``, whose members are all classic, into a classic group
    that starts a rebalance (the caller holds ``consumer.lock``)."""
    from kcodec.broker.coordinator.classic_group import Member

    A = ConsumerProtocolAssignment
    with classic.lock:
        g = classic.keep(cg.group_id)
        g.generation = max(g.generation, cg.epoch)
        g.protocol_type = "consumer"
        names = None
        for cm in cg.members.values():
            mine = [n for n, _ in cm.protocols]
            names = mine if names is None else [n for n in names if n in mine]
        g.protocol_name = (names or [None])[0]
        g.members.clear()
        g.static.clear()
        for cm in cg.members.values():
            data = encode_versioned(A(assigned_partitions=[
                A.TopicPartition(topic=t, partitions=sorted(ps))
                for t, ps in sorted(cm.assigned.items())]), 0)
            m = Member(cm.member_id, cm.instance_id, cm.client_id, cm.client_host,
                       cm.session_timeout_ms or consumer.session_timeout_ms,
                       cm.rebalance_timeout_ms, list(cm.protocols), assignment=data)
            m.last_seen = cm.last_seen
            g.members[cm.member_id] = m
            if cm.instance_id is not None:
                g.static[cm.instance_id] = cm.member_id
        g.leader = next(iter(g.members), None)
        g.state = "Stable"
        classic.prepare_rebalance(g)           # the classic members rejoin; their leader assigns
    consumer.groups.pop(cg.group_id, None)
