"""The transaction coordinator's state on disk, and the partition state rebuilt from the logs.

``TxnStateLog`` is the data dir's ``transaction_state.jsonl``, the equivalent of Kafka's
``__transaction_state`` topic: one JSON line per state change of a transactional id, the
newest line winning::

    {"id": "tx-1", "pid": 17, "epoch": 3, "timeout": 60000, "state": "Ongoing",
     "started": 1732400000000, "parts": [["t", 0], ...], "groups": ["g"],
     "offsets": {"g": [["t", 0, 42, -1, null], ...]}}

It is written before the coordinator answers (``Ongoing`` when partitions or a group are
added, ``PrepareCommit``/``PrepareAbort`` before the first marker, ``CompleteCommit``/
``CompleteAbort`` after the last), so a broker killed at any point finds on restart either
the transaction still open (the timer aborts it when its timeout has passed since it began,
or its producer goes on and ends it) or a decision whose markers it finishes writing. A torn
last line is dropped; the file is rewritten compacted (one line per id) on every load, and
while running whenever it holds more than four lines per live id (and at least 10,000).

``rebuild_partition`` walks one partition log's batch headers after a restart and rebuilds
what Kafka keeps in its producer-state snapshots: each producer's last sequences (for
idempotence), each producer's newest epoch, the transactions still open (the first offset of
each: the last stable offset) and any ABORT marker missing from the ``.txnindex`` (a broker
killed between writing the marker and its index entry).

A clean stop writes that state for every partition to ``producer_snapshot.json`` (with the
log end offset and topic id it holds for), so the next start reads only what was appended
after it; the file is removed once read, so a later crash falls back to reading the logs
whole. A snapshot entry for a partition whose log ends before its offset, or whose topic id
changed (deleted and created again), is ignored.
"""

from __future__ import annotations

import json
import logging
import os
from typing import Any

from kcodec.broker.log import peek_batches
from kcodec.records import iter_batches
from kcodec.records.header import ENTRY_OVERHEAD, entry_length

__all__ = ["TxnStateLog", "rebuild_partition", "write_snapshot", "read_snapshot",
           "restore_partition"]

log = logging.getLogger(__name__)

FILE = "transaction_state.jsonl"
SNAPSHOT = "producer_snapshot.json"
_CHUNK = 1 << 20


class TxnStateLog:
    """Append-only JSON lines of transaction states (memory-only when ``data_dir`` is None)."""

    def __init__(self, data_dir: str | None) -> None:
        self.path = None if data_dir is None else os.path.join(data_dir, FILE)
        self._file: Any = None
        self.latest: dict[str, dict] = {}
        self._lines = 0

    def load(self) -> dict[str, dict]:
        """The newest state of every transactional id; opens the file for appending."""
        if self.path is None:
            return {}
        states: dict[str, dict] = {}
        if os.path.exists(self.path):
            with open(self.path, encoding="utf-8") as f:
                for line in f:
                    try:
                        rec = json.loads(line)
                        states[rec["id"]] = rec
                    except (ValueError, KeyError, TypeError):
                        continue   # a torn last line after a crash
        self.latest = dict(states)
        self._compact()
        return states

    def _compact(self) -> None:
        if self.path is None:
            return
        if self._file is not None:
            self._file.close()
        tmp = self.path + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            f.write("".join(json.dumps(r) + "\n" for r in self.latest.values()))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)
        self._lines = len(self.latest)
        self._file = open(self.path, "a", encoding="utf-8")

    def write(self, rec: dict) -> None:
        if self._file is not None:
            self.latest[rec["id"]] = rec
            self._file.write(json.dumps(rec) + "\n")
            self._file.flush()      # in the page cache: survives the process being killed
            self._lines += 1
            if self._lines > max(10_000, 4 * len(self.latest)):
                self._compact()

    def close(self) -> None:
        if self._file is not None:
            self._file.flush()
            os.fsync(self._file.fileno())
            self._file.close()
            self._file = None


def _control_type(data: Any) -> int:
    for batch in iter_batches(data, validate_crc=False):
        for rec in batch:
            return int(rec.control_type)
    return -1


