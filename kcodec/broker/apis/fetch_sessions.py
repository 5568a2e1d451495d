"""The fetch session cache of a node (KIP-227), as Kafka's ``FetchSessionCache``.

A session remembers, per partition, what its client last asked for and was last told, so
that the next request names only what changed. Each session belongs to the principal that
opened it: another principal naming its id is answered as if it did not exist
(FETCH_SESSION_ID_NOT_FOUND), so sessions cannot be read, advanced or closed by others. Ids
are random 31-bit numbers (never 0), not a count a client could guess the next of.

The cache holds ``max_sessions`` (Kafka's ``max.incremental.fetch.session.cache.slots``,
1000). When it is full a new session takes a slot only by evicting, as Kafka does:

1. a stale session: one not used for ``eviction_ms`` (Kafka's
   ``min.incremental.fetch.session.eviction.ms``, 120 s), the least recently used first;
2. else the session with the fewest partitions, if the new one has more (ties: the least
   recently used goes), so that a flood of empty sessions evicts nobody;

else no session is made (the client is answered without one, session id 0, and fetches in
full). On top of Kafka's rules, one principal holds at most ``max_per_principal`` sessions:
past it its own least recently used session is evicted, never another principal's, so one
user cannot push out everybody else's sessions by opening many.
"""

from __future__ import annotations

import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field

__all__ = ["FetchSessions", "FetchSession", "CachedPartition", "MAX_SESSIONS",
           "MAX_SESSIONS_PER_PRINCIPAL", "EVICTION_MS"]

MAX_SESSIONS = 1000                 # max.incremental.fetch.session.cache.slots
MAX_SESSIONS_PER_PRINCIPAL = 200    # kcodec's bound per principal (Kafka has none)
EVICTION_MS = 120_000               # min.incremental.fetch.session.eviction.ms


@dataclass
class CachedPartition:
    """What a session remembers of one partition."""

    fetch_offset: int
    max_bytes: int
    high_watermark: int = -2        # as last sent (-2: never)
    log_start_offset: int = -2


@dataclass
class FetchSession:
    """One client's incremental fetch session."""

    id: int
    principal: str
    epoch: int = 1                  # the epoch the next request must carry
    last_used: float = 0.0          # monotonic seconds
    parts: OrderedDict[tuple[str, int], CachedPartition] = field(default_factory=OrderedDict)

    @property
    def size(self) -> int:
        return len(self.parts)


class FetchSessions:
    """A node's fetch sessions (see the module's docstring); thread-safe. ``lock`` guards
    the sessions' contents for callers that update them."""

    def __init__(self, max_sessions: int = MAX_SESSIONS,
                 max_per_principal: int = MAX_SESSIONS_PER_PRINCIPAL,
                 eviction_ms: int = EVICTION_MS,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.max_sessions = max_sessions
        self.max_per_principal = max_per_principal
        self.eviction_ms = eviction_ms
        self.clock = clock
        self.lock = threading.RLock()
        # least recently used first
        self.sessions: OrderedDict[int, FetchSession] = OrderedDict()
        self.evictions = 0

    def __len__(self) -> int:
        return len(self.sessions)

    def _new_id(self) -> int:
        while True:
            sid = secrets.randbelow(0x7FFFFFFF) + 1
            if sid not in self.sessions:
                return sid

    def _evict(self, sid: int) -> None:
        del self.sessions[sid]
        self.evictions += 1

    def _room_for(self, principal: str, size: int, now: float) -> bool:
        """Make room for a new session of ``size`` partitions of ``principal``: False if
        Kafka's rules keep every session."""
        own = [s for s in self.sessions.values() if s.principal == principal]
        if len(own) >= self.max_per_principal:
            self._evict(own[0].id)               # its own least recently used
        if len(self.sessions) < self.max_sessions:
            return True
        oldest = next(iter(self.sessions.values()))
        if (now - oldest.last_used) * 1000 >= self.eviction_ms:
            self._evict(oldest.id)
            return True
        smallest = min(self.sessions.values(), key=lambda s: s.size)   # LRU among ties
        if size > smallest.size:
            self._evict(smallest.id)
            return True
        return False

    def new(self, principal: str, parts: list[tuple[tuple[str, int], CachedPartition]]
            ) -> FetchSession | None:
        """A new session of ``principal`` holding ``parts``, or None if the cache keeps
        every session it has (the fetch is then served without a session)."""
        with self.lock:
            now = self.clock()
            if not self._room_for(principal, len(parts), now):
                return None
            s = FetchSession(self._new_id(), principal, last_used=now,
                             parts=OrderedDict(parts))
            self.sessions[s.id] = s
            return s

    def get(self, sid: int, principal: str) -> FetchSession | None:
        """Session ``sid`` if ``principal`` owns it (None otherwise: to another principal
        a session does not exist)."""
        with self.lock:
            s = self.sessions.get(sid)
            if s is None or s.principal != principal:
                return None
            s.last_used = self.clock()
            self.sessions.move_to_end(sid)
            return s

    def close(self, sid: int, principal: str | None = None) -> None:
        """Forget session ``sid`` (only ``principal``'s, when given)."""
        with self.lock:
            s = self.sessions.get(sid)
            if s is not None and (principal is None or s.principal == principal):
                del self.sessions[sid]
