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

from functools import partial
from operator import itemgetter
from typing import Any

from kcodec.compat._core import (
    Adapter,
    DefaultRecordMetadata,
    Patch,
    fix_empty_batch,
    has_codec_check,
    helpers,
    make_classes,
    make_memory_records,
    rebind,
)
from kcodec.records import RecordBatchBuilder, estimate_batch_size, record_size

__all__ = ["SUPPORTED", "install", "uninstall", "installed"]

_MODULES = ("aiokafka.record", "aiokafka.record.util", "aiokafka.record.default_records",
            "aiokafka.record.legacy_records", "aiokafka.record.memory_records",
            "aiokafka.consumer.fetcher", "aiokafka.producer.producer",
            "aiokafka.producer.message_accumulator")


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


def _metadata_class(dr: Any) -> type:
    """The class aiokafka's v2 ``append`` returns: kcodec's C one while aiokafka runs its own
    Cython classes (whose metadata type cannot be patched either), a Python subclass of it
    while aiokafka runs its Python classes (AIOKAFKA_NO_EXTENSIONS), where
    ``mock.patch.object(DefaultRecordMetadata, ...)`` works on the stock class too."""
    if dr.DefaultRecordMetadata is not dr._DefaultRecordMetadataPy:
        return DefaultRecordMetadata

    class PyDefaultRecordMetadata(DefaultRecordMetadata):  # type: ignore[misc,valid-type]
        __slots__ = ()

    PyDefaultRecordMetadata.__name__ = PyDefaultRecordMetadata.__qualname__ = \
        "DefaultRecordMetadata"
    PyDefaultRecordMetadata.__module__ = __name__
    return PyDefaultRecordMetadata


def _make_builder(stock: Any, metadata: type, has_codec: Any) -> type:
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
                metadata_class=metadata)
            self._magic = magic
            self._kcodec = codec
            self._built: bytearray | None = None

        # aiokafka's append(offset, timestamp, key, value, headers), not kcodec's
        append = RecordBatchBuilder.append_with_offset  # type: ignore[assignment]

        # aiokafka's signature, without kcodec's is_transactional
        def set_producer_state(  # type: ignore[override]
                self, producer_id: int, producer_epoch: int, base_sequence: int) -> None:
            RecordBatchBuilder.set_producer_state(self, producer_id, producer_epoch,
                                                  base_sequence)

        def build(self) -> bytearray:  # type: ignore[override]
            if self._kcodec:
                has_codec(self._kcodec, 2)
            out = RecordBatchBuilder.build(self, as_bytearray=True)
            if not self.record_count:
                fix_empty_batch(out)
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
    DefaultRecordBatchBuilder.MAX_RECORD_OVERHEAD = 21  # type: ignore[attr-defined]
    DefaultRecordBatchBuilder.__module__ = __name__
    return DefaultRecordBatchBuilder


def _patch(p: Patch) -> None:
    from aiokafka import errors
    from aiokafka.record import default_records as dr
    from aiokafka.record import legacy_records as lr

    has_codec = has_codec_check(dr._DefaultRecordBatchPy.__new__(dr._DefaultRecordBatchPy),
                                no_lz4_magic0=errors.UnsupportedCodecError)
    classes: dict[str, Any] = make_classes(
        "aiokafka", corrupt=errors.CorruptRecordException,
        stock_default_batch=dr._DefaultRecordBatchPy,
        stock_legacy_batch=lr._LegacyRecordBatchPy,
        stock_legacy_builder=lr._LegacyRecordBatchBuilderPy,
        legacy_metadata=_legacy_metadata, control_record=None, has_codec=has_codec)
    classes["MemoryRecords"] = make_memory_records(
        "aiokafka", errors.CorruptRecordException, classes["DefaultRecordBatch"],
        classes["LegacyRecordBatch"])
    metadata = _metadata_class(dr)
    classes["DefaultRecordBatchBuilder"] = _make_builder(dr._DefaultRecordBatchBuilderPy,
                                                         metadata, has_codec)
    classes["DefaultRecordMetadata"] = metadata
    classes["LegacyRecordMetadata"] = LegacyRecordMetadata
    rebind(p, _MODULES, {**classes, **helpers()})


_adapter = Adapter("aiokafka", "aiokafka", "aiokafka", (0, 14), (0, 15), _patch)
SUPPORTED = _adapter.supported


def installed() -> bool:
    """Whether aiokafka currently uses kcodec."""
    return _adapter.installed()


def install() -> None:
    """Make aiokafka use kcodec for its records, CRCs and varints (idempotent)."""
    _adapter.install()


def uninstall() -> None:
    """Give aiokafka its own record classes and helpers back."""
    _adapter.uninstall()
