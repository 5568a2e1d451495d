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
last line is dropped; the file is rewritten compacted (one line per id) on every load.

``rebuild_partition`` walks one partition log's batch headers after a restart and rebuilds
what Kafka keeps in its producer-state snapshots: each producer's last sequences (for
idempotence), each producer's newest epoch, the transactions still open (the first offset of
each: the last stable offset) and any ABORT marker missing from the ``.txnindex`` (a broker
killed between writing the marker and its index entry).
"""

from __future__ import annotations

import json
import logging
import os
from typing import Any

from kcodec.broker.log import peek_batches
from kcodec.records import iter_batches

__all__ = ["TxnStateLog", "rebuild_partition"]

log = logging.getLogger("kcodec.broker")

FILE = "transaction_state.jsonl"
_CHUNK = 1 << 20


class TxnStateLog:
    """Append-only JSON lines of transaction states (memory-only when ``data_dir`` is None)."""

    def __init__(self, data_dir: str | None) -> None:
        self.path = None if data_dir is None else os.path.join(data_dir, FILE)
        self._file: Any = None

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
        tmp = self.path + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            f.write("".join(json.dumps(r) + "\n" for r in states.values()))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)
        self._file = open(self.path, "a", encoding="utf-8")
        return states

    def write(self, rec: dict) -> None:
        if self._file is not None:
            self._file.write(json.dumps(rec) + "\n")
            self._file.flush()      # in the page cache: survives the process being killed

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


def rebuild_partition(plog: Any, producers: Any, txns: Any, epochs: dict[int, int]) -> int:
    """Walk ``plog`` from its start: fill ``producers`` (a ProducerState), ``txns`` (the
    partition's PartitionTxns: open transactions, missing abort index entries) and
    ``epochs`` (pid -> newest epoch seen). Returns the number of batches read."""
    offset = plog.log_start_offset
    end = plog.log_end_offset
    n = 0
    while offset < end:
        data = plog.read(offset, _CHUNK)
        if not data:
            break
        pos = 0
        last = offset - 1
        for info in peek_batches(data):
            size = int.from_bytes(data[pos + 8:pos + 12], "big") + 12
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
