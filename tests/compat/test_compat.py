"""kcodec.compat: kafka-python and aiokafka using kcodec as their record codec.

Differential: batches built through a patched peer's classes are byte-identical to the stock
peer's (where both use the same compressor; gzip and aiokafka's lz4 differ in compressor
settings, so there the header fields and every decoded record must agree instead), and
bytes built by the stock peer decode through the patched classes to the same values. The
peers' own fetcher and accumulator code runs over the adapter. The compiled and the pure
kcodec twins are both covered by the CI runs (default and KCODEC_NO_EXTENSIONS=1).
"""

from __future__ import annotations

import asyncio
import collections
import importlib
import os
import random
import subprocess
import sys
from typing import Any

import pytest

pytestmark = pytest.mark.peers

kafka = pytest.importorskip("kafka")
aiokafka = pytest.importorskip("aiokafka")

import kcodec.compat.aiokafka as aio_adapter  # noqa: E402
import kcodec.compat.kafka_python as kp_adapter  # noqa: E402

ADAPTERS = {"kafka_python": kp_adapter, "aiokafka": aio_adapter}
# (magic, codec) pairs each peer can build
COMBOS = {
    "kafka_python": [(m, c) for m in (0, 1, 2) for c in range(5) if not (m < 2 and c == 4)],
    "aiokafka": [(m, c) for m in (0, 1, 2) for c in range(5)
                 if not (m < 2 and c == 4) and not (m == 0 and c == 3)],
}
# compressor settings differ from the peer's own: compare decoded batches there
NOT_BYTE_IDENTICAL = {("kafka_python", 1), ("aiokafka", 1), ("aiokafka", 3)}


@pytest.fixture(autouse=True)
def _stock_afterwards():
    yield
    kp_adapter.uninstall()
    aio_adapter.uninstall()


def _random_records(rng: random.Random, magic: int, n: int) -> list[tuple[Any, ...]]:
    out = []
    base = 1_600_000_000_000 + rng.randrange(10**9)
    for _ in range(n):
        key = None if rng.random() < 0.3 else rng.randbytes(rng.randrange(0, 30))
        value = None if rng.random() < 0.1 else rng.choice(
            [rng.randbytes(rng.randrange(0, 200)), b"abc" * rng.randrange(0, 100)])
        headers = [] if magic < 2 else [
            (rng.choice(["trace", "ü-key", ""]),
             None if rng.random() < 0.3 else rng.randbytes(rng.randrange(0, 10)))
            for _ in range(rng.randrange(0, 3))]
        out.append((base + rng.randrange(-5000, 5000), key, value, headers))
    return out


def _build(peer: str, magic: int, codec: int, records: list, state: tuple | None,
           batch_size: int = 1 << 20) -> tuple[bytes, list]:
    """Build through the peer's classes as its producer does; the bytes and the metadata."""
    metas = []
    if peer == "kafka_python":
        from kafka.record.memory_records import MemoryRecordsBuilder

        b = MemoryRecordsBuilder(magic, codec, batch_size)
        for ts, k, v, h in records:
            m = b.append(ts, k, v, h)
            metas.append(None if m is None else (m.offset, m.size, m.timestamp, m.crc))
        if state is not None:
            b.set_producer_state(*state)
        b.close()
        return bytes(b.buffer()), metas
    dr = importlib.import_module("aiokafka.record.default_records")
    lr = importlib.import_module("aiokafka.record.legacy_records")
    if magic == 2:
        b = dr.DefaultRecordBatchBuilder(2, codec, 0, -1, -1, -1, batch_size)
    else:
        b = lr.LegacyRecordBatchBuilder(magic, codec, batch_size)
    for i, (ts, k, v, h) in enumerate(records):
        m = b.append(i, ts, k, v, h)
        metas.append(None if m is None else (m.offset, m.size, m.timestamp, m.crc))
    if state is not None:
        b.set_producer_state(*state[:3])
    out = b.build()
    assert type(out) is bytearray
    return bytes(out), metas


MISSING = "(missing)"


def _same(ours: list, stock: list) -> bool:
    """Equal, except that the patched batches may answer what a stock batch does not."""
    if len(ours) != len(stock):
        return False
    for a, b in zip(ours, stock, strict=False):
        if b and b[0] == "batch" and a and a[0] == "batch":
            a = tuple(x if y != MISSING else MISSING for x, y in zip(a, b, strict=False))
        if a != b:
            return False
    return True


