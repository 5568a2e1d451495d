"""kcodec's producer against the kcodec broker and its test controls (these ran on the
scriptable fake before): leader moves, idempotent sequence numbers, a lost answer,
delivery timeout, exhausted retries, non-retriable errors."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from kcodec.broker import LOSE_ANSWER, Cluster
from kcodec.client import AsyncProducer, KafkaError, KafkaTimeoutError
from kcodec.protocol import ErrorCode
from kcodec.records import iter_batches


def run(coro_fn: Any, nodes: int = 2, partitions: int = 1) -> Any:
    async def main(c: Cluster) -> Any:
        return await asyncio.wait_for(coro_fn(c), 20)
    with Cluster(nodes) as c:
        c.create_topic("t", partitions, leaders=list(range(partitions)))
        c.record()
        return asyncio.run(main(c))


def producer(c: Cluster, **kw: Any) -> AsyncProducer:
    cfg = dict(bootstrap_servers=c.bootstrap, linger_ms=0, retry_backoff_ms=20,
               request_timeout_ms=2000)
    return AsyncProducer(**{**cfg, **kw})


def batches(body: Any) -> list[tuple[str, int, int, int, int, int]]:
    return [(t.name, p.index, b.producer_id, b.producer_epoch, b.base_sequence, b.record_count)
            for t in body.topic_data for p in t.partition_data for b in iter_batches(p.records)]


def log_values(c: Cluster, partition: int = 0) -> list[bytes]:
    log = c.state.topics["t"].partitions[partition].log
    return [r.value for b in iter_batches(log.read(0, 1 << 30)) for r in b]


def test_leader_move_refreshes_metadata_and_reroutes() -> None:
    async def go(c: Cluster) -> None:
        async with producer(c) as p:
            assert (await p.send_and_wait("t", b"one")).offset == 0
            c.move_leader("t", 0, 1)       # node 0 now answers NOT_LEADER_OR_FOLLOWER
            metadata_before = len(c.recorded("Metadata"))
            r = await p.send_and_wait("t", b"two")
        assert r.offset == 1               # the log continues on the new leader
        assert [x.node_id for x in c.recorded("Produce")] == [0, 0, 1]
        assert len(c.recorded("Metadata")) > metadata_before
        assert log_values(c) == [b"one", b"two"]
    run(go)


def test_idempotent_sequence_numbers_per_partition() -> None:
    async def go(c: Cluster) -> None:
        async with producer(c) as p:
            for n in (2, 3, 1):
                futs = [await p.send("t", b"v", partition=0) for _ in range(n)]
                futs.append(await p.send("t", b"w", partition=1))
                await p.flush()
                assert all(r.offset >= 0 for r in [await f for f in futs])
        sent = [b for r in c.recorded("Produce") for b in batches(r.body)]
        assert len({(pid, epoch) for _t, _p, pid, epoch, _s, _c in sent}) == 1
        p0 = [(s, n) for _t, part, _pid, _e, s, n in sent if part == 0]
        p1 = [s for _t, part, _pid, _e, s, _n in sent if part == 1]
        assert p0 == [(0, 2), (2, 3), (5, 1)] and p1 == [0, 1, 2]
        assert len(c.recorded("InitProducerId")) == 1
    run(go, partitions=2)


def test_retry_after_a_lost_answer_keeps_the_sequence_and_writes_once() -> None:
    async def go(c: Cluster) -> None:
        calls = []

        def lose_first(req: Any) -> Any:
            calls.append(1)
            return LOSE_ANSWER if len(calls) == 1 else None
        c.hook("Produce", lose_first)
        async with producer(c) as p:
            fut = await p.send("t", b"once")
            await p.flush()
            r = await fut
        sent = [batches(x.body)[0] for x in c.recorded("Produce")]
        assert len(sent) == 2 and sent[0] == sent[1]
        assert log_values(c) == [b"once"]     # the retry was a duplicate: written once
        assert r.partition == 0   # (kcodec reports a duplicate's offset as -1)
    run(go)


def test_delivery_timeout_fails_the_record_in_time() -> None:
    async def go(c: Cluster) -> None:
        c.hook("Produce", lambda req: ErrorCode.NOT_ENOUGH_REPLICAS)   # retriable, forever
        async with producer(c, delivery_timeout_ms=400) as p:
            fut = await p.send("t", b"x")
            t0 = time.monotonic()
            with pytest.raises(KafkaTimeoutError, match=r"delivery to t\[0\] timed out after 400 ms"):
                await fut
            assert time.monotonic() - t0 < 1.5
        assert len(c.recorded("Produce")) >= 3
        assert log_values(c) == []
    run(go)


def test_retries_exhausted_raise_the_broker_error() -> None:
    async def go(c: Cluster) -> None:
        c.push_errors("Produce", [ErrorCode.NOT_ENOUGH_REPLICAS] * 3)
        async with producer(c, retries=2) as p:
            with pytest.raises(KafkaError, match="NOT_ENOUGH_REPLICAS") as ei:
                await p.send_and_wait("t", b"x")
            assert ei.value.code == 19 and ei.value.retriable
        assert len(c.recorded("Produce")) == 3
    run(go)


def test_message_too_large_is_not_retried() -> None:
    async def go(c: Cluster) -> None:
        c.state.set_configs("t", {"max.message.bytes": "1000"})
        async with producer(c) as p:
            with pytest.raises(KafkaError, match="MESSAGE_TOO_LARGE"):
                await p.send_and_wait("t", b"x" * 5000)
        assert len(c.recorded("Produce")) == 1
    run(go)


@pytest.mark.parametrize("code", [6, 3])   # NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION
def test_fetch_from_a_moved_leader_refreshes_metadata(code: int) -> None:
    from kcodec.client import AsyncConsumer, TopicPartition

    async def go(c: Cluster) -> None:
        async with producer(c) as p:
            for v in (b"a", b"b"):
                await p.send_and_wait("t", v)
        tp = TopicPartition("t", 0)
        async with AsyncConsumer(bootstrap_servers=c.bootstrap, auto_offset_reset="earliest",
                                 fetch_max_wait_ms=50, retry_backoff_ms=20,
                                 client_id="mover") as con:
            con.assign([tp])
            got: list[bytes] = []
            deadline = time.monotonic() + 5
            while len(got) < 2 and time.monotonic() < deadline:
                got += [r.value for rs in (await con.poll(0.1)).values() for r in rs]
            assert got == [b"a", b"b"]
            def mine(api: str) -> list:
                return [r for r in c.recorded(api) if r.header.client_id == "mover"]
            metadata_before = len(mine("Metadata"))
            fetches_before = len(mine("Fetch"))
            c.move_leader("t", 0, 1)        # node 0 now answers NOT_LEADER_OR_FOLLOWER ...
            if code == 3:                   # ... or, as some brokers do, UNKNOWN_TOPIC_OR_PARTITION
                c.hook("Fetch", lambda req: code if req.node_id == 0 else None)
            async with producer(c) as p:
                await p.send_and_wait("t", b"c")
            deadline = time.monotonic() + 5
            while len(got) < 3 and time.monotonic() < deadline:
                got += [r.value for rs in (await con.poll(0.1)).values() for r in rs]
            assert got == [b"a", b"b", b"c"]
            assert len(mine("Metadata")) > metadata_before     # the consumer refreshed
            after = [r.node_id for r in mine("Fetch")][fetches_before:]
            assert after[0] == 0 and after[-1] == 1   # asked the old leader, told, moved on
    run(go)
