"""Consumer: ``AsyncConsumer`` (asyncio) and ``Consumer`` (blocking), one engine.

A fetcher task on the client's loop keeps one Fetch in flight per leader and buffers the
raw records blobs (prefetching ahead of the application); ``poll`` decodes them with
``kcodec.records`` in the caller's thread, hides control batches, filters aborted
transactions under ``read_committed`` and advances positions. Group membership (classic
protocol) is in ``kcodec.client.group``; joins run from ``poll`` so rebalance callbacks run
in the caller's context, heartbeats in the background.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
import time
from collections import deque
from collections.abc import Generator, Iterable, Iterator
from typing import Any, Callable, NamedTuple

from kcodec.client._sync import GRACE, LoopThread, shared_loop
from kcodec.client.cluster import REFRESH_CODES, Cluster
from kcodec.client.config import ConsumerConfig
from kcodec.client.core import TOPIC_ID_VERSIONS
from kcodec.client.errors import (
    BrokerNotAvailableError,
    ClientClosedError,
    KafkaError,
    KafkaTimeoutError,
    NoOffsetForPartitionError,
)
from kcodec.client.fetch_session import FetchSession
from kcodec.client.group import GroupMember, TopicPartition
from kcodec.errors import KcodecError

__all__ = ["Consumer", "AsyncConsumer", "ConsumerRecord", "TopicPartition", "RebalanceListener"]

EARLIEST, LATEST = -2, -1


class ConsumerRecord(NamedTuple):
    topic: str
    partition: int
    offset: int
    timestamp: int
    timestamp_type: int
    key: bytes | None
    value: bytes | None
    headers: list


class RebalanceListener:
    """Override what you need; methods may be plain functions or coroutines (async consumer).

    Called from ``poll`` (the blocking consumer: in the polling thread) and ``close``, in the
    Java client's order: ``on_partitions_revoked`` while the partitions are still owned and
    before they move (after auto-commit committed them); ``on_partitions_assigned`` after
    each completed rebalance (possibly empty); ``on_partitions_lost`` instead of revoked when
    the membership was lost (by default it calls ``on_partitions_revoked``).
    """

    def on_partitions_revoked(self, revoked: list[TopicPartition]) -> Any: ...
    def on_partitions_assigned(self, assigned: list[TopicPartition]) -> Any: ...
    def on_partitions_lost(self, lost: list[TopicPartition]) -> Any:
        return self.on_partitions_revoked(lost)


class _PState:
    __slots__ = ("position", "fetch_position", "high_watermark", "paused", "epoch")

    def __init__(self) -> None:
        self.position: int | None = None
        self.fetch_position: int | None = None
        self.high_watermark = -1
        self.paused = False
        self.epoch = 0   # bumped on seek: buffered data of an older epoch is stale


class _Fetched:
    """One partition's records blob from a Fetch, decoded lazily by ``poll``."""

    __slots__ = ("tp", "offset", "data", "aborted", "epoch", "records", "pos", "next_offset")

    def __init__(self, tp: TopicPartition, offset: int, data: bytes, aborted: Any, epoch: int) -> None:
        self.tp, self.offset, self.data, self.aborted, self.epoch = tp, offset, data, aborted, epoch
        self.records: list | None = None
        self.pos = 0
        self.next_offset = offset


def _group_member(cluster: Cluster, config: ConsumerConfig) -> GroupMember:
    if config.group_protocol == "consumer":   # KIP-848: the broker assigns
        from kcodec.client.consumer_group import ConsumerGroupMember

        return ConsumerGroupMember(cluster, config)
    return GroupMember(cluster, config)


