"""A blocking call's error is the coroutine's own: a KafkaTimeoutError raised inside (a
TimeoutError too) was taken for the wait's own timeout and replaced by "operation did not
complete within N s", losing what timed out and why."""

from __future__ import annotations

import time

import pytest

from kcodec.client.errors import KafkaTimeoutError
from kcodec.client.net.loop import LoopThread


def test_a_timeout_raised_inside_is_passed_on_as_it_is() -> None:
    loop = LoopThread("test-loop")
    try:
        async def fails() -> None:
            raise KafkaTimeoutError("partition 7 of topic 't' is not present in metadata")

        with pytest.raises(KafkaTimeoutError, match="partition 7 of topic 't'"):
            loop.run(fails(), 5)

        async def slow() -> None:
            import asyncio
            await asyncio.sleep(10)
        t = time.monotonic()
        with pytest.raises(KafkaTimeoutError, match="waiting did not complete within 0.2 s"):
            loop.run(slow(), 0.2, "waiting")
        assert time.monotonic() - t < 2
    finally:
        loop.shutdown()
