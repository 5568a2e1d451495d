"""The share-group coordinator (KIP-932): membership through ShareGroupHeartbeat, and the
assignment of partitions to members.

A member names its own id (KIP-1082) and joins at epoch 0, heartbeats at the epoch it was
given, and leaves at epoch -1. Any change of members, subscriptions or partition counts
bumps the group epoch and computes a new assignment at once: share groups need no
revocation step, since several members may read one partition (the share-partition
leader hands each record to one of them). A member that does not heartbeat for the
group's ``share.session.timeout.ms`` is removed and its acquired records go back.

Assignment (as Kafka's simple assignor): every partition of a subscribed topic goes to at
least one subscribed member; when a topic has fewer partitions than members, members
share partitions (member i of the sorted subscribers gets partition i mod n), so N
consumers of a one-partition topic all read it; otherwise the partitions are spread
round-robin.
"""

from __future__ import annotations

import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from kcodec.protocol import ErrorCode

__all__ = ["ShareGroupCoordinator", "ShareGroup", "ShareMember", "share_assign"]

E = ErrorCode
Owned = dict   # topic -> set[int]
LEAVE_EPOCH = -1
# A group's topics are assigned once their share-partition state is set up, as in Kafka,
# where the group coordinator first has the share coordinator initialize it: the members'
# first heartbeats answer without them, with a short heartbeat interval, so members that
# start together are all in the group when the topics are first assigned
INIT_S = 0.1
INIT_HEARTBEAT_MS = 250


def share_assign(members: dict[str, list[str]], partitions: dict[str, int]) -> dict[str, Owned]:
    """Every partition to at least one subscriber; subscribers share partitions when there
    are more of them than partitions."""
    out: dict[str, Owned] = {m: {} for m in members}
    for topic in sorted(partitions):
        subs = sorted(m for m, ts in members.items() if topic in ts)
        n = partitions[topic]
        if not subs or n <= 0:
            continue
        if len(subs) >= n:
            for i, m in enumerate(subs):
                out[m].setdefault(topic, set()).add(i % n)
        else:
            for p in range(n):
                out[subs[p % len(subs)]].setdefault(topic, set()).add(p)
    return out


@dataclass
class ShareMember:
    member_id: str
    client_id: str
    client_host: str
    rack_id: str | None = None
    epoch: int = 0
    topics: list = field(default_factory=list)
    assigned: Owned = field(default_factory=dict)
    sent_epoch: int = -1                    # the epoch of the assignment last sent to it
    last_seen: float = field(default_factory=time.monotonic)


@dataclass
class ShareGroup:
    group_id: str
    epoch: int = 0
    assignment_epoch: int = 0
    members: dict = field(default_factory=dict)          # member id -> ShareMember
    partition_counts: dict = field(default_factory=dict)
    topic_ids: dict = field(default_factory=dict)    # topic -> the id the assignment used
    # share-partition state set up for these topic ids (Kafka's InitializeShareGroupState):
    # only they are assigned; a subscribed topic not yet set up waits in ``initializing``
    initialized: set = field(default_factory=set)
    initializing: dict = field(default_factory=dict)  # topic id -> when it is set up

    @property
    def state(self) -> str:
        return "Stable" if self.members else "Empty"