class _Engine:
    def __init__(self, config: ConsumerConfig, loop: asyncio.AbstractEventLoop) -> None:
        self.config = config
        self.loop = loop
        self.cluster = Cluster(config)
        self.group = _group_member(self.cluster, config) if config.group_id else None
        self.states: dict[TopicPartition, _PState] = {}
        self.subscription: list[str] = []
        self.listener: RebalanceListener | None = None
        self.buffer: deque[_Fetched] = deque()
        self.buffered_bytes = 0
        self.lock = threading.Lock()
        self.data_ready = threading.Condition(self.lock)
        self.adata = asyncio.Event()
        self.wake = asyncio.Event()
        self.fetcher: asyncio.Task | None = None
        self.sessions: dict[int, FetchSession[TopicPartition]] = {}     # fetch sessions by broker (KIP-227)
        self.inflight: set[int] = set()
        self.closed = False
        self.error: BaseException | None = None
        self.last_commit = time.monotonic()
        self.read_committed = config.isolation_level == "read_committed"
        self.no_offset: set[TopicPartition] = set()   # auto_offset_reset=none found no offset
        # positions are looked up once the application polls (as in Java), so a commit or
        # seek between assign() and the first poll() is honoured
        self.resolve = False
        # records an iterator took from a poll but has not handed out yet: tp -> the offset
        # of the first of them (what commits and rewinds use instead of the position)
        self.held: dict[TopicPartition, int] = {}
        # no broker answer since this time (None: the last request went well), and why
        self.failing_since: float | None = None
        self.last_failure: BaseException | None = None
        self.last_failure_at = 0.0

    def failed(self, exc: BaseException) -> None:
        now = time.monotonic()
        self.last_failure, self.last_failure_at = exc, now
        if self.failing_since is None or self.cluster.last_ok > self.failing_since:
            self.failing_since = now

    def lost_broker(self) -> BrokerNotAvailableError | None:
        """The error ``poll`` raises when the brokers failed every request for
        ``api_timeout_ms``: failures since then, still coming, and no answer in between
        (then the clock restarts, so a later poll may raise again)."""
        since = self.failing_since
        if since is None:
            return None
        now = time.monotonic()
        limit = self.config.api_timeout_ms / 1000
        # still failing: something was tried and failed lately (reconnects are tried at
        # least every reconnect_backoff_max_ms while the brokers are wanted)
        lately = max(limit / 2, 2 * self.config.reconnect_backoff_max_ms / 1000)
        if self.cluster.last_ok > since or \
                now - max(self.last_failure_at, self.cluster.last_fail) > lately:
            self.failing_since = None   # answered since, or nothing tried lately
            return None
        if now - since < limit or not self.states:
            return None
        self.failing_since = now
        return BrokerNotAvailableError(
            f"no broker answered for {limit:.1f} s; last error: "
            f"{self.last_failure}")

    # ------------------------------------------------------------------ assignment
    def set_assignment(self, tps: Iterable[TopicPartition]) -> None:
        tps = set(tps)
        with self.lock:
            for tp in list(self.states):
                if tp not in tps:
                    del self.states[tp]
            for tp in tps:
                self.states.setdefault(tp, _PState())
            self.no_offset &= tps
            for tp in [tp for tp in self.held if tp not in tps]:
                del self.held[tp]
            self._drop_buffered(lambda f: f.tp not in tps)
            self.resolve = False
        self.kick()

    def _drop_buffered(self, pred: Callable[[_Fetched], bool]) -> None:
        keep = deque(f for f in self.buffer if not pred(f))
        self.buffer = keep
        self.buffered_bytes = sum(len(f.data) for f in keep)

    def seek(self, tp: TopicPartition, offset: int | None) -> None:
        with self.lock:
            st = self.states.get(tp)
            if st is None:
                raise ValueError(f"{tp} is not assigned to this consumer")
            st.position = offset
            st.fetch_position = offset
            st.epoch += 1
            self.held.pop(tp, None)   # the application said where to go on
            self._drop_buffered(lambda f: f.tp == tp)
            self.no_offset.discard(tp)
            err = self.error
            if isinstance(err, NoOffsetForPartitionError) and tp in err.partitions:
                left = [x for x in err.partitions if x != tp]   # that one is answered now
                self.error = NoOffsetForPartitionError(left) if left else None
        self.kick()

    def kick(self) -> None:
        try:
            running = asyncio.get_running_loop() is self.loop
        except RuntimeError:
            running = False
        if running:
            self.wake.set()
        else:
            self.loop.call_soon_threadsafe(self.wake.set)

    # ------------------------------------------------------------------ positions
    async def reset_positions(self, skip: set[TopicPartition] | frozenset = frozenset()) -> None:
        """Give every assigned partition without a position one: committed, else the policy."""
        missing = [tp for tp, st in self.states.items() if st.position is None and tp not in skip]
        if not missing:
            return
        committed: dict[TopicPartition, int] = {}
        if self.group is not None:
            committed = await self.group.fetch_offsets(missing)
        reset = []
        for tp in missing:
            off = committed.get(tp, -1)
            if off >= 0:
                self._set_position(tp, off)
            else:
                reset.append(tp)
        # a seek() while OffsetFetch was in flight has answered those already
        reset = [tp for tp in reset if tp in self.states and self.states[tp].position is None]
        if reset:
            policy = self.config.auto_offset_reset
            if policy == "none":
                raise NoOffsetForPartitionError(sorted(reset))
            offs = await list_offsets(self.cluster, reset, EARLIEST if policy == "earliest" else LATEST,
                                      self.read_committed)
            for tp, off in offs.items():
                self._set_position(tp, off)

    def _set_position(self, tp: TopicPartition, off: int) -> None:
        st = self.states.get(tp)
        if st is not None and st.position is None:
            st.position = st.fetch_position = off

    # ------------------------------------------------------------------ fetching (loop)
    def start(self) -> None:
        if self.fetcher is None:
            self.fetcher = self.loop.create_task(self._fetch_loop())

    async def _fetch_loop(self) -> None:
        cfg = self.config
        backoff = cfg.retry_backoff_ms / 1000
        while not self.closed:
            self.wake.clear()
            try:
                if self.resolve and any(st.position is None and tp not in self.no_offset
                                        for tp, st in self.states.items()):
                    try:
                        await self.reset_positions(self.no_offset)
                    except NoOffsetForPartitionError as exc:
                        # raised by the next poll; not asked again until seek(); the others fetch
                        self.no_offset.update(exc.partitions)
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
            try:
                await asyncio.wait_for(self.wake.wait(), 1.0)
            except asyncio.TimeoutError:
                pass

    async def _launch(self) -> None:
        cfg = self.config
        if self.buffered_bytes >= max(cfg.fetch_max_bytes, 1 << 20) * 2:
            return
        buffered_tps: dict[TopicPartition, int] = {}
        for f in self.buffer:
            buffered_tps[f.tp] = buffered_tps.get(f.tp, 0) + 1
        by_node: dict[int, list[tuple[TopicPartition, int]]] = {}
        wanted = [tp for tp, st in self.states.items()
                  if not st.paused and st.fetch_position is not None and buffered_tps.get(tp, 0) < 2]
        unknown = {tp.topic for tp in wanted if tp.topic not in self.cluster.topics
                   or self.cluster.topics[tp.topic].partitions.get(tp.partition, -1) < 0}
        if unknown or (wanted and self.cluster.stale):
            await self.cluster.refresh(sorted({tp.topic for tp in wanted}), auto_create=False)
        for tp in wanted:
            st = self.states[tp]
            info = self.cluster.topics.get(tp.topic)
            leader = info.partitions.get(tp.partition, -1) if info is not None else -1
            if leader < 0:
                continue
            if leader in self.inflight or st.fetch_position is None:
                continue
            by_node.setdefault(leader, []).append((tp, st.fetch_position))
        for node, parts in by_node.items():
            self.inflight.add(node)
            self.loop.create_task(self._fetch(node, parts))

    async def _fetch(self, node: int, parts: list[tuple[TopicPartition, int]]) -> None:
        cfg = self.config
        session = self.sessions.get(node)
        if session is None:
            session = self.sessions[node] = FetchSession[TopicPartition]()
        try:
            topics: dict[str, list] = {}
            epochs = {}
            for tp, _off in parts:
                epochs[tp] = self.states[tp].epoch if tp in self.states else -1
            # KIP-227: only new and moved partitions go into an incremental fetch
            conn = await self.cluster.connection(node)
            version = conn.core.version(1)
            ids = None
            if version >= TOPIC_ID_VERSIONS[1]:
                # KIP-516: topics by id; without ids in the metadata, the last named version
                ids = self.cluster.topic_ids({tp.topic for tp, _ in parts} |
                                             {tp.topic for tp in session.offsets})
                if ids is None:
                    version = TOPIC_ID_VERSIONS[1] - 1
            if session.topic_ids != (ids is not None):
                session.reset()           # a session names topics one way throughout
                session.topic_ids = ids is not None
            sid, sepoch, send, forget = session.build(dict(parts))
            for tp, off in send.items():
                topics.setdefault(tp.topic, []).append({
                    "partition": tp.partition, "current_leader_epoch": -1, "fetch_offset": off,
                    "last_fetched_epoch": -1, "log_start_offset": -1,
                    "partition_max_bytes": cfg.max_partition_fetch_bytes})
            forgotten: dict[str, list[int]] = {}
            for tp in forget:
                forgotten.setdefault(tp.topic, []).append(tp.partition)
            req = {"replica_id": -1, "max_wait_ms": cfg.fetch_max_wait_ms,
                   "min_bytes": cfg.fetch_min_bytes, "max_bytes": cfg.fetch_max_bytes,
                   "isolation_level": 1 if self.read_committed else 0, "session_id": sid,
                   "session_epoch": sepoch,
                   "topics": [{"topic": t, "topic_id": ids and ids[t], "partitions": ps}
                              for t, ps in topics.items()],
                   "forgotten_topics_data": [{"topic": t, "topic_id": ids and ids[t],
                                              "partitions": ps}
                                             for t, ps in forgotten.items()],
                   "rack_id": ""}
            timeout = cfg.request_timeout_ms / 1000 + cfg.fetch_max_wait_ms / 1000
            try:
                resp = await self.cluster.send(node, 1, req, version, timeout=timeout)
            except BaseException:
                session.on_error()
                raise
            body = resp.body
            code = getattr(body, "error_code", 0) or 0
            if not session.on_response(code, getattr(body, "session_id", 0) or 0):
                return            # the session is gone: the next fetch is a full one
            if code in (100, 103, 106):   # UNKNOWN/INCONSISTENT topic id, session topic ids
                session.reset()
                self.cluster.invalidate()
                return
            if code:
                raise KafkaError(code, "Fetch")
            offsets = dict(parts)
            got = []
            for t in body.responses:
                name = t.topic if ids is None else self.cluster.topic_names.get(t.topic_id)
                if name is None:          # an id we do not know (any more): re-learn
                    self.cluster.invalidate()
                    continue
                for p in t.partitions:
                    tp = TopicPartition(name, p.partition_index)
                    st = self.states.get(tp)
                    if st is None or st.epoch != epochs.get(tp) or tp not in offsets:
                        continue
                    if p.error_code:
                        self._partition_error(tp, st, p.error_code)
                        continue
                    st.high_watermark = p.high_watermark
                    data = p.records
                    if not data:
                        continue
                    nxt = _next_offset(data, offsets[tp])
                    if nxt <= offsets[tp]:
                        continue
                    f = _Fetched(tp, offsets[tp], data, p.aborted_transactions, st.epoch)
                    st.fetch_position = nxt
                    got.append(f)
            if got:
                with self.lock:
                    for f in got:
                        if self.states.get(f.tp) is not None and self.states[f.tp].epoch == f.epoch:
                            self.buffer.append(f)
                            self.buffered_bytes += len(f.data)
                    self.data_ready.notify_all()
                self.adata.set()
        except asyncio.CancelledError:
            raise
        except KcodecError as exc:
            if isinstance(exc, KafkaError) and not exc.retriable:
                self.error = exc
            if not isinstance(exc, KafkaError):
                self.failed(exc)
            self.cluster.invalidate()
            await asyncio.sleep(cfg.retry_backoff_ms / 1000)
        finally:
            self.inflight.discard(node)
            self.wake.set()

    def _partition_error(self, tp: TopicPartition, st: _PState, code: int) -> None:
        if code == 1:   # OFFSET_OUT_OF_RANGE
            if self.config.auto_offset_reset == "none":
                self.error = KafkaError(code, f"fetch {tp.topic}[{tp.partition}]")
            st.position = st.fetch_position = None
            st.epoch += 1
        elif code in REFRESH_CODES:
            self.cluster.invalidate()
        else:
            self.error = KafkaError(code, f"fetch {tp.topic}[{tp.partition}]")

    # ------------------------------------------------------------------ decoding (caller)
    def take(self, max_records: int) -> dict[TopicPartition, list]:
        """Decode up to ``max_records`` buffered records, advancing positions."""
        out: dict[TopicPartition, list] = {}
        n = 0
        check = self.config.check_crcs
        while n < max_records:
            with self.lock:
                if not self.buffer:
                    break
                f = self.buffer[0]
                st = self.states.get(f.tp)
                if st is None or st.epoch != f.epoch:
                    self.buffer.popleft()
                    self.buffered_bytes -= len(f.data)
                    continue
            if f.records is None:
                f.records, f.next_offset = _decode(f, st.position if st.position is not None else f.offset,
                                                   check, self.read_committed)
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
            with self.lock:
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
            self.kick()
        return out

    def take_columns(self) -> dict[TopicPartition, Any]:
        """One buffered blob per partition as ``RecordColumns`` (``decode_columns``): rows
        before the position, control batches and (read_committed) aborted transactions
        dropped; positions advance past the blob. Partitions without rows are left out."""
        from kcodec.records import decode_columns

        picked: dict[TopicPartition, _Fetched] = {}
        with self.lock:
            rest: deque[_Fetched] = deque()
            for f in self.buffer:
                st = self.states.get(f.tp)
                if st is None or st.epoch != f.epoch:
                    continue
                if f.tp in picked or f.records is not None:
                    rest.append(f)
                else:
                    picked[f.tp] = f
            self.buffer = rest
            self.buffered_bytes = sum(len(f.data) for f in rest)
        out = {}
        for tp, f in picked.items():
            st = self.states.get(tp)
            if st is None:
                continue
            data, blob_next = _visible_blob(f, self.read_committed)
            cols = decode_columns(data, validate_crc=self.config.check_crcs)
            if st.position is not None and len(cols) and int(cols.offset[0]) < st.position:
                cols = _trim_columns(cols, st.position)
            with self.lock:
                if st.epoch == f.epoch:
                    nxt = blob_next if blob_next is not None else cols.next_offset
                    st.position = max(st.position or 0, nxt if nxt is not None else f.offset)
            if len(cols):
                out[tp] = cols
        self.kick()
        return out

    def positions_to_commit(self) -> dict[TopicPartition, int]:
        """What the application consumed: positions, except where an iterator still holds
        records it has not handed out (those are not consumed yet)."""
        held = self.held
        return {tp: held.get(tp, st.position) for tp, st in self.states.items()
                if st.position is not None}

    def rewind_held(self) -> None:
        """An iterator stopped with records not handed out: fetch them again next time."""
        held = dict(self.held)
        self.held.clear()
        if self.closed:
            return
        for tp, off in held.items():
            st = self.states.get(tp)
            if st is not None and st.position is not None and st.position != off:
                self.seek(tp, off)

    async def abort(self) -> None:
        """Stop at once: no commit, no LeaveGroup; just drop the connections."""
        self.closed = True
        if self.fetcher is not None:
            self.fetcher.cancel()
        if self.group is not None and self.group.hb_task is not None:
            self.group.hb_task.cancel()
        await self.cluster.close()

    async def close(self) -> None:
        self.closed = True
        if self.fetcher is not None:
            self.fetcher.cancel()
        if self.group is not None:
            await self.group.leave()
        await self.cluster.close()


