"""The consumer's fetcher: one Fetch in flight per leader, blobs buffered for ``poll``.

A task on the client's loop looks up missing positions (through the engine's ``resolve``:
committed offsets, else ``auto_offset_reset``), then keeps one Fetch in flight per
partition leader for the assigned, unpaused partitions with fewer than two blobs buffered,
each broker's requests in an incremental fetch session (KIP-227), topics by id where the
version and the metadata allow (KIP-516). Answers are buffered as raw blobs (prefetching
ahead of the application); ``take`` and ``take_columns`` decode them in the caller's
thread (kcodec.client.consumer.visibility) and advance the positions.

Errors: a partition whose offset is out of range loses its position (the policy finds
another; with ``auto_offset_reset="none"`` the next poll raises); errors that say the
metadata is stale refresh it; other non-retriable ones are raised by the next poll. When
the brokers fail every request for ``api_timeout_ms``, ``lost_broker`` gives the error the
next poll raises. A partition whose answers bring records but never a whole batch past its
position (a batch larger than the fetch limits: the broker owed it one, KIP-74) is *stuck*
after ``BatchTooLargeError.FETCHES`` such answers in a row: it is not fetched again until a
seek, and every poll raises why (``stuck_error``), as Java's "failed to make progress".
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any

from kcodec.client.config import ConsumerConfig
from kcodec.client.consumer.fetch_session import FetchSession
from kcodec.client.consumer.positions import PartitionState, SubscriptionState
from kcodec.client.consumer.visibility import Fetched, decode, trim_columns, visible_blob
from kcodec.client.errors import (
    BatchTooLargeError,
    BrokerNotAvailableError,
    KafkaError,
    NoOffsetForPartitionError,
    ResponseTooLargeError,
)
from kcodec.client.net import requests
from kcodec.client.net.cluster import REFRESH_CODES, Cluster
from kcodec.client.net.wakeup import Wakeup
from kcodec.client.structs import TopicPartition
from kcodec.errors import DecodeError, FetchedBatchError, KcodecError
from kcodec.observe.log import get_logger
from kcodec.protocol import ApiKey, ErrorCode
from kcodec.records.header import ENTRY_OVERHEAD, ENTRY_PREFIX, entry_frame, next_offset

log = get_logger(__name__)

__all__ = ["Fetcher", "FETCH_REFRESH_CODES"]

# A partition's error after which the next fetch waits for fresh metadata: the codes that
# mean stale metadata, and OFFSET_NOT_AVAILABLE (a new leader's high watermark not caught
# up), as Java's fetcher does.
FETCH_REFRESH_CODES = REFRESH_CODES | {ErrorCode.OFFSET_NOT_AVAILABLE}
#: the longest a Fetch waits at the broker while a partition of that broker is held back
#: because its buffer is full: the application frees it at its next poll, and a Fetch
#: waiting out fetch_max_wait_ms for the others would leave it idle until then (the last
#: records of a partition came ~fetch_max_wait_ms late). Short enough not to be seen;
#: long enough that a slow application does not turn it into a stream of empty fetches.
HELD_BACK_WAIT_MS = 20

_TOPIC_ID_CODES = (ErrorCode.UNKNOWN_TOPIC_ID, ErrorCode.INCONSISTENT_TOPIC_ID,
                   ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR)


class Fetcher:
    """Fetch requests and the buffer of fetched blobs (see the module docstring)."""

    def __init__(self, config: ConsumerConfig, loop: asyncio.AbstractEventLoop, cluster: Cluster,
                 subs: SubscriptionState,
                 resolve: Callable[[set[TopicPartition]], Awaitable[None]]) -> None:
        self.config = config
        self.loop = loop
        self.cluster = cluster
        self.subs = subs
        self.resolve = resolve          # gives positions to the partitions without one
        self.read_committed = config.isolation_level == "read_committed"
        self.buffer: deque[Fetched] = deque()
        self.buffered_bytes = 0
        self.data_ready = threading.Condition(subs.lock)
        self.adata = Wakeup()
        self.wake = Wakeup()
        self.task: asyncio.Task | None = None
        self.sessions: dict[int, FetchSession[TopicPartition]] = {}     # by broker (KIP-227)
        self.inflight: dict[int, float] = {}   # broker -> when its Fetch was sent
        # whether the last launch left a partition unfetched for want of buffer room (set
        # under the subscription's lock): only then does a poll that frees room need to
        # wake the loop (``room_freed``); otherwise a Fetch in flight relaunches when it ends
        self.held_back = True
        self.closed = False
        # the next poll raises this (a non-retriable fetch error, or no offset for a
        # partition under auto_offset_reset="none")
        self.error: BaseException | None = None
        # the next poll reports this (raised, or given to error_cb): a connection-level
        # failure no retry mends (a response over receive_message_max_bytes)
        self.transport_error: BaseException | None = None
        self._transport_told = -1e9
        # the last time the fetcher made progress (see the module docstring), and the last
        # failure since
        self.progress_at = time.monotonic()
        self.last_failure: BaseException | None = None
        self.last_failure_at = 0.0
        # partitions whose answers made no progress: tp -> ((epoch, offset), answers in a
        # row, the error once stuck)
        self.stuck: dict[TopicPartition, tuple[tuple[int, int], int, KcodecError | None]] = {}

    def start(self) -> None:
        if self.task is None:
            self.task = self.loop.create_task(self._run())

    def stop(self) -> None:
        self.closed = True
        if self.task is not None:
            self.task.cancel()

    def failed(self, exc: BaseException) -> None:
        now = time.monotonic()
        self.last_failure, self.last_failure_at = exc, now
        # reported at once, then at most once per api_timeout_ms while it goes on
        if isinstance(exc, ResponseTooLargeError) and \
                now - self._transport_told >= self.config.api_timeout_ms / 1000:
            self.transport_error, self._transport_told = exc, now

    def progressed(self) -> None:
        self.progress_at = time.monotonic()

    def lost_broker(self) -> BrokerNotAvailableError | None:
        """The error ``poll`` reports when the fetcher wanted data and made no progress for
        ``api_timeout_ms`` (then the clock restarts, so a later poll may report again)."""
        now = time.monotonic()
        limit = self.config.api_timeout_ms / 1000
        # a Fetch may rightly wait fetch_max_wait_ms at the broker
        since = self.progress_at
        if now - since < max(limit, self.config.fetch_max_wait_ms / 1000 + 1) \
                or self.closed or not self.subs.states:
            return None
        self.progress_at = now
        waiting = [f"a Fetch to {self.cluster.address(node)} unanswered for {now - t:.1f} s"
                   for node, t in sorted(self.inflight.items()) if now - t > 1]
        parts = []
        if self.last_failure is not None and self.last_failure_at >= since:
            parts.append(f"last error: {self.last_failure}")
        if waiting:
            parts.append("; ".join(waiting))
        if not parts:
            parts.append("no Fetch could be sent (no leader known for the assigned partitions)")
        return BrokerNotAvailableError(
            f"no broker answered for {limit:.1f} s; " + "; ".join(parts))

    def stopped(self) -> KcodecError | None:
        """The error ``poll`` raises when the fetch task ended on an unexpected error (a
        bug): without it the consumer would go on returning nothing, silently."""
        t = self.task
        if self.closed or t is None or not t.done() or t.cancelled() or t.exception() is None:
            return None
        err = KcodecError(f"the consumer's fetch loop stopped on an unexpected error "
                          f"({t.exception()!r}): no more records will come; close this "
                          f"consumer and create a new one")
        err.retriable = False   # type: ignore[attr-defined]
        return err

    def stuck_error(self) -> KcodecError | None:
        """Why a partition is not fetched (see the module docstring): the error of a stuck
        partition still at the epoch and offset it stuck at; stale entries are dropped."""
        if not self.stuck:      # the common case, on every poll: no lock taken
            return None
        with self.subs.lock:
            for tp, (key, _n, err) in list(self.stuck.items()):
                st = self.subs.states.get(tp)
                if st is None or key != (st.epoch, st.fetch_position):
                    del self.stuck[tp]
                elif err is not None:
                    return err
        return None

    def _is_stuck(self, tp: TopicPartition, st: PartitionState) -> bool:
        s = self.stuck.get(tp)
        return s is not None and s[2] is not None and s[0] == (st.epoch, st.fetch_position)

    def _no_progress(self, tp: TopicPartition, st: PartitionState, offset: int,
                     data: Any) -> None:
        """An answer owed a whole batch of ``tp`` at ``offset`` (the first with records)
        brought ``data`` without one past the offset."""
        with self.subs.lock:
            key = (st.epoch, offset)
            prev = self.stuck.get(tp)
            n = prev[1] + 1 if prev is not None and prev[0] == key else 1
            err: KcodecError | None = None
            if n >= BatchTooLargeError.FETCHES:
                cfg = self.config
                size = entry_frame(data)[1] + ENTRY_OVERHEAD if len(data) >= ENTRY_PREFIX else 0
                if size > len(data):
                    err = BatchTooLargeError(tp.topic, tp.partition, offset, size, len(data), n, {
                        "max_partition_fetch_bytes": cfg.max_partition_fetch_bytes,
                        "fetch_max_bytes": cfg.fetch_max_bytes,
                        "receive_message_max_bytes": cfg.receive_message_max_bytes})
                else:
                    err = FetchedBatchError(
                        tp.topic, tp.partition, offset,
                        f"{n} fetch answers in a row brought {len(data)} bytes of records "
                        "with no whole batch past the offset: failed to make progress")
                log.warning("%s", err)
            self.stuck[tp] = (key, n, err)

    def drop(self, pred: Callable[[Fetched], bool]) -> None:
        """Drop buffered blobs ``pred`` picks (the subscription's lock held)."""
        keep = deque(f for f in self.buffer if not pred(f))
        self.buffer = keep
        self.buffered_bytes = sum(len(f.data) for f in keep)

    def kick(self) -> None:
        try:
            running = asyncio.get_running_loop() is self.loop
        except RuntimeError:
            running = False
        if running:
            self.wake.set()
        else:
            self.loop.call_soon_threadsafe(self.wake.set)

    async def _run(self) -> None:
        cfg = self.config
        backoff = cfg.retry_backoff_ms / 1000
        while not self.closed:
            self.wake.clear()
            try:
                if self._resolving():
                    try:
                        await self.resolve(self.subs.no_offset)
                        self.progressed()
                    except NoOffsetForPartitionError as exc:
                        # raised by the next poll; not asked again until seek(); the others fetch
                        self.subs.no_offset.update(exc.partitions)
                        self.error = exc
                await self._launch()
            except asyncio.CancelledError:
                raise
            except KcodecError as exc:
                if not getattr(exc, "retriable", True):
                    self.error = exc
                self.failed(exc)
                self.cluster.invalidate()
                await asyncio.sleep(backoff)
                continue
            except Exception as exc:   # a bug: the next poll raises it, and fetching goes on
                self.error = exc
                await asyncio.sleep(backoff)
                continue
            await self.wake.wait(1.0)

    def _resolving(self) -> bool:
        subs = self.subs
        with subs.lock:
            return subs.resolve and any(st.position is None and tp not in subs.no_offset
                                        for tp, st in subs.states.items())

    def room_freed(self) -> None:
        """A poll took buffered records: wake the loop if that lets it fetch more (it held
        a partition back for its full buffer, or nothing is in flight). The poll thread
        took them under the subscription's lock and ``_launch`` sets ``held_back`` under
        it, so a launch either saw the room or left the flag for this to see. Not when
        the loop's own wake-up is set already (a Fetch just ended): its next launch comes
        after this take, since the loop clears the flag before it launches, and a kick
        then is a self-pipe write and a loop turn for nothing."""
        if (self.held_back or not self.inflight) and not self.wake.is_set():
            self.kick()

    async def _launch(self) -> None:
        sel = self._select()
        if sel is None:
            return
        wanted, held = sel
        if not wanted and not self.inflight and not self._resolving():
            self.progressed()    # nothing asked of the brokers: nobody is late
        if self._needs_refresh(wanted):
            await self.cluster.refresh(sorted({tp.topic for tp in wanted}), auto_create=False)
        self._dispatch(wanted, held)

    def _select(self) -> tuple[list[TopicPartition], list[TopicPartition]] | None:
        """The partitions to fetch and those held back for their full buffer (``held_back``
        set to match), or None when the whole buffer is over its limit."""
        cfg = self.config
        with self.subs.lock:
            over = self.buffered_bytes >= max(cfg.fetch_max_bytes, 1 << 20) * 2
            if over:
                self.held_back = True
        if over:
            self.progressed()    # waiting for the application, not for a broker
            return None
        buffered_tps: dict[TopicPartition, int] = {}
        wanted: list[TopicPartition] = []
        held: list[TopicPartition] = []
        # the polling thread pops the buffer and a rebalance replaces the states: both
        # are read under the subscription's lock, never iterated while they change
        with self.subs.lock:
            for f in self.buffer:
                buffered_tps[f.tp] = buffered_tps.get(f.tp, 0) + 1
            for tp, state in self.subs.states.items():
                if not state.paused and state.fetch_position is not None \
                        and not self._is_stuck(tp, state):
                    (wanted if buffered_tps.get(tp, 0) < 2 else held).append(tp)
            self.held_back = bool(held)
        return wanted, held

    def _needs_refresh(self, wanted: list[TopicPartition]) -> bool:
        """Whether the metadata must be refreshed before ``wanted`` can be fetched (a topic
        or partition it does not know, or stale metadata)."""
        if not wanted:
            return False
        if self.cluster.stale:
            return True
        topics = self.cluster.topics
        return any(tp.topic not in topics or topics[tp.topic].partitions.get(tp.partition, -1) < 0
                   for tp in wanted)

    def _dispatch(self, wanted: list[TopicPartition], held: list[TopicPartition],
                  keep: int | None = None
                  ) -> tuple[list[tuple[TopicPartition, int]], bool, dict[TopicPartition, int]] | None:
        """Launch a Fetch to each leader of ``wanted`` with none in flight. The one to
        ``keep`` is not launched but returned (its partitions, whether it is short, the
        epochs), for the task that just ended its last to send it itself."""
        by_node: dict[int, list[tuple[TopicPartition, int]]] = {}
        epochs: dict[TopicPartition, int] = {}
        with self.subs.lock:     # the offset and the epoch of one state, read together
            for tp in wanted:
                st = self.subs.states.get(tp)
                if st is None:   # revoked by a rebalance while the metadata was refreshed
                    continue
                leader = self._leader(tp)
                if leader < 0 or leader in self.inflight or st.fetch_position is None:
                    continue
                by_node.setdefault(leader, []).append((tp, st.fetch_position))
                epochs[tp] = st.epoch
        held_on = {self._leader(tp) for tp in held} if held and by_node else set()
        kept = None
        for node, parts in by_node.items():
            self.inflight[node] = time.monotonic()
            if node == keep:
                kept = (parts, node in held_on, epochs)
            else:
                self.loop.create_task(self._fetch(node, parts, short=node in held_on,
                                                  epochs=epochs))
        if held and all(self._leader(tp) in self.inflight for tp in held):
            # every held partition's broker has a Fetch in flight: its end relaunches
            self.held_back = False
        return kept

    def _relaunch(self, node: int
                  ) -> tuple[list[tuple[TopicPartition, int]], bool, dict[TopicPartition, int]] | None:
        """The next Fetch to ``node``, right after its last was answered, sent by the same
        task (see ``_fetch``); None when the fetch loop must decide (it was woken for
        something else, positions to resolve, metadata to refresh, a full buffer)."""
        if self.closed or self.wake.is_set() or self._resolving():
            return None
        sel = self._select()
        if sel is None:
            return None
        wanted, held = sel
        if not wanted or self._needs_refresh(wanted):
            return None
        self.inflight.pop(node, None)
        return self._dispatch(wanted, held, keep=node)

    def _leader(self, tp: TopicPartition) -> int:
        info = self.cluster.topics.get(tp.topic)
        return info.partitions.get(tp.partition, -1) if info is not None else -1

    async def _fetch(self, node: int, parts: list[tuple[TopicPartition, int]],
                     short: bool = False, epochs: dict[TopicPartition, int] | None = None) -> None:
        """Fetches to ``node``, the first for ``parts``: as long as an answer leaves the
        next one plain (``_relaunch``), this task sends it, without a turn through the
        fetch loop and a new task (two loop turns more before the next Fetch was on its
        way, while the blocking consumer's polling thread waited for the GIL). Otherwise
        it ends and wakes the fetch loop, which decides."""
        try:
            while (woke := await self._fetch_once(node, parts, short, epochs)) is not None:
                if woke:
                    # an asyncio consumer waited for these records on this loop: its turn
                    # first (the blocking consumer's thread was woken already)
                    await asyncio.sleep(0)
                nxt = self._relaunch(node)
                if nxt is None:
                    break
                parts, short, epochs = nxt
        finally:
            self.inflight.pop(node, None)
            self.wake.set()

    async def _fetch_once(self, node: int, parts: list[tuple[TopicPartition, int]],
                          short: bool = False,
                          epochs: dict[TopicPartition, int] | None = None) -> bool | None:
        """One Fetch to ``node`` for ``parts`` (partition, fetch offset), asked for the
        partition states of ``epochs`` (read with the offsets); ``short``: a partition
        there is held back for its full buffer, so the broker waits HELD_BACK_WAIT_MS at
        most for the others' records. None unless it was answered and taken whole; then
        whether an asyncio consumer was waiting for the records it brought.

        An answer counts for a partition only if its state is still the one asked for
        (same epoch) and still fetches from the offset asked (Java's fetcher checks the
        same): a rebalance that revoked the partition and gave it back, a seek, a reset or
        another answer that came first makes it stale, and it is dropped. Taking it would
        skip the records between the new position and the old fetch offset."""
        cfg = self.config
        max_wait = min(cfg.fetch_max_wait_ms, HELD_BACK_WAIT_MS) if short else cfg.fetch_max_wait_ms
        session = self.sessions.get(node)
        if session is None:
            session = self.sessions[node] = FetchSession[TopicPartition]()
        try:
            if epochs is None:
                with self.subs.lock:
                    epochs = {tp: st.epoch for tp, _off in parts
                              if (st := self.subs.states.get(tp)) is not None}
            # KIP-227: only new and moved partitions go into an incremental fetch
            conn = await self.cluster.connection(node)
            # KIP-516: topics by id; without ids in the metadata, the last named version
            version, ids = self.cluster.by_topic_id(
                ApiKey.FETCH, conn.core.version(ApiKey.FETCH),
                {tp.topic for tp, _ in parts} | {tp.topic for tp in session.offsets})
            if session.topic_ids != (ids is not None):
                session.reset()           # a session names topics one way throughout
                session.topic_ids = ids is not None
            sid, sepoch, send, forget = session.build(dict(parts))
            req = requests.fetch(
                max_wait_ms=max_wait, min_bytes=cfg.fetch_min_bytes,
                max_bytes=cfg.fetch_max_bytes, read_committed=self.read_committed,
                session_id=sid, session_epoch=sepoch,
                partitions=[(tp.topic, tp.partition, off) for tp, off in send.items()],
                partition_max_bytes=cfg.max_partition_fetch_bytes,
                forgotten=[(tp.topic, tp.partition) for tp in forget], topic_ids=ids)
            timeout = cfg.request_timeout_ms / 1000 + cfg.fetch_max_wait_ms / 1000
            cm = self.cluster.metrics
            t0 = time.monotonic()
            try:
                body = await self.cluster.request(node, req, version, timeout=timeout)
            except BaseException:
                session.on_error()
                raise
            self.progressed()
            if cm is not None:
                cm.fetches.value += 1
                cm.fetch_latency.record((time.monotonic() - t0) * 1000)
            code = body.error_code
            if not session.on_response(code, getattr(body, "session_id", 0) or 0):
                return None       # the session is gone: the next fetch is a full one
            if code in _TOPIC_ID_CODES:   # the topic ids changed: re-learn them, a new session
                session.reset()
                self.cluster.invalidate()
                return None
            if code:
                raise KafkaError(code, "Fetch")
            offsets = dict(parts)
            got: list[tuple[Fetched, int]] = []
            owed = True    # no partition before in this answer had records (KIP-74)
            for t in body.responses:
                name = t.topic if ids is None else self.cluster.topic_names.get(t.topic_id)
                if name is None:          # an id we do not know (any more): re-learn
                    self.cluster.invalidate()
                    continue
                for p in t.partitions:
                    first, owed = owed and bool(p.records), owed and not p.records
                    tp = TopicPartition(name, p.partition_index)
                    if tp not in offsets:
                        continue
                    st = self._current(tp, epochs.get(tp), offsets[tp])
                    if st is None:
                        continue
                    if p.error_code:
                        if cm is not None:
                            cm.error("Fetch", p.error_code)
                        self._partition_error(tp, st, p.error_code)
                        continue
                    st.high_watermark = p.high_watermark
                    st.log_start = p.log_start_offset
                    data = p.records
                    if not data:
                        continue
                    if cm is not None:
                        cm.consumed_bytes.value += len(data)
                        cm.consumer_topic(name)[1].value += len(data)
                    nxt = next_offset(data, offsets[tp])
                    if nxt <= offsets[tp]:
                        if first:
                            self._no_progress(tp, st, offsets[tp], data)
                        continue
                    self.stuck.pop(tp, None)
                    got.append((Fetched(tp, offsets[tp], data, p.aborted_transactions,
                                        st.epoch), nxt))
            if self.cluster.debug.fetch:
                log.debug("fetch from node %s: %d partitions asked, %d with data (%d bytes) "
                          "in %.1f ms", node, len(parts), len(got),
                          sum(len(f.data) for f, _ in got), (time.monotonic() - t0) * 1000)
            if got:
                with self.subs.lock:   # checked again: the polling thread may have moved on
                    for f, nxt in got:
                        st = self.subs.states.get(f.tp)
                        if st is None or st.epoch != f.epoch or st.fetch_position != f.offset:
                            continue
                        st.fetch_position = nxt
                        self.buffer.append(f)
                        self.buffered_bytes += len(f.data)
                    self.data_ready.notify_all()
                return self.adata.set()
            return False
        except asyncio.CancelledError:
            raise
        except KcodecError as exc:
            if isinstance(exc, KafkaError) and not exc.retriable:
                self.error = exc
            if not isinstance(exc, KafkaError):
                self.failed(exc)
            self.cluster.invalidate()
            await asyncio.sleep(cfg.retry_backoff_ms / 1000)
            return None

    def _current(self, tp: TopicPartition, epoch: int | None, offset: int) -> PartitionState | None:
        """``tp``'s state if a fetch answer from ``offset`` asked for this ``epoch`` is
        still its answer (see ``_fetch``), else None."""
        with self.subs.lock:
            st = self.subs.states.get(tp)
            if st is None or st.epoch != epoch or st.fetch_position != offset:
                return None
            return st

    def _refetch(self, st: PartitionState, f: Fetched) -> None:
        """``f`` starts past the position (``_gap``): drop what is buffered for its
        partition and fetch again from the position (lock held). Skipping to ``f`` would
        lose the records in between; no answer that ``_fetch`` keeps leads here."""
        log.warning("%s[%d]: a fetched blob starts at offset %d, past the position %d: "
                    "fetching again from the position", f.tp.topic, f.tp.partition, f.offset,
                    st.position)
        self.drop(lambda b: b.tp == f.tp)
        st.fetch_position = st.position
        st.epoch = self.subs.next_epoch()
        self.kick()

    def _partition_error(self, tp: TopicPartition, st: PartitionState, code: int) -> None:
        if code == ErrorCode.OFFSET_OUT_OF_RANGE:
            if self.config.auto_offset_reset == "none":
                self.error = KafkaError(code, f"fetch {tp.topic}[{tp.partition}]")
            with self.subs.lock:
                st.position = st.fetch_position = None
                st.epoch = self.subs.next_epoch()
        elif code in FETCH_REFRESH_CODES:
            self.cluster.invalidate()
        elif code == ErrorCode.UNKNOWN_LEADER_EPOCH:
            pass        # the broker has not seen the new leader epoch yet: fetch again
        else:
            self.error = KafkaError(code, f"fetch {tp.topic}[{tp.partition}]")

    # ------------------------------------------------------------------ decoding (caller)
    def take(self, max_records: int) -> dict[TopicPartition, list]:
        """Decode up to ``max_records`` buffered records, advancing positions."""
        out: dict[TopicPartition, list] = {}
        n = 0
        check = self.config.check_crcs
        while n < max_records:
            with self.subs.lock:
                if not self.buffer:
                    break
                f = self.buffer[0]
                st = self.subs.states.get(f.tp)
                if st is None or st.epoch != f.epoch:
                    self.buffer.popleft()
                    self.buffered_bytes -= len(f.data)
                    continue
                if f.records is None and _gap(f, st):
                    self._refetch(st, f)
                    continue
            if f.records is None:
                at = st.position if st.position is not None else f.offset
                try:
                    f.records, f.next_offset = decode(f, at, check, self.read_committed)
                except DecodeError as exc:
                    # name where: the caller can seek past it, or stop and say what to check
                    raise FetchedBatchError(f.tp.topic, f.tp.partition, at, str(exc)) from exc
                f.pos = 0
            recs = f.records
            k = min(max_records - n, len(recs) - f.pos)
            if k:
                chunk = recs[f.pos:f.pos + k] if (f.pos or k < len(recs)) else recs
                f.pos += k
                n += k
                lst = out.get(f.tp)
                if lst is None:
                    out[f.tp] = chunk
                else:
                    lst.extend(chunk)
            with self.subs.lock:
                if st.epoch == f.epoch:
                    if f.pos >= len(recs):
                        st.position = max(st.position or 0, f.next_offset)
                    elif f.pos:
                        st.position = recs[f.pos - 1].offset + 1
                if f.pos >= len(recs):
                    if self.buffer and self.buffer[0] is f:
                        self.buffer.popleft()
                        self.buffered_bytes -= len(f.data)
        if n or not self.buffer:
            self.room_freed()
        return out

    def take_columns(self) -> dict[TopicPartition, Any]:
        """One buffered blob per partition as ``RecordColumns`` (``decode_columns``): rows
        before the position, control batches and (read_committed) aborted transactions
        dropped; positions advance past the blob. Partitions without rows are left out."""
        from kcodec.records import decode_columns

        picked: dict[TopicPartition, Fetched] = {}
        with self.subs.lock:
            rest: deque[Fetched] = deque()
            gaps: list[tuple[PartitionState, Fetched]] = []
            for f in self.buffer:
                st = self.subs.states.get(f.tp)
                if st is None or st.epoch != f.epoch:
                    continue
                if f.tp in picked or f.records is not None:
                    rest.append(f)
                elif _gap(f, st):
                    gaps.append((st, f))
                else:
                    picked[f.tp] = f
            self.buffer = rest
            self.buffered_bytes = sum(len(f.data) for f in rest)
            for st, f in gaps:
                self._refetch(st, f)
        out = {}
        for tp, f in picked.items():
            st = self.subs.states.get(tp)
            if st is None:
                continue
            data, blob_next = visible_blob(f, self.read_committed)
            try:
                cols = decode_columns(data, validate_crc=self.config.check_crcs)
            except DecodeError as exc:   # the position stays: the blob is fetched again
                at = st.position if st.position is not None else f.offset
                raise FetchedBatchError(tp.topic, tp.partition, at, str(exc)) from exc
            if st.position is not None and len(cols) and int(cols.offset[0]) < st.position:
                cols = trim_columns(cols, st.position)
            with self.subs.lock:
                if st.epoch == f.epoch:
                    nxt = blob_next if blob_next is not None else cols.next_offset
                    st.position = max(st.position or 0, nxt if nxt is not None else f.offset)
            if len(cols):
                out[tp] = cols
        self.room_freed()
        return out


def _gap(f: Fetched, st: PartitionState) -> bool:
    """A blob not yet decoded that does not continue from the partition's position."""
    return st.position is not None and f.offset > st.position
