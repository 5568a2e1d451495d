"""Producer: ``AsyncProducer`` (asyncio) and ``Producer`` (blocking), one engine.

Records go into a per-partition accumulator of ``RecordBatchBuilder`` batches. A sender
task on the client's event loop drains batches that are full, older than ``linger_ms``, or
flushed, groups them by leader into Produce requests (one batch per partition per request,
at most ``max_in_flight_requests_per_connection`` requests in flight per broker) and
resolves each record's future with ``SendResult(partition, offset, timestamp)``.

Idempotence (default): the producer id comes from InitProducerId; every batch carries the
partition's next sequence number, so a retried batch is written once. If the broker forgets
the producer (UNKNOWN_PRODUCER_ID, e.g. after a restart), a new id is fetched and unsent
batches are re-stamped.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import deque
from collections.abc import Iterable
from typing import Any, Callable, Optional

from kcodec.client.config import ProducerConfig
from kcodec.client.errors import (
    BrokerNotAvailableError,
    ClientClosedError,
    KafkaError,
    KafkaTimeoutError,
)
from kcodec.client.net.cluster import REFRESH_CODES, Cluster
from kcodec.client.net.core import TOPIC_ID_VERSIONS
from kcodec.client.net.loop import GRACE, LoopThread, shared_loop
from kcodec.client.producer.accum import Appender
from kcodec.client.producer.partitioner import DefaultPartitioner, partition_for_key
from kcodec.client.producer.transactions import (
    TransactionManager,
    TransactionStateError,
)
from kcodec.client.structs import ConsumerGroupMetadata, SendResult
from kcodec.errors import KcodecError, ProtocolError
from kcodec.records.header import HEADER_SIZE, patch_header

__all__ = ["Producer", "AsyncProducer", "SendResult", "RecordFuture"]

CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
Headers = Optional[Iterable[tuple[str, Optional[bytes]]]]


def _as_bytes(v: Any, what: str) -> bytes | None:
    if v is None or isinstance(v, bytes):
        return v
    if isinstance(v, str):
        return v.encode()
    if isinstance(v, (bytearray, memoryview)):
        return bytes(v)
    raise TypeError(f"{what} must be bytes, str or None, not {type(v).__name__}")


class _Batch:
    __slots__ = ("topic", "partition", "builder", "data", "created", "deadline",
                 "timestamps", "event", "afut", "result_base", "result_ts", "error",
                 "callbacks", "sequence", "attempts", "size", "inflight", "last_error")

    def __init__(self, topic: str, partition: int, builder: Any, deadline: float,
                 sequence: int, afut: asyncio.Future | None) -> None:
        self.topic, self.partition, self.builder = topic, partition, builder
        self.data: bytes | None = None
        self.created = time.monotonic()
        self.deadline = deadline
        self.timestamps: list[int] = []
        self.event = threading.Event()
        self.afut = afut
        self.result_base = -1
        self.result_ts = -1
        self.error: BaseException | None = None
        self.callbacks: list[Callable] = []
        self.sequence = sequence
        self.attempts = 0
        self.size = 0
        self.inflight = False
        self.last_error: BaseException | None = None

    @property
    def count(self) -> int:
        """Records in the batch: one timestamp each (kept for their delivery results)."""
        return len(self.timestamps)

    def close(self) -> bytes:
        if self.data is None:
            self.data = self.builder.build()
            self.builder = None
        return self.data

    def restamp(self, producer_id: int, epoch: int, sequence: int) -> None:
        """New producer id/epoch/sequence in the built bytes, CRC recomputed."""
        buf = bytearray(self.close())
        patch_header(buf, producer_id=producer_id, producer_epoch=epoch, base_sequence=sequence)
        self.data = bytes(buf)
        self.sequence = sequence

    def finish(self, base: int, log_append_ts: int, error: BaseException | None) -> None:
        self.result_base, self.result_ts, self.error = base, log_append_ts, error
        self.event.set()
        if self.afut is not None and not self.afut.done():
            if error is None:
                self.afut.set_result(None)
            else:
                self.afut.set_exception(error)
                self.afut.exception()
        for cb in self.callbacks:
            try:
                cb(self)
            except Exception:  # pragma: no cover - a user callback must not kill the sender
                pass


class RecordFuture:
    """The delivery of one record: ``result(timeout)``, ``await``, ``add_callback``.

    Made by the producer as ``RecordFuture()`` with ``_batch`` and ``_index`` set after:
    a class without ``__init__`` is called without a Python frame (and without
    ``object.__new__``'s argument parsing), ~60 ns of a ~1.2 us ``send``."""

    __slots__ = ("_batch", "_index")
    _batch: _Batch
    _index: int

    def done(self) -> bool:
        return self._batch.event.is_set()

    def _value(self) -> SendResult:
        b = self._batch
        if b.error is not None:
            raise b.error
        off = b.result_base + self._index if b.result_base >= 0 else -1
        ts = b.result_ts if b.result_ts >= 0 else b.timestamps[self._index]
        return SendResult(b.partition, off, ts)

    def result(self, timeout: float | None = None) -> SendResult:
        if not self._batch.event.wait(timeout):
            raise KafkaTimeoutError(f"delivery not confirmed within {timeout} s")
        return self._value()

    def exception(self, timeout: float | None = None) -> BaseException | None:
        self._batch.event.wait(timeout)
        return self._batch.error

    def add_callback(self, fn: Callable[[BaseException | None, SendResult | None], Any]) -> None:
        """``fn(error, result)`` once delivered or failed (called from the client's loop)."""
        def cb(_b: _Batch) -> None:
            try:
                fn(None, self._value())
            except KcodecError as exc:
                fn(exc, None)
        if self.done():
            cb(self._batch)
        else:
            self._batch.callbacks.append(cb)

    def __await__(self):
        if self._batch.afut is not None:
            yield from asyncio.shield(self._batch.afut).__await__()
        else:
            while not self._batch.event.is_set():
                yield from asyncio.sleep(0.001).__await__()
        return self._value()


class _Engine:
    """The shared state machine; all its coroutines run on ``loop``."""

    def __init__(self, config: ProducerConfig, loop: asyncio.AbstractEventLoop) -> None:
        from kcodec.records import RecordBatchBuilder

        self.Builder = RecordBatchBuilder
        self.config = config
        self.loop = loop
        self.cluster = Cluster(config)
        self.codec = CODECS[config.compression_type]
        self.partitioner = DefaultPartitioner(batch_size=config.batch_size)
        self.sticky_topics: dict[str, int] = {}   # topics with keyless records: partitions
        self.lock = threading.Lock()
        self.space = threading.Condition(self.lock)
        self.open: dict[tuple[str, int], _Batch] = {}
        self.queues: dict[tuple[str, int], deque[_Batch]] = {}
        self.pending = 0
        self.buffered = 0
        self.flushing = 0
        self.producer_id = -1
        self.epoch = -1
        self.next_seq: dict[tuple[str, int], int] = {}
        self.wake = asyncio.Event()
        self.sender: asyncio.Task | None = None
        self.closed = False
        self.fatal: BaseException | None = None
        self.node_slots: dict[int, asyncio.Semaphore] = {}
        self.pid_lock: asyncio.Lock | None = None
        # a new producer id is being fetched: nothing is sent until the batches still in
        # flight under the old id have their answers and the queues are re-stamped
        self.resetting = False
        self.refreshing: set[str] = set()
        self.counts: dict[str, int] = {}       # partition counts, read without the loop
        self.seal_at = max(config.batch_size - HEADER_SIZE, 1)
        self.seal_size = self.seal_at + HEADER_SIZE   # the same, as the builder's size
        self.node_turns: dict[int, asyncio.Future] = {}   # the last request made per node
        self.txn: TransactionManager | None = (
            TransactionManager(self) if config.transactional_id else None)

    # ------------------------------------------------------------------ appending (any thread)
    def append(self, topic: str, partition: int, partitions: int, key: bytes | None,
               value: bytes | None, headers: Any, timestamp: int | None,
               sticky: bool = False) -> RecordFuture:
        """Add a record to its partition's open batch (any thread). ``sticky``: a keyless
        record without a partition; the sticky partitioner picks one here, under the lock,
        and counts the bytes (KIP-794)."""
        if self.txn is not None:
            self.txn.check_send()
        # acquire/release, not `with`: the with statement looks up and binds __enter__ and
        # __exit__ at every call, ~0.2 us of a ~2 us send
        lock = self.lock
        lock.acquire()
        try:
            if self.closed or self.fatal is not None:
                raise self.fatal or ClientClosedError("the producer is closed")
            if sticky:
                partition = self.partitioner.sticky.partition(topic, partitions)
                self.sticky_topics[topic] = partitions
            tp = (topic, partition)
            b = self.open.get(tp)
            # add: the record's size (0: the batch is full), its timestamp put on the list;
            # the batch's count (its timestamps) and size, and pending and buffered, are
            # counted when it leaves ``open`` (_account), not per record: so the compiled
            # appender (kcodec._cy.accum) touches only the builder and the list
            size = 0 if b is None else b.builder.add(key, value, headers, timestamp, b.timestamps)
            if b is None or not size:
                if b is not None:      # full: send it, start another
                    self._seal(tp, b)
                b = self._new_batch(tp)
                size = b.builder.add(key, value, headers, timestamp, b.timestamps)
                if not size:
                    self._seal(tp, b)
                    b = self._new_batch(tp)
                    size = b.builder.add(key, value, headers, timestamp, b.timestamps)
                self._kick()
            idx = len(b.timestamps) - 1
            if b.builder.size >= self.seal_size:
                self._seal(tp, b)
                self._kick()
            if sticky:
                self.partitioner.sticky.on_append(topic, partitions, partition, size,
                                                  tp not in self.open)
        finally:
            lock.release()
        fut = RecordFuture()
        fut._batch = b
        fut._index = idx
        return fut

    def append_built(self, topic: str, partition: int, built: Any, size: int) -> _Batch:
        """Queue an already encoded batch (kcodec.client.producer.columnar.PrebuiltBatch)
        behind the partition's open batch, stamped with the producer id and sequence."""
        tp = (topic, partition)
        with self.lock:
            if self.closed or self.fatal is not None:
                raise self.fatal or ClientClosedError("the producer is closed")
            if tp in self.open:
                self._seal(tp, self.open[tp])
            seq = self.next_seq.get(tp, 0) if self.producer_id >= 0 else -1
            built.stamp(self.producer_id, self.epoch, seq)
            b = _Batch(topic, partition, built, time.monotonic()
                       + self.config.delivery_timeout_ms / 1000, seq, self.loop.create_future())
            b.size, b.timestamps = size, [built.timestamp] * built.count
            self.pending += b.count
            self.buffered += size
            self._seal(tp, b)
            self._kick()
        return b

    def _new_batch(self, tp: tuple[str, int]) -> _Batch:
        cfg = self.config
        seq = self.next_seq.get(tp, 0) if self.producer_id >= 0 else -1
        builder = self.Builder(compression=self.codec, compression_level=cfg.compression_level,
                               producer_id=self.producer_id, producer_epoch=self.epoch,
                               base_sequence=seq, max_size=max(cfg.batch_size, 1024),
                               is_transactional=self.txn is not None)
        afut = self.loop.create_future()
        b = _Batch(tp[0], tp[1], builder, time.monotonic() + cfg.delivery_timeout_ms / 1000, seq, afut)
        self.open[tp] = b
        return b

    def _account(self, b: _Batch) -> None:
        """A batch leaves ``open``: its size, its records pending and its bytes buffered
        (lock held). Open batches, at most one per partition, are not counted in
        ``buffered`` (Java reserves a whole batch_size for each instead)."""
        if b.builder is not None:
            b.size = b.builder.size - HEADER_SIZE
        self.pending += b.count
        self.buffered += b.size

    def _seal(self, tp: tuple[str, int], b: _Batch) -> None:
        """Move the open batch of ``tp`` to its send queue (lock held)."""
        if self.open.get(tp) is b:
            del self.open[tp]
            self._account(b)
        if b.sequence >= 0:
            self.next_seq[tp] = (b.sequence + b.count) & 0x7FFFFFFF
        self.queues.setdefault(tp, deque()).append(b)

    def _kick(self) -> None:
        if threading.get_ident() == getattr(self, "_loop_thread", None):
            self.wake.set()
        else:
            self.loop.call_soon_threadsafe(self.wake.set)

    # ------------------------------------------------------------------ sending (loop)
    async def start(self) -> None:
        self._loop_thread = threading.get_ident()
        if self.config.enable_idempotence and self.txn is None:   # else: init_transactions
            await self.init_producer_id()
        self.sender = self.loop.create_task(self._run())

    async def init_producer_id(self) -> None:
        if self.pid_lock is None:
            self.pid_lock = asyncio.Lock()
        async with self.pid_lock:
            async def go():
                r = await self.cluster.send(None, 22, {"transactional_id": None,
                                                       "transaction_timeout_ms": 60000})
                if r.body.error_code:
                    raise KafkaError(r.body.error_code, "InitProducerId")
                return r.body
            body = await self.cluster.call(go, "InitProducerId")
            with self.lock:
                self.producer_id, self.epoch = body.producer_id, body.producer_epoch
                self.next_seq.clear()

    async def _run(self) -> None:
        linger = self.config.linger_ms / 1000
        while True:
            self.wake.clear()
            now = time.monotonic()
            ready: list[_Batch] = []
            next_due = None
            with self.lock:
                for tp, b in list(self.open.items()):
                    due = b.created + linger
                    if due <= now or self.flushing or self.closed:
                        self._seal(tp, b)
                    else:
                        next_due = due if next_due is None else min(next_due, due)
                for q in () if self.resetting else self.queues.values():
                    for b in q:
                        if not b.inflight:
                            ready.append(b)
                            break
                if self.sticky_topics:
                    self._update_load()
            launched = await self._dispatch(ready) if ready else 0
            if self.closed and not self.pending:
                return
            timeout = None if next_due is None else max(next_due - time.monotonic(), 0.0005)
            if ready and not launched:   # blocked on metadata or in-flight slots
                backoff = self.config.retry_backoff_ms / 1000
                timeout = backoff if timeout is None else min(timeout, backoff)
            if launched and not self.wake.is_set():
                await asyncio.sleep(0)
                continue
            try:
                await asyncio.wait_for(self.wake.wait(), timeout)
            except asyncio.TimeoutError:
                pass

    def _update_load(self) -> None:
        """Unacknowledged batches per partition of each keyless topic, for the adaptive
        sticky partitioner (lock held). Java counts the batches waiting in each partition's
        queue; counting those in flight too is what makes a slow broker's partitions show."""
        sizes = {t: [0] * n for t, n in self.sticky_topics.items()}
        for (t, p), q in self.queues.items():
            row = sizes.get(t)
            if row is not None and p < len(row):
                row[p] += len(q)
        for t, row in sizes.items():
            self.partitioner.sticky.update_load(t, row)

    def _timed_out(self, b: _Batch) -> KafkaTimeoutError:
        last = f"; last error: {b.last_error}" if b.last_error is not None else ""
        return KafkaTimeoutError(
            f"delivery to {b.topic}[{b.partition}] timed out after "
            f"{self.config.delivery_timeout_ms} ms ({b.attempts} attempts{last})")

    async def _dispatch(self, ready: list[_Batch]) -> int:
        launched = 0
        by_node: dict[int, list[_Batch]] = {}
        now = time.monotonic()
        for b in ready:
            if now > b.deadline:
                self._drop(b, self._timed_out(b))
                continue
            if self.txn is not None and not self.txn.ready(b.topic, b.partition):
                if self.txn.error is not None:      # the transaction failed: so does the batch
                    self._drop(b, self.txn.error)
                continue
            info = self.cluster.topics.get(b.topic)
            leader = info.partitions.get(b.partition, -1) if info else -1
            if leader < 0 or self.cluster.stale:
                if b.topic not in self.refreshing:
                    self.refreshing.add(b.topic)
                    self.loop.create_task(self._refresh_for(b.topic))
                continue
            by_node.setdefault(leader, []).append(b)
        for node, batches in by_node.items():
            sem = self.node_slots.get(node)
            if sem is None:
                sem = self.node_slots[node] = asyncio.Semaphore(
                    self.config.max_in_flight_requests_per_connection)
            if sem.locked():
                continue
            await sem.acquire()
            for b in batches:
                b.inflight = True
            # Requests to a node are written in the order they are made here: a partition's
            # batches must reach the broker in sequence order. Each request waits for the
            # one before it to be written (a request can wait for its connection, and one
            # made after it must not overtake it on the connection once that is up).
            turn = self.loop.create_future()
            prev, self.node_turns[node] = self.node_turns.get(node), turn
            self.loop.create_task(self._produce(node, batches, sem, prev, turn))
            launched += 1
        return launched

    async def _refresh_for(self, topic: str) -> None:
        try:
            info = await self.cluster.topic(topic)
            self.counts[topic] = len(info.partitions)
        except KcodecError:
            await asyncio.sleep(self.config.retry_backoff_ms / 1000)
        finally:
            self.refreshing.discard(topic)
        self.wake.set()

    async def _produce(self, node: int, batches: list[_Batch], sem: asyncio.Semaphore,
                       prev: asyncio.Future | None = None,
                       turn: asyncio.Future | None = None) -> None:
        cfg = self.config
        try:
            topics: dict[str, list] = {}
            for b in batches:
                b.attempts += 1
                topics.setdefault(b.topic, []).append({"index": b.partition, "records": b.close()})
            # KIP-516: Produce v13 names topics by id; without ids, the last named version
            ids = self.cluster.topic_ids(topics)
            version = None if ids is not None else TOPIC_ID_VERSIONS[0] - 1
            req = {"transactional_id": cfg.transactional_id, "acks": cfg.acks,
                   "timeout_ms": cfg.request_timeout_ms,
                   "topic_data": [{"name": t, "topic_id": ids and ids[t], "partition_data": ps}
                                  for t, ps in topics.items()]}
            # the answer is awaited no longer than the first batch's delivery deadline
            wait = min(cfg.request_timeout_ms / 1000,
                       max(min(b.deadline for b in batches) - time.monotonic(), 0.05))
            try:
                if prev is not None and not prev.done():
                    await asyncio.wait([prev])    # (wait, not await: never cancels it)
                conn = await self.cluster.connection(node)
                if version is not None:
                    version = min(conn.core.version(0), version)
                if turn is not None:
                    # the next request's turn: it runs once this task yields, and this
                    # request is written before that (the connection is up, so sending
                    # writes at once)
                    turn.set_result(None)
                resp = await self.cluster.send(node, 0, req, timeout=wait,
                                               expect_response=cfg.acks != 0, version=version)
            except (BrokerNotAvailableError, KafkaTimeoutError, ProtocolError, ClientClosedError) as exc:
                if isinstance(exc, ClientClosedError):
                    for b in batches:
                        self._drop(b, exc)
                    return
                self.cluster.invalidate()
                await asyncio.sleep(cfg.retry_backoff_ms / 1000)
                for b in batches:
                    self._retry_or_fail(b, exc)
                return
            if cfg.acks == 0:
                for b in batches:
                    self._complete(b, -1, -1)
                return
            names = self.cluster.topic_names
            results = {(t.name or names.get(getattr(t, "topic_id", None), ""), p.index): p
                       for t in resp.body.responses for p in t.partition_responses}
            need_pid = False
            for b in batches:
                p = results.get((b.topic, b.partition))
                if p is None:
                    self._retry_or_fail(b, ProtocolError(f"no answer for {b.topic}[{b.partition}]"))
                elif p.error_code == 0:
                    self._complete(b, p.base_offset, p.log_append_time_ms)
                elif p.error_code == 46:   # DUPLICATE_SEQUENCE_NUMBER: already written
                    self._complete(b, -1, p.log_append_time_ms)
                elif p.error_code == 45 and cfg.enable_idempotence and not self._is_head(b):
                    # OUT_OF_ORDER_SEQUENCE behind an earlier batch that is being retried:
                    # resend in order after it, same producer id and sequence
                    self._retry_or_fail(b, KafkaError(45, f"produce {b.topic}[{b.partition}]"),
                                        force=True)
                elif p.error_code in (59, 45, 47) and cfg.enable_idempotence and self.txn is None:
                    need_pid = True
                    self._retry_or_fail(b, KafkaError(p.error_code, f"produce {b.topic}[{b.partition}]"),
                                        force=True)
                else:
                    err = KafkaError(p.error_code, f"produce to {b.topic}[{b.partition}]", p.error_message)
                    if err.code in REFRESH_CODES:
                        self.cluster.invalidate()
                    self._retry_or_fail(b, err)
            if need_pid:
                for b in batches:        # answered: no longer in flight (the reset waits
                    b.inflight = False   # for every batch that still is)
                await self._reset_producer_id()
            elif any(not b.event.is_set() for b in batches):   # some will be retried
                await asyncio.sleep(cfg.retry_backoff_ms / 1000)
        except Exception as exc:  # never lose a batch to a bug silently
            for b in batches:
                if not b.event.is_set():
                    self._drop(b, exc)
        finally:
            if turn is not None and not turn.done():
                turn.set_result(None)
            for b in batches:
                b.inflight = False
            sem.release()
            self.wake.set()

    async def _reset_producer_id(self) -> None:
        """Fetch a new producer id and re-stamp every unacknowledged batch from sequence 0.

        Nothing is sent meanwhile, and the re-stamping waits until no batch is in flight
        under the old id: a batch re-stamped while an earlier one is still out would reach
        the broker first under the new id, be taken as that id's first sequence, and turn the
        earlier batch's retry into a duplicate (Java likewise resets sequences only once a
        partition has no batch in flight)."""
        if self.resetting:
            return                       # another answer already started the reset
        self.resetting = True
        try:
            await asyncio.sleep(self.config.retry_backoff_ms / 1000)
            while True:                  # each in-flight request ends within its timeout
                with self.lock:
                    if not any(b.inflight for q in self.queues.values() for b in q):
                        break
                await asyncio.sleep(0.005)
            await self.init_producer_id()
            self._restamp_queues()
        finally:
            self.resetting = False
            self.wake.set()

    def _restamp_queues(self) -> None:
        with self.lock:
            for tp, q in self.queues.items():
                seq = 0
                for b in q:
                    b.restamp(self.producer_id, self.epoch, seq)
                    seq += b.count
                ob = self.open.get(tp)
                if ob is not None:
                    self._account(ob)
                    ob.close()
                    ob.restamp(self.producer_id, self.epoch, seq)
                    seq += ob.count
                    del self.open[tp]
                    q.append(ob)
                self.next_seq[tp] = seq

    def _is_head(self, b: _Batch) -> bool:
        """No earlier batch of its partition is still waiting for an acknowledgement."""
        with self.lock:
            q = self.queues.get((b.topic, b.partition))
            return not q or q[0] is b

    def _retry_or_fail(self, b: _Batch, exc: BaseException, force: bool = False) -> None:
        """A failed attempt: retry, or fail the batch with what Java reports -- the error
        itself when it is not retriable or retries are used up, else (the delivery timeout
        has passed, however late the error came) the timeout, naming the last error."""
        b.last_error = exc
        retriable = force or not isinstance(exc, KafkaError) or exc.retriable
        if not retriable:
            self._drop(b, exc)
        elif time.monotonic() >= b.deadline:
            self._drop(b, self._timed_out(b))
        elif b.attempts > self.config.retries:
            self._drop(b, exc)
        # else: it stays at the head of its queue; the sender picks it up again

    def _complete(self, b: _Batch, base: int, log_append: int) -> None:
        with self.lock:
            q = self.queues.get((b.topic, b.partition))
            if q and q[0] is b:
                q.popleft()
            self.pending -= b.count
            self.buffered -= b.size
            self.space.notify_all()
        b.finish(base, log_append, None)

    def _drop(self, b: _Batch, exc: BaseException) -> None:
        with self.lock:
            tp = (b.topic, b.partition)
            if self.open.get(tp) is b:
                del self.open[tp]
                self._account(b)
            q = self.queues.get(tp)
            if q and b in q:
                q.remove(b)
            self.pending -= b.count
            self.buffered -= b.size
            self.space.notify_all()
        if self.txn is not None:
            exc = self.txn.on_batch_failed(exc)
        b.finish(-1, -1, exc)

    def drop_unsent(self, exc: BaseException) -> bool:
        """Fail every batch not yet sent (aborting a transaction); True if there was one."""
        with self.lock:
            unsent = [b for q in self.queues.values() for b in q if not b.inflight]
            unsent += self.open.values()      # _drop takes them out of ``open``
        for b in unsent:
            self._drop(b, exc)
        return bool(unsent)

    async def flush(self) -> None:
        self.flushing += 1
        try:
            while True:
                with self.lock:
                    batches = [b for q in self.queues.values() for b in q] + list(self.open.values())
                if not batches:
                    return
                self.wake.set()
                await asyncio.gather(*(asyncio.shield(b.afut) for b in batches if b.afut is not None),
                                     return_exceptions=True)
        finally:
            self.flushing -= 1

    async def close(self, timeout: float | None) -> None:
        try:
            if timeout is None or timeout > 0:
                await asyncio.wait_for(self.flush(), timeout)
        except asyncio.TimeoutError:
            pass
        finally:
            with self.lock:
                self.closed = True
                left = [b for q in self.queues.values() for b in q] + list(self.open.values())
            for b in left:
                if not b.event.is_set():
                    self._drop(b, ClientClosedError("the producer was closed before delivery"))
            if self.sender is not None:
                self.sender.cancel()
            await self.cluster.close()

    async def partitions_of(self, topic: str) -> int:
        info = await self.cluster.topic(topic, auto_create=True)
        self.counts[topic] = n = len(info.partitions)
        return n


class _Base:
    _engine: _Engine

    def _route(self, topic: str, key: bytes | None, partition: int | None, count: int) -> int:
        if partition is not None:
            if not isinstance(partition, int) or partition < 0 or partition >= count:
                raise ValueError(f"partition {partition} out of range for {topic!r} "
                                 f"({count} partitions)")
            return partition
        return self._engine.partitioner(topic, key, count)

    def _count(self, topic: str) -> int | None:
        return self._engine.counts.get(topic)


class AsyncProducer(_Base):
    """The asyncio producer. ``await start()`` (or ``async with``) before sending."""

    def __init__(self, config: dict[str, Any] | None = None, **kwargs: Any) -> None:
        self.config = ProducerConfig.from_kwargs(config, **kwargs)
        self._engine: _Engine | None = None   # type: ignore[assignment]

    async def start(self) -> AsyncProducer:
        self._engine = _Engine(self.config, asyncio.get_running_loop())
        await self._engine.start()
        return self

    async def send(self, topic: str, value: Any = None, key: Any = None,
                   partition: int | None = None, headers: Headers = None,
                   timestamp: int | None = None) -> RecordFuture:
        """Queue a record; await the returned future for its ``SendResult``."""
        eng = self._engine
        if eng is None:
            raise ClientClosedError("the producer is not started")
        key, value = _as_bytes(key, "key"), _as_bytes(value, "value")
        count = self._count(topic) or await eng.partitions_of(topic)
        p = self._route(topic, key, partition, count)
        while eng.buffered > self.config.buffer_memory and not eng.closed:
            await asyncio.sleep(0.001)
        return eng.append(topic, p, count, key, value, headers, timestamp,
                          partition is None and key is None)

    async def send_and_wait(self, *args: Any, **kwargs: Any) -> SendResult:
        return await (await self.send(*args, **kwargs))

    # transactions (transactional_id set): see kcodec.client.producer.transactions
    def _txn(self) -> TransactionManager:
        eng = self._engine
        if eng is None:
            raise ClientClosedError("the producer is not started")
        if eng.txn is None:
            raise TransactionStateError("transactions need transactional_id in the config")
        return eng.txn

    async def init_transactions(self) -> None:
        """Register the transactional_id (fencing older producers with it); once, first."""
        await self._txn().init()

    async def begin_transaction(self) -> None:
        self._txn().begin()

    async def send_offsets_to_transaction(
            self, offsets: dict[Any, Any], group_metadata: ConsumerGroupMetadata | str) -> None:
        """Commit consumer ``offsets`` ({(topic, partition): offset}) with the transaction."""
        await self._txn().send_offsets(offsets, group_metadata)

    async def commit_transaction(self) -> None:
        await self._txn().commit()

    async def abort_transaction(self) -> None:
        await self._txn().abort()

    async def flush(self) -> None:
        if self._engine is not None:
            await self._engine.flush()

    async def close(self, timeout: float | None = None) -> None:
        if self._engine is not None:
            await self._engine.close(timeout)

    async def __aenter__(self) -> AsyncProducer:
        return await self.start()

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()


class Producer(_Base):
    """The blocking producer; sends from any thread, delivery on a background loop.

        with Producer(bootstrap_servers="127.0.0.1:9092", linger_ms=5) as p:
            fut = p.send("events", b"value", key=b"k")
            print(fut.result(10))          # SendResult(partition=.., offset=.., timestamp=..)
    """

    def __init__(self, config: dict[str, Any] | None = None, *,
                 loop: LoopThread | None = None, **kwargs: Any) -> None:
        self.config = ProducerConfig.from_kwargs(config, **kwargs)
        self._loop = loop or shared_loop()
        self._engine = _Engine(self.config, self._loop.loop)
        self._timeout = self.config.api_timeout_ms / 1000
        self._buffer_memory = self.config.buffer_memory
        # the per-record step in C (compiled twin) when no transaction needs checking: the
        # instance's ``send`` is then the appender's, which takes a keyed record itself and
        # hands anything else to ``_send`` (a Python frame less per record, ~15 % of a send);
        # not in a subclass that defines its own ``send``, which must stay the one called
        self._fast = None
        if self._engine.txn is None:
            appender = Appender(self._engine, RecordFuture, self._engine.seal_size,
                                self._buffer_memory, self._send)
            self._fast = appender.keyed
            if type(self).send is Producer.send:
                self.send = appender.send  # type: ignore[method-assign]
        try:
            self._loop.run(self._engine.start(), self._timeout + GRACE)
        except BaseException:
            self._loop.run(self._engine.close(0), 5)
            raise

    def send(self, topic: str, value: Any = None, key: Any = None,
             partition: int | None = None, headers: Headers = None,
             timestamp: int | None = None) -> RecordFuture:
        """Queue a record; ``.result(timeout)`` of the returned future is its ``SendResult``.

        (Without transactions a producer's own ``send`` is its appender's, with this
        signature: see ``__init__``.)"""
        if partition is None and self._fast is not None:
            # a keyed record of bytes: partition, lock, builder and future in C
            fut = self._fast(topic, key, value, headers, timestamp)
            if fut is not None:
                return fut
        return self._send(topic, value, key, partition, headers, timestamp)

    def _send(self, topic: str, value: Any, key: Any, partition: int | None,
              headers: Headers, timestamp: int | None) -> RecordFuture:
        """``send``'s general path: any record the appender did not take."""
        eng = self._engine
        if key is not None and type(key) is not bytes:
            key = _as_bytes(key, "key")
        if value is not None and type(value) is not bytes:
            value = _as_bytes(value, "value")
        count = eng.counts.get(topic)
        if count is None:
            count = self._loop.run(eng.partitions_of(topic), self._timeout + GRACE)
        if partition is None:
            p = partition_for_key(key, count) if key is not None else -1   # -1: sticky
        else:
            p = self._route(topic, key, partition, count)
        if eng.buffered > self._buffer_memory:
            self._wait_for_space()
        return eng.append(topic, p, count, key, value, headers, timestamp,
                          partition is None and key is None)

    def send_columns(self, topic: str, value: Any, key: Any = None, headers: Any = None,
                     partition: Any = None, timestamp: int | None = None) -> list[RecordFuture]:
        """Queue whole pyarrow columns at once (no per-row Python work): ``value`` and
        ``key`` binary or string arrays, ``headers`` list<struct<key: string, value:
        binary>>, ``partition`` int array (null: choose). Returns one future per batch
        made, for its last record. See kcodec.client.producer.columnar."""
        from kcodec.client.producer.columnar import plan_send

        eng = self._engine
        count = eng.counts.get(topic)
        if count is None:
            count = self._loop.run(eng.partitions_of(topic), self._timeout + 1)
        sticky = eng.partitioner.sticky.partition(topic, count)
        cfg = self.config
        planned = plan_send(value, key, headers, partition, count, sticky, cfg.batch_size,
                            eng.codec, cfg.compression_level, timestamp)
        eng.partitioner.sticky.on_new_batch(topic, count, sticky)
        out = []
        for p, built, size in planned:
            if eng.buffered > self._buffer_memory:
                self._wait_for_space()
            b = eng.append_built(topic, p, built, size)
            fut = RecordFuture()
            fut._batch, fut._index = b, b.count - 1
            out.append(fut)
        return out

    def _wait_for_space(self) -> None:
        eng = self._engine
        with eng.space:
            deadline = time.monotonic() + self._timeout
            while eng.buffered > self._buffer_memory and not eng.closed:
                if not eng.space.wait(max(deadline - time.monotonic(), 0)):
                    raise KafkaTimeoutError("buffer_memory full: no space freed in time")

    # transactions (transactional_id set): see kcodec.client.producer.transactions
    def _txn(self) -> TransactionManager:
        if self._engine.txn is None:
            raise TransactionStateError("transactions need transactional_id in the config")
        return self._engine.txn

    def init_transactions(self, timeout: float | None = None) -> None:
        """Register the transactional_id (fencing older producers with it); once, first."""
        self._loop.run(self._txn().init(), timeout if timeout is not None else self._timeout + 1)

    def begin_transaction(self) -> None:
        txn = self._txn()
        self._loop.run(_call(txn.begin), self._timeout)

    def send_offsets_to_transaction(self, offsets: dict[Any, Any],
                                    group_metadata: ConsumerGroupMetadata | str,
                                    timeout: float | None = None) -> None:
        """Commit consumer ``offsets`` ({(topic, partition): offset}) with the transaction."""
        self._loop.run(self._txn().send_offsets(offsets, group_metadata),
                       timeout if timeout is not None else self._timeout + 1)

    def commit_transaction(self, timeout: float | None = None) -> None:
        """Flush, then commit; an ``AbortableTransactionError`` means: abort instead."""
        self._loop.run(self._txn().commit(), timeout if timeout is not None else self._timeout + 1)

    def abort_transaction(self, timeout: float | None = None) -> None:
        self._loop.run(self._txn().abort(), timeout if timeout is not None else self._timeout + 1)

    def flush(self, timeout: float | None = None) -> None:
        """Send everything queued and wait for every acknowledgement."""
        self._loop.run(self._engine.flush(), timeout if timeout is not None else None)

    def close(self, timeout: float | None = None) -> None:
        self._loop.run(self._engine.close(timeout), None if timeout is None else timeout + 5)

    def partitions_for(self, topic: str) -> list[int]:
        info = self._loop.run(self._engine.cluster.topic(topic), self._timeout + GRACE)
        return sorted(info.partitions)

    def __enter__(self) -> Producer:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


async def _call(fn: Callable[[], Any]) -> Any:
    return fn()
