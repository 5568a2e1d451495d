"""The stores' contract, the same for the file store and the redis store (a real
redis-server): claims under a lease, per-message acks that are final, expired leases back to
pending, delayed retries, the failed queue with requeue and clear."""

from __future__ import annotations

import os
import time
import uuid

import pytest

from kcodec.errors import CorruptDataError, TruncatedError
from kcodec.runtime.message import Message, decode, encode
from kcodec.runtime.storage.file import FileStore
from tests.runtime.storage import redis_stores


def msgs(n: int, start: int = 0, topic: str = "t") -> list[Message]:
    return [Message(topic, i % 3, i, 1_700_000_000_000 + i, 0, b"k%d" % i, b"v%d" % i,
                    [("h", b"x"), ("n", None)]) for i in range(start, start + n)]


@pytest.fixture(params=["file", "redis"])
def stores(request, tmp_path):
    """A function making stores that share one queue (each is one process's handle)."""
    if request.param == "redis":
        with redis_stores(request.getfixturevalue("redis_server").url, 1000) as make:
            yield make
        return
    made = []

    def make_file(owner: str, lease_ms: int = 1000):
        s = FileStore(str(tmp_path / "store"), owner, lease_ms=lease_ms)
        made.append(s)
        return s
    yield make_file
    for s in made:
        try:
            s.close()
        except Exception:
            pass


def offsets(claim) -> list[int]:
    return sorted(m.offset for m in claim.messages)


def drain(store, limit: int = 1000) -> list[Message]:
    out = []
    while True:
        c = store.claim(limit)
        if c is None:
            return out
        out += c.messages
        store.ack(c, c.refs)


def test_message_round_trip_and_bad_bytes() -> None:
    m = Message("topic", 2, 10, 5, 1, None, b"", [("a", None), ("b", b"\x00")], 3, "boom", 7)
    assert decode(encode(m)) == m
    data = encode(m)
    with pytest.raises(TruncatedError):
        decode(data[:-3])
    with pytest.raises(CorruptDataError):
        decode(b"\x09" + data[1:])
    with pytest.raises(CorruptDataError):
        decode(data + b"\x00")


def test_claims_do_not_overlap_and_acks_are_final(stores) -> None:
    w, a, b = stores("p0"), stores("s0"), stores("s1")
    w.append(msgs(5))
    w.append(msgs(5, 5))
    ca = a.claim(5)
    cb = b.claim(5)
    assert ca is not None and cb is not None
    assert set(offsets(ca)).isdisjoint(offsets(cb))
    assert sorted(offsets(ca) + offsets(cb)) == list(range(10))
    assert a.backlog()["processing"] == 10
    a.ack(ca, ca.refs)
    b.ack(cb, cb.refs)
    assert a.claim(100) is None
    assert b.claim(100) is None     # (redis: b's whole ack goes with b's next call)
    assert a.backlog() == {"pending": 0, "delayed": 0, "processing": 0, "failed": 0}


def test_expired_lease_returns_only_unacknowledged(stores) -> None:
    w, a, b = stores("p0"), stores("s0", 1000), stores("s1", 1000)
    w.append(msgs(6))
    ca = a.claim(10)
    assert offsets(ca) == list(range(6))
    done = [r for r, m in zip(ca.refs, ca.messages, strict=False) if m.offset < 3]
    a.ack(ca, done)                      # per message: three of six
    assert b.claim(10) is None           # still leased
    time.sleep(1.3)                      # a dies: its lease runs out
    cb = b.claim(10)
    assert cb is not None and offsets(cb) == [3, 4, 5]
    b.ack(cb, cb.refs)
    a.ack(ca, [r for r in ca.refs if r not in done])   # late acks of the dead owner: harmless
    assert b.claim(10) is None


def test_renew_keeps_the_lease(stores) -> None:
    w, a, b = stores("p0"), stores("s0", 1000), stores("s1", 1000)
    w.append(msgs(3))
    ca = a.claim(10)
    for _ in range(4):
        time.sleep(0.4)
        a.renew()
        assert b.claim(10) is None
    a.ack(ca, ca.refs)


