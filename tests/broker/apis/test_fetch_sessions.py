"""Fetch sessions (kcodec/broker/apis/fetch_sessions.py): random ids, each its principal's
(another user cannot read, advance or close it), and Kafka's eviction rules: stale sessions
first, else the smallest if the new one is bigger, so that empty sessions evict nobody; one
principal holds at most its share."""

from __future__ import annotations

import pytest

from kcodec.broker import Cluster
from kcodec.broker.apis.fetch_sessions import CachedPartition, FetchSessions
from kcodec.broker.security import ListenerSecurity, PlainServer
from kcodec.protocol import ErrorCode, FetchRequest
from tests.support.raw_client import Raw


def _parts(n: int) -> list:
    return [(("t", i), CachedPartition(0, 1024)) for i in range(n)]


def test_ids_are_random():
    cache = FetchSessions()
    ids = [cache.new("User:a", _parts(1)).id for _ in range(50)]
    assert len(set(ids)) == 50 and 0 not in ids
    assert ids != sorted(ids) and max(ids) - min(ids) > 1_000_000


def test_a_session_is_its_principals():
    cache = FetchSessions()
    s = cache.new("User:bob", _parts(2))
    assert cache.get(s.id, "User:mallory") is None
    cache.close(s.id, "User:mallory")
    assert cache.get(s.id, "User:bob") is s


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_empty_sessions_evict_nobody_and_stale_ones_go_first():
    clock = Clock()
    cache = FetchSessions(max_sessions=3, max_per_principal=10, eviction_ms=120_000, clock=clock)
    bob = [cache.new("User:bob", _parts(2)) for _ in range(3)]
    for _ in range(100):
        assert cache.new("User:mallory", []) is None         # no room, nothing evicted
    assert all(cache.get(s.id, "User:bob") is s for s in bob)
    # a bigger session evicts the smallest (the least recently used of them)
    big = cache.new("User:carol", _parts(3))
    assert big is not None and len(cache) == 3
    assert cache.get(bob[0].id, "User:bob") is None
    # nothing is smaller than carol's, nor stale: refused
    assert cache.new("User:mallory", _parts(2)) is None
    clock.now += 121                                           # all stale now
    assert cache.new("User:mallory", []) is not None
    assert cache.get(bob[1].id, "User:bob") is None            # the least recently used


def test_one_principal_cannot_push_out_the_others():
    cache = FetchSessions(max_sessions=10, max_per_principal=3)
    bob = cache.new("User:bob", _parts(1))
    for _ in range(50):
        assert cache.new("User:mallory", _parts(5)) is not None
    assert len([s for s in cache.sessions.values() if s.principal == "User:mallory"]) == 3
    assert cache.get(bob.id, "User:bob") is bob


# ---------------------------------------------------------------- through the broker
def _fetch(session_id: int, epoch: int, topics: list) -> FetchRequest:
    return FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20,
                        session_id=session_id, session_epoch=epoch, topics=topics)


@pytest.fixture(scope="module")
def broker():
    users = {"bob": "pw", "mallory": "pw"}
    with Cluster(1, security=ListenerSecurity(sasl={"PLAIN": lambda: PlainServer(users)})) as b:
        b.create_topic("bobs", 1)
        host, port = b.bootstrap.split(",")[0].rsplit(":", 1)
        yield b, (host, int(port))


def test_another_user_cannot_use_a_session(broker):
    _, addr = broker
    bob, mallory = Raw(addr, "bob"), Raw(addr, "mallory")
    try:
        t = [FetchRequest.FetchTopic(topic="bobs", partitions=[FetchRequest.FetchPartition(
            partition=0, fetch_offset=0, partition_max_bytes=1024)])]
        opened = bob.call(_fetch(0, 0, t), 12)
        sid = opened.session_id
        assert opened.error_code == 0 and sid != 0
        for epoch in range(1, 30):            # guessing the epoch gets nowhere
            got = mallory.call(_fetch(sid, epoch, []), 12)
            assert got.error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
            assert got.responses == []
        mallory.call(_fetch(sid, -1, []), 12)  # "closing" it does not close it
        nxt = bob.call(_fetch(sid, 1, []), 12)
        assert nxt.error_code == 0 and nxt.session_id == sid
    finally:
        bob.close()
        mallory.close()
