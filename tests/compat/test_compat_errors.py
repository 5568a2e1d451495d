"""kcodec.compat: corrupt records raise the peer's own exception, and the record classes the
adapters put in kafka-python's modules can be patched as the stock ones can.

Corrupt batches are iterated through each peer's own reader (MemoryRecords, and the
fetchers' PartitionRecords), stock and with the adapter installed: both raise the peer's
CorruptRecordError / CorruptRecordException after yielding the same good records; with the
adapter, the exception is chained from kcodec's DecodeError. The remapping iterator is
checked in both twins in one process; the adapters run on the twin this run uses (CI runs
the default and the KCODEC_NO_EXTENSIONS=1 pass).
"""

from __future__ import annotations

import importlib
import struct
from typing import Any
from unittest import mock

import pytest

from kcodec.crc import crc32c
from kcodec.errors import CorruptDataError, DecodeError, KcodecError
from kcodec.records import Record, RecordBatchBuilder

pytestmark = pytest.mark.peers

kafka = pytest.importorskip("kafka")
aiokafka = pytest.importorskip("aiokafka")

import kcodec.compat.aiokafka as aio_adapter  # noqa: E402
import kcodec.compat.kafka_python as kp_adapter  # noqa: E402


@pytest.fixture(autouse=True)
def _stock_afterwards():
    yield
    kp_adapter.uninstall()
    aio_adapter.uninstall()


# -- the remapping iterator, both twins ------------------------------------------------------

class Mapped(Exception):
    pass


def _failing(n: int, exc: BaseException):
    yield from range(n)
    raise exc


@pytest.mark.parametrize("which", [0, 1], ids=["compiled", "pure"])
def test_remap_errors_passes_items_and_maps_the_caught_class(pair, which: int) -> None:
    remap = pair("peer")[which].remap_errors
    assert list(remap([1, 2, 3], DecodeError, Mapped)) == [1, 2, 3]
    assert list(remap(iter(()), DecodeError, Mapped)) == []

    cause = CorruptDataError("bad", 7)
    it = remap(_failing(2, cause), DecodeError, lambda e: Mapped(f"mapped: {e}"))
    assert iter(it) is it
    assert [next(it), next(it)] == [0, 1]
    with pytest.raises(Mapped) as info:
        next(it)
    assert info.value.__cause__ is cause
    assert "mapped: bad" in str(info.value)
    assert list(it) == []  # finished after the error, as a generator is

    # other exceptions pass through unchanged, and end the iteration too
    other = KeyError("x")
    it = remap(_failing(1, other), DecodeError, Mapped)
    assert next(it) == 0
    with pytest.raises(KeyError) as kinfo:
        next(it)
    assert kinfo.value is other
    assert list(it) == []

    # a tuple of classes, as ``except`` takes
    it = remap(_failing(0, ValueError("v")), (KeyError, ValueError), Mapped)
    with pytest.raises(Mapped):
        next(it)


def test_remap_errors_twins_agree_on_random_failures(pair) -> None:
    cy, py = pair("peer")
    for n in range(4):
        for exc in (CorruptDataError("c", 1), KcodecError("k"), ValueError("v")):
            got = []
            for mod in (cy, py):
                seen: list[Any] = []
                try:
                    for x in mod.remap_errors(_failing(n, exc), DecodeError, Mapped):
                        seen.append(x)
                except Exception as e:  # noqa: BLE001 - the class is what is compared
                    seen.append((type(e), type(e.__cause__)))
                got.append(seen)
            assert got[0] == got[1]


# -- corrupt batches through the peers' readers ----------------------------------------------

N = 5


def _batch(codec: int = 0, value: bytes = b"v") -> bytearray:
    """N records with a null key, ``value`` and no headers: each record is length,
    attributes, timestamp delta, offset delta, -1 key, value length, value, 0 headers."""
    b = RecordBatchBuilder(compression=codec, max_size=1 << 20)
    for i in range(N):
        b.append(None, value, [], 1_700_000_000_000 + i)
    return bytearray(b.build())


def _recrc(buf: bytearray) -> bytes:
    struct.pack_into(">I", buf, 17, crc32c(bytes(buf[21:])))
    return bytes(buf)


def _negative_header_count() -> bytes:
    buf = _batch()
    # the records take 8 bytes each from offset 61; the last byte of record 3 is its header
    # count: 0x01 is zigzag -1
    assert buf[61 + 4 * 8 - 1] == 0
    buf[61 + 4 * 8 - 1] = 0x01
    return _recrc(buf)


