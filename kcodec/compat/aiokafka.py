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
import struct
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
from kcodec.crc import crc32c
from kcodec.records import RecordBatchBuilder, RecordMetadata, estimate_batch_size, record_size

__all__ = ["SUPPORTED", "install", "uninstall", "installed"]

SUPPORTED = ">=0.14,<0.15"
_MIN, _MAX = (0, 14), (0, 15)

_patch: Patch | None = None


class DefaultRecordMetadata(RecordMetadata):  # type: ignore[misc,valid-type]
    """What aiokafka's v2 builder's ``append`` returns: ``offset``, ``size``, ``timestamp``
    and ``crc`` (None). kcodec's builder makes it in C (its ``metadata_class``)."""

    __slots__ = ()

    @property
    def offset(self) -> int:
        return self.offset_delta

    def __repr__(self) -> str:
        return (f"DefaultRecordMetadata(offset={self.offset_delta!r}, size={self.size!r}, "
                f"timestamp={self.timestamp!r})")


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


# Made from a (offset, crc, size, timestamp) tuple in C.
_legacy_metadata = partial(tuple.__new__, LegacyRecordMetadata)


def _make_builder(stock: Any, has_codec: Any) -> type:
    """aiokafka's DefaultRecordBatchBuilder as a subclass of kcodec's builder: ``append`` is
    kcodec's own ``append_with_offset`` (no Python frame per record) returning
    DefaultRecordMetadata; wrong types raise kcodec's EncodeTypeError, a TypeError."""

    class DefaultRecordBatchBuilder(RecordBatchBuilder):  # type: ignore[misc,valid-type]
        def __init__(self, magic: int, compression_type: int, is_transactional: Any,
                     producer_id: int, producer_epoch: int, base_sequence: int,
                     batch_size: int) -> None:
            assert magic >= 2
            codec = compression_type & 0x07
            RecordBatchBuilder.__init__(
                self, compression=codec if codec <= 4 else 0, producer_id=producer_id,
                producer_epoch=producer_epoch, base_sequence=base_sequence,
                is_transactional=bool(is_transactional), partition_leader_epoch=-1,
                max_size=batch_size, compress_only_if_smaller=True,
                metadata_class=DefaultRecordMetadata)
            self._magic = magic
            self._kcodec = codec
            self._built: bytearray | None = None

        append = RecordBatchBuilder.append_with_offset

        def set_producer_state(self, producer_id: int, producer_epoch: int,
                               base_sequence: int) -> None:
            RecordBatchBuilder.set_producer_state(self, producer_id, producer_epoch,
                                                  base_sequence)

        def build(self) -> bytearray:  # type: ignore[override]
            if self._kcodec:
                has_codec(self._kcodec, 2)
            out = RecordBatchBuilder.build(self, as_bytearray=True)
            if not self.record_count:
                # An empty batch: aiokafka writes 0 for the last offset delta and both
                # timestamps where kcodec writes Java's -1.
                _EMPTY.pack_into(out, 23, 0, 0, 0)
                struct.pack_into(">I", out, 17, crc32c(memoryview(out)[21:]))
            self._built = out
            return out

        def size(self) -> int:  # type: ignore[override]
            built = self._built
            return RecordBatchBuilder.size.__get__(self) if built is None else len(built)

        def size_in_bytes(self, offset: int, timestamp: int, key: Any, value: Any,
                          headers: Any) -> int:
            first = self.first_timestamp
            return record_size(key, value, headers, offset,
                               0 if first is None else timestamp - first)

        @classmethod
        def size_of(cls, key: Any, value: Any, headers: Any) -> int:
            return stock.size_of(key, value, headers)

        @classmethod
        def estimate_size_in_bytes(cls, key: Any, value: Any, headers: Any) -> int:
            return estimate_batch_size(key, value, headers)

    for name, value in vars(stock.__mro__[1]).items():  # DefaultRecordBase's constants
        if name.isupper():
            setattr(DefaultRecordBatchBuilder, name, value)
    DefaultRecordBatchBuilder.MAX_RECORD_OVERHEAD = 21
    DefaultRecordBatchBuilder.__module__ = __name__
    return DefaultRecordBatchBuilder


_EMPTY = struct.Struct(">iqq")


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
        default_metadata=lambda t: DefaultRecordMetadata(t[0], t[2], t[1]),
        legacy_metadata=_legacy_metadata,
        control_record=None, leader_epoch=-1, has_codec=has_codec)
    classes["MemoryRecords"] = make_memory_records(
        "aiokafka", errors.CorruptRecordException, classes["DefaultRecordBatch"],
        classes["LegacyRecordBatch"])
    classes["DefaultRecordBatchBuilder"] = _make_builder(dr._DefaultRecordBatchBuilderPy,
                                                         has_codec)
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