def _read(peer: str, data: bytes, sizes: bool = True) -> list:
    """Everything the peer's reader says about the batches and records of ``data``."""
    mod = importlib.import_module(
        "kafka.record.memory_records" if peer == "kafka_python"
        else "aiokafka.record.memory_records")
    records = mod.MemoryRecords(data)
    out = []
    while records.has_next():
        batch = records.next_batch()
        names = ["base_offset", "magic", "timestamp_type", "is_control_batch", "next_offset",
                 "producer_id", "producer_epoch", "base_sequence", "is_transactional",
                 "first_timestamp", "max_timestamp", "last_offset_delta"]
        names += ["size_in_bytes"] if sizes else []
        fields = [batch.validate_crc()] + [getattr(batch, n, MISSING) for n in names]
        out.append(("batch", *fields))
        for r in batch:
            row = (r.offset, r.timestamp, r.timestamp_type, r.key, r.value,
                   [tuple(h) for h in r.headers], r.checksum)
            if peer == "kafka_python":  # aiokafka's records have no more than that
                row += (r.validate_crc(),)
                row += (r.size_in_bytes,) if batch.magic < 2 else ()
            out.append(row)
    return out


@pytest.mark.parametrize("peer", list(ADAPTERS))
@pytest.mark.parametrize("seed", range(3))
def test_patched_builders_write_what_the_stock_peer_writes(peer: str, seed: int) -> None:
    adapter = ADAPTERS[peer]
    for magic, codec in COMBOS[peer]:
        rng = random.Random(f"{peer}{seed}{magic}{codec}")
        records = _random_records(rng, magic, rng.randrange(1, 60))
        state = None
        if magic == 2 and rng.random() < 0.7:
            state = (rng.randrange(1 << 40), rng.randrange(1 << 15), rng.randrange(1 << 30),
                     peer == "kafka_python" and rng.random() < 0.5)
        stock, stock_meta = _build(peer, magic, codec, records, state)
        adapter.install()
        try:
            ours, our_meta = _build(peer, magic, codec, records, state)
        finally:
            adapter.uninstall()
        assert our_meta == stock_meta, (magic, codec)
        if (peer, codec) in NOT_BYTE_IDENTICAL:
            assert _same(_read(peer, ours, False), _read(peer, stock, False)), (magic, codec)
        else:
            assert ours == stock, (magic, codec)


@pytest.mark.parametrize("peer", list(ADAPTERS))
def test_fullness_matches_the_stock_peer(peer: str) -> None:
    """The same records fit in a small batch with and without the adapter."""
    adapter = ADAPTERS[peer]
    rng = random.Random(peer)
    for magic, codec in COMBOS[peer]:
        records = _random_records(rng, magic, 40)
        for batch_size in (200, 1000, 3000):
            stock = _build(peer, magic, codec, records, None, batch_size)[1]
            adapter.install()
            try:
                ours = _build(peer, magic, codec, records, None, batch_size)[1]
            finally:
                adapter.uninstall()
            assert ours == stock, (magic, codec, batch_size)


@pytest.mark.parametrize("peer", list(ADAPTERS))
@pytest.mark.parametrize("seed", range(3))
def test_stock_bytes_decode_the_same_through_the_adapter(peer: str, seed: int) -> None:
    adapter = ADAPTERS[peer]
    for magic, codec in COMBOS[peer]:
        rng = random.Random(f"read{peer}{seed}{magic}{codec}")
        blob = b""
        for _ in range(rng.randrange(1, 4)):
            records = _random_records(rng, magic, rng.randrange(1, 30))
            blob += _build(peer, magic, codec, records, None)[0]
        blob += blob[: rng.randrange(0, 30)]  # a partial batch at the end, as in a fetch
        stock = _read(peer, blob)
        adapter.install()
        try:
            ours = _read(peer, blob)
        finally:
            adapter.uninstall()
        assert _same(ours, stock), (magic, codec)


