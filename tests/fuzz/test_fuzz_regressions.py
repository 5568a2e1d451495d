"""Minimal reproducers of what fuzzing found (fuzz/README.md), fast and deterministic.

Each test pins one finding: the hostile input, and the outcome both twins must give.
"""

from __future__ import annotations

import gzip
import struct
import time
import tracemalloc

import pytest

from kcodec import _impl
from kcodec.compression import compress, decompress
from kcodec.errors import CorruptDataError
from tests.conftest import NO_EXT
from tests.support.records_util import v2


def pair(name: str):
    py = _impl.twin(name, "python")
    return (py if NO_EXT else _impl.twin(name, "cython")), py


def outcome(fn, *args, **kw):
    try:
        return ("ok", fn(*args, **kw))
    except Exception as exc:  # the class and message are what the twins must agree on
        return (type(exc).__name__, str(exc))


def records_outcome(batch_mod, blob: bytes):
    out = []
    for b in batch_mod.iter_batches(blob):
        out.append(outcome(lambda b=b: [r.value for r in b]))
    return out


def peak_bytes(fn) -> int:
    tracemalloc.start()
    try:
        fn()
    except CorruptDataError:
        pass
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    return peak


# -- F1: a zstd frame declaring 90 MiB with a 5-byte block made the library allocate 90 MiB

ZSTD_LIAR = (struct.pack("<I", 0xFD2FB528) + bytes([0x80 | 0x20]) + struct.pack("<I", 90 << 20)
             + ((5 << 3) | 1).to_bytes(3, "little") + b"hello")


def test_zstd_declared_size_beyond_its_blocks_is_refused_before_allocating() -> None:
    with pytest.raises(CorruptDataError) as info:
        decompress("zstd", ZSTD_LIAR)
    assert str(info.value) == ("zstd frame declares 94371840 bytes but its blocks make at "
                               "most 5 at offset 0")
    assert peak_bytes(lambda: decompress("zstd", ZSTD_LIAR)) < 1 << 20


def test_zstd_liar_inside_a_batch_same_error_in_both_twins() -> None:
    blob = v2(ZSTD_LIAR, 1, attributes=4)
    cy, py = pair("batch")
    got = records_outcome(cy, blob)
    assert got == records_outcome(py, blob)
    assert got[0][0] == "CorruptDataError" and "declares 94371840 bytes" in got[0][1]


# -- F2: the same for lz4 (a declared content size of 90 MiB, one 5-byte stored block)

def _lz4_liar() -> bytes:
    from kcodec._codecs.lz4_codec import header_checksum

    head = struct.pack("<I", 0x184D2204) + bytes([0x68, 0x40]) + struct.pack("<Q", 90 << 20)
    return (head + bytes([header_checksum(head)]) + struct.pack("<I", 0x80000005) + b"hello"
            + b"\0\0\0\0")


def test_lz4_declared_size_beyond_its_blocks_is_refused_before_allocating() -> None:
    liar = _lz4_liar()
    with pytest.raises(CorruptDataError) as info:
        decompress("lz4", liar)
    assert str(info.value) == ("lz4 frame declares 94371840 bytes but its blocks make at "
                               "most 5 at offset 0")
    assert peak_bytes(lambda: decompress("lz4", liar)) < 1 << 20
    cy, py = pair("batch")
    blob = v2(liar, 1, attributes=3)
    assert records_outcome(cy, blob) == records_outcome(py, blob)


def test_lz4_block_larger_than_the_block_size_is_corrupt() -> None:
    good = compress("lz4", b"x" * 100)
    hc = 14  # content size present (magic 2)
    bad = good[:hc + 1] + struct.pack("<I", 0x10001) + good[hc + 5:]
    with pytest.raises(CorruptDataError, match="a block of 65537 bytes in 65536-byte blocks"):
        decompress("lz4", bad)


# -- F3/F4: many small gzip members / lz4 frames took quadratic time (zlib and lz4 copied
#    the rest of the stream after each one): 800 KB of empty gzip members took 7 s.

@pytest.mark.parametrize("codec", ["gzip", "lz4"])
def test_many_small_members_take_linear_time(codec: str) -> None:
    unit = gzip.compress(b"", mtime=0) if codec == "gzip" else compress("lz4", b"")
    small, big = unit * 3125, unit * 50000
    t0 = time.perf_counter()
    assert decompress(codec, small) == b""
    t1 = time.perf_counter()
    assert decompress(codec, big) == b""
    t2 = time.perf_counter()
    # 16x the input: linear is ~16x the time, quadratic ~256x (11 s at 50000 before the fix).
    assert t2 - t1 < max(80 * (t1 - t0), 3.0), (t1 - t0, t2 - t1)


