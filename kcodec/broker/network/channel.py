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

Large requests wait in a queue of their own, served by the pool's large-request threads:
however many a client sends, the other connections' requests never queue behind them, and
only that many are handled at once. Large is a frame of ``large_request_bytes`` (16 KiB) or
more, a Produce of ``large_produce_bytes`` (1 MiB) or more: a request's handling costs about
its element count, at most its bytes, except Produce, whose bytes are mostly one record
blob (its decompression is bounded by the log's validator).
"""

from __future__ import annotations

import concurrent.futures
import queue
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

__all__ = ["Request", "RequestChannel", "CLOSE", "NO_RESPONSE", "LARGE_REQUEST_BYTES",
           "LARGE_PRODUCE_BYTES"]

LARGE_REQUEST_BYTES = 16 * 1024     # a frame this big or bigger goes to the large queue
LARGE_PRODUCE_BYTES = 1024 * 1024   # ... a Produce this big or bigger

CLOSE = "close"             # the handler wants the connection dropped
NO_RESPONSE = "no-response"  # nothing to send back (acks=0 produce)


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

    @property
    def size(self) -> int:
        return len(self.frame)


class RequestChannel:
    """A FIFO of requests with a global byte budget."""

    def __init__(self, max_queued_bytes: int = 100 * 1024 * 1024,
                 large_request_bytes: int = LARGE_REQUEST_BYTES,
                 large_produce_bytes: int = LARGE_PRODUCE_BYTES) -> None:
        self.max_queued_bytes = max_queued_bytes
        self.large_request_bytes = large_request_bytes
        self.large_produce_bytes = large_produce_bytes
        self._queue: queue.Queue[Request | None] = queue.Queue()
        self._large: queue.Queue[Request | None] = queue.Queue()
        self._lock = threading.Lock()
        self.queued_bytes = 0          # booked: frames being read, queued or being handled
        self.pending = 0               # complete requests queued or being handled

    def book(self, size: int) -> bool:
        """Book ``size`` bytes that arrived for a frame, if the budget allows: it has room,
        or no complete request is waiting (then waiting would free nothing)."""
        with self._lock:
            if self.pending == 0 or self.queued_bytes + size <= self.max_queued_bytes:
                self.queued_bytes += size
                return True
            return False

    def release(self, size: int) -> None:
        """Give back bytes booked for a frame that will not be queued (the connection went,
        or the frame was answered without the handlers)."""
        with self._lock:
            self.queued_bytes -= size

    def put(self, request: Request) -> None:
        """Queue a complete request whose bytes were booked with ``book``."""
        with self._lock:
            self.pending += 1
        large = request.size >= (self.large_produce_bytes if request.api_key == 0
                                 else self.large_request_bytes)
        (self._large if large else self._queue).put(request)

    def done(self, request: Request) -> None:
        """The request was answered (or its connection went): its bytes are free."""
        with self._lock:
            self.pending -= 1
            self.queued_bytes -= request.size

    def queue_size(self) -> int:
        """Requests waiting for a handler (the small-request queue: Kafka's
        RequestQueueSize gauge)."""
        return self._queue.qsize()

    def take(self, timeout: float | None = None, large: bool = False) -> Request | None:
        """The next request (of the large queue with ``large``), or None when the channel is
        shut down."""
        return (self._large if large else self._queue).get(timeout=timeout)

    def shutdown(self, handlers: int, large_handlers: int = 0) -> None:
        for _ in range(handlers):
            self._queue.put(None)
        for _ in range(large_handlers):
            self._large.put(None)
