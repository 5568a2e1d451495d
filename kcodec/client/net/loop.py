"""The blocking facade's engine: one background thread running an asyncio loop."""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Coroutine
from typing import Any

from kcodec.client.errors import KafkaTimeoutError

__all__ = ["LoopThread", "shared_loop", "GRACE"]

# The blocking facades wait this much longer than an operation's own deadline, so the
# operation's own error (naming its cause) reaches the caller, not a generic timeout.
GRACE = 5.0


class LoopThread:
    """An event loop in a daemon thread; ``run`` executes a coroutine there and waits."""

    def __init__(self, name: str = "kcodec-client") -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._main, name=name, daemon=True)
        self._thread.start()

    def _main(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def submit(self, coro: Coroutine) -> concurrent.futures.Future:
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def run(self, coro: Coroutine, timeout: float | None = None, what: str = "operation") -> Any:
        if threading.current_thread() is self._thread:
            raise RuntimeError("blocking call from inside the client's own event loop")
        fut = self.submit(coro)
        try:
            return fut.result(timeout)
        except concurrent.futures.TimeoutError:
            fut.cancel()
            raise KafkaTimeoutError(f"{what} did not complete within {timeout:.1f} s") from None

    def call_soon(self, fn, *args) -> None:
        self.loop.call_soon_threadsafe(fn, *args)


_shared: LoopThread | None = None
_lock = threading.Lock()


def shared_loop() -> LoopThread:
    """The process-wide client loop thread (started on first use)."""
    global _shared
    with _lock:
        if _shared is None or not _shared._thread.is_alive():
            _shared = LoopThread()
        return _shared
