"""The record API other clients' codecs need (both twins): producer state settable until
build, compress-only-if-smaller, size helpers, per-record size/checksum/validate_crc,
legacy CRCs, single-batch constructors, next(batch), legacy accounting options and
control-record parsing on their own."""

from __future__ import annotations

import random
import zlib

import pytest

from kcodec.errors import (
    ChecksumError,
    CorruptDataError,
    EncodeError,
    EncodeTypeError,
    TruncatedError,
)


def _records(rng: random.Random, n: int) -> list[tuple]:
    out = []
    for _ in range(n):
        key = None if rng.random() < 0.3 else rng.randbytes(rng.randrange(0, 40))
        value = None if rng.random() < 0.2 else rng.randbytes(rng.randrange(0, 300))
        headers = [(f"h{j}é", None if rng.random() < 0.3 else rng.randbytes(rng.randrange(9)))
                   for j in range(rng.randrange(3))]
        out.append((key, value, headers, 1_700_000_000_000 + rng.randrange(-10**6, 10**6)))
    return out


@pytest.mark.parametrize("seed", range(5))
def test_record_size_and_estimate_match_what_append_writes(twin, seed: int) -> None:
    b = twin("batch")
    bld = twin("builder")
    rng = random.Random(seed)
    builder = bld.RecordBatchBuilder()
    first = None
    for i, (k, v, h, ts) in enumerate(_records(rng, 50)):
        first = ts if first is None else first
        meta = builder.append(k, v, h, ts)
        assert meta.size == bld.record_size(k, v, h, i, ts - first)
        assert meta.crc is None
        single = bld.RecordBatchBuilder()
        single.append(k, v, h, ts)
        assert len(single.build()) <= bld.estimate_batch_size(k, v, h)
    data = builder.build()
    batch = b.RecordBatch.from_bytes(data)
    records = list(batch)
    assert sum(r.size_in_bytes for r in records) == len(data) - 61
    assert all(r.checksum is None and r.validate_crc() is True for r in records)


def test_size_helpers_reject_what_append_rejects(twin) -> None:
    b = twin("builder")
    with pytest.raises(EncodeError):
        b.record_size(b"k", b"v", None, 1 << 31)
    with pytest.raises(EncodeError):
        b.record_size(b"k", b"v", None, 0, 1 << 63)


def test_producer_state_settable_after_appends_until_build(twin) -> None:
    b = twin("batch")
    bld = twin("builder")
    builder = bld.RecordBatchBuilder(compression=1)
    builder.append(b"k", b"v", None, 5)
    assert (builder.producer_id, builder.producer_epoch, builder.base_sequence,
            builder.is_transactional) == (-1, -1, -1, False)
    builder.set_producer_state(42, 3, 7, True)
    builder.append(b"k2", b"v2", None, 6)
    batch = b.RecordBatch.from_bytes(builder.build())
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence,
            batch.is_transactional) == (42, 3, 7, True)
    builder.set_producer_state(43, 4, 8)  # None keeps the transactional flag
    assert builder.is_transactional is True
    with pytest.raises(EncodeError):
        builder.set_producer_state(1, 1 << 15, 0)


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
def test_compress_only_if_smaller(twin, codec: int) -> None:
    b = twin("batch")
    bld = twin("builder")
    rng = random.Random(codec)
    for payload, expect in ((rng.randbytes(200), 0), (b"a" * 2000, codec)):
        builder = bld.RecordBatchBuilder(compression=codec, compress_only_if_smaller=True)
        builder.append(None, payload, None, 1)
        data = builder.build(as_bytearray=True)
        assert type(data) is bytearray
        batch = b.RecordBatch.from_bytes(data)
        assert batch.compression == expect
        assert [r.value for r in batch] == [payload]
        plain = bld.RecordBatchBuilder(compression=codec)
        plain.append(None, payload, None, 1)
        assert b.RecordBatch.from_bytes(plain.build()).compression == codec


