"""What the broker checks in a produced records blob, and the offsets it assigns in place.

The rules are Kafka's (its log validator), applied to the bytes as received:

    records := batch_v2                       exactly one v2 batch, or
             | message{1..}                   legacy uncompressed messages (magic 0 or 1), or
             | wrapper                        one legacy compressed message (magic 0 or 1)

    every entry: base_offset, length, ..., magic (kcodec.records.header); size = 12 + length

- framing: whole entries, known magic, all entries the same magic     (CORRUPT_MESSAGE,
  INVALID_RECORD); each entry at most ``max.message.bytes``            (MESSAGE_TOO_LARGE);
- v2: CRC-32C; base offset 0; record count == last offset delta + 1 == records decoded;
  record offset deltas 0, 1, 2, ...; transactional needs a producer id, a producer id needs a
  sequence; codec 0-4; no producer-set LogAppendTime; timestamps within the configured range;
- legacy: CRC-32 of every message (and of every inner message of a wrapper); magic 1 inner
  offsets are relative 0, 1, 2, ...; no compressed message inside a wrapper; no zstd.
- compressed data may expand to at most MAX_COMPRESSION_RATIO times its size (but always to
  MIN_DECOMPRESSED_LIMIT, and never past kcodec.compression.DEFAULT_MAX_SIZE), checked as it
  is decompressed: a compression bomb costs the broker a bounded multiple of the bytes it
  received, not what it declares                                        (CORRUPT_MESSAGE).

Offsets are assigned in place, without re-encoding: a v2 batch gets its base offset and
partition leader epoch rewritten (neither is covered by the CRC); its max timestamp (and
attributes) only when the broker stamps LogAppendTime or the producer's max timestamp was
wrong, and then the CRC is recomputed. Legacy uncompressed messages get their offsets (and,
for magic 1 with LogAppendTime, timestamp and attributes, with a new CRC). A magic 1 wrapper
keeps its relative inner offsets and gets the absolute offset of its last inner message and
its max timestamp. A magic 0 wrapper's inner offsets are absolute, so Kafka rebuilds it (the
one case that is re-encoded and recompressed).
"""

from __future__ import annotations

from typing import Any, NamedTuple

from kcodec.broker.log.config import LogConfig
from kcodec.broker.log.errors import (
    CorruptMessage,
    InvalidRecord,
    InvalidTimestamp,
    MessageTooLarge,
    UnsupportedCompressionType,
)
from kcodec.compression import DEFAULT_MAX_SIZE, decompress
from kcodec.errors import DecompressionLimitError, KcodecError, UnsupportedCodecError
from kcodec.records import MessageSetBuilder, RecordBatchBuilder, iter_batches
from kcodec.records.header import (
    ATTR_CODEC_MASK,
    ATTR_CONTROL,
    ATTR_LOG_APPEND_TIME,
    ATTR_TRANSACTIONAL,
    ENTRY_OVERHEAD,
    HEADER_SIZE,
    MIN_ENTRY_LENGTH,
    V2_MIN_LENGTH,
    compute_crc,
    entry_frame,
    patch_header,
    patch_message,
    read_header,
)
from kcodec.records.segscan import scan_records_v2

__all__ = ["BatchInfo", "AppendResult", "Validated", "peek_batches", "validate",
           "check_replicated"]



class BatchInfo(NamedTuple):
    """One stored batch (or legacy message) of an append: offsets and producer fields."""

    base_offset: int
    last_offset: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    is_transactional: bool
    is_control: bool


class AppendResult(NamedTuple):
    """What an append did: the offsets assigned, the timestamps, the batches stored."""

    base_offset: int
    last_offset: int
    log_append_time_ms: int        #: -1 unless the topic uses LogAppendTime
    max_timestamp: int
    record_count: int
    batches: list[BatchInfo]


class Validated(NamedTuple):
    """A validated set with offsets assigned: the bytes to store, and per stored entry its
    (position in ``data``, last offset, max timestamp)."""

    data: bytes | bytearray
    entries: list[tuple[int, int, int]]
    result: AppendResult


