"""kcodec.spark without a Spark session: option parsing, offset planning, splitting, rate
limiting, reading a range against the real broker (and one that goes away), and the
producer's columnar send path."""

from __future__ import annotations

import threading
import time

import pytest

pytest.importorskip("pyspark", reason="kcodec.spark needs pyspark (the spark/test extras)")
pa = pytest.importorskip("pyarrow")

from kcodec.spark import _kafka  # noqa: E402
from kcodec.spark._kafka import DataLossError, KafkaRange, split_ranges  # noqa: E402
from kcodec.spark.options import parse_sink, parse_source  # noqa: E402
from kcodec.spark.stream import limit_offsets  # noqa: E402
from tests.support import REPO  # noqa: E402

BS = {"kafka.bootstrap.servers": "127.0.0.1:9"}


def src(**kw: str):
    return parse_source({**BS, **kw})


# ---------------------------------------------------------------------------------------------
# options


def test_defaults_like_spark() -> None:
    o = src(subscribe="a,b")
    assert o.subscribe == ["a", "b"] and o.starting.kind == "earliest"
    assert o.ending is not None and o.ending.kind == "latest"
    assert o.fail_on_data_loss and not o.include_headers and not o.read_committed
    s = parse_source({**BS, "subscribe": "a"}, streaming=True)
    assert s.starting.kind == "latest" and s.ending is None
    assert s.max_trigger_delay_ms == 15 * 60000 and s.poll_timeout_ms == 120000


def test_options_are_case_insensitive_strings() -> None:
    o = parse_source({"KAFKA.BOOTSTRAP.SERVERS": "h:1", "SubscribePattern": "t-.*",
                      "INCLUDEHEADERS": "TRUE", "kafka.isolation.level": "read_committed",
                      "kafka.client.id": "me", "kafka.request.timeout.ms": "5000"})
    assert o.pattern == "t-.*" and o.include_headers and o.read_committed
    assert o.client == {"client_id": "me", "request_timeout_ms": 5000}
    assert o.topics_of(["t-1", "x", "t-2", "__consumer_offsets"]) == ["t-1", "t-2"]