def _count_too_high() -> bytes:
    # values long enough that one more record is possible in the bytes (kcodec refuses an
    # impossible count before decoding anything)
    buf = _batch(value=b"v" * 30)
    struct.pack_into(">i", buf, 57, N + 1)
    return _recrc(buf)


def _count_too_low() -> bytes:
    buf = _batch()
    struct.pack_into(">i", buf, 57, N - 1)
    return _recrc(buf)


def _bad_lz4_payload() -> bytes:
    buf = _batch(codec=3)
    for i in range(61 + 8, len(buf)):
        buf[i] ^= 0x5A
    return _recrc(buf)


CASES = {
    "negative header count": (_negative_header_count, 3),
    "record count too high": (_count_too_high, N),
    "record count too low": (_count_too_low, N - 1),
}


def _peer(peer: str) -> tuple[Any, type[Exception]]:
    if peer == "kafka_python":
        from kafka.errors import CorruptRecordError

        return kp_adapter, CorruptRecordError
    from aiokafka.errors import CorruptRecordException

    return aio_adapter, CorruptRecordException


def _read(peer: str, blob: bytes) -> tuple[list[Any], BaseException | None]:
    """Values read through the peer's MemoryRecords before an error, and the error."""
    mod = "kafka.record.memory_records" if peer == "kafka_python" else \
        "aiokafka.record.memory_records"
    records = importlib.import_module(mod).MemoryRecords(blob)
    got: list[Any] = []
    try:
        while records.has_next():
            batch = records.next_batch()
            for r in batch:
                got.append((r.offset, len(r.value)))
    except Exception as exc:  # noqa: BLE001 - compared below
        return got, exc
    return got, None


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("peer", ["kafka_python", "aiokafka"])
def test_corrupt_records_raise_the_peers_exception(peer: str, case: str) -> None:
    adapter, corrupt = _peer(peer)
    make, good = CASES[case]
    blob = make()
    stock_values, stock_exc = _read(peer, blob)
    adapter.install()
    values, exc = _read(peer, blob)
    adapter.uninstall()
    assert isinstance(stock_exc, corrupt), stock_exc
    assert isinstance(exc, corrupt), exc
    # chained from kcodec's error, which says what was wrong where
    assert isinstance(exc.__cause__, DecodeError)
    # the records before the bad one are handed out first, as the peer does
    assert values == stock_values
    assert len(values) == good


@pytest.mark.parametrize("peer", ["kafka_python", "aiokafka"])
def test_undecompressable_batch_raises_the_peers_exception(peer: str) -> None:
    adapter, corrupt = _peer(peer)
    adapter.install()
    values, exc = _read(peer, _bad_lz4_payload())
    assert values == []
    assert isinstance(exc, corrupt), exc
    assert isinstance(exc.__cause__, DecodeError)


@pytest.mark.parametrize("peer", ["kafka_python", "aiokafka"])
def test_next_batch_continues_with_the_peers_exception(peer: str) -> None:
    """next(batch), as aiokafka's fetcher calls it, raises the peer's exception too."""
    adapter, corrupt = _peer(peer)
    adapter.install()
    mod = "kafka.record.memory_records" if peer == "kafka_python" else \
        "aiokafka.record.memory_records"
    batch = importlib.import_module(mod).MemoryRecords(_negative_header_count()).next_batch()
    assert [next(batch).offset for _ in range(3)] == [0, 1, 2]
    with pytest.raises(corrupt) as info:
        next(batch)
    assert isinstance(info.value.__cause__, CorruptDataError)


def test_kafka_python_fetcher_raises_corrupt_record_error() -> None:
    kp_adapter.install()
    from kafka.consumer.fetcher import Fetcher
    from kafka.errors import CorruptRecordError
    from kafka.record import MemoryRecords
    from kafka.structs import TopicPartition

    recs = Fetcher.PartitionRecords(0, TopicPartition("t", 0),
                                    MemoryRecords(_negative_header_count()))
    # as with kafka-python's own classes: the good records first, the error on the next take
    assert [r.offset for r in recs.take(10)] == [0, 1, 2]
    with pytest.raises(CorruptRecordError) as info:
        recs.take(10)
    assert isinstance(info.value.__cause__, DecodeError)


def test_aiokafka_fetcher_raises_corrupt_record_exception() -> None:
    aio_adapter.install()
    from aiokafka.consumer.fetcher import READ_UNCOMMITTED, PartitionRecords
    from aiokafka.errors import CorruptRecordException
    from aiokafka.record.memory_records import MemoryRecords
    from aiokafka.structs import TopicPartition

    recs = PartitionRecords(TopicPartition("t", 0), MemoryRecords(_negative_header_count()),
                            [], 0, None, None, True, READ_UNCOMMITTED)
    got = []
    with pytest.raises(CorruptRecordException) as info:
        for r in recs:
            got.append(r.offset)
    assert got == [0, 1, 2]
    assert isinstance(info.value.__cause__, DecodeError)


