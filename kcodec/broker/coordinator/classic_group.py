"""The group coordinator, classic protocol: membership and rebalances.

States (as Kafka names them)::

    Empty ──join──> PreparingRebalance ──all members joined / rebalance timeout──>
    CompletingRebalance ──leader's SyncGroup──> Stable ──join / leave / session timeout──>
    PreparingRebalance ...        (no members left: Empty; DeleteGroups: Dead)

A JoinGroup is answered when the rebalance completes: when every known member has rejoined,
or at the rebalance timeout (members that did not rejoin are removed). The leader (the old
one if it rejoined, else the first member) gets everyone's metadata for the protocol the most
members vote for among those all support. A SyncGroup waits for the leader's assignments.
Heartbeats during a rebalance answer REBALANCE_IN_PROGRESS; a member silent for its session
timeout is removed. Static members (``group_instance_id``) keep their place across restarts:
a rejoin under the same instance id takes over the old member id's assignment without a
rebalance (a returning leader gets the member list with ``skip_assignment``).

Committed offsets live in :class:`~kcodec.broker.coordinator.offsets.OffsetStore`, whose lock
this coordinator shares; here an OffsetCommit is checked against the generation and an
OffsetDelete against the members' subscriptions. A commit outside a generation, or a
transaction's, makes an Empty group (:meth:`GroupCoordinator.keep`). The store's log keeps
each group's protocol type too (an Empty group keeps it, as in Kafka), so the groups it read
back exist after a restart.

Membership survives a restart as in Kafka, whose coordinator writes a GroupMetadata record
to __consumer_offsets: when the leader's SyncGroup completes a generation (the group becomes
Stable) and when the group becomes Empty, this coordinator writes the group's generation,
protocol, leader and members (ids, instance ids, client, timeouts, protocols with their
metadata, assignment; bytes in base64) to the store's log (:meth:`GroupCoordinator.log_group`).
A coordinator built on a store that holds such a record restores the group Stable at that
generation with those members, each one's session starting afresh, so members that go on
heartbeating keep their assignments with no rebalance, and one that does not come back
expires after its session timeout; an Empty record restores the generation only.
"""

from __future__ import annotations

import base64
import concurrent.futures
import time
import uuid
import zlib
from collections import Counter, OrderedDict
from dataclasses import dataclass, field
from typing import Any

from kcodec.broker.coordinator.offsets import OffsetStore
from kcodec.protocol import ErrorCode

__all__ = ["GroupCoordinator", "Group", "Member", "JoinResult"]

E = ErrorCode


@dataclass
class JoinResult:
    error_code: int
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    member_id: str = ""
    members: list = field(default_factory=list)   # (member_id, instance_id, metadata)
    skip_assignment: bool = False


@dataclass
class Member:
    member_id: str
    instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocols: list                      # [(name, metadata bytes)]
    assignment: bytes = b""
    last_seen: float = field(default_factory=time.monotonic)
    join: concurrent.futures.Future | None = None
    sync: concurrent.futures.Future | None = None

    def metadata(self, protocol: str | None) -> bytes:
        for name, meta in self.protocols:
            if name == protocol:
                return meta
        return b""


@dataclass
class Group:
    group_id: str
    state: str = "Empty"
    generation: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str | None = None
    members: OrderedDict = field(default_factory=OrderedDict)   # member id -> Member
    static: dict = field(default_factory=dict)                  # instance id -> member id
    rebalance_deadline: float = 0.0
    rebalance_token: int = 0
    delayed_join: bool = False      # this rebalance began on an Empty group: it waits the delay


