"""A record batch larger than any fetch: the consumer stops asking for it and says so.

The broker (tests/support/hostile_broker.py, mode "oversized") answers every Fetch with the
first bytes of a batch whose length field says 1 GiB, as a broker does when the batch is
larger than the fetch's limits allow it to return. No whole batch ever comes, so the
position cannot move. Before, the consumer fetched again at once, without end (tens of
thousands of fetches and most of a core in 30 s) and ``poll`` said nothing.
"""

from __future__ import annotations

import time

import pytest

from kcodec.client import Consumer, TopicPartition
from kcodec.client.errors import BatchTooLargeError, RecordTooLargeError
from tests.support.hostile_broker import HostileBroker

GiB = 1 << 30
TP = TopicPartition("t", 0)


def _poll_until_raised(c: Consumer, seconds: float) -> BaseException | None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            c.poll(0.1)
        except RecordTooLargeError as exc:
            return exc
    return None


@pytest.fixture
def oversized():
    with HostileBroker("oversized", size=GiB, part=4096) as hb:
        yield hb


def test_a_batch_larger_than_any_fetch_raises_from_poll_after_a_few_fetches(oversized) -> None:
    with Consumer(bootstrap_servers=oversized.bootstrap, fetch_max_wait_ms=100,
                  max_partition_fetch_bytes=65536, fetch_max_bytes=1 << 20) as c:
        c.assign([TP])
        c.seek(TP, 42)
        err = _poll_until_raised(c, 5)
        assert isinstance(err, BatchTooLargeError), err
        assert (err.topic, err.partition, err.offset, err.size) == ("t", 0, 42, GiB)
        assert err.received == 4096 and err.fetches == BatchTooLargeError.FETCHES
        text = str(err)
        assert "t[0] at offset 42" in text and "1073741824 bytes" in text
        for setting in ("max_partition_fetch_bytes (65536)", "fetch_max_bytes (1048576)",
                        "receive_message_max_bytes (100000000)"):
            assert setting in text, text
        assert oversized.fetches <= BatchTooLargeError.FETCHES + 1
        # no spin afterwards: the partition is not fetched again while it stays there,
        # and every poll says why nothing comes
        seen = oversized.fetches
        assert isinstance(_poll_until_raised(c, 1), BatchTooLargeError)
        time.sleep(0.5)
        assert oversized.fetches == seen
        assert c.position(TP) == 42
        # a seek is a new start: fetched again (and stuck again)
        c.seek(TP, 7)
        err = _poll_until_raised(c, 5)
        assert isinstance(err, BatchTooLargeError) and err.offset == 7
        assert oversized.fetches > seen


def test_a_batch_over_the_fetch_limits_but_under_the_receive_cap_names_only_those(
        oversized) -> None:
    oversized.size = 5 << 20
    with Consumer(bootstrap_servers=oversized.bootstrap, fetch_max_wait_ms=100,
                  max_partition_fetch_bytes=1 << 20) as c:
        c.assign([TP])
        c.seek(TP, 0)
        err = _poll_until_raised(c, 5)
        assert isinstance(err, BatchTooLargeError) and err.size == 5 << 20
        assert "receive_message_max_bytes" not in str(err)
        assert "max_partition_fetch_bytes (1048576)" in str(err)
        assert err.retriable is False
