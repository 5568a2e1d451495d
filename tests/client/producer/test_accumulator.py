"""The producer's record accumulator (kcodec.client.producer.accumulator): when ``ready``
seals an open batch. With linger_ms 0 a batch is due at once, but it stays open while a
sealed batch of its partition still waits to be sent, so records that come meanwhile join
it rather than queue behind as batches of their own."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from kcodec.client.config import ProducerConfig
from kcodec.client.producer.accumulator import RecordAccumulator

TP = ("t", 0)


@pytest.fixture
def acc() -> Iterator[RecordAccumulator]:
    loop = asyncio.new_event_loop()
    try:
        yield RecordAccumulator(ProducerConfig(bootstrap_servers="localhost:9092", linger_ms=0),
                                loop, lambda: None, False)
    finally:
        loop.close()


def send(acc: RecordAccumulator, value: bytes) -> None:
    acc.append("t", 0, 1, None, value, None, None)


def test_linger_0_seals_a_batch_when_nothing_waits_ahead(acc: RecordAccumulator) -> None:
    send(acc, b"a")
    ready, due = acc.ready(0.0, False)
    assert [b.count for b in ready] == [1] and due is None and TP not in acc.open
    ready[0].inflight = True            # the sender took it
    send(acc, b"b")
    ready, _ = acc.ready(0.0, False)    # the one ahead is in flight: this one goes too
    assert [b.count for b in ready] == [1] and TP not in acc.open


def test_a_due_batch_stays_open_behind_an_unsent_one(acc: RecordAccumulator) -> None:
    send(acc, b"a")
    first, _ = acc.ready(0.0, False)    # sealed, but no request slot takes it yet
    for v in (b"b", b"c", b"d"):
        send(acc, v)
        ready, _ = acc.ready(0.0, False)
        assert ready == first            # still the first batch; the rest stays open
        assert len(acc.open[TP].timestamps) == ord(v) - ord("a")
    assert len(acc.queues[TP]) == 1
    first[0].inflight = True            # now it is sent: the open batch is sealed behind it
    ready, _ = acc.ready(0.0, False)
    assert [b.count for b in ready] == [3] and TP not in acc.open
    assert [b.count for b in acc.queues[TP]] == [1, 3]


def test_flush_seals_behind_an_unsent_batch(acc: RecordAccumulator) -> None:
    send(acc, b"a")
    acc.ready(0.0, False)
    send(acc, b"b")
    acc.flushing += 1                   # a flush waits for every batch: all are sealed
    acc.ready(0.0, False)
    assert TP not in acc.open and [b.count for b in acc.queues[TP]] == [1, 1]


def test_linger_keeps_a_young_batch_open(acc: RecordAccumulator) -> None:
    send(acc, b"a")
    ready, due = acc.ready(5.0, False)
    assert ready == [] and due is not None and TP in acc.open
