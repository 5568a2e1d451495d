"""What both adapters share: kcodec-backed record batches and legacy builders shaped like
the record classes of kafka-python and aiokafka, the errors and helpers, and the patching
that puts them in place (``Adapter``: version check, install, uninstall).

The shapes (peer API → kcodec):

    MemoryRecords(bytes)            → the peer's own slicing, one batch object per batch
    DefaultRecordBatch(buffer)      → RecordBatch.from_bytes; iterating yields kcodec Records
                                      (they answer offset, timestamp, timestamp_type, key,
                                      value, headers, checksum, size_in_bytes, validate_crc)
                                      through remap_errors: a DecodeError becomes the peer's
                                      CorruptRecordError, raised from it
    LegacyRecordBatch(buffer, m)    → LegacyBatch.from_bytes; records keep the peer's None
                                      timestamp (type) for magic 0
    LegacyRecordBatchBuilder(...)   → MessageSetBuilder(wrapper_overhead=False,
                                      full_at_max=True, zero_wrapper=True)

The v2 builders differ (kafka-python: a wrapper of the stock class around a kcodec
RecordBatchBuilder; aiokafka: a RecordBatchBuilder subclass, for speed) and live in each
peer's module. Only this package imports a peer, and only when asked to.
"""

from __future__ import annotations

import importlib
import struct
from collections.abc import Callable
from functools import partial
from typing import Any

from kcodec.compat._peer import DefaultRecordMetadata, remap_errors
from kcodec.crc import crc32, crc32c
from kcodec.errors import DecodeError, EncodeError
from kcodec.records import (
    LegacyBatch,
    MessageSetBuilder,
    Record,
    RecordBatch,
)
from kcodec.records.header import (
    ENTRY_OVERHEAD,
    MIN_ENTRY_LENGTH,
    entry_frame,
    entry_length,
    patch_header,
)
from kcodec.varint import decode_varlong, encode_varlong, varlong_size

__all__ = ["Adapter", "Patch", "rebind", "make_classes", "make_memory_records", "helpers",
           "version_tuple", "fix_empty_batch", "has_codec_check", "LegacyRecord",
           "watched_record_classes", "control_record_maker", "copy_record", "remap_errors",
           "DefaultRecordMetadata"]

_CONTROL_KEY = struct.Struct(">hh")  # a control record key's version and type


def version_tuple(text: str) -> tuple[int, ...]:
    """(3, 0, 12) from "3.0.12" (a pre-release suffix ends the number)."""
    out = []
    for part in text.split("."):
        digits = ""
        for ch in part:
            if not ch.isdigit():
                break
            digits += ch
        if not digits:
            break
        out.append(int(digits))
        if digits != part:
            break
    return tuple(out)


class Patch:
    """Rebinds names in modules and remembers the old values so ``undo`` restores them."""

    def __init__(self) -> None:
        self._saved: list[tuple[Any, str, Any, bool]] = []

    def set(self, module: Any, name: str, value: Any) -> None:
        had = name in vars(module)
        self._saved.append((module, name, vars(module).get(name), had))
        setattr(module, name, value)

    def undo(self) -> None:
        for module, name, old, had in reversed(self._saved):
            if had:
                setattr(module, name, old)
            else:
                delattr(module, name)
        self._saved.clear()


def helpers() -> dict[str, Callable[..., Any]]:
    """The peers' varint and CRC helpers (same names and calling conventions) on kcodec."""

    def encode_varint(value: int, write: Callable[[int], Any]) -> int:
        data = encode_varlong(value)
        for b in data:
            write(b)
        return len(data)

    def decode_varint(buffer: Any, pos: int = 0) -> tuple[int, int]:
        return decode_varlong(buffer, pos)

    def size_of_varint(value: int) -> int:
        return varlong_size(value)

    def calc_crc32c(memview: Any, *_: Any) -> int:
        return crc32c(memview)

    def calc_crc32(memview: Any) -> int:
        return crc32(memview)

    return {"encode_varint": encode_varint, "decode_varint": decode_varint,
            "size_of_varint": size_of_varint, "calc_crc32c": calc_crc32c,
            "calc_crc32": calc_crc32}


