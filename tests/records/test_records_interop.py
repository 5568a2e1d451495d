"""Interop with the real peers: kafka-python and aiokafka build, kcodec reads; kcodec builds,
they read. Every codec, magics 0, 1 and 2, headers with None values, control batches."""

from __future__ import annotations

import importlib
from typing import Any

import pytest

# Peers are imported inside the tests (the `peers` convention), so this module collects
# where they are not installed and `-m "not peers"` deselects it cleanly.
pytestmark = [
    pytest.mark.peers,
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),  # kafka-python's own imports
]

_PEER_CLASSES = {
    "AioV2Builder": "aiokafka.record.default_records:DefaultRecordBatchBuilder",
    "AioLegacyBuilder": "aiokafka.record.legacy_records:LegacyRecordBatchBuilder",
    "AioMemoryRecords": "aiokafka.record.memory_records:MemoryRecords",
    "KpV2Builder": "kafka.record.default_records:DefaultRecordBatchBuilder",
    "KpLegacyBuilder": "kafka.record.legacy_records:LegacyRecordBatchBuilder",
    "KpMemoryRecords": "kafka.record.memory_records:MemoryRecords",
}


def peer(name: str) -> Any:
    """A peer class by its short name, imported when a test needs it."""
    module, attr = _PEER_CLASSES[name].split(":")
    return getattr(importlib.import_module(module), attr)

TS = 1_700_000_000_000
CODECS = [0, 1, 2, 3, 4]
LEGACY_CODECS = [0, 1, 2, 3]


def rows(n: int = 30) -> list[tuple]:
    out = []
    for i in range(n):
        key = None if i % 5 == 0 else f"key-{i:04d}".encode()
        value = None if i % 7 == 3 else (b"value-%d-" % i) * (i % 4 + 1)
        headers = [("h1", b"a"), ("h1", None), ("\u00e9t\u00e9", b"\x00\xff")][: i % 4]
        out.append((key, value, headers, TS + i * 3))
    return out


