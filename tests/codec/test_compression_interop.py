"""Interop with real peers: kafka-python's and aiokafka's codec functions.

Their encoders' bytes decode in kcodec, and kcodec's bytes decode in their decoders:
gzip, snappy (xerial and raw), lz4 (frame, and kafka-python's legacy pre-KIP-57 frame for
magic 0), zstd.
"""

from __future__ import annotations

import os

import pytest

from kcodec.compression import compress, decompress

pytestmark = [
    pytest.mark.peers,
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),  # kafka-python's own imports
]


def _kp():
    import kafka.codec

    return kafka.codec


def _aio():
    import aiokafka.codec

    return aiokafka.codec


SIZES = [0, 1, 1000, 100_000, (1 << 20) + 3]


def sample(n: int) -> bytes:
    return (os.urandom(n // 2) + b"kafka record " * (n // 12 + 1))[:n]


# kafka-python: (encoder, codec, magic) — its bytes into our decoder.
KAFKA_PYTHON_ENCODERS = {
    "gzip": (lambda d: _kp().gzip_encode(d), "gzip", 2),
    "gzip-level-1": (lambda d: _kp().gzip_encode(d, 1), "gzip", 2),
    "snappy-xerial": (lambda d: _kp().snappy_encode(d), "snappy", 2),
    "snappy-xerial-small-blocks": (lambda d: _kp().snappy_encode(d, True, 1000), "snappy", 2),
    "snappy-raw": (lambda d: _kp().snappy_encode(d, xerial_compatible=False), "snappy", 2),
    "lz4": (lambda d: _kp().lz4_encode(d), "lz4", 2),
    "lz4-old-kafka": (lambda d: _kp().lz4_encode_old_kafka(d), "lz4", 0),
    "zstd": (lambda d: _kp().zstd_encode(d), "zstd", 2),
}

# kafka-python: (decoder, codec, magic) — our bytes into its decoder.
KAFKA_PYTHON_DECODERS = {
    "gzip": (lambda b: _kp().gzip_decode(b), "gzip", 2),
    "snappy": (lambda b: _kp().snappy_decode(b), "snappy", 2),
    "lz4": (lambda b: _kp().lz4_decode(b), "lz4", 2),
    "lz4-old-kafka": (lambda b: _kp().lz4_decode_old_kafka(b), "lz4", 0),
    "zstd": (lambda b: _kp().zstd_decode(b), "zstd", 2),
}

AIOKAFKA_ENCODERS = {
    "gzip": (lambda d: _aio().gzip_encode(d), "gzip"),
    "snappy-xerial": (lambda d: _aio().snappy_encode(d), "snappy"),
    "snappy-raw": (lambda d: _aio().snappy_encode(d, xerial_compatible=False), "snappy"),
    "lz4": (lambda d: _aio().lz4_encode(d), "lz4"),
    "lz4-level-1": (lambda d: _aio().lz4_encode(d, 1), "lz4"),
    "zstd": (lambda d: _aio().zstd_encode(d), "zstd"),
    "zstd-level-19": (lambda d: _aio().zstd_encode(d, 19), "zstd"),
}

AIOKAFKA_DECODERS = {
    "gzip": (lambda b: _aio().gzip_decode(b), "gzip"),
    "snappy": (lambda b: _aio().snappy_decode(b), "snappy"),
    "lz4": (lambda b: _aio().lz4_decode(b), "lz4"),
    "zstd": (lambda b: _aio().zstd_decode(b), "zstd"),
}


@pytest.mark.parametrize("name", list(KAFKA_PYTHON_ENCODERS))
@pytest.mark.parametrize("n", SIZES)
def test_kafka_python_encodes_kcodec_decodes(name: str, n: int) -> None:
    encode, codec, magic = KAFKA_PYTHON_ENCODERS[name]
    if name == "snappy-xerial" and n == 0:
        # kafka-python writes the 16-byte header alone for empty input (which its own
        # decoder cannot read back); we read it as empty.
        assert encode(b"")[:8] == b"\x82SNAPPY\x00"
    data = sample(n)
    assert decompress(codec, encode(data), magic=magic) == data


@pytest.mark.parametrize("name", list(KAFKA_PYTHON_DECODERS))
@pytest.mark.parametrize("n", SIZES)
def test_kcodec_encodes_kafka_python_decodes(name: str, n: int) -> None:
    decode, codec, magic = KAFKA_PYTHON_DECODERS[name]
    data = sample(n)
    for level in ([None] if codec == "snappy" else [None, 1]):
        assert decode(compress(codec, data, level, magic=magic)) == data


@pytest.mark.parametrize("name", list(AIOKAFKA_ENCODERS))
@pytest.mark.parametrize("n", SIZES)
def test_aiokafka_encodes_kcodec_decodes(name: str, n: int) -> None:
    encode, codec = AIOKAFKA_ENCODERS[name]
    data = sample(n)
    assert decompress(codec, encode(data)) == data


@pytest.mark.parametrize("name", list(AIOKAFKA_DECODERS))
@pytest.mark.parametrize("n", SIZES)
def test_kcodec_encodes_aiokafka_decodes(name: str, n: int) -> None:
    decode, codec = AIOKAFKA_DECODERS[name]
    data = sample(n)
    for magic in (1, 2):
        assert decode(compress(codec, data, magic=magic)) == data


def test_kafka_python_reads_our_legacy_lz4_only_through_its_legacy_decoder() -> None:
    """The magic-0 frame really carries the broken checksum a standard reader rejects."""
    data = sample(5000)
    old = compress("lz4", data, magic=0)
    assert _kp().lz4_decode_old_kafka(old) == data
    with pytest.raises(RuntimeError):
        _kp().lz4_decode(old)
    # And kafka-python's legacy encoder output fails a standard reader the same way.
    with pytest.raises(RuntimeError):
        _kp().lz4_decode(_kp().lz4_encode_old_kafka(data))


def test_little_endian_xerial_header_from_the_wild() -> None:
    """Some producers write the xerial version ints little-endian; kafka-python reads those
    streams (it checks only the magic) and so do we."""
    data = sample(50_000)
    blob = bytearray(_kp().snappy_encode(data))
    blob[8:16] = (1).to_bytes(4, "little") * 2
    assert _kp().snappy_decode(bytes(blob)) == data
    assert decompress("snappy", bytes(blob)) == data
