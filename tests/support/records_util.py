"""Helpers for the record tests: hand-assembled batches and twin-neutral outcomes."""

from __future__ import annotations

import struct
import zlib
from typing import Any

import crc32c as _crc32c_pkg


def crc32c(data: bytes) -> int:
    return _crc32c_pkg.crc32c(data)


def zz(v: int) -> bytes:
    """Zigzag varint bytes, written independently of kcodec."""
    u = (v << 1) ^ (v >> 63)
    u &= (1 << 64) - 1
    out = bytearray()
    while u > 0x7F:
        out.append((u & 0x7F) | 0x80)
        u >>= 7
    out.append(u)
    return bytes(out)


def record(body_fields: bytes) -> bytes:
    return zz(len(body_fields)) + body_fields


def simple_record(offset_delta: int, ts_delta: int, key: bytes | None, value: bytes | None,
                  headers: list[tuple[bytes, bytes | None]] = ()) -> bytes:
    body = b"\x00" + zz(ts_delta) + zz(offset_delta)
    for part in (key, value):
        body += zz(-1) if part is None else zz(len(part)) + part
    body += zz(len(headers))
    for k, v in headers:
        body += zz(len(k)) + k + (zz(-1) if v is None else zz(len(v)) + v)
    return record(body)


def v2(records: bytes, count: int, *, base_offset: int = 0, attributes: int = 0,
       last_offset_delta: int | None = None, first_ts: int = 0, max_ts: int | None = None,
       producer_id: int = -1, producer_epoch: int = -1, base_sequence: int = -1,
       leader_epoch: int = 0, length: int | None = None, magic: int = 2,
       crc: int | None = None) -> bytes:
    """A v2 batch around ``records`` (already compressed if attributes say so)."""
    if last_offset_delta is None:
        last_offset_delta = max(count - 1, 0)
    if max_ts is None:
        max_ts = first_ts
    tail = struct.pack(">hiqqqhii", attributes, last_offset_delta, first_ts, max_ts,
                       producer_id, producer_epoch, base_sequence, count) + records
    if crc is None:
        crc = crc32c(tail)
    if length is None:
        length = 4 + 1 + 4 + len(tail)
    return struct.pack(">qiibI", base_offset, length, leader_epoch, magic, crc) + tail


def legacy(magic: int, offset: int, key: bytes | None, value: bytes | None, *,
           attributes: int = 0, ts: int = 0, crc: int | None = None) -> bytes:
    body = bytes((magic, attributes & 0xFF))
    if magic == 1:
        body += struct.pack(">q", ts)
    for part in (key, value):
        body += b"\xff\xff\xff\xff" if part is None else struct.pack(">i", len(part)) + part
    if crc is None:
        crc = zlib.crc32(body)
    return struct.pack(">qiI", offset, len(body) + 4, crc) + body


def rec_tuple(r: Any) -> tuple:
    t = (r.offset, r.timestamp, r.timestamp_type, r.key, r.value, r.headers, r.attributes,
         r.is_control)
    if r.is_control:
        t += (r.control_type, r.version, r.coordinator_epoch)
    return t


BATCH_FIELDS = ("position", "base_offset", "last_offset", "magic", "crc", "attributes",
                "compression", "timestamp_type", "is_transactional", "is_control",
                "partition_leader_epoch", "first_timestamp", "max_timestamp", "producer_id",
                "producer_epoch", "base_sequence", "size")


def err(e: BaseException) -> tuple:
    return ("error", type(e).__name__, str(e))


def outcome(batch_mod: Any, data: bytes, validate: bool = True, limit: int | None = None,
            max_steps: int = 1000) -> list:
    """Everything iterating ``data`` produces, errors included, in a twin-neutral form."""
    kw = {} if limit is None else {"max_decompressed_size": limit}
    it = batch_mod.iter_batches(data, validate_crc=validate, **kw)
    out: list = []
    for _ in range(max_steps):
        try:
            b = next(it)
        except StopIteration:
            break
        except Exception as e:  # noqa: BLE001 - the error is the outcome
            out.append(err(e))
            continue
        fields = []
        for name in BATCH_FIELDS:
            try:
                fields.append(getattr(b, name))
            except Exception as e:  # noqa: BLE001 - a wrapper's base offset decompresses
                fields.append(err(e))
        try:
            fields.append(b.validate_crc())
            fields.append(("count", b.record_count))
            fields.append([rec_tuple(r) for r in b])
        except Exception as e:  # noqa: BLE001
            fields.append(err(e))
        out.append(tuple(fields))
    out.append(("end", it.consumed, it.incomplete))
    return out