class LegacyRecord:
    """A magic 0/1 record as both peers show it: no timestamp (None) for magic 0, ``crc`` and
    ``checksum`` the message's CRC-32, ``validate_crc()`` checking it, no headers. Made with
    kafka-python's constructor arguments (the adapter rebinds its name to this class, so it
    can be patched as the stock one can), or from a kcodec record by ``of``. Legacy batches
    are rare; their records get this small object."""

    __slots__ = ("magic", "offset", "timestamp", "timestamp_type", "key", "value", "crc",
                 "size_in_bytes", "_crc_bytes", "_valid")

    def __init__(self, magic: int, offset: int, timestamp: int | None,
                 timestamp_type: int | None, key: Any, value: Any, crc: int,
                 crc_bytes: Any) -> None:
        self.magic = magic
        self.offset = offset
        self.timestamp = timestamp
        self.timestamp_type = timestamp_type
        self.key = key
        self.value = value
        self.crc = crc
        self._crc_bytes = crc_bytes
        self._valid = None
        self.size_in_bytes = (12 + 4 + len(crc_bytes)) if crc_bytes is not None else 0

    @classmethod
    def of(cls, magic: int, r: Any) -> LegacyRecord:
        """The record kcodec's legacy record ``r`` is, in the peers' shape."""
        out = cls.__new__(cls)
        out.magic = magic
        out.offset = r.offset
        if magic == 0:
            out.timestamp = None
            out.timestamp_type = None
        else:
            out.timestamp = r.timestamp
            out.timestamp_type = r.timestamp_type
        out.key = r.key
        out.value = r.value
        out.crc = r.checksum
        out.size_in_bytes = r.size_in_bytes
        out._crc_bytes = None
        out._valid = r.validate_crc()
        return out

    @property
    def headers(self) -> list[Any]:
        return []

    @property
    def checksum(self) -> int:
        return self.crc

    def validate_crc(self) -> bool:
        if self._valid is None:
            return crc32(self._crc_bytes) == self.crc
        return bool(self._valid)

    def __repr__(self) -> str:
        return (f"LegacyRecord(magic={self.magic!r} offset={self.offset!r}, "
                f"timestamp={self.timestamp!r}, timestamp_type={self.timestamp_type!r}, "
                f"key={self.key!r}, value={self.value!r}, crc={self.crc!r})")


class _Watched(type):
    """Metaclass of the v2 record classes an adapter puts in the peer's module: it notes
    when the class is changed (``mock.patch.object`` sets, then restores or deletes, an
    attribute), so the adapter's batches can yield instances of the class while it is, and
    kcodec's own records, with no wrapper, while it is not. ``isinstance`` counts kcodec's
    records as instances, as they stand for the peer's class."""

    _kc_snapshot: dict[str, Any]
    _kc_modified: bool
    _kc_plain: Any

    def __init__(cls, name: str, bases: tuple[type, ...], ns: dict[str, Any]) -> None:
        super().__init__(name, bases, ns)
        type.__setattr__(cls, "_kc_snapshot", dict(vars(cls)))
        type.__setattr__(cls, "_kc_modified", False)

    def __setattr__(cls, name: str, value: Any) -> None:
        type.__setattr__(cls, name, value)
        cls._kc_recheck()

    def __delattr__(cls, name: str) -> None:
        type.__delattr__(cls, name)
        cls._kc_recheck()

    def _kc_recheck(cls) -> None:
        snap = cls._kc_snapshot
        now = {k: v for k, v in vars(cls).items() if k not in ("_kc_snapshot", "_kc_modified")}
        snap = {k: v for k, v in snap.items() if k not in ("_kc_snapshot", "_kc_modified")}
        changed = now.keys() != snap.keys() or any(now[k] is not v for k, v in snap.items())
        type.__setattr__(cls, "_kc_modified", changed)

    def __instancecheck__(cls, obj: Any) -> bool:
        plain = vars(cls).get("_kc_plain")
        return type.__instancecheck__(cls, obj) or (plain is not None and isinstance(obj, plain))


