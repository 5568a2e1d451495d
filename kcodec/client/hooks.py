"""The clients' user-supplied hooks: how they are named, called and guarded.

    resolve(value, setting)   a ``"module:attr"`` string -> that object (so the CLI and
                              TOML files can name a hook); anything else as given
    SerializationContext      (topic, field, headers): what a (de)serializer may look at,
                              as confluent-kafka's context and Java's (topic, headers) give
    Codec                     a serializer or deserializer, ``fn(data)`` or ``fn(data, ctx)``
    ProducerRecord            what a producer interceptor's ``on_send`` gets and returns
    AckMetadata               what ``on_acknowledgement`` gets: topic, partition, offset,
                              timestamp (-1 where not known)
    Interceptors              a chain of interceptors; an exception in one is logged on
                              ``kcodec.client`` and skipped, as Java does

The producer's (kcodec.client.producer.hooks) and the consumer's
(kcodec.client.consumer.hooks) hooks are built on these.
"""

from __future__ import annotations

import importlib
import inspect
import logging
from collections.abc import Callable
from typing import Any, NamedTuple

__all__ = ["resolve", "SerializationContext", "Codec", "ProducerRecord", "AckMetadata",
           "Interceptors", "KEY", "VALUE"]

log = logging.getLogger(__name__)

KEY = "key"
VALUE = "value"


def resolve(value: Any, setting: str) -> Any:
    """``"package.module:name"`` (dots after the colon reach attributes) -> that object;
    any other value as it is. A name that does not import is a ``ValueError`` naming the
    setting."""
    if not isinstance(value, str) or ":" not in value:
        return value
    mod_name, _, attr = value.partition(":")
    if not mod_name or not attr:
        raise ValueError(f"{setting}: {value!r} is not module:attribute")
    try:
        obj: Any = importlib.import_module(mod_name.strip())
    except ImportError as exc:
        raise ValueError(f"{setting}: cannot import {mod_name!r} ({exc}); is it on the "
                         "Python path?") from None
    for part in attr.strip().split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise ValueError(f"{setting}: {mod_name!r} has no {attr!r}") from None
    return obj


class SerializationContext(NamedTuple):
    """What a serializer or deserializer may look at besides the data: the ``topic``, the
    ``field`` (``"key"`` or ``"value"``) and the record's ``headers`` (a list of (str,
    bytes) pairs; a producer's serializer may append to it)."""

    topic: str
    field: str
    headers: list | None = None


def _takes_context(fn: Callable[..., Any]) -> bool:
    """Whether ``fn`` wants ``(data, ctx)``: two positional parameters without defaults
    (confluent-kafka's shape), or ``*args``; else it is called with the data alone
    (kafka-python's shape, and ``json.loads``, ``str.encode``...)."""
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):     # a builtin without a signature: data alone
        return False
    required = 0
    for p in params:
        if p.kind is p.VAR_POSITIONAL:
            return True
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty:
            required += 1
    return required >= 2


class Codec:
    """One serializer or deserializer, wrapped once: ``codec(data, ctx)`` calls the user's
    function as it wants to be called. None passes through without a call (a tombstone
    stays a tombstone, a keyless record keyless), as Java's own serializers do."""

    __slots__ = ("fn", "setting", "with_ctx")

    def __init__(self, fn: Any, setting: str) -> None:
        fn = resolve(fn, setting)
        if not callable(fn):
            raise ValueError(f"{setting} must be a callable (or 'module:attr' naming one), "
                             f"not {type(fn).__name__}")
        self.fn = fn
        self.setting = setting
        self.with_ctx = _takes_context(fn)

    def __call__(self, data: Any, ctx: SerializationContext) -> Any:
        if data is None:
            return None
        return self.fn(data, ctx) if self.with_ctx else self.fn(data)

    @classmethod
    def of(cls, fn: Any, setting: str) -> Codec | None:
        return None if fn is None else cls(fn, setting)


class ProducerRecord:
    """A record as ``send`` was given it (before serialization), for ``on_send``: an
    interceptor may change its fields or return another ProducerRecord."""

    __slots__ = ("topic", "value", "key", "partition", "headers", "timestamp")

    def __init__(self, topic: str, value: Any = None, key: Any = None,
                 partition: int | None = None, headers: Any = None,
                 timestamp: int | None = None) -> None:
        self.topic, self.value, self.key = topic, value, key
        self.partition, self.headers, self.timestamp = partition, headers, timestamp

    def __repr__(self) -> str:
        return (f"ProducerRecord(topic={self.topic!r}, partition={self.partition}, "
                f"key={self.key!r}, value={self.value!r}, headers={self.headers!r})")


class AckMetadata(NamedTuple):
    """Where a record went (``on_acknowledgement``); -1 for what is not known (a record
    that failed before a partition was chosen, or ``acks=0``)."""

    topic: str
    partition: int
    offset: int
    timestamp: int


def _name(obj: Any) -> str:
    return getattr(obj, "__qualname__", None) or type(obj).__qualname__


class Interceptors:
    """A chain of interceptor objects, each with some of the methods the role calls; a
    method an object lacks is skipped, and so is one that raises (logged with its
    traceback on ``kcodec.client``, as Java's interceptors are)."""

    __slots__ = ("items",)

    def __init__(self, items: Any, setting: str, methods: tuple[str, ...]) -> None:
        if not isinstance(items, (list, tuple)):
            items = [items]
        resolved = []
        for it in items:
            it = resolve(it, setting)
            if isinstance(it, type):      # a class, as Java names them: one instance
                it = it()
            if not any(callable(getattr(it, m, None)) for m in methods):
                raise ValueError(f"{setting}: {_name(it)} has none of the methods "
                                 f"{', '.join(methods)}")
            resolved.append(it)
        self.items = resolved

    def chain(self, method: str, value: Any, check: Callable[[Any], bool]) -> Any:
        """Pass ``value`` through each interceptor's ``method``; a result ``check`` refuses,
        or an exception, leaves the value as the previous interceptor gave it."""
        for it in self.items:
            fn = getattr(it, method, None)
            if fn is None:
                continue
            try:
                out = fn(value)
            except Exception:
                log.warning("interceptor %s.%s raised; skipped", _name(it), method,
                            exc_info=True)
                continue
            if not check(out):
                log.warning("interceptor %s.%s returned %s, not what it was given; skipped",
                            _name(it), method, type(out).__name__)
                continue
            value = out
        return value

    def notify(self, method: str, *args: Any) -> None:
        """Call each interceptor's ``method`` with ``args``; exceptions are logged."""
        for it in self.items:
            fn = getattr(it, method, None)
            if fn is None:
                continue
            try:
                fn(*args)
            except Exception:
                log.warning("interceptor %s.%s raised; skipped", _name(it), method,
                            exc_info=True)

    def close(self) -> None:
        self.notify("close")
