"""The producer's facades: ``AsyncProducer`` (asyncio) and ``Producer`` (blocking).

Both run one engine (engine.py). ``send`` picks the partition (a chosen one, the key's
murmur2, or the sticky partitioner for keyless records) and appends the record to the
accumulator (accumulator.py), whose sender task sends the batches and resolves each
record's future with ``SendResult(partition, offset, timestamp)``. Without transactions a
``Producer``'s ``send`` is the accumulator's compiled fast path itself for keyed records.

With user hooks set (``partitioner``, ``key_serializer``/``value_serializer``,
``interceptors``: hooks.py) ``send`` runs them in the caller's context, Java's order:
``on_send``, the serializers, the partitioner; their errors fail that send only.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

from kcodec.client.config import ProducerConfig
from kcodec.client.errors import ClientClosedError, KafkaTimeoutError, RecordTooLargeError
from kcodec.client.net.loop import GRACE, LoopThread, shared_loop
from kcodec.client.producer.batch import Headers, RecordFuture, as_bytes
from kcodec.client.producer.engine import ProducerEngine
from kcodec.client.producer.hooks import ProducerHooks, ProducerRecord
from kcodec.client.producer.partitioner import partition_for_key
from kcodec.client.producer.transactions import (
    PreparedTxnState,
    TransactionManager,
    TransactionStateError,
)
from kcodec.client.structs import ConsumerGroupMetadata, SendResult
from kcodec.records.header import HEADER_SIZE

__all__ = ["Producer", "AsyncProducer", "RecordFuture"]


class _Base:
    _engine: ProducerEngine
    _hooks: ProducerHooks | None

    def _route(self, topic: str, key: bytes | None, partition: int | None, count: int) -> int:
        if partition is not None:
            if not isinstance(partition, int) or partition < 0 or partition >= count:
                raise ValueError(f"partition {partition} out of range for {topic!r} "
                                 f"({count} partitions)")
            return partition
        return self._engine.accumulator.partitioner(topic, key, count)

    def _count(self, topic: str) -> int | None:
        return self._engine.accumulator.counts.get(topic)

    def _choose(self, hooks: ProducerHooks, rec: ProducerRecord, key: bytes | None,
                count: int) -> int:
        """A hooked record's partition: given (checked), else the hooks' (-1: sticky)."""
        if rec.partition is None:
            return hooks.choose(rec.topic, key, count)
        return self._route(rec.topic, key, rec.partition, count)

    def metrics(self) -> dict[str, dict[str, Any]]:
        """This producer's metrics, named as the Java client's (kcodec.client.metrics):
        ``{group: {name: value or [{"tags": {...}, "value": v}, ...]}}``."""
        from kcodec.client.metrics import metrics_of

        return metrics_of(self)


class AsyncProducer(_Base):
    """The asyncio producer. ``await start()`` (or ``async with``) before sending."""

    def __init__(self, config: dict[str, Any] | None = None, **kwargs: Any) -> None:
        self.config = ProducerConfig.from_kwargs(config, **kwargs)
        self._engine: ProducerEngine | None = None   # type: ignore[assignment]
        self._hooks = self.config.hooks

    async def start(self) -> AsyncProducer:
        """Connect and get ready to send; ``async with`` calls it."""
        self._engine = ProducerEngine(self.config, asyncio.get_running_loop())
        await self._engine.start()
        tracing = self._engine.cluster.tracing
        if tracing is not None and type(self).send is AsyncProducer.send:
            self.send = _traced_async(self.send, tracing)  # type: ignore[method-assign]
        return self

    async def send(self, topic: str, value: Any = None, key: Any = None,
                   partition: int | None = None, headers: Headers = None,
                   timestamp: int | None = None) -> RecordFuture:
        """Queue a record; await the returned future for its ``SendResult``."""
        eng = self._engine
        if eng is None:
            raise ClientClosedError("the producer is not started")
        if self._hooks is not None:
            return await self._send_hooked(eng, self._hooks, ProducerRecord(
                topic, value, key, partition, headers, timestamp))
        key, value = as_bytes(key, "key"), as_bytes(value, "value")
        count = self._count(topic) or await eng.partitions_of(topic)
        if partition is not None and type(partition) is int and partition >= count:
            # a partition added since the producer's metadata: wait for it
            count = await eng.covering(topic, partition)
        p = self._route(topic, key, partition, count)
        acc = eng.accumulator
        while acc.buffered > self.config.buffer_memory and not acc.closed:
            await asyncio.sleep(0.001)
        return eng.append(topic, p, count, key, value, headers, timestamp,
                          partition is None and key is None)

    async def _send_hooked(self, eng: ProducerEngine, hooks: ProducerHooks,
                           rec: ProducerRecord) -> RecordFuture:
        rec = hooks.intercept(rec)
        try:
            key, value, headers = hooks.serialize(rec)
            count = self._count(rec.topic) or await eng.partitions_of(rec.topic)
            if rec.partition is not None and type(rec.partition) is int \
                    and rec.partition >= count:   # added since the metadata: wait for it
                count = await eng.covering(rec.topic, rec.partition)
            p = self._choose(hooks, rec, key, count)
            acc = eng.accumulator
            while acc.buffered > self.config.buffer_memory and not acc.closed:
                await asyncio.sleep(0.001)
            fut = eng.append(rec.topic, p, count, key, value, headers, rec.timestamp, p < 0)
        except Exception as exc:
            hooks.failed(rec.topic, rec.partition, exc)
            raise
        hooks.watch(fut, rec.topic)
        return fut

    async def send_and_wait(self, *args: Any, **kwargs: Any) -> SendResult:
        """``send``, then wait for the acknowledgement and return its ``SendResult``."""
        return await (await self.send(*args, **kwargs))

    # transactions (transactional_id set): see kcodec.client.producer.transactions
    def _txn(self) -> TransactionManager:
        eng = self._engine
        if eng is None:
            raise ClientClosedError("the producer is not started")
        if eng.txn is None:
            raise TransactionStateError("transactions need transactional_id in the config")
        return eng.txn

    async def init_transactions(self, keep_prepared_txn: bool = False) -> None:
        """Register the transactional_id (fencing older producers with it); once, first.
        ``keep_prepared_txn`` (KIP-939): keep an open transaction for
        ``complete_transaction`` instead of aborting it."""
        await self._txn().init(keep_prepared_txn)

    async def prepare_transaction(self) -> PreparedTxnState:
        """Two-phase commit (KIP-939): flush and hold the transaction; record the returned
        state in your own store, then commit, abort or (after a restart) complete it."""
        return await self._txn().prepare()

    @property
    def prepared_transaction_state(self) -> PreparedTxnState | None:
        """The identity of the transaction this producer prepared, or kept with
        ``init_transactions(keep_prepared_txn=True)``; None when there is none."""
        return self._txn().prepared_state()

    async def complete_transaction(self, prepared: PreparedTxnState | str) -> bool:
        """Commit the kept transaction if ``prepared`` is its state, else abort it; True if
        committed (False also when there was none)."""
        return await self._txn().complete(prepared)

    async def begin_transaction(self) -> None:
        """Start a transaction: the records sent until commit or abort belong to it."""
        self._txn().begin()

    async def send_offsets_to_transaction(
            self, offsets: dict[Any, Any], group_metadata: ConsumerGroupMetadata | str) -> None:
        """Commit consumer ``offsets`` ({(topic, partition): offset}) with the transaction."""
        await self._txn().send_offsets(offsets, group_metadata)

    async def commit_transaction(self) -> None:
        """Flush, then commit; an ``AbortableTransactionError`` means: abort instead."""
        await self._txn().commit()

    async def abort_transaction(self) -> None:
        """Abort the transaction: its records are never seen by read_committed consumers."""
        await self._txn().abort()

    async def flush(self) -> None:
        """Send everything queued and wait for every acknowledgement."""
        if self._engine is not None:
            await self._engine.flush()

    async def close(self, timeout: float | None = None) -> None:
        """Send what is queued (waiting at most ``timeout`` seconds), then close the connections."""
        if self._engine is not None:
            await self._engine.close(timeout)
            if self._hooks is not None:
                self._hooks.close()

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
        self._engine = ProducerEngine(self.config, self._loop.loop)
        self._timeout = self.config.api_timeout_ms / 1000
        self._buffer_memory = self.config.buffer_memory
        # the per-record step in C (compiled twin) when no transaction needs checking: the
        # instance's ``send`` is then the accumulator's, which takes a keyed record itself and
        # hands anything else to ``_send`` (a Python frame less per record, ~15 % of a send);
        # not in a subclass that defines its own ``send``, which must stay the one called
        self._fast = None
        self._hooks = self.config.hooks
        if self._engine.txn is None and self._hooks is None:
            acc = self._engine.accumulator
            acc.bind(RecordFuture, self._send)
            self._fast = acc.keyed
            if type(self).send is Producer.send:
                self.send = acc.send  # type: ignore[method-assign]
        # tracing: the instance's send becomes the traced one (a span per record, its
        # context in the headers); without tracing nothing is added to the send path
        tracing = self._engine.cluster.tracing
        if tracing is not None and type(self).send is Producer.send:
            self.send = _traced(self.send, tracing)  # type: ignore[method-assign]
        try:
            self._loop.run(self._engine.start(), self._timeout + GRACE)
        except BaseException:
            self._loop.run(self._engine.close(0), 5)
            raise

    def send(self, topic: str, value: Any = None, key: Any = None,
             partition: int | None = None, headers: Headers = None,
             timestamp: int | None = None) -> RecordFuture:
        """Queue a record; ``.result(timeout)`` of the returned future is its ``SendResult``.

        (Without transactions a producer's own ``send`` is its accumulator's, with this
        signature: see ``__init__``.)"""
        if partition is None and self._fast is not None:
            # a keyed record of bytes: partition, lock, builder and future in C (accum)
            fut = self._fast(topic, key, value, headers, timestamp)
            if fut is not None:
                return fut
        return self._send(topic, value, key, partition, headers, timestamp)

    def _send(self, topic: str, value: Any, key: Any, partition: int | None,
              headers: Headers, timestamp: int | None) -> RecordFuture:
        """``send``'s general path: any record the accumulator's fast path did not take."""
        if self._hooks is not None:
            return self._send_hooked(self._hooks, ProducerRecord(
                topic, value, key, partition, headers, timestamp))
        eng = self._engine
        if key is not None and type(key) is not bytes:
            key = as_bytes(key, "key")
        if value is not None and type(value) is not bytes:
            value = as_bytes(value, "value")
        count = eng.accumulator.counts.get(topic)
        if count is None:
            count = self._loop.run(eng.partitions_of(topic), self._timeout + GRACE)
        if partition is not None and type(partition) is int and partition >= count:
            # a partition added since the producer's metadata: wait for it
            count = self._loop.run(eng.covering(topic, partition),
                                   self._timeout + GRACE)
        if partition is None:
            p = partition_for_key(key, count) if key is not None else -1   # -1: sticky
        else:
            p = self._route(topic, key, partition, count)
        if eng.accumulator.buffered > self._buffer_memory:
            self._wait_for_space()
        return eng.append(topic, p, count, key, value, headers, timestamp,
                          partition is None and key is None)

    def _send_hooked(self, hooks: ProducerHooks, rec: ProducerRecord) -> RecordFuture:
        eng = self._engine
        rec = hooks.intercept(rec)
        try:
            key, value, headers = hooks.serialize(rec)
            count = eng.accumulator.counts.get(rec.topic)
            if count is None:
                count = self._loop.run(eng.partitions_of(rec.topic), self._timeout + GRACE)
            if rec.partition is not None and type(rec.partition) is int \
                    and rec.partition >= count:   # added since the metadata: wait for it
                count = self._loop.run(eng.covering(rec.topic, rec.partition),
                                       self._timeout + GRACE)
            p = self._choose(hooks, rec, key, count)
            if eng.accumulator.buffered > self._buffer_memory:
                self._wait_for_space()
            fut = eng.append(rec.topic, p, count, key, value, headers, rec.timestamp, p < 0)
        except Exception as exc:
            hooks.failed(rec.topic, rec.partition, exc)
            raise
        hooks.watch(fut, rec.topic)
        return fut

    def send_columns(self, topic: str, value: Any, key: Any = None, headers: Any = None,
                     partition: Any = None, timestamp: int | None = None) -> list[RecordFuture]:
        """Queue whole pyarrow columns at once (no per-row Python work): ``value`` and
        ``key`` binary or string arrays, ``headers`` list<struct<key: string, value:
        binary>>, ``partition`` int array (null: choose). Returns one future per batch
        made, for its last record. See kcodec.client.producer.columnar.

        A ``partitioner`` set on the producer chooses the rows without a partition (one
        Python call per such row); serializers and interceptors do not run here (the
        columns are bytes already): with either set, ``send_columns`` refuses."""
        from kcodec.client.producer.columnar import partition_column, plan_send

        hooks = self._hooks
        if hooks is not None and (hooks.key is not None or hooks.value is not None
                                  or hooks.interceptors is not None):
            raise ValueError("send_columns sends the columns' bytes as they are: it runs no "
                             "key_serializer, value_serializer or interceptors, and this "
                             "producer has some set; use send() for its records, or a "
                             "producer without them")
        eng = self._engine
        count = eng.accumulator.counts.get(topic)
        if count is None:
            count = self._loop.run(eng.partitions_of(topic), self._timeout + 1)
        if hooks is not None and hooks.partitioner is not None:
            partition = partition_column(hooks, topic, value, key, partition, count)
        acc = eng.accumulator
        sticky = acc.partitioner.sticky.partition(topic, count)
        cfg = self.config
        planned = plan_send(value, key, headers, partition, count, sticky,
                            min(cfg.batch_size, acc.max_size - HEADER_SIZE), acc.codec,
                            cfg.compression_level, timestamp)
        for _p, built, size in planned:     # a row too large alone: refuse them all, first
            for limit, setting in ((cfg.max_request_size, "max_request_size"),
                                   (cfg.buffer_memory, "buffer_memory")):
                if size > limit and built.count == 1:
                    raise RecordTooLargeError(size, limit, setting)
        acc.partitioner.sticky.on_new_batch(topic, count, sticky)
        out = []
        for p, built, size in planned:
            if acc.buffered > self._buffer_memory:
                self._wait_for_space()
            b = eng.append_built(topic, p, built, size)
            fut = RecordFuture()
            fut.batch, fut.index = b, b.count - 1
            out.append(fut)
        return out

    def send_values(self, topic: str, values: list[bytes], key: bytes | None = None,
                    partition: int | None = None,
                    timestamp: int | None = None) -> list[RecordFuture]:
        """Queue many values at once, encoded in one pass each batch (no per-record Python
        work, and neither numpy nor pyarrow): ``values`` a list of bytes, all with ``key``
        (None: keyless) and without headers, to ``partition``, else the partition of
        ``key``, else one sticky partition for the call (KIP-794). Returns one future per
        batch made, for its last record; like ``send_columns``, it refuses a producer with
        serializers or interceptors, and a record too large alone refuses the call."""
        from kcodec.client.producer.columnar import PrebuiltBatch
        from kcodec.records.builder import encode_values

        hooks = self._hooks
        if hooks is not None and (hooks.key is not None or hooks.value is not None
                                  or hooks.interceptors is not None):
            raise ValueError("send_values sends the values' bytes as they are: it runs no "
                             "key_serializer, value_serializer or interceptors, and this "
                             "producer has some set; use send() for its records, or a "
                             "producer without them")
        if not values:
            return []
        eng = self._engine
        acc = eng.accumulator
        count = acc.counts.get(topic)
        if count is None:
            count = self._loop.run(eng.partitions_of(topic), self._timeout + 1)
        sticky = -1
        if partition is not None:
            if not 0 <= partition < count:
                raise ValueError(f"partition {partition} out of range (the topic has "
                                 f"{count} partitions)")
            p = partition
        elif hooks is not None:         # (a partitioner of the user's, or none)
            p = hooks.choose(topic, key, count)
        elif key is not None:
            p = partition_for_key(key, count)
        else:
            p = -1
        if p < 0:
            p = sticky = acc.partitioner.sticky.partition(topic, count)
        cfg = self.config
        room = min(cfg.batch_size, acc.max_size - HEADER_SIZE)
        ts = int(time.time() * 1000) if timestamp is None else timestamp
        planned = []
        start = 0
        while start < len(values):
            section, end = encode_values(values, start, key, room)
            size = len(section) + HEADER_SIZE
            if end - start == 1:        # a record too large alone: refuse them all, first
                for limit, setting in ((cfg.max_request_size, "max_request_size"),
                                       (cfg.buffer_memory, "buffer_memory")):
                    if size > limit:
                        raise RecordTooLargeError(size, limit, setting)
            planned.append((PrebuiltBatch(section, end - start, ts, acc.codec,
                                          cfg.compression_level), size))
            start = end
        if sticky >= 0:
            acc.partitioner.sticky.on_new_batch(topic, count, sticky)
        out = []
        for built, size in planned:
            if acc.buffered > self._buffer_memory:
                self._wait_for_space()
            b = eng.append_built(topic, p, built, size)
            fut = RecordFuture()
            fut.batch, fut.index = b, b.count - 1
            out.append(fut)
        return out

    def _wait_for_space(self) -> None:
        acc = self._engine.accumulator
        with acc.space:
            deadline = time.monotonic() + self._timeout
            while acc.buffered > self._buffer_memory and not acc.closed:
                if not acc.space.wait(max(deadline - time.monotonic(), 0)):
                    raise KafkaTimeoutError("buffer_memory full: no space freed in time")

    # transactions (transactional_id set): see kcodec.client.producer.transactions
    def _txn(self) -> TransactionManager:
        if self._engine.txn is None:
            raise TransactionStateError("transactions need transactional_id in the config")
        return self._engine.txn

    def init_transactions(self, timeout: float | None = None,
                          keep_prepared_txn: bool = False) -> None:
        """Register the transactional_id (fencing older producers with it); once, first.
        ``keep_prepared_txn`` (KIP-939): keep an open transaction for
        ``complete_transaction`` instead of aborting it."""
        self._loop.run(self._txn().init(keep_prepared_txn),
                       timeout if timeout is not None else self._timeout + 1)

    def prepare_transaction(self, timeout: float | None = None) -> PreparedTxnState:
        """Two-phase commit (KIP-939): flush and hold the transaction; record the returned
        state in your own store, then commit, abort or (after a restart) complete it."""
        return self._loop.run(self._txn().prepare(),
                              timeout if timeout is not None else self._timeout + 1)

    @property
    def prepared_transaction_state(self) -> PreparedTxnState | None:
        """The identity of the transaction this producer prepared, or kept with
        ``init_transactions(keep_prepared_txn=True)``; None when there is none."""
        return self._txn().prepared_state()

    def complete_transaction(self, prepared: PreparedTxnState | str,
                             timeout: float | None = None) -> bool:
        """Commit the kept transaction if ``prepared`` is its state, else abort it; True if
        committed (False also when there was none)."""
        return self._loop.run(self._txn().complete(prepared),
                              timeout if timeout is not None else self._timeout + 1)

    def begin_transaction(self) -> None:
        """Start a transaction: the records sent until commit or abort belong to it."""
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
        """Abort the transaction: its records are never seen by read_committed consumers."""
        self._loop.run(self._txn().abort(), timeout if timeout is not None else self._timeout + 1)

    def flush(self, timeout: float | None = None) -> None:
        """Send everything queued and wait for every acknowledgement."""
        self._loop.run(self._engine.flush(), timeout if timeout is not None else None)

    def close(self, timeout: float | None = None) -> None:
        """Send what is queued (waiting at most ``timeout`` seconds), then close the connections."""
        self._loop.run(self._engine.close(timeout), None if timeout is None else timeout + 5)
        if self._hooks is not None:
            self._hooks.close()

    def partitions_for(self, topic: str) -> list[int]:
        """The partition numbers of ``topic`` (it is created if the broker creates topics on
        use)."""
        info = self._loop.run(self._engine.cluster.topic(topic), self._timeout + GRACE)
        return sorted(info.partitions)

    def __enter__(self) -> Producer:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _traced(send: Callable[..., RecordFuture], tracing: Any) -> Callable[..., RecordFuture]:
    """``send`` with a ``send`` span per record, ended at delivery (kcodec.observe.tracing)."""
    def send_traced(topic: str, value: Any = None, key: Any = None,
                    partition: int | None = None, headers: Headers = None,
                    timestamp: int | None = None) -> RecordFuture:
        span = tracing.start_send(topic, key, value, partition)
        try:
            fut = send(topic, value, key, partition, tracing.headers_for(span, headers),
                       timestamp)
        except BaseException as exc:
            tracing.end_send(span, exc, None)
            raise
        fut.add_callback(lambda err, res: tracing.end_send(span, err, res))
        return fut
    return send_traced


def _traced_async(send: Callable[..., Any], tracing: Any) -> Callable[..., Any]:
    async def send_traced(topic: str, value: Any = None, key: Any = None,
                          partition: int | None = None, headers: Headers = None,
                          timestamp: int | None = None) -> RecordFuture:
        span = tracing.start_send(topic, key, value, partition)
        try:
            fut = await send(topic, value, key, partition, tracing.headers_for(span, headers),
                             timestamp)
        except BaseException as exc:
            tracing.end_send(span, exc, None)
            raise
        fut.add_callback(lambda err, res: tracing.end_send(span, err, res))
        return fut
    return send_traced


async def _call(fn: Callable[[], Any]) -> Any:
    return fn()
