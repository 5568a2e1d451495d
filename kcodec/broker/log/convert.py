"""Down-conversion for old fetchers: v2 batches served as magic 0/1 message sets.

A Fetch request below version 4 cannot carry v2 batches (v0-v1: magic 0 only, v2-v3: magic
0 or 1). Kafka 3.x converts what it reads before answering such a fetch; so does this:

    to_magic := 0 for Fetch v0-v1 | 1 for Fetch v2-v3 | 2 (nothing to do) from v4

- entries already at or below ``to_magic`` are kept byte for byte;
- a v2 control batch (a transaction marker) is dropped; record headers are dropped (legacy
  messages have none);
- an uncompressed v2 batch becomes one message per record, each with its own offset; the
  records below ``first_offset`` (the fetch offset) are left out;
- a compressed one becomes one wrapper message with the same codec holding all its records
  (magic 1: relative inner offsets, the wrapper carrying the last offset; magic 0: absolute
  offsets), as a legacy producer would have written it;
- a LogAppendTime batch keeps its timestamp type and stamps every message with the batch's
  max timestamp; magic 0 carries no timestamps;
- zstd cannot be expressed below magic 2: UnsupportedCompressionType, which Kafka answers
  with for the partition (UNSUPPORTED_COMPRESSION_TYPE).
"""

from __future__ import annotations

from typing import Any

from kcodec.broker.log.errors import CorruptMessage, UnsupportedCompressionType
from kcodec.errors import KcodecError
from kcodec.records import MessageSetBuilder, iter_batches

__all__ = ["down_convert", "magic_for_fetch_version"]


def magic_for_fetch_version(version: int) -> int:
    """The highest record format a Fetch response of ``version`` may carry."""
    if version <= 1:
        return 0
    if version <= 3:
        return 1
    return 2


def down_convert(records: Any, to_magic: int, first_offset: int = 0) -> bytes:
    """``records`` (whole batches, as ``PartitionLog.read`` returns them) with every entry
    above ``to_magic`` rewritten as legacy messages (see the module doc)."""
    if to_magic >= 2:
        return bytes(records)
    if to_magic not in (0, 1):
        raise ValueError(f"to_magic must be 0, 1 or 2, not {to_magic}")
    out = bytearray()
    view = memoryview(records).cast("B") if not isinstance(records, bytes) else records
    try:
        for batch in iter_batches(view, validate_crc=False):
            if batch.magic <= to_magic:
                out += view[batch.position: batch.position + batch.size]
                continue
            if batch.is_control:
                continue
            codec = batch.compression
            if codec == 4:
                raise UnsupportedCompressionType(
                    f"a zstd batch (offsets {batch.base_offset}-{batch.last_offset}) cannot "
                    f"be converted to magic {to_magic}")
            recs = [r for r in batch if codec or r.offset >= first_offset]
            if not recs:
                continue
            ts_type = 1 if batch.timestamp_type == 1 and to_magic == 1 else 0
            base = recs[0].offset
            b = MessageSetBuilder(magic=to_magic, compression=codec, base_offset=base,
                                  timestamp_type=ts_type, max_size=(1 << 31) - 1)
            for r in recs:
                b.append(r.key, r.value, timestamp=r.timestamp if to_magic else None,
                         offset_delta=r.offset - base)
            out += b.build()
    except UnsupportedCompressionType:
        raise
    except KcodecError as exc:
        raise CorruptMessage(f"cannot down-convert the records: {exc}") from None
    return bytes(out)