def test_gzip_members_and_padding_still_read_as_before() -> None:
    a, b = gzip.compress(b"first", mtime=0), gzip.compress(b"second" * 1000, mtime=0)
    assert decompress("gzip", a + b + a) == b"first" + b"second" * 1000 + b"first"
    assert decompress("gzip", a + b"\0" * 3000) == b"first"
    with pytest.raises(CorruptDataError, match=f"trailing bytes after gzip member at offset {len(a)}"):
        decompress("gzip", a + b"\0\0x", 1 << 40)
    with pytest.raises(CorruptDataError, match=f"truncated gzip member at offset {2 * len(a)}"):
        decompress("gzip", a + a + b[:-3], 1 << 40)


# -- F5: decode_columns over a legacy message with an empty (not null) key or value, before
#    any v2 batch: the compiled twin's bin_push did memcpy(NULL + 0, src, 0) into a column
#    with no data buffer yet (UBSan: applying zero offset to null pointer). Only an
#    ASan/UBSan build (fuzz/build_asan.sh) sees it; both twins must give the same columns.

def test_columns_empty_legacy_key_and_value() -> None:
    from fuzz.targets import columns_outcome, pure_records

    legacy = pair("legacy")[1]
    for magic in (0, 1):
        b = legacy.MessageSetBuilder(magic=magic)
        b.append(b"", b"", 5)
        b.append(None, b"", 6)
        blob = b.build()
        cy, py = pair("columns")
        got = columns_outcome(cy.decode_columns, blob, {}, "cy")
        with pure_records():
            assert got == columns_outcome(py.decode_columns, blob, {}, "py")
        cols = dict(got[2])
        assert cols["key"] == ("ok", ("int32", [b"", None]))
        assert cols["value"] == ("ok", ("int32", [b"", b""]))


def test_columns_batch_of_no_records_first() -> None:
    # F5 too: a v2 batch of 0 records first left the offset/timestamp columns unallocated
    # and _records computed NULL + 0 for its output pointers (UBSan).
    from fuzz.targets import columns_outcome, pure_records

    blob = v2(b"", 0) + v2(b"", 0, base_offset=1)
    cy, py = pair("columns")
    got = columns_outcome(cy.decode_columns, blob, {}, "cy")
    with pure_records():
        assert got == columns_outcome(py.decode_columns, blob, {}, "py")
    assert got[:2] == ("ok", 0) and got[3:] == (len(blob), 2, 2)


# -- Guards (no finding): counts of 2**31 and lengths of 2**32 in a few bytes must fail as
#    kcodec errors, the same in both twins, without allocating for the count (Python
#    allocations traced, C allocations capped by RLIMIT_AS at what is mapped + 256 MiB).

def _zz(v: int) -> bytes:
    from tests.support.records_util import zz

    return zz(v)


def _huge_header_count_record() -> bytes:
    body = b"\x00" + _zz(0) + _zz(0) + _zz(-1) + _zz(-1) + _zz(0x3FFFFFFF)
    return _zz(len(body)) + body


def _hostile_cases():
    from kcodec.protocol import MetadataRequest

    def batches(mod, blob):
        return [[r.offset for r in b] for b in mod.iter_batches(blob, validate_crc=False)]

    count_blob = v2(b"\x00" * 10, 0x7FFFFFFF)
    header_blob = v2(_huge_header_count_record(), 1)
    return [
        ("varint", lambda m: m.decode_varlongs(b"\x00" * 10, 2**31)),
        ("varint", lambda m: m.decode_varlongs(b"\x81" * 10, 2**62)),
        ("xerial", lambda m: m.snappy_decompress(b"\xff\xff\xff\xff\x0f\x00", 1 << 40)),
        ("xerial", lambda m: m.xerial_decompress(
            m.XERIAL_HEADER + b"\x00\x00\x00\x06\xff\xff\xff\xff\x0f\x00", 1 << 40)),
        ("batch", lambda m: batches(m, count_blob)),
        ("batch", lambda m: batches(m, header_blob)),
        ("columns", lambda m: m.decode_columns(count_blob, validate_crc=False)),
        ("columns", lambda m: m.decode_columns(header_blob, validate_crc=False)),
        ("engine", lambda m: m.decode_struct(MetadataRequest.plan(0), b"\x7f\xff\xff\xff")),
        ("engine", lambda m: m.decode_struct(MetadataRequest.plan(9), b"\xff\xff\xff\xff\x0f")),
        ("engine", lambda m: m.decode_struct(MetadataRequest.plan(12),
                                               b"\x00\x00\x00\xff\xff\xff\xff\x0f")),
    ]


