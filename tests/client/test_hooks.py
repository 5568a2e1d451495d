"""The clients' user-supplied hooks: partitioners, serializers and deserializers,
interceptors and assignors (kcodec.client.hooks and the producer's and consumer's hooks
modules), unit by unit and end to end through kcodec's broker."""

from __future__ import annotations

import asyncio
import json
import logging
import subprocess
import sys
import zlib
from typing import Any

import pytest

from kcodec.broker import Cluster
from kcodec.client import (
    AsyncConsumer,
    AsyncProducer,
    Consumer,
    ConsumerConfig,
    Producer,
    ProducerConfig,
    TopicPartition,
)
from kcodec.client.consumer.assignors import Assignment, Subscription, UserAssignor
from kcodec.client.consumer.hooks import ConsumerHooks
from kcodec.client.errors import (
    AssignorError,
    KafkaTimeoutError,
    PartitionerError,
    RecordDeserializationError,
    SerializationError,
)
from kcodec.client.hooks import Codec, Interceptors, ProducerRecord, SerializationContext
from kcodec.client.producer.partitioner import make_partitioner, partition_for_key
from kcodec.errors import KcodecError
from tests.support import REPO, project_text


# ---------------------------------------------------------------- helpers named by tests
def last_partition(topic: str, key: bytes | None, count: int) -> int:
    """A partitioner for "module:attr": every record to the last partition."""
    return count - 1


def picky(topic: str, key: bytes | None, count: int) -> int:
    """A partitioner that fails on some keys: b"bad" raises, b"big" is out of range."""
    if key == b"bad":
        raise ValueError("bad key")
    return 99 if key == b"big" else count - 1


class FirstByte:
    """An object partitioner: the key's first byte, keyless records to 0."""

    def __init__(self) -> None:
        self.calls = 0

    def partition(self, topic: str, key: bytes | None, count: int) -> int:
        self.calls += 1
        return key[0] % count if key else 0


class Recorder:
    """An interceptor for both roles that records what it saw."""

    def __init__(self) -> None:
        self.sent: list[Any] = []
        self.acks: list[Any] = []
        self.consumed: list[Any] = []
        self.commits: list[Any] = []
        self.closed = False

    def on_send(self, record: ProducerRecord) -> ProducerRecord:
        self.sent.append(record.value)
        record.headers = list(record.headers or []) + [("seen", b"1")]
        return record

    def on_acknowledgement(self, metadata: Any, error: Any) -> None:
        self.acks.append((metadata, error))

    def on_consume(self, records: dict) -> dict:
        self.consumed.append(sum(len(v) for v in records.values()))
        return records

    def on_commit(self, offsets: dict) -> None:
        self.commits.append(dict(offsets))

    def close(self) -> None:
        self.closed = True


class Broken:
    """An interceptor whose every method raises."""

    def on_send(self, record: Any) -> Any:
        raise RuntimeError("on_send broke")

    def on_acknowledgement(self, metadata: Any, error: Any) -> None:
        raise RuntimeError("on_acknowledgement broke")

    def on_consume(self, records: Any) -> Any:
        raise RuntimeError("on_consume broke")

    def on_commit(self, offsets: Any) -> None:
        raise RuntimeError("on_commit broke")


class Reverse:
    """A user assignor: every partition to the member whose id sorts last; it reads its
    members' user data."""

    name = "reverse"
    version = 1

    def __init__(self) -> None:
        self.seen_user_data: list[Any] = []
        self.assigned: list[Any] = []

    def user_data(self, topics: list[str]) -> bytes:
        return b"hello " + ",".join(topics).encode()

    def assign(self, partitions: dict, subscriptions: dict) -> dict:
        self.seen_user_data = [s.user_data for s in subscriptions.values()]
        last = max(subscriptions)
        return {last: {t: list(range(n)) for t, n in partitions.items()}}

    def on_assignment(self, assigned: dict, generation: int) -> None:
        self.assigned.append((assigned, generation))


