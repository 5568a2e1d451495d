"""The loop tasks' wake-up flag (kcodec.client.net.wakeup): ``set`` resumes a waiter in the
loop's next turn, ``wait`` says whether the flag or the timeout came first, and a waiter
that stops waiting (timeout, cancel) is forgotten."""

from __future__ import annotations

import asyncio

import pytest

from kcodec.client.net.wakeup import Wakeup


def test_set_resumes_the_waiter_in_the_next_turn() -> None:
    async def main() -> None:
        w = Wakeup()
        turns = 0
        waiter = asyncio.ensure_future(w.wait(5.0))
        await asyncio.sleep(0)          # the waiter waits
        w.set()
        while not waiter.done():
            await asyncio.sleep(0)
            turns += 1
        assert waiter.result() is True and turns <= 1
        # (asyncio.wait_for(event.wait(), t) takes three)
        ev = asyncio.Event()
        old = asyncio.ensure_future(asyncio.wait_for(ev.wait(), 5.0))
        await asyncio.sleep(0)
        ev.set()
        turns = 0
        while not old.done():
            await asyncio.sleep(0)
            turns += 1
        assert turns == 3
    asyncio.run(main())


def test_wait_says_whether_the_flag_or_the_timeout_came_first() -> None:
    async def main() -> None:
        w = Wakeup()
        assert await w.wait(0.01) is False and not w._waiters
        w.set()
        assert w.is_set() and await w.wait(0.01) is True and await w.wait() is True
        w.clear()
        assert not w.is_set() and await w.wait(0) is False
    asyncio.run(main())


def test_every_waiter_is_resumed_and_a_cancelled_one_forgotten() -> None:
    async def main() -> None:
        w = Wakeup()
        a, b = (asyncio.ensure_future(w.wait(5.0)) for _ in range(2))
        gone = asyncio.ensure_future(w.wait())
        await asyncio.sleep(0)
        gone.cancel()
        with pytest.raises(asyncio.CancelledError):
            await gone
        assert len(w._waiters) == 2
        w.set()
        assert await asyncio.gather(a, b) == [True, True] and not w._waiters
    asyncio.run(main())
