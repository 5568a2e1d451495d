"""The producer's record accumulator: open and sealed batches per partition.

``RecordAccumulator`` is the twin ``Accumulator`` (kcodec.client.producer.accum: the state,
sealing, and the per-record step in C) with the producer's slower paths: any record the
fast path does not take (``append``: no key, a chosen partition, a full batch, the sticky
partitioner), whole prebuilt batches (``append_built``), choosing what to send
(``ready``), acknowledging and failing batches, and re-stamping them with a new producer
id. Every method that touches the state takes ``lock`` (the fast path's too); the sender
asks the accumulator, never reaches into it.

The producer identity (``producer_id``, ``epoch``, the per-partition ``next_seq``) is
stamped on batches as they are made, so it lives here too: ``set_producer`` changes it.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from typing import Any

from kcodec.client.config import ProducerConfig
from kcodec.client.errors import ClientClosedError, RecordTooLargeError
from kcodec.client.producer.accum import Accumulator
from kcodec.client.producer.batch import ProducerBatch, RecordFuture
from kcodec.client.producer.partitioner import DefaultPartitioner
from kcodec.compression import codec_of
from kcodec.records import RecordBatchBuilder, record_size
from kcodec.records.header import HEADER_SIZE

__all__ = ["RecordAccumulator"]


class RecordAccumulator(Accumulator):
    """Open and sealed batches (see the module docstring)."""

    def __init__(self, config: ProducerConfig, loop: asyncio.AbstractEventLoop,
                 wake: Callable[[], Any], transactional: bool) -> None:
        seal_at = max(config.batch_size - HEADER_SIZE, 1)
        super().__init__(seal_at + HEADER_SIZE, config.buffer_memory, wake)
        self.config = config
        self.loop = loop
        self.transactional = transactional
        self.codec = int(codec_of(config.compression_type))
        self.space = threading.Condition(self.lock)      # buffered went down
        self.partitioner = DefaultPartitioner(batch_size=config.batch_size)
        self.sticky_topics: dict[str, int] = {}   # topics with keyless records: partitions
        self.flushing = 0                          # flushes waiting: seal every open batch
        self.producer_id = -1
        self.epoch = -1
        # per partition, the highest sequence acknowledged under the current producer id
        self.acked_seq: dict[tuple[str, int], int] = {}
        # a batch holds at most this (and more only with one record, checked on its own)
        self.max_size = min(max(config.batch_size, 1024), config.max_request_size,
                            config.buffer_memory)

    # ------------------------------------------------------------------ appending (any thread)
    def append(self, topic: str, partition: int, partitions: int, key: bytes | None,
               value: bytes | None, headers: Any, timestamp: int | None,
               sticky: bool = False) -> RecordFuture:
        """Add a record to its partition's open batch (any thread). ``sticky``: a keyless
        record without a partition; the sticky partitioner picks one here, under the lock,
        and counts the bytes (KIP-794)."""
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
            # counted when it leaves ``open`` (account), not per record: so the compiled
            # step touches only the builder and the list
            size = 0 if b is None else b.builder.add(key, value, headers, timestamp, b.timestamps)
            if b is None or not size:
                # the record starts a batch, which takes any size: check it first
                self._check_size(key, value, headers)
                if b is not None:      # full: send it, start another
                    self.seal(tp, b)
                b = self._new_batch(tp)
                size = b.builder.add(key, value, headers, timestamp, b.timestamps)
                if not size:
                    self.seal(tp, b)
                    b = self._new_batch(tp)
                    size = b.builder.add(key, value, headers, timestamp, b.timestamps)
                self.wake()
            idx = len(b.timestamps) - 1
            if b.builder.size >= self.seal_size:
                self.seal(tp, b)
                self.wake()
            if sticky:
                self.partitioner.sticky.on_append(topic, partitions, partition, size,
                                                  tp not in self.open)
        finally:
            lock.release()
        fut = RecordFuture()
        fut.batch = b
        fut.index = idx
        return fut

    def _check_size(self, key: bytes | None, value: bytes | None, headers: Any) -> None:
        """Refuse a record larger than max_request_size or buffer_memory (with the header of
        a batch of its own), as Java does before accepting it. Only a record that starts a
        batch needs the check: the builders' max_size is at most both, and a record that
        would take a batch past it goes to a new batch."""
        cfg = self.config
        size = HEADER_SIZE + record_size(key, value, headers)   # first in its batch: deltas 0
        if size > cfg.max_request_size:
            raise RecordTooLargeError(size, cfg.max_request_size, "max_request_size")
        if size > cfg.buffer_memory:
            raise RecordTooLargeError(size, cfg.buffer_memory, "buffer_memory")

    def append_built(self, topic: str, partition: int, built: Any, size: int) -> ProducerBatch:
        """Queue an already encoded batch (kcodec.client.producer.columnar.PrebuiltBatch)
        behind the partition's open batch, stamped with the producer id and sequence."""
        tp = (topic, partition)
        with self.lock:
            if self.closed or self.fatal is not None:
                raise self.fatal or ClientClosedError("the producer is closed")
            if tp in self.open:
                self.seal(tp, self.open[tp])
            seq = self.next_seq.get(tp, 0) if self.producer_id >= 0 else -1
            built.stamp(self.producer_id, self.epoch, seq, self.transactional)
            b = ProducerBatch(topic, partition, built, time.monotonic()
                              + self.config.delivery_timeout_ms / 1000, seq,
                              self.loop.create_future())
            b.size, b.timestamps = size, [built.timestamp] * built.count
            self.pending += b.count
            self.buffered += size
            self.seal(tp, b)
            self.wake()
        return b

    def _new_batch(self, tp: tuple[str, int]) -> ProducerBatch:
        cfg = self.config
        seq = self.next_seq.get(tp, 0) if self.producer_id >= 0 else -1
        builder = RecordBatchBuilder(compression=self.codec,
                                     compression_level=cfg.compression_level,
                                     producer_id=self.producer_id, producer_epoch=self.epoch,
                                     base_sequence=seq, max_size=self.max_size,
                                     is_transactional=self.transactional)
        afut = self.loop.create_future()
        b = ProducerBatch(tp[0], tp[1], builder,
                          time.monotonic() + cfg.delivery_timeout_ms / 1000, seq, afut)
        self.open[tp] = b
        return b

    # ------------------------------------------------------------------ for the sender (loop)
    def set_producer(self, producer_id: int, epoch: int) -> None:
        """A new producer id and epoch: sequences start again from 0."""
        with self.lock:
            self.producer_id, self.epoch = producer_id, epoch
            self.next_seq.clear()
            self.acked_seq.clear()

    def ready(self, linger: float, hold: bool) -> tuple[list[ProducerBatch], float | None]:
        """Seal the open batches that are ``linger`` seconds old (all of them while
        flushing or closed); return the first unsent batch of each partition (none while
        ``hold``) and when the next open batch is due (None: no open batch).

        A due batch stays open while its partition has a sealed batch not sent yet: that
        one goes first, one batch per partition per request, so sealing this one now would
        only queue it behind, and records that come meanwhile join it instead (Java closes
        a batch only when it drains it into a request). Without this, linger_ms 0 under a
        steady rate sealed a batch of a record or two at every wake-up, the queue of tiny
        batches grew faster than requests took them, and latency grew with it."""
        now = time.monotonic()
        ready: list[ProducerBatch] = []
        next_due = None
        with self.lock:
            for tp, b in list(self.open.items()):
                due = b.created + linger
                if self.flushing or self.closed:
                    self.seal(tp, b)
                elif due <= now:
                    if not self._unsent_ahead(tp):
                        self.seal(tp, b)
                    # else: sealed once the batch ahead leaves (the sender is woken then)
                else:
                    next_due = due if next_due is None else min(next_due, due)
            for q in () if hold else self.queues.values():
                for b in q:
                    if not b.inflight:
                        ready.append(b)
                        break
            if self.sticky_topics:
                self._update_load()
        return ready, next_due

    def _unsent_ahead(self, tp: tuple[str, int]) -> bool:
        """A sealed batch of ``tp`` waits to be sent (lock held)."""
        q = self.queues.get(tp)
        return q is not None and any(not b.inflight for b in q)

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

    def is_head(self, b: ProducerBatch) -> bool:
        """No earlier batch of its partition is still waiting for an acknowledgement."""
        with self.lock:
            q = self.queues.get((b.topic, b.partition))
            return not q or q[0] is b

    def overtaken(self, b: ProducerBatch) -> bool:
        """A later batch of ``b``'s partition was acknowledged under the current producer
        id: the broker took it while ``b`` waited for a retry (it does so when it has no
        state for the producer yet), so ``b`` can no longer be written in order."""
        with self.lock:
            return b.sequence >= 0 and \
                self.acked_seq.get((b.topic, b.partition), -1) > b.sequence + b.count - 1

    def any_inflight(self) -> bool:
        with self.lock:
            return any(b.inflight for q in self.queues.values() for b in q)

    def acknowledged(self, b: ProducerBatch) -> None:
        """``b`` was written: it leaves its queue and the counts. It need not be the head:
        a later batch can be acknowledged while an earlier one waits for its retry, and
        left queued it would be sent (and, under a new producer id, written) again."""
        with self.lock:
            q = self.queues.get((b.topic, b.partition))
            if q and q[0] is b:
                q.popleft()
            elif q and b in q:
                q.remove(b)
            if b.sequence >= 0:
                tp = (b.topic, b.partition)
                self.acked_seq[tp] = max(self.acked_seq.get(tp, -1), b.sequence + b.count - 1)
            self.pending -= b.count
            self.buffered -= b.size
            self.space.notify_all()

    def replace(self, b: ProducerBatch, parts: list[ProducerBatch]) -> bool:
        """``parts`` take queued ``b``'s place (a split); the counts are unchanged (the
        parts hold its records and bytes). False if ``b`` is not queued any more."""
        with self.lock:
            q = self.queues.get((b.topic, b.partition))
            if not q or b not in q:
                return False
            i = q.index(b)
            del q[i]
            for j, part in enumerate(parts):
                q.insert(i + j, part)
            return True

    def remove(self, b: ProducerBatch) -> None:
        """``b`` failed (open or queued): it leaves the accumulator and the counts."""
        with self.lock:
            tp = (b.topic, b.partition)
            if self.open.get(tp) is b:
                del self.open[tp]
                self.account(b)
            q = self.queues.get(tp)
            if q and b in q:
                q.remove(b)
            self.pending -= b.count
            self.buffered -= b.size
            self.space.notify_all()

    def unsent(self) -> list[ProducerBatch]:
        """The batches not sent yet, open ones included."""
        with self.lock:
            return [b for q in self.queues.values() for b in q if not b.inflight] + \
                list(self.open.values())

    def unfinished(self, close: bool = False) -> list[ProducerBatch]:
        """Every batch not yet acknowledged or failed (``close``: and accept no more)."""
        with self.lock:
            if close:
                self.closed = True
            return [b for q in self.queues.values() for b in q] + list(self.open.values())

    def restamp(self) -> None:
        """Every queued batch, and each open one (sealed now), re-stamped with the current
        producer id and epoch, sequences from 0 per partition."""
        with self.lock:
            for tp, q in self.queues.items():
                seq = 0
                for b in q:
                    b.restamp(self.producer_id, self.epoch, seq)
                    seq += b.count
                ob = self.open.get(tp)
                if ob is not None:
                    self.account(ob)
                    ob.close()
                    ob.restamp(self.producer_id, self.epoch, seq)
                    seq += ob.count
                    del self.open[tp]
                    q.append(ob)
                self.next_seq[tp] = seq