# -- patchable record classes (kafka-python) -------------------------------------------------

def _kp_values(blob: bytes) -> list[Any]:
    from kafka.record import MemoryRecords

    out = []
    records = MemoryRecords(blob)
    while records.has_next():
        for r in records.next_batch():
            out.append(r)
    return out


def test_kafka_python_default_record_can_be_patched() -> None:
    """What kafka-python's own fetcher test does: patch DefaultRecord.validate_crc."""
    from kafka.consumer.fetcher import Fetcher
    from kafka.errors import CorruptRecordError
    from kafka.record import MemoryRecords
    from kafka.structs import TopicPartition

    kp_adapter.install()
    from kafka.record.default_records import DefaultRecord

    blob = bytes(_batch())
    plain = _kp_values(blob)
    # unpatched: kcodec's own records, no wrapper, and they count as DefaultRecords
    assert all(type(r) is Record for r in plain)
    assert all(isinstance(r, DefaultRecord) for r in plain)

    with mock.patch.object(DefaultRecord, "validate_crc",
                           side_effect=[True, True, False, True, True]):
        recs = Fetcher.PartitionRecords(0, TopicPartition("t", 0), MemoryRecords(blob))
        assert len(recs.take(10)) == 2
        with pytest.raises(CorruptRecordError):
            recs.take(10)
    with mock.patch.object(DefaultRecord, "value", "patched"):
        assert {r.value for r in _kp_values(blob)} == {"patched"}
    # the patches are gone: back to kcodec's records, with the same values as before
    again = _kp_values(blob)
    assert all(type(r) is Record for r in again)
    assert [(r.offset, r.timestamp, r.key, r.value, r.headers, r.size_in_bytes,
             r.validate_crc()) for r in again] == [
        (r.offset, r.timestamp, r.key, r.value, r.headers, r.size_in_bytes, r.validate_crc())
        for r in plain]


def test_kafka_python_patched_record_keeps_every_field() -> None:
    kp_adapter.install()
    from kafka.record.default_records import DefaultRecord

    b = RecordBatchBuilder(max_size=1 << 20)
    b.append(b"k", b"v", [("h", b"x"), ("n", None)], 1_700_000_000_123)
    blob = bytes(b.build())
    plain = _kp_values(blob)[0]
    with mock.patch.object(DefaultRecord, "validate_crc", return_value=False):
        r = _kp_values(blob)[0]
        assert type(r) is DefaultRecord and not r.validate_crc()
        assert (r.offset, r.timestamp, r.timestamp_type, r.key, r.value, r.headers,
                r.size_in_bytes, r.checksum) == (
            plain.offset, plain.timestamp, plain.timestamp_type, plain.key, plain.value,
            plain.headers, plain.size_in_bytes, plain.checksum)


def test_kafka_python_control_and_legacy_records_can_be_patched() -> None:
    from kafka.record.memory_records import MemoryRecordsBuilder

    kp_adapter.install()
    from kafka.record.default_records import ControlRecord, DefaultRecord
    from kafka.record.legacy_records import LegacyRecord

    marker = RecordBatchBuilder(is_control=True, is_transactional=True, producer_id=3,
                                producer_epoch=0, max_size=1 << 20)
    marker.append_control(1, 5, 1_700_000_000_000)
    blob = bytes(marker.build())
    (r,) = _kp_values(blob)
    assert type(r) is ControlRecord and isinstance(r, DefaultRecord)
    assert (r.type, r.version, r.commit, r.abort) == (1, 0, True, False)
    with mock.patch.object(ControlRecord, "commit", False):
        assert _kp_values(blob)[0].commit is False
    with mock.patch.object(DefaultRecord, "validate_crc", return_value=False):
        assert _kp_values(blob)[0].validate_crc() is False  # inherited, as in kafka-python
    assert _kp_values(blob)[0].commit is True

    builder = MemoryRecordsBuilder(1, 0, 1 << 20)
    builder.append(1_700_000_000_000, b"k", b"v", None)
    builder.close()
    legacy = bytes(builder.buffer())
    (lrec,) = _kp_values(legacy)
    assert isinstance(lrec, LegacyRecord) and lrec.validate_crc()
    with mock.patch.object(LegacyRecord, "validate_crc", return_value=False):
        assert _kp_values(legacy)[0].validate_crc() is False
    assert _kp_values(legacy)[0].validate_crc() is True