def test_from_bytes_is_exactly_one_batch(twin) -> None:
    b, bld, legacy = twin("batch"), twin("builder"), twin("legacy")
    builder = bld.RecordBatchBuilder()
    builder.append(b"k", b"v", None, 1)
    data = builder.build()
    assert b.RecordBatch.from_bytes(memoryview(data)).record_count == 1
    with pytest.raises(TruncatedError):
        b.RecordBatch.from_bytes(data[:-1])
    with pytest.raises(TruncatedError):
        b.RecordBatch.from_bytes(data[:5])
    with pytest.raises(CorruptDataError, match="after the batch"):
        b.RecordBatch.from_bytes(data + b"\0")
    bad = bytearray(data)
    bad[-1] ^= 1
    with pytest.raises(ChecksumError):
        b.RecordBatch.from_bytes(bad)
    assert b.RecordBatch.from_bytes(bad, validate_crc=False).validate_crc() is False
    ms = legacy.MessageSetBuilder(magic=1)
    ms.append(b"k", b"v", 3)
    with pytest.raises(CorruptDataError, match="magic"):
        b.RecordBatch.from_bytes(ms.build())
    with pytest.raises(CorruptDataError, match="magic"):
        legacy.LegacyBatch.from_bytes(data)
    assert legacy.LegacyBatch.from_bytes(ms.build()).magic == 1


def test_next_on_a_batch_continues_one_iteration(twin) -> None:
    b = twin("batch")
    bld = twin("builder")
    builder = bld.RecordBatchBuilder()
    for i in range(3):
        builder.append(None, bytes([i]), None, 1)
    batch = b.RecordBatch.from_bytes(builder.build())
    assert next(batch).value == b"\0"
    assert next(batch).value == b"\1"
    assert [r.value for r in batch] == [b"\0", b"\1", b"\2"]  # iter() starts afresh
    assert next(batch).value == b"\2"
    with pytest.raises(StopIteration):
        next(batch)


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", [0, 1])
def test_legacy_crcs_sizes_and_validate(twin, magic: int, codec: int) -> None:
    legacy = twin("legacy")
    ms = legacy.MessageSetBuilder(magic=magic, compression=codec)
    metas = [ms.append(b"key%d" % i, b"value" * i, 100 + i) for i in range(3)]
    data = ms.build()
    if codec == 0:
        entries = []
        pos = 0
        while pos < len(data):
            size = int.from_bytes(data[pos + 8:pos + 12], "big")
            entries.append(data[pos:pos + 12 + size])
            pos += 12 + size
        for m, e in zip(metas, entries, strict=False):
            assert m.crc == int.from_bytes(e[12:16], "big") == zlib.crc32(e[16:])
            assert m.size == len(e)
    records = [r for batch in twin("batch").iter_batches(data) for r in batch]
    assert [r.checksum for r in records] == [m.crc for m in metas]
    assert [r.size_in_bytes for r in records] == [m.size for m in metas]
    assert all(r.validate_crc() for r in records)
    if codec == 0:
        bad = bytearray(data)
        bad[-1] ^= 1  # the last message's value
        recs = [r for batch in twin("batch").iter_batches(bad, validate_crc=False)
                for r in batch]
        assert [r.validate_crc() for r in recs] == [True, True, False]


def test_legacy_accounting_options(twin) -> None:
    legacy = twin("legacy")
    assert legacy.MessageSetBuilder(magic=1, compression=1, zero_wrapper=True).build() == b""
    msg = 12 + 4 + 2 + 8 + 4 + 4 + 10  # a magic-1 message with a null key, 10-byte value
    plain = legacy.MessageSetBuilder(magic=1, compression=1, max_size=2 * msg)
    peerlike = legacy.MessageSetBuilder(magic=1, compression=1, max_size=2 * msg,
                                        wrapper_overhead=False, full_at_max=True,
                                        zero_wrapper=True)
    for builder in (plain, peerlike):
        assert builder.append(None, b"x" * 10, 1) is not None
    assert plain.size == msg + 34 and peerlike.size == msg
    assert plain.append(None, b"x" * 10, 2) is None          # the wrapper's overhead counts
    assert peerlike.append(None, b"x" * 10, 2) is None       # reaching max_size is full
    exact = legacy.MessageSetBuilder(magic=1, max_size=2 * msg)
    exact.append(None, b"x" * 10, 1)
    assert exact.append(None, b"x" * 10, 2) is not None
    wrapper = legacy.LegacyBatch.from_bytes(peerlike.build())
    assert (wrapper.offset, wrapper.timestamp, wrapper.attributes) == (0, 0, 1)
    assert [r.offset for r in wrapper] == [0]


