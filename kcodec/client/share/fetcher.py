"""Share fetching: one loop per broker that leads an assigned partition, each with its
share session (session.py), and the buffer that ``poll`` takes records from.

A broker's loop sends one request at a time (the session's epochs are a sequence); the
acknowledgements and commits waiting, and the ShareAcknowledge request, are the
acknowledger's (acknowledger.py):

* a ShareFetch when fewer than ``max_poll_records`` fetched records wait to be polled; it
  carries the acknowledgements waiting for that broker's partitions (KIP-932 lets a fetch
  acknowledge the previous delivery);
* otherwise a ShareAcknowledge when acknowledgements wait (a commit waits on it).

The answer's records, with the offsets the broker acquired for this member and their
delivery counts, go to the buffer; ``take`` decodes them in the caller's thread. Offsets
the broker acquired without a record (compacted away) are acknowledged as GAP.
"""

from __future__ import annotations

import asyncio
import bisect
import threading
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kcodec.client.errors import KafkaError
from kcodec.client.net.cluster import Cluster
from kcodec.client.share._share import ShareRecord, share_records
from kcodec.client.share.acknowledger import ACK_LINGER, REFRESH_CODES, Acknowledger
from kcodec.client.share.acks import AcknowledgeType, Batch
from kcodec.client.share.columns import ShareColumns, columns_of
from kcodec.client.share.config import ShareConsumerConfig
from kcodec.client.share.membership import ShareGroupMember
from kcodec.client.share.session import ShareSession
from kcodec.client.structs import TopicPartition
from kcodec.errors import KcodecError
from kcodec.protocol import (
    ErrorCode,
    ShareFetchRequest,
)

__all__ = ["ShareFetcher", "ShareRecord", "Delivery"]

E = ErrorCode
SESSION_CODES = frozenset((E.SHARE_SESSION_NOT_FOUND, E.INVALID_SHARE_SESSION_EPOCH))
RECORD_LIMIT, BATCH_OPTIMIZED = 1, 0
PREFETCH_POLLS = 4     # batch-optimised mode: fetch ahead up to this many polls' worth


@dataclass(eq=False)
class Delivery:
    """One partition's part of one ShareFetch answer, until polled."""

    tp: TopicPartition
    data: bytes
    ranges: list[tuple[int, int, int]]       # acquired (first, last, delivery count)
    records: list | None = None              # decoded, filtered; None until first polled
    pos: int = 0
    size: int = 0                            # offsets acquired
    dropped: bool = False                    # released before it was decoded

    def __post_init__(self) -> None:
        self.size = sum(last - first + 1 for first, last, _ in self.ranges)