def watched_record_classes() -> tuple[Any, Any]:
    """kafka-python's DefaultRecord and ControlRecord as Python subclasses of kcodec's Record,
    so that they can be patched as the stock ones can (``mock.patch.object(DefaultRecord,
    "validate_crc", ...)``). Control records are always made as ControlRecord (they are few);
    a v2 data record is kcodec's own Record unless DefaultRecord has been changed, and then a
    DefaultRecord with the same fields (see ``_Watched``)."""

    class DefaultRecord(Record, metaclass=_Watched):  # type: ignore[misc,valid-type]
        __slots__ = ()
        _kc_plain: Any = Record

        def __init__(self, size_in_bytes: int, offset: int, timestamp: int,
                     timestamp_type: int, key: Any, value: Any, headers: Any) -> None:
            # kafka-python's constructor arguments
            Record.__init__(self, offset, timestamp, timestamp_type, key, value, headers, 0,
                            size_in_bytes)

        def __repr__(self) -> str:
            return (f"DefaultRecord(offset={self.offset!r}, timestamp={self.timestamp!r}, "
                    f"timestamp_type={self.timestamp_type!r}, key={self.key!r}, "
                    f"value={self.value!r}, headers={self.headers!r})")

    class ControlRecord(DefaultRecord):  # type: ignore[misc,valid-type]
        """A control record as kafka-python shows it (``type``, ``version``, ``abort``,
        ``commit``)."""

        __slots__ = ("version", "type")
        _kc_plain = None

        def __init__(self, size_in_bytes: int, offset: int, timestamp: int,
                     timestamp_type: int, key: Any, value: Any, headers: Any) -> None:
            DefaultRecord.__init__(self, size_in_bytes, offset, timestamp, timestamp_type, key,
                                   value, headers)
            self.version, self.type = _CONTROL_KEY.unpack(key)

        @property
        def abort(self) -> bool:
            return self.type == 0

        @property
        def commit(self) -> bool:
            return self.type == 1

        def __repr__(self) -> str:
            return (f"ControlRecord(offset={self.offset!r}, timestamp={self.timestamp!r}, "
                    f"timestamp_type={self.timestamp_type!r}, version={self.version!r}, "
                    f"type={self.type!r} <{'abort' if self.abort else 'commit'}>)")

    for cls in (DefaultRecord, ControlRecord):
        type.__setattr__(cls, "__module__", "kcodec.compat.kafka_python")
        type.__setattr__(cls, "_kc_snapshot", dict(vars(cls)))
    return DefaultRecord, ControlRecord


def copy_record(cls: Any, r: Any) -> Any:
    """A ``cls`` (a subclass of kcodec's Record) with the fields of record ``r``."""
    out = cls.__new__(cls)
    try:
        Record.__init__(out, r.offset, r.timestamp, r.timestamp_type, r.key, r.value,
                        r.headers, r.attributes, r.size_in_bytes)
    except AttributeError:
        # The pure twin's __init__ assigns through the instance's class, where a patched
        # field now sits: set the fields through kcodec's own slot descriptors instead.
        for name, value in (("offset", r.offset), ("timestamp", r.timestamp),
                            ("timestamp_type", r.timestamp_type), ("key", r.key),
                            ("value", r.value), ("headers", r.headers),
                            ("attributes", r.attributes), ("size_in_bytes", r.size_in_bytes),
                            ("checksum", None), ("_computed_crc", None)):
            vars(Record)[name].__set__(out, value)
    return out


def control_record_maker(cls: Any) -> Callable[[Any], Any]:
    """kcodec ControlRecord -> the watched ControlRecord class ``cls``."""

    def make(r: Any) -> Any:
        out = copy_record(cls, r)
        out.version = r.version
        out.type = r.control_type
        return out

    return make


def fix_empty_batch(out: bytearray) -> None:
    """An empty v2 batch as both peers write it: 0 for the last offset delta and both
    timestamps where kcodec writes Java's -1 (the CRC-32C redone)."""
    patch_header(out, last_offset_delta=0, first_timestamp=0, max_timestamp=0)


