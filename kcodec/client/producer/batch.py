"""A producer batch, and the future of one record in it.

    ProducerBatch   one partition's records sent together, and their delivery result
    RecordFuture    the delivery of one record: ``result(timeout)``, ``await``,
                    ``add_callback(fn(error, result))``
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from kcodec.client.errors import KafkaTimeoutError
from kcodec.client.structs import SendResult
from kcodec.errors import KcodecError
from kcodec.records.header import patch_header

__all__ = ["ProducerBatch", "RecordFuture", "Headers", "as_bytes"]

Headers = Iterable[tuple[str, bytes | None]] | None


def as_bytes(v: Any, what: str) -> bytes | None:
    if v is None or isinstance(v, bytes):
        return v
    if isinstance(v, str):
        return v.encode()
    if isinstance(v, (bytearray, memoryview)):
        return bytes(v)
    raise TypeError(f"{what} must be bytes, str or None, not {type(v).__name__}")


# guards every batch's callbacks list against the race of a callback added (the user's
# thread) while its batch finishes (the loop's): one lock for all, held for an append or
# a swap only
_CALLBACKS = threading.Lock()


class ProducerBatch:
    """The records of one partition sent together: while open, a ``RecordBatchBuilder``
    (``builder``) and the records' timestamps; once closed, its bytes (``data``). Its
    ``sequence`` is the base sequence it was stamped with (-1: not idempotent); ``event``
    and ``afut`` (the loop's future) fire when it is acknowledged or failed, with
    ``result_base``/``result_ts`` or ``error``.

    The accumulator (kcodec._py.accum / kcodec._cy.accum) reads ``builder``, ``timestamps``
    and ``sequence`` and sets ``size`` (its record bytes) when the batch leaves ``open``."""

    __slots__ = ("topic", "partition", "builder", "data", "created", "deadline",
                 "timestamps", "event", "afut", "result_base", "result_ts", "error",
                 "callbacks", "sequence", "attempts", "size", "inflight", "last_error", "parts")

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
        # None once finished (under _CALLBACKS: a callback added then runs at once)
        self.callbacks: list[Callable] | None = []
        self.sequence = sequence
        self.attempts = 0
        self.size = 0
        self.inflight = False
        self.last_error: BaseException | None = None
        # split after MESSAGE_TOO_LARGE (sender.py): [(first record index, part)]; the
        # batch finishes when every part has, and each record's result is its part's
        self.parts: list[tuple[int, ProducerBatch]] | None = None

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

    def part_of(self, index: int) -> tuple[ProducerBatch, int]:
        """The batch holding record ``index`` now, and its index there (split batches)."""
        b = self
        while b.parts is not None:
            for start, part in reversed(b.parts):
                if index >= start:
                    b, index = part, index - start
                    break
        return b, index

    def split_into(self, parts: list[tuple[int, ProducerBatch]]) -> None:
        """Its records now travel in ``parts``; it finishes once they all have."""
        self.parts = parts
        left = [len(parts)]

        def one_done(_part: ProducerBatch) -> None:
            left[0] -= 1
            if left[0] == 0:
                errors = [p.error for _, p in parts if p.error is not None]
                self.finish(-1, -1, None, errors[0] if errors else None)
        for _, part in parts:
            part.add_done(one_done)

    def add_done(self, cb: Callable[[ProducerBatch], Any]) -> None:
        """``cb(batch)`` once the batch is finished: at once if it is already. The check and
        the append are one step under a lock that ``finish`` takes too, so a callback
        added while the loop finishes the batch runs once, never zero times."""
        with _CALLBACKS:
            callbacks = self.callbacks
            if callbacks is not None:
                callbacks.append(cb)
                return
        cb(self)

    def finish(self, base: int, log_append_ts: int, error: BaseException | None,
               part_error: BaseException | None = None) -> None:
        """``part_error``: (a split batch) one of its parts failed; the loop's future
        fails with it, each record's own result is its part's."""
        self.result_base, self.result_ts, self.error = base, log_append_ts, error
        self.event.set()
        failed = error or part_error
        if self.afut is not None and not self.afut.done():
            if failed is None:
                self.afut.set_result(None)
            else:
                self.afut.set_exception(failed)
                self.afut.exception()
        with _CALLBACKS:
            callbacks, self.callbacks = self.callbacks, None
        for cb in callbacks or ():
            try:
                cb(self)
            except Exception:  # pragma: no cover - a user callback must not kill the sender
                pass


class RecordFuture:
    """The delivery of one record: ``result(timeout)``, ``await``, ``add_callback``.

    Made by the producer as ``RecordFuture()`` with ``batch`` (the ProducerBatch that holds
    the record) and ``index`` (the record's place in it) set after: a class without
    ``__init__`` is called without a Python frame (and without ``object.__new__``'s argument
    parsing), ~60 ns of a ~1.2 us ``send``. Both are the producer's to set."""

    __slots__ = ("batch", "index")
    batch: ProducerBatch
    index: int

    def done(self) -> bool:
        """True once the record is acknowledged or has failed."""
        return self.batch.event.is_set()

    def _value(self) -> SendResult:
        return _result_of(self.batch, self.index)

    def result(self, timeout: float | None = None) -> SendResult:
        """Wait (at most ``timeout`` seconds) and return the ``SendResult``, or raise the
        record's error."""
        if not self.batch.event.wait(timeout):
            raise KafkaTimeoutError(f"delivery not confirmed within {timeout} s")
        return self._value()

    def exception(self, timeout: float | None = None) -> BaseException | None:
        """Wait (at most ``timeout`` seconds) and return the record's error, or None."""
        self.batch.event.wait(timeout)
        b = self.batch
        return b.part_of(self.index)[0].error if b.parts is not None else b.error

    def add_callback(self, fn: Callable[[BaseException | None, SendResult | None], Any]) -> None:
        """``fn(error, result)`` once delivered or failed (called from the client's loop)."""
        # the callback is kept on the batch, and gets it as its argument: it holds the
        # record's index only, so that no cycle (batch -> callback -> this future -> batch)
        # outlives the delivery and waits for the cyclic GC (whose full collections, one
        # every few thousand records, paused the sender 20-30 ms)
        index = self.index

        def cb(b: ProducerBatch) -> None:
            try:
                fn(None, _result_of(b, index))
            except KcodecError as exc:
                fn(exc, None)
        self.batch.add_done(cb)

    def __await__(self):
        if self.batch.afut is not None:
            try:
                yield from asyncio.shield(self.batch.afut).__await__()
            except Exception:
                if self.batch.parts is None:
                    raise         # (a split batch: this record's own part decides)
        else:
            while not self.batch.event.is_set():
                yield from asyncio.sleep(0.001).__await__()
        return self._value()


def _result_of(b: ProducerBatch, i: int) -> SendResult:
    """Record ``i`` of batch ``b``'s delivery result, or its error raised."""
    if b.parts is not None:
        b, i = b.part_of(i)
    if b.error is not None:
        raise b.error
    off = b.result_base + i if b.result_base >= 0 else -1
    ts = b.result_ts if b.result_ts >= 0 else b.timestamps[i]
    return SendResult(b.partition, off, ts)