def _transactional_blob() -> tuple[bytes, list]:
    """Batches of producers 7 (aborted) and 8 (committed), their markers, a plain batch."""
    from kcodec.records import RecordBatchBuilder

    blob = b""
    offset = 0

    def batch(pid: int, values: list[bytes], control: int | None = None) -> None:
        nonlocal blob, offset
        b = RecordBatchBuilder(base_offset=offset, producer_id=pid, producer_epoch=0,
                               base_sequence=0 if pid >= 0 else -1,
                               is_transactional=pid >= 0, is_control=control is not None)
        if control is None:
            for v in values:
                b.append(b"k", v, [("h", b"1")], 1000 + offset)
        else:
            b.append_control(control, 5, 2000)
        blob += b.build()
        offset += b.record_count

    batch(7, [b"aborted-1", b"aborted-2"])
    batch(8, [b"committed-1"])
    batch(7, [], control=0)
    batch(8, [], control=1)
    batch(-1, [b"plain-1", b"plain-2"])
    return blob, [(7, 0)]


AbortedTransaction = collections.namedtuple("AbortedTransaction", "producer_id first_offset")


def _kp_take(blob: bytes, isolation: int) -> list:
    from kafka.consumer.fetcher import Fetcher
    from kafka.record import MemoryRecords
    from kafka.structs import TopicPartition

    aborted = [AbortedTransaction(producer_id=7, first_offset=0)]
    recs = Fetcher.PartitionRecords(0, TopicPartition("t", 0), MemoryRecords(blob),
                                    isolation_level=isolation, aborted_transactions=aborted)
    out = [(r.offset, r.key, r.value, r.headers) for r in recs.take()]
    return out + [recs.next_fetch_offset, recs.bytes_read > 0]


def test_kafka_python_fetcher_over_the_adapter() -> None:
    from kafka.consumer.fetcher import IsolationLevel

    blob, _ = _transactional_blob()
    for isolation in (IsolationLevel.READ_UNCOMMITTED, IsolationLevel.READ_COMMITTED):
        stock = _kp_take(blob, isolation)
        kp_adapter.install()
        ours = _kp_take(blob, isolation)
        kp_adapter.uninstall()
        assert ours == stock
        values = [row[2] for row in ours[:-2]]
        assert (b"aborted-1" in values) == (isolation == IsolationLevel.READ_UNCOMMITTED)
        assert b"committed-1" in values and b"plain-2" in values


def _aio_take(blob: bytes, isolation: str) -> list:
    from aiokafka.consumer.fetcher import READ_COMMITTED, READ_UNCOMMITTED, PartitionRecords
    from aiokafka.record.memory_records import MemoryRecords
    from aiokafka.structs import TopicPartition

    level = READ_COMMITTED if isolation == "committed" else READ_UNCOMMITTED
    recs = PartitionRecords(TopicPartition("t", 0), MemoryRecords(blob), [(7, 0)], 0,
                            None, None, True, level)
    return [(r.offset, r.key, r.value, r.headers, r.timestamp) for r in recs] + [
        recs.next_fetch_offset]


def test_aiokafka_fetcher_over_the_adapter() -> None:
    blob, _ = _transactional_blob()
    for isolation in ("uncommitted", "committed"):
        stock = _aio_take(blob, isolation)
        aio_adapter.install()
        ours = _aio_take(blob, isolation)
        aio_adapter.uninstall()
        assert ours == stock
        values = [row[2] for row in ours[:-1]]
        assert (b"aborted-1" in values) == (isolation == "uncommitted")


def _kp_accumulate(codec: int) -> list:
    from kafka.producer.record_accumulator import RecordAccumulator
    from kafka.record import MemoryRecords
    from kafka.structs import TopicPartition

    acc = RecordAccumulator(batch_size=2000, compression_attrs=codec, linger_ms=0)
    tp = TopicPartition("t", 0)
    rng = random.Random(codec)
    metas = []
    for i in range(60):
        res = acc.append(tp, 1000 + i, b"k%d" % i, rng.randbytes(rng.randrange(100)),
                         [("h", b"v")], now=0)
        metas.append(res[0].batch_index if hasattr(res[0], "batch_index") else None)
    batches = []
    for dq in acc._batches.values():
        for pb in dq:
            pb.records.close()
            data = bytes(pb.records.buffer())
            batches.append([(r.offset, r.key, r.value, r.headers)
                            for b in MemoryRecords(data) for r in b])
    return [metas, batches]


@pytest.mark.parametrize("codec", [0, 2, 3, 4])
def test_kafka_python_accumulator_over_the_adapter(codec: int) -> None:
    stock = _kp_accumulate(codec)
    kp_adapter.install()
    ours = _kp_accumulate(codec)
    kp_adapter.uninstall()
    assert ours == stock
    assert len(ours[1]) > 1  # the batch size split the records