def has_codec_check(stock_base: Any, *, no_lz4_magic0: type[Exception] | None = None
                    ) -> Callable[[int, int], None]:
    """The peer's own "is this codec's library installed" check (its UnsupportedCodecError),
    through an instance of its record base class; aiokafka also refuses lz4 for magic 0."""

    def has_codec(codec: int, magic: int) -> None:
        if no_lz4_magic0 is not None and magic == 0 and codec == 3:
            raise no_lz4_magic0("LZ4 is not supported for broker version 0.8/0.9")
        stock_base._assert_has_codec(codec)

    return has_codec


class Adapter:
    """``install()``, ``uninstall()`` and ``installed()`` for one peer: the peer's version is
    checked before anything is patched; ``patch(p)`` rebinds the peer's names through ``p``
    (a Patch), and uninstall undoes every rebinding. Idempotent both ways."""

    def __init__(self, name: str, package: str, dist: str, lo: tuple[int, int],
                 hi: tuple[int, int], patch: Callable[[Patch], None]) -> None:
        self.name, self.package, self.dist = name, package, dist
        self.lo, self.hi = lo, hi
        self.supported = f">={lo[0]}.{lo[1]},<{hi[0]}.{hi[1]}"
        self._patch_fn = patch
        self._patch: Patch | None = None

    def installed(self) -> bool:
        return self._patch is not None

    def check_version(self) -> Any:
        try:
            mod = importlib.import_module(self.package)
        except ImportError as exc:
            raise ImportError(f"kcodec.compat.{self.name} needs {self.dist} "
                              "(pip install 'kcodec[compat]')") from exc
        version = getattr(mod, "__version__", "0")
        if not self.lo <= version_tuple(version)[:2] < self.hi:
            raise ImportError(f"kcodec.compat.{self.name} supports {self.dist} "
                              f"{self.supported}, not {version}: nothing was patched")
        return mod

    def install(self) -> None:
        if self._patch is not None:
            return
        self.check_version()
        p = Patch()
        try:
            self._patch_fn(p)
        except BaseException:
            p.undo()
            raise
        self._patch = p

    def uninstall(self) -> None:
        if self._patch is not None:
            self._patch.undo()
            self._patch = None


def rebind(p: Patch, module_names: tuple[str, ...], values: dict[str, Any]) -> None:
    """In each module, rebind those of ``values``' names that it has (the peers import
    their record classes and helpers by name into the fetcher, producer and accumulator)."""
    for name in module_names:
        mod = importlib.import_module(name)
        for key, value in values.items():
            if key in vars(mod):
                p.set(mod, key, value)