def _frames(buf: Any) -> list[tuple[int, int, int]]:
    """(position, size, magic) of every entry; whole entries only."""
    n = len(buf)
    if n == 0:
        raise InvalidRecord("the records hold no batches")
    out: list[tuple[int, int, int]] = []
    pos = 0
    while pos < n:
        try:
            _offset, length, magic = entry_frame(buf, pos)
        except KcodecError:
            raise CorruptMessage(f"truncated batch header at position {pos} "
                                 f"({n - pos} bytes left)", len(out)) from None
        if length < MIN_ENTRY_LENGTH:
            raise CorruptMessage(f"batch length {length} at position {pos} below the "
                                 f"minimum of {MIN_ENTRY_LENGTH}", len(out))
        if length > n - pos - ENTRY_OVERHEAD:
            raise CorruptMessage(f"truncated batch at position {pos}: "
                                 f"{length + ENTRY_OVERHEAD} bytes claimed, {n - pos} present",
                                 len(out))
        if magic > 2:
            raise CorruptMessage(f"unknown magic byte {magic} at position {pos}", len(out))
        out.append((pos, length + ENTRY_OVERHEAD, magic))
        pos += length + ENTRY_OVERHEAD
    return out


def peek_batches(records: Any) -> list[BatchInfo]:
    """The batches of a records blob from their headers only (no CRC, nothing decoded):
    the producer fields the broker checks before an append. Offsets are as sent.
    Raises CorruptMessage/InvalidRecord when the framing is broken."""
    buf = memoryview(records).cast("B") if not isinstance(records, (bytes, bytearray)) else records
    out = []
    for pos, size, magic in _frames(buf):
        if magic == 2:
            if size - ENTRY_OVERHEAD < V2_MIN_LENGTH:
                raise CorruptMessage(f"v2 batch at position {pos} shorter than its header")
            base, _, _, _, _, attrs, lod, _, _, pid, pepoch, bseq, _ = read_header(buf, pos)
            out.append(BatchInfo(base, base + lod, pid, pepoch, bseq,
                                 bool(attrs & ATTR_TRANSACTIONAL), bool(attrs & ATTR_CONTROL)))
        else:
            off = entry_frame(buf, pos)[0]
            out.append(BatchInfo(off, off, -1, -1, -1, False, False))
    return out


def validate(records: Any, next_offset: int, now_ms: int, config: LogConfig,
             leader_epoch: int | None = None) -> Validated:
    """Check ``records`` as the broker does and assign offsets from ``next_offset``."""
    buf = records if isinstance(records, (bytes, bytearray)) else memoryview(records).cast("B")
    frames = _frames(buf)
    limit = config.max_message_bytes
    magic0 = frames[0][2]
    for i, (pos, size, magic) in enumerate(frames):
        if size > limit:
            raise MessageTooLarge(f"batch of {size} bytes at position {pos} is larger than "
                                  f"max.message.bytes ({limit})", i)
        if magic != magic0:
            raise InvalidRecord(f"mixed magic values ({magic0} and {magic}) in one append", i)
    if magic0 == 2:
        if len(frames) > 1:
            raise InvalidRecord(f"a v2 append must hold exactly one batch, not {len(frames)}")
        out = _validate_v2(buf, next_offset, now_ms, config, leader_epoch)
    else:
        out = _validate_legacy(buf, frames, next_offset, now_ms, config)
    if config.compact:
        _require_keys(out.data)
    return out


def _require_keys(buf: Any) -> None:
    """A compacted topic refuses records without a key, as Kafka does: INVALID_RECORD with
    one record error per keyless record (its index in the batch), so a client fails those
    records and tells the rest of the batch apart."""
    errors: list[tuple[int, str]] = []
    try:
        for batch in iter_batches(buf, validate_crc=False):
            if batch.is_control:
                continue
            for i, r in enumerate(batch):
                if r.key is None:
                    errors.append((i, f"Compacted topic cannot accept message without key "
                                      f"(offset {r.offset})."))
    except KcodecError as exc:
        raise CorruptMessage(f"cannot read the records: {exc}", 0) from None
    if errors:
        shown = ", ".join(f"[{i}: {m}]" for i, m in errors[:3])
        raise InvalidRecord(f"One or more records have been rejected due to {len(errors)} "
                            f"record errors in total, and only showing the first three errors "
                            f"at most: {shown} (compacted topic cannot accept a record without "
                            f"a key)", 0, errors)


