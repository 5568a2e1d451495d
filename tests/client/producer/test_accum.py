"""The producer's record accumulator core (kcodec._cy.accum / kcodec._py.accum), both twins:
what its per-record step writes, when it leaves the record to the producer's own path, that
it seals full batches (into its own queues and counts) and never keeps the lock after an
error."""

from __future__ import annotations

import time
from typing import Any

import pytest

from kcodec.errors import EncodeError

SEAL = 600        # the builder's size (header in) at which a batch is sealed


class Batch:
    __slots__ = ("builder", "timestamps", "sequence", "size")

    def __init__(self, builder: Any, sequence: int = -1) -> None:
        self.builder, self.timestamps, self.sequence, self.size = builder, [], sequence, 0


class Future:
    __slots__ = ("batch", "index")


def _accumulator(accum: Any, batch_mod: Any, slow: Any = None) -> Any:
    """The twin's Accumulator, recording its seals (under its lock) and wake-ups."""

    class Recorded(accum.Accumulator):
        def seal(self, tp: tuple[str, int], b: Any) -> None:
            assert self.lock.locked()
            self.sealed.append((tp, b))
            super().seal(tp, b)

        def new(self, p: int, max_size: int = 1 << 20) -> Batch:
            b = self.open[("t", p)] = Batch(batch_mod.RecordBatchBuilder(max_size=max_size))
            return b

    kicks: list[int] = []
    eng = Recorded(SEAL, 1000, lambda: kicks.append(1))
    eng.sealed = []
    eng.kicks = kicks
    eng.counts = {"t": 4}
    eng.bind(Future, slow)
    return eng


def _run(accum: Any, batch_mod: Any, murmur: Any) -> list[Any]:
    """Everything observable, as plain values, for comparing the twins."""
    out: list[Any] = []
    eng = _accumulator(accum, batch_mod)
    keyed = eng.keyed
    for p in range(4):
        eng.new(p)
    keys = [b"key-%d" % i for i in range(12)]
    for i, k in enumerate(keys):
        fut = keyed("t", k, b"v" * i, [("h", b"x")] if i % 3 else None, 1_700_000_000_000 + i)
        p = murmur.partition_for_key(k, 4)
        assert type(fut) is Future and fut.batch is eng.open[("t", p)]
        out.append((p, fut.index))
    assert not eng.lock.locked() and not eng.sealed
    # a batch reaching SEAL bytes is sealed (under the lock) and the sender woken
    big = b"key-1"
    pb = murmur.partition_for_key(big, 4)
    first = keyed("t", big, b"w" * 300, None, 1)
    assert first.batch is eng.open[("t", pb)]
    second = keyed("t", big, b"w" * 300, None, 2)
    assert second.batch is first.batch and ("t", pb) not in eng.open
    assert keyed("t", big, b"w", None, 3) is None      # no open batch now
    # sealed once the builder reached SEAL bytes, the sender woken for each
    out.append([(tp, len(b.timestamps), b.builder.size >= SEAL) for tp, b in eng.sealed])
    assert len(eng.kicks) == len(eng.sealed)
    out.append(sorted((tp, b.timestamps, b.builder.build()) for tp, b in
                      list(eng.open.items()) + eng.sealed))
    # left to the producer's own path, nothing added
    before = {tp: len(b.timestamps) for tp, b in eng.open.items()}
    k0 = b"key-0"
    p0 = murmur.partition_for_key(k0, 4)
    eng.new(p0)
    cases = [("t", "str key", b"v"), ("t", None, b"v"), ("t", bytearray(b"k"), b"v"),
             ("t", k0, "str value"), ("t", k0, memoryview(b"v")), ("nope", k0, b"v")]
    out.append([keyed(t, k, v, None, None) for t, k, v in cases])
    eng.counts["t"] = 0
    out.append(keyed("t", k0, b"v", None, None))
    eng.counts["t"] = 4
    eng.buffered = 1001
    out.append(keyed("t", k0, b"v", None, None))
    eng.buffered = 1000
    eng.closed = True
    out.append(keyed("t", k0, b"v", None, None))
    eng.closed, eng.fatal = False, RuntimeError("x")
    out.append(keyed("t", k0, b"v", None, None))
    eng.fatal = None
    del eng.open[("t", p0)]
    out.append(keyed("t", k0, b"v", None, None))
    full = eng.new(p0, max_size=100)
    assert keyed("t", k0, b"v" * 10, None, 5) is not None      # the first always goes in
    out.append(keyed("t", k0, b"v" * 60, None, 5))             # full: None, nothing added
    out.append(len(full.timestamps))
    assert {tp: len(b.timestamps) for tp, b in eng.open.items() if tp != ("t", p0)} == {
        tp: n for tp, n in before.items() if tp != ("t", p0)}
    # a bad record: the builder's error, the lock released, nothing added
    for bad in ([("h",)], [(1, b"v")], 7):
        with pytest.raises((EncodeError, TypeError)) as info:
            keyed("t", k0, b"v", bad, 5)
        out.append((type(info.value).__name__, str(info.value)))
        assert not eng.lock.locked()
    with pytest.raises(EncodeError):
        keyed("t", k0, b"v", None, "late")
    out.append(len(full.timestamps))
    # the clock's timestamp when none is given, the caller's int when given
    eng.new(p0)
    keyed("t", k0, b"v", None, None)
    keyed("t", k0, b"v", None, 123)
    stamps = eng.open[("t", p0)].timestamps
    assert stamps[0] > 1_600_000_000_000 and stamps[1] == 123
    return out


