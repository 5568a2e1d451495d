"""Varints and checksums against the real peers (test-only dependencies): kafka-python,
aiokafka (its pure functions and its compiled cutil), google-crc32c and the crc32c package.

Peers' varints are Kafka's zigzag varlong (64-bit), so they pair with our *_varlong.
"""

from __future__ import annotations

import importlib
import random
import struct
import zlib
from collections.abc import Callable
from typing import Any

import pytest

# Peers are imported inside the tests (the `peers` convention), so this module collects
# where they are not installed and `-m "not peers"` deselects it cleanly.
pytestmark = [
    pytest.mark.peers,
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),  # kafka-python's own imports
]


def _fn(path: str) -> Callable[..., Any]:
    """A peer function by "module:attribute", imported when first needed."""
    module, attr = path.split(":")
    return getattr(importlib.import_module(module), attr)


RND = random.Random(1493)
I64 = (-(2**63), 2**63 - 1)
VALUES = sorted(
    {0, 1, -1, I64[0], I64[1]}
    | {s * ((1 << k) + d) for k in range(6, 63, 7) for d in (-1, 0, 1) for s in (1, -1)}
    | {RND.randint(*I64) >> RND.randint(0, 63) for _ in range(300)}
)


KP = "kafka.record.util"
AIO = "aiokafka.record.util"
AIO_C = "aiokafka.record._crecords.cutil"
ENCODERS = {
    "kafka-python": f"{KP}:encode_varint",
    "aiokafka-py": f"{AIO}:encode_varint_py",
    "aiokafka-c": f"{AIO_C}:encode_varint_cython",
}
DECODERS = {
    "kafka-python": (f"{KP}:decode_varint", f"{KP}:size_of_varint"),
    "aiokafka-py": (f"{AIO}:decode_varint_py", f"{AIO}:size_of_varint_py"),
    "aiokafka-c": (f"{AIO_C}:decode_varint_cython", f"{AIO_C}:size_of_varint_cython"),
}


@pytest.mark.parametrize("peer", list(ENCODERS))
def test_peer_varints_decode_in_kcodec(twin, peer: str) -> None:
    m = twin("varint")
    encode = _fn(ENCODERS[peer])
    out = bytearray()
    for v in VALUES:
        start = len(out)
        encode(v, out.append)  # (its return value is one short for 10-byte varints)
        assert m.decode_varlong(out, start) == (v, len(out))
        assert m.varlong_size(v) == len(out) - start
    assert m.decode_varlongs(out, len(VALUES)) == (VALUES, len(out))
    assert m.encode_varlongs(VALUES) == bytes(out)


@pytest.mark.parametrize("peer", list(DECODERS))
def test_kcodec_varints_decode_in_peers(twin, peer: str) -> None:
    m = twin("varint")
    decode, size = (_fn(path) for path in DECODERS[peer])
    buf = bytearray(m.encode_varlongs(VALUES))
    pos = 0
    for v in VALUES:
        got, nxt = decode(buf, pos)
        assert got == v
        assert size(v) == nxt - pos == m.varlong_size(v)
        pos = nxt
    assert pos == len(buf)
    # the 32-bit zigzag varint is the same wire form as a varlong of the same value
    for v in (0, -1, 2**31 - 1, -(2**31), 12345, -987654):
        assert decode(bytearray(m.encode_varint(v)), 0) == (v, m.varint_size(v))


CRC_PEERS = {
    "kafka-python": f"{KP}:calc_crc32c",
    "aiokafka": f"{AIO}:calc_crc32c",
    "aiokafka-py": f"{AIO}:calc_crc32c_py",
    "aiokafka-c": f"{AIO_C}:crc32c_cython",
    "google-crc32c": "google_crc32c:value",
    "crc32c-package": "crc32c:crc32c",
}


@pytest.mark.parametrize("peer", list(CRC_PEERS))
def test_crc32c_agrees_with_peers(twin, peer: str) -> None:
    crc = twin("crc")
    theirs = _fn(CRC_PEERS[peer])
    data = RND.randbytes(70_000)
    lengths = list(range(0, 70)) + [255, 256, 767, 768, 769, 4096, 24575, 24576, 24577, 70_000]
    if peer == "aiokafka-py":  # a byte-at-a-time Python loop: keep it short
        lengths = lengths[:72]
    for off in (0, 1, 5):
        for n in lengths:
            chunk = data[off : off + n]
            assert crc.crc32c(chunk) == theirs(chunk), (off, n)


def test_crc32c_every_length_and_alignment_vs_google(pair) -> None:
    import google_crc32c

    cy, py = pair("crc")
    data = RND.randbytes(400)
    for off in range(8):
        for n in range(301):
            chunk = data[off : off + n]
            expected = google_crc32c.value(chunk)
            assert cy.crc32c(chunk) == py.crc32c(chunk) == expected, (off, n)
            assert cy.crc32c(memoryview(data)[off : off + n]) == expected


def test_crc32_agrees_with_kafka_python(twin) -> None:
    crc = twin("crc")
    calc_crc32 = _fn(f"{KP}:calc_crc32")
    for n in (0, 1, 9, 100, 5000):
        chunk = RND.randbytes(n)
        assert crc.crc32(chunk) == calc_crc32(memoryview(chunk)) == zlib.crc32(chunk)


def _v2_batch(builder_path: str) -> bytearray:
    b = _fn(builder_path)(magic=2, compression_type=0, is_transactional=0, producer_id=-1,
                    producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
    for i in range(50):
        b.append(i, timestamp=1_700_000_000_000 + i, key=b"k%03d" % i, value=RND.randbytes(40),
                 headers=[("h", b"v")])
    return b.build()


@pytest.mark.parametrize(
    "builder",
    ["kafka.record.default_records:DefaultRecordBatchBuilder",
     "aiokafka.record.default_records:DefaultRecordBatchBuilder"],
    ids=["kafka-python", "aiokafka"],
)
def test_crc32c_of_peer_v2_batches(twin, builder: str) -> None:
    """The stored CRC of a v2 batch covers everything from the attributes (byte 21) on."""
    crc = twin("crc")
    batch = bytes(_v2_batch(builder))
    (stored,) = struct.unpack_from(">I", batch, 17)
    assert crc.crc32c(memoryview(batch)[21:]) == stored
    assert crc.crc32c(batch[21:]) == stored


@pytest.mark.parametrize("magic", [0, 1])
def test_crc32_of_peer_legacy_messages(twin, magic: int) -> None:
    """A v0/v1 message's CRC-32 covers the bytes from its magic (byte 16) to its end."""
    crc = twin("crc")
    b = _fn("kafka.record.legacy_records:LegacyRecordBatchBuilder")(magic=magic, compression_type=0, batch_size=1 << 20)
    for i in range(5):
        b.append(i, timestamp=1_700_000_000_000 + i if magic else None, key=b"k", value=b"v" * i)
    buf = bytes(b.build())
    pos = 0
    while pos < len(buf):
        (size,) = struct.unpack_from(">i", buf, pos + 8)
        (stored,) = struct.unpack_from(">I", buf, pos + 12)
        end = pos + 12 + size
        assert crc.crc32(memoryview(buf)[pos + 16 : end]) == stored
        pos = end
