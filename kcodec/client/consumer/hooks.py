"""The consumer's user-supplied hooks, run where records leave ``poll`` (Java's order):

    deserializers  ``key_deserializer`` / ``value_deserializer``: ``fn(data)`` or
                   ``fn(data, ctx)`` (kcodec.client.hooks.SerializationContext); the
                   record's ``key`` / ``value`` become what they return
    interceptors   ``on_consume(records) -> records`` on the poll's
                   {TopicPartition: [record, ...]}; ``on_commit(offsets)`` after each
                   successful commit ({TopicPartition: offset}: automatic, on rebalance
                   and on close too)

A deserializer that raises stops its partition at that record: the records before it
(and the other partitions') are returned, the partition's position is set back to it, and
the next ``poll`` raises ``RecordDeserializationError`` naming topic, partition and offset
(a poll with nothing else to return raises at once). The record is not skipped: every
poll fails on it again until the application seeks past it.

A consumer with none of them set has no ``ConsumerHooks`` (``build`` returns None): ``poll``
hands out the fetcher's records as before.
"""

from __future__ import annotations

from collections.abc import Callable

from kcodec.client.config import ConsumerConfig
from kcodec.client.errors import RecordDeserializationError
from kcodec.client.hooks import KEY, VALUE, Codec, Interceptors, SerializationContext
from kcodec.client.structs import TopicPartition

__all__ = ["ConsumerHooks"]

_METHODS = ("on_consume", "on_commit")


class ConsumerHooks:
    """One consumer's hooks (see the module docstring)."""

    __slots__ = ("key", "value", "interceptors")

    def __init__(self, key: Codec | None, value: Codec | None,
                 interceptors: Interceptors | None) -> None:
        self.key, self.value, self.interceptors = key, value, interceptors

    @classmethod
    def build(cls, cfg: ConsumerConfig) -> ConsumerHooks | None:
        key = Codec.of(cfg.key_deserializer, "key_deserializer")
        value = Codec.of(cfg.value_deserializer, "value_deserializer")
        its = Interceptors(cfg.interceptors, "interceptors", _METHODS) \
            if cfg.interceptors not in (None, [], ()) else None
        if key is None and value is None and its is None:
            return None
        return cls(key, value, its)

    def deliver(self, polled: dict[TopicPartition, list],
                rewind: Callable[[TopicPartition, int], None]
                ) -> tuple[dict[TopicPartition, list], RecordDeserializationError | None]:
        """The records ``poll`` returns, and the deserialization error to raise at the
        next poll (``rewind(tp, offset)`` has set that partition back to the record)."""
        error = None
        if self.key is not None or self.value is not None:
            polled, error = self._deserialize(polled, rewind)
        its = self.interceptors
        if its is not None and polled:
            polled = its.chain("on_consume", polled, lambda r: isinstance(r, dict))
        return polled, error

    def _deserialize(self, polled: dict[TopicPartition, list],
                     rewind: Callable[[TopicPartition, int], None]
                     ) -> tuple[dict[TopicPartition, list], RecordDeserializationError | None]:
        kd, vd = self.key, self.value
        error = None
        codec: Codec | None = None
        out: dict[TopicPartition, list] = {}
        for tp, recs in polled.items():
            topic = tp[0]
            for i, r in enumerate(recs):
                try:
                    if kd is not None and r.key is not None:
                        codec = kd
                        key = kd(r.key, SerializationContext(topic, KEY, r.headers))
                    else:
                        key = r.key
                    if vd is not None and r.value is not None:
                        codec = vd
                        r.value = vd(r.value, SerializationContext(topic, VALUE, r.headers))
                    r.key = key
                except Exception as exc:
                    if error is None and codec is not None:
                        error = RecordDeserializationError(
                            codec.setting, topic, tp[1], r.offset,
                            f"{type(exc).__name__}: {exc}")
                        error.__cause__ = exc
                    # this record and the partition's later ones come again from here
                    rewind(tp, r.offset)
                    recs = recs[:i]
                    break
            if recs:
                out[tp] = recs
        return out, error

    def committed(self, offsets: dict[TopicPartition, int]) -> None:
        if self.interceptors is not None and offsets:
            self.interceptors.notify("on_commit", dict(offsets))

    def close(self) -> None:
        if self.interceptors is not None:
            self.interceptors.close()
