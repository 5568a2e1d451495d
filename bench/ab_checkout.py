"""A/B of the record twins: another checkout's build against this one, interleaved in one
process (round by round, the order alternating), so that load from other work on a shared
machine falls on both sides alike. For measuring a change to the hot paths before and after.

    git -C . archive main | tar -x -C /tmp/base && (cd /tmp/base && python setup.py build_ext --inplace)
    python -m bench.ab_checkout /tmp/base [ROUNDS] [-k SUBSTRING]

Prints, per workload, the median time of each side and new/base (of the medians and of the
minimums); below 1: this checkout is faster. Identical builds on both sides give 0.98-1.02.

The other checkout's modules are loaded from its files under other names: its compiled
``columns`` and ``batch`` (and ``builder`` when it has one) and its pure ``batch``. What
they import by name at run time (faces, helper modules, shared cimported helpers such as
kcodec._cy._reader's Buf) resolves to this checkout, which is what makes the comparison one
of those modules' own code. Workloads: the 1,000 R-* records of workloads.md as one v2
batch (uncompressed, lz4 and zstd as a Java producer writes them), and the same records with
nulls (a third of the keys, a fifth of the values, a third of the header values) and a
quarter without headers.
"""

from __future__ import annotations

import gc
import glob
import importlib.util
import statistics
import sys
import time
from collections.abc import Callable
from types import ModuleType
from typing import Any

from bench.test_bench_columns import BATCHES
from bench.test_bench_records import RECORDS, _touch
from kcodec import _impl


def _load(base: str, package: str, name: str) -> ModuleType | None:
    pattern = (f"{base}/kcodec/{package}/{name}.cpython-*.so" if package == "_cy"
               else f"{base}/kcodec/{package}/{name}.py")
    found = glob.glob(pattern)
    if not found:
        return None
    spec = importlib.util.spec_from_file_location(f"kbase.{package}.{name}", found[0])
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _builder(mod_builder: ModuleType | None, mod_batch: ModuleType) -> Any:
    return (mod_builder or mod_batch).RecordBatchBuilder


def _with_nulls() -> bytes:
    b = _impl.twin("builder", "python").RecordBatchBuilder(max_size=1 << 24)
    for i, r in enumerate(RECORDS):
        headers = [] if i % 4 == 0 else [(k, None if (i + j) % 3 == 0 else v)
                                         for j, (k, v) in enumerate(r.headers)]
        b.append(None if i % 3 == 0 else r.key, None if i % 5 == 0 else r.value, headers,
                 r.timestamp)
    return b.build()


def _decode(iter_batches: Any, data: bytes, validate: bool = False) -> Callable[[], None]:
    def run() -> None:
        for batch in iter_batches(data, validate_crc=validate):
            _touch(batch)
    return run


def _build(cls: Any, codec: int = 0) -> Callable[[], None]:
    def run() -> None:
        b = cls(compression=codec)
        append = b.append
        for r in RECORDS:
            append(r.key, r.value, r.headers, r.timestamp)
        b.build()
    return run


def workloads(base: str) -> list[tuple[str, Callable[[], Any], Callable[[], Any]]]:
    """(name, base side, this side) of every workload."""
    cy_cols, cy_batch = _load(base, "_cy", "columns"), _load(base, "_cy", "batch")
    cy_builder, py_batch = _load(base, "_cy", "builder"), _load(base, "_py", "batch")
    py_builder = _load(base, "_py", "builder")
    if cy_cols is None or cy_batch is None or py_batch is None:
        raise SystemExit(f"{base}: no compiled build there (run setup.py build_ext --inplace)")
    new = {m: _impl.twin(m, "cython") for m in ("columns", "batch", "builder")}
    new_py = {m: _impl.twin(m, "python") for m in ("batch", "builder")}
    data = dict(BATCHES, nulls=_with_nulls())
    out: list[tuple[str, Callable[[], Any], Callable[[], Any]]] = []
    for codec in ("none", "lz4", "zstd", "nulls"):
        blob = data[codec]
        out.append((f"cy columns {codec}", lambda b=blob: cy_cols.decode_columns(b),
                    lambda b=blob: new["columns"].decode_columns(b)))
        out.append((f"cy decode {codec}", _decode(cy_batch.iter_batches, blob),
                    _decode(new["batch"].iter_batches, blob)))
    out.append(("cy decode-crc none", _decode(cy_batch.iter_batches, data["none"], True),
                _decode(new["batch"].iter_batches, data["none"], True)))
    for name, codec in (("none", 0), ("lz4", 3), ("zstd", 4)):
        out.append((f"cy build {name}", _build(_builder(cy_builder, cy_batch), codec),
                    _build(new["builder"].RecordBatchBuilder, codec)))
    out.append(("py decode none", _decode(py_batch.iter_batches, data["none"]),
                _decode(new_py["batch"].iter_batches, data["none"])))
    out.append(("py decode lz4", _decode(py_batch.iter_batches, data["lz4"]),
                _decode(new_py["batch"].iter_batches, data["lz4"])))
    out.append(("py build none", _build(_builder(py_builder, py_batch)),
                _build(new_py["builder"].RecordBatchBuilder)))
    return out


def main(argv: list[str]) -> int:
    pick = ""
    if "-k" in argv:
        pick = argv[argv.index("-k") + 1]
        argv = [a for i, a in enumerate(argv) if a != "-k" and (i == 0 or argv[i - 1] != "-k")]
    if len(argv) < 2:
        print(__doc__)
        return 2
    base = argv[1]
    rounds = int(argv[2]) if len(argv) > 2 else 300
    gc.disable()
    for name, a, b in workloads(base):
        if pick not in name:
            continue
        n = max(rounds // 5, 15) if name.startswith("py") else rounds
        ta: list[float] = []
        tb: list[float] = []
        a()
        b()
        for i in range(n):
            for f, out in ((a, ta), (b, tb)) if i % 2 == 0 else ((b, tb), (a, ta)):
                t0 = time.perf_counter()
                f()
                out.append(time.perf_counter() - t0)
        ma, mb = statistics.median(ta), statistics.median(tb)
        print(f"{name:20s} base {ma * 1e6:9.1f} us  new {mb * 1e6:9.1f} us  "
              f"new/base {mb / ma:5.3f} (min {min(tb) / min(ta):5.3f})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
