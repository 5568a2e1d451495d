"""Rebalances under ``kcodec run`` (the slow step): nothing skipped.

A producer writes numbered records to 4 partitions at a steady rate while one ``kcodec run``
works and a second one of the same group joins and leaves (SIGTERM: a clean leave) five
times, under the classic group protocol with an eager assignor (every rebalance revokes
every partition) and under the consumer protocol. Each record must be handled (done) by one
of them at least once, and the group's committed offsets must reach the end of every
partition: a runtime that commits past a record its client skipped would lose it for good,
which is what the classic protocol did before fetch answers were tied to the partition state
they were asked for.
"""

from __future__ import annotations

import threading
import time
import uuid

import pytest

from tests.runtime.support import Broker, RedisServer, Run, read_log, wait_for

pytestmark = pytest.mark.slow

N = 20000
RATE = 1500                 # records a second: the producer is still writing while members move
CYCLES = 5
PARTITIONS = 4

CASES = [
    ("direct", "classic", "range"),
    ("direct", "classic", "roundrobin"),
    ("redis", "classic", "range"),
    ("direct", "consumer", ""),
]


def _produce_steadily(bootstrap: str, topic: str, done: threading.Event,
                      errors: list) -> None:
    from kcodec.client import Producer

    try:
        with Producer(bootstrap_servers=bootstrap, linger_ms=5) as p:
            start = time.monotonic()
            for i in range(N):
                due = start + i / RATE
                pause = due - time.monotonic()
                if pause > 0:
                    time.sleep(pause)
                p.send(topic, b"%d" % i, key=b"%d" % i)
            p.flush(60)
    except BaseException as exc:     # the test reports it
        errors.append(exc)
    finally:
        done.set()


def _end_offsets(bootstrap: str, topic: str) -> dict:
    from kcodec.client import Admin, TopicPartition

    with Admin(bootstrap_servers=bootstrap) as a:
        ends = a.list_offsets([TopicPartition(topic, p) for p in range(PARTITIONS)], "latest")
        return {tp.partition: off for tp, off in ends.items()}


@pytest.mark.parametrize("storage, protocol, assignor", CASES,
                         ids=[f"{s}-{p}{'-' + a if a else ''}" for s, p, a in CASES])
def test_members_moving_skip_nothing(storage: str, protocol: str, assignor: str) -> None:
    broker = Broker(partitions=PARTITIONS)
    redis = RedisServer() if storage == "redis" else None
    topic, group = f"rebal-{uuid.uuid4().hex[:6]}", f"g-{uuid.uuid4().hex[:6]}"
    runs: list[Run] = []
    try:
        from kcodec.client import Admin

        with Admin(bootstrap_servers=broker.bootstrap) as a:
            a.create_topics([topic], num_partitions=PARTITIONS)
        args = ["--storage", storage, "--pullers", "1", "--sinkers", "1",
                "--batch-size", "100", "-X", f"group_protocol={protocol}"]
        if assignor:
            args += ["-X", f"partition_assignment_strategy={assignor}"]
        if redis is not None:
            args += ["--redis-url", redis.url]
        first = Run(broker.bootstrap, topic, group, *args)
        runs.append(first)
        first.wait_ready()
        done, errors = threading.Event(), []
        writer = threading.Thread(target=_produce_steadily,
                                  args=(broker.bootstrap, topic, done, errors), daemon=True)
        writer.start()
        for _ in range(CYCLES):
            time.sleep(0.5)
            second = Run(broker.bootstrap, topic, group, *args, log=first.log)
            runs.append(second)
            second.wait_ready()
            time.sleep(1.0)
            assert second.stop() == 0, second.stderr()
        done.wait(120)
        assert not errors, errors
        ends = _end_offsets(broker.bootstrap, topic)
        assert sum(ends.values()) == N
        want = {(topic, p, o) for p, end in ends.items() for o in range(end)}

        def missing() -> str:
            seen = read_log(first.log)
            gone = sorted(k for k in want if k not in seen)
            return f"{len(gone)} never handled, e.g. {gone[:8]}\n{first.stderr()}"
        wait_for(lambda: want <= set(read_log(first.log)), 120, "every record handled",
                 missing)

        def committed() -> dict:
            with Admin(bootstrap_servers=broker.bootstrap) as a:
                return {tp.partition: off for tp, off in a.committed_offsets(group).items()}
        wait_for(lambda: committed() == ends, 60, "offsets committed to the end of each "
                 "partition", lambda: f"committed {committed()} ends {ends}\n{first.stderr()}")
        assert first.stop() == 0, first.stderr()
    finally:
        for r in runs:
            r.kill_all()
        if redis is not None:
            redis.close()
        broker.close()
