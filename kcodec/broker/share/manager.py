"""The share-partition leader's side of share groups: every share partition this cluster
leads, the share sessions, and the work of ShareFetch and ShareAcknowledge (Kafka's
SharePartitionManager).

A share partition is created at the first fetch of a group from a partition: its start
offset is what the group's ``share.auto.offset.reset`` gives (``latest``, ``earliest``,
``by_duration:...``), or what was kept in the data dir. Its state is written after each
acknowledgement, release and lock timeout (:mod:`kcodec.broker.share.store`).

Share sessions (KIP-932) are kept per (node, group, member), as each broker keeps its
own: epoch 0 opens one with the partitions of the request, the next requests carry epochs
1, 2, ... and add or forget partitions; epoch -1 closes it, after its acknowledgements,
and the member's acquired records on the partitions that node leads go back to the group.
"""

from __future__ import annotations

import struct
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from kcodec.broker.log import LogError
from kcodec.broker.share.configs import ShareConfigs, parse_duration_ms
from kcodec.broker.share.partition import SharePartition
from kcodec.broker.share.store import ShareStateStore
from kcodec.protocol import ErrorCode
from kcodec.records.header import iter_entries, read_header

__all__ = ["SharePartitionManager", "ShareSession", "FINAL_EPOCH"]

E = ErrorCode
FINAL_EPOCH = -1
MAX_SESSIONS = 1000
LEAVE_GRACE_S = 2.0     # how long a member that left keeps its records for its last acks
_I64 = struct.Struct(">q")
READ_CHUNK = 256 * 1024


@dataclass
class ShareSession:
    node_id: int
    group_id: str
    member_id: str
    epoch: int = 1                                   # the epoch the next request must carry
    # (topic id, partition): by id, as Kafka's share sessions, so that a partition of a
    # topic deleted and created again under its name is not fetched for the old one
    parts: set[tuple[Any, int]] = field(default_factory=set)


def _entries(blob: Any) -> list[tuple[int, int, int, int, bool, int, bool]]:
    """(position, size, first offset, last offset, is control, producer id, is
    transactional) of a records blob's entries."""
    out = []
    for pos, size, magic in iter_entries(blob):
        if magic == 2:
            h = read_header(blob, pos)
            out.append((pos, size, h.base_offset, h.base_offset + h.last_offset_delta,
                        h.is_control, h.producer_id, h.is_transactional))
        else:                                         # a legacy message: its own offset
            off = _I64.unpack_from(blob, pos)[0]
            out.append((pos, size, off, off, False, -1, False))
    return out


class _Aborted:
    """Which batches belong to aborted transactions, for a read_committed share group:
    fed the partition's aborted transactions (producer id, first offset) from the first
    offset read on, then each batch in log order. A producer's batches are aborted from
    its aborted transaction's first offset until its next control batch (the marker)."""

    def __init__(self, aborted: list[tuple[int, int]]) -> None:
        self.waiting = sorted(aborted, key=lambda a: a[1], reverse=True)   # pop the lowest
        self.active: set[int] = set()

    def __call__(self, base: int, control: bool, pid: int, transactional: bool) -> bool:
        while self.waiting and self.waiting[-1][1] <= base:
            self.active.add(self.waiting.pop()[0])
        if control:
            self.active.discard(pid)
            return False
        return transactional and pid in self.active


