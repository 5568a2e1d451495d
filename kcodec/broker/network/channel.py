"""The request channel: the queue between the processors and the handler pool.

A processor books the bytes of a frame as they arrive (``book``), never the size the client
declared: a client that announces 100 MiB and sends nothing books nothing, so it cannot make
other connections wait. With the frame complete it puts the :class:`Request` (the raw frame,
its parsed header fields and the connection it came from) and awaits ``request.future``; a
handler thread takes it, runs the API and sets the future to the response bytes,
:data:`NO_RESPONSE` (acks=0 produce) or :data:`CLOSE` (drop the connection); the processor
then gives the bytes back (``done``).

So the channel counts the bytes of requests being read or read and not yet answered, and a
processor stops reading (the kernel's socket buffers then hold the rest: TCP backpressure)
while complete requests waiting for an answer fill the budget (Kafka's
``queued.max.request.bytes``). While no complete request waits, bytes are always granted:
nothing else would ever free the budget, and a frame stalled half-way (its sender is closed at
the processor's read timeout) must not hold up the others.

Each request has an owner, the key of who sent it (the processor's
:attr:`ConnectionState.owner`: the principal once one is known, else the client's address).
One owner may hold at most ``max_queued_bytes_per_owner`` of the budget (by default the
node's half: ``queued.max.request.bytes.per.user``) while one of its own complete requests
waits for an answer; past it, only its reads wait, and the other owners read on into the
rest. As for the whole budget, an owner none of whose requests waits is always granted
(waiting would free none of its bytes).

Large requests wait in a lane of their own, served by the pool's large-request threads:
however many a client sends, the other connections' requests never queue behind them, and
only that many are handled at once. The lane takes its owners in turn (round-robin, each
owner's requests in the order they came): an owner's backlog of large requests delays
another owner's by at most one of its own per thread. Large is a frame of
``large_request_bytes`` (16 KiB) or more, a Produce of ``large_produce_bytes`` (1 MiB) or
more: a request's handling costs about its element count, at most its bytes, except
Produce, whose bytes are mostly one record blob (its decompression is bounded by the log's
validator).
"""

from __future__ import annotations

import concurrent.futures
import queue
import threading
import time
from collections import OrderedDict, deque
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

__all__ = ["Request", "RequestChannel", "CLOSE", "NO_RESPONSE", "LARGE_REQUEST_BYTES",
           "LARGE_PRODUCE_BYTES"]

LARGE_REQUEST_BYTES = 16 * 1024     # a frame this big or bigger goes to the large queue
LARGE_PRODUCE_BYTES = 1024 * 1024   # ... a Produce this big or bigger

CLOSE = "close"             # the handler wants the connection dropped
NO_RESPONSE = "no-response"  # nothing to send back (acks=0 produce)
QUEUE = "queue"             # not handled inline after all: to the handler threads

#: the APIs a processor handles itself when small (Produce, Fetch: the data path, which
#: waits for nothing but the partition's lock and returns a future for what it waits on)
INLINE_APIS = frozenset({0, 1})


B = TypeVar("B")


@dataclass
class Request(Generic[B]):
    """One request frame as read from a connection; ``B`` is the class of its body, which
    dispatch decodes before the handler runs (handlers are typed ``Request[XRequest]``)."""

    node_id: int
    connection: Any                # the processor's per-connection state (ConnectionState)
    api_key: int
    api_version: int
    correlation_id: int
    frame: bytes                   # the frame without its size prefix (header + body)
    future: concurrent.futures.Future = field(default_factory=concurrent.futures.Future)
    header: Any = None             # set by dispatch once decoded
    body: B = None                 # type: ignore[assignment]  # (the same)
    arrived: float = field(default_factory=time.monotonic)   # for RequestMetrics TotalTimeMs
    handler_s: float = 0.0         # time its handler ran (not waiting): request quotas
    quota_throttle_ms: int = 0     # a throttle its handler found (controller mutation quota)
    owner: str = ""                # who sent it (its bytes' share, its turn in the large lane)

    @property
    def size(self) -> int:
        return len(self.frame)