# ---------------------------------------------------------------- partitioners
def test_builtin_partitioners_by_librdkafka_name() -> None:
    assert make_partitioner("murmur2_random") is None          # the default: its own path
    assert ProducerConfig().hooks is None
    keys = [b"", b"a", b"21", b"abc", bytes(range(40))]
    murmur = make_partitioner("murmur2")
    consistent = make_partitioner("consistent")
    crand = make_partitioner("consistent_random")
    assert murmur is not None and consistent is not None and crand is not None
    for k in keys:
        assert murmur.choose("t", k, 7) == partition_for_key(k, 7)
        assert consistent.choose("t", k, 7) == zlib.crc32(k) % 7
        assert crand.choose("t", k, 7) == zlib.crc32(k) % 7 and crand.sticky(k) == (k == b"")
    # keyless: murmur2 and consistent as the empty key; consistent_random stays sticky
    assert murmur.choose("t", None, 7) == partition_for_key(b"", 7)
    assert consistent.choose("t", None, 7) == 0 and not consistent.sticky_keyless
    assert crand.sticky(None) and not murmur.sticky(None) and not murmur.sticky(b"")
    rnd = make_partitioner("RANDOM")
    assert rnd is not None
    assert {rnd.choose("t", b"same", 4) for _ in range(200)} == {0, 1, 2, 3}
    with pytest.raises(ValueError, match="unknown name 'fnv9'.*murmur2_random"):
        ProducerConfig(partitioner="fnv9")


def test_user_partitioner_shapes() -> None:
    for given in (last_partition, "tests.client.test_hooks:last_partition"):
        p = make_partitioner(given)
        assert p is not None and p.choose("t", b"k", 5) == 4
    obj = FirstByte()
    p = make_partitioner(obj)
    assert p is not None and p.choose("t", b"\x07", 5) == 2 and obj.calls == 1
    p = make_partitioner(FirstByte)                 # a class: one instance of it
    assert p is not None and p.choose("t", b"\x03", 2) == 1
    for bad, match in ((42, "not int"), ("nomodule_xyz:f", "cannot import"),
                       ("tests.client.test_hooks:nope", "has no 'nope'")):
        with pytest.raises(ValueError, match=match):
            ProducerConfig(partitioner=bad)


@pytest.mark.parametrize("fn, match", [
    (lambda t, k, n: n, "returned partition 3, outside 0..2"),
    (lambda t, k, n: -1, "returned partition -1"),
    (lambda t, k, n: "1", "returned '1', not a partition number"),
    (lambda t, k, n: True, "returned True"),
    (lambda t, k, n: 1 / 0, "raised ZeroDivisionError: division by zero"),
])
def test_bad_partitioners_fail_clearly(fn, match) -> None:
    p = make_partitioner(fn)
    assert p is not None
    with pytest.raises(PartitionerError, match=match) as info:
        p.choose("t", b"k", 3)
    assert isinstance(info.value, KcodecError)
    assert "'t' (3 partitions)" in str(info.value) and "nothing was sent" in str(info.value)


# ---------------------------------------------------------------- serializers
def test_codec_calls_each_shape_as_it_wants() -> None:
    ctx = SerializationContext("t", "value", [])
    one = Codec(json.loads, "value_deserializer")                   # kafka-python's shape
    two = Codec(lambda data, ctx: (ctx.topic, ctx.field, data), "value_deserializer")
    assert not one.with_ctx and two.with_ctx
    assert one(b'{"a": 1}', ctx) == {"a": 1}
    assert two(b"x", ctx) == ("t", "value", b"x")
    assert Codec(str.encode, "value_serializer")("é", ctx) == "é".encode()
    assert Codec("json:dumps", "value_serializer")([1], ctx) == "[1]"
    assert one(None, ctx) is None and two(None, ctx) is None         # tombstones stay
    with pytest.raises(ValueError, match="value_serializer must be a callable"):
        ProducerConfig(value_serializer=b"nope")
    with pytest.raises(ValueError, match="key_deserializer must be a callable"):
        ConsumerConfig(key_deserializer="org.apache.kafka.common.serialization.Foo")


