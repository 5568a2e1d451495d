"""Where pulled records wait for a sinker: the store interface and its three kinds.

Every store keeps three queues -- pending (waiting, some delayed until a retry is due),
processing (claimed by a sinker under a lease) and failed (out of retries) -- and moves a
message between them only after the step before is durable:

* a puller ``append``\\s what it fetched; Kafka offsets are committed only after that;
* a sinker ``claim``\\s a batch under a lease, runs the handler, then ``retry``\\s or
  ``fail``\\s what failed (a new durable copy) and only then ``ack``\\s the batch; an ack
  is per message and final: an acknowledged message is never handed out again;
* a lease that is not renewed expires and its unacknowledged messages go back to pending.

Stores are plug-ins: ``register_store`` names a class (by ``module:Class``, imported only
when chosen) with ``from_settings``, its help line and the settings that configure it;
``--storage`` accepts every registered name (plus ``direct``), and ``kcodec run --help``
groups each store's settings under its name. The two built in:

    file.py    segment files under --state-dir (fsync, fsync-interval-ms)
    redis.py   a Redis server (redis-url, redis-prefix, redis-durability)

The state directory's locks (one runtime per directory) are the runtime's, whatever the
store: ``kcodec.runtime.statedir``.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, Protocol

from kcodec.runtime.message import Message

__all__ = ["Store", "Claim", "StoreKind", "STORES", "register_store", "store_names",
           "open_store", "append_all"]


class Claim:
    """Messages one sinker holds under one lease; ``refs`` name them for ``ack``."""

    __slots__ = ("lease", "refs", "messages")

    def __init__(self, lease: Any, refs: list, messages: list[Message]) -> None:
        self.lease = lease
        self.refs = refs
        self.messages = messages


class Store(Protocol):
    """What the runtime asks of a store (its processes each open one, by ``from_settings``)."""

    kind: str

    @classmethod
    def from_settings(cls, settings: Any, owner: str, quick: bool = False) -> Store:
        """The store for the process called ``owner`` (its writer name); ``quick``: for an
        operator's question, give up on an unreachable server within seconds."""

    def sync_due(self) -> bool:
        """Whether an interval sync is due now (``needs_sync`` and its time has come)."""

    def prepare(self, settings: Any) -> None:
        """At the master's start, before any process: check the store can keep what it is
        given (a ``RuntimeError`` saying why not) and mark it as this runtime's."""

    def append(self, messages: list[Message]) -> None:
        """Add ``messages`` to pending; durable (by the store's policy) on return."""

    # optional: def append_batches(self, batches: list[list[Message]]) -> None -- each batch
    # as ``append`` would add it (a unit a sinker claims), all durable together on return:
    # one fsync or one round trip for several. Pullers use it when a store has it
    # (``append_all``), else ``append`` each.

    def sync(self) -> None:
        """Make everything appended so far durable (the interval fsync policy)."""

    def needs_sync(self) -> bool:
        """Whether appended messages wait for ``sync`` before they count as durable."""

    def claim(self, limit: int) -> Claim | None:
        """Up to about ``limit`` pending messages, leased to this process; None: none due."""

    def renew(self) -> None:
        """Extend the leases this process holds."""

    def ack(self, claim: Claim, refs: list) -> None:
        """Finish ``refs`` of ``claim`` for good (done, retried as a copy, or failed)."""

    def release(self, claim: Claim) -> None:
        """Give up the lease: unacknowledged messages of ``claim`` are pending again."""

    def retry(self, messages: list[Message]) -> None:
        """Pending again once each ``not_before`` is due (a durable copy)."""

    def fail(self, messages: list[Message]) -> None:
        """Into the failed queue (a durable copy)."""

    def backlog(self) -> dict[str, int]:
        """Counts: pending, delayed (retries not yet due), processing, failed."""

    def failed_messages(self, limit: int) -> list[Message]:
        """A look at the failed queue, oldest first."""

    def requeue(self) -> int:
        """Move every failed message back to pending (attempts reset); how many."""

    def clear(self) -> int:
        """Drop every failed message; how many."""

    def close(self) -> None: ...


@dataclass(frozen=True)
class StoreKind:
    """A registered store: its ``--storage`` name, the class that opens it (``module:Class``,
    imported when chosen), a help line, and the settings (``Settings`` field names) that
    configure it."""

    name: str
    opener: str
    help: str
    settings: tuple[str, ...] = ()

    def load(self) -> Any:
        mod, _, cls = self.opener.partition(":")
        return getattr(importlib.import_module(mod), cls)


STORES: dict[str, StoreKind] = {}


def register_store(name: str, opener: str, help: str, settings: tuple[str, ...] = ()) -> None:
    """Make ``--storage NAME`` open ``opener`` (``module:Class`` with ``from_settings``)."""
    if not name.isidentifier() or name == "direct":
        raise ValueError(f"a store's name is an identifier other than 'direct', got {name!r}")
    STORES[name] = StoreKind(name, opener, help, tuple(settings))


def store_names() -> tuple[str, ...]:
    """Every ``--storage`` choice: direct, then the registered stores."""
    return ("direct", *STORES)


register_store("file", "kcodec.runtime.storage.file:FileStore",
               "segment files under --state-dir: one machine, no server",
               ("fsync", "fsync_interval_ms"))
register_store("redis", "kcodec.runtime.storage.redis:RedisStore",
               "a Redis server: pullers and sinkers of several machines share one queue "
               "(pip install 'kcodec[redis]')",
               ("redis_url", "redis_prefix", "redis_durability"))


def append_all(store: Any, batches: list[list[Message]]) -> None:
    """``batches`` into ``store``: by its ``append_batches`` when it has one, else one
    ``append`` a batch (a store registered before that method existed)."""
    many = getattr(store, "append_batches", None)
    if many is not None:
        many(batches)
    else:
        for b in batches:
            store.append(b)


def open_store(settings: Any, owner: str, quick: bool = False) -> Store:
    """The store ``settings`` name (``storage``: file or redis; direct keeps its failed
    queue in a file store), for the process called ``owner`` (its writer name). ``quick``:
    for questions from an operator, a server away is an error within seconds (the
    runtime's processes wait for it minutes)."""
    kind = STORES.get("file" if settings.storage == "direct" else settings.storage)
    if kind is None:
        raise ValueError(f"no store called {settings.storage!r}; the stores: "
                         f"{', '.join(store_names())}")
    store: Store = kind.load().from_settings(settings, owner, quick=quick)
    return store
