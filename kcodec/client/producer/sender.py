"""The producer's sender: a task on the client's loop that sends what the accumulator holds.

It seals batches that are full, ``linger_ms`` old or flushed (the accumulator's
``ready``), groups the first unsent batch of each partition by leader into Produce
requests (one batch per partition per request, at most
``max_in_flight_requests_per_connection`` requests in flight per broker, each node's
requests written in the order they were made), and resolves each batch with its offset or
its error.

Retries, as Java's sender: retriable errors and lost connections are retried until
``delivery_timeout_ms`` (at most ``retries`` times), the metadata refreshed when the error
says it is stale; OUT_OF_ORDER_SEQUENCE behind a batch being retried resends in order,
and fails a batch that a later one overtook (written, it would break the order);
a duplicate is a success (NONE with the original offset from Kafka, DUPLICATE_SEQUENCE_NUMBER
from older brokers: its offset where the answer has one, else -1 and a warning).
MESSAGE_TOO_LARGE on a batch of several records (the topic's max.message.bytes is below the
producer's batch_size, or compression did less than hoped) splits it in two halves that
take its place at the head of the partition's queue, as Java's sender splits and
re-enqueues it; halving again if need be, a record alone that is still too large fails
with the error. Idempotence: the producer id comes from
InitProducerId; if the broker forgets it (UNKNOWN_PRODUCER_ID, e.g. after a restart), a
new one is fetched once nothing is in flight and the unacknowledged batches are re-stamped.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from typing import Any

from kcodec.client.config import ProducerConfig
from kcodec.client.errors import (
    BrokerNotAvailableError,
    ClientClosedError,
    KafkaError,
    KafkaTimeoutError,
)
from kcodec.client.net import requests
from kcodec.client.net.cluster import REFRESH_CODES, Cluster
from kcodec.client.net.wakeup import Wakeup
from kcodec.client.producer.accumulator import RecordAccumulator
from kcodec.client.producer.batch import ProducerBatch
from kcodec.client.producer.transactions import TransactionManager
from kcodec.errors import KcodecError, ProtocolError
from kcodec.observe.log import get_logger
from kcodec.protocol import ApiKey, ErrorCode
from kcodec.records.header import HEADER_SIZE

log = get_logger(__name__)

__all__ = ["Sender"]

_log = logging.getLogger(__name__)

# the broker does not know this producer (any more), or saw its sequences out of order or
# a newer epoch: an idempotent producer starts again with a new id
_NEW_PRODUCER_ID = (ErrorCode.UNKNOWN_PRODUCER_ID, ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                    ErrorCode.INVALID_PRODUCER_EPOCH)


class Sender:
    """Sends the accumulator's batches (see the module docstring)."""

    def __init__(self, config: ProducerConfig, loop: asyncio.AbstractEventLoop, cluster: Cluster,
                 acc: RecordAccumulator) -> None:
        self.config = config
        self.loop = loop
        self.cluster = cluster
        self.acc = acc
        self.txn: TransactionManager | None = None     # the engine's, when transactional
        self.wake = Wakeup()
        self.task: asyncio.Task | None = None
        self.loop_thread: int | None = None
        self.node_slots: dict[int, asyncio.Semaphore] = {}
        self.node_turns: dict[int, asyncio.Future] = {}   # the last request made per node
        self.pid_lock: asyncio.Lock | None = None
        # a new producer id is being fetched: nothing is sent until the batches still in
        # flight under the old id have their answers and the queues are re-stamped
        self.resetting = False
        self.refreshing: set[str] = set()

    def kick(self) -> None:
        """Wake the sender (from any thread)."""
        if threading.get_ident() == self.loop_thread:
            self.wake.set()
        else:
            self.loop.call_soon_threadsafe(self.wake.set)

    def start(self) -> None:
        self.loop_thread = threading.get_ident()
        self.task = self.loop.create_task(self._run())

    def stop(self) -> None:
        if self.task is not None:
            self.task.cancel()

    async def init_producer_id(self) -> None:
        if self.pid_lock is None:
            self.pid_lock = asyncio.Lock()
        async with self.pid_lock:
            async def go() -> Any:
                r = await self.cluster.request(None, requests.init_producer_id(None, 60000))
                if r.error_code:
                    raise KafkaError(r.error_code, "InitProducerId")
                return r
            body = await self.cluster.call(go, "InitProducerId")
            log.info("producer %r: producer id %d, epoch %d", self.config.client_id,
                     body.producer_id, body.producer_epoch)
            self.acc.set_producer(body.producer_id, body.producer_epoch)

    async def _run(self) -> None:
        acc = self.acc
        linger = self.config.linger_ms / 1000
        while True:
            self.wake.clear()
            ready, next_due = acc.ready(linger, self.resetting)
            launched = await self._dispatch(ready) if ready else 0
            if acc.closed and not acc.pending:
                return
            timeout = None if next_due is None else max(next_due - time.monotonic(), 0.0005)
            if ready and not launched:   # blocked on metadata or in-flight slots
                backoff = self.config.retry_backoff_ms / 1000
                timeout = backoff if timeout is None else min(timeout, backoff)
            if launched and not self.wake.is_set():
                await asyncio.sleep(0)
                continue
            await self.wake.wait(timeout)

    # ------------------------------------------------------------------ outcomes
    def complete(self, b: ProducerBatch, base: int, log_append: int) -> None:
        self.acc.acknowledged(b)
        cm = self.cluster.metrics
        if cm is not None:
            cm.batch_done(b.topic, b.count, len(b.data or b""), False)
        if b.attempts > 1:
            log.info("delivered %d records to %s[%d] after %d attempts (last error: %s)",
                     b.count, b.topic, b.partition, b.attempts, b.last_error)
        b.finish(base, log_append, None)

    def _duplicate(self, b: ProducerBatch, p: Any) -> None:
        """A batch the broker had written already (its first answer was lost). Kafka
        answers NONE with the original offset; older brokers DUPLICATE_SEQUENCE_NUMBER,
        with the offset or without: then the offset is unknown (-1), and said so."""
        if p.base_offset < 0:
            _log.warning("%s[%d]: %d record(s) already written by an earlier attempt whose "
                         "answer was lost; this broker does not say at which offset, so "
                         "their SendResult has offset -1", b.topic, b.partition, b.count)
        self.complete(b, p.base_offset, p.log_append_time_ms)

    def fail(self, b: ProducerBatch, exc: BaseException) -> None:
        self.acc.remove(b)
        if self.txn is not None:
            exc = self.txn.on_batch_failed(exc)
        cm = self.cluster.metrics
        if cm is not None:
            cm.batch_done(b.topic, b.count, 0, True)
        log.warning("%d records for %s[%d] failed after %d attempts: %s", b.count, b.topic,
                    b.partition, b.attempts, exc)
        b.finish(-1, -1, exc)

    def _timed_out(self, b: ProducerBatch) -> KafkaTimeoutError:
        last = f"; last error: {b.last_error}" if b.last_error is not None else ""
        return KafkaTimeoutError(
            f"delivery to {b.topic}[{b.partition}] timed out after "
            f"{self.config.delivery_timeout_ms} ms ({b.attempts} attempts{last})")

    async def _dispatch(self, ready: list[ProducerBatch]) -> int:
        launched = 0
        by_node: dict[int, list[ProducerBatch]] = {}
        now = time.monotonic()
        for b in ready:
            if now > b.deadline:
                self.fail(b, self._timed_out(b))
                continue
            if self.txn is not None and not self.txn.ready(b.topic, b.partition):
                if self.txn.error is not None:      # the transaction failed: so does the batch
                    self.fail(b, self.txn.error)
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
            self.acc.counts[topic] = len(info.partitions)
        except KcodecError:
            await asyncio.sleep(self.config.retry_backoff_ms / 1000)
        finally:
            self.refreshing.discard(topic)
        self.wake.set()

    async def _produce(self, node: int, batches: list[ProducerBatch], sem: asyncio.Semaphore,
                       prev: asyncio.Future | None = None,
                       turn: asyncio.Future | None = None) -> None:
        cfg = self.config
        try:
            for b in batches:
                b.attempts += 1
            # KIP-516: Produce v13 names topics by id; without ids, the last named version.
            # A first-generation transaction may not go past v11 (v12+ adds the partitions
            # to the transaction itself: transactions v2, KIP-890)
            v1_txn = self.txn is not None and not self.txn.v2
            version, ids = (11, None) if v1_txn else self.cluster.by_topic_id(
                ApiKey.PRODUCE, None, {b.topic for b in batches})
            req = requests.produce(cfg.transactional_id, int(cfg.acks), cfg.request_timeout_ms,
                                   [(b.topic, b.partition, b.close()) for b in batches], ids)
            cm = self.cluster.metrics
            if cm is not None:
                now = time.monotonic()
                for b in batches:
                    cm.batch_sent(b.topic, b.count, len(b.data or b""), b.size + HEADER_SIZE,
                                  now - b.created, b.attempts == 1)
                cm.per_request.record(sum(b.count for b in batches))
            if self.cluster.debug.producer:
                log.debug("produce to node %s: %s", node, ", ".join(
                    f"{b.topic}[{b.partition}] {b.count} records {len(b.data or b'')} bytes "
                    f"seq {b.sequence} attempt {b.attempts}" for b in batches))
            # the answer is awaited no longer than the first batch's delivery deadline
            wait = min(cfg.request_timeout_ms / 1000,
                       max(min(b.deadline for b in batches) - time.monotonic(), 0.05))
            try:
                if prev is not None and not prev.done():
                    await asyncio.wait([prev])    # (wait, not await: never cancels it)
                conn = await self.cluster.connection(node)
                if version is not None:
                    version = min(conn.core.version(ApiKey.PRODUCE), version)
                if turn is not None:
                    # the next request's turn: it runs once this task yields, and this
                    # request is written before that (the connection is up, so sending
                    # writes at once)
                    turn.set_result(None)
                if cfg.acks == 0:
                    await self.cluster.request_unanswered(node, req, version=version)
                else:
                    resp = await self.cluster.request(node, req, version=version, timeout=wait)
            except (BrokerNotAvailableError, KafkaTimeoutError, ProtocolError, ClientClosedError) as exc:
                if isinstance(exc, ClientClosedError):
                    for b in batches:
                        self.fail(b, exc)
                    return
                self.cluster.invalidate()
                await asyncio.sleep(cfg.retry_backoff_ms / 1000)
                for b in batches:
                    self._retry_or_fail(b, exc)
                return
            if cfg.acks == 0:
                for b in batches:
                    self.complete(b, -1, -1)
                return
            names = self.cluster.topic_names
            results = {(t.name or names.get(getattr(t, "topic_id", None), ""), p.index): p
                       for t in resp.responses for p in t.partition_responses}
            need_pid = False
            for b in batches:
                p = results.get((b.topic, b.partition))
                if p is None:
                    self._retry_or_fail(b, ProtocolError(f"no answer for {b.topic}[{b.partition}]"))
                elif p.error_code == ErrorCode.NONE:
                    self.complete(b, p.base_offset, p.log_append_time_ms)
                elif p.error_code == ErrorCode.DUPLICATE_SEQUENCE_NUMBER:   # already written
                    self._duplicate(b, p)
                elif p.error_code == ErrorCode.MESSAGE_TOO_LARGE and b.count > 1 and \
                        self._split(b):
                    pass            # its halves go out in its place
                elif p.error_code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER and \
                        cfg.enable_idempotence and self.acc.overtaken(b):
                    # written now, it would come after records sent later: fail it (Java
                    # ends the same way, retrying until the delivery timeout)
                    self.fail(b, KafkaError(
                        p.error_code, f"produce to {b.topic}[{b.partition}]",
                        "a batch sent after this one was written first (the broker took it "
                        "while this one waited for a retry); not written, so that the "
                        "partition keeps the order of sends"))
                elif p.error_code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER and \
                        cfg.enable_idempotence and not self.acc.is_head(b):
                    # behind an earlier batch that is being retried: resend in order after
                    # it, same producer id and sequence
                    self._retry_or_fail(b, KafkaError(p.error_code,
                                                      f"produce {b.topic}[{b.partition}]"),
                                        force=True)
                elif p.error_code in _NEW_PRODUCER_ID and cfg.enable_idempotence and \
                        self.txn is None:
                    need_pid = True
                    self._retry_or_fail(b, KafkaError(p.error_code, f"produce {b.topic}[{b.partition}]"),
                                        force=True)
                else:
                    err = KafkaError(p.error_code, f"produce to {b.topic}[{b.partition}]", p.error_message)
                    if cm is not None:
                        cm.error("Produce", p.error_code)
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
                    self.fail(b, exc)
        finally:
            if turn is not None and not turn.done():
                turn.set_result(None)
            for b in batches:
                b.inflight = False
            sem.release()
            self.wake.set()

    def _split(self, b: ProducerBatch) -> bool:
        """Split ``b`` in two halves that take its place in the queue; False if it cannot
        be (it left the queue meanwhile, or its bytes do not read back)."""
        from kcodec.records import RecordBatchBuilder, iter_batches

        try:
            batch = next(iter_batches(b.close(), validate_crc=False))
            records = [(r.key, r.value, r.headers, r.timestamp) for r in batch]
        except (StopIteration, KcodecError):
            return False
        if len(records) != b.count:
            return False
        acc = self.acc
        mid = len(records) // 2
        parts: list[tuple[int, ProducerBatch]] = []
        sizes = (b.size * mid // len(records), b.size - b.size * mid // len(records))
        for (start, end), size in zip(((0, mid), (mid, len(records))), sizes, strict=False):
            seq = b.sequence + start if b.sequence >= 0 else -1
            builder = RecordBatchBuilder(
                compression=acc.codec, compression_level=self.config.compression_level,
                producer_id=batch.producer_id, producer_epoch=batch.producer_epoch,
                base_sequence=seq, is_transactional=batch.is_transactional,
                max_size=len(b.data or b"") + 1024)
            for key, value, headers, ts in records[start:end]:
                builder.append(key, value, headers, ts)
            part = ProducerBatch(b.topic, b.partition, builder, b.deadline, seq,
                                 self.loop.create_future())
            part.timestamps = b.timestamps[start:end]
            part.size = size
            part.close()
            parts.append((start, part))
        if not acc.replace(b, [part for _, part in parts]):
            return False
        b.split_into(parts)
        return True

    async def _reset_producer_id(self) -> None:
        """Fetch a new producer id and re-stamp every unacknowledged batch from sequence 0.

        Nothing is sent meanwhile, and the re-stamping waits until no batch is in flight
        under the old id: a batch re-stamped while an earlier one is still out would reach
        the broker first under the new id, be taken as that id's first sequence, and turn the
        earlier batch's retry into a duplicate (Java likewise resets sequences only once a
        partition has no batch in flight)."""
        if self.resetting:
            return                       # another answer already started the reset
        log.info("producer %r: the broker no longer knows producer id %d: fetching a new one "
                 "(unacknowledged batches are sent again under it)", self.config.client_id,
                 self.acc.producer_id)
        self.resetting = True
        try:
            await asyncio.sleep(self.config.retry_backoff_ms / 1000)
            while self.acc.any_inflight():   # each in-flight request ends within its timeout
                await asyncio.sleep(0.005)
            await self.init_producer_id()
            self.acc.restamp()
        finally:
            self.resetting = False
            self.wake.set()

    def _retry_or_fail(self, b: ProducerBatch, exc: BaseException, force: bool = False) -> None:
        """A failed attempt: retry, or fail the batch with what Java reports -- the error
        itself when it is not retriable or retries are used up, else (the delivery timeout
        has passed, however late the error came) the timeout, naming the last error."""
        b.last_error = exc
        retriable = force or not isinstance(exc, KafkaError) or exc.retriable
        if not retriable:
            self.fail(b, exc)
        elif time.monotonic() >= b.deadline:
            self.fail(b, self._timed_out(b))
        elif b.attempts > self.config.retries:
            self.fail(b, exc)
        # else: it stays at the head of its queue; the sender picks it up again