def test_interceptor_chain_skips_what_raises(caplog) -> None:
    rec = Recorder()
    chain = Interceptors([Broken(), rec, Broken], "interceptors", ("on_send",))
    assert isinstance(chain.items[2], Broken)                     # a class: made once
    r = ProducerRecord("t", b"v")
    with caplog.at_level(logging.WARNING, logger="kcodec.client"):
        out = chain.chain("on_send", r, lambda x: isinstance(x, ProducerRecord))
        chain.notify("on_acknowledgement", None, None)
    assert out is r and rec.sent == [b"v"] and r.headers == [("seen", b"1")]
    assert sum("Broken.on_send raised; skipped" in m for m in caplog.messages) == 2
    assert "Broken.on_acknowledgement raised; skipped" in caplog.text
    with pytest.raises(ValueError, match="has none of the methods on_send"):
        Interceptors([object()], "interceptors", ("on_send", "on_acknowledgement"))


# ---------------------------------------------------------------- records leaving poll
def _records(twin: Any, values: list[bytes]) -> list:
    Record = twin("_record").Record
    return [Record(10 + i, 0, 0, b"k%d" % i, v, [("h", b"x")]) for i, v in enumerate(values)]


def test_deserializers_on_both_twins_records(twin) -> None:
    hooks = ConsumerHooks.build(ConsumerConfig(
        key_deserializer=bytes.decode,
        value_deserializer=lambda data, ctx: (ctx.topic, ctx.headers, json.loads(data))))
    assert hooks is not None
    tp = TopicPartition("t", 0)
    out, err = hooks.deliver({tp: _records(twin, [b"1", b"[2]"])}, lambda *a: None)
    assert err is None
    assert [(r.key, r.value) for r in out[tp]] == [
        ("k0", ("t", [("h", b"x")], 1)), ("k1", ("t", [("h", b"x")], [2]))]


def test_a_failing_deserializer_stops_its_partition_at_the_record(twin) -> None:
    hooks = ConsumerHooks.build(ConsumerConfig(value_deserializer=json.loads))
    assert hooks is not None
    bad, good = TopicPartition("t", 0), TopicPartition("t", 1)
    rewound: list[Any] = []
    out, err = hooks.deliver({bad: _records(twin, [b"1", b"{oops", b"3"]),
                              good: _records(twin, [b"4"])},
                             lambda tp, off: rewound.append((tp, off)))
    assert [r.value for r in out[bad]] == [1] and [r.value for r in out[good]] == [4]
    assert rewound == [(bad, 11)]            # the bad record and after: fetched again
    assert isinstance(err, RecordDeserializationError) and isinstance(err, KcodecError)
    assert (err.topic, err.partition, err.offset) == ("t", 0, 11)
    assert isinstance(err.__cause__, json.JSONDecodeError)
    assert "value_deserializer failed on t[0] at offset 11: JSONDecodeError" in str(err)
    assert "seek(TopicPartition('t', 0), 12)" in str(err)


# ---------------------------------------------------------------- assignors
def test_user_assignor_checks_what_it_returns() -> None:
    a = UserAssignor(Reverse())
    members = {"m1": Subscription(["t"]), "m2": Subscription(["t"])}
    got = a.assign({"t": 3}, members)
    assert got == {"m1": Assignment({}), "m2": Assignment({"t": [0, 1, 2]})}
    sub = a.subscription(["t"], {"t": [1]}, 4)
    assert (sub.user_data, sub.version, sub.owned_partitions) == (b"hello t", 1, {"t": [1]})
    assert Subscription.decode(sub.encode()).user_data == b"hello t"

    def bad(result: Any) -> UserAssignor:
        class A:
            name = "bad"

            def assign(self, partitions: Any, subscriptions: Any) -> Any:
                if isinstance(result, Exception):
                    raise result
                return result
        return UserAssignor(A())
    for result, match in (({"x": {}}, "assigned to 'x', not a member"),
                          ({"m1": {"t": [3]}}, r"assigned t\[3\] to 'm1', which is not"),
                          ({"m1": {"u": [0]}}, r"assigned u\[0\]"),
                          ({"m1": {"t": [0]}, "m2": {"t": [0]}}, "to both 'm1' and 'm2'"),
                          ([1], "returned list"),
                          (KeyError("boom"), "assign raised KeyError")):
        with pytest.raises(AssignorError, match=match):
            bad(result).assign({"t": 3}, members)


