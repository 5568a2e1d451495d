"""Async clients used before start (the leader-move test runs on the kcodec broker:
tests/broker/test_broker_client.py)."""

from __future__ import annotations

import asyncio

import pytest

from kcodec.client import AsyncConsumer, TopicPartition


def test_async_clients_used_before_start_say_so() -> None:
    from kcodec.client import AsyncProducer, ClientClosedError

    async def main() -> None:
        c = AsyncConsumer(bootstrap_servers="127.0.0.1:1")
        with pytest.raises(ClientClosedError, match="not started"):
            c.assign([TopicPartition("t", 0)])
        with pytest.raises(ClientClosedError, match="not started"):
            await c.poll()
        await c.close()   # harmless
        p = AsyncProducer(bootstrap_servers="127.0.0.1:1")
        with pytest.raises(ClientClosedError, match="not started"):
            await p.send("t", b"x")
        await p.close()

    asyncio.run(main())