def test_appender_twins_agree(pair) -> None:
    accums, batches, murmurs = pair("accum"), pair("builder"), pair("murmur")
    got = [_run(a, b, m) for a, b, m in zip(accums, batches, murmurs, strict=False)]
    assert got[0] == got[1]
    none_cases = got[0][14:]      # after 12 (partition, index) pairs, the seals, the bytes
    assert none_cases[0] == [None] * 6
    assert none_cases[1:6] == [None] * 5
    assert none_cases[6] is None and none_cases[7] == 1 and none_cases[-1] == 1


def _seal_state(accum: Any, batch_mod: Any) -> list[Any]:
    """What sealing does to the accumulator's own state: the batch leaves ``open`` for its
    partition's queue, its records and bytes are counted, the next sequence moves past it."""
    eng = _accumulator(accum, batch_mod)
    b = eng.open[("t", 1)] = Batch(batch_mod.RecordBatchBuilder(max_size=1 << 20), sequence=7)
    for i in range(3):
        b.builder.add(b"k%d" % i, b"v" * 10, None, 5, b.timestamps)
    with eng.lock:
        eng.seal(("t", 1), b)
    other = Batch(None, sequence=-1)                     # a batch made elsewhere (prebuilt)
    other.size, other.timestamps = 40, [1, 1]
    with eng.lock:
        eng.seal(("t", 2), other)
    return [("t", 1) in eng.open, [len(q) for q in eng.queues.values()], eng.pending,
            eng.buffered, b.size, dict(eng.next_seq), eng.queues[("t", 1)][0] is b]


def test_sealing_is_the_accumulators_own_bookkeeping(pair) -> None:
    got = [_seal_state(a, b) for a, b in zip(pair("accum"), pair("builder"), strict=False)]
    assert got[0] == got[1]
    open_after, queued, pending, buffered, size, next_seq, head = got[0]
    assert not open_after and queued == [1, 1] and head
    assert pending == 3 and size > 0 and buffered == size   # the prebuilt one is counted
    assert next_seq == {("t", 1): 10}                        # by whoever made it


def test_producer_counts_a_batch_when_it_leaves_open() -> None:
    """The producer's bookkeeping after the change: pending and buffered count a batch
    when it is sealed (not per record), and a batch's count is its timestamps."""
    from kcodec.client.producer.batch import ProducerBatch as _Batch

    b = _Batch("t", 0, None, 0.0, 0, None)
    assert b.count == 0
    b.timestamps.extend([1, 2, 3])
    assert b.count == 3


