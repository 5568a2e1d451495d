"""Consumer behaviour against the scriptable fake cluster: a partition's leader moves."""

from __future__ import annotations

import asyncio
import time

import pytest

from kcodec.client import AsyncConsumer, TopicPartition
from tests.fake_kafka import FakeKafka


@pytest.mark.parametrize("code", [6, 3])   # NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION
def test_fetch_from_a_moved_leader_refreshes_metadata(code: int) -> None:
    async def main() -> None:
        fake = await FakeKafka(topics={"t": {0: 0}}).start()
        fake.values[("t", 0)] = [b"a", b"b"]
        tp = TopicPartition("t", 0)
        try:
            async with AsyncConsumer(bootstrap_servers=fake.bootstrap, auto_offset_reset="earliest",
                                     fetch_max_wait_ms=50, retry_backoff_ms=20) as c:
                c.assign([tp])
                got: list[bytes] = []
                deadline = time.monotonic() + 5
                while len(got) < 2 and time.monotonic() < deadline:
                    got += [r.value for rs in (await c.poll(0.1)).values() for r in rs]
                assert got == [b"a", b"b"]
                fake.topics["t"][0] = 1          # moved: node 0 now answers `code`
                fake.not_leader_code = code
                fake.values[("t", 0)].append(b"c")
                metadata_before = len(fake.produced(3))
                fetches_before = len(fake.produced(1))
                deadline = time.monotonic() + 5
                while len(got) < 3 and time.monotonic() < deadline:
                    got += [r.value for rs in (await c.poll(0.1)).values() for r in rs]
                assert got == [b"a", b"b", b"c"]
                assert len(fake.produced(3)) > metadata_before
                after = [n for n, _ in fake.produced(1)][fetches_before:]
                assert after[0] == 0 and after[-1] == 1   # asked the old leader, told, moved on
        finally:
            await fake.stop()

    asyncio.run(main())


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
