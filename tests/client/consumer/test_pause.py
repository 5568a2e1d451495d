"""pause(): a paused partition returns nothing until resume, not even records a fetch had
brought in before the pause (the consumer prefetches); after resume they come from the
position on, none skipped and none twice."""

from __future__ import annotations

import time

from kcodec.broker import Cluster
from kcodec.client import Consumer, Producer, TopicPartition


def test_a_paused_partition_returns_nothing_it_had_fetched_before_the_pause() -> None:
    tp = TopicPartition("t", 0)
    with Cluster(1) as broker:
        with Producer(bootstrap_servers=broker.bootstrap) as p:
            for i in range(50):
                p.send("t", b"%d" % i, partition=0)
            p.flush(10)
        with Consumer(bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest",
                      max_poll_records=5) as c:
            c.assign([tp])
            first: list = []
            deadline = time.monotonic() + 10
            while not first and time.monotonic() < deadline:
                first = c.poll(1.0).get(tp, [])
            # one Fetch brought all 50: 45 wait in the consumer's buffer
            assert [r.offset for r in first] == [0, 1, 2, 3, 4]
            c.pause(tp)
            assert c.poll(0.3) == {}
            assert c.position(tp) == 5
            c.resume(tp)
            rest: list[int] = []
            deadline = time.monotonic() + 10
            while len(rest) < 45 and time.monotonic() < deadline:
                rest += [r.offset for r in c.poll(1.0).get(tp, [])]
            assert rest == list(range(5, 50))