def make_classes(peer: str, *, corrupt: type[Exception],
                 stock_default_batch: type, stock_legacy_batch: type,
                 stock_legacy_builder: type, legacy_metadata: Callable[[tuple], Any],
                 control_record: Callable[..., Any] | None, record_class: Any = None,
                 has_codec: Callable[[int, int], None]) -> dict[str, type]:
    """The kcodec-backed batch readers and legacy builder for one peer (the v2 builders
    differ between the peers and live in their modules). The stock classes are subclassed
    so ``isinstance`` checks and class constants keep working; every method is kcodec's."""

    def _map(exc: DecodeError) -> Exception:
        return corrupt(f"Found invalid record structure: {exc}")

    class DefaultRecordBatch(stock_default_batch):  # type: ignore[misc,valid-type]
        __slots__ = ("_kb", "_kit")

        def __init__(self, buffer: Any) -> None:
            try:
                self._kb = RecordBatch.from_bytes(buffer, validate_crc=False)
            except DecodeError as exc:
                raise _map(exc) from exc
            self._kit: Any = None  # the decoding iterator, made on first use

        # header fields, as the peer names them
        base_offset = property(lambda self: self._kb.base_offset)
        size_in_bytes = property(lambda self: self._kb.size)
        leader_epoch = property(lambda self: self._kb.partition_leader_epoch)
        magic = property(lambda self: self._kb.magic)
        crc = property(lambda self: self._kb.crc)
        attributes = property(lambda self: self._kb.attributes)
        last_offset_delta = property(lambda self: self._kb.last_offset_delta)
        compression_type = property(lambda self: self._kb.attributes & 0x07)
        timestamp_type = property(lambda self: self._kb.timestamp_type)
        is_transactional = property(lambda self: self._kb.is_transactional)
        is_control_batch = property(lambda self: self._kb.is_control)
        first_timestamp = property(lambda self: self._kb.first_timestamp)
        max_timestamp = property(lambda self: self._kb.max_timestamp)
        producer_id = property(lambda self: self._kb.producer_id)
        producer_epoch = property(lambda self: self._kb.producer_epoch)
        base_sequence = property(lambda self: self._kb.base_sequence)
        records_count = property(lambda self: self._kb.record_count)

        @property
        def last_offset(self) -> int:
            return self._kb.base_offset + self._kb.last_offset_delta

        @property
        def next_offset(self) -> int:
            return self._kb.base_offset + self._kb.last_offset_delta + 1

        def _records(self) -> Any:
            it = self._kit
            if it is None:
                kb = self._kb
                codec = kb.attributes & 0x07
                if codec:
                    has_codec(codec, 2)
                try:
                    it = iter(kb)
                except DecodeError as exc:
                    raise _map(exc) from exc
                if kb.attributes & 0x20:
                    if control_record is not None:
                        it = map(control_record, it)
                elif record_class is not None and record_class._kc_modified:
                    it = map(partial(copy_record, record_class), it)
                # kcodec's decoding errors become the peer's, raised from kcodec's, at the
                # record where they happen (no Python frame per record in the compiled twin)
                it = self._kit = remap_errors(it, DecodeError, _map)
            return it

        def __iter__(self) -> Any:
            # The decoding iterator itself, so ``for record in batch`` runs in kcodec; it is
            # kept, so next(batch) continues the same iteration as the peer's does.
            return self._records()

        def __next__(self) -> Any:
            return next(self._records())

        next = __next__

        def validate_crc(self) -> bool:
            return self._kb.validate_crc()

        def __str__(self) -> str:
            kb = self._kb
            return (f"DefaultRecordBatch(magic={kb.magic}, base_offset={kb.base_offset}, "
                    f"last_offset_delta={kb.last_offset_delta}, "
                    f"first_timestamp={kb.first_timestamp}, max_timestamp={kb.max_timestamp}, "
                    f"is_transactional={kb.is_transactional}, producer_id={kb.producer_id}, "
                    f"producer_epoch={kb.producer_epoch}, base_sequence={kb.base_sequence}, "
                    f"records_count={kb.record_count})")

    class LegacyRecordBatch(stock_legacy_batch):  # type: ignore[misc,valid-type]
        __slots__ = ("_kb", "_kmagic")

        def __init__(self, buffer: Any, magic: int) -> None:
            try:
                self._kb = LegacyBatch.from_bytes(buffer, validate_crc=False)
            except DecodeError as exc:
                raise _map(exc) from exc
            self._kmagic = magic

        base_offset = property(lambda self: self._kb.offset)
        size_in_bytes = property(lambda self: self._kb.size)
        compression_type = property(lambda self: self._kb.attributes & 0x07)
        magic = property(lambda self: self._kb.magic)
        crc = property(lambda self: self._kb.crc)
        attributes = property(lambda self: self._kb.attributes)
        is_control_batch = False
        is_transactional = False
        producer_id = None

        @property
        def timestamp(self) -> int | None:
            return None if self._kb.magic == 0 else self._kb.timestamp

        @property
        def timestamp_type(self) -> int | None:
            return None if self._kb.magic == 0 else (self._kb.attributes >> 3) & 1

        @property
        def next_offset(self) -> int:
            return self._kb.offset + 1

        def validate_crc(self) -> bool:
            return self._kb.validate_crc()

        def __iter__(self) -> Any:
            kb = self._kb
            codec = kb.attributes & 0x07
            if codec:
                has_codec(codec, kb.magic)
            try:
                records = kb.records()
            except DecodeError as exc:
                raise _map(exc) from exc
            magic = kb.magic
            of = LegacyRecord.of
            return iter([of(magic, r) for r in records])

    class LegacyRecordBatchBuilder(stock_legacy_builder):  # type: ignore[misc,valid-type]
        __slots__ = ("_kbuilder", "_kmagic", "_kcodec", "_built")

        def __init__(self, magic: int, compression_type: int, batch_size: int) -> None:
            assert magic in (0, 1)
            # the stock size helpers read _magic, a slot of the stock base (Any to mypy)
            self._kmagic = self._magic = magic  # type: ignore[misc]
            self._kcodec = compression_type
            self._kbuilder = MessageSetBuilder(
                magic=magic, compression=compression_type if compression_type <= 3 else 0,
                max_size=batch_size,
                wrapper_overhead=False, full_at_max=True, zero_wrapper=True)
            self._built: bytearray | None = None

        def append(self, offset: int, timestamp: int | None, key: Any, value: Any,
                   headers: Any = None) -> Any:
            assert not headers, "Headers not supported in v0/v1"
            if type(offset) is not int:
                raise TypeError(offset)
            if self._kmagic and timestamp is not None and type(timestamp) is not int:
                raise TypeError(f"`timestamp` should be int, but {type(timestamp)} provided")
            try:
                meta = self._kbuilder.append(key, value, timestamp, offset)
            except EncodeError:
                for what, x in (("key", key), ("value", value)):
                    if x is not None and not isinstance(x, (bytes, bytearray, memoryview)):
                        raise TypeError(f"Not supported type for {what}: {type(x)}") from None
                raise
            if meta is None:
                return None
            return legacy_metadata((offset, meta.crc, meta.size, meta.timestamp))

        def build(self) -> bytearray:
            if self._kcodec and self._kbuilder.record_count:
                has_codec(self._kcodec, self._kmagic)
            built = self._built = bytearray(self._kbuilder.build())
            return built

        def size(self) -> int:
            return self._kbuilder.size if self._built is None else len(self._built)

    out = {"DefaultRecordBatch": DefaultRecordBatch, "LegacyRecordBatch": LegacyRecordBatch,
           "LegacyRecordBatchBuilder": LegacyRecordBatchBuilder}
    for name, cls in out.items():
        cls.__qualname__ = cls.__name__ = name
        cls.__module__ = f"kcodec.compat.{peer}"
    return out


