"""Bad input of every kind: the same kcodec error (class and message) from both twins, and
never a crash, a hang or an allocation the input does not justify."""

from __future__ import annotations

import gzip
import struct

import pytest

from kcodec import errors
from tests.support.records_util import legacy, outcome, record, simple_record, v2, zz

GOOD = simple_record(0, 0, b"k", b"v", [(b"h", b"1")]) + simple_record(1, 1, None, b"w")


def both(pair, data: bytes, **kw) -> list:
    cy, py = pair("batch")
    a, b = outcome(cy, data, **kw), outcome(py, data, **kw)
    assert a == b
    return a


def only_error(result: list) -> tuple:
    errs = [e for e in result if e[0] == "error"]
    if errs:
        return errs[0]
    for entry in result:
        for f in entry:
            if isinstance(f, tuple) and f and f[0] == "error":
                return f
    raise AssertionError(f"no error in {result}")


def raises(pair, data: bytes, cls: type, text: str, **kw) -> None:
    e = only_error(both(pair, data, **kw))
    assert e[1] == cls.__name__, e
    assert text in e[2], e
    assert issubclass(cls, errors.KcodecError)


def test_good_blob_is_clean(pair) -> None:
    res = both(pair, v2(GOOD, 2))
    assert res[-1] == ("end", len(v2(GOOD, 2)), False)


@pytest.mark.parametrize("cut", range(1, 80))
def test_every_truncation_is_an_incomplete_tail_not_an_error(pair, cut: int) -> None:
    data = v2(GOOD, 2)
    blob = data + data
    res = both(pair, blob[:len(blob) - cut])
    assert res[-1] == ("end", len(data) if cut <= len(data) else 0, True)
    assert all(e[0] != "error" for e in res)


def test_bad_magic(pair) -> None:
    raises(pair, v2(GOOD, 2, magic=3), errors.CorruptDataError, "unknown magic byte 3")
    raises(pair, v2(GOOD, 2, magic=-1), errors.CorruptDataError, "unknown magic byte 255")


def test_crc_mismatch_then_continue(pair) -> None:
    bad = v2(GOOD, 2, crc=0x12345678)
    good = v2(GOOD, 2, base_offset=2)
    res = both(pair, bad + good)
    assert res[0][:2] == ("error", "ChecksumError")
    assert "stored 0x12345678" in res[0][2]
    assert res[1][1] == 2  # the next batch's base offset
    assert res[-1] == ("end", len(bad + good), False)
    res = both(pair, bad, validate=False)
    assert res[0][-3] is False  # validate_crc() reports it without raising


def test_checksum_error_fields(twin) -> None:
    bad = v2(GOOD, 2, crc=1)
    it = twin("batch").iter_batches(bad)
    with pytest.raises(errors.ChecksumError) as info:
        next(it)
    assert info.value.expected == 1 and info.value.offset == 0
    assert it.consumed == len(bad)
    assert list(it) == []


@pytest.mark.parametrize("length", [-1, -2**31, 0, 13])
def test_negative_or_tiny_batch_length(pair, length: int) -> None:
    raises(pair, v2(GOOD, 2, length=length), errors.CorruptDataError, "below the minimum of 14")


def test_v2_length_below_header(pair) -> None:
    data = v2(GOOD, 2, length=20)
    raises(pair, data, errors.CorruptDataError, "below the minimum of 49 for magic 2")


def test_malformed_batch_ends_iteration(twin) -> None:
    data = v2(GOOD, 2, magic=7) + v2(GOOD, 2)
    it = twin("batch").iter_batches(data)
    with pytest.raises(errors.CorruptDataError):
        next(it)
    assert list(it) == [] and it.consumed == 0


def test_huge_record_count_fails_at_once(pair) -> None:
    raises(pair, v2(GOOD, 2**31 - 1), errors.CorruptDataError,
           "record count 2147483647 impossible in")
    raises(pair, v2(GOOD, -5), errors.CorruptDataError, "negative record count -5")


def test_count_mismatch(pair) -> None:
    raises(pair, v2(GOOD, 1), errors.CorruptDataError, "bytes left after the last of 1 records")
    raises(pair, v2(GOOD, 3), errors.TruncatedError, "record length")