def test_assignor_settings() -> None:
    with pytest.raises(ValueError, match="runs in the classic group protocol.*group_protocol="
                                         "'classic'"):
        ConsumerConfig(partition_assignment_strategy=[Reverse()])
    cfg = ConsumerConfig(group_protocol="classic",
                         partition_assignment_strategy=[Reverse, "range"])
    assert [getattr(a, "name", a) for a in cfg.assignors] == ["reverse", "range"]
    assert ConsumerConfig(partition_assignment_strategy="range,sticky").assignors == [
        "range", "sticky"]                     # built-in names under either protocol
    for bad, match in (("nosuch", "unknown assignor 'nosuch'"), ([object()], "needs a name"),
                       ([Reverse(), Reverse()], "named twice")):
        with pytest.raises(ValueError, match=match):
            ConsumerConfig(group_protocol="classic", partition_assignment_strategy=bad)


# ---------------------------------------------------------------- end to end
def _end(c: Cluster, topic: str, partition: int) -> int:
    return c.state.topics[topic].partitions[partition].log.log_end_offset


def _fill(c: Cluster, topic: str, values: list[bytes]) -> None:
    with Producer(bootstrap_servers=c.bootstrap) as p:
        for v in values:
            p.send(topic, v, partition=0)


def _drain(con: Any, want: int, timeout: float = 10) -> list:
    import time

    got: list = []
    deadline = time.monotonic() + timeout
    while len(got) < want and time.monotonic() < deadline:
        for recs in con.poll(0.5).values():
            got.extend(recs)
    return got


def test_producer_hooks_end_to_end() -> None:
    rec = Recorder()
    with Cluster(1) as c:
        c.create_topic("t", 3)
        with Producer(bootstrap_servers=c.bootstrap, partitioner=FirstByte(),
                      key_serializer=str.encode,
                      value_serializer=lambda v, ctx: json.dumps([ctx.topic, v]).encode(),
                      interceptors=[Broken(), rec], api_timeout_ms=1000) as p:
            assert p.send.__func__ is Producer.send   # hooks: the general path, not the C one
            r1 = p.send("t", {"n": 1}, key="\x05").result(10)
            r0 = p.send("t", {"n": 2}).result(10)               # keyless: the user decides
            r2 = p.send("t", {"n": 3}, key="\x01", partition=2).result(10)
            with pytest.raises(SerializationError, match="value_serializer failed for a "
                                                        "record to 't': TypeError"):
                p.send("t", {1, 2})
            # a partition the metadata does not have: fresh metadata is awaited (a partition
            # may have been added), then, as Java's producer, a timeout naming it
            with pytest.raises(KafkaTimeoutError, match="partition 7 of topic 't' with "
                                                       "partition count 3 is not present"):
                p.send("t", "x", partition=7)
            p.flush()
            assert (r1.partition, r0.partition, r2.partition) == (2, 0, 2)
        assert rec.closed
        assert rec.sent == [{"n": 1}, {"n": 2}, {"n": 3}, {1, 2}, "x"]
        oks = [(m.topic, m.partition, m.offset) for m, e in rec.acks if e is None]
        assert sorted(oks) == [("t", 0, 0), ("t", 2, 0), ("t", 2, 1)]
        errs = [(m.partition, type(e).__name__) for m, e in rec.acks if e is not None]
        assert errs == [(-1, "SerializationError"), (7, "KafkaTimeoutError")]
        con = Consumer(bootstrap_servers=c.bootstrap, auto_offset_reset="earliest")
        con.assign([TopicPartition("t", 2)])
        got = _drain(con, 2)
        con.close()
        assert [(r.key, json.loads(r.value), r.headers) for r in got] == [
            (b"\x05", ["t", {"n": 1}], [("seen", b"1")]),
            (b"\x01", ["t", {"n": 3}], [("seen", b"1")])]


