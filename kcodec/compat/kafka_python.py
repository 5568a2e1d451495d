"""Make kafka-python build and read every record with kcodec.

    import kcodec.compat.kafka_python
    kcodec.compat.kafka_python.install()     # before creating consumers and producers

``install()`` rebinds kafka-python's record classes (``DefaultRecordBatch``,
``LegacyRecordBatch``, their builders, ``DefaultRecord``, ``ControlRecord``, ``LegacyRecord``)
and its varint and CRC helpers, in ``kafka.record.*`` and in the fetcher, producer and
accumulator modules that imported them, to kcodec-backed classes of the same shapes;
``uninstall()`` puts the originals back. Supported: kafka-python 3.0.x; another version is
refused with ImportError before anything is patched.
"""

from __future__ import annotations

from typing import Any

from kcodec.compat._core import (
    Adapter,
    DefaultRecordMetadata,
    LegacyRecord,
    Patch,
    control_record_maker,
    fix_empty_batch,
    has_codec_check,
    helpers,
    make_classes,
    rebind,
    watched_record_classes,
)
from kcodec.records import RecordBatchBuilder, estimate_batch_size, record_size
from kcodec.records.header import HEADER_SIZE

__all__ = ["SUPPORTED", "install", "uninstall", "installed"]

_MODULES = ("kafka.record", "kafka.record.util", "kafka.record.default_records",
            "kafka.record.legacy_records", "kafka.record.memory_records",
            "kafka.consumer.fetcher", "kafka.producer.kafka",
            "kafka.producer.record_accumulator")


def _make_builder(stock: type, metadata: type, has_codec: Any) -> type:
    """kafka-python's DefaultRecordBatchBuilder: a subclass of the stock one (its constants
    and isinstance checks) around a kcodec RecordBatchBuilder."""

    class DefaultRecordBatchBuilder(stock):  # type: ignore[misc,valid-type]
        # ``append`` is a slot holding the kcodec builder's bound ``append_with_offset``
        # (the clients' argument order): kafka-python's MemoryRecordsBuilder calls it with
        # no Python frame of the adapter's in between, and it returns kcodec's C
        # DefaultRecordMetadata (offset, size, timestamp, crc None; kafka-python's repr).
        # Wrong types raise kcodec's EncodeTypeError, a TypeError, as kafka-python raises.
        __slots__ = ("_kbuilder", "_kcodec", "_built", "append")

        def __init__(self, magic: int, compression_type: int, is_transactional: Any,
                     producer_id: int, producer_epoch: int, base_sequence: int,
                     batch_size: int) -> None:
            assert magic >= 2
            # _magic is a slot of the stock base class, which mypy sees as Any
            self._magic = magic  # type: ignore[misc]
            codec = self._kcodec = compression_type & 0x07
            self._kbuilder = RecordBatchBuilder(
                # an unknown codec fails in build(), as kafka-python's builder does
                compression=codec if codec <= 4 else 0, producer_id=producer_id,
                producer_epoch=producer_epoch, base_sequence=base_sequence,
                is_transactional=bool(is_transactional), partition_leader_epoch=0,
                max_size=batch_size, compress_only_if_smaller=True,
                metadata_class=metadata)
            self.append = self._kbuilder.append_with_offset
            self._built: bytearray | None = None

        def set_producer_state(self, producer_id: int, producer_epoch: int,
                               base_sequence: int, is_transactional: Any = None) -> None:
            # kafka-python's own checks, with its messages
            assert not is_transactional or producer_id != -1, \
                "Cannot write transactional messages without a valid producer ID"
            assert producer_id == -1 or producer_epoch != -1, \
                "Invalid negative producer epoch"
            assert producer_id == -1 or base_sequence != -1, \
                "Invalid negative sequence number"
            self._kbuilder.set_producer_state(producer_id, producer_epoch, base_sequence,
                                              is_transactional)

        producer_id = property(lambda self: self._kbuilder.producer_id)
        producer_epoch = property(lambda self: self._kbuilder.producer_epoch)
        base_sequence = property(lambda self: self._kbuilder.base_sequence)

        def build(self) -> bytearray:
            codec = self._kcodec
            if codec:
                has_codec(codec, 2)
            out = self._kbuilder.build(as_bytearray=True)
            if not self._kbuilder.record_count:
                fix_empty_batch(out)
            self._built = out
            return out

        def size(self) -> int:
            built = self._built
            return self._kbuilder.size if built is None else len(built)

        @classmethod
        def header_size_in_bytes(cls) -> int:
            return HEADER_SIZE

        @classmethod
        def size_in_bytes(cls, offset_delta: int, timestamp_delta: int, key: Any, value: Any,
                          headers: Any) -> int:
            return record_size(key, value, headers, offset_delta, timestamp_delta)

        @classmethod
        def estimate_size_in_bytes(cls, key: Any, value: Any, headers: Any) -> int:
            return estimate_batch_size(key, value, headers)

    DefaultRecordBatchBuilder.__module__ = __name__
    return DefaultRecordBatchBuilder


def _patch(p: Patch) -> None:
    from kafka import errors
    from kafka.record import default_records as dr
    from kafka.record import legacy_records as lr

    has_codec = has_codec_check(dr.DefaultRecordBase())
    DefaultRecord, ControlRecord = watched_record_classes()
    classes: dict[str, Any] = make_classes(
        "kafka_python", corrupt=errors.CorruptRecordError,
        stock_default_batch=dr.DefaultRecordBatch, stock_legacy_batch=lr.LegacyRecordBatch,
        stock_legacy_builder=lr.LegacyRecordBatchBuilder,
        legacy_metadata=lambda t: lr.LegacyRecordMetadata(*t),
        control_record=control_record_maker(ControlRecord), record_class=DefaultRecord,
        has_codec=has_codec)
    classes["DefaultRecordBatchBuilder"] = _make_builder(
        dr.DefaultRecordBatchBuilder, DefaultRecordMetadata, has_codec)
    rebind(p, _MODULES, {**classes, **helpers()})
    # The record classes, patchable as the stock ones are: a test's
    # mock.patch.object(DefaultRecord, "validate_crc", ...) reaches the records it reads.
    p.set(dr, "DefaultRecord", DefaultRecord)
    p.set(dr, "ControlRecord", ControlRecord)
    p.set(lr, "LegacyRecord", LegacyRecord)


_adapter = Adapter("kafka_python", "kafka", "kafka-python", (3, 0), (3, 1), _patch)
SUPPORTED = _adapter.supported


def installed() -> bool:
    """Whether kafka-python currently uses kcodec."""
    return _adapter.installed()


def install() -> None:
    """Make kafka-python use kcodec for its records, CRCs and varints (idempotent)."""
    _adapter.install()


def uninstall() -> None:
    """Give kafka-python its own record classes and helpers back."""
    _adapter.uninstall()