def make_memory_records(peer: str, corrupt: type[Exception], default_batch: type,
                        legacy_batch: type) -> type:
    """A MemoryRecords of the peers' shape (``has_next``, ``next_batch``, ``size_in_bytes``)
    making kcodec-backed batches; used where the peer's own one would make its own."""

    class MemoryRecords:
        __slots__ = ("_buffer", "_view", "_pos", "_next")

        LENGTH_OFFSET = 8
        LOG_OVERHEAD = 12
        MAGIC_OFFSET = 16
        MIN_SLICE = ENTRY_OVERHEAD + MIN_ENTRY_LENGTH  # a magic 0 message, null key and value

        def __init__(self, bytes_data: Any) -> None:
            self._buffer = bytes_data
            self._view = memoryview(bytes_data)
            self._pos = 0
            self._next: Any = None
            self._advance()

        def _advance(self) -> None:
            view = self._view
            pos = self._pos
            n = len(view)
            if n - pos < ENTRY_OVERHEAD:
                self._next = None
                return
            end = pos + ENTRY_OVERHEAD + entry_length(view, pos)
            if end > n or end < pos + ENTRY_OVERHEAD:
                self._next = None
                return
            self._next = view[pos:end]
            self._pos = end

        def size_in_bytes(self) -> int:
            return len(self._buffer)

        def has_next(self) -> bool:
            return self._next is not None

        def next_batch(self) -> Any:
            piece = self._next
            if piece is None:
                return None
            if len(piece) < self.MIN_SLICE:
                raise corrupt("Record size is less than the minimum record overhead "
                              f"({MIN_ENTRY_LENGTH})")
            self._advance()
            magic = entry_frame(piece)[2]
            if magic >= 2:
                return default_batch(piece)
            return legacy_batch(piece, magic)

    MemoryRecords.__module__ = f"kcodec.compat.{peer}"
    return MemoryRecords
