"""The asyncio connection (kcodec.client.net.conn): how an answer reaches the task that
asked. The answer is parsed where the socket's bytes arrive (the protocol's
``data_received``, no reader task) and its ``set_result`` resumes the requester in the
loop's next turn (one turn, not the three of ``wait_for(shield(...))``), a request's
timeout still poisons the connection, and a cancelled request's late answer is skipped,
the connection kept."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from kcodec.client.errors import KafkaTimeoutError
from kcodec.client.net.conn import BrokerConnection
from kcodec.protocol import MetadataRequest
from tests.support.fake_kafka import FakeKafka


class Turns:
    """Counts the loop's turns: a task that yields once per turn."""

    def __init__(self) -> None:
        self.n = 0
        self.task = asyncio.ensure_future(self._tick())

    async def _tick(self) -> None:
        while True:
            await asyncio.sleep(0)
            self.n += 1


async def _connected(fake: FakeKafka, timeout: float = 2.0) -> BrokerConnection:
    return await BrokerConnection("127.0.0.1", fake.ports[0], 0, "t", timeout).connect(2.0)


def _fetch() -> Any:
    """A one-partition Fetch (v4), for the fake broker's ``on_fetch`` to answer or not."""
    from kcodec.client.net import requests
    return requests.fetch(max_wait_ms=0, min_bytes=1, max_bytes=1 << 20,
                          read_committed=False, session_id=0, session_epoch=-1,
                          partitions=[("t", 0, 0)], partition_max_bytes=1 << 20,
                          forgotten=[], topic_ids=None)


def run(go: Any) -> Any:
    async def main() -> Any:
        fake = await FakeKafka(nodes=1).start()
        try:
            return await asyncio.wait_for(go(fake), 10)
        finally:
            await fake.stop()
    return asyncio.run(main())


def test_an_answer_resumes_its_requester_in_the_next_turn() -> None:
    async def go(fake: FakeKafka) -> None:
        conn = await _connected(fake)
        turns = Turns()
        at: list[int] = []
        receive = conn.core.receive

        def receiving(data: Any) -> Any:
            out = receive(data)
            if out:
                at.append(turns.n)       # the reader is about to set the answer
            return out
        conn.core.receive = receiving    # type: ignore[method-assign]
        for _ in range(5):
            await conn.request(MetadataRequest(topics=[]))
            assert turns.n - at[-1] <= 1
        turns.task.cancel()
        conn.close()
    run(go)


def test_a_connection_reads_without_a_task_of_its_own() -> None:
    """A StreamReader read by a task took a turn more on every answer (the reader task's
    wake-up before the requester's) and copied each read out of its buffer."""
    def ours() -> int:       # the tasks on the loop but the fake broker's own
        return sum(not t.get_coro().__qualname__.startswith("FakeKafka.")
                   for t in asyncio.all_tasks())

    async def go(fake: FakeKafka) -> tuple[int, int]:
        before = ours()
        conn = await _connected(fake)
        for _ in range(3):
            await conn.request(MetadataRequest(topics=[]))
        after = ours()
        conn.close()
        return before, after

    before, after = run(go)
    assert after == before


def test_a_peer_that_hangs_up_fails_what_is_pending() -> None:
    async def go(fake: FakeKafka) -> None:
        conn = await _connected(fake)

        async def hang_up(*_a: Any) -> bool:
            for w in list(fake.writers):
                w.close()
            return True
        fake.on_fetch = hang_up
        from kcodec.client.errors import BrokerNotAvailableError
        with pytest.raises(BrokerNotAvailableError, match="closed the connection"):
            await conn.request(_fetch(), 4)
        assert not conn.alive
    run(go)


def test_a_request_that_times_out_poisons_the_connection() -> None:
    async def go(fake: FakeKafka) -> None:
        conn = await _connected(fake, timeout=0.2)

        async def silent(*_a: Any) -> bool:
            return True                  # never answered
        fake.on_fetch = silent
        with pytest.raises(KafkaTimeoutError, match="timed out"):
            await conn.request(_fetch(), 4)
        assert not conn.alive
    run(go)


def test_a_cancelled_request_leaves_the_connection_usable() -> None:
    async def go(fake: FakeKafka) -> None:
        conn = await _connected(fake)
        asked = asyncio.ensure_future(conn.request(MetadataRequest(topics=[])))
        await asyncio.sleep(0)           # written, not yet answered
        asked.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asked
        # its answer comes and is skipped; the next request gets its own
        body = (await conn.request(MetadataRequest(topics=[]))).body
        assert [b.node_id for b in body.brokers] == [0]
        assert conn.alive
        conn.close()
    run(go)