def _next_offset(data: bytes, start: int) -> int:
    """The offset after the last complete batch of a records blob (headers only)."""
    from kcodec.records import iter_batches

    nxt = start
    it = iter_batches(data, validate_crc=False)
    try:
        for b in it:
            nxt = max(nxt, b.next_offset)
    except KcodecError:
        pass
    return nxt


class _Visibility:
    """Which batches of one blob the application sees: control batches never; under
    ``read_committed`` not the batches of aborted transactions either.

    ``aborted`` is the partition's (producer_id, first_offset) list from the Fetch
    response; batches must be shown in offset order. A producer's transaction is aborted
    from its listed first offset up to its ABORT marker (a control batch)."""

    __slots__ = ("pending", "pids", "read_committed")

    def __init__(self, aborted: Any, read_committed: bool) -> None:
        self.read_committed = read_committed
        self.pending = sorted(((a.first_offset, a.producer_id) for a in (aborted or [])),
                              reverse=True) if read_committed else []
        self.pids: set[int] = set()

    def hidden(self, b: Any) -> bool:
        if not self.read_committed:
            return bool(b.is_control)
        pending = self.pending
        while pending and pending[-1][0] <= b.last_offset:
            self.pids.add(pending.pop()[1])
        if b.is_control:
            if b.is_transactional:
                self.pids.discard(b.producer_id)   # the marker ends the transaction
            return True
        return bool(b.is_transactional and b.producer_id in self.pids)


