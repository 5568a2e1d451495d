"""Load: 50 concurrent client connections producing and consuming for a minute
(``KCODEC_LOAD_SECONDS`` changes the length) with no error and nothing lost."""

from __future__ import annotations

import os
import threading
import time

import pytest

from kcodec.broker import Cluster

SECONDS = float(os.environ.get("KCODEC_LOAD_SECONDS", "60"))
PRODUCERS = CONSUMERS = 25


@pytest.mark.slow
def test_fifty_connections_for_a_minute():
    from kcodec.client import Consumer, Producer, TopicPartition

    with Cluster(1, processors=2, handlers=4) as c:
        c.create_topic("load", PRODUCERS)
        bs = c.bootstrap
        stop = threading.Event()       # producers stop
        produced = threading.Event()   # producers stopped: consumers drain what is left
        errors: list[BaseException] = []
        sent = [0] * PRODUCERS
        got = [0] * CONSUMERS
        seen_last = [-1] * CONSUMERS

        def produce(i):
            try:
                with Producer(bootstrap_servers=bs, linger_ms=5, compression_type="lz4") as p:
                    while not stop.is_set():
                        futs = [p.send("load", b"%d" % n, partition=i) for n in range(sent[i], sent[i] + 50)]
                        for f in futs:
                            f.result(30)
                        sent[i] += 50
                        time.sleep(0.01)
            except BaseException as exc:
                errors.append(exc)

        def consume(i):
            try:
                with Consumer(bootstrap_servers=bs, auto_offset_reset="earliest",
                              fetch_max_wait_ms=200) as con:
                    con.assign([TopicPartition("load", i)])
                    while not produced.is_set() or got[i] < sent[i]:
                        for _tp, rs in con.poll(0.2).items():
                            for r in rs:
                                if int(r.value) != seen_last[i] + 1:
                                    raise AssertionError(f"partition {i}: {r.value} after {seen_last[i]}")
                                seen_last[i] = int(r.value)
                            got[i] += len(rs)
                        if produced.is_set() and time.monotonic() > drain_deadline:
                            break
            except BaseException as exc:
                errors.append(exc)

        drain_deadline = float("inf")
        threads = [threading.Thread(target=produce, args=(i,)) for i in range(PRODUCERS)]
        threads += [threading.Thread(target=consume, args=(i,)) for i in range(CONSUMERS)]
        for t in threads:
            t.start()
        t0 = time.monotonic()
        most = 0
        while time.monotonic() - t0 < SECONDS:
            most = max(most, c.nodes[0].connections)
            time.sleep(0.5)
        assert most >= 50
        stop.set()
        for t in threads[:PRODUCERS]:
            t.join(60)
        drain_deadline = time.monotonic() + 30
        produced.set()
        for t in threads[PRODUCERS:]:
            t.join(60)
        assert not errors, errors[:3]
        assert sum(sent) > 0 and got == sent
