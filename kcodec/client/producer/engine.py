"""The producer's engine: the parts one producer is made of, and what joins them.

    cluster      connections and metadata (kcodec.client.net.cluster)
    accumulator  open and sealed batches, the producer id stamped on them (accumulator.py)
    sender       the task that sends the sealed batches and resolves them (sender.py)
    txn          the transaction state machine, with a ``transactional_id``
                 (transactions.py)

The facades (facade.py) run on it: appending (any thread), flushing and closing (on the
client's loop).
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

from kcodec.client.config import ProducerConfig
from kcodec.client.errors import ClientClosedError, KafkaTimeoutError
from kcodec.client.net.cluster import Cluster
from kcodec.client.producer.accumulator import RecordAccumulator
from kcodec.client.producer.batch import ProducerBatch, RecordFuture
from kcodec.client.producer.sender import Sender
from kcodec.client.producer.transactions import TransactionManager

__all__ = ["ProducerEngine"]


class ProducerEngine:
    """One producer's state and parts (see the module docstring)."""

    def __init__(self, config: ProducerConfig, loop: asyncio.AbstractEventLoop) -> None:
        self.config = config
        self.loop = loop
        self.cluster = Cluster(config)
        transactional = config.transactional_id is not None
        self.accumulator = RecordAccumulator(config, loop, self.kick, transactional)
        self.sender = Sender(config, loop, self.cluster, self.accumulator)
        self.accumulator.wake = self.sender.kick
        self.txn: TransactionManager | None = TransactionManager(self) if transactional else None
        self.sender.txn = self.txn
        if self.cluster.metrics is not None:
            acc = self.accumulator
            self.cluster.metrics.buffer(config.buffer_memory, lambda: acc.buffered)

    def kick(self) -> None:
        self.sender.kick()

    # ------------------------------------------------------------------ appending (any thread)
    def append(self, topic: str, partition: int, partitions: int, key: bytes | None,
               value: bytes | None, headers: Any, timestamp: int | None,
               sticky: bool = False) -> RecordFuture:
        """Add a record (see RecordAccumulator.append); in a transaction, only while one
        is in progress."""
        if self.txn is not None:
            self.txn.check_send()
        return self.accumulator.append(topic, partition, partitions, key, value, headers,
                                       timestamp, sticky)

    def append_built(self, topic: str, partition: int, built: Any, size: int) -> ProducerBatch:
        """Add a prebuilt batch (send_columns); in a transaction, only while one is in
        progress, as ``append``."""
        if self.txn is not None:
            self.txn.check_send()
        return self.accumulator.append_built(topic, partition, built, size)

    # ------------------------------------------------------------------ the loop's side
    async def start(self) -> None:
        self.sender.loop_thread = threading.get_ident()
        if self.config.enable_idempotence and self.txn is None:   # else: init_transactions
            await self.sender.init_producer_id()
        self.sender.start()

    def drop_unsent(self, exc: BaseException) -> bool:
        """Fail every batch not yet sent (aborting a transaction); True if there was one."""
        unsent = self.accumulator.unsent()
        for b in unsent:
            self.sender.fail(b, exc)
        return bool(unsent)

    async def flush(self) -> None:
        acc = self.accumulator
        acc.flushing += 1
        try:
            while True:
                batches = acc.unfinished()
                if not batches:
                    return
                self.sender.wake.set()
                await asyncio.gather(*(asyncio.shield(b.afut) for b in batches if b.afut is not None),
                                     return_exceptions=True)
        finally:
            acc.flushing -= 1

    async def close(self, timeout: float | None) -> None:
        try:
            if timeout is None or timeout > 0:
                await asyncio.wait_for(self.flush(), timeout)
        except asyncio.TimeoutError:
            pass
        finally:
            for b in self.accumulator.unfinished(close=True):
                if not b.event.is_set():
                    self.sender.fail(b, ClientClosedError("the producer was closed before delivery"))
            self.sender.stop()
            await self.cluster.close()

    async def partitions_of(self, topic: str) -> int:
        info = await self.cluster.topic(topic, auto_create=True)
        self.accumulator.counts[topic] = n = len(info.partitions)
        return n

    async def covering(self, topic: str, partition: int) -> int:
        """``topic``'s partition count once the metadata has ``partition``: a record sent
        to a partition the producer does not know yet (added since its last metadata)
        waits for fresh metadata, as Java's producer does for up to max.block.ms; past
        ``api_timeout_ms``, ``KafkaTimeoutError``."""
        cfg = self.cluster.config
        deadline = time.monotonic() + cfg.api_timeout_ms / 1000
        backoff = cfg.retry_backoff_ms / 1000
        while True:
            self.cluster.invalidate()
            n = await self.partitions_of(topic)
            if partition < n:
                return n
            if time.monotonic() + backoff > deadline:
                raise KafkaTimeoutError(
                    f"partition {partition} of topic {topic!r} with partition count {n} is "
                    f"not present in metadata after {cfg.api_timeout_ms} ms")
            await asyncio.sleep(backoff)
