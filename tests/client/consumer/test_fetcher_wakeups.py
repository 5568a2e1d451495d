"""A poll wakes the fetcher's loop only when taking records lets it fetch more.

Every poll that took records used to wake the loop (a write to its self-pipe and a turn of
the loop thread), though with a Fetch in flight that turn launched nothing: the Fetch's
end relaunches anyway. In a busy consumer that was a tenth of the polling thread's time.
The loop now notes, under the subscription's lock, when it left a partition unfetched for
want of buffer room; only then, or with nothing in flight, does a poll wake it.
"""

from __future__ import annotations

import asyncio

from kcodec.client.consumer.positions import SubscriptionState
from kcodec.client.consumer.visibility import Fetched
from tests.client.consumer.test_fetcher_positions import TP, _batch, _Broker, _fetcher


def _setup(loop: asyncio.AbstractEventLoop) -> tuple:
    subs = SubscriptionState()
    with subs.lock:
        subs.assign({TP})
        subs.set_position(TP, 0)
    subs.states[TP].fetch_position = 0
    broker = _Broker()
    f = _fetcher(loop, broker, subs)
    kicks: list[int] = []
    f.kick = lambda: kicks.append(1)        # type: ignore[method-assign]
    return subs, broker, f, kicks


def _buffer(f, subs, base: int, n: int) -> None:
    st = subs.states[TP]
    f.buffer.append(Fetched(TP, base, _batch(base, n), None, st.epoch))
    f.buffered_bytes += len(f.buffer[-1].data)
    st.fetch_position = base + n


def test_a_poll_with_a_fetch_in_flight_does_not_wake_the_loop() -> None:
    async def go() -> tuple[list[int], list]:
        loop = asyncio.get_running_loop()
        subs, broker, f, kicks = _setup(loop)
        _buffer(f, subs, 0, 10)             # one blob buffered: the partition is wanted
        await f._launch()
        await asyncio.sleep(0)
        assert broker.asked == [10] and f.inflight and not f.held_back
        got = [r.offset for r in f.take(5)[TP]] + [r.offset for r in f.take(5)[TP]]
        return got, kicks

    got, kicks = asyncio.run(go())
    assert got == list(range(10))
    assert kicks == []


def test_a_poll_that_frees_a_held_back_partition_wakes_the_loop() -> None:
    async def go() -> tuple[list, list, list]:
        loop = asyncio.get_running_loop()
        subs, broker, f, kicks = _setup(loop)
        _buffer(f, subs, 0, 10)
        _buffer(f, subs, 10, 10)            # two blobs: held back, no Fetch sent
        await f._launch()
        await asyncio.sleep(0)
        assert broker.asked == [] and not f.inflight and f.held_back
        first = list(kicks)
        f.take(10)                           # the first blob handed out: room for a Fetch
        after = list(kicks)
        await f._launch()
        await asyncio.sleep(0)
        return first, after, broker.asked

    first, after, asked = asyncio.run(go())
    assert first == [] and after == [1]
    assert asked == [20]


def test_a_poll_under_the_buffer_limit_wakes_the_loop() -> None:
    loop = asyncio.new_event_loop()
    try:
        subs, broker, f, kicks = _setup(loop)
        _buffer(f, subs, 0, 10)
        f.buffered_bytes = 1 << 30          # over the limit: the launch fetches nothing
        loop.run_until_complete(f._launch())
        assert f.held_back and not f.inflight
        f.held_back = False                 # nothing in flight still wakes it
        f.take(3)
        assert kicks == [1]
        f.inflight[1] = 0.0
        f.take(3)
        assert kicks == [1]                 # a Fetch in flight, nothing held: no wake
        f.held_back = True
        f.take(3)
        assert kicks == [1, 1]
    finally:
        loop.close()


def test_a_poll_right_after_a_fetch_ended_does_not_wake_the_loop_again() -> None:
    """A Fetch's end sets the loop's own wake-up; until the loop clears it (before its next
    launch, which then sees what the poll took) a poll's kick would be a self-pipe write
    and a loop turn for nothing."""
    loop = asyncio.new_event_loop()
    try:
        subs, broker, f, kicks = _setup(loop)
        _buffer(f, subs, 0, 10)
        f.held_back = False                 # nothing in flight: a poll would wake it
        f.wake.set()                        # ... but a Fetch just ended and set the flag
        f.take(3)
        assert kicks == []
        f.wake.clear()                      # the loop took the flag: now it must be woken
        f.take(3)
        assert kicks == [1]
    finally:
        loop.close()


def test_an_answered_fetch_sends_the_next_from_its_own_task() -> None:
    """The Fetch's task sends the next one itself once an answer is taken: no turn through
    the fetch loop (its wake-up stays clear) and no new task."""
    async def go() -> tuple[list[int], bool, int, list[int]]:
        loop = asyncio.get_running_loop()
        subs, broker, f, kicks = _setup(loop)
        await f._launch()
        await asyncio.sleep(0)
        assert broker.asked == [0]
        tasks = len(asyncio.all_tasks())
        broker.answers.put_nowait(_batch(0, 10))
        for _ in range(5):
            await asyncio.sleep(0)
        asked, woken, now = list(broker.asked), f.wake.is_set(), len(asyncio.all_tasks())
        got = [r.offset for r in f.take(100)[TP]]
        return asked, woken, now - tasks, got

    asked, woken, new_tasks, got = asyncio.run(go())
    assert asked == [0, 10]
    assert not woken and new_tasks == 0
    assert got == list(range(10))


def test_a_fetch_loop_woken_meanwhile_decides_the_next_fetch() -> None:
    """Something asked the fetch loop to launch (a seek, a new assignment: its wake-up set)
    while a Fetch was out: its end leaves the next one to the loop."""
    async def go() -> tuple[list[int], bool, dict]:
        loop = asyncio.get_running_loop()
        subs, broker, f, kicks = _setup(loop)
        await f._launch()
        await asyncio.sleep(0)
        f.wake.set()
        broker.answers.put_nowait(_batch(0, 10))
        for _ in range(5):
            await asyncio.sleep(0)
        return list(broker.asked), f.wake.is_set(), dict(f.inflight)

    asked, woken, inflight = asyncio.run(go())
    assert asked == [0] and woken and inflight == {}


def test_an_asyncio_consumer_waiting_gets_its_records_before_the_next_fetch() -> None:
    async def go() -> list[int]:
        loop = asyncio.get_running_loop()
        subs, broker, f, kicks = _setup(loop)
        seen: list[int] = []

        async def consumer() -> None:
            await f.adata.wait(5)
            seen.append(len(broker.asked))   # Fetches sent when the records reached it
        waiter = asyncio.ensure_future(consumer())
        await asyncio.sleep(0)
        await f._launch()
        await asyncio.sleep(0)
        broker.answers.put_nowait(_batch(0, 10))
        await waiter
        for _ in range(5):
            await asyncio.sleep(0)
        return seen + [len(broker.asked)]

    assert asyncio.run(go()) == [1, 2]
