"""kcodec inside kafka-python and aiokafka (kcodec.compat), side by side with the stock peers.

    C-kp-decode <codec>   kafka-python's MemoryRecords over one v2 batch of the 1,000 R-*
                          records: next_batch(), check_crcs-style validate_crc(), iterate,
                          touching offset, timestamp, key, value and every header
    C-kp-build <codec>    kafka-python's MemoryRecordsBuilder: 1,000 appends, close()
    C-aio-decode <codec>  the same through aiokafka's MemoryRecords
    C-aio-build <codec>   aiokafka's DefaultRecordBatchBuilder: 1,000 appends, build()
    C-kp-fetch lz4        kafka-python's fetcher parsing one fetched partition: its
                          Fetcher.PartitionRecords over MemoryRecords of 10 lz4 batches of
                          100 R-* records, take() until empty (CRC checks on, as by default)
    C-aio-fetch lz4       the same through aiokafka's fetcher PartitionRecords (it makes the
                          ConsumerRecord objects getmany() returns)

Rows: the stock peer (aiokafka's compiled classes and its pure-Python ones; kafka-python
with its crc32c package), and the same peer API with ``kcodec.compat.<peer>.install()``,
named after the kcodec twin this process runs ("kcodec cython"; run again with
KCODEC_NO_EXTENSIONS=1 for "kcodec python"). Targets: aiokafka + kcodec >= 1.5x
aiokafka's Cython; kafka-python + kcodec >= 5x stock kafka-python.

    python -m pytest bench/test_bench_compat.py --benchmark-disable-gc -q
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

import pytest

import kcodec
import kcodec.compat.aiokafka as aio_adapter
import kcodec.compat.kafka_python as kp_adapter
from bench.conftest import workload_records

RECORDS = workload_records()
N = len(RECORDS)
CODECS = {"none": 0, "lz4": 3, "zstd": 4}
KCODEC = f"kcodec {kcodec.IMPLEMENTATION}"


def _touch(batch: Any) -> int:
    n = 0
    for r in batch:
        r.offset  # noqa: B018
        r.timestamp  # noqa: B018
        r.key  # noqa: B018
        r.value  # noqa: B018
        for h in r.headers:
            h[0]  # noqa: B018
            h[1]  # noqa: B018
        n += 1
    return n


def _kp_build(codec: int) -> bytes:
    from kafka.record.memory_records import MemoryRecordsBuilder

    b = MemoryRecordsBuilder(2, codec, 1 << 22)
    append = b.append
    for r in RECORDS:
        append(r.timestamp, r.key, r.value, r.headers)
    b.close()
    return bytes(b.buffer())


def _kp_decode(data: bytes) -> int:
    from kafka.record.memory_records import MemoryRecords

    records = MemoryRecords(data)
    n = 0
    while records.has_next():
        batch = records.next_batch()
        assert batch.validate_crc()
        n += _touch(batch)
    return n


def _aio_classes(pure: bool) -> tuple[Any, Any]:
    dr = importlib.import_module("aiokafka.record.default_records")
    mr = importlib.import_module("aiokafka.record.memory_records")
    if pure:
        return dr._DefaultRecordBatchBuilderPy, mr._MemoryRecordsPy
    return dr.DefaultRecordBatchBuilder, mr.MemoryRecords


def _aio_build(codec: int, pure: bool = False) -> Callable[[], bytes]:
    builder_cls = _aio_classes(pure)[0]

    def run() -> bytes:
        b = builder_cls(2, codec, 0, -1, -1, -1, 1 << 22)
        append = b.append
        for i, r in enumerate(RECORDS):
            append(i, r.timestamp, r.key, r.value, r.headers)
        return bytes(b.build())

    return run


def _aio_decode(pure: bool = False) -> Callable[[bytes], int]:
    memory_cls = _aio_classes(pure)[1]

    def run(data: bytes) -> int:
        records = memory_cls(data)
        n = 0
        while records.has_next():
            batch = records.next_batch()
            assert batch.validate_crc()
            n += _touch(batch)
        return n

    return run


@pytest.fixture
def installed(request: pytest.FixtureRequest):
    """Install the named adapter for the test (None: the stock peer)."""
    adapter = request.param
    if adapter is not None:
        adapter.install()
    yield
    if adapter is not None:
        adapter.uninstall()


KP_ROWS = [("kafka-python", None), (KCODEC, kp_adapter)]
AIO_ROWS = [("aiokafka C", None), ("aiokafka python", "pure"), (KCODEC, aio_adapter)]


@pytest.mark.benchmark(group="C-kp-decode")
@pytest.mark.parametrize("codec", list(CODECS))
@pytest.mark.parametrize(("name", "installed"), KP_ROWS, indirect=["installed"])
def test_kp_decode(benchmark, ratios, installed, name: str, codec: str) -> None:
    kp_adapter.uninstall()
    data = _kp_build(CODECS[codec])
    if name == KCODEC:
        kp_adapter.install()
    assert benchmark(_kp_decode, data) == N
    ratios.add(f"C-kp-decode {codec}", name, benchmark, amount=N, unit="rec")


@pytest.mark.benchmark(group="C-kp-build")
@pytest.mark.parametrize("codec", list(CODECS))
@pytest.mark.parametrize(("name", "installed"), KP_ROWS, indirect=["installed"])
def test_kp_build(benchmark, ratios, installed, name: str, codec: str) -> None:
    out = benchmark(_kp_build, CODECS[codec])
    kp_adapter.uninstall()
    assert _kp_decode(out) == N
    ratios.add(f"C-kp-build {codec}", name, benchmark, amount=N, unit="rec")


def _aio_adapter_of(param: Any) -> Any:
    return param if param not in (None, "pure") else None


@pytest.mark.benchmark(group="C-aio-decode")
@pytest.mark.parametrize("codec", list(CODECS))
@pytest.mark.parametrize(("name", "param"), [AIO_ROWS[0], AIO_ROWS[2]])  # (aiokafka's pure
# MemoryRecords still makes its compiled batches: no pure decode row)
def test_aio_decode(benchmark, ratios, name: str, param: Any, codec: str) -> None:
    data = _aio_build(CODECS[codec])()
    adapter = _aio_adapter_of(param)
    if adapter is not None:
        adapter.install()
    try:
        assert benchmark(_aio_decode(param == "pure"), data) == N
    finally:
        aio_adapter.uninstall()
    ratios.add(f"C-aio-decode {codec}", name, benchmark, amount=N, unit="rec")


@pytest.mark.benchmark(group="C-aio-build")
@pytest.mark.parametrize("codec", list(CODECS))
@pytest.mark.parametrize(("name", "param"), AIO_ROWS)
def test_aio_build(benchmark, ratios, name: str, param: Any, codec: str) -> None:
    adapter = _aio_adapter_of(param)
    if adapter is not None:
        adapter.install()
    try:
        out = benchmark(_aio_build(CODECS[codec], param == "pure"))
    finally:
        aio_adapter.uninstall()
    assert _aio_decode()(out) == N
    ratios.add(f"C-aio-build {codec}", name, benchmark, amount=N, unit="rec")


# -- the consumers' fetch-parsing path ---------------------------------------------------------
#
# What a consumer does per fetched partition besides the network: the codec's share of it is
# what the adapter can change (the rest is the client's own Python per record).

def _fetch_blob() -> bytes:
    """10 lz4 batches of 100 R-* records, as a producer with a 16 KiB batch size sends."""
    from kcodec.records import RecordBatchBuilder

    out = bytearray()
    for b in range(10):
        builder = RecordBatchBuilder(compression=3, base_offset=b * 100, max_size=1 << 22)
        for r in RECORDS[b * 100:(b + 1) * 100]:
            builder.append(r.key, r.value, r.headers, r.timestamp)
        out += builder.build()
    return bytes(out)


def _kp_fetch(data: bytes) -> int:
    from kafka.consumer.fetcher import Fetcher
    from kafka.record import MemoryRecords
    from kafka.structs import TopicPartition as KTP

    recs = Fetcher.PartitionRecords(0, KTP("t", 0), MemoryRecords(data), check_crcs=True)
    n = 0
    while True:
        got = recs.take(500)
        if not got:
            return n
        n += len(got)


def _aio_fetch(data: bytes) -> int:
    from aiokafka.consumer.fetcher import READ_UNCOMMITTED, PartitionRecords
    from aiokafka.record.memory_records import MemoryRecords
    from aiokafka.structs import TopicPartition as ATP

    n = 0
    for _ in PartitionRecords(ATP("t", 0), MemoryRecords(data), [], 0, None, None, True,
                              READ_UNCOMMITTED):
        n += 1
    return n


@pytest.mark.benchmark(group="C-fetch")
@pytest.mark.parametrize(("peer", "name"), [
    ("kafka-python", "kafka-python"), ("kafka-python", KCODEC),
    ("aiokafka", "aiokafka C"), ("aiokafka", KCODEC)])
def test_fetch_parse(benchmark, ratios, peer: str, name: str) -> None:
    adapter = kp_adapter if peer == "kafka-python" else aio_adapter
    run = _kp_fetch if peer == "kafka-python" else _aio_fetch
    data = _fetch_blob()
    if name == KCODEC:
        adapter.install()
    try:
        assert benchmark(run, data) == N
    finally:
        adapter.uninstall()
    short = "kp" if peer == "kafka-python" else "aio"
    ratios.add(f"C-{short}-fetch lz4", name, benchmark, amount=N, unit="rec")


# -- end to end: 1M records from the real broker ----------------------------------------------
#
#   C-e2e-kp   a kafka-python KafkaConsumer reading 1,000,000 records (the R-* records, lz4
#              batches of ~16 KiB as its producer would send) from Tansu
#   C-e2e-aio  the same with an AIOKafkaConsumer
#
# One round each (a full read is long); run alone on a quiet machine for stable numbers.

E2E_N = int(__import__("os").environ.get("KCODEC_BENCH_E2E_N", "1000000"))


@pytest.fixture(scope="module")
def loaded_topic():
    from kcodec.client import Admin, Producer
    from kcodec.testing.tansu import Tansu

    with Tansu() as broker:
        topic = "compat-e2e"
        with Admin(bootstrap_servers=broker.bootstrap) as a:
            assert a.create_topics([topic], num_partitions=1)[topic] is None
        with Producer(bootstrap_servers=broker.bootstrap, compression_type="lz4",
                      linger_ms=20, batch_size=16384) as p:
            for i in range(E2E_N):
                r = RECORDS[i % N]
                p.send(topic, r.value, key=r.key, headers=r.headers, timestamp=r.timestamp,
                       partition=0)
            p.flush()
        yield broker.bootstrap, topic


def _kp_read_all(bootstrap: str, topic: str) -> int:
    from kafka import KafkaConsumer
    from kafka.structs import TopicPartition as KTP

    c = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                      auto_offset_reset="earliest", fetch_max_wait_ms=50,
                      max_partition_fetch_bytes=4 << 20, fetch_max_bytes=16 << 20)
    c.assign([KTP(topic, 0)])
    n = 0
    while n < E2E_N:
        for rs in c.poll(500, max_records=100000).values():
            n += _touch(rs)
    c.close()
    return n


def _aio_read_all(bootstrap: str, topic: str) -> int:
    import asyncio

    from aiokafka import AIOKafkaConsumer
    from aiokafka.structs import TopicPartition as ATP

    async def run() -> int:
        c = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                             auto_offset_reset="earliest", fetch_max_wait_ms=50,
                             max_partition_fetch_bytes=4 << 20, fetch_max_bytes=16 << 20)
        await c.start()
        try:
            c.assign([ATP(topic, 0)])
            n = 0
            while n < E2E_N:
                for rs in (await c.getmany(timeout_ms=500, max_records=100000)).values():
                    n += _touch(rs)
            return n
        finally:
            await c.stop()

    return asyncio.run(run())


@pytest.mark.benchmark(group="C-e2e")
@pytest.mark.parametrize("installed_name", ["stock", KCODEC])
@pytest.mark.parametrize("peer", ["kafka-python", "aiokafka"])
def test_e2e_consume(benchmark, ratios, loaded_topic, peer: str, installed_name: str) -> None:
    adapter = kp_adapter if peer == "kafka-python" else aio_adapter
    read = _kp_read_all if peer == "kafka-python" else _aio_read_all
    if installed_name == KCODEC:
        adapter.install()
    try:
        n = benchmark.pedantic(read, args=loaded_topic, rounds=1, iterations=1)
    finally:
        adapter.uninstall()
    assert n >= E2E_N
    name = KCODEC if installed_name == KCODEC else (
        "kafka-python" if peer == "kafka-python" else "aiokafka C")
    ratios.add(f"C-e2e {peer} consumer, {E2E_N} records", name, benchmark, amount=n,
               unit="rec")
