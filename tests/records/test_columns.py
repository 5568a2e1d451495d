"""Columnar decode (kcodec.records.decode_columns): both twins, against the record reader
(kcodec.records.iter_batches) record by record, against the peers' decoders, Arrow zero-copy,
bad input, and differential property tests between the twins."""

from __future__ import annotations

import os
import random
import struct
from typing import Any

import numpy as np  # a test requirement (and the columns' own)
import pytest

from kcodec import _columnar
from kcodec.errors import (
    ChecksumError,
    CorruptDataError,
    DecompressionLimitError,
    KcodecError,
    TruncatedError,
)
from kcodec.records import (
    MessageSetBuilder,
    RecordBatchBuilder,
    iter_batches,
)
from tests.support.segments import META_LOG, TOPIC_LOG, reference

TS = 1_700_000_000_000


# ---------------------------------------------------------------------------------------------
# helpers


def rows(n: int = 30) -> list[tuple]:
    """(key, value, headers, timestamp): null keys/values, None header values, UTF-8 keys."""
    out = []
    for i in range(n):
        key = None if i % 5 == 0 else f"key-{i:04d}".encode()
        value = None if i % 7 == 3 else (b"value-%d-" % i) * (i % 4 + 1)
        headers = [("h1", b"a"), ("h1", None), ("\u00e9t\u00e9", b"\x00\xff")][: i % 4]
        out.append((key, value, headers, TS + i * 3))
    return out


def kc_v2(codec: int = 0, n: int = 30, base_offset: int = 0, **kw: Any) -> bytes:
    b = RecordBatchBuilder(compression=codec, base_offset=base_offset, **kw)
    for k, v, h, ts in rows(n):
        assert b.append(k, v, h, timestamp=ts) is not None
    return b.build()


def kc_legacy(magic: int, codec: int = 0, n: int = 30, base_offset: int = 0) -> bytes:
    b = MessageSetBuilder(magic=magic, compression=codec, base_offset=base_offset)
    for k, v, _, ts in rows(n):
        assert b.append(k, v, timestamp=ts) is not None
    return b.build()


def kc_control(base_offset: int, commit: bool = True) -> bytes:
    b = RecordBatchBuilder(base_offset=base_offset, is_control=True, is_transactional=True,
                           producer_id=7, producer_epoch=1)
    b.append_control(1 if commit else 0, coordinator_epoch=3, timestamp=TS)
    return b.build()


def reader_rows(data: Any, include_control: bool = False, **kw: Any) -> list[dict]:
    """What decode_columns must give, from the record reader."""
    out = []
    for batch in iter_batches(data, **kw):
        if batch.is_control and not include_control:
            continue
        for r in batch:
            d = {"offset": r.offset, "timestamp": r.timestamp,
                 "timestamp_type": r.timestamp_type, "key": r.key, "value": r.value,
                 "headers": list(r.headers)}
            if include_control:
                d["is_control"] = bool(batch.is_control)
            out.append(d)
    return out


def outcome(fn: Any, data: Any, **kw: Any) -> tuple:
    try:
        return ("ok", fn(data, **kw))
    except KcodecError as exc:
        return ("error", type(exc), str(exc))


def same(a: tuple, b: tuple) -> bool:
    if a[0] != b[0]:
        return False
    if a[0] == "ok":
        return a[1].equals(b[1])
    return a[1:] == b[1:]


def reader_outcome(data: Any, include_control: bool = False, **kw: Any) -> tuple:
    try:
        return ("ok", reader_rows(data, include_control, **kw))
    except KcodecError as exc:
        return ("error", type(exc), str(exc))


def check_against_reader(cols_mod: Any, data: Any, include_control: bool = False,
                         **kw: Any) -> None:
    got = outcome(cols_mod.decode_columns, data, include_control=include_control, **kw)
    want = reader_outcome(data, include_control, **kw)
    if want[0] == "ok":
        assert got[0] == "ok", got
        assert got[1].to_pylist() == want[1]
    else:
        assert got[0] == "error" and got[1:] == want[1:], (got, want)


@pytest.fixture
def cols(twin):
    return twin("columns")


# ---------------------------------------------------------------------------------------------
# basics


