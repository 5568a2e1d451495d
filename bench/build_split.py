"""Where the compressed cells' time goes: R-build zstd and L-decode lz4 split into record
encoding (or decoding), the compression library call alone, and the rest (copies,
concatenation, objects), for kcodec's compiled twin and each peer, every row timed in the
same rounds (interleaved, the cyclic GC off), so load from other work falls on all alike.

    python -m bench.build_split [ROUNDS]

Rows (1,000 R-* records, the records section 150,872 bytes):
  zstd, level 3 for everyone:
    libzstd alone           ZSTD_compress2 on the records section with a reused context
                            (the library kcodec's compiled builder now calls from C)
    zstandard alone         zstandard.ZstdCompressor(level=3).compress, reused compressor
                            (kcodec's pure twin; kafka-python's library)
    zstandard, new context  a new ZstdCompressor per call, as kafka-python's zstd_encode does
    cramjam alone           cramjam.zstd.compress(data, 3), as aiokafka's zstd_encode does
    <side> build none/zstd  the whole build through each side's own API, uncompressed and zstd
  lz4, the legacy (magic 1) wrapper's 88 KB frame of 64 KiB blocks:
    lz4.frame / cramjam     the frame libraries alone (the pure twin's; aiokafka's)
    kcodec lz4 from C alone the compiled fast path alone (what the legacy decoder calls)
    kcodec lz4 decompress   kcodec.compression.decompress of the same frame (Python dispatch)
    <side> L-decode lz4     the whole L-decode lz4 cell

Then, per side: rest = total - encoding - compression alone, and for the zstd cells the
best ratio any builder could reach against the peer at equal level and output: the peer's
total divided by the compression call alone (a builder that cost nothing).
"""

from __future__ import annotations

import gc
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import cramjam
import lz4.frame
import zstandard

import kcodec.compat.aiokafka as aio_adapter
import kcodec.compat.kafka_python as kp_adapter
from bench.conftest import twin
from bench.test_bench_compat import _aio_build, _kp_build
from bench.test_bench_records import BUILDERS, L_DECODERS, RECORDS, _input_legacy
from kcodec import compression


def _section() -> bytes:
    b = twin("builder", "cython").RecordBatchBuilder()
    for r in RECORDS:
        b.append(r.key, r.value, r.headers, r.timestamp)
    return b.build()[61:]


def _wrapper_value(data: bytes) -> memoryview:
    """The value of the one magic-1 wrapper message of ``data`` (its null key: -1)."""
    assert int.from_bytes(data[26:30], "big", signed=True) == -1
    size = int.from_bytes(data[30:34], "big")
    return memoryview(data)[34 : 34 + size]


def rows() -> dict[str, Callable[[], Any]]:
    sec = _section()
    zc = zstandard.ZstdCompressor(level=3)
    from kcodec._cy import _lz4

    legacy = _input_legacy("lz4")
    frame = _wrapper_value(legacy)
    kc_l = L_DECODERS["kcodec cython"]()
    aio_l = L_DECODERS["aiokafka C"]()

    out: dict[str, Callable[[], Any]] = {
        "zstandard alone": lambda: zc.compress(sec),
        "zstandard, new context": lambda: zstandard.ZstdCompressor(level=3).compress(sec),
        "cramjam alone": lambda: cramjam.zstd.compress(sec, 3),
        "kcodec build none": BUILDERS["kcodec cython"]("none"),
        "kcodec build zstd": BUILDERS["kcodec cython"]("zstd"),
        "aiokafka C build none": BUILDERS["aiokafka C"]("none"),
        "aiokafka C build zstd": BUILDERS["aiokafka C"]("zstd"),
        "kafka-python build none": lambda: _kp_build(0),
        "kafka-python build zstd": lambda: _kp_build(4),
        "lz4.frame alone": lambda: lz4.frame.decompress(frame),
        "cramjam lz4 alone": lambda: cramjam.lz4.decompress(frame),
        "kcodec lz4 from C alone": lambda: _lz4.decompress(frame, 1 << 26, 1),
        "kcodec lz4 decompress": lambda: compression.decompress(3, frame, magic=1),
        "kcodec L-decode lz4": lambda: kc_l(legacy),
        "aiokafka C L-decode lz4": lambda: aio_l(legacy),
    }
    out["libzstd alone"] = _libzstd(sec)
    _check(sec, zc)
    return out


def adapted_rows() -> dict[str, Callable[[], Any]]:
    """Rows timed with both adapters installed (installed and removed around them in each
    round, outside the timing)."""
    aio_adapter.install()
    try:
        aio0, aio4 = _aio_build(0), _aio_build(4)   # they bind the patched builder class
    finally:
        aio_adapter.uninstall()
    return {
        "aiokafka+kcodec build none": aio0,
        "aiokafka+kcodec build zstd": aio4,
        "kafka-python+kcodec build none": lambda: _kp_build(0),
        "kafka-python+kcodec build zstd": lambda: _kp_build(4),
    }