def test_overlong_varints(pair) -> None:
    raises(pair, v2(b"\x80\x80\x80\x80\x80\x01" + b"\x00" * 20, 1), errors.CorruptDataError,
           "record length too long")
    body = b"\x00" + b"\xff" * 10 + b"\x01" + b"\x00\x00\x00\x00"
    raises(pair, v2(record(body), 1), errors.CorruptDataError, "timestamp delta too long")
    body = b"\x00\x00" + b"\xff\xff\xff\xff\x7f" + b"\x00\x00\x00"
    raises(pair, v2(record(body), 1), errors.CorruptDataError, "offset delta overflows 32 bits")


def test_negative_and_overrunning_lengths(pair) -> None:
    raises(pair, v2(zz(-3) + b"\x00" * 10, 1), errors.CorruptDataError,
           "negative length -3 for record")
    raises(pair, v2(zz(100) + b"\x00" * 10, 1), errors.TruncatedError, "truncated record")
    body = b"\x00\x00\x00" + zz(-2) + b"\x00\x00"
    raises(pair, v2(record(body), 1), errors.CorruptDataError, "negative length -2 for record key")
    body = b"\x00\x00\x00" + zz(50) + b"abc"
    raises(pair, v2(record(body), 1), errors.TruncatedError, "truncated record key")
    body = b"\x00\x00\x00\x00" + zz(9) + b"ab" + b"\x00"
    raises(pair, v2(record(body), 1), errors.TruncatedError, "truncated record value")


def test_headers(pair) -> None:
    base = b"\x00\x00\x00\x01\x01"
    raises(pair, v2(record(base + zz(-1)), 1), errors.CorruptDataError, "negative header count")
    raises(pair, v2(record(base + zz(2**30) + b"\x00" * 6), 1), errors.CorruptDataError,
           "header count 1073741824 impossible in 6 bytes")
    raises(pair, v2(record(base + zz(1) + zz(-1) + b"\x00"), 1), errors.CorruptDataError,
           "negative length -1 for header key")
    raises(pair, v2(record(base + zz(1) + zz(2) + b"\xff\xfe" + zz(-1)), 1),
           errors.CorruptDataError, "header key is not valid UTF-8")
    raises(pair, v2(record(base + zz(1) + zz(1) + b"a" + zz(5) + b"x"), 1),
           errors.TruncatedError, "truncated header value")


def test_record_length_disagrees_with_fields(pair) -> None:
    body = b"\x00\x00\x00\x01\x01\x00" + b"\x00\x00"
    raises(pair, v2(record(body), 1), errors.CorruptDataError,
           "record length 8 but its fields took 6 bytes")


def test_control_record_too_short(pair) -> None:
    raises(pair, v2(simple_record(0, 0, b"\x00", b""), 1, attributes=0x20),
           errors.CorruptDataError, "control record key shorter than 4 bytes")
    raises(pair, v2(simple_record(0, 0, b"\x00\x00\x00\x01", b"\x00"), 1, attributes=0x20),
           errors.CorruptDataError, "transaction marker value shorter than 6 bytes")


def test_corrupt_and_over_limit_compressed_payloads(pair) -> None:
    raises(pair, v2(b"not gzip at all", 2, attributes=1), errors.CorruptDataError, "")
    raises(pair, v2(b"\x00" * 20, 2, attributes=3), errors.CorruptDataError, "")
    raises(pair, v2(b"\x00" * 20, 2, attributes=4), errors.CorruptDataError, "")
    raises(pair, v2(b"\x00" * 20, 2, attributes=5), errors.UnsupportedCodecError, "")
    bomb = gzip.compress(b"\x00" * 1_000_000)
    raises(pair, v2(bomb, 2, attributes=1), errors.DecompressionLimitError, "",
           limit=100_000)
    raises(pair, v2(gzip.compress(GOOD), 2**31 - 1, attributes=1), errors.CorruptDataError,
           "record count 2147483647 impossible")


