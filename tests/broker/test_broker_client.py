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
        c.create_topic("t", partitions, leaders=[i % nodes for i in range(partitions)])
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


# ---- moved here from the scriptable fake (tests/client/producer/test_sender_in_flight.py) -------------

def test_retriable_error_after_the_delivery_timeout_reports_the_timeout() -> None:
    """Java reports the delivery timeout, not a retriable error that came after it (the
    answer is held back past the deadline, as a loaded machine makes it)."""
    from kcodec.broker import Delay

    async def go(c: Cluster) -> None:
        c.hook("Produce", lambda req: Delay(0.6, then=ErrorCode.NOT_ENOUGH_REPLICAS))
        async with producer(c, delivery_timeout_ms=300, request_timeout_ms=5000) as p:
            fut = await p.send("t", b"x")
            t0 = time.monotonic()
            with pytest.raises(KafkaTimeoutError, match=r"timed out after 300 ms \(1 attempts; "
                                                        r"last error: .*timed out"):
                await fut
            assert time.monotonic() - t0 < 0.55    # the answer is not waited for
        assert log_values(c) == []
    run(go, nodes=1)


@pytest.mark.parametrize("acks,wire", [("all", -1), (1, 1), (0, 0)])
def test_acks_on_the_wire(acks: Any, wire: int) -> None:
    """acks=0: the broker sends nothing back and the records still complete, with offset -1."""
    async def go(c: Cluster) -> None:
        async with producer(c, acks=acks, enable_idempotence=acks == "all") as p:
            futs = [await p.send("t", b"%d" % i) for i in range(5)]
            await p.flush()
            offsets = [(await f).offset for f in futs]
        assert offsets == ([-1] * 5 if acks == 0 else list(range(5)))
        if acks == 0:   # written all the same (the producer could not wait for it)
            deadline = time.monotonic() + 5
            while len(log_values(c)) < 5 and time.monotonic() < deadline:
                await asyncio.sleep(0.02)
        assert log_values(c) == [b"%d" % i for i in range(5)]
        assert {r.body.acks for r in c.recorded("Produce")} == {wire}
    run(go, nodes=1)


def test_out_of_order_behind_a_retried_batch_resends_in_order_same_producer() -> None:
    """Two batches of one partition in flight; the first fails (retriable, after a delay that
    keeps the second in flight), so the broker's sequence check answers the second
    OUT_OF_ORDER_SEQUENCE_NUMBER: both are resent in order with the same producer id and
    sequences (no new producer id, nothing written twice or reordered). The producer has
    written once before: for a producer id it has no state for, Kafka (and this broker)
    accepts any first sequence."""
    from kcodec.broker import Delay

    async def go(c: Cluster) -> None:
        failed: list[int] = []

        def fail_first(req: Any) -> Any:
            seq = batches(req.body)[0][4]
            if seq == 1 and not failed:
                failed.append(seq)
                return Delay(0.1, then=ErrorCode.NOT_ENOUGH_REPLICAS)
            return None

        async with producer(c, max_in_flight_requests_per_connection=2, batch_size=100) as p:
            assert (await p.send_and_wait("t", b"%060d" % 0)).offset == 0
            c.hook("Produce", fail_first)
            futs = [await p.send("t", b"%060d" % i) for i in range(1, 5)]
            await p.flush()
            offsets = [(await f).offset for f in futs]
        assert failed and offsets == [1, 2, 3, 4]
        assert log_values(c) == [b"%060d" % i for i in range(5)]
        log = c.state.topics["t"].partitions[0].log
        stored = [(b.producer_id, b.base_sequence, b.base_offset)
                  for b in iter_batches(log.read(0, 1 << 30))]
        assert len({pid for pid, _, _ in stored}) == 1
        assert [(s, o) for _, s, o in stored] == [(i, i) for i in range(5)]
        assert len(c.recorded("InitProducerId")) == 1
        sent = [batches(r.body)[0][4] for r in c.recorded("Produce")]
        assert sent[:3] == [0, 1, 2] and sent.count(2) >= 2   # 2 went out behind 1, again after
    run(go, nodes=1)


