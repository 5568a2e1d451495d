"""Acknowledgement sending for the share consumer: the acknowledgements waiting for a
broker's next request, the commits someone waits on, the ShareAcknowledge request and what
its answer says per partition.

The fetcher's loops (fetcher.py) decide when a broker is asked: acknowledgements ride on the
next ShareFetch while there is one to send (KIP-932 lets a fetch acknowledge the previous
delivery); a ShareAcknowledge of their own goes for a commit, once they have waited
``ACK_LINGER``, and on close (epoch -1, which ends the session). A partition whose leader
moved keeps its acknowledgements for the new leader; the results go to the commit that
waits on them and to the application's acknowledgement commit callback.
"""

from __future__ import annotations

import concurrent.futures
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kcodec.client.errors import KafkaError
from kcodec.client.net.cluster import Cluster
from kcodec.client.share.acks import Acknowledgements, AcknowledgeType, Batch
from kcodec.client.share.membership import ShareGroupMember
from kcodec.client.share.session import FINAL_EPOCH, ShareSession
from kcodec.client.structs import TopicPartition
from kcodec.errors import KcodecError
from kcodec.protocol import ErrorCode, ShareAcknowledgeRequest

__all__ = ["Acknowledger", "Commit", "ACK_LINGER", "REFRESH_CODES"]

E = ErrorCode
REFRESH_CODES = frozenset((E.NOT_LEADER_OR_FOLLOWER, E.UNKNOWN_TOPIC_OR_PARTITION,
                           E.UNKNOWN_TOPIC_ID, E.FENCED_LEADER_EPOCH))
ACK_LINGER = 0.05      # s: acknowledgements wait this long for a fetch to ride on

Results = dict[TopicPartition, BaseException | None]


@dataclass
class Commit:
    """Acknowledgements a commit sent, and who waits for their answer."""

    acks: dict[TopicPartition, list[Batch]]
    future: concurrent.futures.Future = field(default_factory=concurrent.futures.Future)
    results: Results = field(default_factory=dict)