def test_a_bad_partitioner_fails_that_send_only() -> None:
    rec = Recorder()
    with Cluster(1) as c:
        c.create_topic("t", 2)
        with Producer(bootstrap_servers=c.bootstrap, partitioner=picky,
                      interceptors=[rec]) as p:
            assert p.send("t", b"a", key=b"ok").result(10).partition == 1
            with pytest.raises(PartitionerError, match="picky raised ValueError: bad key"):
                p.send("t", b"b", key=b"bad")
            with pytest.raises(PartitionerError, match="returned partition 99, outside 0..1"):
                p.send("t", b"c", key=b"big")
            assert p.send("t", b"d", key=b"ok").result(10).partition == 1   # still sending
            p.flush()
        assert _end(c, "t", 1) == 2     # a and d
        assert _end(c, "t", 0) == 0
        assert sorted(type(e).__name__ for _, e in rec.acks if e is not None) == [
            "PartitionerError", "PartitionerError"]


def test_keyless_records_keep_sticky_without_a_user_partitioner() -> None:
    with Cluster(1) as c:
        c.create_topic("t", 8)
        # serializers alone: the hooked path, with the default partitioner's choices
        with Producer(bootstrap_servers=c.bootstrap, value_serializer=str.encode,
                      linger_ms=50) as p:
            parts = {p.send("t", f"v{i}").result(10).partition for i in range(5)}
            keyed = p.send("t", "v", key=b"21").result(10).partition
        assert len(parts) == 1                      # sticky: one partition for the batch
        assert keyed == partition_for_key(b"21", 8)


def test_async_producer_hooks() -> None:
    rec = Recorder()

    async def main(bootstrap: str) -> int:
        async with AsyncProducer(bootstrap_servers=bootstrap,
                                 partitioner="tests.client.test_hooks:picky",
                                 value_serializer=json.dumps, interceptors=[rec]) as p:
            f = await p.send("t", {"a": 1}, key=b"ok")
            with pytest.raises(PartitionerError, match="bad key"):
                await p.send("t", 1, key=b"bad")
            res = await f
            await p.flush()
            return res.partition

    with Cluster(1) as c:
        c.create_topic("t", 3)
        assert asyncio.run(main(c.bootstrap)) == 2
    assert rec.sent == [{"a": 1}, 1]
    assert sorted((m.partition, e is None) for m, e in rec.acks) == [(-1, False), (2, True)]
    assert rec.closed


def test_send_columns_honours_the_partitioner_and_refuses_serializers() -> None:
    pa = pytest.importorskip("pyarrow")
    with Cluster(1) as c:
        c.create_topic("t", 3)
        with Producer(bootstrap_servers=c.bootstrap, partitioner=FirstByte()) as p:
            futs = p.send_columns("t", pa.array([b"a", b"b", b"c"]),
                                  key=pa.array([b"\x01", b"\x02", None]),
                                  partition=pa.array([None, 0, None], type=pa.int32()))
            for f in futs:
                f.result(10)
        ends = [_end(c, "t", i) for i in range(3)]
        assert ends == [2, 1, 0]           # b given 0, keyless c to 0, \x01 to 1
        with Producer(bootstrap_servers=c.bootstrap, value_serializer=bytes) as p:
            with pytest.raises(ValueError, match="send_columns sends the columns' bytes as "
                                                 "they are"):
                p.send_columns("t", pa.array([b"a"]))


def test_consumer_hooks_end_to_end(caplog) -> None:
    rec = Recorder()
    with Cluster(1) as c:
        c.create_topic("t", 1)
        _fill(c, "t", [b"1", b"2", b"{bad", b"4", None])
        con = Consumer(bootstrap_servers=c.bootstrap, group_id="g", group_protocol="classic",
                       auto_offset_reset="earliest", enable_auto_commit=False,
                       value_deserializer=json.loads, interceptors=[Broken(), rec])
        con.subscribe(["t"])
        tp = TopicPartition("t", 0)
        with caplog.at_level(logging.WARNING, logger="kcodec.client"):
            got = _drain(con, 2)
        assert [r.value for r in got] == [1, 2]          # the records before the bad one
        with pytest.raises(RecordDeserializationError, match=r"t\[0\] at offset 2") as info:
            for _ in range(20):
                con.poll(0.5)
        assert info.value.offset == 2
        with pytest.raises(RecordDeserializationError):  # again: never skipped silently
            for _ in range(20):
                con.poll(0.5)
        assert con.position(tp) == 2
        con.seek(tp, 3)                                  # the application skips it
        got = _drain(con, 2)
        assert [r.value for r in got] == [4, None]       # a tombstone stays None
        con.commit()
        assert rec.commits == [{tp: 5}]
        con.close()
        assert rec.closed and sum(rec.consumed) == 4
        assert "Broken.on_consume raised; skipped" in caplog.text


