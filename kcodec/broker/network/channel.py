"""The request channel: the queue between the processors and the handler pool.

A processor puts a :class:`Request` (the raw frame, its parsed header fields and the
connection it came from) and awaits ``request.future``; a handler thread takes it, runs the
API and sets the future to the response bytes, :data:`NO_RESPONSE` (acks=0 produce) or
:data:`CLOSE` (drop the connection). The channel counts the bytes of queued requests and
makes processors wait while a global limit is exceeded (Kafka's ``queued.max.request.bytes``).
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

    def has_room(self, size: int) -> bool:
        """True if a request of ``size`` bytes may be queued now (one request always may)."""
        with self._lock:
            return self.queued_bytes == 0 or self.queued_bytes + size <= self.max_queued_bytes

    def put(self, request: Request) -> None:
        with self._lock:
            self.queued_bytes += request.size
        self._queue.put(request)

    def take(self, timeout: float | None = None) -> Request | None:
        """The next request, or None when the channel is shut down."""
        req = self._queue.get(timeout=timeout)
        if req is not None:
            with self._lock:
                self.queued_bytes -= req.size
        return req

    def shutdown(self, handlers: int) -> None:
        for _ in range(handlers):
            self._queue.put(None)