def test_face_is_reexported() -> None:
    import kcodec.records as rec
    import kcodec.records.columns as face

    assert rec.decode_columns is face.decode_columns
    assert rec.RecordColumns is _columnar.RecordColumns


def test_one_batch_every_column(cols) -> None:
    data = kc_v2()
    c = cols.decode_columns(data)
    assert len(c) == 30 and c.batch_count == 1 and c.consumed == len(data)
    assert c.next_offset == 30 and c.is_control is None
    assert c.offset.dtype == np.int64 and c.offset.tolist() == list(range(30))
    assert c.timestamp.dtype == np.int64 and c.timestamp.tolist() == [TS + 3 * i for i in range(30)]
    assert c.timestamp_type.dtype == np.int8 and not c.timestamp_type.any()
    assert c.key.to_pylist() == [r[0] for r in rows()]
    assert c.value.to_pylist() == [r[1] for r in rows()]
    assert c.headers.to_pylist() == [r[2] for r in rows()]
    assert c.key.offsets.dtype == np.int32 and c.key.data.dtype == np.uint8
    assert c.key.null_count == 6 and c.key.valid.tolist() == [i % 5 != 0 for i in range(30)]
    assert c.value.null_count == sum(1 for i in range(30) if i % 7 == 3)
    assert c.headers.values.null_count == sum(1 for i in range(30) if i % 4 >= 2)
    assert c.headers.keys.validity is None and c.headers.keys.utf8
    assert c.headers.counts.tolist() == [i % 4 for i in range(30)]
    assert c.key[1] == b"key-0001" and c.key[0] is None and c.key[-1] == b"key-0029"
    assert c.headers[3] == rows()[3][2]
    assert c["value"] is c.value
    assert c.to_pylist() == reader_rows(data)


def test_layout_is_arrow_binary(cols) -> None:
    c = cols.decode_columns(kc_v2(n=3))
    # keys: None, b"key-0001", b"key-0002"
    assert c.key.offsets.tolist() == [0, 0, 8, 16]
    assert c.key.data.tobytes() == b"key-0001key-0002"
    assert c.key.validity.tolist() == [0b110]
    assert c.value.validity is None and c.value.null_count == 0


def test_results_own_their_memory(cols) -> None:
    """The columns are copies: changing the input afterwards changes nothing."""
    data = bytearray(kc_v2())
    c = cols.decode_columns(data)
    want = c.to_pylist()
    data[:] = b"\x00" * len(data)
    assert c.to_pylist() == want
    for arr in (c.offset, c.timestamp, c.key.offsets, c.key.data, c.value.data):
        assert arr.flags.c_contiguous and arr.base is not data


@pytest.mark.parametrize("data", [b"", b"\x00" * 11, kc_v2()[:-1], kc_v2()[:40]])
def test_empty_and_incomplete_only(cols, data: bytes) -> None:
    c = cols.decode_columns(data)
    assert len(c) == 0 and c.consumed == 0 and c.batch_count == 0 and c.next_offset is None
    assert c.key.offsets.tolist() == [0] and c.headers.offsets.tolist() == [0]
    assert c.to_pylist() == []


def test_stops_at_incomplete_trailing_batch(cols) -> None:
    a, b = kc_v2(0, 10), kc_v2(0, 10, base_offset=10)
    for cut in (1, 12, 60, len(b) - 1):
        c = cols.decode_columns(a + b[:cut])
        assert len(c) == 10 and c.consumed == len(a) and c.next_offset == 10


@pytest.mark.parametrize("codec", [0, 1, 2, 3, 4])
def test_every_codec_matches_reader(cols, codec: int) -> None:
    data = kc_v2(codec, 200)
    c = cols.decode_columns(data)
    assert c.to_pylist() == reader_rows(data)
    assert len(c) == 200


@pytest.mark.parametrize("magic,codec", [(0, 0), (0, 1), (0, 2), (0, 3), (1, 0), (1, 1), (1, 2),
                                         (1, 3)])
def test_legacy_matches_reader(cols, magic: int, codec: int) -> None:
    data = kc_legacy(magic, codec, base_offset=100)
    c = cols.decode_columns(data)
    assert c.to_pylist() == reader_rows(data)
    assert c.offset.tolist() == list(range(100, 130))
    assert c.timestamp_type.tolist() == [-1 if magic == 0 else 0] * 30
    assert (c.timestamp == -1).all() if magic == 0 else c.timestamp.tolist()[0] == TS
    assert c.headers.offsets.tolist() == [0] * 31