def rebuild_partition(plog: Any, producers: Any, txns: Any, epochs: dict[int, int],
                      start: int | None = None) -> int:
    """Walk ``plog`` from its start (or ``start``): fill ``producers`` (a ProducerState),
    ``txns`` (the partition's PartitionTxns: open transactions, missing abort index entries)
    and ``epochs`` (pid -> newest epoch seen). Returns the number of batches read."""
    offset = plog.log_start_offset if start is None else max(start, plog.log_start_offset)
    end = plog.log_end_offset
    n = 0
    while offset < end:
        data = plog.read(offset, _CHUNK)
        if not data:
            break
        pos = 0
        last = offset - 1
        for info in peek_batches(data):
            size = entry_length(data, pos) + ENTRY_OVERHEAD
            n += 1
            last = info.last_offset
            pid = info.producer_id
            if pid >= 0:
                if info.producer_epoch > epochs.get(pid, -1):
                    epochs[pid] = info.producer_epoch
                if info.is_control:
                    first = txns.open.pop(pid, None)
                    if first is not None and _control_type(data[pos:pos + size]) == 0:
                        _index_abort(plog, txns, pid, first, info.base_offset)
                else:
                    producers.update([info])
                    if info.is_transactional:
                        txns.open.setdefault(pid, info.base_offset)
            pos += size
        offset = last + 1
    return n


def _index_abort(plog: Any, txns: Any, pid: int, first: int, marker: int) -> None:
    """Add the index entry of an ABORT marker at ``marker`` unless it is there."""
    if any(p == pid and f == first for p, f in txns.index.aborted_between(marker, marker + 1)):
        return
    seg = None
    for s in plog.segments:
        if s.base_offset <= marker:
            seg = s
    if seg is None:
        return
    log.info("kcodec broker: %s-%d: abort marker at %d was not indexed; indexing it",
             plog.topic, plog.partition, marker)
    txns.index.append(seg, pid, first, marker, min(txns.open.values(), default=marker + 1))


# ---------------------------------------------------------------------- snapshots
def write_snapshot(data_dir: str, partitions: list[tuple[Any, Any, Any]],
                   epochs: dict[int, int]) -> None:
    """``partitions``: (topic id, Partition, PartitionTxns); written atomically."""
    entries = {}
    for topic_id, part, txns in partitions:
        with part.lock:
            entries[f"{part.topic}/{part.index}"] = {
                "topic_id": str(topic_id), "offset": part.log.log_end_offset,
                "producers": {str(pid): [e.epoch, [list(b) for b in e.batches]]
                              for pid, e in part.producers.producers.items()},
                "open": {str(pid): first for pid, first in txns.open.items()}}
    path = os.path.join(data_dir, SNAPSHOT)
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump({"partitions": entries, "epochs": {str(k): v for k, v in epochs.items()}}, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def read_snapshot(data_dir: str | None) -> dict:
    """The snapshot of the last clean stop ({} if none or unreadable), removing the file."""
    if data_dir is None:
        return {}
    path = os.path.join(data_dir, SNAPSHOT)
    try:
        with open(path, encoding="utf-8") as f:
            snap = json.load(f)
    except FileNotFoundError:
        return {}
    except (OSError, ValueError):
        snap = {}
    try:
        os.unlink(path)
    except OSError:
        pass
    return snap if isinstance(snap, dict) else {}


def restore_partition(entry: Any, topic_id: Any, plog: Any, producers: Any, txns: Any) -> int | None:
    """Load one partition's snapshot entry; the offset to scan the log from, or None when
    the entry does not fit this log (read it whole)."""
    from kcodec.broker.coordinator.producers import _Entry

    try:
        if entry["topic_id"] != str(topic_id) or not 0 <= int(entry["offset"]) <= \
                plog.log_end_offset:
            return None
        table = {}
        for pid, (epoch, batches) in entry["producers"].items():
            e = _Entry(int(epoch))
            e.batches.extend(tuple(int(x) for x in b) for b in batches)
            table[int(pid)] = e
        opened = {int(pid): int(first) for pid, first in entry["open"].items()}
    except (KeyError, TypeError, ValueError, AttributeError):
        return None
    producers.producers.update(table)
    txns.open.update(opened)
    return int(entry["offset"])
