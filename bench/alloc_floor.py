"""How fast can a decoder that keeps every record be? The floor: making just the objects a
kept record holds (key and value bytes, a headers list of (str, bytes) pairs, the record, and
kcodec's offset and timestamp ints), from the same bytes, with no parsing and no checks,
timed against kcodec's and aiokafka's real decoders keeping every record, round by round.

    python -m bench.alloc_floor [ROUNDS]

Compiles bench/_alloc_floor.pyx at run time (Cython and a C compiler, as for kcodec's own
build). Workload R, no compression, the cyclic GC off; the kept list is dropped outside the
timed call (its deallocation, the same work again, would only lower every ratio). Prints
medians (µs per batch) and the best "keep every record" ratio against aiokafka that a
decoder making these objects could reach: with the ints stored (kcodec), and with them made
when read (aiokafka), where the touch pays for them instead.
"""

from __future__ import annotations

import gc
import importlib
import os
import struct
import sys
import sysconfig
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from aiokafka.record import default_records as aio

from bench.conftest import twin
from bench.test_bench_records import _input_v2, _touch


def _floor_module() -> Any:
    """bench/_alloc_floor.pyx built in a cache directory (rebuilt when the .pyx changes)."""
    from Cython.Build import cythonize
    from setuptools import Distribution, Extension

    src = Path(__file__).with_name("_alloc_floor.pyx")
    tag = f"{int(src.stat().st_mtime)}-{sysconfig.get_config_var('SOABI')}"
    out = Path(tempfile.gettempdir()) / f"kcodec-bench-alloc-floor-{tag}"
    out.mkdir(exist_ok=True)
    if not any(out.glob("_alloc_floor*.so")) and not any(out.glob("_alloc_floor*.pyd")):
        pyx = out / "_alloc_floor.pyx"
        pyx.write_bytes(src.read_bytes())
        ext = Extension("_alloc_floor", [str(pyx)], extra_compile_args=["-O3"]
                        if os.name != "nt" else [])
        dist = Distribution({"ext_modules": cythonize([ext], quiet=True,
                                                      build_dir=str(out))})
        cmd = dist.get_command_obj("build_ext")
        cmd.build_lib = str(out)
        cmd.build_temp = str(out / "tmp")
        cmd.ensure_finalized()
        cmd.run()
    sys.path.insert(0, str(out))
    try:
        return importlib.import_module("_alloc_floor")
    finally:
        sys.path.remove(str(out))


def _zigzag(data: bytes, pos: int) -> tuple[int, int]:
    shift = value = 0
    while True:
        b = data[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return (value >> 1) ^ -(value & 1), pos
        shift += 7


def _span(batch: bytes, pos: int, out: list[int]) -> int:
    """Append (at, length) of the length-prefixed field at pos; returns the position after it
    (the workload has no null fields)."""
    n, pos = _zigzag(batch, pos)
    out += [pos, n]
    return pos + n


def _spans(batch: bytes) -> tuple[int, bytes]:
    """(record count, the int32 spans _alloc_floor.make reads) of an uncompressed v2 batch."""
    count = struct.unpack_from(">i", batch, 57)[0]
    pos = 61
    out: list[int] = []
    for _ in range(count):
        _, pos = _zigzag(batch, pos)           # record length
        pos += 1                               # attributes
        _, pos = _zigzag(batch, pos)           # timestamp delta
        _, pos = _zigzag(batch, pos)           # offset delta
        pos = _span(batch, pos, out)           # key
        pos = _span(batch, pos, out)           # value
        hc, pos = _zigzag(batch, pos)
        out.append(hc)
        for _ in range(hc):
            pos = _span(batch, pos, out)       # header key
            pos = _span(batch, pos, out)       # header value
    return count, struct.pack(f"={len(out)}i", *out)


def main(argv: list[str]) -> int:
    rounds = int(argv[0]) if argv else 300
    floor = _floor_module()
    data = _input_v2("none")
    count, spans = _spans(data)
    iter_batches = twin("batch", "cython").iter_batches
    kept: list[Any] = [None]

    def kcodec_list() -> None:
        for batch in iter_batches(data, validate_crc=False):
            kept[0] = list(batch)

    def kcodec_keep() -> None:
        for batch in iter_batches(data, validate_crc=False):
            kept[0] = records = list(batch)
            _touch(records)

    def aio_list() -> None:
        kept[0] = list(aio.DefaultRecordBatch(data))

    def aio_keep() -> None:
        kept[0] = records = list(aio.DefaultRecordBatch(data))
        _touch(records)

    def floor_ints() -> None:
        kept[0] = floor.make(count, spans, data, True)

    def floor_no_ints() -> None:
        kept[0] = floor.make(count, spans, data, False)

    # Reading offset and timestamp: kcodec's stored ints against ints made on access.
    kc_records = [list(b) for b in iter_batches(data, validate_crc=False)][0]
    lazy_records = floor.lazy(count)

    def ints_stored() -> None:
        for r in kc_records:
            r.offset  # noqa: B018
            r.timestamp  # noqa: B018

    def ints_on_access() -> None:
        for r in lazy_records:
            r.offset  # noqa: B018
            r.timestamp  # noqa: B018

    sides: list[tuple[str, Callable[[], None]]] = [
        ("kcodec: list(batch)", kcodec_list), ("kcodec: keep + touch", kcodec_keep),
        ("aiokafka: list(batch)", aio_list), ("aiokafka: keep + touch", aio_keep),
        ("floor: kcodec's objects", floor_ints),
        ("floor: without the 2 ints", floor_no_ints),
        ("read 2 stored ints", ints_stored), ("read 2 ints made on access", ints_on_access)]
    times: dict[str, list[float]] = {name: [] for name, _ in sides}
    gc.disable()
    for i in range(rounds):
        order = sides if i % 2 else sides[::-1]
        for name, fn in order:
            t0 = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t0)
            kept[0] = None
    med = {name: sorted(t)[rounds // 2] * 1e6 for name, t in times.items()}
    for name, _ in sides:
        print(f"{name:28} {med[name]:8.1f} us")
    touch = med["kcodec: keep + touch"] - med["kcodec: list(batch)"]
    aio_total = med["aiokafka: keep + touch"]
    print(f"kcodec keep ratio today: {aio_total / med['kcodec: keep + touch']:.2f}x aiokafka")
    print(f"best ratio with kcodec's objects (floor + kcodec's touch {touch:.1f} us): "
          f"{aio_total / (med['floor: kcodec' + chr(39) + 's objects'] + touch):.2f}x")
    lazy_touch = touch + med["read 2 ints made on access"] - med["read 2 stored ints"]
    print(f"best ratio with ints made on access, as aiokafka does (floor without them + "
          f"a touch that makes them, {lazy_touch:.1f} us): "
          f"{aio_total / (med['floor: without the 2 ints'] + lazy_touch):.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
