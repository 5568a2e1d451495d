"""Make kafka-python build and read every record with kcodec.

    import kcodec.compat.kafka_python
    kcodec.compat.kafka_python.install()     # before creating consumers and producers

``install()`` rebinds kafka-python's record classes (``DefaultRecordBatch``,
``LegacyRecordBatch``, their builders) and its varint and CRC helpers, in ``kafka.record.*``
and in the fetcher, producer and accumulator modules that imported them, to kcodec-backed
classes of the same shapes; ``uninstall()`` puts the originals back. Supported: kafka-python
3.0.x; another version is refused with ImportError before anything is patched.
"""

from __future__ import annotations

import importlib
from typing import Any

from kcodec.compat._core import (
    LegacyRecord,
    Patch,
    control_record_maker,
    helpers,
    make_classes,
    version_tuple,
    watched_record_classes,
)

__all__ = ["SUPPORTED", "install", "uninstall", "installed"]

SUPPORTED = ">=3.0,<3.1"
_MIN, _MAX = (3, 0), (3, 1)

_patch: Patch | None = None


def installed() -> bool:
    """Whether kafka-python currently uses kcodec."""
    return _patch is not None


def _check_version() -> Any:
    try:
        import kafka
    except ImportError as exc:
        raise ImportError("kcodec.compat.kafka_python needs kafka-python "
                          "(pip install 'kcodec[compat]')") from exc
    version = getattr(kafka, "__version__", "0")
    if not _MIN <= version_tuple(version)[:2] < _MAX:
        raise ImportError(f"kcodec.compat.kafka_python supports kafka-python {SUPPORTED}, "
                          f"not {version}: nothing was patched")
    return kafka


def install() -> None:
    """Make kafka-python use kcodec for its records, CRCs and varints (idempotent)."""
    global _patch
    if _patch is not None:
        return
    _check_version()
    from kafka import errors
    from kafka.record import default_records as dr
    from kafka.record import legacy_records as lr

    mods = {name: importlib.import_module(name) for name in (
        "kafka.record", "kafka.record.util", "kafka.record.default_records",
        "kafka.record.legacy_records", "kafka.record.memory_records",
        "kafka.consumer.fetcher", "kafka.producer.kafka", "kafka.producer.record_accumulator")}

    base = dr.DefaultRecordBase()

    def has_codec(codec: int, magic: int) -> None:
        base._assert_has_codec(codec)

    DefaultRecord, ControlRecord = watched_record_classes()
    classes = make_classes(
        "kafka_python", corrupt=errors.CorruptRecordError,
        stock_default_batch=dr.DefaultRecordBatch, stock_legacy_batch=lr.LegacyRecordBatch,
        stock_default_builder=dr.DefaultRecordBatchBuilder,
        stock_legacy_builder=lr.LegacyRecordBatchBuilder,
        default_metadata=lambda t: dr.DefaultRecordMetadata(*t),
        legacy_metadata=lambda t: lr.LegacyRecordMetadata(*t),
        control_record=control_record_maker(ControlRecord), record_class=DefaultRecord,
        leader_epoch=0, has_codec=has_codec)
    p = Patch()
    for mod in mods.values():
        for name in ("DefaultRecordBatch", "LegacyRecordBatch", "DefaultRecordBatchBuilder",
                     "LegacyRecordBatchBuilder"):
            if name in vars(mod):
                p.set(mod, name, classes[name])
        for name, fn in helpers().items():
            if name in vars(mod):
                p.set(mod, name, fn)
    # The record classes, patchable as the stock ones are: a test's
    # mock.patch.object(DefaultRecord, "validate_crc", ...) reaches the records it reads.
    p.set(dr, "DefaultRecord", DefaultRecord)
    p.set(dr, "ControlRecord", ControlRecord)
    p.set(lr, "LegacyRecord", LegacyRecord)
    _patch = p


def uninstall() -> None:
    """Give kafka-python its own record classes and helpers back."""
    global _patch
    if _patch is not None:
        _patch.undo()
        _patch = None