@pytest.mark.parametrize("opts, message", [
    ({"subscribe": "a"}, "kafka.bootstrap.servers is required"),
    ({**BS}, "exactly one of the options subscribe, subscribePattern, assign"),
    ({**BS, "subscribe": "a", "assign": '{"a": [0]}'}, "exactly one of"),
    ({**BS, "assign": "[1]"}, "option assign must be JSON"),
    ({**BS, "subscribepattern": "("}, "not a valid pattern"),
    ({**BS, "subscribe": "a", "startingoffsets": "latest"}, "latest (-1) is not allowed"),
    ({**BS, "subscribe": "a", "startingoffsets": '{"a": {"0": -1}}'}, "latest (-1)"),
    ({**BS, "subscribe": "a", "endingoffsets": "earliest"}, "earliest (-2) is not allowed"),
    ({**BS, "subscribe": "a", "endingoffsets": '{"a": {"0": -2}}'}, "earliest (-2)"),
    ({**BS, "subscribe": "a", "startingoffsets": "{bad"}, "not valid JSON"),
    ({**BS, "subscribe": "a", "kafka.auto.offset.reset": "earliest"}, "startingOffsets"),
    ({**BS, "subscribe": "a", "kafka.key.deserializer": "x"}, "always binary"),
    ({**BS, "subscribe": "a", "kafka.value.deserializer": "x"}, "always binary"),
    ({**BS, "subscribe": "a", "kafka.enable.auto.commit": "true"}, "commitOffsetsToGroup"),
    ({**BS, "subscribe": "a", "kafka.interceptor.classes": "x"}, "Java classes"),
    ({**BS, "subscribe": "a", "kafka.sasl.mechanism": "PLAIN"}, "kafka.security.protocol is PLAINTEXT"),
    ({**BS, "subscribe": "a", "kafka.sasl.kerberos.service.name": "x"}, "not supported by kcodec"),
    ({**BS, "subscribe": "a", "nosuchoption": "1"}, "unknown option 'nosuchoption'"),
    ({**BS, "subscribe": "a", "failondataloss": "maybe"}, "true or false"),
    ({**BS, "subscribe": "a", "minpartitions": "0"}, "at least 1"),
    ({**BS, "subscribe": "a", "maxrecordsperpartition": "x"}, "must be an integer"),
    ({**BS, "subscribe": "a", "startingoffsetsbytimestampstrategy": "x"}, "error or latest"),
    ({**BS, "subscribe": "a", "kafka.isolation.level": "x"}, "read_committed"),
    ({**BS, "subscribe": "a", "commitoffsetstogroup": "true"}, "for streaming queries"),
])
def test_bad_source_options(opts: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse_source(opts)


def test_streaming_only_rules() -> None:
    with pytest.raises(ValueError, match="a stream has no end"):
        parse_source({**BS, "subscribe": "a", "endingoffsets": "latest"}, streaming=True)
    with pytest.raises(ValueError, match="minOffsetsPerTrigger"):
        parse_source({**BS, "subscribe": "a", "maxoffsetspertrigger": "5",
                      "minoffsetspertrigger": "9"}, streaming=True)
    s = parse_source({**BS, "subscribe": "a", "startingoffsets": "latest",
                      "maxtriggerdelay": "30s", "commitoffsetstogroup": "true"}, streaming=True)
    assert s.max_trigger_delay_ms == 30000 and s.commit_to_group == ""


def test_timestamp_options_win() -> None:
    o = src(subscribe="a", startingoffsets="earliest", startingtimestamp="1000",
            startingoffsetsbytimestamp='{"a": {"0": 5}}')
    assert o.starting.kind == "timestamp" and o.starting.timestamp == 1000
    o = src(subscribe="a", startingoffsetsbytimestamp='{"a": {"0": 5}}',
            endingoffsetsbytimestamp='{"a": {"0": 9}}')
    assert o.starting.kind == "timestamps" and o.starting.offsets == {("a", 0): 5}
    assert o.ending is not None and o.ending.offsets == {("a", 0): 9}


def test_sink_options() -> None:
    s = parse_sink({**BS, "topic": "out", "kafka.compression.type": "zstd",
                    "kafka.linger.ms": "20"})
    assert s.topic == "out" and s.client == {"compression_type": "zstd", "linger_ms": 20,
                                             "acks": "all", "batch_size": 512 * 1024}
    assert parse_sink({**BS, "kafka.batch.size": "16384"}).client["batch_size"] == 16384
    with pytest.raises(ValueError, match="compression_type must be one of"):
        parse_sink({**BS, "kafka.compression.type": "brotli"})
    with pytest.raises(ValueError, match="keys are written as given"):
        parse_sink({**BS, "kafka.key.serializer": "x"})
    with pytest.raises(ValueError, match="unknown option 'subscribe'"):
        parse_sink({**BS, "subscribe": "x"})


# ---------------------------------------------------------------------------------------------
# planning


class FakeAdmin:
    """ListOffsets answers from tables: earliest, latest, and by timestamp (the first offset
    with a timestamp >= the asked one, -1 when none), as a real broker does."""

    def __init__(self, earliest: dict, latest: dict, times: dict | None = None) -> None:
        self.e, self.l, self.t = earliest, latest, times or {}

    def list_offsets(self, tps, spec):
        out = {}
        for tp in tps:
            key = (tp.topic, tp.partition)
            if spec == "earliest":
                out[tp] = self.e[key]
            elif spec == "latest":
                out[tp] = self.l[key]
            else:
                hits = [o for o, ts in sorted(self.t.get(key, {}).items()) if ts >= spec]
                out[tp] = hits[0] if hits else -1
        return out


def test_resolve_offsets_and_timestamps() -> None:
    tps = [("a", 0), ("a", 1)]
    e, lt = {("a", 0): 10, ("a", 1): 0}, {("a", 0): 50, ("a", 1): 7}
    admin = FakeAdmin(e, lt, {("a", 0): {10: 100, 11: 200, 12: 300}, ("a", 1): {0: 500}})
    spec = src(subscribe="a", startingoffsets='{"a": {"0": -2, "1": 3}}').starting
    assert _kafka.resolve(admin, spec, tps, e, lt, starting=True) == {("a", 0): 10,
                                                                      ("a", 1): 3}
    spec = src(subscribe="a", startingtimestamp="150").starting
    assert _kafka.resolve(admin, spec, tps, e, lt, starting=True) == {("a", 0): 11,
                                                                      ("a", 1): 0}
    spec = src(subscribe="a", startingtimestamp="400").starting
    with pytest.raises(ValueError, match="startingOffsetsByTimestampStrategy=latest"):
        _kafka.resolve(admin, spec, tps, e, lt, starting=True)
    assert _kafka.resolve(admin, spec, tps, e, lt, starting=True, strategy="latest") == \
        {("a", 0): 50, ("a", 1): 0}
    spec = src(subscribe="a", endingoffsetsbytimestamp='{"a": {"0": 250, "1": 999}}').ending
    assert _kafka.resolve(admin, spec, tps, e, lt, starting=False) == {("a", 0): 12,
                                                                       ("a", 1): 7}
    spec = src(subscribe="a", startingoffsets='{"a": {"0": 1}}').starting
    with pytest.raises(ValueError, match=r"no offset for a\[1\]"):
        _kafka.resolve(admin, spec, tps, e, lt, starting=True)


def test_plan_data_loss(monkeypatch) -> None:
    e, lt = {("a", 0): 10}, {("a", 0): 50}

    class Ctx(FakeAdmin):
        def __enter__(self):
            return self

        def __exit__(self, *exc):
            pass

    monkeypatch.setattr("kcodec.client.Admin", lambda **kw: Ctx(e, lt))
    monkeypatch.setattr(_kafka, "topic_partitions", lambda admin, opts: [("a", 0)])
    opts = src(subscribe="a", startingoffsets='{"a": {"0": 4}}')
    with pytest.raises(DataLossError, match=r"offsets 4..9 are gone"):
        _kafka.plan_ranges(opts)
    opts = src(subscribe="a", startingoffsets='{"a": {"0": 4}}', failondataloss="false")
    assert _kafka.plan_ranges(opts) == [KafkaRange("a", 0, 10, 50)]
    opts = src(subscribe="a", endingoffsets='{"a": {"0": 60}}')
    with pytest.raises(ValueError, match="before the requested 60"):
        _kafka.plan_ranges(opts)


def test_split_ranges_like_spark() -> None:
    rs = [KafkaRange("a", 0, 0, 100), KafkaRange("a", 1, 0, 10)]
    assert split_ranges(rs, None, None) == rs
    out = split_ranges(rs, None, 30)
    assert [r.size for r in out] == [25, 25, 25, 25, 10]
    out = split_ranges(rs, 11, None)
    assert len(out) == 11 and sum(r.size for r in out) == 110
    assert [r for r in out if r.partition == 1] == [KafkaRange("a", 1, 0, 10)]
    # contiguous, in order
    p0 = [r for r in out if r.partition == 0]
    assert p0[0].start == 0 and p0[-1].end == 100
    assert all(a.end == b.start for a, b in zip(p0, p0[1:], strict=False))


def test_limit_offsets_by_backlog() -> None:
    start = {("a", 0): 0, ("a", 1): 100}
    latest = {("a", 0): 300, ("a", 1): 200}
    assert limit_offsets(start, latest, None) == latest
    assert limit_offsets(start, latest, 1000) == latest
    got = limit_offsets(start, latest, 100)
    assert got == {("a", 0): 75, ("a", 1): 125}
    got = limit_offsets(start, latest, 7)
    assert sum(got[tp] - start[tp] for tp in got) == 7
    assert all(start[tp] <= got[tp] <= latest[tp] for tp in got)


def test_big_fetches_reach_spark_in_slices() -> None:
    """A fetch decoded whole is handed to Spark in slices of a few MiB that share its
    memory, in order, with nothing lost or repeated; a small one as it is."""
    import pyarrow as pa

    n = 200_000
    rb = pa.RecordBatch.from_arrays([pa.array(range(n), pa.int64()),
                                     pa.array([b"v" * 100] * n, pa.binary())], ["o", "v"])
    parts = list(_kafka._slices(rb))
    assert len(parts) > 3
    assert all(p.nbytes <= (_kafka._SLICE_BYTES * 11) // 10 for p in parts)
    assert pa.Table.from_batches(parts).column("o").to_pylist() == list(range(n))
    base = rb.column(1).buffers()[2].address
    assert all(p.column(1).buffers()[2].address == base for p in parts)   # no copy
    small = rb.slice(0, 100)
    assert list(_kafka._slices(small)) == [small]
    assert list(_kafka._slices(rb.slice(0, 0))) == []


class _Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def _stream_reader(monkeypatch, old_api: bool = False, **kw: str):
    """A stream reader over a fake broker: ``reader.latest`` is what ListOffsets LATEST
    answers for the two partitions of topic t (earliest is 0)."""
    from kcodec.spark import stream

    clock = _Clock()
    monkeypatch.setattr(stream, "_now", clock)
    base = stream._OldApiReader if old_api else stream.KafkaStreamReader

    class Fake(base):  # type: ignore[misc, valid-type]
        latest = {("t", 0): 0, ("t", 1): 0}

        def _partitions(self):
            return sorted(self.latest)

        def _ends(self, tps):
            return {tp: 0 for tp in tps}, {tp: self.latest[tp] for tp in tps}

    r = Fake(parse_source({**BS, "subscribe": "t", "startingoffsets": "earliest", **kw},
                          streaming=True))
    return r, clock


def _offs(a: int, b: int) -> dict:
    return {"t": {"0": a, "1": b}}


def test_min_offsets_per_trigger_waits_like_spark(monkeypatch) -> None:
    """minOffsetsPerTrigger / maxTriggerDelay as Spark's Kafka source: the first trigger
    runs; later ones are skipped (end = start) while fewer than the minimum new offsets
    wait, until maxTriggerDelay has passed since the last trigger that ran."""
    r, clock = _stream_reader(monkeypatch, minOffsetsPerTrigger="100", maxTriggerDelay="30s")
    r.latest = {("t", 0): 10, ("t", 1): 5}
    start = r.initialOffset()
    assert start == _offs(0, 0)
    end = r._next_end(start, None, 100)            # the first trigger never waits
    assert end == _offs(10, 5)
    r.latest = {("t", 0): 60, ("t", 1): 30}         # 75 new: fewer than 100
    clock.t += 10
    assert r._next_end(end, None, 100) == end
    clock.t += 19.9                                 # 29.9 s since the last batch
    assert r._next_end(end, None, 100) == end
    r.latest = {("t", 0): 70, ("t", 1): 40}         # 95 new
    clock.t += 0.1                                  # 30 s: maxTriggerDelay has passed
    end2 = r._next_end(end, None, 100)
    assert end2 == _offs(70, 40)
    r.latest = {("t", 0): 140, ("t", 1): 80}        # 110 new, at once
    clock.t += 1
    end3 = r._next_end(end2, None, 100)
    assert end3 == _offs(140, 80)
    # with maxOffsetsPerTrigger as well: the minimum decides whether, the maximum how much
    r.latest = {("t", 0): 440, ("t", 1): 180}       # 400 new
    clock.t += 1
    end4 = r._next_end(end3, 200, 100)
    assert sum(end4["t"][p] - end3["t"][p] for p in ("0", "1")) == 200
    r.latest = {("t", 0): 440, ("t", 1): 180}
    clock.t += 1
    assert r._next_end(end4, 200, 250) == end4      # 200 left: fewer than 250, wait


def test_min_offsets_per_trigger_not_with_available_now(monkeypatch) -> None:
    r, clock = _stream_reader(monkeypatch, minOffsetsPerTrigger="1000")
    r.latest = {("t", 0): 3, ("t", 1): 4}
    r._next_end(_offs(0, 0), None, 1000)
    r.prepareForTriggerAvailableNow()
    clock.t += 1
    r.latest = {("t", 0): 9, ("t", 1): 9}           # past the AvailableNow target
    assert r._next_end(_offs(0, 0), None, 1000) == _offs(3, 4)


def test_new_api_read_limits(monkeypatch) -> None:
    from kcodec.spark import stream

    if not stream.NEW_API:
        pytest.skip("ReadLimit arrives with pyspark 4.2")
    from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows, ReadMinRows

    r, clock = _stream_reader(monkeypatch, minOffsetsPerTrigger="50",
                              maxOffsetsPerTrigger="80", maxTriggerDelay="1m")
    assert r.getDefaultReadLimit() == ReadMaxRows(80)
    r.latest = {("t", 0): 100, ("t", 1): 100}
    end = r.latestOffset(_offs(0, 0), ReadMaxRows(80))
    assert sum(end["t"].values()) == 80
    clock.t += 1
    r.latest = {("t", 0): 100, ("t", 1): 100}
    end2 = r.latestOffset(end, ReadMaxRows(80))        # 120 waiting: at least 50
    assert sum(end2["t"].values()) == 160
    clock.t += 1
    assert r.latestOffset(end2, ReadMaxRows(80)) == end2     # 40 waiting: fewer than 50
    assert r.latestOffset(end2, ReadAllAvailable()) == _offs(100, 100)
    r2, _ = _stream_reader(monkeypatch, minOffsetsPerTrigger="50")
    assert r2.getDefaultReadLimit() == ReadMinRows(50)


def test_old_api_reader_chains_ends_and_is_safe_on_restart(monkeypatch) -> None:
    """pyspark 4.0/4.1: latestOffset() has no start; the reader chains the ends it hands
    out. A reader for a restarted query (no initialOffset call) first reads to the
    latest offsets, never to an end before the checkpoint's start."""
    r, clock = _stream_reader(monkeypatch, old_api=True, maxOffsetsPerTrigger="10")
    r.latest = {("t", 0): 30, ("t", 1): 30}
    assert r.initialOffset() == _offs(0, 0)
    ends = []
    for _ in range(7):
        clock.t += 1
        ends.append(r.latestOffset())
    assert [sum(e["t"].values()) for e in ends] == [10, 20, 30, 40, 50, 60, 60]
    restarted, _ = _stream_reader(monkeypatch, old_api=True, maxOffsetsPerTrigger="10")
    restarted.latest = {("t", 0): 30, ("t", 1): 30}
    assert restarted.latestOffset() == _offs(30, 30)
    restarted.latest = {("t", 0): 50, ("t", 1): 30}
    assert restarted.latestOffset() == _offs(40, 30)


def test_pushdown_detection_fails_safe() -> None:
    """Which reader the source hands Spark: the one with pushFilters only when the calling
    pyspark worker is the pushdown one, or the planning worker says pushdown is on;
    anything unrecognised means the plain reader (Spark then filters every row itself:
    slower, never wrong). The Spark tests check both settings on each pyspark release."""
    from kcodec.spark.source import pushdown_enabled

    def call_from(filename: str, **local_vars: object) -> bool:
        env: dict = {"detect": pushdown_enabled, **local_vars}
        exec(compile("result = (lambda: detect())()", filename, "exec"), env)
        return env["result"]

    assert pushdown_enabled() is False
    worker = "/x/site-packages/pyspark/sql/worker/"
    assert call_from(worker + "data_source_pushdown_filters.py") is True
    assert call_from(worker + "plan_data_source_read.py", enable_pushdown=True) is True
    assert call_from(worker + "plan_data_source_read.py", enable_pushdown=False) is False
    assert call_from(worker + "plan_data_source_read.py") is False
    assert call_from(worker + "plan_data_source_read.py", enable_pushdown="yes") is False
    assert call_from("/x/other/pushdown.py", enable_pushdown=True) is False


# ---------------------------------------------------------------------------------------------
# reading a range from the real broker


@pytest.mark.broker        # starts Tansu itself (not through the broker fixture)
def test_read_range_and_broker_going_away(topic_name: str) -> None:
    """A range read fails with a clear error when its broker goes away mid-read (no partial
    result returned as if complete)."""
    from kcodec.client import Admin, Producer
    from kcodec.testing.tansu import Tansu

    with Tansu() as b:
        with Admin(bootstrap_servers=b.bootstrap) as a:
            assert a.create_topics([topic_name], num_partitions=1)[topic_name] is None
        with Producer(bootstrap_servers=b.bootstrap, linger_ms=0, batch_size=1024) as p:
            for i in range(400):
                p.send(topic_name, b"v%03d" % i, key=b"k", partition=0)
            p.flush()
        opts = src(subscribe=topic_name, **{"kafka.bootstrap.servers": b.bootstrap,
                                            "kafka.max.partition.fetch.bytes": "2048",
                                            "kafkaconsumer.polltimeoutms": "3000",
                                            "kafka.default.api.timeout.ms": "2000",
                                            "kafka.request.timeout.ms": "1000"})
        r = KafkaRange(topic_name, 0, 10, 390)
        rows = [x for rb in _kafka.read_range(r, opts) for x in rb.column("offset").to_pylist()]
        assert rows == list(range(10, 390))
        # closed early (a limit()): the fetch thread ends with the generator
        it = _kafka.read_range(r, opts)
        assert next(it).column("offset")[0].as_py() == 10
        it.close()
        assert not [t for t in threading.enumerate() if t.name == "kcodec-spark-fetch"]
        # the broker goes away after planning, before the task's fetches (Tansu answers the
        # whole range in one fetch, so this is the moment a read can lose it)
        it = _kafka.read_range(r, opts)
        b.stop()
        with pytest.raises(Exception) as e:   # noqa: B017 - the class depends on the moment
            for _ in it:
                pass
        text = str(e.value)
        assert any(w in text for w in ("no broker reachable", "within", "pollTimeoutMs",
                                       "closed", "timed out")), text
        # stopped while its thread retries the gone broker: the retry is cancelled at once,
        # not waited out (kafkaConsumer.pollTimeoutMs is 3 s here)
        pre = _kafka._Prefetch(_kafka._RangeReader(r, opts))
        time.sleep(0.3)
        t0 = time.monotonic()
        pre.stop()
        assert time.monotonic() - t0 < 1.5
        assert not pre.thread.is_alive()


# ---------------------------------------------------------------------------------------------
# the producer's columnar send path


def test_columnar_batches_equal_builder_bytes() -> None:
    from kcodec.client.producer.columnar import plan_send
    from kcodec.client.producer.partitioner import partition_for_key
    from kcodec.records import RecordBatchBuilder, iter_batches

    keys = [None if i % 5 == 0 else (b"key-%d" % i) * (i % 7) for i in range(300)]
    vals = [None if i % 11 == 3 else b"v" * (i * 13 % 300) for i in range(300)]
    hdrs = [None if i % 3 == 0 else [{"key": f"h{j}", "value": None if j == 1 else b"x" * j}
                                     for j in range(i % 4)] for i in range(300)]
    htype = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
    ka, va, ha = pa.array(keys, pa.binary()), pa.array(vals, pa.large_binary()), \
        pa.array(hdrs, htype)
    for codec in (0, 3):
        planned = plan_send(va.slice(10), ka.slice(10), ha.slice(10), None, 4, 2, 4096, codec,
                            None, timestamp=1234)
        assert len(planned) > 4
        got = []
        for p, built, _size in planned:
            built.stamp(5, 1, 7)
            data = built.build()
            ref = RecordBatchBuilder(compression=codec, producer_id=5, producer_epoch=1,
                                     base_sequence=7)
            for batch in iter_batches(data):
                assert batch.producer_id == 5 and batch.base_sequence == 7
                for r in batch:
                    got.append((p, r.key, r.value, list(r.headers), r.timestamp))
                    ref.append(r.key, r.value, list(r.headers), timestamp=1234)
            if codec == 0:
                assert ref.build() == data
        want = [(partition_for_key(keys[i], 4) if keys[i] is not None else 2, keys[i], vals[i],
                 [(h["key"], h["value"]) for h in (hdrs[i] or [])], 1234)
                for i in range(10, 300)]
        assert sorted(got, key=repr) == sorted(want, key=repr)


def test_columnar_send_errors() -> None:
    from kcodec.client.producer.columnar import plan_send

    v = pa.array([b"a", b"b"])
    with pytest.raises(ValueError, match="partition 9 out of range"):
        plan_send(v, None, None, pa.array([0, 9], pa.int32()), 4, 0, 100, 0, None)
    with pytest.raises(ValueError, match="key has 1 rows, value has 2"):
        plan_send(v, pa.array([b"k"]), None, None, 4, 0, 100, 0, None)
    with pytest.raises(TypeError, match="value must be a binary or string column"):
        plan_send(pa.array([1, 2]), None, None, None, 4, 0, 100, 0, None)


def test_send_columns_through_the_broker(broker, topic_name: str) -> None:
    from kcodec.client import Admin, Consumer, Producer, TopicPartition

    with Admin(bootstrap_servers=broker.bootstrap) as a:
        assert a.create_topics([topic_name], num_partitions=3)[topic_name] is None
    n = 5000
    values = pa.array([b"value-%d" % i for i in range(n)])
    keys = pa.array([None if i % 4 == 0 else f"k{i % 50}" for i in range(n)])
    with Producer(bootstrap_servers=broker.bootstrap, compression_type="zstd") as p:
        futs = p.send_columns(topic_name, values, key=keys)
        p.flush()
        last = {}
        for f in futs:
            r = f.result(10)
            last[r.partition] = max(last.get(r.partition, -1), r.offset)
    got = []
    with Consumer(bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest",
                  fetch_max_wait_ms=50) as c:
        c.assign([TopicPartition(topic_name, i) for i in range(3)])
        for _ in range(200):
            for tp, recs in c.poll(0.2).items():
                got += [(tp.partition, r.offset, r.key, r.value) for r in recs]
            if len(got) >= n:
                break
    assert len(got) == n
    assert sorted(v for _p, _o, _k, v in got) == sorted(values.to_pylist())
    assert {p: max(o for q, o, _k, _v in got if q == p) for p, *_ in got} == last


def test_discovery_modules_are_packaged() -> None:
    """Spark registers DefaultSource of every installed top-level ``pyspark_*`` module."""
    import pyspark_kcodec
    import pyspark_kcodec_log
    from kcodec.spark import KafkaLogSource, KafkaSource

    assert pyspark_kcodec.DefaultSource is KafkaSource
    assert pyspark_kcodec_log.DefaultSource is KafkaLogSource
    assert KafkaSource.name() == "kcodec" and KafkaLogSource.name() == "kcodec-log"
    try:
        import tomllib
    except ImportError:   # Python < 3.11
        import tomli as tomllib

    pyproject = REPO / "pyproject.toml"
    if pyproject.exists():   # (a wheel test run has the tests only)
        cfg = tomllib.loads(pyproject.read_text())
        assert "pyspark_kcodec*" in cfg["tool"]["setuptools"]["packages"]["find"]["include"]
        assert any(d.startswith("pyspark") for d in cfg["project"]["optional-dependencies"]
                   ["spark"])


def _txn_blob(commit: bool) -> bytes:
    from kcodec.records import RecordBatchBuilder

    b = RecordBatchBuilder(base_offset=0, producer_id=7, producer_epoch=0,
                           is_transactional=True)
    for i in range(5):
        b.append(b"k", b"t%d" % i, [], timestamp=1000 + i)
    c = RecordBatchBuilder(base_offset=5, is_control=True, is_transactional=True,
                           producer_id=7, producer_epoch=0)
    c.append_control(1 if commit else 0, coordinator_epoch=0, timestamp=2000)
    d = RecordBatchBuilder(base_offset=6)
    for i in range(3):
        d.append(None, b"p%d" % i, [("h", b"1")], timestamp=3000 + i)
    return b.build() + c.build() + d.build()


@pytest.mark.parametrize("committed", [False, True])
@pytest.mark.parametrize("aborted", [False, True])
def test_range_decode_gaps_and_isolation(committed: bool, aborted: bool) -> None:
    """A fetched blob with a transaction marker (a gap at offset 5), an aborted or committed
    transaction, and a range that ends inside the blob: the rows Spark gets."""
    from types import SimpleNamespace

    from kcodec.spark._kafka import _RangeReader

    opts = src(subscribe="t", includeheaders="true",
               **({"kafka.isolation.level": "read_committed"} if committed else {}))
    r = _RangeReader(KafkaRange("t", 0, 1, 8), opts)
    r.config = SimpleNamespace(check_crcs=True)
    part = SimpleNamespace(aborted_transactions=[SimpleNamespace(producer_id=7, first_offset=0)]
                           if aborted else [])
    rb, nxt = r._decode(part, _txn_blob(commit=not aborted))
    assert nxt == 8                         # the range's end, inside the blob
    offsets = rb.column("offset").to_pylist()
    if committed and aborted:
        assert offsets == [6, 7]
    else:
        assert offsets == [1, 2, 3, 4, 6, 7]
    assert rb.schema.field("timestampType").type == pa.int32()
    assert rb.column("headers").to_pylist()[-1] == [{"key": "h", "value": b"1"}]


def test_pipeline_without_java_says_how_to_get_it(tmp_path) -> None:
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "JAVA_HOME"}
    env["PATH"] = str(tmp_path)            # no java on it
    proc = subprocess.run([sys.executable, "-m", "kcodec", "pipeline", "-n", "10"], env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1
    assert "no Java found" in proc.stderr and "openjdk-17" in proc.stderr
    proc = subprocess.run([sys.executable, "-m", "kcodec", "pipeline", "-n", "1"], env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "--events must be at least 2" in proc.stderr


def test_chunks_cut_at_batch_boundaries_and_decode_the_same() -> None:
    """The pieces a fetch is decoded in: whole batches, no byte lost or doubled, and the
    pieces' rows together are the whole blob's; a partial last batch stays in the last piece."""
    import pyarrow as pa

    from kcodec.records import RecordBatchBuilder, decode_columns

    blob = b""
    off = 0
    for i in range(40):
        b = RecordBatchBuilder(compression=3 if i % 2 else 0, base_offset=off)
        for j in range(50):
            b.append(b"k%d" % (off + j), b"v" * 200, [], timestamp=1_700_000_000_000 + off + j)
        off += 50
        blob += b.build()
    whole = decode_columns(blob, layout="spark").to_spark("t", 0)
    for size in (1, 1000, 5000, len(blob), 1 << 30):
        parts = _kafka._chunks(blob, size)
        assert b"".join(bytes(p) for p in parts) == blob
        assert len(parts) == (40 if size == 1 else 1 if size >= len(blob) else len(parts))
        got = pa.Table.from_batches(
            [decode_columns(p, layout="spark").to_spark("t", 0) for p in parts])
        assert got.equals(pa.Table.from_batches([whole]))
    # a partial last batch: the cut stops before it, decode_columns sees it whole
    cut = blob[:-10]
    parts = _kafka._chunks(cut, 1000)
    assert b"".join(bytes(p) for p in parts) == cut
    assert decode_columns(parts[-1], layout="spark").to_spark("t", 0).num_rows >= 0
    # garbage length: no cutting past it
    first = 12 + int.from_bytes(blob[8:12], "big")
    bad = blob[:first + 8] + b"\xff\xff\xff\xff" + blob[first + 12:]
    parts = _kafka._chunks(bad, 1)
    assert [len(p) for p in parts] == [first, len(bad) - first]


@pytest.mark.parametrize("old_api", [False, True], ids=["latestOffset(start)", "latestOffset()"])
def test_commit_to_group_commits_each_finished_end_once(monkeypatch, old_api) -> None:
    """commitOffsetsToGroup: the end of each batch that ran is committed when the next
    trigger asks for the latest offset (every batch before that start has run), and
    Spark's own commit(end) of the same end sends nothing more; nothing is committed
    without the option."""
    from kcodec.spark import groups, stream

    if not old_api and not stream.NEW_API:
        pytest.skip("latestOffset(start, limit) arrives with pyspark 4.2")
    sent: list[tuple[str, dict]] = []
    monkeypatch.setattr(groups, "commit_offsets",
                        lambda opts, group, offsets: sent.append((group, dict(offsets))))
    r, _ = _stream_reader(monkeypatch, old_api=old_api, commitOffsetsToGroup="g")

    def trigger(start):
        if old_api:
            return r.latestOffset()
        from pyspark.sql.streaming.datasource import ReadAllAvailable

        return r.latestOffset(start, ReadAllAvailable())

    r.latest = {("t", 0): 5, ("t", 1): 7}
    start = r.initialOffset()
    end = trigger(start)                      # plans batch 0: nothing has run but the start
    assert end == _offs(5, 7) and sent == [("g", {("t", 0): 0, ("t", 1): 0})]
    assert trigger(end) == end                # batch 0 ran; nothing new: its end committed
    assert sent[-1] == ("g", {("t", 0): 5, ("t", 1): 7}) and len(sent) == 2
    assert trigger(end) == end and len(sent) == 2     # the same end: not again
    r.commit(end)
    assert len(sent) == 2
    r.latest = {("t", 0): 9, ("t", 1): 7}
    end2 = trigger(end)
    r.commit(end)                             # Spark's commit of batch 0, as batch 1 starts
    trigger(end2)
    assert [s[1] for s in sent[2:]] == [{("t", 0): 9, ("t", 1): 7}] and len(sent) == 3

    plain, _ = _stream_reader(monkeypatch, old_api=old_api)
    plain.latest = {("t", 0): 5, ("t", 1): 7}
    plain.commit(plain.initialOffset())
    assert len(sent) == 3