def test_async_consumer_hooks() -> None:
    rec = Recorder()

    def key_of(k: bytes, ctx: SerializationContext) -> tuple:
        if k == b"boom":
            raise ValueError("no such key")
        return (ctx.field, k)

    async def main(bootstrap: str) -> tuple[list, Any]:
        async with AsyncConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                                 key_deserializer=key_of, interceptors=[rec]) as con:
            con.assign([TopicPartition("t", 0)])
            out: list = []
            try:
                for _ in range(20):
                    for recs in (await con.poll(0.5)).values():
                        out.extend(r.key for r in recs)
            except RecordDeserializationError as exc:
                return out, (exc.offset, await con.position(TopicPartition("t", 0)))
            return out, None

    with Cluster(1) as c:
        c.create_topic("t", 1)
        with Producer(bootstrap_servers=c.bootstrap) as p:
            p.send("t", b"v", key=b"a", partition=0)
            p.send("t", b"v", partition=0)
            p.send("t", b"v", key=b"boom", partition=0)
        out, failed = asyncio.run(main(c.bootstrap))
    assert out == [("key", b"a"), None] and failed == (2, 2)
    assert rec.closed and rec.consumed == [2]


def test_poll_columns_refuses_deserializers() -> None:
    with Cluster(1) as c:
        con = Consumer(bootstrap_servers=c.bootstrap, value_deserializer=bytes.decode)
        try:
            with pytest.raises(ValueError, match="poll_columns returns the records' bytes"):
                con.poll_columns()
        finally:
            con.close()


def test_a_user_assignor_in_a_classic_group() -> None:
    """Two members name the user assignor first: the group agrees on it by name (as a Java
    member with an assignor of that name() would) and its leader runs it."""
    import threading
    import time

    a1, a2 = Reverse(), Reverse()
    stop = threading.Event()
    errors: list[BaseException] = []

    def run(con: Consumer) -> None:
        try:
            con.subscribe(["t"])
            while not stop.is_set():
                con.poll(0.1)
        except BaseException as exc:   # pragma: no cover - reported below
            errors.append(exc)

    with Cluster(1) as c:
        c.create_topic("t", 3)
        cons = [Consumer(bootstrap_servers=c.bootstrap, group_id="ug", group_protocol="classic",
                         partition_assignment_strategy=[a, "range"], heartbeat_interval_ms=100,
                         auto_offset_reset="earliest") for a in (a1, a2)]
        threads = [threading.Thread(target=run, args=(con,)) for con in cons]
        try:
            for t in threads:
                t.start()
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and not errors:
                if sorted(len(con.assignment()) for con in cons) == [0, 3] and \
                        len(a1.assigned) and len(a2.assigned):
                    break
                time.sleep(0.1)
        finally:
            stop.set()
            for t in threads:
                t.join(30)
        assert not errors, errors
        assert sorted(len(con.assignment()) for con in cons) == [0, 3]
        # the protocol both named first; the member whose id sorts last got it all
        assert {con._engine.group.protocol for con in cons} == {"reverse"}
        owner = max(cons, key=lambda con: con._engine.group.member_id)
        assert len(owner.assignment()) == 3
        leader = a1 if a1.seen_user_data else a2
        assert leader.seen_user_data == [b"hello t", b"hello t"]
        for con in cons:
            con.close()


def test_cli_produce_names_a_partitioner(tmp_path) -> None:
    (tmp_path / "mypart.py").write_text(
        "def to_one(topic, key, count):\n    return 1\n")
    env = {"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"}
    with Cluster(1) as c:
        c.create_topic("t", 3)
        p = subprocess.run([sys.executable, "-m", "kcodec", "produce", "-b", c.bootstrap,
                            "-t", "t", "--partitioner", "mypart:to_one", "a", "b"],
                           capture_output=True, cwd=tmp_path, env=env, timeout=120)
        assert p.returncode == 0, p.stderr.decode()
        assert _end(c, "t", 1) == 2
        p = subprocess.run([sys.executable, "-m", "kcodec", "produce", "-b", c.bootstrap,
                            "-t", "t", "--partitioner", "fnv9", "a"],
                           capture_output=True, cwd=tmp_path, env=env, timeout=120)
        assert p.returncode == 2
        assert "partitioner: unknown name 'fnv9'" in p.stderr.decode()