def test_parse_control_on_its_own(twin) -> None:
    b = twin("batch")
    bld = twin("builder")
    assert b.parse_control(b"\0\0\0\0", b"\0\0\0\0\0\7") == (0, 0, 7)
    assert b.parse_control(bytearray(b"\0\1\0\3"), None) == (1, 3, None)
    with pytest.raises(CorruptDataError):
        b.parse_control(b"\0\0", None)
    with pytest.raises(CorruptDataError):
        b.parse_control(b"\0\0\0\1", b"\0\0")
    builder = bld.RecordBatchBuilder(is_control=True)
    builder.append_control(1, 9, 5)
    rec = next(iter(b.RecordBatch.from_bytes(builder.build())))
    assert b.parse_control(rec.key, rec.value) == (rec.version, rec.control_type,
                                                   rec.coordinator_epoch) == (0, 1, 9)
    assert rec.size_in_bytes == len(builder.build()) - 61


def test_append_with_offset_metadata_class_and_first_timestamp(twin) -> None:
    b = twin("batch")
    bld = twin("builder")

    class Meta(bld.RecordMetadata):
        __slots__ = ()

        @property
        def offset(self) -> int:
            return self.offset_delta

    builder = bld.RecordBatchBuilder(base_offset=100, metadata_class=Meta)
    assert builder.first_timestamp is None
    m = builder.append_with_offset(100, 7, b"k", b"v", [("h", b"1")])
    assert type(m) is Meta and (m.offset, m.timestamp, m.size, m.crc) == (0, 7, 13, None)
    assert builder.first_timestamp == 7
    m = builder.append_with_offset(offset=102, timestamp=9, key=None, value=b"w")
    assert (m.offset, m.timestamp) == (2, 9)
    assert [(r.offset, r.timestamp) for r in b.RecordBatch.from_bytes(builder.build())] == [
        (100, 7), (102, 9)]
    with pytest.raises(EncodeTypeError):
        bld.RecordBatchBuilder(metadata_class=dict)


@pytest.mark.parametrize("base", [0, 5])
def test_append_with_offset_checks_the_delta_range_at_any_base(pair, base: int) -> None:
    """The same values and errors from both twins, with the base offset 0 that the clients'
    builders use (the compiled twin passes the offset through as the delta) and another."""
    got = []
    for b in pair("builder"):
        builder = b.RecordBatchBuilder(base_offset=base)
        out = [builder.append_with_offset(base + 3, 1, None, b"v").offset_delta,
               builder.append_with_offset(base + 2**31 - 1, 1, None, b"v").offset_delta]
        for offset in (base + 2**31, base - 2**31 - 1, 2**63, True):
            try:
                builder.append_with_offset(offset, 1, None, b"v")
                out.append("ok")
            except EncodeError as exc:
                out.append((type(exc).__name__, str(exc)))
        got.append(out)
    assert got[0] == got[1]
    assert got[0][:2] == [3, 2**31 - 1]
    assert all(isinstance(x, tuple) for x in got[0][2:])


@pytest.mark.parametrize("bad", [
    dict(offset="0"), dict(timestamp="1"), dict(key="str"), dict(value=1.5)])
def test_wrong_types_raise_an_encode_error_that_is_a_type_error(twin, bad) -> None:
    b = twin("builder")
    args = dict(offset=0, timestamp=1, key=b"k", value=b"v")
    args.update(bad)
    with pytest.raises(EncodeTypeError) as info:
        b.RecordBatchBuilder().append_with_offset(**args)
    assert isinstance(info.value, TypeError) and isinstance(info.value, EncodeError)