def _check_ts(ts: int, now_ms: int, config: LogConfig, where: str) -> None:
    if ts < 0:
        return
    if now_ms - ts > config.message_timestamp_before_max_ms:
        raise InvalidTimestamp(f"timestamp {ts} of {where} is more than "
                               f"{config.message_timestamp_before_max_ms} ms before the "
                               f"broker's time {now_ms}", 0)
    if ts - now_ms > config.message_timestamp_after_max_ms:
        raise InvalidTimestamp(f"timestamp {ts} of {where} is more than "
                               f"{config.message_timestamp_after_max_ms} ms after the "
                               f"broker's time {now_ms}", 0)


def _decode_failure(exc: KcodecError, what: str) -> Exception:
    if isinstance(exc, UnsupportedCodecError):
        return UnsupportedCompressionType(f"{what}: {exc}", 0)
    if isinstance(exc, DecompressionLimitError):
        return CorruptMessage(f"{what}: {exc}", 0)
    return CorruptMessage(f"{what}: {exc}", 0)


#: how many times its size compressed data may expand to, past MIN_DECOMPRESSED_LIMIT
MAX_COMPRESSION_RATIO = 256
MIN_DECOMPRESSED_LIMIT = 8 * 1024 * 1024


def decompressed_limit(compressed: int) -> int:
    """The most bytes ``compressed`` bytes of a produced batch may decompress to."""
    return min(DEFAULT_MAX_SIZE, max(MIN_DECOMPRESSED_LIMIT, MAX_COMPRESSION_RATIO * compressed))


def _validate_v2(buf: Any, next_offset: int, now_ms: int, config: LogConfig,
                 leader_epoch: int | None) -> Validated:
    size = len(buf)
    if size - ENTRY_OVERHEAD < V2_MIN_LENGTH:
        raise CorruptMessage(f"v2 batch of {size} bytes is shorter than its "
                             f"{HEADER_SIZE}-byte header", 0)
    (base, _length, _epoch, _magic, crc, attrs, lod, first_ts, max_ts, pid, pepoch, bseq,
     count) = read_header(buf)
    actual = compute_crc(buf, 0, size)
    if actual != crc:
        raise CorruptMessage(f"record batch CRC-32C mismatch: stored 0x{crc:08x}, computed "
                             f"0x{actual:08x}", 0)
    codec = attrs & ATTR_CODEC_MASK
    if codec > 4:
        raise UnsupportedCompressionType(f"unknown compression codec id {codec}", 0)
    if base != 0:
        raise InvalidRecord(f"the base offset of a produced batch must be 0, not {base}", 0)
    if count <= 0 or lod < 0 or lod + 1 != count:
        raise InvalidRecord(f"record count {count} does not match the last offset delta "
                            f"{lod}", 0)
    transactional, control = bool(attrs & ATTR_TRANSACTIONAL), bool(attrs & ATTR_CONTROL)
    if transactional and pid < 0:
        raise InvalidRecord("a transactional batch without a producer id", 0)
    if pid >= 0 and bseq < 0 and not control:
        raise InvalidRecord(f"a batch with producer id {pid} has no sequence number", 0)
    if attrs & ATTR_LOG_APPEND_TIME:
        raise InvalidTimestamp("the producer may not set the LogAppendTime timestamp type", 0)
    lat = config.log_append_time
    try:
        # a view, not a slice: a slice of bytes would copy the compressed records
        section: Any = memoryview(buf)[HEADER_SIZE:size]
        if codec != 0:
            section = decompress(codec, section, decompressed_limit(size - HEADER_SIZE))
        low, top, bad = scan_records_v2(section, count, first_ts)
    except KcodecError as exc:
        raise _decode_failure(exc, "record batch") from None
    if bad >= 0:
        raise InvalidRecord(f"record {bad} of the batch does not have offset delta {bad}", 0)
    if not lat and not control:
        _check_ts(low, now_ms, config, "a record")
        _check_ts(top, now_ms, config, "a record")
    target = config.recompress_to
    if target is not None and target[0] != codec and not control:
        out = _recompress(buf, target[0], target[1], config.max_message_bytes)
    else:
        out = bytearray(buf)
    # the base offset and leader epoch are outside the CRC; a new max timestamp (and the
    # log-append-time flag) are inside it, and then patch_header recomputes it
    if lat:
        top = now_ms
        patch_header(out, base_offset=next_offset, partition_leader_epoch=leader_epoch,
                     attributes=attrs | ATTR_LOG_APPEND_TIME, max_timestamp=top)
    elif top != max_ts:
        patch_header(out, base_offset=next_offset, partition_leader_epoch=leader_epoch,
                     max_timestamp=top)
    else:
        patch_header(out, base_offset=next_offset, partition_leader_epoch=leader_epoch)
    last = next_offset + lod
    info = BatchInfo(next_offset, last, pid, pepoch, bseq, transactional, control)
    result = AppendResult(next_offset, last, now_ms if lat else -1, top, count, [info])
    return Validated(out, [(0, last, top)], result)