class Acknowledger:
    """The acknowledgements of one share consumer on their way to the brokers. ``lock``
    guards ``pending``, ``commits`` and ``pending_since`` (the application's threads add,
    the I/O loop sends); ``kick`` wakes the fetcher's loops, ``on_moved`` tells the fetcher
    a leader moved (the metadata is stale)."""

    def __init__(self, cluster: Cluster, member: ShareGroupMember,
                 kick: Callable[[], None], on_moved: Callable[[], None]) -> None:
        self.cluster = cluster
        self.member = member
        self.kick = kick
        self.on_moved = on_moved
        self.lock = threading.Lock()
        self.pending = Acknowledgements()        # to send with the next request
        self.commits: list[Commit] = []          # to send now, someone waits
        self.pending_since: dict[int, float] = {}  # when a broker's waiting acks came
        self.on_commit: Any = None               # callback(offsets by partition, error)

    # ------------------------------------------------------------------ the caller's side
    def queue(self, acks: dict[TopicPartition, list[Batch]]) -> None:
        """Send ``acks`` with the next request to each partition's leader."""
        with self.lock:
            for tp, got in acks.items():
                self.pending.add(tp, got)

    def take_pending(self) -> dict[TopicPartition, list[Batch]]:
        """What waits for the next request, taken out (a commit sends it now instead)."""
        with self.lock:
            return self.pending.take()

    def commit(self, acks: dict[TopicPartition, list[Batch]]) -> concurrent.futures.Future:
        """Send ``acks`` now; the future gives {partition: None or the error}."""
        c = Commit(acks)
        if not acks:
            c.future.set_result({})
            return c.future
        with self.lock:
            self.commits.append(c)
        self.kick()
        return c.future

    # ------------------------------------------------------------------ a broker's request
    async def send(self, node: int, session: ShareSession,
                   acks: dict[TopicPartition, list[Batch]], commit: Commit | None,
                   final: bool = False) -> Results:
        """One ShareAcknowledge to ``node`` (``final``: with epoch -1, closing the session);
        the result of each partition sent."""
        R = ShareAcknowledgeRequest
        topics: dict[Any, list] = {}
        for tp, batches in sorted(acks.items()):
            info = self.cluster.topics.get(tp.topic)
            tid = None if info is None else info.topic_id
            if tid is not None:
                topics.setdefault(tid, []).append(R.AcknowledgePartition(
                    partition_index=tp.partition, acknowledgement_batches=[
                        R.AcknowledgementBatch(first_offset=f, last_offset=last,
                                               acknowledge_types=t) for f, last, t in batches]))
        renew_only = all(t == [AcknowledgeType.RENEW] for bs in acks.values() for _, _, t in bs)
        req = R(group_id=self.member.group_id, member_id=self.member.member_id,
                share_session_epoch=FINAL_EPOCH if final else session.epoch,
                is_renew_ack=bool(acks) and renew_only,
                topics=[R.AcknowledgeTopic(topic_id=t, partitions=ps) for t, ps in topics.items()])
        results: Results = {}
        try:
            b = await self.cluster.request(node, req)
            if b.error_code:
                raise KafkaError(b.error_code, "ShareAcknowledge", b.error_message)
        except KcodecError as exc:
            results = {tp: exc for tp in acks}
            if commit is not None:
                self.finish(commit, results)
            self.report(results, acks)
            raise
        if not final:
            session.sent(set(), set())
        names = self.cluster.topic_names
        moved: dict[TopicPartition, list[Batch]] = {}
        for t in b.responses:
            for p in t.partitions:
                tp = TopicPartition(names.get(t.topic_id, "?"), p.partition_index)
                if p.error_code in REFRESH_CODES and tp in acks and not final:
                    moved[tp] = acks[tp]             # for the partition's new leader
                    continue
                results[tp] = None if not p.error_code else KafkaError(
                    p.error_code, f"acknowledge {tp.topic}-{tp.partition}", p.error_message)
        for tp in acks:
            if tp not in results and tp not in moved:
                results[tp] = KafkaError(E.UNKNOWN_SERVER_ERROR, f"acknowledge {tp.topic}-"
                                         f"{tp.partition}", "the broker's answer left it out")
        if moved:
            self.requeue(moved)
            self.on_moved()
            self.cluster.invalidate()
            if commit is not None:               # the commit waits for the new leader
                with self.lock:
                    for tp, got in moved.items():
                        commit.acks[tp] = got
                    self.pending.take(list(moved))
        if commit is not None:
            self.finish(commit, results)
        self.report(results, acks)
        return results

    # ------------------------------------------------------------------ results
    def finish(self, commit: Commit, results: Results) -> None:
        """``results`` for part of ``commit``; its future is set once every partition has one."""
        with self.lock:
            commit.results.update(results)
            for tp in results:
                commit.acks.pop(tp, None)
            done = not commit.acks
            if done and commit in self.commits:
                self.commits.remove(commit)
        if done and not commit.future.done():
            commit.future.set_result(dict(commit.results))

    def requeue(self, acks: dict[TopicPartition, list[Batch]]) -> None:
        """Acknowledgements a lost session did not take: sent again in the next one."""
        self.queue(acks)

    def failed(self, acks: dict[TopicPartition, list[Batch]], exc: BaseException) -> None:
        """The request carrying ``acks`` failed with ``exc``: the callback hears it."""
        if acks:
            self.report({tp: exc for tp in acks}, acks)

    def report(self, results: Results, acks: dict[TopicPartition, list[Batch]]) -> None:
        """Tell the application's acknowledgement commit callback, if it set one."""
        cb = self.on_commit
        if cb is None or not results:
            return
        offsets = {tp: sorted({o for f, last, _ in acks.get(tp, ()) for o in range(f, last + 1)})
                   for tp in results}
        try:
            cb(offsets, next((e for e in results.values() if e is not None), None))
        except Exception:          # a user's callback must not stop the fetcher
            pass