def _decode(f: _Fetched, position: int, check: bool, read_committed: bool) -> tuple[list, int]:
    """Records of ``f`` at or after ``position``, control batches hidden, aborted ones dropped."""
    from kcodec.records import iter_batches

    out: list = []
    nxt = position
    vis = _Visibility(f.aborted, read_committed)
    for b in iter_batches(f.data, validate_crc=check):
        if b.next_offset <= position:
            continue
        nxt = max(nxt, b.next_offset)
        if vis.hidden(b):
            continue
        recs = b.records() if hasattr(b, "records") and callable(b.records) else list(b)
        if recs and recs[0].offset < position:
            recs = [r for r in recs if r.offset >= position]
        out.extend(recs)
    return out, nxt


def _visible_blob(f: _Fetched, read_committed: bool) -> tuple[Any, int | None]:
    """(the bytes ``decode_columns`` should see, the offset after the blob's last complete
    batch or None). Without aborted transactions to drop that is the blob itself (control
    batches are skipped by ``decode_columns``); otherwise the visible batches joined."""
    from kcodec.records import iter_batches

    if not (read_committed and f.aborted):
        return f.data, None
    vis = _Visibility(f.aborted, True)
    view = memoryview(f.data)
    keep: list[Any] = []
    nxt: int | None = None
    dropped = False
    it = iter_batches(view, validate_crc=False)
    try:
        for b in it:
            nxt = b.next_offset if nxt is None else max(nxt, b.next_offset)
            if vis.hidden(b) and not b.is_control:
                dropped = True
                continue
            keep.append(view[b.position:b.position + b.size])
    except KcodecError:
        return f.data, None    # malformed: let decode_columns report it
    if not dropped:
        return f.data, None
    return b"".join(keep), nxt