def _recompress(buf: Any, codec: int, level: int | None, limit: int) -> bytearray:
    """The batch re-encoded with ``codec`` (compression.type names one other than the
    producer's), as Kafka's log validator does: records, producer id, epoch, sequence and
    transactional flag kept; the offsets and timestamps are set by the caller after."""
    (batch,) = list(iter_batches(buf, validate_crc=False))
    b = RecordBatchBuilder(compression=codec, compression_level=level, base_offset=0,
                           producer_id=batch.producer_id, producer_epoch=batch.producer_epoch,
                           base_sequence=batch.base_sequence,
                           is_transactional=batch.is_transactional, max_size=(1 << 31) - 1)
    for r in batch:
        b.append(r.key, r.value, list(r.headers), r.timestamp, r.offset - batch.base_offset)
    out = bytearray(b.build())
    if len(out) > limit:
        raise MessageTooLarge(f"batch of {len(out)} bytes once recompressed is larger than "
                              f"max.message.bytes ({limit})", 0)
    return out


def _validate_legacy(buf: Any, frames: list[tuple[int, int, int]], next_offset: int,
                     now_ms: int, config: LogConfig) -> Validated:
    lat = config.log_append_time
    try:
        messages = list(iter_batches(buf, validate_crc=False))
    except KcodecError as exc:
        raise _decode_failure(exc, "message set") from None
    compressed = False
    for i, m in enumerate(messages):
        if not m.validate_crc():
            raise CorruptMessage(f"message CRC-32 mismatch at position {m.position}: stored "
                                 f"0x{m.crc:08x}, computed 0x{m.computed_crc():08x}", i)
        codec = m.attributes & ATTR_CODEC_MASK
        if codec > 4:
            raise UnsupportedCompressionType(f"unknown compression codec id {codec}", i)
        if codec == 4:
            raise UnsupportedCompressionType("zstd compression needs magic 2", i)
        if m.magic == 1 and m.attributes & ATTR_LOG_APPEND_TIME:
            raise InvalidTimestamp("the producer may not set the LogAppendTime timestamp "
                                   "type", i)
        compressed = compressed or codec != 0
    if compressed:
        if len(messages) > 1:
            raise InvalidRecord("a compressed message set must be one wrapper message, "
                                f"not {len(messages)} messages")
        return _validate_wrapper(buf, messages[0], next_offset, now_ms, config)
    out = bytearray(buf)
    entries = []
    infos = []
    top = -1
    for i, m in enumerate(messages):
        pos = m.position
        offset = next_offset + i
        ts = -1
        if m.magic == 1 and lat:
            ts = now_ms
            patch_message(out, pos, offset=offset, attributes=m.attributes | ATTR_LOG_APPEND_TIME,
                          timestamp=ts)
        else:
            patch_message(out, pos, offset=offset)
            if m.magic == 1:
                ts = m.timestamp
                _check_ts(ts, now_ms, config, f"message {i}")
        if ts > top:
            top = ts
        entries.append((pos, offset, ts))
        infos.append(BatchInfo(offset, offset, -1, -1, -1, False, False))
    last = next_offset + len(messages) - 1
    result = AppendResult(next_offset, last, now_ms if lat else -1, top, len(messages), infos)
    return Validated(out, entries, result)


