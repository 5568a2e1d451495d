"""Make aiokafka build and read every record with kcodec.

    import kcodec.compat.aiokafka
    kcodec.compat.aiokafka.install()         # before creating consumers and producers

``install()`` rebinds aiokafka's record classes (``MemoryRecords``, ``DefaultRecordBatch``,
``LegacyRecordBatch``, their builders) and its varint and CRC helpers, in
``aiokafka.record.*`` and in the fetcher, producer and accumulator modules that imported
them, whether aiokafka picked its Cython ``_crecords`` or its Python classes
(``AIOKAFKA_NO_EXTENSIONS``); ``uninstall()`` puts them back. Supported: aiokafka 0.14.x;
another version is refused with ImportError before anything is patched.
"""

from __future__ import annotations

import importlib
from typing import Any

from kcodec.compat._core import (
    Patch,
    helpers,
    make_classes,
    make_memory_records,
    version_tuple,
)

__all__ = ["SUPPORTED", "install", "uninstall", "installed"]

SUPPORTED = ">=0.14,<0.15"
_MIN, _MAX = (0, 14), (0, 15)

_patch: Patch | None = None


class DefaultRecordMetadata:
    """What aiokafka's v2 builder's ``append`` returns."""

    __slots__ = ("offset", "size", "timestamp")

    crc = None

    def __init__(self, offset: int, size: int, timestamp: int) -> None:
        self.offset = offset
        self.size = size
        self.timestamp = timestamp

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, DefaultRecordMetadata):
            return NotImplemented
        return (self.offset, self.size, self.timestamp) == (other.offset, other.size,
                                                             other.timestamp)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return (f"DefaultRecordMetadata(offset={self.offset!r}, size={self.size!r}, "
                f"timestamp={self.timestamp!r})")


class LegacyRecordMetadata:
    """What aiokafka's legacy builder's ``append`` returns."""

    __slots__ = ("offset", "crc", "size", "timestamp")

    def __init__(self, offset: int, crc: int, size: int, timestamp: int) -> None:
        self.offset = offset
        self.crc = crc
        self.size = size
        self.timestamp = timestamp

    def __repr__(self) -> str:
        return (f"LegacyRecordMetadata(offset={self.offset!r}, crc={self.crc!r},"
                f" size={self.size!r}, timestamp={self.timestamp!r})")


def installed() -> bool:
    """Whether aiokafka currently uses kcodec."""
    return _patch is not None


def _check_version() -> Any:
    try:
        import aiokafka
    except ImportError as exc:
        raise ImportError("kcodec.compat.aiokafka needs aiokafka "
                          "(pip install 'kcodec[compat]')") from exc
    version = getattr(aiokafka, "__version__", "0")
    if not _MIN <= version_tuple(version)[:2] < _MAX:
        raise ImportError(f"kcodec.compat.aiokafka supports aiokafka {SUPPORTED}, "
                          f"not {version}: nothing was patched")
    return aiokafka


def install() -> None:
    """Make aiokafka use kcodec for its records, CRCs and varints (idempotent)."""
    global _patch
    if _patch is not None:
        return
    _check_version()
    from aiokafka import errors
    from aiokafka.record import default_records as dr
    from aiokafka.record import legacy_records as lr

    mods = [importlib.import_module(name) for name in (
        "aiokafka.record", "aiokafka.record.util", "aiokafka.record.default_records",
        "aiokafka.record.legacy_records", "aiokafka.record.memory_records",
        "aiokafka.consumer.fetcher", "aiokafka.producer.producer",
        "aiokafka.producer.message_accumulator")]
    base = dr._DefaultRecordBatchPy.__new__(dr._DefaultRecordBatchPy)

    def has_codec(codec: int, magic: int) -> None:
        if magic == 0 and codec == 3:
            raise errors.UnsupportedCodecError(
                "LZ4 is not supported for broker version 0.8/0.9")
        base._assert_has_codec(codec)

    classes = make_classes(
        "aiokafka", corrupt=errors.CorruptRecordException,
        stock_default_batch=dr._DefaultRecordBatchPy,
        stock_legacy_batch=lr._LegacyRecordBatchPy,
        stock_default_builder=dr._DefaultRecordBatchBuilderPy,
        stock_legacy_builder=lr._LegacyRecordBatchBuilderPy,
        default_metadata=DefaultRecordMetadata, legacy_metadata=LegacyRecordMetadata,
        control_record=None, leader_epoch=-1, has_codec=has_codec)
    classes["MemoryRecords"] = make_memory_records(
        "aiokafka", errors.CorruptRecordException, classes["DefaultRecordBatch"],
        classes["LegacyRecordBatch"])
    classes["DefaultRecordMetadata"] = DefaultRecordMetadata
    classes["LegacyRecordMetadata"] = LegacyRecordMetadata
    p = Patch()
    names = ("MemoryRecords", "DefaultRecordBatch", "LegacyRecordBatch",
             "DefaultRecordBatchBuilder", "LegacyRecordBatchBuilder", "DefaultRecordMetadata",
             "LegacyRecordMetadata")
    fns = helpers()
    for mod in mods:
        for name in names:
            if name in vars(mod):
                p.set(mod, name, classes[name])
        for name, fn in fns.items():
            if name in vars(mod):
                p.set(mod, name, fn)
    _patch = p


def uninstall() -> None:
    """Give aiokafka its own record classes and helpers back."""
    global _patch
    if _patch is not None:
        _patch.undo()
        _patch = None
