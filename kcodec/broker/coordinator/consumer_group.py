"""The group coordinator, consumer protocol (KIP-848): server-side assignment.

A member joins with a ConsumerGroupHeartbeat at epoch 0 and keeps heartbeating; the
coordinator owns the assignment::

    join / leave / subscription change / session timeout / partition count change
        -> group epoch + 1 -> new target assignment (the assignor, over every member)
    each heartbeat reconciles that member towards its target:
        owned partitions no longer in the target -> revoke first (epoch unchanged)
        once the member reports them gone -> its epoch becomes the target epoch and it gets
        the target minus partitions another member has not released yet (they follow later)

Mixed groups: a classic member (JoinGroup/SyncGroup/Heartbeat) may join a group that
consumer-protocol members created. Its subscription and owned partitions come from its
JoinGroup metadata, its generation is its member epoch, its assignment is reconciled at
each JoinGroup and handed out in SyncGroup, and when it must change, its Heartbeat answers
REBALANCE_IN_PROGRESS so that it rejoins (reporting what it still owns).

Migration (:mod:`kcodec.broker.coordinator.migration`): with ``classic`` set to the classic
coordinator, a consumer-protocol member joining a non-empty classic group converts it into a
consumer group (``upgrade_classic``), and a group left with classic members only goes back
to the classic protocol, as ``migration_policy`` allows.

Regular-expression subscriptions (``SubscribedTopicRegex``, RE2/J syntax, matched against
whole topic names: :mod:`kcodec.broker.coordinator.topic_regex`): a member's topics are its
named ones and those its pattern matches now (a pattern new to the group matches from
REGEX_S after it is first seen, as Kafka resolves patterns apart from the heartbeat: named
topics come first); a topic created or deleted that changes what a
pattern matches bumps the group epoch at the next heartbeat, so new matching topics are
assigned and deleted ones dropped. A pattern RE2 rejects is INVALID_REGULAR_EXPRESSION.

The assignment goes in a heartbeat's answer when it changed since the last one sent, when
the member joins, and on a full request (rebalance timeout, subscription and owned
partitions all set): a member sends one after a heartbeat that failed, as its answer, with a
new assignment in it, may have been lost on the way.

A member that does not heartbeat for the session timeout, or does not revoke within its
rebalance timeout, is removed (its partitions become free). A heartbeat at a stale epoch
answers FENCED_MEMBER_EPOCH; the member rejoins at epoch 0 with its member id.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kcodec.broker.coordinator.topic_regex import RegexError, Resolver, compile_regex
from kcodec.protocol import ErrorCode

__all__ = ["ConsumerGroupCoordinator", "ConsumerGroup", "ConsumerMember", "ASSIGNORS"]

E = ErrorCode
Owned = dict   # topic -> set[int]
REGEX_S = 0.2               # a new pattern's matches count this long after it is first seen
REGEX_HEARTBEAT_MS = 250    # the heartbeat interval meanwhile


def _sticky_uniform(members: dict[str, list[str]], partitions: dict[str, int],
                    current: dict[str, Owned]) -> dict[str, Owned]:
    """Kafka's uniform assignor when every member subscribes to the same topics: each
    member keeps what it had up to its quota (the lowest partitions first), the rest go to
    the members below it, so a rebalance moves as few partitions as it can."""
    order = sorted(members)
    every = [(t, p) for t in sorted(partitions) if t in members[order[0]]
             for p in range(partitions[t])]
    quota, extra = divmod(len(every), len(order))
    valid = set(every)
    taken: set[tuple[str, int]] = set()
    out: dict[str, Owned] = {m: {} for m in order}
    for m in order:
        had = sorted((t, p) for t, ps in current.get(m, {}).items() for p in ps
                     if (t, p) in valid and (t, p) not in taken)
        keep = len(had)
        if keep > quota:
            keep = quota + 1 if extra > 0 else quota
        if keep == quota + 1:
            extra -= 1
        for t, p in had[:keep]:
            out[m].setdefault(t, set()).add(p)
            taken.add((t, p))
    free = iter([tp for tp in every if tp not in taken])
    counts = {m: sum(len(ps) for ps in out[m].values()) for m in order}
    for m in order:
        while counts[m] < quota:
            t, p = next(free)
            out[m].setdefault(t, set()).add(p)
            counts[m] += 1
    for m in order:
        if extra > 0 and counts[m] == quota:
            tp = next(free, None)
            if tp is None:
                break
            out[m].setdefault(tp[0], set()).add(tp[1])
            extra -= 1
    return out


def uniform_assign(members: dict[str, list[str]], partitions: dict[str, int],
                   current: dict[str, Owned] | None = None) -> dict[str, Owned]:
    """Every partition of the subscribed topics, spread evenly. When all members subscribe
    to the same topics, sticky as Kafka's (``current``: the previous target); otherwise
    each partition goes to the least loaded member subscribed to its topic, topics with
    fewer subscribers first, as they leave the least choice."""
    if members and len({tuple(sorted(ts)) for ts in members.values()}) == 1:
        return _sticky_uniform(members, partitions, current or {})
    out: dict[str, Owned] = {m: {} for m in members}
    load = {m: 0 for m in members}
    order = sorted(partitions, key=lambda t: (sum(t in ts for ts in members.values()), t))
    for topic in order:
        subs = sorted(m for m, ts in members.items() if topic in ts)
        for p in range(partitions[topic]):
            if not subs:
                break
            m = min(subs, key=lambda x: (load[x], x))
            out[m].setdefault(topic, set()).add(p)
            load[m] += 1
    return out


def range_assign(members: dict[str, list[str]], partitions: dict[str, int],
                 current: dict[str, Owned] | None = None) -> dict[str, Owned]:
    """Per topic, contiguous ranges: the first ``n % k`` members get one more (``current``
    is not used: ranges follow the member order)."""
    out: dict[str, Owned] = {m: {} for m in members}
    for topic in sorted(partitions):
        subs = sorted(m for m, ts in members.items() if topic in ts)
        if not subs:
            continue
        n, k = partitions[topic], len(subs)
        start = 0
        for i, m in enumerate(subs):
            count = n // k + (1 if i < n % k else 0)
            if count:
                out[m][topic] = set(range(start, start + count))
            start += count
    return out


ASSIGNORS = {"uniform": uniform_assign, "range": range_assign}


def _copy(o: Owned) -> Owned:
    return {t: set(ps) for t, ps in o.items() if ps}


def _minus(a: Owned, b: Owned) -> Owned:
    return {t: ps - b.get(t, set()) for t, ps in a.items() if ps - b.get(t, set())}


def _and(a: Owned, b: Owned) -> Owned:
    return {t: ps & b.get(t, set()) for t, ps in a.items() if ps & b.get(t, set())}


@dataclass
class ConsumerMember:
    member_id: str
    client_id: str
    client_host: str
    instance_id: str | None = None
    rack_id: str | None = None
    epoch: int = 0
    previous_epoch: int = -1
    state: str = "STABLE"            # STABLE, UNREVOKED_PARTITIONS, UNRELEASED_PARTITIONS
    topics: list = field(default_factory=list)
    regex: str | None = None         # SubscribedTopicRegex (RE2/J), or None
    principal: str | None = None     # who heartbeats for it, and from where: a pattern
    auth_host: str = ""              # matches only topics they may DESCRIBE
    rebalance_timeout_ms: int = 300000
    assigned: Owned = field(default_factory=dict)      # what the member may own now
    revoking: Owned = field(default_factory=dict)      # what it must give up first
    sent: Owned | None = None                          # the assignment last sent to it
    last_seen: float = field(default_factory=time.monotonic)
    revoke_deadline: float = 0.0
    classic: bool = False            # joined with JoinGroup (a mixed group, as Kafka allows)
    session_timeout_ms: int = 0      # classic members bring their own
    protocols: list = field(default_factory=list)   # a classic member's (name, metadata)


@dataclass
class ConsumerGroup:
    group_id: str
    epoch: int = 0
    assignment_epoch: int = 0
    assignor: str = "uniform"
    members: dict = field(default_factory=dict)         # member id -> ConsumerMember
    target: dict = field(default_factory=dict)          # member id -> Owned
    partition_counts: dict = field(default_factory=dict)
    subscribed: dict = field(default_factory=dict)      # member id -> topics the target used
    topic_ids: dict = field(default_factory=dict)       # topic -> the id the target used
    # a pattern a member brings is resolved a moment later, as Kafka resolves them apart
    # from the heartbeat: pattern -> when its matches count
    regex_ready: dict = field(default_factory=dict)

    @property
    def state(self) -> str:
        if not self.members:
            return "Empty"
        if self.assignment_epoch < self.epoch:
            return "Assigning"
        if any(m.epoch != self.assignment_epoch or m.state != "STABLE" for m in self.members.values()):
            return "Reconciling"
        return "Stable"


class ConsumerGroupCoordinator:
    """Consumer-protocol groups of one cluster (``cluster_state`` gives topics and ids)."""

    def __init__(self, timer: Any, cluster_state: Any, *, session_timeout_ms: int = 45000,
                 heartbeat_interval_ms: int = 5000, assignor: str = "uniform") -> None:
        self.state = cluster_state
        self.lock = threading.RLock()
        self.groups: dict[str, ConsumerGroup] = {}
        self.session_timeout_ms = session_timeout_ms
        self.heartbeat_interval_ms = heartbeat_interval_ms
        #: per-group configs (kcodec.broker.share.configs.ShareConfigs), set by the Cluster
        self.group_configs: Any = None
        self.default_assignor = assignor
        self.classic: Any = None               # the classic GroupCoordinator (migration)
        self.migration_policy = "bidirectional"
        self.regexes = Resolver()
        #: (principal, host, names) -> the names that principal may DESCRIBE; None: all.
        #: A pattern subscription is limited to those, as Kafka's (KAFKA-18813)
        self.describable: Callable[[str, str, set[str]], set[str]] | None = None
        timer.every(0.25, self._expire)

    # ------------------------------------------------------------------ topics
    def count_partitions(self, topics: set[str]) -> dict[str, int]:
        """The partition count of each of ``topics`` that exists (the assignor's input)."""
        out = {}
        for t in topics:
            topic = self.state.topics.get(t)
            if topic is not None:
                out[t] = len(topic.partitions)
        return out

    def topic_id(self, name: str) -> uuid.UUID | None:
        t = self.state.topics.get(name)
        return None if t is None else t.topic_id

    def topic_name(self, tid: uuid.UUID) -> str | None:
        for t in list(self.state.topics.values()):
            if t.topic_id == tid:
                return t.name
        return None

    # ------------------------------------------------------------------ heartbeat
    def heartbeat(self, group_id: str, member_id: str, epoch: int, *, instance_id: str | None,
                  rack_id: str | None, rebalance_timeout_ms: int, topics: list[str] | None,
                  assignor: str | None, owned: Owned | None, client_id: str,
                  client_host: str, regex: str | None = None, principal: str | None = None,
                  auth_host: str = ""
                  ) -> tuple[int, str | None, str, int, Owned | None]:
        """``(error, message, member_id, member_epoch, assignment or None if unchanged)``.
        ``regex``: the member's SubscribedTopicRegex (None: unchanged, "": none);
        ``principal``/``auth_host``: who sends the heartbeat (what its pattern may match)."""
        if assignor is not None and assignor not in ASSIGNORS:
            return E.UNSUPPORTED_ASSIGNOR, f"assignors: {', '.join(ASSIGNORS)}", member_id, epoch, None
        if regex:
            try:
                compile_regex(regex)
            except RegexError as exc:
                return E.INVALID_REGULAR_EXPRESSION, str(exc), member_id, epoch, None
        with self.lock:
            g = self.groups.get(group_id)
            if epoch == 0:
                if not topics and not regex and (g is None or member_id not in g.members):
                    return E.INVALID_REQUEST, "a joining member must subscribe", member_id, 0, None
                if g is not None and instance_id is not None and any(
                        x.instance_id == instance_id and x.member_id != member_id
                        for x in g.members.values()):
                    # as Kafka: a static instance id another live member holds (it has not
                    # left with epoch -2) is refused, and the client fails fatally
                    return (E.UNRELEASED_INSTANCE_ID,
                            f"instance id {instance_id!r} is in use by another member",
                            member_id, 0, None)
                if g is None:
                    g = self.groups[group_id] = ConsumerGroup(group_id, assignor=self.default_assignor)
                if assignor is not None:
                    g.assignor = assignor
                member_id = member_id or uuid.uuid4().hex
                m = g.members.get(member_id)
                if m is not None:   # a rejoin after fencing: start over, owning nothing
                    self._remove(g, member_id)
                m = g.members[member_id] = ConsumerMember(member_id, client_id, client_host,
                                                          instance_id, rack_id)
                m.topics = sorted(topics or [])
                m.regex = regex or None
                m.principal, m.auth_host = principal, auth_host
                m.rebalance_timeout_ms = rebalance_timeout_ms if rebalance_timeout_ms > 0 else 300000
                self._bump(g)
            else:
                m = g.members.get(member_id) if g is not None else None
                if g is None or m is None:
                    return E.UNKNOWN_MEMBER_ID, None, member_id, epoch, None
                if epoch < 0:   # -1 leave, -2 static leave: both give the partitions up here
                    self._remove(g, member_id)
                    self._bump(g)
                    self._maybe_downgrade(g)
                    return 0, None, member_id, epoch, None
                if epoch != m.epoch and not (epoch == m.previous_epoch and owned is not None
                                             and not _minus(owned, m.assigned)):
                    return E.FENCED_MEMBER_EPOCH, None, member_id, m.epoch, None
                if topics is not None and sorted(topics) != m.topics:
                    m.topics = sorted(topics)
                    self._bump(g)
                if regex is not None and (regex or None) != m.regex:
                    m.regex = regex or None
                    self._bump(g)
                if principal is not None and (principal, auth_host) != (m.principal,
                                                                         m.auth_host):
                    m.principal, m.auth_host = principal, auth_host
                    self._bump(g)
                if assignor is not None and assignor != g.assignor:
                    g.assignor = assignor
                    self._bump(g)
            m.last_seen = time.monotonic()
            self._check_partition_counts(g)
            if owned is not None and m.state == "UNREVOKED_PARTITIONS" and not _and(owned, m.revoking):
                m.revoking = {}
                m.state = "STABLE"
            self._reconcile(g, m, owned)
            # a full request (what a member sends after a heartbeat whose answer it did not
            # get) is answered with the whole assignment: the lost answer may have carried it
            full = rebalance_timeout_ms != -1 and owned is not None and (
                topics is not None or regex is not None)
            out = None
            if full or m.sent is None or m.sent != m.assigned:
                out = m.sent = _copy(m.assigned)
            return 0, None, member_id, m.epoch, out

    def _subscribed(self, g: ConsumerGroup) -> dict[str, list[str]]:
        """Each member's topics: its named ones and what its pattern matches now."""
        names = self.state.topics.keys()
        now = time.monotonic()
        if g.regex_ready:     # a pattern no member uses is forgotten (resolved anew later)
            used = {m.regex for m in g.members.values() if m.regex}
            if len(used) < len(g.regex_ready):
                g.regex_ready = {r: t for r, t in g.regex_ready.items() if r in used}
        out = {}
        for mid, m in g.members.items():
            if m.regex:
                # as Kafka: a new pattern matches nothing until it is resolved, so named
                # topics are assigned first and the matched ones at a later heartbeat
                at = g.regex_ready.setdefault(m.regex, now + REGEX_S)
                matched = set(self.regexes.matches(m.regex, list(names))) if now >= at else set()
                if self.describable is not None and matched:
                    # only what the member's principal may describe (KAFKA-18813)
                    matched = self.describable(m.principal or "User:ANONYMOUS", m.auth_host,
                                               matched)
                out[mid] = sorted(set(m.topics) | matched)
            else:
                out[mid] = m.topics
        return out

    def _ids(self, topics: set[str]) -> dict[str, uuid.UUID]:
        out = {}
        for t in topics:
            topic = self.state.topics.get(t)
            if topic is not None:
                out[t] = topic.topic_id
        return out

    def _bump(self, g: ConsumerGroup) -> None:
        """The membership or subscriptions changed: a new group epoch and target."""
        g.epoch += 1
        subs = self._subscribed(g)
        g.subscribed = subs
        g.partition_counts = self.count_partitions({t for ts in subs.values() for t in ts})
        ids = self._ids(set(g.partition_counts))
        if any(g.topic_ids.get(t, i) != i for t, i in ids.items()):
            for m in g.members.values():
                m.sent = None       # the same names, other ids: send every assignment again
        g.topic_ids = ids
        g.target = ASSIGNORS[g.assignor](subs, g.partition_counts, g.target) if subs else {}
        g.assignment_epoch = g.epoch

    def _check_partition_counts(self, g: ConsumerGroup) -> None:
        """A topic's partition count or id changed (deleted and created again), or a
        pattern matches other topics now (one created or deleted): a new target."""
        subs = self._subscribed(g)
        if not g.subscribed:          # a group set up without a bump (migration)
            g.subscribed = subs
        topics = {t for ts in subs.values() for t in ts}
        if subs != g.subscribed or self.count_partitions(topics) != g.partition_counts or (
                g.topic_ids and self._ids(topics) != g.topic_ids):
            self._bump(g)   # (a topic deleted and created again has another id)

    def _reconcile(self, g: ConsumerGroup, m: ConsumerMember, owned: Owned | None = None) -> None:
        """Move ``m`` toward its target; ``owned``: what this heartbeat says the member owns
        (None: not said)."""
        target = g.target.get(m.member_id, {})
        if m.state == "UNREVOKED_PARTITIONS":
            return   # wait until the member reports the revoked partitions gone
        revoke = _minus(m.assigned, target)
        # as Kafka's: a revocation round only if the member may still own what it must give
        # up; one whose heartbeat says it owns none of it (it lost them, or never took them)
        # goes to the target epoch at once. Waiting would wait for a report the member has
        # already made, and hold those partitions from their new owners until the deadline
        if revoke and (owned is None or _and(owned, revoke)):
            m.assigned = _and(m.assigned, target)
            m.revoking = revoke
            m.state = "UNREVOKED_PARTITIONS"
            m.revoke_deadline = time.monotonic() + m.rebalance_timeout_ms / 1000
            return
        # partitions still held (or being revoked) by another member come later
        m.assigned = _minus(target, self._held_by_others(g, m))
        if m.epoch != g.assignment_epoch:
            m.previous_epoch, m.epoch = m.epoch, g.assignment_epoch
        m.state = "UNRELEASED_PARTITIONS" if _minus(target, m.assigned) else "STABLE"

    def _held_by_others(self, g: ConsumerGroup, m: ConsumerMember) -> Owned:
        held: Owned = {}
        for other in g.members.values():
            if other is not m:
                for t, ps in list(other.assigned.items()) + list(other.revoking.items()):
                    held.setdefault(t, set()).update(ps)
        return held

    def _remove(self, g: ConsumerGroup, member_id: str) -> None:
        g.members.pop(member_id, None)
        g.target.pop(member_id, None)

    def _expire(self) -> None:
        now = time.monotonic()
        with self.lock:
            for g in list(self.groups.values()):
                session_ms = self.session_timeout_for(g.group_id)
                dead = [mid for mid, m in g.members.items()
                        if now - m.last_seen > (m.session_timeout_ms or session_ms) / 1000
                        or (m.state == "UNREVOKED_PARTITIONS" and now > m.revoke_deadline)]
                for mid in dead:
                    self._remove(g, mid)
                if dead:
                    self._bump(g)
                    self._maybe_downgrade(g)

    def session_timeout_for(self, group_id: str) -> int:
        """The group's consumer.session.timeout.ms, else the broker's."""
        return self._group_config(group_id, "consumer.session.timeout.ms",
                                  self.session_timeout_ms)

    def heartbeat_interval_for(self, group_id: str) -> int:
        """The group's consumer.heartbeat.interval.ms, else the broker's; at most
        REGEX_HEARTBEAT_MS while a member's pattern is being resolved."""
        interval = self._group_config(group_id, "consumer.heartbeat.interval.ms",
                                      self.heartbeat_interval_ms)
        now = time.monotonic()
        with self.lock:
            g = self.groups.get(group_id)
            if g is not None and any(t > now for t in g.regex_ready.values()):
                return min(interval, REGEX_HEARTBEAT_MS)
        return interval

    def _group_config(self, group_id: str, name: str, broker: int) -> int:
        own = None if self.group_configs is None else \
            self.group_configs.overrides(group_id).get(name)
        return broker if own is None else int(own)

    # ------------------------------------------------------------------ migration
    def upgrade_classic(self, group_id: str) -> bool:
        """Convert the classic group ``group_id`` (members of protocol type ``consumer``) into
        a consumer group, if the policy allows; False if it may not or cannot be."""
        from kcodec.broker.coordinator import migration

        if self.classic is None or not migration.upgrade_allowed(self.migration_policy):
            return False
        with self.lock:
            return migration.upgrade(self, self.classic, group_id)

    def _maybe_downgrade(self, g: ConsumerGroup) -> None:
        from kcodec.broker.coordinator import migration

        if (self.classic is not None and g.members and migration.downgrade_allowed(
                self.migration_policy) and all(m.classic for m in g.members.values())):
            migration.downgrade(self, self.classic, g)

    def delete(self, group_id: str) -> int:
        """DeleteGroups on a consumer-protocol group: only one without members (Kafka's
        NON_EMPTY_GROUP otherwise). Its committed offsets are the caller's to drop."""
        with self.lock:
            g = self.groups.get(group_id)
            if g is None:
                return E.GROUP_ID_NOT_FOUND
            if g.members:
                return E.NON_EMPTY_GROUP
            del self.groups[group_id]
            return 0

    # ------------------------------------------------------------------ classic members
    def has_members(self, group_id: str) -> bool:
        with self.lock:
            g = self.groups.get(group_id)
            return g is not None and bool(g.members)

    def classic_join(self, group_id: str, member_id: str, session_timeout_ms: int,
                     rebalance_timeout_ms: int, topics: list[str], owned: Owned,
                     client_id: str, client_host: str,
                     protocols: list | None = None) -> tuple[int, str, int]:
        """``(error, member_id, generation)`` for a classic JoinGroup in a consumer group."""
        with self.lock:
            g = self.groups.get(group_id)
            if g is None:
                return E.GROUP_ID_NOT_FOUND, member_id, -1
            m = g.members.get(member_id) if member_id else None
            if m is not None and not m.classic:
                return E.INCONSISTENT_GROUP_PROTOCOL, member_id, -1
            if m is None:
                member_id = member_id or uuid.uuid4().hex
                m = g.members[member_id] = ConsumerMember(member_id, client_id, client_host,
                                                          classic=True)
                m.topics = sorted(topics)
                self._bump(g)
            elif sorted(topics) != m.topics:
                m.topics = sorted(topics)
                self._bump(g)
            m.session_timeout_ms = session_timeout_ms
            m.rebalance_timeout_ms = rebalance_timeout_ms
            if protocols is not None:
                m.protocols = list(protocols)
            m.last_seen = time.monotonic()
            self._check_partition_counts(g)
            if m.state == "UNREVOKED_PARTITIONS" and not _and(owned, m.revoking):
                m.revoking = {}
                m.state = "STABLE"
            self._reconcile(g, m, owned)
            m.sent = _copy(m.assigned)
            return 0, member_id, m.epoch

    def classic_member(self, group_id: str, member_id: str) -> ConsumerMember | None:
        with self.lock:
            g = self.groups.get(group_id)
            m = g.members.get(member_id) if g is not None else None
            return m if m is not None and m.classic else None

    def classic_sync(self, group_id: str, member_id: str, generation: int) -> tuple[int, Owned]:
        with self.lock:
            m = self.classic_member(group_id, member_id)
            if m is None:
                return E.UNKNOWN_MEMBER_ID, {}
            if generation != m.epoch:
                return E.ILLEGAL_GENERATION, {}
            m.last_seen = time.monotonic()
            return 0, _copy(m.assigned)

    def classic_heartbeat(self, group_id: str, member_id: str, generation: int) -> int:
        with self.lock:
            g = self.groups.get(group_id)
            m = self.classic_member(group_id, member_id)
            if g is None or m is None:
                return E.UNKNOWN_MEMBER_ID
            if generation != m.epoch:
                return E.ILLEGAL_GENERATION
            m.last_seen = time.monotonic()
            if m.state == "UNREVOKED_PARTITIONS":
                return E.REBALANCE_IN_PROGRESS
            if m.epoch != g.assignment_epoch or m.assigned != _minus(
                    g.target.get(member_id, {}), self._held_by_others(g, m)):
                return E.REBALANCE_IN_PROGRESS   # its assignment changes: rejoin for it
            return 0

    def classic_leave(self, group_id: str, member_id: str) -> int:
        with self.lock:
            g = self.groups.get(group_id)
            if g is None or self.classic_member(group_id, member_id) is None:
                return E.UNKNOWN_MEMBER_ID
            self._remove(g, member_id)
            self._bump(g)
            return 0

    # ------------------------------------------------------------------ offsets and views
    def is_consumer_group(self, group_id: str) -> bool:
        with self.lock:
            return group_id in self.groups

    def subscribed_topics(self, group_id: str) -> set[str] | None:
        """The topics a consumer-protocol group's members subscribe to (named or matched by
        a pattern now); None if it is not such a group."""
        with self.lock:
            g = self.groups.get(group_id)
            if g is None:
                return None
            return {t for ts in self._subscribed(g).values() for t in ts}

    def check_commit(self, group_id: str, member_id: str, epoch: int,
                     partitions: list[tuple[str, int]] | None = None) -> int:
        """The error for an OffsetCommit from ``member_id`` at ``epoch`` (0: accepted). A
        member commits only ``partitions`` it owns (assigned, or being revoked from it): a
        commit of records fetched before the member was fenced, sent after it rejoined at a
        new epoch, must not move back a partition its new owner committed (the idea of
        KIP-1251's per-partition assignment epochs). STALE_MEMBER_EPOCH otherwise."""
        with self.lock:
            g = self.groups.get(group_id)
            if g is None:
                return E.GROUP_ID_NOT_FOUND
            if epoch < 0 and not g.members:
                return 0   # as Kafka: an admin client, or a consumer assigning partitions itself
            if not member_id and epoch < 0:
                return E.UNKNOWN_MEMBER_ID
            m = g.members.get(member_id)
            if m is None:
                return E.UNKNOWN_MEMBER_ID
            if epoch > m.epoch:
                return E.FENCED_MEMBER_EPOCH
            if epoch < m.epoch and epoch != m.previous_epoch:
                return E.STALE_MEMBER_EPOCH
            if partitions is not None and not m.classic and any(
                    p not in m.assigned.get(t, ()) and p not in m.revoking.get(t, ())
                    for t, p in partitions):
                # not (or no longer) this member's: its new owner may have committed further
                return E.STALE_MEMBER_EPOCH
            return 0

    def describe(self, group_id: str) -> ConsumerGroup | None:
        with self.lock:
            return self.groups.get(group_id)
