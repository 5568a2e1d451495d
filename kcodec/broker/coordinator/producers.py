"""Producer ids and idempotence: the per-partition sequence state of each producer.

``ProducerIds`` hands out ids (InitProducerId): a fresh id for an idempotent producer, and for
a transactional id the same id with the epoch bumped on each call (which fences the older
instance). Ids start from the clock so a restarted broker does not reuse an id.

``ProducerState`` is one partition's table ``producer_id -> (epoch, last 5 batches)``.
Before an append, ``check(batches)`` finds, for each batch of an idempotent producer:

* epoch older than the known one: INVALID_PRODUCER_EPOCH (the producer was fenced);
* a batch equal to one of the last five written (same first and last sequence): a duplicate
  -- nothing appended, and the offset it was written at returned (the Produce handler then
  answers NONE with it, as Kafka does);
* a first sequence other than last sequence + 1 (or 0 after an epoch bump):
  OUT_OF_ORDER_SEQUENCE_NUMBER.

A producer the partition has no state for (new, or expired) may start at any sequence, as
Kafka accepts. After a restart the table is rebuilt from the log
(:func:`kcodec.broker.coordinator.txn_log.rebuild_partition`), and ``ProducerIds.restore`` gets
back each id's newest epoch.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from dataclasses import dataclass, field

from kcodec.protocol import ErrorCode

__all__ = ["ProducerIds", "ProducerState", "SequenceError"]

INT32_MAX = (1 << 31) - 1


class SequenceError(Exception):
    def __init__(self, code: int, message: str, offset: int = -1) -> None:
        super().__init__(message)
        self.error_code = code
        self.offset = offset


class ProducerIds:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._next = int(time.time() * 1000) * 16   # distinct after a restart
        self.transactional: dict[str, tuple[int, int]] = {}   # txn id -> (pid, epoch)
        self.epochs: dict[int, int] = {}                       # pid -> newest epoch

    def init(self, transactional_id: str | None, producer_id: int = -1,
             producer_epoch: int = -1) -> tuple[int, int]:
        with self._lock:
            if transactional_id is None:
                if producer_id >= 0 and self.epochs.get(producer_id) == producer_epoch:
                    epoch = producer_epoch + 1
                    if epoch > 32767:
                        pid, epoch = self._new(), 0
                    else:
                        pid = producer_id
                else:
                    pid, epoch = self._new(), 0
            else:
                known = self.transactional.get(transactional_id)
                if known is None:
                    pid, epoch = self._new(), 0
                else:
                    pid, epoch = known[0], known[1] + 1
                    if epoch > 32767:
                        pid, epoch = self._new(), 0
                self.transactional[transactional_id] = (pid, epoch)
            self.epochs[pid] = epoch
            return pid, epoch

    def restore(self, transactional_id: str | None, pid: int, epoch: int) -> None:
        """After a restart: what the transaction state log (``transactional_id`` given) or a
        partition log (None) says of a producer id, so fencing and KIP-360 bumps go on."""
        with self._lock:
            if transactional_id is not None:
                self.transactional[transactional_id] = (pid, epoch)
            if epoch > self.epochs.get(pid, -1):
                self.epochs[pid] = epoch
            self._next = max(self._next, pid)

    def _new(self) -> int:
        self._next += 1
        return self._next

    def current_epoch(self, pid: int) -> int | None:
        return self.epochs.get(pid)


@dataclass
class _Entry:
    epoch: int
    batches: deque = field(default_factory=lambda: deque(maxlen=5))  # (first, last, base, last_off)

    @property
    def last_seq(self) -> int:
        return self.batches[-1][1] if self.batches else -1


class ProducerState:
    """One partition's producers (the caller holds the partition lock)."""

    def __init__(self) -> None:
        self.producers: dict[int, _Entry] = {}

    def check(self, batches: list, fenced_epoch: int | None = None) -> int | None:
        """Raise SequenceError for a bad set; return the original base offset if the whole set
        is a duplicate of what was written, else None (append it)."""
        dup_offset = None
        pending: dict[int, tuple[int, int]] = {}   # pid -> (epoch, last seq) within this set
        for b in batches:
            base, last, pid, epoch, seq = b[0], b[1], b[2], b[3], b[4]
            if pid < 0:
                continue
            count = last - base + 1
            last_seq = (seq + count - 1) % (INT32_MAX + 1)
            entry = self.producers.get(pid)
            if fenced_epoch is not None and epoch < fenced_epoch:
                raise SequenceError(ErrorCode.INVALID_PRODUCER_EPOCH,
                                    f"producer {pid} epoch {epoch} is older than {fenced_epoch}")
            if pid in pending:
                p_epoch, p_last = pending[pid]
                if epoch != p_epoch or seq != (p_last + 1) % (INT32_MAX + 1):
                    raise SequenceError(ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                                        f"producer {pid}: sequence {seq} after {p_last}")
            elif entry is not None:
                if epoch < entry.epoch:
                    raise SequenceError(ErrorCode.INVALID_PRODUCER_EPOCH,
                                        f"producer {pid} epoch {epoch} is older than {entry.epoch}")
                if epoch == entry.epoch:
                    for first, lst, off, _ in entry.batches:
                        if first == seq and lst == last_seq:
                            dup_offset = off if dup_offset is None else dup_offset
                            break
                    else:
                        want = (entry.last_seq + 1) % (INT32_MAX + 1)
                        if seq != want:
                            raise SequenceError(
                                ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                                f"producer {pid}: sequence {seq}, expected {want}")
                    if dup_offset is not None:
                        continue
                elif seq != 0:
                    raise SequenceError(ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                                        f"producer {pid}: new epoch {epoch} must start at sequence 0, "
                                        f"not {seq}")
            pending[pid] = (epoch, last_seq)
        if dup_offset is not None and pending:
            raise SequenceError(ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                                "a produce set mixes duplicate and new batches")
        return dup_offset

    def update(self, batches: list) -> None:
        """Record appended batches: (base, last, pid, epoch, seq, ...) with final offsets."""
        for b in batches:
            base, last, pid, epoch, seq = b[0], b[1], b[2], b[3], b[4]
            if pid < 0:
                continue
            entry = self.producers.get(pid)
            if entry is None or entry.epoch != epoch:
                entry = self.producers[pid] = _Entry(epoch)
            last_seq = (seq + (last - base)) % (INT32_MAX + 1)
            entry.batches.append((seq, last_seq, base, last))