def test_legacy_bad_input(pair) -> None:
    raises(pair, legacy(0, 0, None, b"x", crc=5), errors.ChecksumError, "message CRC-32")
    m = legacy(1, 0, b"k", b"v")
    raises(pair, m[:8] + struct.pack(">i", 20) + m[12:], errors.CorruptDataError,
           "below the minimum of 22 for magic 1")
    # key length overruns the message (CRC recomputed so the structure is what fails)
    raises(pair, legacy(0, 0, None, b"abc")[:-7] + b"\x00\x00\x00\x09abc",
           errors.ChecksumError, "")
    inner = legacy(0, 0, None, b"abc")
    body = inner[16:]
    bad_body = body[:2] + b"\x00\x00\x00\x09" + body[6:]
    raises(pair, legacy(0, 0, None, gzip.compress(inner[:16] + bad_body), attributes=1),
           errors.TruncatedError, "truncated message key")
    nested = legacy(0, 0, None, b"zz", attributes=1)
    raises(pair, legacy(0, 0, None, gzip.compress(nested), attributes=1),
           errors.CorruptDataError, "compressed message inside a compressed message")
    raises(pair, legacy(1, 0, None, gzip.compress(legacy(0, 0, None, b"a")), attributes=1),
           errors.CorruptDataError, "inner message magic 0 differs from the wrapper's 1")
    raises(pair, legacy(0, 0, None, gzip.compress(b""), attributes=1),
           errors.CorruptDataError, "holds no inner messages")
    raises(pair, legacy(0, 0, None, None, attributes=1),
           errors.CorruptDataError, "compressed message with a null value")
    raises(pair, legacy(0, 0, None, gzip.compress(legacy(0, 0, None, b"a", crc=9)),
                        attributes=1), errors.ChecksumError, "inner message CRC-32")
    raises(pair, legacy(0, 0, None, gzip.compress(legacy(0, 0, None, b"a")[:-1]),
                        attributes=1), errors.TruncatedError, "")


def test_legacy_inner_crc_unchecked_when_disabled(pair) -> None:
    data = legacy(0, 0, None, gzip.compress(legacy(0, 0, None, b"a", crc=9)), attributes=1)
    res = both(pair, data, validate=False)
    assert res[0][-1][0][4] == b"a"


def test_not_a_buffer(twin) -> None:
    with pytest.raises(TypeError):
        twin("batch").iter_batches("a string")
    with pytest.raises(ValueError):
        twin("batch").iter_batches(b"", start=3)
    with pytest.raises(ValueError):
        twin("batch").iter_batches(b"", max_decompressed_size=-1)


def test_any_buffer_type(twin) -> None:
    import array
    import mmap

    data = v2(GOOD, 2) * 2
    want = [r.value for b in twin("batch").iter_batches(data) for r in b]
    for buf in (bytearray(data), memoryview(data), memoryview(b"xx" + data)[2:]):
        assert [r.value for b in twin("batch").iter_batches(buf) for r in b] == want
    m = mmap.mmap(-1, len(data))
    m.write(data)
    assert [r.value for b in twin("batch").iter_batches(m) for r in b] == want
    a = array.array("B", data)
    assert [r.value for b in twin("batch").iter_batches(a) for r in b] == want


def test_bad_records_leave_no_reference_to_the_buffer(twin) -> None:
    """Once a malformed record's error is handled and the batches are gone, nothing holds
    the caller's buffer. (The pure twin raised one module-level exception object for every
    unusual record; each raise chained its frames onto that object's traceback, so every
    buffer it had read, a LogSegment's mapped file included, stayed referenced for the life
    of the process: a long fuzz run left 1,800 files open.)"""
    import gc

    buf = bytearray(v2(GOOD, 2) + v2(record(b"\x00\x00\x00" + zz(-2) + b"\x00\x00"), 1))
    errors_seen = 0
    for _ in range(3):
        for b in twin("batch").iter_batches(memoryview(buf)):
            try:
                list(b)
            except errors.CorruptDataError:
                errors_seen += 1
    assert errors_seen == 3
    del b
    gc.collect()          # reference cycles may wait for the collector; a leak does not
    buf.extend(b"\x00")   # BufferError while any view of it is still alive


@pytest.mark.parametrize("kw,text", [
    ({"compression": 9}, "compression codec 9 out of range"),
    ({"producer_epoch": 40000}, "producer epoch 40000 out of range"),
    ({"base_offset": 2**63}, "base offset"),
    ({"timestamp_type": "x"}, "timestamp type must be an int"),
    ({"compression": 1, "compression_level": 99}, "level"),
])
def test_builder_rejects_bad_settings(pair, kw: dict, text: str) -> None:
    msgs = []
    for m in pair("builder"):
        with pytest.raises(errors.EncodeError) as info:
            m.RecordBatchBuilder(**kw)
        msgs.append(str(info.value))
    assert msgs[0] == msgs[1] and text in msgs[0]


