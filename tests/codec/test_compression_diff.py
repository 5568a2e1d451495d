"""Differential: ``decompress`` of both compression twins (the compiled one with its xerial
twin and lz4 fast path, the pure one with its own) gives the same value or the same
exception class and message, on random and mutated input, for every codec; and only kcodec
errors ever come out."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from kcodec import _impl
from kcodec.compression import Codec
from kcodec.errors import DecodeError
from tests.conftest import NO_EXT

_PY = _impl.twin("compression", "python")
_CY = _PY if NO_EXT else _impl.twin("compression", "cython")


def _outcome(module, codec, blob: bytes, limit: int, magic: int):
    try:
        return ("ok", module.decompress(codec, blob, limit, magic=magic))
    except DecodeError as exc:
        return (type(exc), str(exc))


def _same(codec, blob: bytes, limit: int, magic: int) -> None:
    assert _outcome(_CY, codec, blob, limit, magic) == _outcome(_PY, codec, blob, limit, magic)


codecs = st.sampled_from(list(Codec))
magics = st.sampled_from([0, 1, 2])
limits = st.sampled_from([0, 7, 1000, 1 << 20])
PREFIXES = [
    b"",
    b"\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01",
    b"\x04\x22\x4d\x18",
    b"\x04\x22\x4d\x18\x60\x40",
    b"\x28\xb5\x2f\xfd",
    b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff",
]


@given(codec=codecs, prefix=st.sampled_from(PREFIXES), body=st.binary(max_size=300),
       limit=limits, magic=magics)
def test_random_bytes(codec, prefix: bytes, body: bytes, limit: int, magic: int) -> None:
    _same(codec, prefix + body, limit, magic)


@given(
    codec=codecs,
    data=st.binary(max_size=2000),
    edits=st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255), st.sampled_from("fdit")),
                   min_size=1, max_size=4),
    limit=limits,
    magic=magics,
)
def test_mutated_streams(codec, data: bytes, edits, limit: int, magic: int) -> None:
    b = bytearray(_PY.compress(codec, data, magic=magic))
    for pos, byte, kind in edits:
        pos %= len(b) + 1
        if kind == "f" and pos < len(b):
            b[pos] ^= byte or 1
        elif kind == "d" and pos < len(b):
            del b[pos]
        elif kind == "i":
            b.insert(pos, byte)
        else:
            del b[pos:]
    _same(codec, bytes(b), limit, magic)


@given(codec=codecs, data=st.binary(max_size=5000), magic=magics)
def test_round_trip_both(codec, data: bytes, magic: int) -> None:
    for module in (_CY, _PY):
        blob = module.compress(codec, data, magic=magic)
        assert blob == _PY.compress(codec, data, magic=magic)
        assert module.decompress(codec, blob, magic=magic) == data