def peer_v2(builder_cls, codec: int, data=None) -> bytes:
    b = builder_cls(magic=2, compression_type=codec, is_transactional=0, producer_id=-1,
                    producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
    for i, (k, v, h, ts) in enumerate(data or rows()):
        assert b.append(i, timestamp=ts, key=k, value=v, headers=h) is not None
    return bytes(b.build())


def peer_legacy(builder_cls, magic: int, codec: int) -> bytes:
    b = builder_cls(magic=magic, compression_type=codec, batch_size=1 << 20)
    for i, (k, v, _, ts) in enumerate(rows()):
        assert b.append(i, timestamp=ts, key=k, value=v) is not None
    return bytes(b.build())


def read_peer(memory_cls, data: bytes) -> list[tuple]:
    out = []
    mr = memory_cls(data)
    while True:
        batch = mr.next_batch()
        if batch is None:
            break
        for r in batch:
            ts = -1 if r.timestamp is None else r.timestamp  # magic 0: None in the peers
            out.append((r.offset, ts, r.key, r.value, list(r.headers)))
    return out


def read_kcodec(records_mod, data: bytes) -> list[tuple]:
    return [(r.offset, r.timestamp, r.key, r.value, r.headers)
            for batch in records_mod.iter_batches(data) for r in batch]


def expected(magic: int = 2) -> list[tuple]:
    return [(i, -1 if magic == 0 else ts, k, v, h if magic == 2 else [])
            for i, (k, v, h, ts) in enumerate(rows())]


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("builder", ["KpV2Builder", "AioV2Builder"],
                         ids=["kafka-python", "aiokafka"])
def test_peer_v2_decodes_in_kcodec(twin, builder: str, codec: int) -> None:
    data = peer_v2(peer(builder), codec)
    assert read_kcodec(twin("batch"), data) == expected()
    (batch,) = list(twin("batch").iter_batches(data))
    assert batch.compression == codec and batch.validate_crc()
    assert batch.record_count == len(rows()) and batch.last_offset == len(rows()) - 1


def _legacy_cases(kp: str, aio: str) -> list:
    """(peer, magic, codec) for every legacy combination the peer supports: aiokafka has
    no lz4 for magic 0 (it refuses the legacy framing both ways), kafka-python has all."""
    return [pytest.param(name, magic, codec, id=f"{label}-m{magic}-c{codec}")
            for name, label in ((kp, "kafka-python"), (aio, "aiokafka"))
            for magic in (0, 1) for codec in LEGACY_CODECS
            if not (name == aio and magic == 0 and codec == 3)]


@pytest.mark.parametrize("builder,magic,codec", _legacy_cases("KpLegacyBuilder", "AioLegacyBuilder"))
def test_peer_legacy_decodes_in_kcodec(twin, builder: str, magic: int, codec: int) -> None:
    data = peer_legacy(peer(builder), magic, codec)
    assert read_kcodec(twin("batch"), data) == expected(magic)
    batches = list(twin("batch").iter_batches(data))
    if codec:
        (w,) = batches
        # Both peers write the wrapper's offset as 0 (a broker rewrites it), so inner
        # offsets stay relative, as Java reads them.
        assert (w.compression, w.base_offset, w.record_count, w.last_offset) == (
            codec, 0, len(rows()), 0)


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("memory", ["KpMemoryRecords", "AioMemoryRecords"],
                         ids=["kafka-python", "aiokafka"])
def test_kcodec_v2_decodes_in_peer(twin, memory: str, codec: int) -> None:
    b = twin("builder").RecordBatchBuilder(compression=codec, partition_leader_epoch=0)
    for k, v, h, ts in rows():
        assert b.append(k, v, h, ts) is not None
    data = b.build()
    assert read_peer(peer(memory), data) == expected()
    if codec == 0:  # uncompressed: byte-identical to kafka-python's batch
        assert data == peer_v2(peer("KpV2Builder"), codec)


@pytest.mark.parametrize("memory,magic,codec", _legacy_cases("KpMemoryRecords", "AioMemoryRecords"))
def test_kcodec_legacy_decodes_in_peer(twin, memory: str, magic: int, codec: int) -> None:
    b = twin("legacy").MessageSetBuilder(magic=magic, compression=codec)
    for k, v, _, ts in rows():
        assert b.append(k, v, ts) is not None
    data = b.build()
    assert read_peer(peer(memory), data) == expected(magic)
    if codec == 0:
        assert data == peer_legacy(peer("KpLegacyBuilder"), magic, 0)


@pytest.mark.parametrize("control_type", [0, 1])
def test_kcodec_control_batch_in_kafka_python(twin, control_type: int) -> None:
    b = twin("builder").RecordBatchBuilder(is_control=True, is_transactional=True,
                                         producer_id=42, producer_epoch=3, base_offset=9)
    b.append_control(control_type, coordinator_epoch=17, timestamp=TS)
    data = b.build()
    mr = peer("KpMemoryRecords")(data)
    batch = mr.next_batch()
    assert batch.is_control_batch and batch.is_transactional and batch.producer_id == 42
    (rec,) = list(batch)
    assert rec.abort == (control_type == 0) and rec.commit == (control_type == 1)
    (ours,) = list(twin("batch").iter_batches(data))
    (c,) = list(ours)
    assert ours.is_control and ours.is_transactional
    assert c.is_control and (c.control_type, c.coordinator_epoch, c.offset) == (
        control_type, 17, 9)
    ab = peer("AioMemoryRecords")(data).next_batch()
    assert ab.is_control_batch


def test_peer_v2_batches_mixed_with_legacy_and_a_cut_tail(twin) -> None:
    parts = [peer_legacy(peer("KpLegacyBuilder"), 0, 1),
             peer_legacy(peer("AioLegacyBuilder"), 1, 0),
             peer_v2(peer("AioV2Builder"), 3), peer_v2(peer("KpV2Builder"), 0)]
    blob = b"".join(parts)
    for cut in (0, 1, 11, 12, 40, len(parts[-1]) - 1):
        data = blob[:len(blob) - cut]
        it = twin("batch").iter_batches(data)
        got = [r.value for batch in it for r in batch]
        if cut == 0:
            assert it.consumed == len(blob) and not it.incomplete
            assert len(got) == 30 + 30 + 30 + 30
        else:
            assert it.consumed == len(blob) - len(parts[-1]) and it.incomplete
            assert len(got) == 30 + 30 + 30


@pytest.mark.parametrize("codec", [1, 2, 3])
def test_kcodec_magic1_wrapper_offsets_are_absolute_in_peers(twin, codec: int) -> None:
    b = twin("legacy").MessageSetBuilder(magic=1, compression=codec, base_offset=1000)
    for k, v, _, ts in rows():
        b.append(k, v, ts)
    data = b.build()
    want = [(1000 + i, ts, k, v, []) for i, (k, v, _, ts) in enumerate(rows())]
    assert read_peer(peer("KpMemoryRecords"), data) == want
    assert read_peer(peer("AioMemoryRecords"), data) == want
    assert read_kcodec(twin("batch"), data) == want
    (w,) = list(twin("batch").iter_batches(data))
    assert (w.base_offset, w.last_offset, w.max_timestamp) == (1000, 1029, rows()[-1][3])
