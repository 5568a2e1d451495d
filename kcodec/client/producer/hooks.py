"""The producer's user-supplied hooks, in the order ``send`` runs them (Java's order):

    interceptors  ``on_send(record) -> record`` on a ProducerRecord, before anything else
    serializers   ``key_serializer`` / ``value_serializer``: ``fn(data)`` or
                  ``fn(data, ctx)`` (kcodec.client.hooks.SerializationContext), -> bytes,
                  str (UTF-8) or None
    partitioner   for a record without a partition (kcodec.client.producer.partitioner)
    interceptors  ``on_acknowledgement(metadata, error)`` once the record is written or
                  failed (also for a send that failed before queueing), on the client's loop

A producer with none of them set has no ``ProducerHooks`` (``build`` returns None) and
runs its send path as before: the compiled per-record step is kept.
"""

from __future__ import annotations

from typing import Any

from kcodec.client.config import ProducerConfig
from kcodec.client.errors import SerializationError
from kcodec.client.hooks import (
    KEY,
    VALUE,
    AckMetadata,
    Codec,
    Interceptors,
    ProducerRecord,
    SerializationContext,
)
from kcodec.client.producer.batch import RecordFuture, as_bytes
from kcodec.client.producer.partitioner import (
    UserPartitioner,
    make_partitioner,
    partition_for_key,
)

__all__ = ["ProducerHooks"]

_METHODS = ("on_send", "on_acknowledgement")


class ProducerHooks:
    """One producer's hooks (see the module docstring)."""

    __slots__ = ("partitioner", "key", "value", "interceptors")

    def __init__(self, partitioner: UserPartitioner | None, key: Codec | None,
                 value: Codec | None, interceptors: Interceptors | None) -> None:
        self.partitioner, self.key, self.value = partitioner, key, value
        self.interceptors = interceptors

    @classmethod
    def build(cls, cfg: ProducerConfig) -> ProducerHooks | None:
        """The hooks ``cfg`` sets, resolved and checked; None when it sets none."""
        part = make_partitioner(cfg.partitioner)
        key = Codec.of(cfg.key_serializer, "key_serializer")
        value = Codec.of(cfg.value_serializer, "value_serializer")
        its = Interceptors(cfg.interceptors, "interceptors", _METHODS) \
            if cfg.interceptors not in (None, [], ()) else None
        if part is None and key is None and value is None and its is None:
            return None
        return cls(part, key, value, its)

    def intercept(self, rec: ProducerRecord) -> ProducerRecord:
        its = self.interceptors
        if its is None:
            return rec
        return its.chain("on_send", rec, lambda r: isinstance(r, ProducerRecord))

    def serialize(self, rec: ProducerRecord) -> tuple[bytes | None, bytes | None, Any]:
        """(key bytes, value bytes, headers) of ``rec``; a serializer may add headers."""
        headers = rec.headers
        # a serializer that takes the context may add headers: give it a list of its own
        if (self.key is not None and self.key.with_ctx) or \
                (self.value is not None and self.value.with_ctx):
            headers = list(headers) if headers is not None else []
        key = self._one(self.key, rec.key, rec.topic, KEY, headers)
        value = self._one(self.value, rec.value, rec.topic, VALUE, headers)
        return key, value, headers

    @staticmethod
    def _one(codec: Codec | None, data: Any, topic: str, field: str,
             headers: Any) -> bytes | None:
        if codec is None:
            return data if data is None or type(data) is bytes else as_bytes(data, field)
        try:
            if data is None:
                return None
            out = codec.fn(data, SerializationContext(topic, field, headers)) \
                if codec.with_ctx else codec.fn(data)
        except Exception as exc:
            raise SerializationError(codec.setting, topic,
                                     f"{type(exc).__name__}: {exc}") from exc
        if out is None or type(out) is bytes:
            return out
        try:
            return as_bytes(out, field)
        except TypeError:
            raise SerializationError(codec.setting, topic, f"it returned "
                                     f"{type(out).__name__}, not bytes, str or None") from None

    def choose(self, topic: str, key: bytes | None, count: int) -> int:
        """The partition of a record sent without one; -1: the sticky partitioner's."""
        part = self.partitioner
        if part is None or part.sticky(key):
            return partition_for_key(key, count) if key is not None else -1
        return part.choose(topic, key, count)

    def failed(self, topic: str, partition: int | None, exc: BaseException) -> None:
        """A send that failed before its record was queued (Java's onSendError)."""
        if self.interceptors is not None:
            p = partition if partition is not None else -1
            self.interceptors.notify("on_acknowledgement", AckMetadata(topic, p, -1, -1), exc)

    def watch(self, fut: RecordFuture, topic: str) -> None:
        """``on_acknowledgement`` when ``fut`` completes."""
        its = self.interceptors
        if its is None:
            return

        def done(error: BaseException | None, result: Any) -> None:
            if error is None:
                meta = AckMetadata(topic, result.partition, result.offset, result.timestamp)
            else:
                meta = AckMetadata(topic, fut.batch.partition, -1, -1)
            its.notify("on_acknowledgement", meta, error)
        fut.add_callback(done)

    def close(self) -> None:
        if self.interceptors is not None:
            self.interceptors.close()