def _libzstd(sec: bytes) -> Callable[[], Any]:
    """ZSTD_compress2 from C on ``sec`` into a reused buffer (through the compiled builder's
    own entry, timed without a builder around it)."""
    import ctypes

    from zstandard import _cffi

    ffi, lib = _cffi.ffi, _cffi.lib

    def fn(name: str, restype: Any, *args: Any) -> Any:
        address = int(ffi.cast("uintptr_t", ffi.addressof(lib, name)))
        return ctypes.CFUNCTYPE(restype, *args)(address)

    vp, sz = ctypes.c_void_p, ctypes.c_size_t
    cctx = fn("ZSTD_createCCtx", vp)()
    fn("ZSTD_CCtx_setParameter", sz, vp, ctypes.c_int, ctypes.c_int)(cctx, 100, 3)
    compress2 = fn("ZSTD_compress2", sz, vp, ctypes.c_char_p, sz, ctypes.c_char_p, sz)
    buf = ctypes.create_string_buffer(len(sec) + 4096)
    return lambda: compress2(cctx, buf, len(buf), sec, len(sec))


def _check(sec: bytes, zc: Any) -> None:
    """Equal work: the same frame from every library, the same batch size from every side."""
    frame = zc.compress(sec)
    assert bytes(cramjam.zstd.compress(sec, 3)) == frame
    assert zstandard.ZstdCompressor().compress(sec) == frame
    kc = BUILDERS["kcodec cython"]("zstd")()
    aio = BUILDERS["aiokafka C"]("zstd")()
    assert kc[61:] == frame and len(kc) == len(aio)
    print(f"records section {len(sec):,} B; zstd 3 frame {len(frame):,} B from zstandard, "
          f"cramjam and libzstd alike; batch {len(kc):,} B (kcodec) / {len(aio):,} B "
          "(aiokafka)")


def main(argv: list[str]) -> int:
    rounds = int(argv[1]) if len(argv) > 1 else 100
    stock, adapted = rows(), adapted_rows()
    table = {**stock, **adapted}
    times: dict[str, list[float]] = {k: [] for k in table}

    def run(group: dict[str, Callable[[], Any]]) -> None:
        for name, f in group.items():
            t0 = time.perf_counter()
            f()
            times[name].append(time.perf_counter() - t0)

    gc.collect()
    gc.disable()
    try:
        for _ in range(rounds):
            run(stock)
            kp_adapter.install()
            aio_adapter.install()
            try:
                run(adapted)
            finally:
                kp_adapter.uninstall()
                aio_adapter.uninstall()
    finally:
        gc.enable()
    med = {k: statistics.median(v) * 1e6 for k, v in times.items()}
    low = {k: min(v) * 1e6 for k, v in times.items()}
    print(f"{rounds} interleaved rounds, GC off; µs per 1,000 records, median (minimum)")
    for k in table:
        print(f"  {k:32s} {med[k]:8.0f} ({low[k]:7.0f})")

    def split(side: str, compress: str) -> None:
        enc, tot, c = (low[f"{side} build none"], low[f"{side} build zstd"], low[compress])
        print(f"  {side:30s} encode {enc:6.0f}  compress {c:6.0f} ({compress})  "
              f"rest {tot - enc - c:+6.0f}  total {tot:6.0f}")

    print("R-build zstd split (minimums):")
    split("kcodec", "libzstd alone")
    split("aiokafka C", "cramjam alone")
    split("aiokafka+kcodec", "libzstd alone")
    split("kafka-python", "zstandard, new context")
    split("kafka-python+kcodec", "libzstd alone")
    c, cl = med["libzstd alone"], low["libzstd alone"]
    for peer, ours in (("aiokafka C", "kcodec"), ("aiokafka C", "aiokafka+kcodec"),
                       ("kafka-python", "kafka-python+kcodec")):
        p, k = med[f"{peer} build zstd"], med[f"{ours} build zstd"]
        pl = low[f"{peer} build zstd"]
        print(f"  {ours} vs {peer}: {p / k:.2f}x (minimums {pl / low[f'{ours} build zstd']:.2f}x);"
              f" best possible = peer / compression alone = {p / c:.2f}x (minimums "
              f"{pl:.0f} / {cl:.0f} = {pl / cl:.2f}x)")
    print("L-decode lz4 split (minimums): the frame library call, and the rest (parsing the "
          "wrapper and its 1,000 inner messages, the record objects)")
    for side, lib in (("kcodec", "kcodec lz4 from C alone"), ("aiokafka C", "cramjam lz4 alone")):
        tot, d = low[f"{side} L-decode lz4"], low[lib]
        print(f"  {side:30s} decompress {d:6.0f} ({lib})  rest {tot - d:6.0f}  total {tot:6.0f}")
    print(f"  kcodec vs aiokafka C: {med['aiokafka C L-decode lz4'] / med['kcodec L-decode lz4']:.2f}x"
          f" (minimums {low['aiokafka C L-decode lz4'] / low['kcodec L-decode lz4']:.2f}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