class RequestChannel:
    """A FIFO of small requests and a round-robin lane of large ones, with a byte budget for
    the node and a share of it per owner."""

    def __init__(self, max_queued_bytes: int = 100 * 1024 * 1024,
                 large_request_bytes: int = LARGE_REQUEST_BYTES,
                 large_produce_bytes: int = LARGE_PRODUCE_BYTES,
                 max_queued_bytes_per_owner: int | None = None) -> None:
        self.max_queued_bytes = max_queued_bytes
        #: the most of the budget one owner holds while one of its requests waits (None:
        #: the whole budget)
        self.max_queued_bytes_per_owner = (max_queued_bytes if max_queued_bytes_per_owner
                                           is None else max_queued_bytes_per_owner)
        self.large_request_bytes = large_request_bytes
        self.large_produce_bytes = large_produce_bytes
        self._queue: queue.Queue[Request | None] = queue.Queue()
        self._lock = threading.Lock()
        # the large lane: each owner's requests in order, the owners in their turn
        self._large: OrderedDict[str, deque[Request]] = OrderedDict()
        self._large_ready = threading.Condition(self._lock)
        self._large_stops = 0               # shutdown: so many large threads are to end
        self.queued_bytes = 0          # booked: frames being read, queued or being handled
        self.pending = 0               # complete requests queued or being handled
        self.booked_by: dict[str, int] = {}    # owner -> its part of queued_bytes
        self.pending_by: dict[str, int] = {}   # owner -> its part of pending

    def book(self, size: int, owner: str = "") -> bool:
        """Book ``size`` bytes that arrived for a frame of ``owner``, if the budget allows:
        the node's budget has room, or no complete request is waiting; and the owner's share
        has room, or none of the owner's requests is waiting (waiting would free nothing)."""
        with self._lock:
            if self.pending and self.queued_bytes + size > self.max_queued_bytes:
                return False
            mine = self.booked_by.get(owner, 0)
            if (self.pending_by.get(owner) and
                    mine + size > self.max_queued_bytes_per_owner):
                return False
            self.queued_bytes += size
            self.booked_by[owner] = mine + size
            return True

    def _unbook(self, size: int, owner: str) -> None:
        self.queued_bytes -= size
        left = self.booked_by.get(owner, 0) - size
        if left > 0:
            self.booked_by[owner] = left
        else:
            self.booked_by.pop(owner, None)

    def release(self, size: int, owner: str = "") -> None:
        """Give back bytes booked for a frame that will not be queued (the connection went,
        or the frame was answered without the handlers)."""
        with self._lock:
            self._unbook(size, owner)

    def is_large(self, request: Request) -> bool:
        return request.size >= (self.large_produce_bytes if request.api_key == 0
                                else self.large_request_bytes)

    def put(self, request: Request) -> None:
        """Queue a complete request whose bytes were booked with ``book``."""
        self.admit(request)
        self.enqueue(request)

    def admit(self, request: Request) -> None:
        """Count a complete request whose bytes were booked as pending (``done`` when it
        is answered): queued by ``enqueue``, or run by its processor itself."""
        owner = request.owner
        with self._lock:
            self.pending += 1
            self.pending_by[owner] = self.pending_by.get(owner, 0) + 1

    def enqueue(self, request: Request) -> None:
        """Hand an admitted request to the handler threads."""
        if self.is_large(request):
            with self._lock:
                waiting = self._large.get(request.owner)
                if waiting is None:                 # a new owner: its turn comes last
                    waiting = self._large[request.owner] = deque()
                waiting.append(request)
                self._large_ready.notify()
            return
        self._queue.put(request)

    def done(self, request: Request) -> None:
        """The request was answered (or its connection went): its bytes are free."""
        owner = request.owner
        with self._lock:
            self.pending -= 1
            n = self.pending_by.get(owner, 0) - 1
            if n > 0:
                self.pending_by[owner] = n
            else:
                self.pending_by.pop(owner, None)
            self._unbook(request.size, owner)

    def queue_size(self) -> int:
        """Requests waiting for a handler (the small-request queue: Kafka's
        RequestQueueSize gauge)."""
        return self._queue.qsize()

    def take(self, timeout: float | None = None, large: bool = False) -> Request | None:
        """The next request (of the large lane with ``large``: the first of the owner whose
        turn it is), or None when the channel is shut down."""
        if not large:
            return self._queue.get(timeout=timeout)
        with self._large_ready:
            if not self._large_ready.wait_for(lambda: self._large or self._large_stops,
                                              timeout):
                raise queue.Empty
            if self._large_stops:
                self._large_stops -= 1
                return None
            owner, waiting = self._large.popitem(last=False)
            request = waiting.popleft()
            if waiting:                              # its next one waits for the others
                self._large[owner] = waiting
            return request

    def shutdown(self, handlers: int, large_handlers: int = 0) -> None:
        for _ in range(handlers):
            self._queue.put(None)
        with self._large_ready:
            self._large_stops += large_handlers
            self._large_ready.notify_all()