def _validate_wrapper(buf: Any, w: Any, next_offset: int, now_ms: int,
                      config: LogConfig) -> Validated:
    lat = config.log_append_time
    codec = w.attributes & ATTR_CODEC_MASK
    value = w.value
    if value is None:
        raise CorruptMessage("compressed message with a null value", 0)
    try:
        inner = decompress(codec, value, decompressed_limit(len(value)), magic=w.magic)
        it = iter_batches(inner, validate_crc=True)
        msgs = list(it)
    except KcodecError as exc:
        raise _decode_failure(exc, "compressed message") from None
    if it.incomplete or it.consumed != len(inner):
        raise CorruptMessage("compressed message ends inside an inner message", 0)
    if not msgs:
        raise CorruptMessage("compressed message holds no inner messages", 0)
    top = -1
    for i, m in enumerate(msgs):
        if m.magic != w.magic:
            raise InvalidRecord(f"inner message magic {m.magic} differs from the wrapper's "
                                f"{w.magic}", 0)
        if m.attributes & ATTR_CODEC_MASK:
            raise InvalidRecord("a compressed message inside a compressed message", 0)
        if w.magic == 1:
            if m.offset != i:
                raise InvalidRecord(f"inner message {i} has relative offset {m.offset}; "
                                    f"expected {i}", 0)
            if m.timestamp > top:
                top = m.timestamp
            if not lat:
                _check_ts(m.timestamp, now_ms, config, f"inner message {i}")
    n = len(msgs)
    last = next_offset + n - 1
    if w.magic == 0:
        # inner offsets are absolute: the wrapper is rebuilt with the assigned ones
        try:
            b = MessageSetBuilder(magic=0, compression=codec, base_offset=next_offset,
                                  max_size=(1 << 31) - 1)
            for m in msgs:
                b.append(m.key, m.value)
            out: bytes | bytearray = b.build()
        except (KcodecError, ValueError) as exc:
            raise CorruptMessage(f"cannot rebuild the compressed message: {exc}", 0) from None
        if len(out) > config.max_message_bytes:
            raise MessageTooLarge(f"rebuilt message of {len(out)} bytes is larger than "
                                  f"max.message.bytes ({config.max_message_bytes})", 0)
        top = -1
    else:
        out = bytearray(buf)
        attrs = (w.attributes & ~ATTR_LOG_APPEND_TIME) | (ATTR_LOG_APPEND_TIME if lat else 0)
        if lat:
            top = now_ms
        if attrs != w.attributes or top != w.timestamp:
            patch_message(out, 0, offset=last, attributes=attrs, timestamp=top)
        else:
            patch_message(out, 0, offset=last)
    infos = [BatchInfo(next_offset, last, -1, -1, -1, False, False)]
    result = AppendResult(next_offset, last, now_ms if lat else -1, top, n, infos)
    return Validated(out, [(0, last, top)], result)


def check_replicated(records: Any, next_offset: int, config: LogConfig) -> Validated:
    """Batches that already carry their offsets (a replica copying its leader's log): whole
    entries with good CRCs, offsets from ``next_offset`` on and increasing; stored as is
    (Kafka's append as follower: no offset assignment, no timestamp rewriting)."""
    buf = records if isinstance(records, (bytes, bytearray)) else memoryview(records).cast("B")
    frames = _frames(buf)
    entries = []
    infos = []
    count = 0
    top = -1
    expected = next_offset
    try:
        for i, b in enumerate(iter_batches(buf, validate_crc=True)):
            if b.size > config.segment_bytes:
                raise MessageTooLarge(f"batch of {b.size} bytes is larger than segment.bytes", i)
            first = b.base_offset
            if first < expected or b.last_offset < first:
                raise InvalidRecord(f"replicated batch offsets {first}-{b.last_offset} do not "
                                    f"follow {expected - 1}", i)
            expected = b.last_offset + 1
            entries.append((b.position, b.last_offset, b.max_timestamp))
            infos.append(BatchInfo(first, b.last_offset, b.producer_id, b.producer_epoch,
                                   b.base_sequence, b.is_transactional, b.is_control))
            count += b.record_count
            top = max(top, b.max_timestamp)
    except KcodecError as exc:
        if isinstance(exc, (InvalidRecord, MessageTooLarge)):
            raise
        raise _decode_failure(exc, "replicated records") from None
    if len(entries) != len(frames):
        raise CorruptMessage("replicated records end inside a batch", len(entries))
    result = AppendResult(infos[0].base_offset, infos[-1].last_offset, -1, top, count, infos)
    return Validated(buf if isinstance(buf, (bytes, bytearray)) else bytes(buf), entries, result)