def test_retry_waits_for_its_time(stores) -> None:
    w, s = stores("p0"), stores("s0")
    due = int(time.time() * 1000) + 600
    s.retry([m._replace(attempts=1, not_before=due, error="x") for m in msgs(2)])
    assert s.claim(10) is None
    assert s.backlog()["delayed"] == 2
    time.sleep(0.8)
    c = s.claim(10)
    assert c is not None and [m.attempts for m in c.messages] == [1, 1]
    assert {m.error for m in c.messages} == {"x"}
    s.ack(c, c.refs)
    w.close()


def test_failed_queue_requeue_and_clear(stores) -> None:
    s, ops = stores("s0"), stores("master")
    s.fail([m._replace(attempts=4, error="bad") for m in msgs(3)])
    assert ops.backlog()["failed"] == 3
    assert [m.offset for m in ops.failed_messages(10)] == [0, 1, 2]
    assert ops.requeue() == 3
    assert ops.backlog()["failed"] == 0
    got = drain(s)
    assert sorted(m.offset for m in got) == [0, 1, 2]
    assert {m.attempts for m in got} == {0}
    s.fail(msgs(2))
    assert ops.clear() == 2
    assert ops.backlog()["failed"] == 0 and drain(s) == []


def test_file_store_skips_a_torn_chunk(tmp_path) -> None:
    w = FileStore(str(tmp_path), "p0")
    w.append(msgs(3))
    w.append(msgs(3, 3))
    seg = [f for f in os.listdir(tmp_path / "pending")][0]
    path = tmp_path / "pending" / seg
    data = path.read_bytes()
    path.write_bytes(data[:-5])          # the second chunk torn (a crash mid-write)
    s = FileStore(str(tmp_path), "s0")
    got = drain(s)
    assert [m.offset for m in got] == [0, 1, 2]


def test_file_store_deletes_segments_once_all_acked(tmp_path) -> None:
    w = FileStore(str(tmp_path), "p0", segment_bytes=200)
    for i in range(5):
        w.append(msgs(2, 2 * i))
    w.close()
    s = FileStore(str(tmp_path), "s0")
    assert sorted(m.offset for m in drain(s)) == list(range(10))
    s.claim(1)   # a scan after the last ack drops what is finished
    assert os.listdir(tmp_path / "pending") == []
    assert os.listdir(tmp_path / "acks") == []


def test_many_messages_in_columns_round_trip_and_bad_bytes() -> None:
    from kcodec.runtime.message import decode_many, encode_many

    batch = msgs(7) + [Message("other", 1, 99, 5, 1, None, b"", [("a", None)], 3, "boom", 7),
                       Message("t", 0, 100, 6, 0, b"", None, [], 0x1FFFF, "é", 0)]
    back = decode_many(encode_many(batch))
    assert back[:-1] == batch[:-1] and back[-1].attempts == 0xFFFF      # (u16, as encode's)
    assert decode_many(encode_many([])) == []
    data = encode_many(batch)
    for cut in (1, 8, 40, len(data) - 1):
        with pytest.raises((TruncatedError, CorruptDataError)):
            decode_many(data[:cut])
    with pytest.raises(CorruptDataError, match="unknown version"):
        decode_many(b"\x01" + data[1:])
    with pytest.raises(CorruptDataError, match="after their end"):
        decode_many(data + b"\x00")
    # a length column that says more than there is: caught before slicing
    head = 7 + 2 + 1 + 2 + 5            # version, count, topic count, "t", "other"
    n = len(batch)
    klens = head + n * (2 + 2 + 4 + 8 + 8 + 1 + 8)
    bad = data[:klens] + (1 << 30).to_bytes(4, "big") + data[klens + 4:]
    with pytest.raises(TruncatedError):
        decode_many(bad)


