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
when chosen) with ``from_settings``, its help line and a dataclass of its own settings
(flags, ``KCODEC_RUN_*`` variables and config-file keys, as the runtime's); ``--storage``
accepts every registered name (plus ``direct``), and ``kcodec run --help`` groups each
store's settings under its name. Another package's store registers through an entry point
of the group ``kcodec.run.stores`` (``NAME = module:STOREKIND``), loaded the first time the
registry is read (``stores()``). The two built in:

    file.py    segment files under --state-dir (fsync, fsync-interval-ms)
    file_state.py  its ack logs and lease tables beside the segments
    redis.py   a Redis server (redis-url, redis-prefix, redis-durability)

The state directory's locks (one runtime per directory) are the runtime's, whatever the
store: ``kcodec.runtime.statedir``.
"""

from __future__ import annotations

import dataclasses
import importlib
import logging
from dataclasses import dataclass
from typing import Any, Protocol

from kcodec.runtime.message import Message

__all__ = ["Store", "Claim", "StoreKind", "STORES", "ENTRY_POINTS", "BROKEN", "register_store",
           "stores", "store_names", "store_settings_fields", "setting_owners", "open_store",
           "append_all"]

log = logging.getLogger(__name__)


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
    def from_settings(cls, settings: Any, owner: str, quick: bool = False, *,
                      config: Any = None) -> Store:
        """The store for the process called ``owner`` (its writer name), configured by
        ``config`` (its own settings: an instance of the dataclass it registered, None if
        none) and the runtime's ``settings``; ``quick``: for an operator's question, give
        up on an unreachable server within seconds."""

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
    imported when chosen), a help line, and its own settings: a dataclass (or its
    ``module:Class``) whose fields are settings of ``kcodec run`` like the runtime's (a
    field ``s3_bucket`` is ``--s3-bucket``, ``s3-bucket =`` in the config file and
    ``KCODEC_RUN_S3_BUCKET``), each with its default and a ``metadata`` ``help`` line, and
    optionally ``choices`` and ``secret`` (``True``, or ``"url"``: only the password of a
    URL is)."""

    name: str
    opener: str
    help: str
    settings: type | str | None = None

    def load(self) -> Any:
        return _import(self.opener)

    def settings_class(self) -> type | None:
        """The dataclass of this store's settings (None: it has none)."""
        cls = _import(self.settings) if isinstance(self.settings, str) else self.settings
        if cls is not None and not (isinstance(cls, type) and dataclasses.is_dataclass(cls)):
            raise TypeError(f"the settings of the store {self.name!r} must be a dataclass, "
                            f"got {cls!r}")
        return cls


def _import(ref: str) -> Any:
    mod, _, name = ref.partition(":")
    return getattr(importlib.import_module(mod), name)


STORES: dict[str, StoreKind] = {}   # as registered; stores() adds the entry points' first
ENTRY_POINTS = "kcodec.run.stores"
# an entry point that could not be loaded -> why (its store is then not a choice)
BROKEN: dict[str, str] = {}
_discovered = False


def register_store(name: str, opener: str, help: str,
                   settings: type | str | None = None) -> None:
    """Make ``--storage NAME`` open ``opener`` (``module:Class`` with ``from_settings``),
    configured by ``settings`` (a dataclass, or its ``module:Class``: see ``StoreKind``)."""
    _register(StoreKind(name, opener, help, settings))


def _register(kind: StoreKind) -> None:
    if not kind.name.isidentifier() or kind.name == "direct":
        raise ValueError(f"a store's name is an identifier other than 'direct', "
                         f"got {kind.name!r}")
    if not (kind.settings is None or isinstance(kind.settings, (str, type))):
        raise TypeError(f"the settings of the store {kind.name!r} are a dataclass or its "
                        f"'module:Class', got {kind.settings!r}")
    STORES[kind.name] = kind


def stores() -> dict[str, StoreKind]:
    """Every registered store, the ``kcodec.run.stores`` entry points' included (loaded
    the first time this is asked)."""
    global _discovered
    if not _discovered:
        _discovered = True
        _discover()
    return STORES


def _discover() -> None:
    """Register the store of each ``kcodec.run.stores`` entry point: ``NAME =
    module:OBJECT``, a ``StoreKind`` called NAME. One that fails is logged and left out
    (``BROKEN``), naming the entry point; the other stores stay."""
    from importlib.metadata import entry_points

    seen: set[tuple[str, str]] = set()
    for ep in entry_points(group=ENTRY_POINTS):
        if (ep.name, ep.value) in seen:     # one distribution found twice on sys.path
            continue
        seen.add((ep.name, ep.value))
        dist = getattr(ep, "dist", None)
        where = (f"the store plug-in {ep.name} = {ep.value} (entry point group "
                 f"{ENTRY_POINTS}{f', distribution {dist.name}' if dist is not None else ''})")
        try:
            if ep.name in STORES:
                raise ValueError(f"a store called {ep.name!r} is already registered")
            obj = ep.load()
            if not isinstance(obj, StoreKind):
                raise TypeError(f"it names a {type(obj).__name__}, not a "
                                "kcodec.runtime.storage.StoreKind")
            if obj.name != ep.name:
                raise ValueError(f"it names the store {obj.name!r}, not {ep.name!r}")
            _register(obj)
            try:
                setting_owners()    # its settings: a dataclass, names nobody else has
            except BaseException:
                del STORES[ep.name]
                raise
        except Exception as exc:
            BROKEN[ep.name] = f"{where} cannot be loaded: {type(exc).__name__}: {exc}"
            log.warning("%s", BROKEN[ep.name])


def store_names() -> tuple[str, ...]:
    """Every ``--storage`` choice: direct, then the registered stores."""
    return ("direct", *stores())


def store_settings_fields(kind: StoreKind) -> list[dataclasses.Field]:
    """The fields of ``kind``'s settings dataclass (none if it has none), in order."""
    cls = kind.settings_class()
    return [] if cls is None else list(dataclasses.fields(cls))


def setting_owners() -> dict[str, StoreKind]:
    """Each store setting's name -> the store that declares it; a name that two stores or
    a store and the runtime declare is a ``ValueError`` naming both."""
    from kcodec.runtime.config import Settings

    runtime = set(Settings.runtime_names())
    out: dict[str, StoreKind] = {}
    for kind in stores().values():
        for f in store_settings_fields(kind):
            if f.name in runtime:
                raise ValueError(f"the store {kind.name!r} declares the setting {f.name!r}, "
                                 "which is the runtime's")
            if f.name in out:
                raise ValueError(f"the stores {out[f.name].name!r} and {kind.name!r} both "
                                 f"declare the setting {f.name!r}")
            out[f.name] = kind
    return out


register_store("file", "kcodec.runtime.storage.file:FileStore",
               "segment files under --state-dir: one machine, no server",
               "kcodec.runtime.storage.file:FileSettings")
register_store("redis", "kcodec.runtime.storage.redis:RedisStore",
               "a Redis server: pullers and sinkers of several machines share one queue "
               "(pip install 'kcodec[redis]')",
               "kcodec.runtime.storage.redis:RedisSettings")


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
    name = "file" if settings.storage == "direct" else settings.storage
    kind = stores().get(name)
    if kind is None:
        raise ValueError(f"no store called {settings.storage!r}; the stores: "
                         f"{', '.join(store_names())}")
    store: Store = kind.load().from_settings(settings, owner, quick=quick,
                                             config=settings.store_settings(name))
    return store
