"""The blocking facade's engine: one background thread running an asyncio loop.

At interpreter exit (``atexit``) every loop thread still running cancels its tasks, lets
them finish (connections closed, futures failed) for at most a second, and stops: a
program that ends -- or dies of an exception -- with a producer or consumer still open
leaves no "Task was destroyed but it is pending!" behind. What was not delivered is not
delivered, as after ``close(0)``.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import threading
import weakref
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
        _running.add(self)

    @property
    def alive(self) -> bool:
        """Whether the thread still runs its loop (false after ``shutdown``)."""
        return self._thread.is_alive()

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
            if fut.done():     # the coroutine's own (a KafkaTimeoutError is a TimeoutError)
                raise
            fut.cancel()
            raise KafkaTimeoutError(f"{what} did not complete within {timeout:.1f} s") from None

    def call_soon(self, fn, *args) -> None:
        self.loop.call_soon_threadsafe(fn, *args)

    def shutdown(self, timeout: float = 1.0) -> None:
        """Cancel every task on the loop, wait up to ``timeout`` seconds for them to end,
        stop the loop and its thread (from another thread)."""
        if not self.alive or threading.current_thread() is self._thread:
            return
        try:
            fut = asyncio.run_coroutine_threadsafe(_cancel_all(), self.loop)
        except RuntimeError:   # the loop is closed
            return
        try:
            fut.result(timeout)
        except (concurrent.futures.TimeoutError, concurrent.futures.CancelledError):
            pass
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout)


async def _cancel_all() -> None:
    """Cancel the loop's tasks until none is left: again and again, as a cancelled task may
    start others on its way out, and asyncio.wait_for (before Python 3.12) can swallow a
    cancellation that meets its timeout."""
    me = asyncio.current_task()
    while True:
        tasks = [t for t in asyncio.all_tasks() if t is not me]
        if not tasks:
            return
        for t in tasks:
            t.cancel()
        await asyncio.wait(tasks, timeout=0.05)


_running: weakref.WeakSet[LoopThread] = weakref.WeakSet()


@atexit.register
def _shutdown_all() -> None:
    for lt in list(_running):
        lt.shutdown()


_shared: LoopThread | None = None
_lock = threading.Lock()


def shared_loop() -> LoopThread:
    """The process-wide client loop thread (started on first use)."""
    global _shared
    with _lock:
        if _shared is None or not _shared.alive:
            _shared = LoopThread()
        return _shared
