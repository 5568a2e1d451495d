"""The Redis store's whole-claim ack, owed until the sinker's next call (against a real
redis-server): one script a batch in a steady sinker, and nothing lost or counted twice when
a reaper, a lost answer, a release or a close comes between the ack and the next claim."""

from __future__ import annotations

import logging
import time
from typing import Any

import pytest
import redis

from kcodec.runtime.message import Message, decode_many
from tests.runtime.storage import redis_stores

BATCH = 5


def msgs(n: int, start: int = 0) -> list[Message]:
    return [Message("t", i % 3, i, 1_700_000_000_000 + i, 0, b"k%d" % i, b"v%d" % i, [])
            for i in range(start, start + n)]


@pytest.fixture
def stores(redis_server):
    """A function making stores that share one queue (each one process's handle)."""
    with redis_stores(redis_server.url, 30000) as make:
        yield make


def scripts_run(r: Any) -> int:
    """Scripts the server ran (evalsha and eval calls, as INFO commandstats counts them)."""
    stats = r.info("commandstats")
    return sum(int(stats.get(f"cmdstat_{c}", {}).get("calls", 0)) for c in ("evalsha", "eval"))


def count(v: bytes) -> int:
    return len(decode_many(v)) if v[:1] == b"\x02" else 1


def offsets(claim: Any) -> list[int]:
    return sorted(m.offset for m in claim.messages)


def lists(s: Any) -> dict[str, int]:
    """Messages in pending and in every processing list, read from the lists themselves,
    and the raw counts (not backlog's, which shows a negative count as 0)."""
    r = s.r
    proc = sum(count(v) for o in r.smembers(s.k_owners)
               for v in r.lrange(f"{s.prefix}:processing:{o.decode()}", 0, -1))
    pending, busy = r.hmget(s.k_counts, ["pending", "processing"])
    return {"pending": sum(count(v) for v in r.lrange(s.k_pending, 0, -1)), "processing": proc,
            "counted_pending": int(pending or 0), "counted_processing": int(busy or 0)}


def consistent(s: Any) -> dict[str, int]:
    got = lists(s)
    assert (got["counted_pending"], got["counted_processing"]) == \
        (got["pending"], got["processing"]), got
    return got


def test_a_steady_sinker_makes_one_script_call_a_batch(stores) -> None:
    n = 40
    p, s = stores("p0"), stores("s0")
    p.append_batches([msgs(BATCH, i * BATCH) for i in range(n + 1)])
    c = s.claim(BATCH)                  # the scripts loaded, the counts made, a first reap
    assert c is not None
    seen = [m.offset for m in c.messages]
    s.ack(c, c.refs)
    s.backlog()
    reaps = 0
    reap = s.reap

    def counted_reap() -> int:
        nonlocal reaps
        reaps += 1
        return reap()
    s.reap = counted_reap               # (a claim reaps about once a second: a script too)
    before = scripts_run(s.r)
    for _ in range(n):
        c = s.claim(BATCH)
        assert c is not None and len(c.messages) == BATCH
        seen += [m.offset for m in c.messages]
        s.ack(c, c.refs)
    assert s.r.llen(s.k_proc) == 1      # the last ack still owed ...
    b = s.backlog()                     # ... and sent by the backlog: one script more
    assert scripts_run(s.r) - before - reaps == n + 1
    assert b == {"pending": 0, "delayed": 0, "processing": 0, "failed": 0}
    assert sorted(seen) == list(range((n + 1) * BATCH))
    assert not s.r.exists(s.k_proc)
    assert consistent(s)["processing"] == 0
    assert s.claim(BATCH) is None


def test_a_reaper_between_the_ack_and_the_next_claim(stores) -> None:
    """The lease runs out after the ack (a stall) and a reaper takes the claim back: the next
    claim's script does not delete (the lease is not the claim's), acknowledges nothing, and
    the messages are handed out again (at least once): none lost, none counted twice."""
    p, s, other = stores("p0"), stores("s0"), stores("s1")
    p.append_batches([msgs(BATCH), msgs(BATCH, BATCH)])
    c = s.claim(BATCH)
    s.ack(c, c.refs)
    s.r.delete(s.k_lease)               # its lease expired
    assert other.reap() == BATCH        # the claim is pending again
    consistent(s)
    got = []
    c2 = s.claim(100)                   # the owed ack finds the lease gone: by element
    got += [m.offset for m in c2.messages]
    assert sorted(got) == list(range(2 * BATCH))     # the reaped batch handed out again
    assert s.r.llen(s.k_proc) == 2      # the new claim whole: its copy of the same bytes kept
    assert consistent(s)["processing"] == 2 * BATCH
    s.ack(c2, c2.refs)
    assert s.claim(100) is None
    assert consistent(s) == {"pending": 0, "processing": 0, "counted_pending": 0,
                             "counted_processing": 0}