@pytest.mark.parametrize("validate", [False, True])
def test_legacy_inner_crc_of_a_wrapper(twin, validate: bool) -> None:
    """An inner message with a wrong CRC-32 in a wrapper whose own CRC is right: without
    validation its record says so through validate_crc(); with validation iterating the
    wrapper raises (the compiled records then take the checked CRCs as computed)."""
    import struct

    from kcodec.compression import compress
    from kcodec.errors import ChecksumError

    legacy, batch = twin("legacy"), twin("batch")
    ms = legacy.MessageSetBuilder(magic=1)
    for i in range(3):
        ms.append(b"key%d" % i, b"value" * (i + 1), 100 + i)
    inner = bytearray(ms.build())
    size = int.from_bytes(inner[8:12], "big")
    inner[12 + size + 12] ^= 0xFF          # the second message's stored CRC
    value = compress("gzip", bytes(inner))
    body = struct.pack(">bbqi", 1, 1, 102, -1) + struct.pack(">i", len(value)) + value
    wrapper = struct.pack(">qiI", 2, len(body) + 4, zlib.crc32(body)) + body
    it = batch.iter_batches(wrapper, validate_crc=validate)
    if validate:
        with pytest.raises(ChecksumError):
            [r for b in it for r in b]
    else:
        recs = [r for b in it for r in b]
        assert [r.value for r in recs] == [b"value", b"value" * 2, b"value" * 3]
        assert [r.validate_crc() for r in recs] == [True, False, True]


@pytest.mark.parametrize("seed", range(3))
def test_add_writes_what_append_writes(pair, seed: int) -> None:
    """``add`` (the producer's append) writes the same bytes as ``append``, returns the
    record's size, puts its timestamp on the list, returns 0 when the batch is full, and
    raises what ``append`` raises; the same from both twins."""
    rng = random.Random(seed)
    recs = _records(rng, 60) + [(b"k", b"v", None, None), (None, None, (), True)]
    got = []
    for b in pair("builder"):
        via_append = b.RecordBatchBuilder(max_size=4000)
        via_add = b.RecordBatchBuilder(max_size=4000)
        sizes, stamps, metas = [], [], []
        for key, value, headers, ts in recs:
            if ts is None:
                ts = 1_700_000_000_123
            try:
                m = via_append.append(key, value, headers, ts)
            except EncodeError as exc:
                with pytest.raises(type(exc), match="."):
                    via_add.add(key, value, headers, ts, stamps)
                metas.append(type(exc).__name__)
                continue
            sizes.append(via_add.add(key, value, headers, ts, stamps))
            metas.append(None if m is None else (m.size, m.timestamp))
        assert [m for m in metas if isinstance(m, tuple)] == [
            (s, t) for s, t in zip([s for s in sizes if s], stamps, strict=False)]
        assert 0 in sizes           # the batch filled up
        assert via_add.build() == via_append.build()
        now = b.RecordBatchBuilder()
        assert now.add(b"k", b"v", None, None, stamps) > 0 and type(stamps[-1]) is int
        with pytest.raises(TypeError, match="timestamps must be a list"):
            now.add(b"k", b"v", None, 5, ())
        got.append((sizes, stamps[:-1], metas))
    assert got[0] == got[1]


def test_partition_for_key_twins_agree_at_any_count(pair) -> None:
    cy, py = pair("murmur")
    for n in (1, 3, 2**31 - 1, 2**31, 2**63 - 1, 2**63, 2**80):
        for key in (b"", b"k", b"0123456789abcdef", bytearray(b"xyz")):
            assert cy.partition_for_key(key, n) == py.partition_for_key(key, n)
    for mod in (cy, py):
        for bad in (0, -1, -(2**70)):
            with pytest.raises(ValueError, match="partition count must be positive"):
                mod.partition_for_key(b"k", bad)
        with pytest.raises(TypeError):
            mod.partition_for_key(b"k", "4")
