"""The store modes' bounds: ``--max-pending`` holds per fetch, not per second, against a
scripted consumer (no broker) for the file and a real Redis store, and end to end with
``kcodec run`` on kcodec's broker and a real redis-server."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest

from kcodec.client import TopicPartition
from kcodec.runtime.config import Settings
from kcodec.runtime.puller import Puller
from kcodec.runtime.storage.file import FileStore
from tests.runtime.storage import redis_stores
from tests.runtime.support import Run, produce


class ScriptedConsumer:
    """Always has records: ``poll`` hands out up to ``max_records`` of each unpaused
    partition's next offsets; commits complete at once."""

    def __init__(self, partitions: int = 2) -> None:
        self.tps = [TopicPartition("t", p) for p in range(partitions)]
        self.next = {tp: 0 for tp in self.tps}
        self.paused: set[TopicPartition] = set()
        self.commits: list[dict] = []

    def assignment(self) -> set[TopicPartition]:
        return set(self.tps)

    def pause(self, *tps: TopicPartition) -> None:
        self.paused.update(tps)

    def resume(self, *tps: TopicPartition) -> None:
        self.paused.difference_update(tps)

    def poll(self, timeout: float, max_records: int = 500) -> dict:
        out: dict = {}
        left = max_records
        for tp in self.tps:
            # a consumer hands out what it had buffered even for a paused partition
            k = min(left, 50 if tp not in self.paused else 2)
            if k <= 0:
                break
            start = self.next[tp]
            out[tp] = [SimpleNamespace(offset=o, timestamp=0, timestamp_type=0, key=None,
                                       value=b"v", headers=()) for o in range(start, start + k)]
            self.next[tp] += k
            left -= k
        return out

    def commit_async(self, offsets: dict, callback: Any = None) -> Any:
        self.commits.append(dict(offsets))
        if callback is not None:
            callback(None)
        return SimpleNamespace(done=lambda: True)

    def commit(self, offsets: dict) -> None:
        self.commits.append(dict(offsets))


@pytest.fixture(params=["file", "redis"])
def store(request, tmp_path) -> Iterator[Any]:
    if request.param == "file":
        yield FileStore(str(tmp_path / "store"), "p0", fsync="never")
        return
    url = request.getfixturevalue("redis_server").url
    with redis_stores(url, 30_000) as make:
        yield make("p0")


def test_max_pending_holds_per_fetch(tmp_path, store) -> None:
    s = Settings(topics=["t"], group="g", state_dir=str(tmp_path), batch_size=100,
                 linger_ms=0, max_pending=1000, stores={"file": {"fsync": "never"}})
    p = Puller(s, 0, store, threading.Event())
    p.consumer = c = ScriptedConsumer()     # type: ignore[assignment]
    for _ in range(60):                     # well within a second: no sinker drains it
        p._store_round()
        waiting = store.backlog()["pending"]
        assert waiting <= s.max_pending
    assert waiting == s.max_pending and c.paused == set(c.tps)
    # committed offsets never pass what the store holds
    assert sum(c.commits[-1].values()) == waiting
    # room again once a sinker takes some: fetching resumes, up to the bound again
    got = store.claim(300)
    assert got is not None
    store.ack(got, got.refs)
    p._read_at = 0.0                         # (the once-a-second re-read, now)
    for _ in range(50):
        p._store_round()
        assert store.backlog()["pending"] <= s.max_pending
    assert store.backlog()["pending"] == s.max_pending
    store.close()


@pytest.mark.parametrize("pullers", [1, 2])
def test_max_pending_holds_end_to_end_on_redis(kbroker, redis_server, pullers) -> None:
    """kcodec run on kcodec's broker with a Redis store and a sinker that takes a batch every
    few seconds: what waits in the store climbs to --max-pending and never past it (with
    several pullers, by at most a batch each: they append at once), while the rest stays in
    Kafka (its lag), not in the store or the pullers."""
    topic, group = f"t-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    produce(kbroker.bootstrap, topic, 6000)
    bound = 1000 if pullers == 1 else 1000 + pullers * 100
    r = Run(kbroker.bootstrap, topic, group, "--storage", "redis", "--redis-url",
            redis_server.url, "--redis-prefix", f"p-{uuid.uuid4().hex[:8]}", "--max-pending",
            "1000", "--batch-size", "100", "--linger-ms", "0", "--pullers", str(pullers),
            mode="slow",
            extra_env={"KCODEC_TEST_SLEEP": "3", "KCODEC_RUN_CLIENT_GROUP_PROTOCOL": "classic"})
    try:
        r.wait_ready()
        seen: list[int] = []
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and (not seen or seen[-1] < 900):
            seen.append(r.ctl("backlog")["pending"])
            time.sleep(0.1)
        for _ in range(20):     # two seconds more at the bound
            seen.append(r.ctl("backlog")["pending"])
            time.sleep(0.1)
        assert max(seen) <= bound, (max(seen), bound)
        assert seen[-1] >= 900, (seen[-1], r.stderr())
        # ctl lag, the runtime running: what Kafka still holds and what the store holds
        lag = r.ctl("lag")
        assert lag["kafka"] >= 6000 - 1000 - 3 * 100, lag
        assert lag["store"] >= 900 and lag["total"] == lag["kafka"] + lag["store"], lag
    finally:
        r.kill_all()
