"""What the application sees of a fetched records blob.

A Fetch answer gives each partition a blob of whole batches (and perhaps a partial last
one). Of it the application sees, from its position on: the records of data batches --
never control batches (transaction markers), and under ``read_committed`` not the batches
of aborted transactions either (the answer lists each aborted transaction's producer id
and first offset; it ends at that producer's ABORT marker).

    Fetched       one partition's blob, decoded lazily by poll
    Visibility    which batches of a blob are shown, in offset order
    decode        a blob's visible records from a position (Record objects)
    visible_blob  the visible batches' bytes, for decode_columns
    trim_columns  columns without their rows below a position
"""

from __future__ import annotations

from typing import Any

from kcodec.client.structs import TopicPartition
from kcodec.errors import KcodecError

__all__ = ["Fetched", "Visibility", "decode", "visible_blob", "trim_columns"]


class Fetched:
    """One partition's records blob from a Fetch, decoded lazily by ``poll``."""

    __slots__ = ("tp", "offset", "data", "aborted", "epoch", "records", "pos", "next_offset")

    def __init__(self, tp: TopicPartition, offset: int, data: bytes | bytearray | memoryview,
                 aborted: Any, epoch: int) -> None:
        self.tp, self.offset, self.data, self.aborted, self.epoch = tp, offset, data, aborted, epoch
        self.records: list | None = None
        self.pos = 0
        self.next_offset = offset


class Visibility:
    """Which batches of one blob the application sees: control batches never; under
    ``read_committed`` not the batches of aborted transactions either.

    ``aborted`` is the partition's (producer_id, first_offset) list from the Fetch
    response; batches must be shown in offset order. A producer's transaction is aborted
    from its listed first offset up to its ABORT marker (a control batch)."""

    __slots__ = ("pending", "pids", "read_committed")

    def __init__(self, aborted: Any, read_committed: bool) -> None:
        self.read_committed = read_committed
        self.pending = sorted(((a.first_offset, a.producer_id) for a in (aborted or [])),
                              reverse=True) if read_committed else []
        self.pids: set[int] = set()

    def hidden(self, b: Any) -> bool:
        if not self.read_committed:
            return bool(b.is_control)
        pending = self.pending
        while pending and pending[-1][0] <= b.last_offset:
            self.pids.add(pending.pop()[1])
        if b.is_control:
            if b.is_transactional:
                self.pids.discard(b.producer_id)   # the marker ends the transaction
            return True
        return bool(b.is_transactional and b.producer_id in self.pids)


def decode(f: Fetched, position: int, check: bool, read_committed: bool) -> tuple[list, int]:
    """Records of ``f`` at or after ``position``, control batches hidden, aborted ones dropped."""
    from kcodec.records import iter_batches

    out: list = []
    nxt = position
    vis = Visibility(f.aborted, read_committed)
    for b in iter_batches(f.data, validate_crc=check):
        if b.next_offset <= position:
            continue
        nxt = max(nxt, b.next_offset)
        if vis.hidden(b):
            continue
        recs = b.records() if hasattr(b, "records") and callable(b.records) else list(b)
        if recs and recs[0].offset < position:
            recs = [r for r in recs if r.offset >= position]
        out.extend(recs)
    return out, nxt


def visible_blob(f: Fetched, read_committed: bool) -> tuple[Any, int | None]:
    """(the bytes ``decode_columns`` should see, the offset after the blob's last complete
    batch or None). Without aborted transactions to drop that is the blob itself (control
    batches are skipped by ``decode_columns``); otherwise the visible batches joined."""
    from kcodec.records import iter_batches

    if not (read_committed and f.aborted):
        return f.data, None
    vis = Visibility(f.aborted, True)
    view = memoryview(f.data)
    keep: list[Any] = []
    nxt: int | None = None
    dropped = False
    it = iter_batches(view, validate_crc=False)
    try:
        for b in it:
            nxt = b.next_offset if nxt is None else max(nxt, b.next_offset)
            if vis.hidden(b) and not b.is_control:
                dropped = True
                continue
            keep.append(view[b.position:b.position + b.size])
    except KcodecError:
        return f.data, None    # malformed: let decode_columns report it
    if not dropped:
        return f.data, None
    return b"".join(keep), nxt


def trim_columns(cols: Any, position: int) -> Any:
    """``cols`` without its rows below offset ``position`` (buffers shared, not copied)."""
    import numpy as np

    from kcodec._columnar import BinaryColumn, HeadersColumn, RecordColumns

    start = int(np.searchsorted(cols.offset, position))

    def binary(c: BinaryColumn) -> BinaryColumn:
        validity = None
        nulls = 0
        if c.validity is not None:
            valid = c.valid[start:]
            nulls = int(len(valid) - valid.sum())
            validity = np.packbits(valid, bitorder="little") if nulls else None
        return BinaryColumn(c.offsets[start:], c.data, validity, nulls, c.utf8)

    h = cols.headers
    headers = HeadersColumn(h.offsets[start:], h.keys, h.values)
    return RecordColumns(cols.offset[start:], cols.timestamp[start:], cols.timestamp_type[start:],
                         binary(cols.key), binary(cols.value), headers,
                         None if cols.is_control is None else cols.is_control[start:],
                         cols.consumed, cols.batch_count, cols.next_offset)
