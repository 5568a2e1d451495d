"""Varint golden vectors and boundaries, against both twins."""

from __future__ import annotations

import pytest

from kcodec.errors import CorruptDataError, EncodeError, TruncatedError

BOUNDS = [0, 1, -1, 63, -64, 64, -65, 8191, -8192, 8192, -8193, 2**20 - 1, -(2**20),
          2**27 - 1, -(2**27), 2**31 - 1, -(2**31)]


@pytest.mark.parametrize("value", BOUNDS)
def test_varint_round_trip_and_size(twin, value: int) -> None:
    m = twin("varint")
    enc = m.encode_varint(value)
    assert m.varint_size(value) == len(enc)
    assert m.decode_varint(enc) == (value, len(enc))
    assert m.decode_varint(b"\x00" + enc + b"\x00", 1) == (value, 1 + len(enc))


def test_golden(twin) -> None:
    m = twin("varint")
    assert m.encode_varint(0) == b"\x00"
    assert m.encode_varint(-1) == b"\x01"
    assert m.encode_varint(1) == b"\x02"
    assert m.encode_varint(63) == b"\x7e"
    assert m.encode_varint(-64) == b"\x7f"
    assert m.encode_varint(64) == b"\x80\x01"
    assert m.encode_varlong(-(2**63)) == b"\xff" * 9 + b"\x01"
    assert m.encode_uvarint(300) == b"\xac\x02"


@pytest.mark.parametrize("bad", [b"\x80\x80\x80\x80\x80\x01", b"\xff\xff\xff\xff\x1f"])
def test_overlong_uvarint(twin, bad: bytes) -> None:
    with pytest.raises(CorruptDataError):
        twin("varint").decode_uvarint(bad)


def test_truncated(twin) -> None:
    with pytest.raises(TruncatedError) as info:
        twin("varint").decode_varlong(b"\x80\x80")
    assert info.value.offset == 0


@pytest.mark.parametrize("value", [2**31, -(2**31) - 1, "1", 1.0, None])
def test_encode_range(twin, value: object) -> None:
    with pytest.raises(EncodeError):
        twin("varint").encode_varint(value)
