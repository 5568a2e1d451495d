"""CRC-32C and CRC-32: RFC 3720 vectors, every length and alignment, buffer types,
incremental use, zlib parity, the forced table backend, and the C code on its own."""

from __future__ import annotations

import array
import mmap
import os
import random
import shutil
import subprocess
import sys
import sysconfig
import zlib
from pathlib import Path

import crc32c as crc32c_package  # the runtime dependency: an independent implementation
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from kcodec import _impl
from tests.conftest import NO_EXT

ROOT = Path(__file__).resolve().parents[2]

# RFC 3720 appendix B.4; the RFC lists the CRC bytes least significant first.
ISCSI_READ_PDU = bytes.fromhex(
    "01c00000 00000000 00000000 00000000 14000000 00000400 00000014 00000018"
    " 28000000 00000000 02000000 00000000".replace(" ", "")
)
RFC3720 = [
    (bytes(32), 0x8A9136AA),
    (b"\xff" * 32, 0x62A8AB43),
    (bytes(range(32)), 0x46DD794E),
    (bytes(range(31, -1, -1)), 0x113FDB5C),
    (ISCSI_READ_PDU, 0xD9963A56),
    (b"123456789", 0xE3069283),
    (b"", 0),
]

DATA = random.Random(3720).randbytes(4096)


def _reference_table() -> list[int]:
    """Byte table straight from the definition (reflected 0x82F63B78), for the references."""
    table = []
    for b in range(256):
        for _ in range(8):
            b = (b >> 1) ^ (0x82F63B78 if b & 1 else 0)
        table.append(b)
    return table


REF_TABLE = _reference_table()


def reference_prefixes(data: bytes) -> list[int]:
    """CRC-32C of every prefix data[:n], n = 0..len(data), byte by byte."""
    out = [0]
    reg = 0xFFFFFFFF
    for b in data:
        reg = (reg >> 8) ^ REF_TABLE[(reg ^ b) & 0xFF]
        out.append(reg ^ 0xFFFFFFFF)
    return out


def package_value(data: bytes) -> int:
    return crc32c_package.crc32c(data)


@pytest.mark.parametrize("data,expected", RFC3720)
def test_rfc3720_vectors(twin, data: bytes, expected: int) -> None:
    crc = twin("crc")
    assert crc.crc32c(data) == expected
    assert crc._crc32c_table(data) == expected


def test_crc32_check_value(twin) -> None:
    assert twin("crc").crc32(b"123456789") == 0xCBF43926


def test_every_length_and_alignment(pair) -> None:
    cy, py = pair("crc")
    for off in range(8):
        prefixes = reference_prefixes(DATA[off : off + 300])
        for n in range(301):
            chunk = DATA[off : off + n]
            expected = prefixes[n]
            assert cy.crc32c(chunk) == expected, (off, n)
            assert py.crc32c(chunk) == expected, (off, n)
            assert cy._crc32c_table(chunk) == expected, (off, n)
    # unaligned views into one buffer (no copies): the C code sees odd addresses
    mv = memoryview(bytearray(DATA))
    for off in range(1, 16):
        assert cy.crc32c(mv[off:]) == package_value(DATA[off:])


def test_large_buffers_cross_the_interleaved_blocks(twin) -> None:
    crc = twin("crc")
    rnd = random.Random(20)
    big = rnd.randbytes(1 << 16) * 17  # > 1 MiB, not a block multiple
    for n in (3 * 256 - 1, 3 * 256, 3 * 256 + 1, 3 * 8192 - 1, 3 * 8192, 3 * 8192 + 9,
              2 * 3 * 8192 + 3 * 256 + 7, len(big)):
        for off in (0, 3):
            chunk = big[off : off + n]
            assert crc.crc32c(chunk) == package_value(chunk), (n, off)
    assert crc.crc32(big) == zlib.crc32(big)


