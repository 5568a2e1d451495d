"""A wake-up flag for the client's loop tasks: asyncio.Event's ``set``/``clear``/``is_set``,
and ``wait(timeout)`` that resumes the waiter in the loop's next turn.

    w = Wakeup()
    w.set()                      # from the loop's thread (others: call_soon_threadsafe)
    await w.wait(0.5)            # True once set, False when the timeout came first

``await asyncio.wait_for(event.wait(), timeout)`` runs ``event.wait()`` as a task of its own
(before Python 3.12) and takes three turns of the loop from ``set()`` to the waiter (the
inner task's, wait_for's callback, the waiter's). The sender, the fetcher and the asyncio
consumer's poll wait like that once per request or record handed out; ``Wakeup.wait``
waits on one future with a timer instead: one turn, no task.
"""

from __future__ import annotations

import asyncio

__all__ = ["Wakeup"]


def _timed_out(fut: asyncio.Future) -> None:
    if not fut.done():
        fut.set_result(False)


class Wakeup:
    """A flag tasks on one loop wait for (see the module docstring)."""

    __slots__ = ("_set", "_waiters")

    def __init__(self) -> None:
        self._set = False
        self._waiters: list[asyncio.Future] = []

    def is_set(self) -> bool:
        return self._set

    def set(self) -> bool:
        """Set the flag and resume every waiter (in the loop's next turn); whether one
        was waiting."""
        self._set = True
        waiters, self._waiters = self._waiters, []
        woke = False
        for fut in waiters:
            if not fut.done():
                fut.set_result(True)
                woke = True
        return woke

    def clear(self) -> None:
        self._set = False

    async def wait(self, timeout: float | None = None) -> bool:
        """True once the flag is set (at once if it is), False if ``timeout`` seconds
        passed first."""
        if self._set:
            return True
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        self._waiters.append(fut)
        timer = None if timeout is None else loop.call_later(max(timeout, 0.0), _timed_out, fut)
        try:
            return await fut
        finally:
            if timer is not None:
                timer.cancel()
            if fut in self._waiters:     # timed out or cancelled: no longer waiting
                self._waiters.remove(fut)
