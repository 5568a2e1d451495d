"""Varints against both twins: golden vectors and boundaries, over-long and overflowing
encodings, truncation, positions, buffer types, and differential property tests."""

from __future__ import annotations

import array
import mmap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kcodec import _impl
from kcodec.errors import CorruptDataError, DecodeError, EncodeError, TruncatedError
from tests.conftest import NO_EXT

PY = _impl.twin("varint", "python")
CY = PY if NO_EXT else _impl.twin("varint", "cython")

I32 = (-(2**31), 2**31 - 1)
I64 = (-(2**63), 2**63 - 1)

# (kind, encode, decode, size) names per wire type
KINDS = {
    "uvarint": ("encode_uvarint", "decode_uvarint", "uvarint_size", (0, 2**32 - 1)),
    "varint": ("encode_varint", "decode_varint", "varint_size", I32),
    "varlong": ("encode_varlong", "decode_varlong", "varlong_size", I64),
}


def _expected_size(kind: str, value: int) -> int:
    """Bytes needed, from the definition: 7 payload bits per byte of the zigzag value."""
    if kind == "uvarint":
        u = value
    else:
        bits = 32 if kind == "varint" else 64
        u = (value << 1) ^ (value >> (bits - 1))
        u &= (1 << bits) - 1
    return max(1, -(-u.bit_length() // 7))


def _boundaries(kind: str) -> list[int]:
    lo, hi = KINDS[kind][3]
    out = {lo, hi, lo + 1, hi - 1, 0, 1, -1}
    for k in range(6, 64, 7):  # 2^6, 2^13, 2^20, ... where the size changes
        for base in (1 << k, -(1 << k), 1 << (k + 1)):
            out.update((base - 1, base, base + 1))
    return sorted(v for v in out if lo <= v <= hi)


@pytest.mark.parametrize("kind", list(KINDS))
def test_boundaries_round_trip_and_size(twin, kind: str) -> None:
    m = twin("varint")
    enc_name, dec_name, size_name, _ = KINDS[kind]
    encode, decode, size = (getattr(m, n) for n in (enc_name, dec_name, size_name))
    for value in _boundaries(kind):
        enc = encode(value)
        assert len(enc) == size(value) == _expected_size(kind, value), value
        assert decode(enc) == (value, len(enc))
        assert decode(b"\x07\x00" + enc + b"\xff", 2) == (value, 2 + len(enc))


def test_size_steps_at_powers_of_two(twin) -> None:
    m = twin("varint")
    for n in range(1, 10):  # 2^(7n-1) needs one byte more than 2^(7n-1) - 1
        k = 7 * n - 1
        assert m.varlong_size((1 << k) - 1) == n
        assert m.varlong_size(1 << k) == n + 1
        assert m.varlong_size(-(1 << k)) == n
        assert m.varlong_size(-(1 << k) - 1) == n + 1
    assert m.varlong_size(I64[1]) == m.varlong_size(I64[0]) == 10
    assert m.varint_size(I32[1]) == m.varint_size(I32[0]) == 5
    assert m.uvarint_size(2**28 - 1) == 4 and m.uvarint_size(2**28) == 5


def test_golden(twin) -> None:
    m = twin("varint")
    assert m.encode_varint(0) == b"\x00"
    assert m.encode_varint(-1) == b"\x01"
    assert m.encode_varint(1) == b"\x02"
    assert m.encode_varint(63) == b"\x7e"
    assert m.encode_varint(-64) == b"\x7f"
    assert m.encode_varint(64) == b"\x80\x01"
    assert m.encode_varint(-65) == b"\x81\x01"
    assert m.encode_varint(I32[1]) == b"\xfe\xff\xff\xff\x0f"
    assert m.encode_varint(I32[0]) == b"\xff\xff\xff\xff\x0f"
    assert m.encode_varlong(I64[1]) == b"\xfe" + b"\xff" * 8 + b"\x01"
    assert m.encode_varlong(I64[0]) == b"\xff" * 9 + b"\x01"
    assert m.encode_varlong(2**31) == b"\x80\x80\x80\x80\x10"
    assert m.encode_uvarint(300) == b"\xac\x02"
    assert m.encode_uvarint(2**32 - 1) == b"\xff\xff\xff\xff\x0f"
    assert m.encode_varlongs([0, -1, 1, 300]) == b"\x00\x01\x02\xd8\x04"


def test_non_canonical_but_bounded_encodings_decode(twin) -> None:
    m = twin("varint")
    assert m.decode_uvarint(b"\x80\x00") == (0, 2)
    assert m.decode_varint(b"\x81\x80\x80\x80\x00") == (-1, 5)
    assert m.decode_varlong(b"\x80" * 9 + b"\x00") == (0, 10)


OVERLONG = [
    ("decode_uvarint", b"\x80\x80\x80\x80\x80\x01", "unsigned varint too long: more than 5 bytes"),
    ("decode_uvarint", b"\xff\xff\xff\xff\x10", "unsigned varint overflows 32 bits"),
    ("decode_varint", b"\xff\xff\xff\xff\x1f", "varint overflows 32 bits"),
    ("decode_varint", b"\xff\xff\xff\xff\xff\x00", "varint too long: more than 5 bytes"),
    ("decode_varlong", b"\xff" * 9 + b"\x02", "varlong overflows 64 bits"),
    ("decode_varlong", b"\x80" * 10 + b"\x00", "varlong too long: more than 10 bytes"),
    ("decode_varlongs", b"\xff" * 10 + b"\x01", "varlong too long: more than 10 bytes"),
]


@pytest.mark.parametrize("fn,data,message", OVERLONG)
def test_overlong_and_overflowing(twin, fn: str, data: bytes, message: str) -> None:
    decode = getattr(twin("varint"), fn)
    for pos in (0, 3):
        buf = b"\x00" * pos + data + b"\x00" * 12
        with pytest.raises(CorruptDataError) as info:
            decode(buf, 1, pos) if fn == "decode_varlongs" else decode(buf, pos)
        assert str(info.value) == f"{message} at offset {pos}"
        assert info.value.offset == pos


@pytest.mark.parametrize("kind", list(KINDS))
def test_every_truncation(twin, kind: str) -> None:
    m = twin("varint")
    encode, decode = getattr(m, KINDS[kind][0]), getattr(m, KINDS[kind][1])
    for value in _boundaries(kind):
        enc = encode(value)
        for cut in range(len(enc)):
            buf = b"\x01\x02" + enc[:cut]
            with pytest.raises(TruncatedError) as info:
                decode(buf, 2)
            e = info.value
            assert (e.need, e.offset, e.available) == (cut + 1, 2, cut)
            assert str(e) == f"truncated {kind.replace('uvarint', 'unsigned varint')}: need {cut + 1} bytes, {cut} available at offset 2"


def test_positions(twin) -> None:
    m = twin("varint")
    buf = m.encode_varlongs([5, -300, 2**40])
    v1, p = m.decode_varlong(buf)
    v2, p = m.decode_varlong(buf, p)
    v3, p = m.decode_varlong(buf, p)
    assert (v1, v2, v3, p) == (5, -300, 2**40, len(buf))
    with pytest.raises(TruncatedError):
        m.decode_varlong(buf, len(buf))
    for bad in (-1, len(buf) + 1):
        with pytest.raises(DecodeError) as info:
            m.decode_varlong(buf, bad)
        assert type(info.value) is DecodeError
        assert str(info.value) == f"position {bad} outside a buffer of {len(buf)} bytes at offset {bad}"


def _buffer_kinds(data: bytes, tmp_path: Path) -> dict[str, Any]:
    path = tmp_path / "v.bin"
    path.write_bytes(data)
    with open(path, "rb") as f:
        mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    padded = b"\xaa\xbb" + data + b"\xcc"
    return {
        "bytes": data,
        "bytearray": bytearray(data),
        "memoryview-slice": memoryview(padded)[2:-1],
        "mmap": mm,
        "numpy-u8": np.frombuffer(data, dtype=np.uint8),
        "numpy-u8-slice": np.frombuffer(padded, dtype=np.uint8)[2:-1],
        "array": array.array("B", data),
        "strided-memoryview": memoryview(bytes(b for x in data for b in (x, 0)))[::2],
        "transposed-numpy": np.frombuffer(data, dtype=np.uint8).reshape(1, -1).T,
    }


def test_any_buffer_type(twin, tmp_path: Path) -> None:
    m = twin("varint")
    values = [0, -1, 300, -(2**40), I64[0], I64[1]]
    data = m.encode_varlongs(values)
    for kind, buf in _buffer_kinds(data, tmp_path).items():
        assert m.decode_varlongs(buf, len(values)) == (values, len(data)), kind
        pos = 0
        for v in values:
            got, pos = m.decode_varlong(buf, pos)
            assert got == v, kind
        assert m.decode_uvarint(buf, len(data) - 1) == (1, len(data)), kind
        if kind == "mmap":
            buf.close()
    words = np.array([0x01020304], dtype="<u4")  # any dtype: its raw bytes
    assert m.decode_uvarint(words) == (4, 1)


@pytest.mark.parametrize("bad", ["text", None, 3, [1, 2]])
def test_not_a_buffer(pair, bad: object) -> None:
    messages = []
    for m in pair("varint"):
        for fn in (m.decode_uvarint, m.decode_varint, m.decode_varlong):
            with pytest.raises(TypeError) as info:
                fn(bad)
            messages.append(str(info.value))
        with pytest.raises(TypeError) as info:
            m.decode_varlongs(bad, 1)
        messages.append(str(info.value))
    assert set(messages) == {f"a bytes-like object is required, not {type(bad).__name__!r}"}


ENCODE_ERRORS = [
    ("encode_varint", 2**31, "value 2147483648 out of range for varint (-2147483648..2147483647)"),
    ("encode_varint", -(2**31) - 1, "value -2147483649 out of range for varint (-2147483648..2147483647)"),
    ("varint_size", 2**31, "value 2147483648 out of range for varint (-2147483648..2147483647)"),
    ("encode_uvarint", -1, "value -1 out of range for unsigned varint (0..4294967295)"),
    ("uvarint_size", 2**32, "value 4294967296 out of range for unsigned varint (0..4294967295)"),
    ("encode_varlong", 2**63, f"value {2**63} out of range for varlong ({I64[0]}..{I64[1]})"),
    ("varlong_size", -(2**63) - 1, f"value {-(2**63) - 1} out of range for varlong ({I64[0]}..{I64[1]})"),
    ("encode_varlong", 10**40, f"value {10**40} out of range for varlong ({I64[0]}..{I64[1]})"),
    ("encode_varint", "1", "varint value must be an int, not str"),
    ("encode_varlong", 1.0, "varlong value must be an int, not float"),
    ("encode_uvarint", None, "unsigned varint value must be an int, not NoneType"),
    ("varlong_size", b"\x01", "varlong value must be an int, not bytes"),
]


@pytest.mark.parametrize("fn,value,message", ENCODE_ERRORS)
def test_encode_errors(twin, fn: str, value: object, message: str) -> None:
    with pytest.raises(EncodeError) as info:
        getattr(twin("varint"), fn)(value)
    assert str(info.value) == message


def test_int_like_values(twin) -> None:
    m = twin("varint")
    assert m.encode_varlong(np.int64(-5)) == m.encode_varlong(-5)
    assert m.encode_varint(np.int32(7)) == b"\x0e"
    assert m.encode_uvarint(np.uint32(2**32 - 1)) == b"\xff\xff\xff\xff\x0f"
    assert m.encode_varint(True) == b"\x02"
    values = np.array([1, -2, 2**62, -(2**63)], dtype=np.int64)
    assert m.encode_varlongs(values) == m.encode_varlongs(values.tolist())
    assert m.encode_varlongs(iter([1, 2])) == b"\x02\x04"
    assert m.encode_varlongs((1, 2)) == b"\x02\x04"
    assert m.encode_varlongs([]) == b""


def test_bulk(twin) -> None:
    m = twin("varint")
    values = list(range(-1000, 1000, 7)) + [I64[0], I64[1]]
    data = m.encode_varlongs(values)
    assert data == b"".join(m.encode_varlong(v) for v in values)
    assert m.decode_varlongs(b"\x00" + data, len(values), 1) == (values, len(data) + 1)
    assert m.decode_varlongs(data, 0) == ([], 0)
    assert m.decode_varlongs(data, 0, len(data)) == ([], len(data))
    with pytest.raises(TruncatedError):
        m.decode_varlongs(data, 1, len(data))
    with pytest.raises(DecodeError) as info:
        m.decode_varlongs(data, -1)
    assert str(info.value) == "negative count -1 at offset 0"
    with pytest.raises(EncodeError) as info:
        m.encode_varlongs([1, 2**63])
    assert str(info.value) == f"value {2**63} out of range for varlong ({I64[0]}..{I64[1]})"


def test_bulk_count_beyond_input_does_not_allocate_for_it(twin) -> None:
    m = twin("varint")
    with pytest.raises(TruncatedError) as info:
        m.decode_varlongs(b"\x02\x04", 2**40)
    assert (info.value.offset, info.value.need, info.value.available) == (2, 1, 0)
    with pytest.raises(CorruptDataError):
        m.decode_varlongs(b"\x02" + b"\xff" * 11, 10**12)


# -- differential: both twins give the same value or the same error -----------------

def _outcome(fn: Callable[..., Any], *args: Any) -> tuple[str, Any]:
    try:
        return ("ok", fn(*args))
    except Exception as exc:  # noqa: BLE001 - the class and text are what we compare
        return (type(exc).__name__, str(exc))


DECODERS = ["decode_uvarint", "decode_varint", "decode_varlong"]
ENCODERS = ["encode_uvarint", "encode_varint", "encode_varlong", "uvarint_size", "varint_size",
            "varlong_size"]


RANDOM_BYTES = (st.binary(max_size=24), st.integers(-3, 27))
MUTATED = (
    st.lists(st.integers(I64[0], I64[1]), max_size=6),
    st.lists(st.tuples(st.integers(0, 80), st.integers(0, 255)), max_size=4),
    st.integers(0, 80),
)
INTS = (st.one_of(st.integers(-(2**70), 2**70), st.integers(-(2**33), 2**33)),)


@given(*RANDOM_BYTES)
def test_differential_random_bytes(data: bytes, pos: int) -> None:
    check_random_bytes(data, pos)


@given(*MUTATED)
def test_differential_mutated(values: list[int], flips: list[tuple[int, int]], cut: int) -> None:
    check_mutated(values, flips, cut)


@given(*INTS)
def test_differential_encode(value: int) -> None:
    check_encode(value)


@pytest.mark.slow
@settings(max_examples=3000)
@given(*RANDOM_BYTES, *MUTATED, *INTS)
def test_differential_soak(data: bytes, pos: int, values: list[int],
                           flips: list[tuple[int, int]], cut: int, value: int) -> None:
    check_random_bytes(data, pos)
    check_mutated(values, flips, cut)
    check_encode(value)


def check_random_bytes(data: bytes, pos: int) -> None:
    for name in DECODERS:
        assert _outcome(getattr(CY, name), data, pos) == _outcome(getattr(PY, name), data, pos)
    for count in (0, 1, 3):
        assert _outcome(CY.decode_varlongs, data, count, pos) == _outcome(
            PY.decode_varlongs, data, count, pos
        )


def check_mutated(values: list[int], flips: list[tuple[int, int]], cut: int) -> None:
    data = bytearray(PY.encode_varlongs(values))
    assert bytes(data) == CY.encode_varlongs(values)
    for where, byte in flips:
        if data:
            data[where % len(data)] = byte
    data = bytes(data[: cut if cut < len(data) else len(data)])
    for name in DECODERS:
        for pos in (0, 1):
            assert _outcome(getattr(CY, name), data, pos) == _outcome(getattr(PY, name), data, pos)
    assert _outcome(CY.decode_varlongs, data, len(values)) == _outcome(
        PY.decode_varlongs, data, len(values)
    )


def check_encode(value: int) -> None:
    for name in ENCODERS:
        assert _outcome(getattr(CY, name), value) == _outcome(getattr(PY, name), value)
    assert _outcome(CY.encode_varlongs, [value]) == _outcome(PY.encode_varlongs, [value])