def test_incremental(twin) -> None:
    crc = twin("crc")
    data = DATA[:200]
    whole = crc.crc32c(data)
    for cut in range(len(data) + 1):
        assert crc.crc32c(data[cut:], crc.crc32c(data[:cut])) == whole
        assert crc.crc32(data[cut:], crc.crc32(data[:cut])) == zlib.crc32(data)
    running = 0
    for i in range(0, len(DATA), 333):
        running = crc.crc32c(DATA[i : i + 333], running)
    assert running == package_value(DATA)


def _buffers(data: bytes):
    arr = np.frombuffer(data, dtype=np.uint8)
    return {
        "bytes": data,
        "bytearray": bytearray(data),
        "memoryview": memoryview(data),
        "memoryview-slice": memoryview(b"xx" + data + b"yyy")[2:-3],
        "numpy-u8": arr.copy(),
        "numpy-i32": np.frombuffer(data, dtype="<i4").copy(),
        "numpy-2d": arr.reshape(16, -1).copy(),
        "array": array.array("B", data),
    }


@pytest.mark.parametrize(
    "kind", ["bytes", "bytearray", "memoryview", "memoryview-slice", "numpy-u8", "numpy-i32",
             "numpy-2d", "array"]
)
def test_buffer_types(twin, kind: str) -> None:
    crc = twin("crc")
    data = DATA[:1024]
    buf = _buffers(data)[kind]
    assert crc.crc32c(buf) == package_value(data)
    assert crc.crc32(buf) == zlib.crc32(data)


def test_mmap(twin, tmp_path: Path) -> None:
    crc = twin("crc")
    path = tmp_path / "blob"
    path.write_bytes(DATA)
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
        assert crc.crc32c(m) == package_value(DATA)
        assert crc.crc32(m) == zlib.crc32(DATA)


def test_non_contiguous_buffers_are_read_in_c_order(pair) -> None:
    cy, py = pair("crc")
    data = DATA[:512]
    strided = memoryview(data)[::2]
    transposed = np.frombuffer(data, dtype=np.uint8).reshape(16, 32).T
    for buf, flat in ((strided, data[::2]), (transposed, transposed.tobytes())):
        for m in (cy, py):
            assert m.crc32c(buf) == package_value(flat)
            assert m.crc32(buf) == zlib.crc32(flat)


@pytest.mark.parametrize("bad", ["text", None, 1.5, [1, 2]])
def test_not_a_buffer_same_error(pair, bad: object) -> None:
    for fn in ("crc32c", "crc32"):
        errors = []
        for m in pair("crc"):
            with pytest.raises(TypeError) as info:
                getattr(m, fn)(bad)
            errors.append(str(info.value))
        assert errors[0] == errors[1] == f"a bytes-like object is required, not {type(bad).__name__!r}"


def test_value_argument(pair) -> None:
    for m in pair("crc"):
        base = m.crc32c(b"abc")
        assert m.crc32c(b"def", base) == m.crc32c(b"abcdef")
        assert m.crc32c(b"def", base + (5 << 32)) == m.crc32c(b"abcdef")  # taken mod 2**32
        assert m.crc32c(b"def", np.uint32(base)) == m.crc32c(b"abcdef")
        assert m.crc32(b"x", -1) == zlib.crc32(b"x", 0xFFFFFFFF)
        assert m.crc32c(b"x", value=-1) == m.crc32c(b"x", 0xFFFFFFFF)
    messages = set()
    for m in pair("crc"):
        for fn in (m.crc32c, m.crc32):
            with pytest.raises(TypeError) as info:
                fn(b"x", 1.0)
            messages.add(str(info.value))
    assert len(messages) == 1


PY = _impl.twin("crc", "python")
CY = PY if NO_EXT else _impl.twin("crc", "cython")


