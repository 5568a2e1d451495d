"""A batch acknowledged as a duplicate keeps its original offset.

The first answer to a batch is lost after the broker wrote it; the retry is a duplicate.
Kafka (and kcodec's broker) answers NONE with the original offset; older brokers answer
DUPLICATE_SEQUENCE_NUMBER, some with the offset and some without. Before, the producer
completed every DUPLICATE_SEQUENCE_NUMBER with offset -1 and said nothing.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from kcodec.client import AsyncProducer, KafkaError
from kcodec.records import iter_batches
from tests.support.fake_kafka import CLOSE, FakeKafka


async def _send_with_a_lost_answer(style: str) -> list[int]:
    fake = await FakeKafka(nodes=1).start()
    fake.duplicates = style
    dropped = []

    def on_produce(node: int, topic: str, partition: int, records: Any) -> Any:
        if dropped or sum(c for *_, c in fake.logs.get((topic, partition), [])) != 2:
            return None                    # the fake's own answer (a duplicate, after)
        fake.write(node, topic, partition, records)   # the third batch is written...
        dropped.append(True)
        return CLOSE                                  # ...and its answer lost

    fake.on_produce = on_produce
    try:
        async with AsyncProducer(bootstrap_servers=fake.bootstrap, linger_ms=0,
                                 retry_backoff_ms=20, request_timeout_ms=2000) as p:
            offsets = []
            for v in (b"a", b"b", b"c", b"d"):
                offsets.append((await asyncio.wait_for(await p.send("t", v, partition=0), 10)).offset)
            assert dropped
            return offsets
    finally:
        await fake.stop()


@pytest.mark.parametrize("style", ["kafka", "old+offset"])
def test_a_duplicate_keeps_the_original_offset(style: str) -> None:
    assert asyncio.run(_send_with_a_lost_answer(style)) == [0, 1, 2, 3]


def test_a_duplicate_without_an_offset_is_not_silent(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="kcodec.client"):
        offsets = asyncio.run(_send_with_a_lost_answer("old"))
    assert offsets == [0, 1, -1, 3]
    assert any("t[0]" in r.getMessage() and "already written" in r.getMessage()
               and "offset" in r.getMessage() for r in caplog.records), caplog.text


async def _a_later_batch_acknowledged_first() -> tuple[list[Any], list[Any], list[Any]]:
    # The first batch of a partition fails (a retriable error) while the next one is in
    # flight and is written: the broker takes it, having no state for the new producer id
    # (Kafka does so). The first one's retry is then out of sequence.
    fake = await FakeKafka(nodes=1).start()
    fake.any_first_sequence = True
    fake.produce_delay = 0.2
    tries = []

    def on_produce(node: int, topic: str, partition: int, records: Any) -> Any:
        if [r.value for b in iter_batches(records) for r in b] == [b"a"] and not tries:
            tries.append(1)
            return 19                      # NOT_ENOUGH_REPLICAS: retriable
        return None

    fake.on_produce = on_produce
    try:
        async with AsyncProducer(bootstrap_servers=fake.bootstrap, linger_ms=0,
                                 retry_backoff_ms=20, request_timeout_ms=5000) as p:
            calls: dict[bytes, list[Any]] = {b"a": [], b"b": []}
            futs = []
            for v in (b"a", b"b"):
                fut = await p.send("t", v, partition=0)
                fut.add_callback(lambda err, res, v=v: calls[v].append(err or res.offset))
                futs.append(fut)
                await asyncio.sleep(0.05)    # a request each, both in flight
            for fut in futs:
                try:
                    await asyncio.wait_for(fut, 10)
                except KafkaError:
                    pass                     # seen by the callback
            await asyncio.sleep(0.5)         # anything sent again would be written by now
        return fake.logs[("t", 0)], calls[b"a"], calls[b"b"]
    finally:
        await fake.stop()


def test_a_batch_acknowledged_behind_a_retried_one_is_not_sent_again() -> None:
    # before: acknowledged out of order, the batch stayed queued, was sent again (answered
    # as a duplicate, its callbacks run twice), and was written a second time under the
    # producer id fetched for the retried batch; then the retried batch was written after
    # it under that new id, out of the order of sends
    log, a, b = asyncio.run(_a_later_batch_acknowledged_first())
    assert [(seq, count) for _pid, seq, count in log] == [(1, 1)], \
        f"only b, once ((producer id, sequence, records): {log})"
    assert b == [0]
    assert len(a) == 1 and isinstance(a[0], KafkaError), a
    assert a[0].name == "OUT_OF_ORDER_SEQUENCE_NUMBER" and "written first" in str(a[0])