def test_a_reaper_and_another_sinker_between_the_ack_and_the_next_claim(stores) -> None:
    p, s, other = stores("p0"), stores("s0"), stores("s1")
    p.append_batches([msgs(BATCH), msgs(BATCH, BATCH)])
    c = s.claim(BATCH)
    s.ack(c, c.refs)
    s.r.delete(s.k_lease)
    co = other.claim(100)               # reaps, and takes both batches
    assert sorted(m.offset for m in co.messages) == list(range(2 * BATCH))
    assert s.claim(100) is None         # s's owed ack: nothing of it left, nothing counted
    assert consistent(s)["processing"] == 2 * BATCH
    other.ack(co, co.refs)
    assert other.backlog() == {"pending": 0, "delayed": 0, "processing": 0, "failed": 0}
    assert consistent(s)["counted_processing"] == 0


def test_a_claim_script_run_twice_after_its_ack_deletes_nothing_new(stores) -> None:
    """The claim's answer is lost (a timeout after Redis ran it) and the call is made again:
    the first run made the owed ack and claimed; the second finds the lease naming the first
    run's claim, so it does not take the new claim's list (as long as the owed one) for it."""
    p, s, other = stores("p0"), stores("s0", lease_ms=500), stores("s1")
    p.append_batches([msgs(BATCH), msgs(BATCH, BATCH), msgs(BATCH, 2 * BATCH)])
    c = s.claim(BATCH)
    s.ack(c, c.refs)
    script = s._claim
    runs = []

    def lost_once(*args: Any, **kw: Any) -> Any:
        got = script(*args, **kw)
        runs.append(got)
        if len(runs) == 1:
            raise redis.exceptions.TimeoutError("answer lost")
        return got
    s._claim = lost_once
    c2 = s.claim(BATCH)
    assert [r[0] for r in runs] == [1, -1, 0]     # acked and claimed; not again; a claim
    assert c2 is not None and offsets(c2) == list(range(2 * BATCH, 3 * BATCH))
    got = consistent(s)                 # the lost answer's batch is still there, counted
    assert got["processing"] == 2 * BATCH and got["pending"] == 0
    s.ack(c2, c2.refs)
    s.close()                           # its ack by element (the list holds more)
    assert consistent(other)["processing"] == BATCH
    time.sleep(0.7)                     # s's lease runs out: the lost answer's batch back
    c3 = other.claim(100)
    assert offsets(c3) == list(range(BATCH, 2 * BATCH))
    other.ack(c3, c3.refs)
    assert other.backlog() == {"pending": 0, "delayed": 0, "processing": 0, "failed": 0}
    assert consistent(other)["counted_processing"] == 0


def test_close_sends_the_ack_owed(stores) -> None:
    p, s = stores("p0"), stores("s0")
    p.append(msgs(BATCH))
    c = s.claim(BATCH)
    s.ack(c, c.refs)
    assert p.backlog()["processing"] == BATCH       # owed: another process sees it held
    s.close()
    assert not p.r.exists(s.k_proc)
    assert p.backlog() == {"pending": 0, "delayed": 0, "processing": 0, "failed": 0}
    assert consistent(p)["processing"] == 0


def test_close_logs_an_ack_it_could_not_send(stores, caplog) -> None:
    p, s = stores("p0"), stores("s0")
    p.append(msgs(BATCH))
    c = s.claim(BATCH)
    s.ack(c, c.refs)

    def down(*args: Any, **kw: Any) -> Any:
        raise redis.exceptions.ConnectionError("gone")
    s._ack_all = down
    s.give_up = 0.0
    with caplog.at_level(logging.WARNING, "kcodec.runtime"):
        s.close()
    assert "the ack of 5 handled messages was not sent" in caplog.text
    assert consistent(p)["processing"] == BATCH     # (its lease's expiry hands them out)


def test_release_and_a_partial_ack_send_the_ack_owed_first(stores) -> None:
    p, s = stores("p0"), stores("s0")
    p.append_batches([msgs(BATCH), msgs(BATCH, BATCH)])
    c = s.claim(BATCH)
    s.ack(c, c.refs)
    s.release(c)                        # nothing of c left to release: its ack made
    assert consistent(p) == {"pending": BATCH, "processing": 0, "counted_pending": BATCH,
                             "counted_processing": 0}
    c2 = s.claim(BATCH)
    assert offsets(c2) == list(range(BATCH, 2 * BATCH))
    s.ack(c2, c2.refs)
    s.ack(c2, [])                       # a partial ack (of nothing): the owed one made
    assert consistent(p)["counted_processing"] == 0 and not p.r.exists(s.k_proc)
    p.append(msgs(BATCH, 2 * BATCH))
    c3 = s.claim(BATCH)
    s.ack(c3, c3.refs[:2])              # partial: the rest held, then released
    s.release(c3)
    assert consistent(p) == {"pending": 3, "processing": 0, "counted_pending": 3,
                             "counted_processing": 0}
    c4 = s.claim(BATCH)
    assert offsets(c4) == [2 * BATCH + 2, 2 * BATCH + 3, 2 * BATCH + 4]
    s.ack(c4, c4.refs)
    s.release(c4)
    assert p.backlog() == {"pending": 0, "delayed": 0, "processing": 0, "failed": 0}