@pytest.mark.parametrize("case", range(11))
def test_huge_counts_in_tiny_inputs(case: int) -> None:
    from fuzz.targets import memory_cap, pure_records

    name, fn = _hostile_cases()[case]
    cy, py = pair(name)
    outcome(fn, cy)   # warm up: lazy imports (numpy, codecs) are not the input's doing
    with memory_cap(256 << 20):
        tracemalloc.start()
        try:
            got = outcome(fn, cy)
            with pure_records():
                want = outcome(fn, py)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    assert got == want
    assert got[0] in ("TruncatedError", "CorruptDataError", "DecompressionLimitError"), got
    assert peak < 4 << 20, peak


# -- F6: the zstandard backend caches one decompression context per thread; after a corrupt
#    frame it was left mid-frame, so the error for the NEXT corrupt input depended on the
#    previous one ("Data corruption detected" instead of "Destination buffer is too small"):
#    the twins disagreed when one of them had decoded something else before.

ZSTD_A = bytes.fromhex("28b52ffd0126000b00049028b52ffd0101040b000400")
ZSTD_P = bytes.fromhex("28b52ffd0101000b00049028b52ffd0101040b000400")


def test_zstd_errors_do_not_depend_on_the_previous_input() -> None:
    from kcodec._codecs import zstd_codec

    zstd_codec.backend().discard()
    fresh = outcome(decompress, "zstd", ZSTD_P, 1000)
    assert fresh[0] == "CorruptDataError"
    for before in (ZSTD_A, ZSTD_P, compress("zstd", b"ok" * 100)[:-2]):
        outcome(decompress, "zstd", before, 1000)
        assert outcome(decompress, "zstd", ZSTD_P, 1000) == fresh
    # through both twins' batch readers, one after the other
    cy, py = pair("batch")
    blob_a, blob_p = v2(ZSTD_A, 1, attributes=4), v2(ZSTD_P, 1, attributes=4)
    records_outcome(cy, blob_a)
    got = records_outcome(cy, blob_p)
    records_outcome(py, blob_a)
    assert records_outcome(py, blob_p) == got


# -- F6b: the same after a SUCCESSFUL call: a valid frame without a content size (275 bytes,
#    decoded to 2,560 bytes) left the cached context so that the next corrupt frame said
#    "Data corruption detected" instead of "Destination buffer is too small".

ZSTD_P2 = bytes.fromhex("28b52ffd0101000b80000028b52ffd0101000b000000")
ZSTD_OK_BEFORE = bytes.fromhex(
    "28b52ffd00105508000410000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f20"
    "2122232425262728292a2b2c2d2e2f303132333435363738393a8e3c3d3e3f404142434445464748494a4b4c"
    "4d4e4f505152535455565758595a5b5c5d5e5f606162636465666768696a6b6c6d6e6f707172737475767778"
    "797a7b7c7d7e7f808182dc8485868788898a8b8c8d8e8f909192939495969798999a9b9c9d9e9fa0a1a2a3a4"
    "a5a6a7a8a9aaabd4adaeafb0b1b2b3b4b5b6b7b8b9babbbcbdbebfc0c1c2c3c4c5c6c7c8c9cacbcccdcecfd0"
    "d1d2d3d4d5d6d7d8d9dadbdcdddedfe0e1e2e3e4e5e6e7e8e9eaebecedeeeff0f1f2f3f4f5f6f7f8f9fafbfc"
    "fdfeff010000fd18f0d714")


def test_zstd_errors_do_not_depend_on_a_previous_success() -> None:
    from kcodec._codecs import zstd_codec

    zstd_codec.backend().discard()
    fresh = outcome(decompress, "zstd", ZSTD_P2, 1000)
    assert fresh[0] == "CorruptDataError"
    assert len(decompress("zstd", ZSTD_OK_BEFORE, 1 << 16)) == 2560
    assert outcome(decompress, "zstd", ZSTD_P2, 1000) == fresh


def test_log_source_skips_a_folder_named_like_a_segment(tmp_path) -> None:
    """F7 (sparklog target, input 02): a directory ``00000000000000000999.log`` inside a
    partition folder was taken for a segment and read_segment leaked IsADirectoryError."""
    # kcodec.spark raises ImportError (naming the extra) without pyspark, which importorskip
    # does not treat as missing: ask for pyspark itself (absent in the packaging test's venv)
    pytest.importorskip("pyspark", reason="kcodec.spark needs pyspark (the spark extra)")
    from kcodec.spark import logsource
    part = tmp_path / "topic-0"
    part.mkdir()
    (part / f"{999:020d}.log").mkdir()
    from kcodec.records import RecordBatchBuilder

    b = RecordBatchBuilder()
    b.append(b"k", b"v", None, timestamp=1_700_000_000_000)
    (part / f"{0:020d}.log").write_bytes(b.build())
    refs = logsource.find_segments([str(part)])
    assert [r.base_offset for r in refs] == [0]
    rows = [row for ref in refs for rb in logsource.read_segment(
        ref, headers=False, producer=False, fail=True, validate_crc=True) for row in rb.to_pylist()]
    assert [(r["key"], r["value"], r["offset"]) for r in rows] == [(b"k", b"v", 0)]