@pytest.mark.parametrize("args,text", [
    (("k", b"v"), "record key must be bytes-like or None, not str"),
    ((b"k", 5), "record value must be bytes-like or None, not int"),
    ((b"k", b"v", [("h",)]), "a header must be a (key, value) pair"),
    ((b"k", b"v", [(1, b"")]), "header key must be str or bytes, not int"),
    ((b"k", b"v", [("h", "s")]), "header value must be bytes-like or None, not str"),
    ((b"k", b"v", [("\ud800", b"")]), "header key cannot be encoded as UTF-8"),
    ((b"k", b"v", None, 2**63), "timestamp 9223372036854775808 out of range"),
    ((b"k", b"v", None, 1.5), "timestamp must be an int, not float"),
    ((b"k", b"v", None, 0, 2**31), "offset delta 2147483648 out of range"),
    ((b"k", b"v", None, -2**63), "timestamp delta"),
])
def test_builder_append_rejects_bad_records(pair, args: tuple, text: str) -> None:
    msgs = []
    for m, bld in zip(pair("batch"), pair("builder"), strict=False):
        b = bld.RecordBatchBuilder()
        b.append(b"first", b"x", None, 10**12)
        with pytest.raises(errors.EncodeError) as info:
            b.append(*args)
        msgs.append(str(info.value))
        assert b.record_count == 1
        (batch,) = list(m.iter_batches(b.build()))
        assert [r.key for r in batch] == [b"first"]
    assert msgs[0] == msgs[1] and text in msgs[0], msgs


def test_builder_offsets_must_increase(pair) -> None:
    for m in pair("builder"):
        b = m.RecordBatchBuilder()
        b.append(None, b"", offset_delta=5)
        with pytest.raises(errors.EncodeError, match="not above the previous 5"):
            b.append(None, b"", offset_delta=5)
        assert b.append(None, b"").offset_delta == 6
        b2 = m.RecordBatchBuilder()
        with pytest.raises(errors.EncodeError, match="is_control=True"):
            b2.append_control(1)
    for m in pair("legacy"):
        b = m.MessageSetBuilder()
        with pytest.raises(errors.EncodeError, match="zstd needs magic 2"):
            m.MessageSetBuilder(compression=4)
        with pytest.raises(errors.EncodeError, match="out of range"):
            m.MessageSetBuilder(magic=2)
        b.append(None, b"", 1, offset_delta=2)
        with pytest.raises(errors.EncodeError, match="not above the previous 2"):
            b.append(None, b"", 1, offset_delta=1)


@pytest.mark.parametrize("magic", [0, 1])
def test_legacy_record_crc_unchecked_then_asked(pair, magic: int) -> None:
    # Read without validation, a legacy record's validate_crc() answers on demand (from what
    # the record kept of its message): right for good and bad CRCs, null and empty keys and
    # values, negative timestamps and attribute bits, top level and inside a wrapper, and
    # unchanged by later edits of the record's fields.
    cases = [(None, b"a", 0, 0), (b"", b"", -1, 0x08), (b"k" * 300, None, 2**62, 0x10),
             (None, None, -2**63, 0x80)]
    msgs = []
    for i, (k, v, ts, attrs) in enumerate(cases):
        good = legacy(magic, i, k, v, ts=ts, attributes=attrs)
        msgs.append((good, True))
        crc = struct.unpack(">I", good[12:16])[0]
        msgs.append((legacy(magic, i, k, v, ts=ts, attributes=attrs, crc=crc ^ 1), False))
    blob = b"".join(m for m, _ in msgs)
    wrapped = legacy(magic, len(msgs) - 1, None, gzip.compress(blob), attributes=1)
    for data in (blob, wrapped):
        for mod in pair("batch"):
            recs = [r for b in mod.iter_batches(data, validate_crc=False) for r in b]
            assert [r.validate_crc() for r in recs] == [ok for _, ok in msgs]
            for r in recs:
                r.key, r.value, r.timestamp = b"x", b"y", 5
            assert [r.validate_crc() for r in recs] == [ok for _, ok in msgs]