def test_kcodec_run_settings_name_a_partitioner_and_refuse_consumer_hooks(tmp_path) -> None:
    """``kcodec run``: the [client] table (or KCODEC_RUN_CLIENT_*) may name the
    dead-letter producer's partitioner; deserializers and interceptors would change the
    bytes its store keeps, and are refused."""
    from kcodec.client.producer.partitioner import UserPartitioner
    from kcodec.runtime.config import Settings

    f = tmp_path / "run.toml"
    f.write_text('[client]\npartitioner = "tests.client.test_hooks:last_partition"\n')
    s = Settings.build(file=str(f), env={}, overrides={"topics": ["a"], "group": "g"})
    s.ready()
    assert "partitioner" not in s.consumer_config()
    cfg = ProducerConfig.from_kwargs(s.producer_config())
    assert cfg.hooks is not None and isinstance(cfg.hooks.partitioner, UserPartitioner)
    s = Settings.build(env={"KCODEC_RUN_CLIENT_PARTITIONER": "consistent"},
                       overrides={"topics": ["a"], "group": "g"})
    assert s.producer_config()["partitioner"] == "consistent"
    for name in ("value_deserializer", "key_deserializer", "interceptors"):
        with pytest.raises(ValueError, match=f"client setting '{name}' is not for kcodec run"):
            Settings(client={name: "json:loads"})


@pytest.mark.peers
@pytest.mark.parametrize("name", ["murmur2", "consistent", "consistent_random", "random"])
def test_builtin_partitioners_agree_with_librdkafka(name) -> None:
    """The same key goes to the same partition with librdkafka's partitioner of the same
    name (confluent-kafka), through kcodec's broker: keyed records, the empty key, and (for
    the non-random ones) keyless records; ``random`` lands anywhere for both."""
    import random

    import confluent_kafka as ck

    rng = random.Random(23)
    keys: list[bytes | None] = [bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 30)))
                                for _ in range(150)] + [b"", b"21", b"abc"]
    if name in ("murmur2", "consistent"):
        keys.append(None)
    with Cluster(1) as c:
        c.create_topic("t", 7)
        theirs: dict[Any, int] = {}
        prod = ck.Producer({"bootstrap.servers": c.bootstrap, "partitioner": name,
                            "linger.ms": 5})
        for k in keys:
            prod.produce("t", b"v", key=k, on_delivery=lambda err, msg: theirs.__setitem__(
                msg.key(), msg.partition()))
        assert prod.flush(20) == 0 and len(theirs) == len(set(keys))
        with Producer(bootstrap_servers=c.bootstrap, partitioner=name) as p:
            ours = {k: p.send("t", b"v", key=k).result(10).partition for k in keys}
    if name == "consistent_random":    # the empty key is keyless there: random, and sticky
        assert ours.pop(b"") in range(7) and theirs.pop(b"") in range(7)
    if name == "random":
        assert len(set(ours.values())) > 4 and len(set(theirs.values())) > 4
    else:
        assert ours == theirs


def test_the_guide_hooks_example_runs_as_written(tmp_path) -> None:
    """The example under "Hooks" in docs/guide/client.md, as written."""
    import os
    import re

    text = project_text("docs", "guide", "client.md")
    section = text[text.index("## Hooks"):]
    code = re.search(r"```python\n(.*?)```", section, re.S)
    assert code is not None
    (tmp_path / "example.py").write_text(code.group(1))
    with Cluster(1) as c:
        env = {**os.environ, "KCODEC_BOOTSTRAP": c.bootstrap,
               "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
        p = subprocess.run([sys.executable, "example.py"], cwd=tmp_path, env=env,
                           capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "[({'total': 12}, [('app', b'billing')])]", p.stdout