@given(st.binary(max_size=2000), st.integers(0, 2**32 - 1), st.integers(0, 7))
def test_differential(data: bytes, value: int, off: int) -> None:
    cy, py = CY, PY
    view = memoryview(bytearray(b"\0" * off + data))[off:]
    got = cy.crc32c(view, value)
    assert got == py.crc32c(data, value) == cy._crc32c_table(data, value)
    assert got == crc32c_package.crc32c(data, value) == PY._crc32c_table(data, value)
    assert cy.crc32(view, value) == py.crc32(data, value) == zlib.crc32(data, value)


def test_backend_names() -> None:
    py = _impl.twin("crc", "python")
    assert py.CRC32C_BACKEND in ("crc32c-package (hardware)", "crc32c-package (software)")
    if NO_EXT:
        return
    cy = _impl.twin("crc", "cython")
    assert cy.CRC32C_BACKEND in ("sse4.2", "armv8-crc", "table")
    machine = os.uname().machine if hasattr(os, "uname") else ""
    if machine in ("x86_64", "AMD64") and Path("/proc/cpuinfo").exists():
        has = " sse4_2" in Path("/proc/cpuinfo").read_text()
        assert cy.CRC32C_BACKEND == ("sse4.2" if has else "table")
    assert "crc32c_update" in cy.__pyx_capi__  # cimportable by other compiled modules


def _run(code: str, **env: str) -> str:
    """Run code in a fresh interpreter that imports the same kcodec as this process (an
    in-place build or an installed wheel), not whatever the current directory holds."""
    import kcodec

    full = dict(os.environ, **env)
    if "KCODEC_NO_EXTENSIONS" not in env:
        full.pop("KCODEC_NO_EXTENSIONS", None)
    site = str(Path(kcodec.__file__).resolve().parent.parent)
    full["PYTHONPATH"] = os.pathsep.join(p for p in (site, full.get("PYTHONPATH")) if p)
    out = subprocess.run([sys.executable, "-c", code], cwd=Path(kcodec.__file__).anchor,
                         env=full, check=True, capture_output=True, text=True)
    return out.stdout.strip()


PROBE = (
    "import kcodec, kcodec.crc as c, crc32c, random;"
    "d = random.Random(5).randbytes(100003);"
    "ok = all(c.crc32c(d[i:i+n]) == crc32c.crc32c(d[i:i+n])"
    " for i in range(4) for n in (0, 1, 7, 8, 100, 777, 30000, 99990));"
    "print(kcodec.IMPLEMENTATION, c.CRC32C_BACKEND, ok, c.crc32c(d))"
)


@pytest.mark.skipif(NO_EXT, reason="pure-only run: the compiled twin is not under test")
def test_forced_table_backend_compiled() -> None:
    forced = _run(PROBE, KCODEC_CRC32C_FORCE_TABLE="1").split()
    normal = _run(PROBE, KCODEC_CRC32C_FORCE_TABLE="0").split()
    assert forced[:3] == ["cython", "table", "True"]
    assert normal[0] == "cython" and normal[-2:] == ["True", forced[-1]]


def test_forced_table_backend_pure() -> None:
    forced = _run(PROBE, KCODEC_CRC32C_FORCE_TABLE="1", KCODEC_NO_EXTENSIONS="1").split()
    assert forced[:3] == ["python", "python-table", "True"]


def test_c_code_standalone(tmp_path: Path) -> None:
    """The C file on its own, with the checker also used under qemu for other CPUs."""
    cc = (sysconfig.get_config_var("CC") or "cc").split()[0]
    if shutil.which(cc) is None:
        cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if cc is None:
        pytest.skip("no C compiler on PATH")
    exe = tmp_path / "crc32c_check"
    subprocess.run([cc, "-O2", "-std=c99", f"-I{ROOT / 'src_c'}",
                    str(ROOT / "tests/c/crc32c_check.c"), str(ROOT / "src_c/crc32c.c"),
                    "-o", str(exe)], check=True)
    out = subprocess.run([str(exe)], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout
    assert out.stdout.strip().endswith("ok")