class ShareFetcher:
    def __init__(self, config: ShareConsumerConfig, loop: asyncio.AbstractEventLoop,
                 cluster: Cluster, member: ShareGroupMember) -> None:
        self.config = config
        self.loop = loop
        self.cluster = cluster
        self.member = member
        self.buffer: deque[Delivery] = deque()
        self.buffered = 0                        # records in the buffer, not yet polled
        self.decoding = 0                        # records received, not yet decoded
        self.undecoded: list[Delivery] = []      # their deliveries
        self.data_ready = threading.Condition()
        self.sessions: dict[int, ShareSession] = {}
        self.tasks: dict[int, asyncio.Task] = {}
        self.wake: dict[int, asyncio.Event] = {}
        self.error: BaseException | None = None
        self.lock_timeout_ms = -1
        self.closed = False
        self.strict = config.share_acquire_mode == "record_limit"
        self.arrived = asyncio.Event()           # for a poll on the loop (the async facade)
        # fetch ahead while fewer records than this wait in the buffer, so the next answer
        # is on its way while the application works; buffered records hold acquisition
        # locks, so not more than a few polls' worth, and under KIP-1206's record limit
        # (which exists to keep locks few) only one poll's
        self.prefetch_below = config.max_poll_records * (1 if self.strict else PREFETCH_POLLS)
        self.idle: set[int] = set()              # the loops waiting for something to do
        self.columns = False                     # decode to columns (poll_columns) instead
        self._refresh_due = False                # an answer said the metadata is stale
        self.acks = Acknowledger(cluster, member, self.kick, self._leader_moved)

    def _leader_moved(self) -> None:
        self._refresh_due = True

    # ------------------------------------------------------------------ routing
    def _leader(self, tp: TopicPartition) -> int | None:
        info = self.cluster.topics.get(tp.topic)
        return None if info is None else info.partitions.get(tp.partition)

    def start_loops(self) -> None:
        """A loop for every broker that leads an assigned partition (on the client's loop)."""
        nodes = {self._leader(tp) for tp in self.member.assignment}
        for node in nodes:
            if node is None or node < 0:
                continue
            t = self.tasks.get(node)
            if t is None or t.done():
                self.wake[node] = asyncio.Event()
                self.tasks[node] = self.loop.create_task(self._run(node))
        self.kick()

    def kick(self) -> None:
        """Something changed (room in the buffer, an acknowledgement, a commit): wake the
        loops that wait (one with a request in flight looks again when it is answered)."""
        def go() -> None:
            for ev in self.wake.values():
                ev.set()
        if self.closed or not self.idle:
            return
        try:
            if asyncio.get_running_loop() is self.loop:
                go()
                return
        except RuntimeError:
            pass
        self.loop.call_soon_threadsafe(go)

    # ------------------------------------------------------------------ a broker's loop
    async def _run(self, node: int) -> None:
        session = self.sessions.setdefault(node, ShareSession(node))
        wake = self.wake[node]
        while not self.closed:
            wake.clear()
            try:
                if not await self._step(node, session):
                    self.idle.add(node)
                    if self._has_work(node, session):   # came in before idle was set
                        self.idle.discard(node)
                        continue
                    try:
                        await asyncio.wait_for(
                            wake.wait(), ACK_LINGER if node in self.acks.pending_since else 1.0)
                    except asyncio.TimeoutError:
                        pass
                    finally:
                        self.idle.discard(node)
            except asyncio.CancelledError:
                raise
            except KafkaError as exc:
                if exc.code in SESSION_CODES:
                    session.reset()
                elif exc.code in REFRESH_CODES:
                    await self._follow_leaders()
                else:
                    self.error = exc
                    self._notify()
                await asyncio.sleep(0.1)
            except KcodecError as exc:      # a broken connection: a new session next time
                session.reset()
                self.error = exc if self.cluster.closed else None
                await asyncio.sleep(0.2)
                await self._follow_leaders()
            if self.cluster.stale and self._refresh_due:
                await self._follow_leaders()

    async def _follow_leaders(self) -> None:
        """Metadata again (a leader moved, a broker went away), and a loop for each
        broker that now leads an assigned partition."""
        self._refresh_due = False
        self.cluster.invalidate()
        try:
            await self.cluster.refresh(self.member.topics, auto_create=False)
        except KcodecError:
            self._refresh_due = True        # try again after the next request
            return
        self.start_loops()

    def _has_work(self, node: int, session: ShareSession) -> bool:
        with self.acks.lock:
            if any(self._mine(node, c.acks) for c in self.acks.commits):
                return True
            since = self.acks.pending_since.get(node)
            if session.open and self._mine(node, list(self.acks.pending.by_tp)) and (
                    since is None or time.monotonic() - since >= ACK_LINGER):
                return True
        return bool(self._mine(node, self.member.assignment)) and \
            self.buffered + self.decoding < self.prefetch_below

    def _mine(self, node: int, tps: Any) -> list[TopicPartition]:
        return [tp for tp in tps if self._leader(tp) == node]

    async def _step(self, node: int, session: ShareSession) -> bool:
        """One request to ``node``; False when there was nothing to do."""
        wanted = set(self._mine(node, self.member.assignment))
        fetch = bool(wanted) and self.buffered + self.decoding < self.prefetch_below
        with self.acks.lock:
            commit = next((c for c in self.acks.commits if self._mine(node, c.acks)), None)
            mine = self._mine(node, list(self.acks.pending.by_tp))
            # acknowledgements ride on the next fetch; alone only for a commit, or once
            # they have waited ACK_LINGER (the buffer is full: no fetch for a while)
            due = fetch or commit is not None or \
                time.monotonic() - self.acks.pending_since.get(node, time.monotonic()) >= ACK_LINGER
            acks = self.acks.pending.take(mine) if session.open and due else {}
            if acks:
                self.acks.pending_since.pop(node, None)
            elif mine and node not in self.acks.pending_since:
                self.acks.pending_since[node] = time.monotonic()
        if commit is not None and not session.open and wanted:
            await self._fetch(node, session, wanted, {})   # open a session to send it in
            return True
        if commit is not None and session.open:
            ours = {tp: b for tp, b in commit.acks.items() if self._leader(tp) == node}
            merged = {**acks}
            for tp, b in ours.items():
                merged[tp] = merged.get(tp, []) + b
            await self.acks.send(node, session, merged, commit)
            return True
        if fetch or (acks and session.open):
            if fetch or not acks:
                await self._fetch(node, session, wanted, acks)
            else:
                await self.acks.send(node, session, acks, None)
            return True
        if commit is not None and not session.open:   # nothing to acknowledge it with
            self.acks.finish(commit, {tp: KafkaError(E.SHARE_SESSION_NOT_FOUND,
                                                       "acknowledge") for tp in commit.acks
                                        if self._leader(tp) == node})
        return False

    def _topic_id(self, topic: str) -> Any:
        info = self.cluster.topics.get(topic)
        return None if info is None else info.topic_id

    async def _fetch(self, node: int, session: ShareSession, wanted: set[TopicPartition],
                     acks: dict[TopicPartition, list[Batch]],
                     max_wait_ms: int | None = None) -> None:
        added, forgotten = session.changes(wanted)
        named = added | set(acks)
        R = ShareFetchRequest
        topics: dict[Any, list] = {}
        for tp in sorted(named):
            tid = self._topic_id(tp.topic)
            if tid is None:
                continue
            topics.setdefault(tid, []).append(R.FetchPartition(
                partition_index=tp.partition, acknowledgement_batches=[
                    R.AcknowledgementBatch(first_offset=f, last_offset=last, acknowledge_types=t)
                    for f, last, t in acks.get(tp, ())]))
        gone: dict[Any, list[int]] = {}
        for tp in sorted(forgotten):
            tid = self._topic_id(tp.topic)
            if tid is not None:
                gone.setdefault(tid, []).append(tp.partition)
        cfg = self.config
        req = R(group_id=self.member.group_id, member_id=self.member.member_id,
                share_session_epoch=session.epoch,
                max_wait_ms=cfg.fetch_max_wait_ms if max_wait_ms is None else max_wait_ms,
                min_bytes=cfg.fetch_min_bytes, max_bytes=cfg.fetch_max_bytes,
                max_records=cfg.max_poll_records if self.strict else
                max(cfg.max_poll_records, self.prefetch_below - self.buffered - self.decoding),
                batch_size=cfg.max_poll_records,
                share_acquire_mode=RECORD_LIMIT if self.strict else BATCH_OPTIMIZED,
                topics=[R.FetchTopic(topic_id=t, partitions=ps) for t, ps in topics.items()],
                forgotten_topics_data=[R.ForgottenTopic(topic_id=t, partitions=ps)
                                       for t, ps in gone.items()])
        try:
            b = await self.cluster.request(
                node, req, timeout=self.cluster.request_timeout + cfg.fetch_max_wait_ms / 1000)
        except KcodecError as exc:
            self.acks.failed(acks, exc)
            raise
        if b.error_code:
            err = KafkaError(b.error_code, "ShareFetch", b.error_message)
            if b.error_code in SESSION_CODES:
                self.acks.requeue(acks)      # the records are the member's, not the session's
            else:
                self.acks.failed(acks, err)
            raise err
        session.sent(added, forgotten)
        if b.acquisition_lock_timeout_ms > 0:
            self.lock_timeout_ms = b.acquisition_lock_timeout_ms
        names = self.cluster.topic_names
        results: dict[TopicPartition, BaseException | None] = {}
        got: list[Delivery] = []
        refresh = False
        for t in b.responses:
            name = names.get(t.topic_id)
            if name is None:
                refresh = True
                continue
            for p in t.partitions:
                tp = TopicPartition(name, p.partition_index)
                if tp in acks and p.acknowledge_error_code in REFRESH_CODES:
                    self.acks.requeue({tp: acks[tp]})    # for the partition's new leader
                    refresh = True
                elif tp in acks:
                    results[tp] = None if not p.acknowledge_error_code else KafkaError(
                        p.acknowledge_error_code, f"acknowledge {tp.topic}-{tp.partition}",
                        p.acknowledge_error_message)
                if p.error_code:
                    refresh = refresh or p.error_code in REFRESH_CODES
                    if p.error_code not in REFRESH_CODES:
                        self.error = KafkaError(p.error_code, f"ShareFetch {tp.topic}-{tp.partition}",
                                                p.error_message)
                    continue
                if p.acquired_records:
                    got.append(Delivery(tp, bytes(p.records or b""), [
                        (a.first_offset, a.last_offset, a.delivery_count)
                        for a in p.acquired_records]))
        if refresh:
            self.cluster.invalidate()
            self._refresh_due = True
        if results:
            self.acks.report(results, acks)
        if got:
            # decoded on the I/O thread once the next fetch is on its way (this task sends
            # it, if there is room, before the loop runs the callback): the broker reads
            # the next answer while this one decodes
            with self.data_ready:
                self.undecoded += got
                self.decoding += sum(d.size for d in got)
            self.loop.call_soon(self._decoded, got)

    def _decoded(self, got: list[Delivery]) -> None:
        got = [d for d in got if not d.dropped]
        for d in got:
            if self.columns:
                d.records, gaps = columns_of(d.tp, d.data, d.ranges, self.config.check_crcs)
                if gaps:
                    with self.acks.lock:
                        self.acks.pending.add_offsets(d.tp, gaps, AcknowledgeType.GAP)
            else:
                d.records = self._decode(d, self.config.check_crcs)
        with self.data_ready:
            for d in got:
                if d.dropped:                    # close() released it meanwhile
                    continue
                self.undecoded.remove(d)
                self.decoding -= d.size
                self.buffer.append(d)
                self.buffered += d.size
            self.data_ready.notify_all()
        self.arrived.set()

    def _notify(self) -> None:
        with self.data_ready:
            self.data_ready.notify_all()

    # ------------------------------------------------------------------ the caller's side
    def take(self, max_records: int, check_crcs: bool
             ) -> tuple[list[ShareRecord], list[tuple[TopicPartition, Sequence[int]]]]:
        """Up to ``max_records`` delivered records, oldest fetch first, and the offsets
        handed out by partition (caller's thread)."""
        out: list[ShareRecord] = []
        spans: list[tuple[TopicPartition, Sequence[int]]] = []
        with self.data_ready:
            before = self.buffered
            while self.buffer and len(out) < max_records:
                d = self.buffer[0]
                if d.records is None:
                    d.records = self._decode(d, check_crcs)
                n = min(max_records - len(out), len(d.records) - d.pos)
                part = d.records[d.pos:d.pos + n]
                if part:
                    out += part
                    first, last = part[0].offset, part[-1].offset
                    spans.append((d.tp, range(first, last + 1) if last - first + 1 == n
                                  else [r.offset for r in part]))
                d.pos += n
                if d.pos >= len(d.records):
                    self.buffer.popleft()
                    self.buffered -= d.size
            low = self.prefetch_below
            wake = before >= low > self.buffered
        if wake:
            self.kick()
        return out, spans

    def take_columns(self) -> tuple[list[ShareColumns], list[tuple[TopicPartition, Sequence[int]]]]:
        """Every buffered delivery as columns, and the offsets handed out by partition."""
        out: list[ShareColumns] = []
        spans: list[tuple[TopicPartition, Sequence[int]]] = []
        with self.data_ready:
            before = self.buffered
            while self.buffer:
                d = self.buffer.popleft()
                self.buffered -= d.size
                if d.records and not isinstance(d.records[0], ShareColumns):
                    # decoded as records before the consumer asked for columns (its gaps
                    # were acknowledged then)
                    d.records, _ = columns_of(d.tp, d.data, d.ranges, self.config.check_crcs)
                for sc in d.records or ():
                    out.append(sc)
                    offs = sc.columns.offset
                    n = len(offs)
                    first, last = int(offs[0]), int(offs[-1])
                    spans.append((d.tp, range(first, last + 1) if last - first + 1 == n
                                  else offs.tolist()))
            wake = before >= self.prefetch_below > self.buffered
        if wake:
            self.kick()
        return out, spans

    def _decode(self, d: Delivery, check: bool) -> list[ShareRecord]:
        """The records of ``d`` at acquired offsets, with their delivery counts; offsets
        acquired without a record go out as GAP."""
        from kcodec.records import iter_batches

        ranges = sorted(d.ranges)
        t, p = d.tp
        out: list[ShareRecord] = []
        ordered = True
        prev = -1
        for b in iter_batches(d.data, validate_crc=check):
            if b.is_control:
                continue
            lo, hi = b.base_offset, b.last_offset     # the records are within
            ordered = ordered and lo > prev
            prev = hi
            whole = [c for f, last, c in ranges if f <= lo and hi <= last]
            if whole:                          # the common case: one range holds the batch
                # made as the batch decodes, one record at a time (not b.records() first)
                out += share_records(b, t, p, whole[0])
                continue
            firsts = [f for f, _, _ in ranges]
            for r in share_records(b, t, p, 0):
                i = bisect.bisect_right(firsts, r.offset) - 1
                if i >= 0 and r.offset <= ranges[i][1]:
                    r.delivery_count = ranges[i][2]
                    out.append(r)
        if not ordered:
            uniq = {r.offset: r for r in out}          # a batch sent twice: once each
            out = [uniq[k] for k in sorted(uniq)]
        if len(out) != d.size:
            have = {r.offset for r in out}
            gaps = [o for f, last, _ in ranges for o in range(f, last + 1) if o not in have]
            if gaps:
                with self.acks.lock:
                    self.acks.pending.add_offsets(d.tp, gaps, AcknowledgeType.GAP)
        return out

    def drop_unpolled(self) -> dict[TopicPartition, list[int]]:
        """Empty the buffer: the offsets fetched but never handed out (to release)."""
        out: dict[TopicPartition, list[int]] = {}
        with self.data_ready:
            for d in self.buffer:
                if d.records is None:
                    offs = [o for f, last, _ in d.ranges for o in range(f, last + 1)]
                else:
                    offs = [r.offset for r in d.records[d.pos:]]
                out.setdefault(d.tp, []).extend(offs)
            for d in self.undecoded:
                d.dropped = True
                out.setdefault(d.tp, []).extend(
                    o for f, last, _ in d.ranges for o in range(f, last + 1))
            self.undecoded.clear()
            self.decoding = 0
            self.buffer.clear()
            self.buffered = 0
        return out

    # ------------------------------------------------------------------ commits and close
    async def close(self) -> None:
        """Stop the loops; send what waits to each partition's leader with epoch -1 (which
        closes that broker's session; a leader without a session here gets one first)."""
        self.closed = True
        for t in self.tasks.values():
            t.cancel()
        for t in self.tasks.values():
            try:
                await t
            except (asyncio.CancelledError, Exception):
                pass
        with self.acks.lock:
            acks = self.acks.pending.take()
            for c in self.acks.commits:
                for tp, b in c.acks.items():
                    acks[tp] = acks.get(tp, []) + b
            commits, self.acks.commits = self.acks.commits, []
        if acks:
            try:                       # the leaders now, not when the last fetch went
                self.cluster.invalidate()
                await self.cluster.refresh(self.member.topics, auto_create=False)
            except KcodecError:
                pass
        results: dict[TopicPartition, BaseException | None] = {}
        by_node: dict[int, dict[TopicPartition, list[Batch]]] = {}
        for tp, got in acks.items():
            node = self._leader(tp)
            if node is None:
                results[tp] = KafkaError(E.UNKNOWN_TOPIC_OR_PARTITION, "acknowledge on close")
            else:
                by_node.setdefault(node, {})[tp] = got
        for node in set(by_node) | {n for n, s in self.sessions.items() if s.open}:
            session = self.sessions.setdefault(node, ShareSession(node))
            mine = by_node.get(node, {})
            try:
                if not session.open:
                    if not mine:
                        continue
                    await self._fetch(node, session, set(), {}, max_wait_ms=0)
                results.update(await self.acks.send(node, session, mine, None, final=True))
            except KcodecError as exc:
                results.update({tp: exc for tp in mine})
        for c in commits:
            if not c.future.done():
                c.future.set_result({tp: results.get(tp) for tp in c.acks})
        self._notify()