def test_kafka_python_record_classes_take_the_stock_constructor_arguments() -> None:
    """A stock batch made before install() builds records through the module's names."""
    kp_adapter.install()
    from kafka.record.default_records import ControlRecord, DefaultRecord
    from kafka.record.legacy_records import LegacyRecord

    r = DefaultRecord(9, 5, 1000, 0, b"k", b"v", [("h", b"1")])
    assert (r.size_in_bytes, r.offset, r.timestamp, r.key, r.value, r.headers) == (
        9, 5, 1000, b"k", b"v", [("h", b"1")])
    c = ControlRecord(10, 6, 1000, 0, b"\x00\x00\x00\x00", b"\x00\x00\x00\x00\x00\x01", [])
    assert (c.version, c.type, c.abort) == (0, 0, True)
    payload = b"\x01\x00" + b"\x00" * 10
    from kcodec.crc import crc32

    lr = LegacyRecord(1, 3, 1000, 0, None, b"v", crc32(payload), payload)
    assert lr.validate_crc() and lr.checksum == crc32(payload)
    assert not LegacyRecord(1, 3, 1000, 0, None, b"v", 1, payload).validate_crc()


def test_uninstall_gives_kafka_python_its_record_classes_back() -> None:
    from kafka.record import default_records as dr
    from kafka.record import legacy_records as lr

    stock = (dr.DefaultRecord, dr.ControlRecord, lr.LegacyRecord)
    kp_adapter.install()
    assert (dr.DefaultRecord, dr.ControlRecord, lr.LegacyRecord) != stock
    kp_adapter.uninstall()
    assert (dr.DefaultRecord, dr.ControlRecord, lr.LegacyRecord) == stock


# -- aiokafka's append metadata, both twins --------------------------------------------------

@pytest.mark.parametrize("which", [0, 1], ids=["compiled", "pure"])
def test_default_record_metadata_answers_as_aiokafkas(pair, which: int) -> None:
    mod = pair("peer")[which]
    cls = mod.DefaultRecordMetadata
    builder = importlib.import_module(
        "kcodec._cy.builder" if mod.__name__.startswith("kcodec._cy") else "kcodec._py.builder")
    b = builder.RecordBatchBuilder(metadata_class=cls, max_size=1 << 20)
    metas = [b.append_with_offset(i, 1000 + i, b"k", b"v%d" % i, []) for i in range(300)]
    assert all(type(m) is cls for m in metas)
    assert [(m.offset, m.timestamp, m.crc) for m in metas] == [
        (i, 1000 + i, None) for i in range(300)]
    assert metas[12].size == metas[0].size + 1  # b"v12" is one byte longer than b"v0"
    assert repr(metas[3]) == f"DefaultRecordMetadata(offset=3, size={metas[3].size}, timestamp=1003)"


def test_aiokafka_builder_metadata_matches_stock() -> None:
    """The metadata the patched aiokafka builder returns answers as aiokafka's own."""
    from aiokafka.record import default_records as dr

    def run() -> list[tuple[Any, ...]]:
        b = dr.DefaultRecordBatchBuilder(2, 0, 0, -1, -1, -1, 1 << 20)
        out = []
        for i in range(50):
            m = b.append(i, 1_700_000_000_000 + i, b"k" * (i % 7), b"v" * i, [("h", b"x")])
            out.append((m.offset, m.size, m.timestamp, m.crc, repr(m)))
        return out

    stock = run()
    aio_adapter.install()
    assert run() == stock


def test_aiokafka_metadata_patchable_when_aiokafka_runs_its_python_classes() -> None:
    """With AIOKAFKA_NO_EXTENSIONS aiokafka's own metadata class is a Python class that can
    be patched; the adapter's is then too (with aiokafka's Cython classes neither is)."""
    code = (
        "import kcodec.compat.aiokafka as a; a.install()\n"
        "from unittest import mock\n"
        "from aiokafka.record import default_records as dr\n"
        "b = dr.DefaultRecordBatchBuilder(2, 0, 0, -1, -1, -1, 1 << 20)\n"
        "with mock.patch.object(dr.DefaultRecordMetadata, 'offset', 'patched'):\n"
        "    print(b.append(0, 1, None, b'v', []).offset)\n"
        "print(b.append(1, 1, None, b'v', []).offset)\n")
    import os
    import subprocess
    import sys

    env = dict(os.environ, AIOKAFKA_NO_EXTENSIONS="1")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, check=True).stdout.split()
    assert out == ["patched", "1"]
