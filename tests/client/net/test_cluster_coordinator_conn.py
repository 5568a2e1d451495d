"""The group coordinator has a connection of its own: a commit never waits for a Fetch.

Before, ``commit()`` went out on the broker's one connection behind the long-poll Fetch
and took ``fetch_max_wait_ms`` every time (2.0 s with 2000; librdkafka's: 0.1 ms).
"""

from __future__ import annotations

import statistics
import time

from kcodec.broker import Cluster
from kcodec.client import Consumer, Producer, TopicPartition
from kcodec.client.net.cluster import broker_of, coordinator_channel


def test_coordinator_channel_ids() -> None:
    assert coordinator_channel(0) == 2**31 - 1
    assert broker_of(coordinator_channel(0)) == 0
    assert broker_of(coordinator_channel(7)) == 7
    assert broker_of(7) == 7 and broker_of(-1) == -1


def test_commit_does_not_wait_for_the_long_poll_fetch() -> None:
    tp = TopicPartition("t", 0)
    with Cluster(1) as broker:
        broker.create_topic("t")
        with Producer(bootstrap_servers=broker.bootstrap) as p:
            for i in range(20):
                p.send("t", b"%d" % i, partition=0)
        with Consumer(bootstrap_servers=broker.bootstrap, group_id="g", enable_auto_commit=False,
                      auto_offset_reset="earliest", fetch_max_wait_ms=2000) as c:
            c.assign([tp])
            got = 0
            deadline = time.monotonic() + 20
            while got < 20 and time.monotonic() < deadline:
                got += sum(len(v) for v in c.poll(1).values())
            assert got == 20
            times = []
            for _ in range(5):
                c.poll(0.05)          # a Fetch is parked at the broker for up to 2 s now
                t0 = time.monotonic()
                c.commit()
                times.append(time.monotonic() - t0)
            assert c.committed([tp]) == {tp: 20}
            conns = {conn.node_id for conn in c._engine.cluster.connections()}
    assert coordinator_channel(0) in conns and 0 in conns
    # before: every commit took the Fetch's 2 s wait; a loaded machine still answers in far
    # less than a quarter of it
    assert statistics.median(times) < 0.5, times