# -- F8 (harness): a NaN float64 inside a nested protocol struct (AlterClientQuotasRequest
# v1, op value 0xffffffffffffffff). Both twins decode the same bits; the target compared the
# nested structs with ==, where NaN != NaN, and reported a disagreement. The comparison now
# looks inside __slots__ structs and compares NaN by its bits.

NAN_QUOTA = bytes.fromhex("04010002020" "56e616d65056e616d650002056e616d65ffffffffffffffff010000010" "0")


def test_nan_in_a_nested_struct_is_the_same_in_both_twins() -> None:
    import math

    from fuzz.targets import TARGETS, canon
    from kcodec.protocol import AlterClientQuotasRequest

    cy, py = pair("engine")
    plan = AlterClientQuotasRequest.plan(1)
    a, b = (m.decode_struct(plan, NAN_QUOTA[3:], 0, True) for m in (cy, py))
    assert a[1] == b[1] == len(NAN_QUOTA) - 3
    va, vb = a[0].entries[0].ops[0].value, b[0].entries[0].ops[0].value
    assert math.isnan(va) and struct.pack(">d", va) == struct.pack(">d", vb) == b"\xff" * 8
    assert a[0] != b[0]                  # plain == says NaN != NaN ...
    assert canon(a) == canon(b)          # ... the target's comparison does not
    other_nan = NAN_QUOTA[3:].replace(b"\xff" * 8, b"\x7f" + b"\xff" * 7)   # other bits
    assert canon(a) != canon(py.decode_struct(plan, other_nan, 0, True))
    TARGETS["protocol"](NAN_QUOTA)       # the whole target: decode, re-encode, decode again


def test_broker_create_topics_with_millions_of_partitions_is_refused_at_once():
    """The broker target's first finding: over PLAINTEXT, ListGroups then a CreateTopics v5
    asking for 8,388,608 partitions of ``t-new``; the broker allocated until it stalled and
    answered nothing for 8 s. Now POLICY_VIOLATION at once (kcodec.broker.apis.topics)."""
    from fuzz.broker_target import shutdown, target_broker

    try:
        target_broker(bytes.fromhex(
            "0000000010001000030000000d000466757a7a000000000025001300050000000e000466757a7a00"
            "0206742d6e6577008000000001010100000003e800000000001f001600040000000f000466757a7a"
            "00000000ea60ffffffffffffffffffff00"))
    finally:
        shutdown()


def test_broker_target_builds_a_huge_tag_section_quickly():
    """F14 (harness): an expand header asking for 524,280 tagged fields was built by a loop
    of ``_uvar`` calls that, under atheris's instrumentation, took over 10 s: the campaign
    stopped on a timeout in the harness itself. Now built with numpy, the same bytes."""
    import time

    from fuzz.broker_target import _empty_tags, _uvar

    for n in (0, 1, 63, 64, 100, 16_319, 16_320, 16_400):
        assert _empty_tags(64, n) == b"".join(_uvar(64 + t) + _uvar(0) for t in range(n)), n
    t = time.process_time()
    whole = _empty_tags(64, 524_280)
    assert time.process_time() - t < 2.0          # ~0.03 s; the loop ~1 s uninstrumented
    assert whole[:4] == b"\x40\x00\x41\x00" and whole.endswith(bytes([0xB7, 0x80, 0x20, 0]))   # 524,343


def test_broker_target_sends_an_expanded_request_in_pieces_only_at_its_start():
    """Harness speed: 7-byte pieces of a 500 KiB expanded request were 70,000 sendall calls,
    most of an execution's time. Its first ``PIECED_BYTES`` go in pieces, the rest at once,
    then the payload in pieces again; the bytes on the wire are the same in every mode."""
    from fuzz.broker_target import PIECED_BYTES, _send

    class Sock:
        def __init__(self):
            self.calls: list[bytes] = []

        def sendall(self, b):
            self.calls.append(bytes(b))

    big, payload = bytes(range(256)) * 2000, b"\x00\x00\x00\x05hello" * 20
    wire = big + payload
    for mode in (0, 1, 2, 3):
        s = Sock()
        _send(s, wire, mode, len(big))
        assert b"".join(s.calls) == wire, mode
        if mode >= 2:
            step = 7 if mode == 2 else 64
            assert len(s.calls) == -(-PIECED_BYTES // step) + 1 + -(-len(payload) // step)
            assert s.calls[-(-PIECED_BYTES // step)] == big[PIECED_BYTES:]
    s = Sock()
    _send(s, payload, 2)          # an input without an expanded request: pieces all along
    assert len(s.calls) == -(-len(payload) // 7)