def test_file_store_reads_chunks_written_before_columns(tmp_path) -> None:
    """A store a runtime of the per-message format left behind is still handed out."""
    import struct

    from kcodec.crc import crc32c
    from kcodec.runtime.storage.file import MAGIC_V1

    os.makedirs(tmp_path / "pending")
    body = b"".join(struct.pack(">I", len(encode(m))) + encode(m) for m in msgs(4))
    chunk = struct.pack(">4sIIqI", MAGIC_V1, len(body), 4, 0, crc32c(body)) + body
    (tmp_path / "pending" / "p0-00000000000000000001.seg").write_bytes(chunk)
    s = FileStore(str(tmp_path), "s0")
    s.append(msgs(2, 4))                 # and a new chunk beside it
    assert sorted(m.offset for m in drain(s)) == list(range(6))
    assert s.backlog()["pending"] == 0


def test_partial_acks_and_the_counts_follow_each_step(stores) -> None:
    p, s1, s2 = stores("p0"), stores("s1", lease_ms=1000), stores("s2")
    p.append(msgs(6))
    p.append(msgs(4, 6))
    assert p.backlog() == {"pending": 10, "delayed": 0, "processing": 0, "failed": 0}
    c = s1.claim(6)
    assert offsets(c) == list(range(6))
    assert p.backlog()["processing"] == 6 and p.backlog()["pending"] == 4
    s1.ack(c, c.refs[:2])                    # part of a batch: the rest stays held
    assert p.backlog()["processing"] == 4 and len(c.refs) == 4
    s1.ack(c, c.refs[1:3])
    assert p.backlog()["processing"] == 2
    time.sleep(1.2)                          # s1 dies: its lease expires
    got = drain(s2)
    assert sorted(m.offset for m in got) == [2, 5, 6, 7, 8, 9]   # only the unacknowledged
    assert p.backlog() == {"pending": 0, "delayed": 0, "processing": 0, "failed": 0}


def test_batches_appended_together_are_claimed_apart_in_order(stores) -> None:
    """append_batches (a puller's several batches, one fsync or round trip): each batch a
    claim of its own, first to last, and counted."""
    p, s = stores("p0"), stores("s0")
    p.append_batches([msgs(3), [], msgs(2, 3), msgs(4, 5)])
    assert p.backlog()["pending"] == 9
    got = []
    for limit in (3, 2, 4):
        c = s.claim(limit)
        assert c is not None
        got.append(offsets(c))
        s.ack(c, c.refs)
    assert got == [[0, 1, 2], [3, 4], [5, 6, 7, 8]]
    assert s.claim(10) is None
    assert p.backlog() == {"pending": 0, "delayed": 0, "processing": 0, "failed": 0}


def test_a_whole_ack_after_the_lease_went_leaves_the_new_holder_alone(stores) -> None:
    """A sinker that lost its lease (another took its batch back) and then acknowledges
    the whole batch: the counts stay right and the new holder's claim is its own."""
    p, a, b = stores("p0"), stores("s0", 1000), stores("s1", 1000)
    p.append(msgs(6))
    ca = a.claim(10)
    assert offsets(ca) == list(range(6))
    time.sleep(1.3)                      # a stalls past its lease
    cb = b.claim(10)
    assert cb is not None and offsets(cb) == list(range(6))
    a.ack(ca, ca.refs)                   # late, and whole
    assert ca.refs == []
    assert p.backlog()["processing"] in (0, 6)   # file: a's acks count (it did handle them)
    b.ack(cb, cb.refs)
    assert b.claim(10) is None and a.claim(10) is None
    assert p.backlog() == {"pending": 0, "delayed": 0, "processing": 0, "failed": 0}


def test_redis_reads_what_an_older_runtime_wrote(redis_server) -> None:
    """One message an element, no counts: still claimed, and counted."""
    from kcodec.runtime.storage.redis import RedisStore

    prefix = f"test:{uuid.uuid4().hex[:8]}"
    s = RedisStore(redis_server.url, prefix, "s0", give_up_s=10)
    try:
        s.r.lpush(f"{prefix}:pending", *[encode(m) for m in msgs(5)])
        assert s.backlog()["pending"] == 5
        s.append(msgs(3, 5))
        assert s.backlog()["pending"] == 8
        assert sorted(m.offset for m in drain(s, 4)) == list(range(8))
        assert s.backlog()["pending"] == 0 and s.backlog()["processing"] == 0
    finally:
        s.close()