def _send_calls(accum: Any, batch_mod: Any) -> list[Any]:
    """``Accumulator.send``: Producer.send's signature; a keyed record goes in through
    ``keyed``, anything else reaches ``slow`` with the arguments as given."""
    calls: list[tuple[Any, ...]] = []

    def slow(*args: Any) -> str:
        calls.append(args)
        return "slow"

    eng = a = _accumulator(accum, batch_mod, slow)
    for p in range(4):
        eng.new(p)
    out: list[Any] = []
    fut = a.send("t", b"v", b"k")
    out.append((type(fut).__name__, fut.index, not calls))
    fut = a.send("t", value=b"v2", key=b"k", headers=[("h", b"x")], timestamp=7)
    out.append((fut.index, fut.batch.timestamps[-1]))
    # a chosen partition, a keyless or non-bytes record, an unknown topic: the slow path,
    # with the arguments in send's order and nothing added to any batch
    sizes = {tp: len(b.timestamps) for tp, b in eng.open.items()}
    out.append(a.send("t", b"v", b"k", 2, None, 5))
    out.append(a.send("t", b"v"))
    out.append(a.send("t", "text", "key", headers=[("h", b"x")]))
    out.append(a.send("other", b"v", b"k"))
    out.append(calls)
    assert {tp: len(b.timestamps) for tp, b in eng.open.items()} == sizes
    with pytest.raises(TypeError):
        a.send()
    with pytest.raises(TypeError):
        a.send("t", b"v", b"k", nope=1)
    return out


def test_appender_send_twins_agree(pair) -> None:
    got = [_send_calls(a, b) for a, b in zip(pair("accum"), pair("builder"), strict=False)]
    assert got[0] == got[1]
    assert got[0][0] == ("Future", 0, True)
    assert got[0][-1] == [("t", b"v", b"k", 2, None, 5), ("t", b"v", None, None, None, None),
                          ("t", "text", "key", None, [("h", b"x")], None),
                          ("other", b"v", b"k", None, None, None)]



def test_producer_send_is_one_call_into_the_appender_and_delivers_every_kind() -> None:
    """Without transactions a producer's ``send`` is its appender's (no Python frame of the
    producer's per keyed record); every kind of record still arrives: keyed, keyless,
    chosen partition, str key and value, headers, timestamp; and a transactional producer
    keeps the class's ``send``."""
    from kcodec.broker import Cluster
    from kcodec.client import Consumer, Producer
    from kcodec.client.producer.accum import Accumulator

    with Cluster(1) as c:
        c.create_topic("ap", 3)
        with Producer(bootstrap_servers=c.bootstrap, linger_ms=2) as p:
            assert p.send.__self__ is p._engine.accumulator
            assert isinstance(p.send.__self__, Accumulator)
            futs = [p.send("ap", b"v%d" % i, key=b"k%d" % i) for i in range(300)]
            futs.append(p.send("ap", b"keyless"))
            futs.append(p.send("ap", b"chosen", key=b"k1", partition=2, timestamp=1234))
            futs.append(p.send("ap", "text", key="str-key", headers=[("h", b"x")]))
            futs.append(p.send(topic="ap", value=b"kw", key=b"kw", headers=None))
            results = [f.result(20) for f in futs]
        assert results[-3].partition == 2 and results[-3].timestamp == 1234
        assert all(r.offset >= 0 for r in results)
        with Consumer(bootstrap_servers=c.bootstrap, auto_offset_reset="earliest") as con:
            con.assign([("ap", i) for i in range(3)])
            got: dict[bytes | None, Any] = {}
            deadline = time.monotonic() + 20
            while len(got) < 304 and time.monotonic() < deadline:
                for _tp, rs in con.poll(0.3).items():
                    got.update({r.value: r for r in rs})
        assert len(got) == 304
        assert got[b"chosen"].key == b"k1" and got[b"text"].key == b"str-key"
        assert got[b"text"].headers == [("h", b"x")]
        with Producer(bootstrap_servers=c.bootstrap, transactional_id="ap-txn") as tp:
            assert "send" not in vars(tp)

        class Logged(Producer):
            seen: list[Any] = []

            def send(self, *args: Any, **kwargs: Any) -> Any:
                self.seen.append(args)
                return super().send(*args, **kwargs)

        with Logged(bootstrap_servers=c.bootstrap) as lp:
            assert lp.send("ap", b"sub", key=b"k").result(20).offset >= 0
            assert Logged.seen == [("ap", b"sub")]
