"""The request channel: the queue between the processors and the handler pool.

A processor books a frame's bytes (``reserve``) before reading it, puts the :class:`Request`
(the raw frame, its parsed header fields and the connection it came from) and awaits
``request.future``; a handler thread takes it, runs the API and sets the future to the
response bytes, :data:`NO_RESPONSE` (acks=0 produce) or :data:`CLOSE` (drop the
connection); the processor then gives the bytes back (``release``). So the channel counts the
bytes of requests read and not yet answered, and a processor waits before reading more while
the global limit would be exceeded (Kafka's ``queued.max.request.bytes``); one request is
always let through.
"""

from __future__ import annotations

import concurrent.futures
import queue
import threading
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Request", "RequestChannel", "CLOSE", "NO_RESPONSE"]

CLOSE = "close"             # the handler wants the connection dropped
NO_RESPONSE = "no-response"  # nothing to send back (acks=0 produce)


@dataclass
class Request:
    """One request frame as read from a connection (the body is decoded by the handler)."""

    node_id: int
    connection: Any                # the processor's per-connection state (ConnectionState)
    api_key: int
    api_version: int
    correlation_id: int
    frame: bytes                   # the frame without its size prefix (header + body)
    future: concurrent.futures.Future = field(default_factory=concurrent.futures.Future)
    header: Any = None             # set by the handler once decoded
    body: Any = None

    @property
    def size(self) -> int:
        return len(self.frame)


class RequestChannel:
    """A FIFO of requests with a global byte budget."""

    def __init__(self, max_queued_bytes: int = 100 * 1024 * 1024) -> None:
        self.max_queued_bytes = max_queued_bytes
        self._queue: queue.Queue[Request | None] = queue.Queue()
        self._lock = threading.Lock()
        self.queued_bytes = 0

    def reserve(self, size: int) -> bool:
        """Book ``size`` bytes for a request about to be read, if the budget allows (one
        request always may): a processor reads a frame's body only after this, so the
        budget bounds the memory of requests read but not yet handled."""
        with self._lock:
            if self.queued_bytes == 0 or self.queued_bytes + size <= self.max_queued_bytes:
                self.queued_bytes += size
                return True
            return False

    def release(self, size: int) -> None:
        """Give back a booking: the request was answered (or never queued)."""
        with self._lock:
            self.queued_bytes -= size

    def put(self, request: Request) -> None:
        """Queue a request whose bytes were booked with ``reserve``."""
        self._queue.put(request)

    def take(self, timeout: float | None = None) -> Request | None:
        """The next request, or None when the channel is shut down."""
        return self._queue.get(timeout=timeout)

    def shutdown(self, handlers: int) -> None:
        for _ in range(handlers):
            self._queue.put(None)