def _trim_columns(cols: Any, position: int) -> Any:
    """``cols`` without its rows below offset ``position`` (buffers shared, not copied)."""
    import numpy as np

    from kcodec._columnar import BinaryColumn, HeadersColumn, RecordColumns

    start = int(np.searchsorted(cols.offset, position))

    def binary(c: BinaryColumn) -> BinaryColumn:
        validity = None
        nulls = 0
        if c.validity is not None:
            valid = c.valid[start:]
            nulls = int(len(valid) - valid.sum())
            validity = np.packbits(valid, bitorder="little") if nulls else None
        return BinaryColumn(c.offsets[start:], c.data, validity, nulls, c.utf8)

    h = cols.headers
    headers = HeadersColumn(h.offsets[start:], h.keys, h.values)
    return RecordColumns(cols.offset[start:], cols.timestamp[start:], cols.timestamp_type[start:],
                         binary(cols.key), binary(cols.value), headers,
                         None if cols.is_control is None else cols.is_control[start:],
                         cols.consumed, cols.batch_count, cols.next_offset)


async def list_offsets(cluster: Cluster, tps: Iterable[TopicPartition], timestamp: int,
                       read_committed: bool = False) -> dict[TopicPartition, int]:
    """ListOffsets for ``tps`` (EARLIEST, LATEST or a timestamp), grouped by leader."""
    by_node: dict[int, list[TopicPartition]] = {}
    for tp in tps:
        by_node.setdefault(await cluster.leader(tp.topic, tp.partition), []).append(tp)
    out: dict[TopicPartition, int] = {}
    for node, group in by_node.items():
        topics: dict[str, list] = {}
        for tp in group:
            topics.setdefault(tp.topic, []).append(
                {"partition_index": tp.partition, "current_leader_epoch": -1, "timestamp": timestamp})
        req = {"replica_id": -1, "isolation_level": 1 if read_committed else 0,
               "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]}

        async def go(node: int = node, req: dict = req) -> Any:
            r = await cluster.send(node, 2, req)
            for t in r.body.topics:
                for p in t.partitions:
                    if p.error_code:
                        raise KafkaError(p.error_code, f"ListOffsets {t.name}[{p.partition_index}]")
            return r.body
        body = await cluster.call(go, "ListOffsets")
        for t in body.topics:
            for p in t.partitions:
                out[TopicPartition(t.name, p.partition_index)] = p.offset
    return out


# ====================================================================================== facades

class _Common:
    _engine: _Engine

    def group_metadata(self) -> Any:
        """The group, generation and member, for ``send_offsets_to_transaction``."""
        from kcodec.client.transactions import ConsumerGroupMetadata

        g = self._engine.group
        if g is None:
            raise ValueError("group_metadata needs a consumer with a group_id")
        return ConsumerGroupMetadata(g.group_id, g.generation, g.member_id,
                                     self._engine.config.group_instance_id)

    def assignment(self) -> set[TopicPartition]:
        return set(self._engine.states)

    def group_leader(self) -> str | None:
        """The member id of the group's leader, as the last JoinGroup told every member
        (classic protocol); None before joining, and under the consumer protocol (KIP-848),
        where the broker assigns and no member leads."""
        g = self._engine.group
        return (getattr(g, "leader_id", "") or None) if g is not None else None

    def subscription(self) -> list[str]:
        return list(self._engine.subscription)

    def seek(self, partition: TopicPartition, offset: int) -> None:
        """Fetch ``partition`` from ``offset`` next."""
        if offset < 0:
            raise ValueError(f"offset must be non-negative, got {offset}")
        self._engine.seek(TopicPartition(*partition), offset)

    def pause(self, *partitions: TopicPartition) -> None:
        for tp in partitions:
            self._engine.states[TopicPartition(*tp)].paused = True

    def resume(self, *partitions: TopicPartition) -> None:
        for tp in partitions:
            self._engine.states[TopicPartition(*tp)].paused = False
        self._engine.kick()

    def highwater(self, partition: TopicPartition) -> int:
        """The high watermark seen in the last fetch of ``partition`` (-1: none yet)."""
        st = self._engine.states.get(TopicPartition(*partition))
        return st.high_watermark if st else -1

    def _check(self) -> None:
        eng = self._engine
        if eng.closed:
            raise ClientClosedError("the consumer is closed")
        if eng.held:   # poll() after an iterator stopped early: hand those records out again
            eng.rewind_held()
        lost = eng.lost_broker()
        if lost is not None:
            raise lost
        if eng.error is not None:
            err, eng.error = eng.error, None
            if isinstance(err, NoOffsetForPartitionError):   # ask again after this poll
                with eng.lock:
                    eng.no_offset.difference_update(err.partitions)
                eng.kick()
            raise err

    def _polled(self) -> None:
        g = self._engine.group
        if g is not None:
            g.last_poll = time.monotonic()

    def _resolve_positions(self) -> None:
        """From now on the fetcher may look up missing positions (committed, else reset)."""
        eng = self._engine
        if not eng.resolve:
            eng.resolve = True
            eng.kick()

    def _auto_commit_due(self) -> bool:
        eng = self._engine
        cfg = eng.config
        return bool(eng.group is not None and cfg.enable_auto_commit and eng.states
                    and time.monotonic() - eng.last_commit >= cfg.auto_commit_interval_ms / 1000)

    def _hand_out(self, polled: dict[TopicPartition, list]) -> Iterator[ConsumerRecord]:
        """Records of one poll, one at a time; a record counts as consumed once handed out
        (kafka-python's iterator semantics), so commits -- automatic, on rebalance, on
        close -- never pass a record the application did not get. Stopping early rewinds
        the partitions to the first record not handed out."""
        held = self._engine.held
        for tp, recs in polled.items():
            held[tp] = recs[0].offset
        try:
            for tp, recs in polled.items():
                t, p = tp
                for r in recs:
                    held[tp] = r.offset + 1
                    yield ConsumerRecord(t, p, r.offset, r.timestamp, r.timestamp_type, r.key,
                                         r.value, r.headers)
                held.pop(tp, None)   # all handed out: the position (past control batches) stands
        finally:
            if held:
                self._engine.rewind_held()


class AsyncConsumer(_Common):
    """The asyncio consumer: ``async with AsyncConsumer(...) as c: await c.poll()``."""

    def __init__(self, *topics: str, config: dict[str, Any] | None = None, **kwargs: Any) -> None:
        self.config = ConsumerConfig.from_kwargs(config, **kwargs)
        self._topics = list(topics)
        self._eng: _Engine | None = None

    @property
    def _engine(self) -> _Engine:  # type: ignore[override]
        if self._eng is None:
            raise ClientClosedError("the consumer is not started: await start() or use async with")
        return self._eng

    async def start(self) -> AsyncConsumer:
        if self._eng is None:
            self._eng = _Engine(self.config, asyncio.get_running_loop())
            self._eng.start()
        if self._topics:
            self.subscribe(self._topics)
        return self

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        self._engine.subscription = []
        self._engine.set_assignment(TopicPartition(*tp) for tp in partitions)

    def subscribe(self, topics: str | list[str], listener: RebalanceListener | None = None) -> None:
        if self._engine.group is None:
            raise ValueError("subscribe needs a group_id")
        self._engine.subscription = [topics] if isinstance(topics, str) else list(topics)
        self._engine.listener = listener
        self._engine.group.need_rejoin = True

    def _rebalance_due(self) -> bool:
        eng = self._engine
        return bool(eng.group is not None and eng.subscription and eng.group.need_rejoin)

    def _rebalance(self) -> Generator[tuple, Any, None]:
        """The steps of one rebalance, in order, for a driver to run: ``("await", coro)``
        (its result is sent back) or ``("call", listener_method, partitions)``.

        The async consumer awaits the listener in place; the blocking one calls it in the
        thread that polls. Either way ``on_partitions_revoked`` runs while the consumer still
        owns the partitions (eager protocols: before JoinGroup; cooperative: before they are
        handed over in the next round), after auto-commit committed their positions.
        """
        eng = self._engine
        g = eng.group
        assert g is not None
        owned = set(eng.states)
        if g.lost:   # membership lost: the partitions may already be someone else's
            g.lost = False
            if owned:
                yield ("call", "on_partitions_lost", owned)
                eng.set_assignment(())
                owned = set()
        if not g.cooperative and owned:
            if self.config.enable_auto_commit:
                yield ("await", self._quiet_commit())
            yield ("call", "on_partitions_revoked", owned)
            eng.set_assignment(())
            owned = set()
        yield ("await", eng.cluster.refresh(eng.subscription, auto_create=False))
        new: set[TopicPartition] = yield ("await", g.join(eng.subscription, owned))
        revoked = owned - new
        if revoked:
            if self.config.enable_auto_commit:
                yield ("await", self._quiet_commit(
                    {tp: o for tp, o in eng.positions_to_commit().items() if tp in revoked}))
            yield ("call", "on_partitions_revoked", revoked)
            g.need_rejoin = True   # cooperative: hand them over in a second round
        eng.set_assignment(new)
        yield ("call", "on_partitions_assigned", new - owned)

    def _closing(self) -> Generator[tuple, Any, None]:
        """The steps of ``close``: auto-commit, ``on_partitions_revoked`` (or ``_lost``) for
        what a subscription owns, then LeaveGroup and disconnect."""
        eng = self._engine
        g = eng.group
        owned = set(eng.states)
        if g is not None and owned:
            lost = g.lost and bool(eng.subscription)
            if self.config.enable_auto_commit and not lost:
                yield ("await", self._quiet_commit())
            if eng.subscription:
                yield ("call", "on_partitions_lost" if lost else "on_partitions_revoked", owned)
        yield ("await", eng.close())

    async def _drive(self, steps: Generator[tuple, Any, None]) -> None:
        value: Any = None
        while True:
            try:
                step = steps.send(value)
            except StopIteration:
                return
            value = None
            if step[0] == "await":
                value = await step[1]
            elif self._engine.listener is not None:
                r = getattr(self._engine.listener, step[1])(sorted(step[2]))
                if inspect.isawaitable(r):
                    await r

    async def _ensure_group(self) -> None:
        if self._rebalance_due():
            await self._drive(self._rebalance())

    async def poll(self, timeout: float = 0.0, max_records: int | None = None) -> dict[TopicPartition, list]:
        """Records by partition (``kcodec.records.Record`` objects); waits up to ``timeout`` s."""
        self._check()
        self._polled()
        await self._ensure_group()
        self._resolve_positions()
        if self._auto_commit_due():
            self._engine.last_commit = time.monotonic()
            asyncio.get_running_loop().create_task(self._quiet_commit())
        eng = self._engine
        n = max_records or self.config.max_poll_records
        deadline = time.monotonic() + timeout
        while True:
            out = eng.take(n)
            if out:
                return out
            left = deadline - time.monotonic()
            if left <= 0:
                return {}
            eng.adata.clear()
            try:
                await asyncio.wait_for(eng.adata.wait(), min(left, 0.1))
            except asyncio.TimeoutError:
                pass
            self._check()
            if self._rebalance_due():   # return early: the next poll rejoins the group
                return {}

    async def poll_columns(self, timeout: float = 0.0) -> dict[TopicPartition, Any]:
        """Buffered records as columns per partition (see ``kcodec.records.decode_columns``)."""
        self._check()
        self._polled()
        await self._ensure_group()
        self._resolve_positions()
        eng = self._engine
        if not eng.buffer and timeout > 0:
            eng.adata.clear()
            try:
                await asyncio.wait_for(eng.adata.wait(), timeout)
            except asyncio.TimeoutError:
                return {}
        return eng.take_columns()

    def __aiter__(self):
        return self._aiter()

    async def _aiter(self):
        while True:
            for rec in self._hand_out(await self.poll(1.0)):
                yield rec

    async def position(self, partition: TopicPartition) -> int:
        eng = self._engine
        tp = TopicPartition(*partition)
        if tp not in eng.states:
            raise ValueError(f"{tp} is not assigned to this consumer")
        if eng.states[tp].position is None:
            await eng.reset_positions(set(eng.states) - {tp})
        return eng.states[tp].position  # type: ignore[return-value]

    async def seek_to_beginning(self, *partitions: TopicPartition) -> None:
        await self._seek_to(partitions, EARLIEST)

    async def seek_to_end(self, *partitions: TopicPartition) -> None:
        await self._seek_to(partitions, LATEST)

    async def _seek_to(self, partitions: Any, ts: int) -> None:
        tps = [TopicPartition(*tp) for tp in partitions] or list(self._engine.states)
        offs = await list_offsets(self._engine.cluster, tps, ts, self._engine.read_committed)
        for tp, off in offs.items():
            self._engine.seek(tp, off)

    async def committed(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int | None]:
        g = self._engine.group
        if g is None:
            raise ValueError("committed offsets need a group_id")
        got = await g.fetch_offsets([TopicPartition(*tp) for tp in partitions])
        return {tp: (o if o >= 0 else None) for tp, o in got.items()}

    async def commit(self, offsets: dict[TopicPartition, int] | None = None) -> None:
        """Commit ``offsets`` (default: the current positions) and wait for the broker."""
        g = self._engine.group
        if g is None:
            raise ValueError("commit needs a group_id")
        await g.commit(offsets if offsets is not None else self._engine.positions_to_commit())

    def commit_async(self, offsets: dict[TopicPartition, int] | None = None) -> asyncio.Task:
        return asyncio.get_running_loop().create_task(self.commit(offsets))

    async def _quiet_commit(self, offsets: dict[TopicPartition, int] | None = None) -> None:
        """Auto-commit: a failure is not the application's (the next one retries)."""
        try:
            await self.commit(offsets)
        except KcodecError:
            pass

    async def close(self) -> None:
        """Commit (auto-commit), revoke (listener), leave the group and disconnect."""
        eng = self._eng
        if eng is None or eng.closed:
            return
        await self._drive(self._closing())

    async def __aenter__(self) -> AsyncConsumer:
        return await self.start()

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()


class Consumer(_Common):
    """The blocking consumer.

        with Consumer("events", bootstrap_servers="127.0.0.1:9092", group_id="g",
                      auto_offset_reset="earliest") as c:
            for record in c:
                print(record.partition, record.offset, record.value)
    """

    def __init__(self, *topics: str, config: dict[str, Any] | None = None,
                 loop: LoopThread | None = None, **kwargs: Any) -> None:
        self.config = ConsumerConfig.from_kwargs(config, **kwargs)
        self._loop = loop or shared_loop()
        self._async = AsyncConsumer(config=None, **{**_cfg_dict(self.config)})
        self._loop.run(self._async.start(), 30)
        self._engine = self._async._engine
        self._timeout = self.config.api_timeout_ms / 1000
        if topics:
            self.subscribe(list(topics))

    def _run(self, coro: Any, timeout: float | None = None) -> Any:
        return self._loop.run(coro, self._timeout + GRACE if timeout is None else timeout)

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        self._async.assign(partitions)

    def subscribe(self, topics: str | list[str], listener: RebalanceListener | None = None) -> None:
        """Join the group for ``topics`` (at the next ``poll``); ``listener``'s methods run
        in the thread that polls (or closes), revocation before the partitions move."""
        self._async.subscribe(topics, listener)

    def _drive(self, steps: Generator[tuple, Any, None], timeout: float,
               what: str = "operation") -> None:
        """Run rebalance/close steps: coroutines on the loop, the listener right here."""
        value: Any = None
        while True:
            try:
                step = steps.send(value)
            except StopIteration:
                return
            value = None
            if step[0] == "await":
                value = self._loop.run(step[1], timeout, what)
            elif self._engine.listener is not None:
                getattr(self._engine.listener, step[1])(sorted(step[2]))

    def _ensure_group(self) -> None:
        if self._async._rebalance_due():
            cfg = self.config   # the join's own deadline (GroupMember.join), plus grace
            self._drive(self._async._rebalance(),
                        max(cfg.api_timeout_ms, 2 * cfg.session_timeout_ms) / 1000 + GRACE,
                        f"joining group {cfg.group_id!r}")

    def poll(self, timeout: float = 0.0, max_records: int | None = None) -> dict[TopicPartition, list]:
        """Records by partition (``kcodec.records.Record`` objects); waits up to ``timeout`` s."""
        self._check()
        self._polled()
        eng = self._engine
        self._ensure_group()
        self._resolve_positions()
        if self._auto_commit_due():
            eng.last_commit = time.monotonic()
            self._loop.submit(self._async._quiet_commit())
        n = max_records or self.config.max_poll_records
        deadline = time.monotonic() + timeout
        while True:
            out = eng.take(n)
            if out:
                return out
            left = deadline - time.monotonic()
            if left <= 0:
                return {}
            with eng.data_ready:
                if not eng.buffer:
                    eng.data_ready.wait(min(left, 0.1))
            self._check()
            if eng.group is not None and eng.subscription and eng.group.need_rejoin:
                return {}

    def poll_columns(self, timeout: float = 0.0) -> dict[TopicPartition, Any]:
        """Buffered records as columns per partition (see ``kcodec.records.decode_columns``)."""
        self._check()
        self._polled()
        eng = self._engine
        self._ensure_group()
        self._resolve_positions()
        if not eng.buffer and timeout > 0:
            with eng.data_ready:
                if not eng.buffer:
                    eng.data_ready.wait(timeout)
        return eng.take_columns()

    def __iter__(self) -> Iterator[ConsumerRecord]:
        """Records one by one, polling as needed; unlike ``poll`` (where everything a poll
        returned counts as consumed, as in Java), only records handed out count."""
        while True:
            polled = self.poll(1.0)
            if polled:
                yield from self._hand_out(polled)

    def position(self, partition: TopicPartition) -> int:
        return self._run(self._async.position(partition))

    def seek_to_beginning(self, *partitions: TopicPartition) -> None:
        self._run(self._async.seek_to_beginning(*partitions))

    def seek_to_end(self, *partitions: TopicPartition) -> None:
        self._run(self._async.seek_to_end(*partitions))

    def committed(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int | None]:
        return self._run(self._async.committed(list(partitions)))

    def commit(self, offsets: dict[TopicPartition, int] | None = None) -> None:
        """Commit ``offsets`` (default: the current positions) synchronously."""
        self._run(self._async.commit(offsets))

    def commit_async(self, offsets: dict[TopicPartition, int] | None = None,
                     callback: Callable[[BaseException | None], Any] | None = None):
        """Commit in the background; ``callback(error)`` when done. Returns a future."""
        fut = self._loop.submit(self._async.commit(offsets))
        if callback is not None:
            fut.add_done_callback(lambda f: callback(f.exception()))
        return fut

    def close(self, timeout: float | None = None) -> None:
        """Commit (auto-commit), revoke (listener, in this thread), leave the group,
        disconnect -- within ``timeout`` seconds (default ``api_timeout_ms``); past it the
        connections are dropped without the rest and ``KafkaTimeoutError`` is raised."""
        eng = self._engine
        if eng.closed:
            return
        limit = self._timeout if timeout is None else timeout
        try:
            self._drive(self._async._closing(), limit, "closing the consumer")
        except KafkaTimeoutError:
            self._loop.run(eng.abort(), 5)
            raise

    def __enter__(self) -> Consumer:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _cfg_dict(cfg: ConsumerConfig) -> dict[str, Any]:
    import dataclasses
    return {f.name: getattr(cfg, f.name) for f in dataclasses.fields(cfg)}