class ShareGroupCoordinator:
    """Share groups of one cluster. ``manager`` is the SharePartitionManager (released
    records, group configs, start offsets); ``other_kinds(group_id)`` says whether a
    classic or consumer group already uses the id."""

    def __init__(self, timer: Any, cluster_state: Any, manager: Any) -> None:
        self.state = cluster_state
        self.manager = manager
        self.configs = manager.configs
        self.lock = threading.RLock()
        self.groups: dict[str, ShareGroup] = {}
        self.other_kinds: Any = lambda group_id: False
        manager.is_member = self.is_member
        # the groups whose offsets or configs were kept in the data dir exist (Empty)
        for (g, _, _) in list(manager.store.partitions):
            self.groups.setdefault(g, ShareGroup(g))
        timer.every(0.25, self._expire)

    def topic_id(self, name: str) -> uuid.UUID | None:
        t = self.state.topics.get(name)
        return None if t is None else t.topic_id

    def topic_name(self, tid: uuid.UUID) -> str | None:
        for t in list(self.state.topics.values()):
            if t.topic_id == tid:
                return t.name
        return None

    def is_member(self, group_id: str, member_id: str) -> bool:
        # no lock: the share manager asks this holding its own locks, which a member's
        # removal here takes holding this one (a dict lookup is atomic on its own)
        g = self.groups.get(group_id)
        return g is not None and member_id in g.members

    def is_share_group(self, group_id: str) -> bool:
        with self.lock:
            return group_id in self.groups

    def heartbeat(self, group_id: str, member_id: str, epoch: int, *, rack_id: str | None,
                  topics: list[str] | None, client_id: str, client_host: str
                  ) -> tuple[int, str | None, int, Owned | None]:
        """``(error, message, member_epoch, assignment or None if unchanged)``."""
        if not member_id:
            return E.INVALID_REQUEST, "the member id must be set (the member makes it up)", \
                epoch, None
        if self.other_kinds(group_id):
            return E.GROUP_ID_NOT_FOUND, f"group {group_id!r} is not a share group", epoch, None
        with self.lock:
            g = self.groups.get(group_id)
            if epoch == LEAVE_EPOCH:
                if g is not None and member_id in g.members:
                    # its records go back once its share sessions close: a client may send
                    # its last acknowledgements beside the leave (librdkafka does, on
                    # another connection), and they must not find the records released
                    self._remove(g, member_id, release=False)
                    self.manager.member_left(group_id, member_id)
                return 0, None, LEAVE_EPOCH, None
            if epoch == 0:
                if not topics:
                    return E.INVALID_REQUEST, "a joining member must subscribe to topics", 0, None
                if g is None:
                    g = self.groups[group_id] = ShareGroup(group_id)
                if member_id in g.members:        # a rejoin: start over
                    self._remove(g, member_id, release=False)
                m = g.members[member_id] = ShareMember(member_id, client_id, client_host, rack_id)
                m.topics = sorted(topics)
                self._bump(g)
            else:
                found = g.members.get(member_id) if g is not None else None
                if g is None or found is None:
                    return E.UNKNOWN_MEMBER_ID, f"{member_id} is not a member of {group_id}", \
                        epoch, None
                m = found
                if epoch != m.epoch:
                    return E.FENCED_MEMBER_EPOCH, f"epoch {epoch}, the member is at {m.epoch}", \
                        epoch, None
                m.last_seen = time.monotonic()
                if topics is not None and sorted(topics) != m.topics:
                    m.topics = sorted(topics)
                    self._bump(g)
                elif self._initialize(g) or self._counts(g) != g.partition_counts or \
                        self._ids(g) != g.topic_ids:
                    # topics set up, a partition count changed, or a topic was recreated
                    self._bump(g)
            assert g is not None
            m.epoch = g.epoch
            if m.sent_epoch != g.assignment_epoch or epoch == 0:
                m.sent_epoch = g.assignment_epoch
                return 0, None, m.epoch, {t: set(ps) for t, ps in m.assigned.items()}
            return 0, None, m.epoch, None

    def _topics(self, g: ShareGroup) -> list[Any]:
        """The subscribed topics that exist and whose share state is set up."""
        out = []
        for t in sorted({t for m in g.members.values() for t in m.topics}):
            topic = self.state.topics.get(t)
            if topic is not None and topic.topic_id in g.initialized:
                out.append(topic)
        return out

    def _initialize(self, g: ShareGroup) -> bool:
        """Set up the share state of subscribed topics that lack it (ready INIT_S after
        first seen); True if some became ready."""
        now = time.monotonic()
        ready = False
        for t in {t for m in g.members.values() for t in m.topics}:
            topic = self.state.topics.get(t)
            if topic is None or topic.topic_id in g.initialized:
                continue
            at = g.initializing.setdefault(topic.topic_id, now + INIT_S)
            if now >= at:
                del g.initializing[topic.topic_id]
                g.initialized.add(topic.topic_id)
                ready = True
        return ready

    def _counts(self, g: ShareGroup) -> dict[str, int]:
        return {t.name: len(t.partitions) for t in self._topics(g)}

    def _ids(self, g: ShareGroup) -> dict[str, uuid.UUID]:
        """The subscribed topics' ids: a topic deleted and created again under its name is
        another topic (its id changed), and members must be told the new id."""
        return {t.name: t.topic_id for t in self._topics(g)}

    def _bump(self, g: ShareGroup) -> None:
        self._initialize(g)
        g.epoch += 1
        g.partition_counts = self._counts(g)
        g.topic_ids = self._ids(g)
        target = share_assign({m.member_id: m.topics for m in g.members.values()},
                              g.partition_counts)
        for mid, owned in target.items():
            g.members[mid].assigned = owned     # each member's epoch follows at its heartbeat
        g.assignment_epoch = g.epoch

    def _remove(self, g: ShareGroup, member_id: str, release: bool = True) -> None:
        g.members.pop(member_id, None)
        if g.members:
            self._bump(g)
        else:
            g.epoch += 1
            g.assignment_epoch = g.epoch
        if release:
            self.manager.release_member(g.group_id, member_id)

    def _expire(self) -> None:
        now = time.monotonic()
        with self.lock:
            for g in list(self.groups.values()):
                timeout = self.configs.get_int(g.group_id, "share.session.timeout.ms") / 1000
                for m in list(g.members.values()):
                    if now - m.last_seen > timeout:
                        self._remove(g, m.member_id)

    def heartbeat_interval_ms(self, group_id: str) -> int:
        """The group's heartbeat interval; a short one while topics are being set up."""
        interval = self.configs.get_int(group_id, "share.heartbeat.interval.ms")
        with self.lock:
            g = self.groups.get(group_id)
            if g is not None and g.initializing:
                return min(interval, INIT_HEARTBEAT_MS)
        return interval

    def describe(self, group_id: str) -> ShareGroup | None:
        with self.lock:
            return self.groups.get(group_id)

    def delete(self, group_id: str) -> int:
        """DeleteGroups on a share group: only an empty one; its offsets go too."""
        with self.lock:
            g = self.groups.get(group_id)
            if g is None:
                return E.GROUP_ID_NOT_FOUND
            if g.members:
                return E.NON_EMPTY_GROUP
            del self.groups[group_id]
        self.manager.delete_state(group_id)
        return 0

    def touch(self, group_id: str) -> None:
        """A group that has offsets (an admin set them) exists, empty."""
        with self.lock:
            self.groups.setdefault(group_id, ShareGroup(group_id))