class GroupCoordinator:
    """The classic groups of one cluster; their committed offsets are ``offsets``'s (a
    store of its own, in memory, when none is given)."""

    def __init__(self, timer: Any, offsets: OffsetStore | None = None, *,
                 initial_rebalance_delay_ms: int = 0, min_session_timeout_ms: int = 1,
                 max_session_timeout_ms: int = 1800000) -> None:
        self.timer = timer
        #: group.min/max.session.timeout.ms: JoinGroup refuses session timeouts outside (the
        #: Cluster passes the broker's configs, Kafka's 6000 and 1800000 by default)
        self.min_session_timeout_ms = min_session_timeout_ms
        self.max_session_timeout_ms = max_session_timeout_ms
        self.offsets = OffsetStore() if offsets is None else offsets
        self.lock = self.offsets.lock     # one lock: a commit checks and writes in one step
        self.groups: dict[str, Group] = {}
        self.initial_rebalance_delay_ms = initial_rebalance_delay_ms
        for group_id, protocol_type in self.offsets.kept_groups():
            g = self.groups[group_id] = Group(group_id, protocol_type=protocol_type)
            rec = self.offsets.kept_metadata(group_id)
            if rec is not None:
                _restore(g, rec)
        timer.every(0.25, self._expire_sessions)

    def close(self) -> None:
        """Close the offsets log, then answer waiting joins and syncs COORDINATOR_NOT_AVAILABLE."""
        with self.lock:
            self.offsets.close()
            for g in self.groups.values():
                for m in g.members.values():
                    for fut in (m.join, m.sync):
                        if fut is not None and not fut.done():
                            fut.set_result(JoinResult(E.COORDINATOR_NOT_AVAILABLE) if fut is m.join
                                           else (E.COORDINATOR_NOT_AVAILABLE, b""))

    def keep(self, group_id: str) -> Group:
        """The record of ``group_id``, made Empty when there is none: committed offsets make a
        group exist, as in Kafka (the caller holds the lock)."""
        g = self.groups.get(group_id)
        if g is None or g.state == "Dead":
            g = self.groups[group_id] = Group(group_id)
        return g

    # ------------------------------------------------------------------ membership
    def session_timeout_error(self, session_timeout_ms: int) -> int:
        """INVALID_SESSION_TIMEOUT if a member's session timeout is outside
        group.min/max.session.timeout.ms (Kafka's bounds), else 0."""
        if self.min_session_timeout_ms <= session_timeout_ms <= self.max_session_timeout_ms:
            return 0
        return E.INVALID_SESSION_TIMEOUT

    def join(self, group_id: str, member_id: str, instance_id: str | None, protocol_type: str,
             protocols: list, session_timeout_ms: int, rebalance_timeout_ms: int,
             client_id: str, client_host: str) -> Any:
        """A JoinResult, or a Future of one."""
        if not group_id:
            return JoinResult(E.INVALID_GROUP_ID)
        if self.session_timeout_error(session_timeout_ms):
            return JoinResult(E.INVALID_SESSION_TIMEOUT)
        if rebalance_timeout_ms <= 0:
            rebalance_timeout_ms = session_timeout_ms
        if not protocol_type or not protocols:
            return JoinResult(E.INCONSISTENT_GROUP_PROTOCOL)
        with self.lock:
            g = self.keep(group_id)
            if g.members and (g.protocol_type != protocol_type or not self._common(g, protocols, member_id)):
                return JoinResult(E.INCONSISTENT_GROUP_PROTOCOL)
            if member_id and member_id not in g.members:
                return JoinResult(E.UNKNOWN_MEMBER_ID, member_id=member_id)
            if g.protocol_type != protocol_type:
                g.protocol_type = protocol_type
                self.offsets.log_protocol_type(group_id, protocol_type)
            if not member_id and instance_id is not None and instance_id in g.static:
                old = g.members.pop(g.static[instance_id], None)
                member_id = f"{instance_id}-{uuid.uuid4()}"
                m = Member(member_id, instance_id, client_id, client_host, session_timeout_ms,
                           rebalance_timeout_ms, list(protocols))
                g.members[member_id] = m
                g.static[instance_id] = member_id
                if old is not None:
                    m.assignment = old.assignment
                    for fut in (old.join, old.sync):   # the old instance is fenced
                        if fut is not None and not fut.done():
                            fut.set_result(JoinResult(E.FENCED_INSTANCE_ID) if fut is old.join
                                           else (E.FENCED_INSTANCE_ID, b""))
                    was_leader = g.leader == old.member_id
                    if was_leader:
                        g.leader = member_id
                    if g.state == "Stable" and old.protocols == m.protocols:
                        # no rebalance: the same assignment goes on under the new member id;
                        # a returning leader gets the members but must not reassign
                        self.log_group(g)    # the new member id is the one a restart knows
                        res = self._result(g, m, include_members=was_leader)
                        res.skip_assignment = was_leader
                        return res
                return self._rejoin(g, m)
            if not member_id:
                # Kafka names a static member after its instance id, a dynamic one after its client id
                prefix = instance_id if instance_id is not None else client_id or "member"
                member_id = f"{prefix}-{uuid.uuid4()}"
                m = Member(member_id, instance_id, client_id, client_host, session_timeout_ms,
                           rebalance_timeout_ms, list(protocols))
                g.members[member_id] = m
                if instance_id is not None:
                    g.static[instance_id] = member_id
                return self._rejoin(g, m)
            m = g.members[member_id]
            same = m.protocols == list(protocols)
            m.protocols = list(protocols)
            m.session_timeout_ms, m.rebalance_timeout_ms = session_timeout_ms, rebalance_timeout_ms
            m.last_seen = time.monotonic()
            if g.state == "Stable" and same and g.leader != member_id:
                return self._result(g, m, include_members=False)
            return self._rejoin(g, m)

    def _common(self, g: Group, protocols: list, member_id: str) -> bool:
        names = {n for n, _ in protocols}
        for mid, m in g.members.items():
            if mid != member_id:
                names &= {n for n, _ in m.protocols}
        return bool(names)

    def _rejoin(self, g: Group, m: Member) -> concurrent.futures.Future:
        if m.join is not None and not m.join.done():
            m.join.set_result(JoinResult(E.UNKNOWN_MEMBER_ID))   # superseded by this join
        m.join = concurrent.futures.Future()
        fut = m.join
        if g.state != "PreparingRebalance":
            self.prepare_rebalance(g, initial=g.state == "Empty")
        self._maybe_complete_join(g)
        return fut

    def prepare_rebalance(self, g: Group, initial: bool = False) -> None:
        """Move ``g`` to PreparingRebalance: waiting syncs are told to rejoin, and the
        rebalance completes when the members rejoin or its timeout passes."""
        for m in g.members.values():
            if m.sync is not None and not m.sync.done():
                m.sync.set_result((E.REBALANCE_IN_PROGRESS, b""))
            m.sync = None
        g.state = "PreparingRebalance"
        g.delayed_join = initial
        timeout = max((m.rebalance_timeout_ms for m in g.members.values()), default=0)
        delay = self.initial_rebalance_delay_ms if initial else timeout
        g.rebalance_deadline = time.monotonic() + delay / 1000
        g.rebalance_token += 1
        token = g.rebalance_token
        self.timer.call_at(g.rebalance_deadline, lambda: self._deadline(g, token))

    def _deadline(self, g: Group, token: int) -> None:
        with self.lock:
            if g.state == "PreparingRebalance" and g.rebalance_token == token:
                self._complete_join(g)

    def _maybe_complete_join(self, g: Group) -> None:
        if g.state != "PreparingRebalance":
            return
        if time.monotonic() < g.rebalance_deadline and self.initial_rebalance_delay_ms and g.delayed_join:
            return   # a rebalance of an Empty group waits the initial delay, as Kafka's does
                     # (whatever the generation: a group kept across a restart has one)
        if all(m.join is not None and not m.join.done() for m in g.members.values()):
            self._complete_join(g)

    def _complete_join(self, g: Group) -> None:
        for mid in [mid for mid, m in g.members.items() if m.join is None or m.join.done()]:
            self._remove(g, mid)
        g.generation += 1
        if not g.members:
            # as Kafka: an Empty group keeps its protocol type (a consumer group stays one)
            g.state, g.protocol_name, g.leader = "Empty", None, None
            self.log_group(g)
            return
        votes: Counter = Counter()
        common = set.intersection(*({n for n, _ in m.protocols} for m in g.members.values()))
        for m in g.members.values():
            for name, _ in m.protocols:
                if name in common:
                    votes[name] += 1
                    break
        g.protocol_name = max(votes, key=lambda n: votes[n]) if votes else None
        if g.leader not in g.members:
            g.leader = next(iter(g.members))
        g.state = "CompletingRebalance"
        now = time.monotonic()
        for m in g.members.values():
            m.last_seen = now
            fut, m.join = m.join, None
            if fut is not None and not fut.done():
                fut.set_result(self._result(g, m, include_members=m.member_id == g.leader))

    def _result(self, g: Group, m: Member, include_members: bool) -> JoinResult:
        members = []
        if include_members:
            members = [(x.member_id, x.instance_id, x.metadata(g.protocol_name)) for x in g.members.values()]
        return JoinResult(0, g.generation, g.protocol_type, g.protocol_name, g.leader or "",
                          m.member_id, members)

    def _remove(self, g: Group, member_id: str) -> None:
        m = g.members.pop(member_id, None)
        if m is None:
            return
        if m.instance_id is not None and g.static.get(m.instance_id) == member_id:
            del g.static[m.instance_id]
        for fut in (m.join, m.sync):
            if fut is not None and not fut.done():
                fut.set_result(JoinResult(E.UNKNOWN_MEMBER_ID) if fut is m.join
                               else (E.UNKNOWN_MEMBER_ID, b""))
        if g.leader == member_id:
            g.leader = None

    def _find(self, group_id: str, member_id: str, instance_id: str | None) -> tuple[int, Any, Any]:
        g = self.groups.get(group_id)
        if g is None or g.state == "Dead":
            return E.UNKNOWN_MEMBER_ID, None, None
        if instance_id is not None and instance_id in g.static and g.static[instance_id] != member_id:
            return E.FENCED_INSTANCE_ID, g, None
        m = g.members.get(member_id)
        if m is None:
            return E.UNKNOWN_MEMBER_ID, g, None
        return 0, g, m

    def sync(self, group_id: str, generation: int, member_id: str, instance_id: str | None,
             assignments: dict[str, bytes]) -> Any:
        """``(error_code, assignment)`` or a Future of it; also the protocol (type, name)."""
        with self.lock:
            code, g, m = self._find(group_id, member_id, instance_id)
            if code:
                return code, b""
            if generation != g.generation:
                return E.ILLEGAL_GENERATION, b""
            m.last_seen = time.monotonic()
            if g.state == "PreparingRebalance":
                return E.REBALANCE_IN_PROGRESS, b""
            if g.state == "Stable":
                return 0, m.assignment
            fut: concurrent.futures.Future = concurrent.futures.Future()
            if m.sync is not None and not m.sync.done():
                m.sync.set_result((E.REBALANCE_IN_PROGRESS, b""))
            m.sync = fut
            if member_id == g.leader:
                for mid, x in g.members.items():
                    x.assignment = assignments.get(mid, b"")
                g.state = "Stable"
                self.log_group(g)    # before any member is answered, as Kafka stores it first
                for x in g.members.values():
                    if x.sync is not None and not x.sync.done():
                        x.sync.set_result((0, x.assignment))
                    x.sync = None
            return fut

    def heartbeat(self, group_id: str, generation: int, member_id: str, instance_id: str | None) -> int:
        with self.lock:
            code, g, m = self._find(group_id, member_id, instance_id)
            if code:
                return code
            m.last_seen = time.monotonic()
            if g.state == "PreparingRebalance":
                return E.REBALANCE_IN_PROGRESS
            if generation != g.generation:
                return E.ILLEGAL_GENERATION
            return 0

    def leave(self, group_id: str, members: list[tuple[str, str | None]]) -> tuple[int, list[int]]:
        with self.lock:
            g = self.groups.get(group_id)
            if g is None:
                return E.UNKNOWN_MEMBER_ID, [E.UNKNOWN_MEMBER_ID] * len(members)
            codes: list[int] = []
            for member_id, instance_id in members:
                mid = member_id
                if instance_id is not None:
                    known = g.static.get(instance_id)
                    if known is None:
                        codes.append(E.UNKNOWN_MEMBER_ID)
                        continue
                    if member_id and member_id != known:
                        codes.append(E.FENCED_INSTANCE_ID)
                        continue
                    mid = known
                if mid not in g.members:
                    codes.append(E.UNKNOWN_MEMBER_ID)
                    continue
                self._remove(g, mid)
                codes.append(0)
            if any(c == 0 for c in codes):
                self._after_removal(g)
            return 0, codes

    def _after_removal(self, g: Group) -> None:
        if not g.members:
            if g.state == "PreparingRebalance":
                g.rebalance_token += 1
            g.generation += 1 if g.state != "Empty" else 0
            g.state, g.leader, g.protocol_name = "Empty", None, None
            self.log_group(g)
        elif g.state in ("Stable", "CompletingRebalance"):
            self.prepare_rebalance(g)
        else:
            self._maybe_complete_join(g)

    def log_group(self, g: Group) -> None:
        """Write ``g``'s metadata to the store's log, as Kafka's GroupMetadata record: its
        members with their assignments when Stable, none otherwise (the caller holds the
        lock). A restart restores the group from the latest one."""
        members = [] if g.state != "Stable" else [
            {"id": m.member_id, "iid": m.instance_id, "cid": m.client_id, "host": m.client_host,
             "sto": m.session_timeout_ms, "rto": m.rebalance_timeout_ms,
             "protocols": [[name, _b64(meta)] for name, meta in m.protocols],
             "asg": _b64(m.assignment)}
            for m in g.members.values()]
        self.offsets.log_group_metadata(g.group_id, {
            "gen": g.generation, "pt": g.protocol_type, "pn": g.protocol_name,
            "leader": g.leader if members else None, "ts": int(time.time() * 1000),
            "members": members})

    def _expire_sessions(self) -> None:
        now = time.monotonic()
        with self.lock:
            for g in list(self.groups.values()):
                dead = [mid for mid, m in g.members.items()
                        if (m.join is None or m.join.done()) and (m.sync is None or m.sync.done())
                        and now - m.last_seen > m.session_timeout_ms / 1000]
                for mid in dead:
                    self._remove(g, mid)
                if dead:
                    self._after_removal(g)

    # ------------------------------------------------------------------ offset rules
    def commit(self, group_id: str, generation: int, member_id: str, instance_id: str | None,
               offsets: list[tuple[str, int, int, int, str | None]]) -> int:
        with self.lock:
            g = self.groups.get(group_id)
            if generation < 0 and (g is None or not g.members):
                # as Kafka: generation -1 commits to a group without members are accepted,
                # whatever member id they carry (an admin client, or a consumer that assigns
                # its partitions itself)
                self.keep(group_id)
            elif generation < 0 and not member_id and instance_id is None:
                return E.UNKNOWN_MEMBER_ID
            else:
                code, g, m = self._find(group_id, member_id, instance_id)
                if code:
                    return E.ILLEGAL_GENERATION if code == E.UNKNOWN_MEMBER_ID and g is None else code
                if generation != g.generation:
                    return E.ILLEGAL_GENERATION
                if g.state == "CompletingRebalance":
                    return E.REBALANCE_IN_PROGRESS
                m.last_seen = time.monotonic()
            self.offsets.commit(group_id, offsets)
            return 0

    def delete_offsets(self, group_id: str, partitions: list[tuple[str, int]],
                       subscribed: set[str] | None = None) -> tuple[int, dict]:
        """OffsetDelete as Kafka does it: ``(group error, {(topic, partition): error})``.
        A group with members refuses the partitions of topics it subscribes to
        (GROUP_SUBSCRIBED_TO_TOPIC) and deletes the rest; a live classic group that does not
        speak the consumer protocol (so its subscriptions are unknown) refuses all
        (NON_EMPTY_GROUP). ``subscribed``: a consumer-protocol group's topics, which the
        caller knows (its members are not here)."""
        with self.lock:
            g = self.groups.get(group_id)
            if g is None or g.state == "Dead":
                return E.GROUP_ID_NOT_FOUND, {}
            every = False       # the subscriptions could not be read: every topic refused
            if subscribed is None and g.members:
                if g.protocol_type != "consumer":
                    return E.NON_EMPTY_GROUP, {}
                subscribed = self._subscribed_topics(g)
                every = subscribed is None
            out: dict = {}
            for tp in partitions:
                refused = every or (subscribed is not None and tp[0] in subscribed)
                out[tp] = E.GROUP_SUBSCRIBED_TO_TOPIC if refused else 0
            self.offsets.delete(group_id, [tp for tp, code in out.items() if not code])
            return 0, out

    def _subscribed_topics(self, g: Group) -> set[str] | None:
        """The topics a live consumer-type group's members subscribe to, from their JoinGroup
        metadata; None when one cannot be read."""
        from kcodec.errors import KcodecError
        from kcodec.protocol.consumer import ConsumerProtocolSubscription, decode_versioned

        topics: set[str] = set()
        for m in g.members.values():
            meta = m.metadata(g.protocol_name) if g.protocol_name else (
                m.protocols[0][1] if m.protocols else b"")
            try:
                topics.update(decode_versioned(ConsumerProtocolSubscription, meta)[1].topics or ())
            except (KcodecError, ValueError):
                return None
        return topics

    def delete_group(self, group_id: str) -> int:
        with self.lock:
            # sessions that ran out since the last sweep (every 0.25 s) end now, as Kafka's
            # heartbeat timer ends them at the deadline: static members that closed a session
            # timeout ago are gone (librdkafka's 0081 deletes their group right then)
            self._expire_sessions()
            g = self.groups.get(group_id)
            if g is None or g.state == "Dead":
                return E.GROUP_ID_NOT_FOUND
            if g.members:
                return E.NON_EMPTY_GROUP
            g.state = "Dead"
            del self.groups[group_id]
            self.offsets.delete_group(group_id)
            return 0


