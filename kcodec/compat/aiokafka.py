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
from functools import partial
from operator import itemgetter
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


class DefaultRecordMetadata(tuple):
    """What aiokafka's v2 builder's ``append`` returns: ``offset``, ``size``, ``timestamp``
    (``crc`` None). A tuple made with ``tuple.__new__``, so making one costs no Python
    call per record."""

    __slots__ = ()

    offset = property(itemgetter(0))
    size = property(itemgetter(1))
    timestamp = property(itemgetter(2))
    crc = None

    def __repr__(self) -> str:
        return (f"DefaultRecordMetadata(offset={self[0]!r}, size={self[1]!r}, "
                f"timestamp={self[2]!r})")


class LegacyRecordMetadata(tuple):
    """What aiokafka's legacy builder's ``append`` returns."""

    __slots__ = ()

    offset = property(itemgetter(0))
    crc = property(itemgetter(1))
    size = property(itemgetter(2))
    timestamp = property(itemgetter(3))

    def __repr__(self) -> str:
        return (f"LegacyRecordMetadata(offset={self[0]!r}, crc={self[1]!r},"
                f" size={self[2]!r}, timestamp={self[3]!r})")


# Made from a (offset, size, timestamp) / (offset, crc, size, timestamp) tuple in C.
_default_metadata = partial(tuple.__new__, DefaultRecordMetadata)
_legacy_metadata = partial(tuple.__new__, LegacyRecordMetadata)


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
        default_metadata=_default_metadata, legacy_metadata=_legacy_metadata,
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