def test_keyless_records_spread_over_partitions_when_linger_seals_small_batches() -> None:
    """seq 1 50000 | kcodec produce: input slower than linger_ms makes many small batches;
    the sticky partitioner still moves on after batch_size bytes (KIP-794)."""
    async def go(c: Cluster) -> None:
        async with producer(c, linger_ms=0) as p:
            futs = []
            for i in range(20000):
                futs.append(await p.send("t", b"%099d" % i))
                if i % 50 == 0:
                    await asyncio.sleep(0.0005)   # let the sender send what it has
            for f in futs:
                await f
        per = {i: c.state.topics["t"].partitions[i].log.log_end_offset for i in range(4)}
        assert sum(per.values()) == 20000 and min(per.values()) > 0
        assert max(per.values()) < 0.4 * 20000, per
    run(go, nodes=2, partitions=4)


def test_new_producer_id_waits_for_batches_in_flight_under_the_old_one() -> None:
    """Partition 1's answer (UNKNOWN_PRODUCER_ID, on node 1) makes the producer fetch a new
    producer id while partition 0's first batch is still in flight on node 0, held back and
    then refused (retriable). Re-stamping the queues at once sent partition 0's second batch
    under the new id first; the broker took it as that id's first sequence, and the first
    batch was then written after it (out of order) or twice. The reset must wait for the
    answers still out under the old id, then resend from the head, in order, once."""
    from kcodec.broker import Delay

    async def go(c: Cluster) -> None:
        held: list[int] = []
        refused: list[int] = []

        def hook(req: Any) -> Any:
            parts = {b[1] for b in batches(req.body)}
            if req.node_id == 0 and 0 in parts and not held:
                held.append(1)
                return Delay(0.8, then=ErrorCode.NOT_ENOUGH_REPLICAS)
            if req.node_id == 1 and 1 in parts and not refused:
                refused.append(1)
                return ErrorCode.UNKNOWN_PRODUCER_ID
            return None

        c.hook("Produce", hook)
        async with producer(c, max_in_flight_requests_per_connection=5,
                            delivery_timeout_ms=10000, request_timeout_ms=5000) as p:
            first = await p.send("t", b"a0", partition=0)
            await asyncio.sleep(0.1)                  # a0 is in flight, held on node 0
            other = await p.send("t", b"b0", partition=1)
            await asyncio.sleep(0.3)                  # b0 answered: a new producer id
            second = await p.send("t", b"a1", partition=0)
            await p.flush()
            offsets = [(await f).offset for f in (first, second, other)]
        assert held and refused
        assert log_values(c, 0) == [b"a0", b"a1"] and log_values(c, 1) == [b"b0"]
        assert offsets == [0, 1, 0]
        assert len(c.recorded("InitProducerId")) == 2
    run(go, nodes=2, partitions=2)


def test_a_batch_waiting_for_its_connection_is_not_overtaken_by_the_next_one() -> None:
    """The first request to a node waits for its connection; the partition's next batch,
    made meanwhile, must not reach the broker first. (It did, on the connection the first
    one was waiting for or on a second one: the broker refused it as out of order, and an
    idempotent producer then reset its id and wrote records twice.)"""
    async def go(c: Cluster) -> None:
        async with producer(c, max_in_flight_requests_per_connection=5) as p:
            cluster = p._engine.cluster
            real = cluster.connection
            slow = [True]

            async def connection(node_id: int) -> Any:
                if node_id == 0 and slow[0]:      # the first produce's connection is slow
                    slow[0] = False
                    await asyncio.sleep(0.3)
                return await real(node_id)

            cluster.connection = connection
            first = await p.send("t", b"a0")
            await asyncio.sleep(0.1)              # a0's request waits for its connection
            second = await p.send("t", b"a1")
            await p.flush()
            offsets = [(await f).offset for f in (first, second)]
        assert offsets == [0, 1]
        assert [b[4] for r in c.recorded("Produce") for b in batches(r.body)] == [0, 1]
        assert log_values(c) == [b"a0", b"a1"]
    run(go, nodes=1)