def test_mixed_magics_codecs_and_control(cols) -> None:
    parts = [kc_legacy(0, 0, 5, 0), kc_legacy(1, 2, 5, 5), kc_v2(0, 5, 10), kc_v2(4, 5, 15),
             kc_control(20), kc_v2(3, 5, 21), kc_legacy(1, 1, 5, 26)]
    data = b"".join(parts)
    c = cols.decode_columns(data + parts[2][:30])
    # an uncompressed legacy message set is one entry per message
    assert c.batch_count == len(list(iter_batches(data))) == 11 and c.consumed == len(data)
    assert c.offset.tolist() == list(range(20)) + list(range(21, 31))
    assert c.next_offset == 31
    assert c.to_pylist() == reader_rows(data)
    ci = cols.decode_columns(data, include_control=True)
    assert ci.offset.tolist() == list(range(31))
    assert ci.is_control.dtype == np.bool_ and ci.is_control.tolist() == [i == 20 for i in range(31)]
    assert ci.to_pylist() == reader_rows(data, include_control=True)
    assert ci.key[20] == b"\x00\x00\x00\x01"          # control key: version 0, type 1 (commit)
    assert ci.column_names[-1] == "is_control"


def test_only_control_batches(cols) -> None:
    data = kc_control(5) + kc_control(6, commit=False)
    c = cols.decode_columns(data)
    assert len(c) == 0 and c.batch_count == 2 and c.next_offset == 7


def test_log_append_time(cols) -> None:
    b = RecordBatchBuilder(timestamp_type=1)
    for i in range(5):
        b.append(b"k", b"v", timestamp=TS + i)
    data = bytearray(b.build())
    c = cols.decode_columns(bytes(data))
    assert c.timestamp_type.tolist() == [1] * 5
    assert c.to_pylist() == reader_rows(bytes(data))


@pytest.mark.parametrize("kind", [bytes, bytearray, memoryview, "mmap-like", "numpy"])
def test_any_buffer(cols, kind: Any) -> None:
    data = kc_v2(0) + kc_legacy(1, 0, 5, 30) + kc_v2(1, base_offset=35)
    if kind == "mmap-like":
        buf: Any = memoryview(bytearray(data))[0:]
    elif kind == "numpy":
        buf = np.frombuffer(data, dtype=np.uint8)
    else:
        buf = kind(data)
    assert cols.decode_columns(buf).equals(cols.decode_columns(data))


def test_not_a_buffer(cols) -> None:
    with pytest.raises(TypeError):
        cols.decode_columns("text")


def test_large_offsets(cols) -> None:
    c = cols.decode_columns(kc_v2(), large=True)
    for col in (c.key, c.value, c.headers.keys, c.headers.values):
        assert col.offsets.dtype == np.int64 and col.is_large
    assert c.headers.offsets.dtype == np.int32
    assert c.to_pylist() == cols.decode_columns(kc_v2()).to_pylist()


def test_offsets_widen_past_the_limit(pair) -> None:
    """The switch to int64 offsets (past 2 GiB) with a lowered limit, in both twins."""
    cy, py = pair("columns")
    data = kc_v2(0, 300)
    normal = py.decode_columns(data).to_pylist()
    try:
        for mod in {cy, py}:
            mod._set_wide_limit(1000)
        a, b = cy.decode_columns(data), py.decode_columns(data)
    finally:
        for mod in {cy, py}:
            mod._set_wide_limit(None)
    assert a.equals(b)
    for col in (a.key, a.value, a.headers.keys, a.headers.values):
        assert col.is_large == (col.data.nbytes > 1000)
        assert col.offsets[-1] == col.data.nbytes
    assert a.key.is_large and not a.headers.values.is_large   # 1920 and 375 bytes
    assert a.headers.offsets.dtype == np.int32  # 450 headers
    assert a.to_pylist() == normal
    try:
        for mod in {cy, py}:
            mod._set_wide_limit(100)
        a, b = cy.decode_columns(data), py.decode_columns(data)
    finally:
        for mod in {cy, py}:
            mod._set_wide_limit(None)
    assert a.equals(b) and a.headers.offsets.dtype == np.int64 and a.to_pylist() == normal


