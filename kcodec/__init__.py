"""kcodec: a fast, correct Apache Kafka wire codec.

``kcodec.IMPLEMENTATION`` is ``"cython"`` when the compiled twins are in use and
``"python"`` when the pure-Python twins are (``KCODEC_NO_EXTENSIONS=1``, or no build).

The choice (``kcodec._impl``, which loads every compiled twin) is made when a module that
needs it is first imported, or ``IMPLEMENTATION`` is first read: ``import kcodec`` alone
stays cheap, so ``kcodec --version`` starts at once. With ``KCODEC_REQUIRE_EXTENSIONS`` set
it is made here, so that a missing build fails the import.

    errors.py       the one exception hierarchy
    varint.py       Kafka varints: the public face
    crc.py          CRC-32C and CRC-32: the public face
    murmur.py       murmur2 and the partition it gives a key: the public face
    compression.py  every compression codec behind one registry, with bounded decompression
    xerial.py       snappy as Kafka uses it: xerial framing and raw snappy blocks
    _impl.py        decides once which twin serves every hot module
    _limits.py      limits shared by the compression registry and both xerial twins
    _columnar.py    the result containers of the columnar decode, shared by both twins
    _moved.py       old module paths kept importable, with a DeprecationWarning
    _gc.py          the cyclic GC set up for kcodec's own long-running processes
    _version.py     the version number
    __main__.py     ``python -m kcodec``: the command line (``--version`` at once)
    _codecs/        one small module per compression codec
    _py/            the pure-Python twins of the hot modules (the typed reference)
    _cy/            the Cython twins of the hot modules (``.pyx``)
    records/        record formats: RecordBatch v2, MessageSet v0/v1, columns, log segments
    protocol/       every Kafka request and response at every version, headers, framing
    sasl/           SASL pieces the client and the broker share
    observe/        metrics, debug logging, Prometheus, tracing, client telemetry
    client/         the thin client: sans-I/O connection core, asyncio I/O, blocking facade
    broker/         a single-process Kafka broker for development, tests, CI and demos
    runtime/        ``kcodec run``: a multi-process consumer runtime
    spark/          Spark's Kafka source and sink, and a log-segment source, in PySpark
    compat/         adapters that make kafka-python and aiokafka use kcodec's records
    cli/            the ``kcodec`` command line
    testing/        brokers for tests: pytest fixtures and harnesses for outside brokers
"""

from __future__ import annotations

import os as _os
from typing import Any

from kcodec._version import __version__

__all__ = ["IMPLEMENTATION", "__version__", "errors"]


def __getattr__(name: str) -> Any:
    if name == "IMPLEMENTATION":
        from kcodec._impl import IMPLEMENTATION

        return IMPLEMENTATION
    if name == "errors":
        import kcodec.errors

        return kcodec.errors
    raise AttributeError(f"module 'kcodec' has no attribute {name!r}")


def _patch_from_env() -> None:
    """``KCODEC_PATCH=kafka_python,aiokafka``: install those adapters now (see kcodec.compat).
    A listed peer that is missing or of an unsupported version fails the import loudly."""
    names = [n for n in _os.environ.get("KCODEC_PATCH", "").replace(";", ",").split(",")
             if n.strip()]
    if names:
        from kcodec import compat

        compat.install(*names)


if _os.environ.get("KCODEC_REQUIRE_EXTENSIONS", "").strip().lower() not in (
        "", "0", "false", "no", "off"):
    import kcodec._impl  # noqa: F401  (fails the import when the build is missing)
_patch_from_env()
