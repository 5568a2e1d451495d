"""Log compaction (``cleanup.policy=compact`` and ``compact,delete``): keep the last record
per key.

    cleanable := the segments before the active one, wholly below the high watermark, whose
                 largest timestamp is at least min.compaction.lag.ms old (the first one that is
                 not ends the range)
    latest    := { key: offset of its last record in the cleanable range }   (the offset map)

A pass rewrites each cleanable segment in place (same base offset, same file name):

- a record is dropped when a later record in the cleanable range has its key (it is
  shadowed), or when it is a tombstone (null value) in a segment whose largest timestamp is
  more than ``delete.retention.ms`` old (consumers had that long to see the delete);
- offsets never change: what is dropped leaves a gap; a v2 batch that keeps some records is
  re-encoded with its codec, base offset, producer id/epoch/base sequence, leader epoch,
  timestamp type and original last offset delta; one that keeps none is dropped;
- control batches (transaction markers) and transactional batches are kept whole, and
  transactional records do not enter the offset map, so they never shadow anything. (Kafka
  also removes aborted transactional records and, later, markers with no data left; this
  cleaner keeps them, which keeps more than Kafka but never loses a last value.)
- records without a key are kept (the broker refuses them on a compacted topic, as Kafka
  does, but a topic switched to compact may hold older ones);
- legacy (magic 0/1) messages: an uncompressed one is dropped or kept whole; a compressed
  wrapper is kept whole if any of its records is kept;
- the active segment and anything at or above the high watermark are never touched.

Tombstone timing differs from Kafka 3.1+ (KIP-534 stores a delete horizon in the batch header
when a tombstone is first cleaned); this cleaner measures delete.retention.ms from the
segment's largest timestamp, as time retention does. On disk the new contents are written to
``<base>.log.cleaned``, fsynced and renamed over the segment (a crash leaves the old segment
or the new one, never half of either; a leftover ``.cleaned`` file is removed on load).
"""

from __future__ import annotations

from typing import Any, NamedTuple

from kcodec.records import RecordBatchBuilder, iter_batches
from kcodec.records.header import patch_header

__all__ = ["CleanStats", "clean_segments", "cleanable_segments"]


class CleanStats(NamedTuple):
    segments: int = 0          # segments rewritten
    records: int = 0           # records removed (shadowed or expired tombstones)
    tombstones: int = 0        # of which tombstones
    bytes_before: int = 0
    bytes_after: int = 0
    cleanable_end: int = -1    # one past the last offset of the cleanable range
    tombstones_kept: int = 0   # tombstones still waiting for delete.retention.ms


def cleanable_segments(log: Any, now_ms: int) -> list[Any]:
    cfg = log.config
    hw = log.high_watermark
    out = []
    for seg in log.segments[:-1]:
        if seg.next_offset > hw:
            break
        if cfg.min_compaction_lag_ms > 0 and seg.largest_timestamp > now_ms - cfg.min_compaction_lag_ms:
            break
        out.append(seg)
    return out


def _key(k: Any) -> bytes:
    return k if isinstance(k, bytes) else bytes(k)


def _rebuild_v2(batch: Any, keep: list[Any]) -> bytes:
    b = RecordBatchBuilder(compression=batch.compression, base_offset=batch.base_offset,
                           timestamp_type=batch.timestamp_type, producer_id=batch.producer_id,
                           producer_epoch=batch.producer_epoch, base_sequence=batch.base_sequence,
                           is_transactional=batch.is_transactional,
                           partition_leader_epoch=batch.partition_leader_epoch,
                           max_size=(1 << 31) - 1)
    for r in keep:
        b.append(r.key, r.value, headers=r.headers, timestamp=r.timestamp,
                 offset_delta=r.offset - batch.base_offset)
    out = bytearray(b.build())
    # the original last offset delta stays (the producer's sequence numbers count from it),
    # as Kafka's cleaner keeps it (patch_header recomputes the CRC, which covers it)
    patch_header(out, last_offset_delta=batch.last_offset - batch.base_offset)
    return bytes(out)


def _rewrite(data: bytes, latest: dict[bytes, int], drop_tombstones: bool) -> tuple[bytes, int, int, int]:
    """(new bytes, records removed, tombstones removed, tombstones kept) of one segment."""
    out = bytearray()
    removed = tombs = kept_tombs = 0
    for batch in iter_batches(data, validate_crc=False):
        raw = data[batch.position: batch.position + batch.size]
        if batch.is_control or batch.is_transactional:
            out += raw
            continue
        recs = list(batch)
        keep = []
        for r in recs:
            if r.key is not None and latest.get(_key(r.key), r.offset) != r.offset:
                continue
            if r.value is None and r.key is not None:
                if drop_tombstones:
                    tombs += 1
                    continue
                kept_tombs += 1
            keep.append(r)
        removed += len(recs) - len(keep)
        if len(keep) == len(recs):
            out += raw
        elif not keep:
            continue
        elif batch.magic == 2:
            out += _rebuild_v2(batch, keep)
        else:
            out += raw                # a legacy wrapper with some records kept: whole
            removed -= len(recs) - len(keep)
    return bytes(out), removed, tombs, kept_tombs


def clean_segments(log: Any, now_ms: int) -> CleanStats:
    """One cleaning pass over ``log`` (a PartitionLog; the caller holds its lock)."""
    segs = cleanable_segments(log, now_ms)
    if not segs:
        return CleanStats()
    end = segs[-1].next_offset
    datas = [seg.read_span(0, seg.size) for seg in segs]
    latest: dict[bytes, int] = {}
    for data in datas:
        for batch in iter_batches(data, validate_crc=False):
            if batch.is_control or batch.is_transactional:
                continue
            for r in batch:
                if r.key is not None:
                    latest[_key(r.key)] = r.offset
    horizon = now_ms - log.config.delete_retention_ms
    rewritten = removed = tombs = kept_tombs = before = after = 0
    for seg, data in zip(segs, datas, strict=False):
        new, n, t, k = _rewrite(data, latest, seg.largest_timestamp < horizon)
        kept_tombs += k
        if n:
            before += len(data)
            after += len(new)
            seg.replace(new)
            rewritten += 1
            removed += n
            tombs += t
    return CleanStats(rewritten, removed, tombs, before, after, end, kept_tombs)