# ---------------------------------------------------------------------------------------------
# Arrow


@pytest.mark.arrow
def test_to_arrow_zero_copy_and_schema(cols) -> None:
    import pyarrow as pa
    c = cols.decode_columns(kc_v2(3, 50))
    rb = c.to_arrow()
    assert isinstance(rb, pa.RecordBatch) and rb.num_rows == 50
    assert rb.schema == pa.schema([
        pa.field("offset", pa.int64(), nullable=False),
        pa.field("timestamp", pa.int64(), nullable=False),
        pa.field("timestamp_type", pa.int8(), nullable=False),
        pa.field("key", pa.binary()),
        pa.field("value", pa.binary()),
        pa.field("headers", pa.list_(pa.field("item", pa.struct([
            pa.field("key", pa.string(), nullable=False),
            pa.field("value", pa.binary())]), nullable=False)), nullable=False),
    ])
    rb.validate(full=True)
    addr = lambda a: a.ctypes.data  # noqa: E731
    assert rb.column("offset").buffers()[1].address == addr(c.offset)
    assert rb.column("timestamp").buffers()[1].address == addr(c.timestamp)
    assert rb.column("timestamp_type").buffers()[1].address == addr(c.timestamp_type)
    for name, col in (("key", c.key), ("value", c.value)):
        bufs = rb.column(name).buffers()
        assert bufs[0].address == addr(col.validity)
        assert bufs[1].address == addr(col.offsets) and bufs[2].address == addr(col.data)
    h = rb.column("headers")
    assert h.buffers()[1].address == addr(c.headers.offsets)
    entries = h.values
    assert entries.field("key").buffers()[1].address == addr(c.headers.keys.offsets)
    assert entries.field("key").buffers()[2].address == addr(c.headers.keys.data)
    assert entries.field("value").buffers()[2].address == addr(c.headers.values.data)
    py = rb.to_pylist()
    want = c.to_pylist()
    for r in want:
        r["headers"] = [{"key": k, "value": v} for k, v in r["headers"]]
    assert py == want


@pytest.mark.arrow
def test_to_arrow_keeps_memory_alive(cols) -> None:
    import pyarrow  # noqa: F401
    rb = cols.decode_columns(kc_v2()).to_arrow()   # the RecordColumns is dropped at once
    import gc

    gc.collect()
    assert rb.column("key").to_pylist() == [r[0] for r in rows()]


@pytest.mark.arrow
def test_to_arrow_large_and_control(cols) -> None:
    import pyarrow as pa
    data = kc_v2(0, 5) + kc_control(5)
    rb = cols.decode_columns(data, large=True, include_control=True).to_arrow()
    rb.validate(full=True)
    assert rb.schema.field("key").type == pa.large_binary()
    assert rb.schema.field("headers").type.value_type.field("key").type == pa.large_string()
    assert rb.column("is_control").to_pylist() == [False] * 5 + [True]


@pytest.mark.arrow
def test_to_arrow_empty(cols) -> None:
    import pyarrow  # noqa: F401
    rb = cols.decode_columns(b"").to_arrow()
    rb.validate(full=True)
    assert rb.num_rows == 0


def test_missing_numpy_and_pyarrow_messages(monkeypatch) -> None:
    import sys

    monkeypatch.setattr(_columnar, "_np", None)
    monkeypatch.setitem(sys.modules, "numpy", None)
    with pytest.raises(ImportError, match=r"needs numpy: pip install numpy"):
        _columnar.numpy()
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    with pytest.raises(ImportError, match=r"needs pyarrow: pip install pyarrow"):
        _columnar.pyarrow()


# ---------------------------------------------------------------------------------------------
# real segments and peers


@pytest.mark.reference
@pytest.mark.parametrize("name", ["TestTopicPatient-0", "__cluster_metadata-0"])
def test_real_segments(cols, name: str) -> None:
    data = reference(TOPIC_LOG if name == "TestTopicPatient-0" else META_LOG).read_bytes()
    c = cols.decode_columns(data)
    assert c.consumed == len(data)
    assert c.to_pylist() == reader_rows(data)
    ci = cols.decode_columns(data, include_control=True)
    assert ci.to_pylist() == reader_rows(data, include_control=True)
    if name == "__cluster_metadata-0":
        assert len(ci) == 4929 and ci.offset.tolist() == list(range(4929))
        assert ci.batch_count == 4814 and ci.next_offset == 4929