class SharePartitionManager:
    def __init__(self, state: Any, txns: Any, data_dir: str | None, timer: Any, purgatory: Any,
                 broker_configs: dict[str, Any] | None = None) -> None:
        self.state = state
        self.txns = txns
        self.store = ShareStateStore(data_dir)
        self.configs = ShareConfigs(broker_configs, self.store)
        self.purgatory = purgatory
        self.lock = threading.RLock()
        self.parts: dict[tuple[str, str, int], SharePartition] = {}
        self.sessions: dict[tuple[int, str, str], ShareSession] = {}
        # members that left with share sessions open: (group, member) -> release deadline
        self._leaving: dict[tuple[str, str], float] = {}
        #: is (group, member) a member of its share group? (set by the coordinator)
        self.is_member: Any = lambda group, member: True
        timer.every(0.1, self.expire_locks)

    def close(self) -> None:
        self.store.close()

    # ------------------------------------------------------------------ share partitions
    def _topic_id(self, topic: str) -> str:
        t = self.state.topics.get(topic)
        return "" if t is None else str(t.topic_id)

    def _initial_offset(self, group: str, log: Any) -> int:
        reset = self.configs.get(group, "share.auto.offset.reset")
        if reset == "earliest":
            return int(log.log_start_offset)
        if reset.startswith("by_duration:"):
            ms = parse_duration_ms(reset[len("by_duration:"):])
            found = log.offset_for_timestamp(int(time.time() * 1000) - ms)
            return int(log.high_watermark) if found is None else int(found[0])
        return int(log.high_watermark)

    def partition(self, group: str, topic: str, index: int) -> SharePartition | None:
        """The group's share partition (created, or restored from the data dir, at first
        use); None if the topic partition does not exist."""
        key = (group, topic, index)
        with self.lock:
            tid = self._topic_id(topic)
            sp = self.parts.get(key)
            if sp is not None and sp.topic_id == tid:
                return sp
            p = self.state.partition(topic, index)
            if p is None:
                return None
            snap = self.store.partitions.get(key)
            fresh = sp is not None or snap is None or snap.get("id") != tid
            if snap is not None and not fresh:
                sp = SharePartition.restore(group, topic, index, snap)
            else:
                # new, or the state of a deleted topic of the same name: start afresh
                sp = SharePartition(group, topic, index, self._initial_offset(group, p.log))
            sp.topic_id = tid
            self.parts[key] = sp
            if fresh:
                self._persist(sp)
            return sp

    def is_set_up(self, group: str, topic: str, index: int) -> bool:
        """Has the group's share partition been set up (by a fetch, since the topic was
        created)?"""
        sp = self.parts.get((group, topic, index))
        return sp is not None and sp.topic_id == self._topic_id(topic)

    def _leader(self, topic: str, index: int) -> int | None:
        p = self.state.partition(topic, index)
        return None if p is None else int(p.leader)

    def _persist(self, sp: SharePartition) -> None:
        if not self.store.durable:
            return                       # memory only: nothing would read it back
        if sp.topic_id != self._topic_id(sp.topic) or \
                self.parts.get((sp.group_id, sp.topic, sp.index)) is not sp:
            return                       # a deleted topic's state, or forgotten
        self.store.put_partition(sp.group_id, sp.topic, sp.topic_id, sp.index, sp.snapshot())

    def start_offset(self, group: str, topic: str, index: int) -> int | None:
        """The group's start offset on a partition; None where it has none yet."""
        with self.lock:
            sp = self.parts.get((group, topic, index))
            if sp is not None:
                return sp.start
            snap = self.store.partitions.get((group, topic, index))
            return None if snap is None else int(snap["s"])

    def forget_topic(self, topic: str) -> None:
        """A topic was deleted: every group's share state of it goes, as Kafka deletes
        the share-group state of a deleted topic (a topic created again under the name is
        another topic, read afresh)."""
        with self.lock:
            keys = {k for k in list(self.parts) + list(self.store.partitions) if k[1] == topic}
            for k in keys:
                self.parts.pop(k, None)
                self.store.delete_partition(*k)

    def alter_start(self, group: str, topic: str, index: int, offset: int) -> None:
        sp = self.partition(group, topic, index)
        if sp is None:
            return
        with sp.lock:
            sp.reset(offset)
            self._persist(sp)

    def delete_state(self, group: str, topic: str | None = None) -> None:
        """Forget a group's share partitions (of one topic, or all): the next fetch starts
        again from ``share.auto.offset.reset``."""
        with self.lock:
            keys = {k for k in list(self.parts) + list(self.store.partitions)
                    if k[0] == group and (topic is None or k[1] == topic)}
            for k in keys:
                self.parts.pop(k, None)
                self.store.delete_partition(*k)

    # ------------------------------------------------------------------ sessions
    def session(self, node_id: int, group: str, member: str, epoch: int
                ) -> tuple[int, ShareSession | None]:
        """Check a request's session epoch on ``node_id``: (0, the session) or (error,
        None); epoch 0 opens a new session (replacing the member's old one there)."""
        key = (node_id, group, member)
        with self.lock:
            if epoch == 0:
                s = ShareSession(node_id, group, member)
                self.sessions.pop(key, None)
                if len(self.sessions) >= MAX_SESSIONS:
                    # the sessions of members that left the group make room first
                    for k in [k for k in self.sessions if not self.is_member(k[1], k[2])]:
                        del self.sessions[k]
                if len(self.sessions) >= MAX_SESSIONS:
                    return E.SHARE_SESSION_LIMIT_REACHED, None
                self.sessions[key] = s
                return 0, s
            found = self.sessions.get(key)
            if found is None:
                return E.SHARE_SESSION_NOT_FOUND, None
            if epoch != FINAL_EPOCH:
                if epoch != found.epoch:
                    return E.INVALID_SHARE_SESSION_EPOCH, None
                found.epoch = found.epoch + 1 if found.epoch < 0x7FFFFFFF else 1
            return 0, found

    def close_session(self, node_id: int, group: str, member: str) -> None:
        with self.lock:
            self.sessions.pop((node_id, group, member), None)
            last = (group, member) in self._leaving and not self._has_session(group, member)
            if last:
                del self._leaving[(group, member)]
        self.release_member(group, member, None if last else node_id)

    def _has_session(self, group: str, member: str) -> bool:
        return any(k[1] == group and k[2] == member for k in self.sessions)

    def member_left(self, group: str, member: str) -> None:
        """``member`` left its group (a leave heartbeat). Without an open share session its
        records go back now; with one they go back when its sessions close (the client's
        last acknowledgements may still be on their way), or after LEAVE_GRACE_S."""
        with self.lock:
            if self._has_session(group, member):
                self._leaving[(group, member)] = time.monotonic() + LEAVE_GRACE_S
                return
        self.release_member(group, member)

    def _release_left(self, now: float) -> None:
        with self.lock:
            due = [k for k, t in self._leaving.items() if t <= now]
            for k in due:
                del self._leaving[k]
        for group, member in due:
            self.release_member(group, member)

    def release_member(self, group: str, member: str, node_id: int | None = None) -> None:
        """The member's acquired records go back to the group (it left, or closed its
        session, or its session timed out). Its share session stays until it closes it
        (a client may acknowledge with epoch -1 after leaving) or room is needed."""
        with self.lock:
            parts = [sp for (g, _, _), sp in self.parts.items() if g == group]
        if node_id is not None:       # a session closed: the partitions that node leads
            parts = [sp for sp in parts if self._leader(sp.topic, sp.index) == node_id]
        limit = self.configs.get_int(group, "share.delivery.count.limit")
        for sp in parts:
            with sp.lock:
                if sp.release_member(member, limit):
                    self._persist(sp)
                    changed = True
                else:
                    changed = False
            if changed:
                self.purgatory.notify((sp.topic, sp.index))

    # ------------------------------------------------------------------ the work
    def acknowledge(self, group: str, member: str, topic: str, index: int,
                    batches: list[tuple[int, int, list[int]]]) -> int:
        """Apply a partition's acknowledgement batches in order; 0 or the first error
        (batches before it are applied, as Kafka does per batch)."""
        sp = self.partition(group, topic, index)
        if sp is None:
            return E.UNKNOWN_TOPIC_OR_PARTITION
        limit = self.configs.get_int(group, "share.delivery.count.limit")
        renew = time.monotonic() + self.configs.get_int(group, "share.record.lock.duration.ms") / 1000
        code = 0
        with sp.lock:
            released = False
            for first, last, types in batches:
                err = sp.acknowledge(member, first, last, types, limit, renew)
                if err:
                    code = code or err
                released = released or any(t == 2 for t in types)
            self._persist(sp)
        if released:
            self.purgatory.notify((topic, index))
        return code

    def fetch(self, group: str, member: str, topic: str, index: int, max_records: int,
              strict: bool, max_bytes: int) -> tuple[int, bytes, list[tuple[int, int, int]]]:
        """Acquire up to ``max_records`` records of a partition for ``member``:
        (error, the batches that hold them, the acquired ranges with delivery counts)."""
        p = self.state.partition(topic, index)
        sp = self.partition(group, topic, index)
        if p is None or sp is None:
            return E.UNKNOWN_TOPIC_OR_PARTITION, b"", []
        log = p.log
        lock_ms = self.configs.get_int(group, "share.record.lock.duration.ms")
        max_locks = self.configs.get_int(group, "share.partition.max.record.locks")
        committed = self.configs.get(group, "share.isolation.level") == "read_committed"
        deadline = time.monotonic() + lock_ms / 1000
        chunks: dict[int, bytes] = {}
        try:
            with sp.lock:
                # a member that left acquires nothing: its fetch may have been on the
                # wire when its leave released what it held. Asked under the partition's
                # lock, which the release takes after the member is gone
                if not self.is_member(group, member):
                    return 0, b"", []
                if sp.end < log.log_start_offset or sp.start < log.log_start_offset:
                    sp.archive_below(int(log.log_start_offset))
                # share.partition.max.record.locks bounds the records locked at once, so
                # one acquisition too (a batch bigger than what is left is taken in part)
                locks = max(0, max_locks - sp.acquired)
                ranges = sp.acquire_available(member, max_records, strict, deadline, locks)
                locks -= sum(last - first + 1 for first, last, _ in ranges)
                for first, last, _ in ranges:
                    self._read_held(log, first, last, chunks)
                budget = max_records - sum(last - first + 1 for first, last, _ in ranges)
                hw = int(log.high_watermark)
                upper = self.txns.stable_offset(topic, index, hw) if committed else hw
                left = max_bytes - sum(len(c) for c in chunks.values())
                while budget > 0 and locks > 0 and sp.end < upper and left > 0 and \
                        sp.end - sp.start < max_locks:
                    blob = log.read(sp.end, min(left, READ_CHUNK), upper_bound=upper,
                                    min_one=not chunks)
                    ents = _entries(blob)
                    if not ents:
                        break
                    room = min(budget, max_locks - (sp.end - sp.start))
                    # aborted transactions' records are archived like control batches (read
                    # afresh for each blob: it starts at the end, where acquiring stopped)
                    aborted = _Aborted(self.txns.aborted(topic, index, sp.end, upper)) \
                        if committed else None
                    before = sp.end
                    batches = [(e[2], e[3], e[4]) for e in ents] if aborted is None else \
                        [(e[2], e[3], aborted(e[2], e[4], e[5], e[6]) or e[4]) for e in ents]
                    new, taken = sp.acquire_new(member, batches, room, strict, deadline, locks)
                    locks -= sum(last - first + 1 for first, last, _ in new)
                    for i in taken:
                        pos, size, base = ents[i][0], ents[i][1], ents[i][2]
                        chunks[base] = bytes(blob[pos:pos + size])
                        left -= size
                    ranges += new
                    budget -= sum(last - first + 1 for first, last, _ in new)
                    if sp.end == before:
                        break
        except LogError as exc:
            return exc.error_code, b"", []
        records = b"".join(chunks[k] for k in sorted(chunks))
        return 0, records, ranges

    @staticmethod
    def _read_held(log: Any, first: int, last: int, chunks: dict[int, bytes]) -> None:
        """The log batches that hold offsets first..last, into ``chunks`` by base offset."""
        off = first
        while off <= last:
            blob = log.read(off, 1, min_one=True)
            ents = _entries(blob)
            if not ents:
                return
            pos, size, base, end = ents[0][:4]
            chunks.setdefault(base, bytes(blob[pos:pos + size]))
            off = end + 1

    def expire_locks(self) -> None:
        now = time.monotonic()
        if self._leaving:
            self._release_left(now)
        with self.lock:
            parts = list(self.parts.values())
        for sp in parts:
            if not sp.acquired:
                continue
            limit = self.configs.get_int(sp.group_id, "share.delivery.count.limit")
            with sp.lock:
                changed = sp.expire_locks(now, limit)
                if changed:
                    self._persist(sp)
            if changed:
                self.purgatory.notify((sp.topic, sp.index))