def _b64(data: bytes) -> str:
    return base64.b64encode(bytes(data)).decode("ascii")


def _restore(g: Group, rec: dict) -> None:
    """Give the Empty group ``g`` what its metadata record ``rec`` (written by
    :meth:`GroupCoordinator.log_group`) says: its generation and, when it had members, those
    members, Stable, each one's session timer started now. A record that cannot be read
    leaves the group Empty."""
    def unb64(text: str) -> bytes:
        return base64.b64decode(text, validate=True)
    try:
        generation = int(rec["gen"])
        members = [Member(str(x["id"]), x.get("iid"), str(x["cid"]), str(x["host"]),
                          int(x["sto"]), int(x["rto"]),
                          [(str(name), unb64(meta)) for name, meta in x["protocols"]],
                          assignment=unb64(x["asg"]))
                   for x in rec.get("members") or ()]
    except (KeyError, TypeError, ValueError):
        return
    g.generation = generation
    if not members:
        return
    g.protocol_type, g.protocol_name = rec.get("pt"), rec.get("pn")
    for m in members:
        g.members[m.member_id] = m
        if m.instance_id is not None:
            g.static[m.instance_id] = m.member_id
    leader = rec.get("leader")
    g.leader = leader if leader in g.members else next(iter(g.members))
    g.state = "Stable"


def coordinator_index(group_id: str, n: int) -> int:
    """Which of ``n`` nodes coordinates ``group_id`` (a stable hash, as Kafka's partition of
    __consumer_offsets)."""
    return zlib.crc32(group_id.encode()) % max(n, 1)