def _peer_rows(memory_cls: Any, data: bytes) -> list[tuple]:
    out = []
    mr = memory_cls(data)
    while True:
        batch = mr.next_batch()
        if batch is None:
            break
        for r in batch:
            ts = -1 if r.timestamp is None else r.timestamp
            out.append((r.offset, ts, r.key, r.value, [tuple(h) for h in r.headers]))
    return out


def _col_rows(c: Any) -> list[tuple]:
    return [(r["offset"], r["timestamp"], r["key"], r["value"], r["headers"])
            for r in c.to_pylist()]


@pytest.mark.peers
@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # kafka-python's imports
@pytest.mark.parametrize("codec", [0, 1, 2, 3, 4])
@pytest.mark.parametrize("peer", ["kafka-python", "aiokafka"])
def test_peer_v2_batches(cols, peer: str, codec: int) -> None:
    if peer == "aiokafka":
        from aiokafka.record.default_records import DefaultRecordBatchBuilder as B
        from aiokafka.record.memory_records import MemoryRecords as M
    else:
        from kafka.record.default_records import DefaultRecordBatchBuilder as B
        from kafka.record.memory_records import MemoryRecords as M
    b = B(magic=2, compression_type=codec, is_transactional=0, producer_id=-1,
          producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
    for i, (k, v, h, ts) in enumerate(rows()):
        b.append(i, timestamp=ts, key=k, value=v, headers=h)
    data = bytes(b.build())
    c = cols.decode_columns(data)
    assert _col_rows(c) == _peer_rows(M, data)
    assert c.to_pylist() == reader_rows(data)


@pytest.mark.peers
@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # kafka-python's imports
# (aiokafka refuses to build lz4 with magic 0; kafka-python covers that one)
@pytest.mark.parametrize("peer,magic,codec", [
    (p, m, c) for p in ("kafka-python", "aiokafka") for m in (0, 1) for c in (0, 1, 2, 3)
    if not (p == "aiokafka" and m == 0 and c == 3)])
def test_peer_legacy_batches(cols, peer: str, magic: int, codec: int) -> None:
    if peer == "aiokafka":
        from aiokafka.record.legacy_records import LegacyRecordBatchBuilder as B
        from aiokafka.record.memory_records import MemoryRecords as M
    else:
        from kafka.record.legacy_records import LegacyRecordBatchBuilder as B
        from kafka.record.memory_records import MemoryRecords as M
    b = B(magic=magic, compression_type=codec, batch_size=1 << 20)
    for i, (k, v, _, ts) in enumerate(rows()):
        b.append(i, timestamp=ts, key=k, value=v)
    data = bytes(b.build())
    c = cols.decode_columns(data)
    assert _col_rows(c) == _peer_rows(M, data)
    assert c.to_pylist() == reader_rows(data)


# ---------------------------------------------------------------------------------------------
# bad input: the reader's errors, from both twins


def zz(v: int) -> bytes:
    u = ((v << 1) ^ (v >> 63)) & ((1 << 64) - 1)
    out = bytearray()
    while u > 0x7F:
        out.append((u & 0x7F) | 0x80)
        u >>= 7
    out.append(u)
    return bytes(out)


def v2(records: bytes, count: int, attributes: int = 0, base_offset: int = 0) -> bytes:
    import crc32c

    tail = struct.pack(">hiqqqhii", attributes, max(count - 1, 0), TS, TS, -1, -1, -1,
                       count) + records
    return struct.pack(">qiibI", base_offset, 9 + len(tail), 0, 2, crc32c.crc32c(tail)) + tail


def rec_bytes(body: bytes) -> bytes:
    return zz(len(body)) + body


GOOD = b"\x00" + zz(0) + zz(0) + zz(1) + b"k" + zz(1) + b"v" + zz(1) + zz(1) + b"h" + zz(-1)

BAD = {
    "count beyond bytes": (v2(rec_bytes(GOOD), 5), CorruptDataError, "record count 5 impossible"),
    "huge count": (v2(rec_bytes(GOOD), 2**31 - 1), CorruptDataError, "impossible in"),
    "negative count": (v2(b"", -1), CorruptDataError, "negative record count -1"),
    "bytes left": (v2(rec_bytes(GOOD) + b"\x00" * 9, 1), CorruptDataError, "9 bytes left"),
    "record overruns": (v2(zz(100) + GOOD, 1), TruncatedError, "record"),
    "negative record length": (v2(zz(-3) + GOOD, 1), CorruptDataError, "negative length -3"),
    "length mismatch": (v2(zz(len(GOOD) + 1) + GOOD + b"\x00", 1), CorruptDataError,
                        "but its fields took"),
    "key overruns": (v2(rec_bytes(b"\x00" + zz(0) + zz(0) + zz(50) + b"kkk"), 1), TruncatedError,
                     "record key"),
    "negative key": (v2(rec_bytes(b"\x00" + zz(0) + zz(0) + zz(-2) + zz(-1) + zz(0)), 1),
                     CorruptDataError, "negative length -2 for record key"),
    "negative value": (v2(rec_bytes(b"\x00" + zz(0) + zz(0) + zz(-1) + zz(-7) + zz(0)), 1),
                       CorruptDataError, "negative length -7 for record value"),
    "negative headers": (v2(rec_bytes(b"\x00" + zz(0) + zz(0) + zz(-1) + zz(-1) + zz(-1)), 1),
                         CorruptDataError, "negative header count"),
    "header count": (v2(rec_bytes(b"\x00" + zz(0) + zz(0) + zz(-1) + zz(-1) + zz(40)
                                  + b"\x00" * 8), 1), CorruptDataError, "header count 40"),
    "header key utf8": (v2(rec_bytes(b"\x00" + zz(0) + zz(0) + zz(-1) + zz(-1) + zz(1)
                                     + zz(2) + b"\xc3\x28" + zz(-1)), 1), CorruptDataError,
                        "not valid UTF-8"),
    "negative header key": (v2(rec_bytes(b"\x00" + zz(0) + zz(0) + zz(-1) + zz(-1) + zz(1)
                                         + zz(-1) + zz(-1)), 1), CorruptDataError,
                            "negative length -1 for header key"),
    "varint too long": (v2(rec_bytes(b"\x00" + b"\xff" * 10 + b"\x01" + zz(0) + zz(-1)
                                     + zz(-1) + zz(0)), 1), CorruptDataError, "too long"),
    "varint truncated": (v2(b"\x80", 0), CorruptDataError, "1 bytes left"),
    "record attrs missing": (v2(zz(0), 1), CorruptDataError, "impossible"),
    "control key short": (v2(rec_bytes(b"\x00" + zz(0) + zz(0) + zz(2) + b"\x00\x00" + zz(-1)
                                       + zz(0)), 1, attributes=0x20), CorruptDataError,
                          "control record key shorter than 4 bytes"),
    "marker value short": (v2(rec_bytes(b"\x00" + zz(0) + zz(0) + zz(4) + b"\x00\x00\x00\x01"
                                        + zz(2) + b"\x00\x00" + zz(0)), 1, attributes=0x20),
                           CorruptDataError, "transaction marker value shorter than 6 bytes"),
    "unknown codec": (v2(b"\x00" * 20, 1, attributes=5), KcodecError, "codec"),
    "corrupt gzip": (v2(b"\x1f\x8b" + b"\x00" * 20, 1, attributes=1), KcodecError, ""),
    "bad magic": (kc_v2()[:16] + b"\x07" + kc_v2()[17:], CorruptDataError, "unknown magic byte 7"),
    "short batch": (struct.pack(">qi", 0, 13) + b"\x00" * 13, CorruptDataError, "minimum of 14"),
    "short v2": (struct.pack(">qiib", 0, 30, 0, 2) + b"\x00" * 25, CorruptDataError,
                 "minimum of 49"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_input_same_error_as_reader(cols, case: str) -> None:
    data, cls, text = BAD[case]
    control = case.startswith(("control", "marker"))
    with pytest.raises(cls, match=text) if text else pytest.raises(cls):
        cols.decode_columns(data, include_control=control)
    check_against_reader(cols, data, include_control=control)
    check_against_reader(cols, kc_v2(0, 3) + data, include_control=control)


def test_crc_mismatch(cols) -> None:
    data = bytearray(kc_v2())
    data[100] ^= 0xFF
    with pytest.raises(ChecksumError) as info:
        cols.decode_columns(bytes(data))
    assert info.value.offset == 0
    check_against_reader(cols, bytes(data))
    c = cols.decode_columns(bytes(data), validate_crc=False)
    check_against_reader(cols, bytes(data), validate_crc=False)
    assert len(c) == 30
    legacy = bytearray(kc_legacy(1))
    legacy[-1] ^= 1
    with pytest.raises(ChecksumError):
        cols.decode_columns(bytes(legacy))


def test_skipped_control_batch_is_still_crc_checked(cols) -> None:
    data = bytearray(kc_control(0))
    data[-1] ^= 1
    with pytest.raises(ChecksumError):
        cols.decode_columns(bytes(data))


def test_decompression_limit(cols) -> None:
    data = kc_v2(4, 200)
    with pytest.raises(DecompressionLimitError):
        cols.decode_columns(data, max_decompressed_size=100)
    check_against_reader(cols, data, max_decompressed_size=100)
    with pytest.raises(ValueError):
        cols.decode_columns(data, max_decompressed_size=-1)


def test_huge_count_allocates_nothing_first(cols) -> None:
    """A count the bytes cannot hold fails before any array is sized by it."""
    import tracemalloc

    data = v2(rec_bytes(GOOD) * 3, 2**31 - 1)
    tracemalloc.start()
    try:
        with pytest.raises(CorruptDataError):
            cols.decode_columns(data)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20


# ---------------------------------------------------------------------------------------------
# differential property tests between the twins (and the reader)

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

header_st = st.tuples(st.text(max_size=5), st.one_of(st.none(), st.binary(max_size=8)))
record_st = st.tuples(st.one_of(st.none(), st.binary(max_size=20)),
                      st.one_of(st.none(), st.binary(max_size=40)),
                      st.lists(header_st, max_size=3),
                      st.integers(-(2**40), 2**40))
entry_st = st.tuples(st.sampled_from(["v2", "v2", "v2", "v0", "v1", "control"]),
                     st.sampled_from([0, 0, 1, 2, 3, 4]),
                     st.lists(record_st, min_size=1, max_size=6),
                     st.integers(0, 1))


def build_blob(entries: list, base: int = 0) -> bytes:
    out = b""
    for kind, codec, recs, tstype in entries:
        if kind == "control":
            out += kc_control(base, commit=bool(tstype))
            base += 1
            continue
        if kind == "v2":
            b: Any = RecordBatchBuilder(compression=codec, base_offset=base, timestamp_type=tstype)
            for k, v, h, ts in recs:
                b.append(k, v, h, timestamp=TS + ts)
        else:
            b = MessageSetBuilder(magic=int(kind[1]), compression=min(codec, 3),
                                  base_offset=base)
            for k, v, _, ts in recs:
                b.append(k, v, timestamp=TS + ts)
        out += b.build()
        base += len(recs)
    return out


@settings(suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(st.lists(entry_st, max_size=4), st.booleans())
def test_random_blobs_match_reader(pair, entries: list, include_control: bool) -> None:
    cy, py = pair("columns")
    data = build_blob(entries)
    a = outcome(cy.decode_columns, data, include_control=include_control)
    b = outcome(py.decode_columns, data, include_control=include_control)
    assert same(a, b)
    assert a[0] == "ok"
    assert a[1].to_pylist() == reader_rows(data, include_control)


@settings(suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(st.lists(entry_st, min_size=1, max_size=3), st.data(), st.booleans(), st.booleans())
def test_mutated_blobs_same_outcome(pair, entries: list, data: Any, validate: bool,
                                    include_control: bool) -> None:
    cy, py = pair("columns")
    blob = bytearray(build_blob(entries))
    for _ in range(data.draw(st.integers(1, 4))):
        op = data.draw(st.sampled_from(["flip", "set", "cut", "insert"]))
        i = data.draw(st.integers(0, max(len(blob) - 1, 0)))
        if op == "flip" and blob:
            blob[i] ^= 1 << data.draw(st.integers(0, 7))
        elif op == "set" and blob:
            blob[i] = data.draw(st.sampled_from([0, 1, 0x7F, 0x80, 0xFF]))
        elif op == "cut":
            del blob[i:i + data.draw(st.integers(1, 8))]
        else:
            blob[i:i] = data.draw(st.binary(min_size=1, max_size=4))
    raw = bytes(blob)
    kw = {"validate_crc": validate, "include_control": include_control}
    a, b = outcome(cy.decode_columns, raw, **kw), outcome(py.decode_columns, raw, **kw)
    assert same(a, b), (a, b)
    want = reader_outcome(raw, include_control, validate_crc=validate)
    if want[0] == "ok":
        assert a[0] == "ok" and a[1].to_pylist() == want[1]
    else:
        assert a[1:] == want[1:]


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.binary(max_size=200))
def test_random_bytes_same_outcome(pair, raw: bytes) -> None:
    cy, py = pair("columns")
    for validate in (True, False):
        a = outcome(cy.decode_columns, raw, validate_crc=validate)
        b = outcome(py.decode_columns, raw, validate_crc=validate)
        assert same(a, b), (a, b)


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture], max_examples=50)
@given(st.integers(0, 2**32 - 1))
def test_random_record_sections_same_outcome(pair, seed: int) -> None:
    """Unchecked-CRC v2 batches whose records section is random varint-ish bytes."""
    cy, py = pair("columns")
    rnd = random.Random(seed)
    body = bytes(rnd.choice([0, 1, 2, 3, 4, 0x7F, 0x80, 0xFF, rnd.randrange(256)])
                 for _ in range(rnd.randrange(0, 60)))
    raw = v2(body, rnd.randrange(0, 6), attributes=rnd.choice([0, 0x08, 0x20]))
    for include_control in (False, True):
        a = outcome(cy.decode_columns, raw, include_control=include_control)
        b = outcome(py.decode_columns, raw, include_control=include_control)
        assert same(a, b), (a, b)


def test_twins_agree_on_big_mixed_blob(pair) -> None:
    cy, py = pair("columns")
    parts = [kc_v2(c, 300, base_offset=1000 * c) for c in range(5)]
    parts += [kc_legacy(1, 2, 20, 9000), kc_control(9100)]
    data = b"".join(parts)
    for kw in ({}, {"include_control": True}, {"large": True}):
        assert cy.decode_columns(data, **kw).equals(py.decode_columns(data, **kw))


if os.environ.get("KCODEC_COLUMNS_SOAK"):  # pragma: no cover - manual soak
    test_mutated_blobs_same_outcome = settings(max_examples=20000)(test_mutated_blobs_same_outcome)


# ---------------------------------------------------------------------------------------------
# values as lines (what `kcodec consume` prints)


def test_values_as_lines_in_both_twins(pair) -> None:
    import numpy as np

    from kcodec.records import RecordBatchBuilder

    b = RecordBatchBuilder()
    for v in (b"ab", None, b"", b"xyz\n", bytes(range(256))):
        b.append(b"k", v)
    cy, py = pair("columns")
    for mod in (cy, py):
        col = mod.decode_columns(b.build()).value
        want = [v or b"" for v in col.to_pylist()]
        for end in (b"\n", b"\r\n", b""):
            assert mod.join_values(col.offsets, col.data, end) == b"".join(v + end for v in want)
        wide = np.asarray(col.offsets, dtype=np.int64)        # large-binary offsets too
        assert mod.join_values(wide, col.data, b"|") == b"".join(v + b"|" for v in want)
        assert mod.join_values(col.offsets[:1], col.data, b"\n") == b""
    for mod in (cy, py):                                     # the first values only
        col = mod.decode_columns(b.build()).value
        assert mod.join_values(col.offsets[:3], col.data, b"\n") == b"ab\n\n"


@pytest.mark.parametrize("offsets", [[0, 5], [3, 1], [-1, 2], [0, 2, 9]])
def test_values_as_lines_refuse_offsets_outside_the_data(pair, offsets) -> None:
    import numpy as np

    cy, py = pair("columns")
    data = np.frombuffer(b"abcd", dtype=np.uint8)
    errors = []
    for mod in (cy, py):
        with pytest.raises(ValueError) as e:
            mod.join_values(np.asarray(offsets, dtype=np.int32), data, b"\n")
        errors.append(str(e.value))
    assert errors[0] == errors[1]