def _aio_accumulate(codec: int) -> list:
    """aiokafka's accumulator batch builders, filled until full, as its sender does."""
    from aiokafka.producer.message_accumulator import MessageAccumulator
    from aiokafka.record.memory_records import MemoryRecords

    async def run() -> list:
        acc = MessageAccumulator(None, 2000, codec, 30)
        rng = random.Random(codec)
        builders = [acc.create_builder()]
        sizes = []
        for i in range(60):
            args = dict(timestamp=1000 + i, key=b"k%d" % i,
                        value=rng.randbytes(rng.randrange(100)), headers=[("h", b"v")])
            meta = builders[-1].append(**args)
            if meta is None:
                builders.append(acc.create_builder())
                meta = builders[-1].append(**args)
            sizes.append((meta.offset, meta.size, meta.timestamp))
        out: list = [sizes]
        for builder in builders:
            builder.close()
            builder._set_producer_state(3, 1, 0)
            data = bytes(builder._build())
            recs = MemoryRecords(data)
            batch = recs.next_batch()
            out.append([(r.offset, r.key, r.value, r.headers) for r in batch])
            out.append((batch.producer_id, batch.producer_epoch, batch.base_sequence,
                        recs.has_next()))
        return out

    return asyncio.run(run())


@pytest.mark.parametrize("codec", [0, 2, 4])
def test_aiokafka_accumulator_over_the_adapter(codec: int) -> None:
    stock = _aio_accumulate(codec)
    aio_adapter.install()
    ours = _aio_accumulate(codec)
    aio_adapter.uninstall()
    assert ours == stock
    assert len(ours) > 2


def test_v2_records_are_kcodec_records() -> None:
    from kcodec.records import Record

    data = _build("kafka_python", 2, 0, [(1, b"k", b"v", [])], None)[0]
    kp_adapter.install()
    from kafka.record.memory_records import MemoryRecords

    rec = next(iter(MemoryRecords(data).next_batch()))
    assert type(rec) is Record


@pytest.mark.parametrize("peer", list(ADAPTERS))
def test_install_uninstall_restores_everything(peer: str) -> None:
    adapter = ADAPTERS[peer]
    root = "kafka" if peer == "kafka_python" else "aiokafka"
    mods = [m for name, m in sys.modules.items()
            if name.startswith(root + ".") and m is not None]
    before = {(m.__name__, k): v for m in mods for k, v in vars(m).items()}
    adapter.install()
    adapter.install()  # idempotent
    assert adapter.installed()
    changed = {key for key, v in before.items() if vars(sys.modules[key[0]]).get(key[1]) is not v}
    assert {k for _, k in changed} >= {"DefaultRecordBatch", "DefaultRecordBatchBuilder",
                                       "LegacyRecordBatch", "LegacyRecordBatchBuilder",
                                       "calc_crc32c", "decode_varint"}
    adapter.uninstall()
    assert not adapter.installed()
    after = {(m.__name__, k): v for m in mods for k, v in vars(m).items()}
    assert after == before


@pytest.mark.parametrize("peer", list(ADAPTERS))
def test_unsupported_version_is_refused_before_patching(peer: str, monkeypatch) -> None:
    adapter = ADAPTERS[peer]
    mod = kafka if peer == "kafka_python" else aiokafka
    monkeypatch.setattr(mod, "__version__", "9.1.0")
    from kafka.record import default_records as kdr

    stock = kdr.DefaultRecordBatch
    with pytest.raises(ImportError, match="supports"):
        adapter.install()
    assert not adapter.installed()
    assert kdr.DefaultRecordBatch is stock


def test_kcodec_patch_environment_switch() -> None:
    code = ("import kcodec, kafka.record.memory_records as k, aiokafka.consumer.fetcher as a;"
            "print(k.DefaultRecordBatch.__module__, a.MemoryRecords.__module__)")
    env = dict(os.environ, KCODEC_PATCH="kafka_python,aiokafka")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, check=True).stdout.split()
    assert out == ["kcodec.compat.kafka_python", "kcodec.compat.aiokafka"]
    env["KCODEC_PATCH"] = "nope"
    res = subprocess.run([sys.executable, "-c", "import kcodec"], env=env,
                         capture_output=True, text=True)
    assert res.returncode != 0 and "unknown kcodec adapter" in res.stderr
