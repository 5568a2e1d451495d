"""The transaction coordinator: transactional ids, their partitions and groups, markers.

One ``TxnCoordinator`` per cluster (the cluster is one process, so the coordinator of a
transactional id writes the markers into the partitions itself, where Kafka sends
WriteTxnMarkers to the leaders):

* ``init`` (InitProducerId with a transactional id): an open transaction of the id is aborted
  (its markers written), then the epoch is bumped, which fences the older producer;
* ``add_partitions`` / ``add_offsets`` open the transaction (Empty -> Ongoing) and start its
  timeout; an epoch other than the current one is PRODUCER_FENCED;
* ``end`` writes a COMMIT or ABORT control batch into every partition of the transaction and,
  on commit, moves the offsets sent with TxnOffsetCommit into the group; retrying the same
  end after it completed answers 0, as Kafka does;
* a transaction open longer than its timeout is aborted by the timer and the epoch bumped,
  so the producer's next call is fenced.

Transactions v2 (KIP-890 part 2), when the cluster's ``transaction.version`` is 2: a
partition joins the transaction when its leader receives the producer's first transactional
Produce (v12+: ``add_implicit``, no AddPartitionsToTxn round trip), a group when its
coordinator receives TxnOffsetCommit v5 (no AddOffsetsToTxn); EndTxn v5 bumps the epoch (a
new producer id when the epoch would overflow), writes the markers with the new epoch -- a
zombie's late batch of the old epoch is then fenced -- and answers the new id and epoch; a
retry of that EndTxn (the old epoch, the same outcome) gets the same answer. Producers of the
first generation (AddPartitionsToTxn, EndTxn v0-4) are served as before, side by side.

Two-phase commit (KIP-939), when ``transaction.two.phase.commit.enable`` is on: a producer
that asks for it in InitProducerId v6 gets a transaction that never times out (its outcome is
decided outside Kafka); ``keep_prepared`` (keepPreparedTxn) leaves an open transaction open,
fences its producer with a new epoch and answers the identity the transaction was written
under, which the new producer compares with what the external coordinator recorded before
committing or aborting it with EndTxn. When the id has no epoch left, the new producer gets a
new producer id (epoch 0), as Kafka does, and the kept transaction's markers are written
under its old id with the last epoch.

Every state change is written to the data dir's transaction state log before the answer
(:mod:`kcodec.broker.coordinator.txn_log`); ``recover()`` at start-up rebuilds each partition's
producers and open transactions from its log, reloads the transactional ids and finishes what
a killed broker left: a decided transaction (``PrepareCommit``/``PrepareAbort``) gets its
remaining markers, an open one gets its timer back (counted from when it began) and its
producer may go on, add partitions, commit or abort, or be fenced by a new instance.

``write_marker`` is also what WriteTxnMarkers (the inter-broker API that admin tools use to
abort a hanging transaction) runs per partition.

Per partition, ``PartitionTxns`` keeps the first offset of each open transaction (the last
stable offset is the smallest of them, else the high watermark) and the partition log's
aborted-transactions index (:mod:`kcodec.broker.log.txnindex`, ``.txnindex`` files kept
through the log's segment hooks) that read_committed fetches are told about, so they can
drop the aborted records.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field, replace
from typing import Any

from kcodec.broker.coordinator.txn_log import (
    TxnStateLog,
    read_snapshot,
    rebuild_partition,
    restore_partition,
    write_snapshot,
)
from kcodec.broker.log import LogError
from kcodec.broker.log.txnindex import TxnIndex
from kcodec.broker.state import now_ms
from kcodec.protocol import ErrorCode as E
from kcodec.records import ControlType, RecordBatchBuilder

__all__ = ["TxnCoordinator", "PartitionTxns", "MAX_TIMEOUT_MS", "write_marker"]

log = logging.getLogger(__name__)
MAX_TIMEOUT_MS = 15 * 60_000   # transaction.max.timeout.ms
NO_TIMEOUT_MS = (1 << 31) - 1  # a two-phase-commit transaction's timeout: it never expires
MAX_EPOCH = 32767


class PartitionTxns:
    """One partition's open transactions and its aborted-transactions index (the caller
    holds the partition lock)."""

    def __init__(self, index: TxnIndex | None = None) -> None:
        self.open: dict[int, int] = {}                       # pid -> first offset
        self.index = index if index is not None else TxnIndex()

    def on_append(self, batches: list) -> None:
        for b in batches:
            if b.is_transactional and not b.is_control and b.producer_id >= 0:
                self.open.setdefault(b.producer_id, b.base_offset)

    def stable_offset(self, high_watermark: int) -> int:
        return min(min(self.open.values(), default=high_watermark), high_watermark)

    def aborted_between(self, start: int, end: int) -> list[tuple[int, int]]:
        """``(pid, first offset)`` of aborted transactions with records in [start, end)."""
        return self.index.aborted_between(start, end)


@dataclass
class _Txn:
    transactional_id: str
    producer_id: int
    epoch: int
    timeout_ms: int
    state: str = "Empty"                  # Empty, Ongoing, CompleteCommit, CompleteAbort
    partitions: set = field(default_factory=set)
    groups: set = field(default_factory=set)
    offsets: dict = field(default_factory=dict)   # group -> {(t, p): (offset, epoch, meta)}
    started_ms: int = 0
    token: int = 0
    v2: bool = False                      # this transaction runs the v2 protocol (KIP-890)
    last: tuple[int, int] = (-1, -1)      # (pid, epoch) a v2 end was asked with: its retries
    ongoing: tuple[int, int] = (-1, -1)   # (pid, epoch) of a kept prepared transaction (KIP-939)
    next: tuple[int, int] = (-1, -1)      # a v2 end's new (pid, epoch) after an epoch overflow

    @property
    def two_phase(self) -> bool:
        return self.timeout_ms == NO_TIMEOUT_MS

    def record(self) -> dict:
        """The JSON line of this state (transaction_state.jsonl)."""
        return {"id": self.transactional_id, "pid": self.producer_id, "epoch": self.epoch,
                "timeout": self.timeout_ms, "state": self.state, "started": self.started_ms,
                "parts": sorted([t, p] for t, p in self.partitions), "groups": sorted(self.groups),
                "offsets": {g: [[t, p, o, e, m] for (t, p), (o, e, m) in sorted(offs.items())]
                            for g, offs in self.offsets.items()},
                "v2": self.v2, "last": list(self.last), "ongoing": list(self.ongoing),
                "next": list(self.next)}

    @classmethod
    def from_record(cls, rec: dict) -> _Txn:
        t = cls(rec["id"], int(rec["pid"]), int(rec["epoch"]), int(rec["timeout"]),
                str(rec["state"]), {(tp[0], int(tp[1])) for tp in rec.get("parts", [])},
                set(rec.get("groups", [])), started_ms=int(rec.get("started", 0)))
        t.offsets = {g: {(x[0], int(x[1])): (int(x[2]), int(x[3]), x[4]) for x in offs}
                     for g, offs in rec.get("offsets", {}).items()}
        t.v2 = bool(rec.get("v2", False))
        last, ongoing = rec.get("last") or (-1, -1), rec.get("ongoing") or (-1, -1)
        nxt = rec.get("next") or (-1, -1)
        t.last, t.ongoing = (int(last[0]), int(last[1])), (int(ongoing[0]), int(ongoing[1]))
        t.next = (int(nxt[0]), int(nxt[1]))
        return t


class TxnCoordinator:
    def __init__(self, cluster: Any) -> None:
        self.cluster = cluster
        self.lock = threading.RLock()
        self.txns: dict[str, _Txn] = {}
        self.by_pid: dict[int, _Txn] = {}
        self._parts: dict[tuple[str, int], PartitionTxns] = {}
        self._parts_lock = threading.Lock()
        self.state_log = TxnStateLog(cluster.data_dir)
        self.recovered: dict[str, int] = {}    # what recover() read (partitions, batches)
        # every partition log gets its aborted-transactions index as a segment hook (a
        # restarted cluster replaces the factory of its previous coordinator)
        hooks = cluster.state.logs.segment_hooks
        hooks[:] = [h for h in hooks if not isinstance(getattr(h, "__self__", None), TxnCoordinator)]
        hooks.append(self.index_for)

    # ------------------------------------------------------------------ partitions
    def index_for(self, topic: str, index: int) -> TxnIndex:
        """The segment hook factory: a new log of (topic, index) gets a fresh index."""
        pt = PartitionTxns()
        with self._parts_lock:
            self._parts[(topic, index)] = pt
        return pt.index

    def partition(self, topic: str, index: int) -> PartitionTxns:
        key = (topic, index)
        with self._parts_lock:
            pt = self._parts.get(key)
            if pt is None:
                pt = self._parts[key] = PartitionTxns()
            return pt

    def stable_offset(self, topic: str, index: int, high_watermark: int) -> int:
        pt = self._parts.get((topic, index))
        return high_watermark if pt is None else pt.stable_offset(high_watermark)

    def aborted(self, topic: str, index: int, start: int, end: int) -> list[tuple[int, int]]:
        pt = self._parts.get((topic, index))
        return [] if pt is None else pt.aborted_between(start, end)

    def forget_topic(self, topic: str) -> None:
        with self._parts_lock:
            for key in [k for k in self._parts if k[0] == topic]:
                del self._parts[key]

    # ------------------------------------------------------------------ producer ids
    def init(self, transactional_id: str, timeout_ms: int, producer_id: int = -1,
             producer_epoch: int = -1, two_phase: bool = False,
             keep_prepared: bool = False) -> tuple[int, int, int, int, int]:
        """``(error, producer id, epoch, ongoing pid, ongoing epoch)`` for InitProducerId
        with a transactional id; a producer that names its current id and epoch (KIP-360,
        after an abortable error) must name the newest ones, else it is fenced.

        ``two_phase`` (KIP-939): the transactions never time out. ``keep_prepared``: an open
        transaction is kept (not aborted); its producer is fenced by the new epoch and the
        identity it was written under is answered as the ongoing one (-1, -1: none open)."""
        if two_phase:
            timeout_ms = NO_TIMEOUT_MS
        elif not 0 < timeout_ms <= MAX_TIMEOUT_MS:
            return E.INVALID_TRANSACTION_TIMEOUT, -1, -1, -1, -1
        with self.lock:
            t = self.txns.get(transactional_id)
            if producer_id >= 0 and t is not None and \
                    (producer_id, producer_epoch) != (t.producer_id, t.epoch):
                return E.PRODUCER_FENCED, -1, -1, -1, -1
            kept = keep_prepared and t is not None and t.state == "Ongoing"
            if t is not None and t.state == "Ongoing" and not kept:
                self._complete(t, commit=False)
            if kept and t is not None and t.ongoing == (-1, -1):
                t.ongoing = (t.producer_id, t.epoch)
            pid, epoch = self.cluster.producer_ids.init(transactional_id)
            if t is None:
                t = self.txns[transactional_id] = _Txn(transactional_id, pid, epoch, timeout_ms)
            else:
                # a kept transaction past the id's last epoch (Kafka's answer too): the new
                # producer gets a new id at epoch 0 and completes the transaction with it;
                # its markers go out under the id its records were written with (ongoing)
                self.by_pid.pop(t.producer_id, None)
                t.producer_id, t.epoch, t.timeout_ms = pid, epoch, timeout_ms
                if not kept:
                    t.state = "Empty"
                    t.ongoing = (-1, -1)
                t.last = (-1, -1)
            self.by_pid[pid] = t
            if kept and not t.two_phase:
                self._arm(t, t.started_ms + t.timeout_ms - now_ms())
            self._save(t)
            return 0, pid, epoch, *(t.ongoing if kept else (-1, -1))

    def _check(self, transactional_id: str, pid: int, epoch: int) -> tuple[int, _Txn | None]:
        t = self.txns.get(transactional_id)
        if t is None:
            return E.INVALID_PRODUCER_ID_MAPPING, None
        if t.producer_id != pid:
            return E.INVALID_PRODUCER_ID_MAPPING, None
        if t.epoch != epoch:
            return E.PRODUCER_FENCED, None
        return 0, t

    def _open(self, t: _Txn, v2: bool = False) -> None:
        if t.state != "Ongoing":
            t.state = "Ongoing"
            t.partitions, t.groups, t.offsets = set(), set(), {}
            t.started_ms = now_ms()
            t.v2 = v2
            t.last = (-1, -1)
            if not t.two_phase:
                self._arm(t, t.timeout_ms)

    def _arm(self, t: _Txn, delay_ms: int) -> None:
        t.token += 1
        token = t.token
        timer = self.cluster.timer
        if timer is not None:
            timer.call_later(max(delay_ms, 0) / 1000, lambda: self._expire(t, token))

    def _save(self, t: _Txn) -> None:
        self.state_log.write(t.record())

    # ------------------------------------------------------------------ admin views
    def views(self) -> list[_Txn]:
        """A copy of every transactional id's state (ListTransactions)."""
        with self.lock:
            return [self._copy(t) for t in self.txns.values()]

    def view(self, transactional_id: str) -> _Txn | None:
        """A copy of one transactional id's state (DescribeTransactions), or None."""
        with self.lock:
            t = self.txns.get(transactional_id)
            return None if t is None else self._copy(t)

    @staticmethod
    def _copy(t: _Txn) -> _Txn:
        return replace(t, partitions=set(t.partitions), groups=set(t.groups), offsets={})

    # ------------------------------------------------------------------ the APIs
    def add_partitions(self, transactional_id: str, pid: int, epoch: int,
                       partitions: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
        state = self.cluster.state
        with self.lock:
            code, t = self._check(transactional_id, pid, epoch)
            if t is None:
                return {tp: code for tp in partitions}
            missing = {tp for tp in partitions if state.partition(*tp) is None}
            if missing:
                return {tp: (E.UNKNOWN_TOPIC_OR_PARTITION if tp in missing
                             else E.OPERATION_NOT_ATTEMPTED) for tp in partitions}
            fresh = t.state != "Ongoing"
            self._open(t)
            if fresh or not t.partitions.issuperset(partitions):
                t.partitions.update(partitions)
                self._save(t)
            return {tp: 0 for tp in partitions}

    def add_implicit(self, transactional_id: str, pid: int, epoch: int,
                     topic: str, index: int) -> int:
        """Transactions v2: a Produce (v12+) of a transactional batch adds its partition to
        the transaction (opening it), as the partition leader does in Kafka 4.x. Errors:
        INVALID_PRODUCER_ID_MAPPING, PRODUCER_FENCED (an older epoch), INVALID_TXN_STATE (a
        transaction of the first generation is open under this epoch)."""
        with self.lock:
            code, t = self._check(transactional_id, pid, epoch)
            if t is None:
                return code
            if (topic, index) in t.partitions and t.state == "Ongoing":
                return 0
            if t.state == "Ongoing" and not t.v2:
                t.v2 = True     # a v1 transaction that the producer now continues as v2
            self._open(t, v2=True)
            t.partitions.add((topic, index))
            self._save(t)
            return 0

    def verify_partitions(self, transactional_id: str, pid: int, epoch: int,
                          partitions: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
        """AddPartitionsToTxn v4+ with verify_only: 0 for each partition already in the open
        transaction of (pid, epoch), else TRANSACTION_ABORTABLE (v5's answer for a
        partition the producer never added)."""
        with self.lock:
            code, t = self._check(transactional_id, pid, epoch)
            if t is None:
                return {tp: code for tp in partitions}
            return {tp: 0 if t.state == "Ongoing" and tp in t.partitions
                    else E.TRANSACTION_ABORTABLE for tp in partitions}

    def add_offsets(self, transactional_id: str, pid: int, epoch: int, group_id: str,
                    v2: bool = False) -> int:
        """AddOffsetsToTxn, or (``v2``) the implicit add of a TxnOffsetCommit v5."""
        with self.lock:
            code, t = self._check(transactional_id, pid, epoch)
            if t is None:
                return code
            if v2 and t.state == "Ongoing" and group_id in t.groups:
                return 0
            self._open(t, v2=v2)
            t.groups.add(group_id)
            self._save(t)
            return 0

    def txn_offset_commit(self, transactional_id: str, group_id: str, pid: int, epoch: int,
                          offsets: list[tuple[str, int, int, int, str | None]]) -> int:
        with self.lock:
            code, t = self._check(transactional_id, pid, epoch)
            if t is None:
                return code
            if t.state != "Ongoing" or group_id not in t.groups:
                return E.INVALID_TXN_STATE
            pending = t.offsets.setdefault(group_id, {})
            for topic, part, offset, leader_epoch, meta in offsets:
                pending[(topic, part)] = (offset, leader_epoch, meta)
            self._save(t)
            return 0

    def pending_offsets(self, group_id: str) -> set[tuple[str, int]]:
        """Partitions of ``group_id`` with offsets waiting in an open transaction."""
        with self.lock:
            out: set[tuple[str, int]] = set()
            for t in self.txns.values():
                if t.state == "Ongoing":
                    out.update(t.offsets.get(group_id, {}))
            return out

    def end(self, transactional_id: str, pid: int, epoch: int, commit: bool,
            v2: bool = False) -> tuple[int, int, int]:
        """EndTxn: ``(error, producer id, epoch)``. ``v2`` (EndTxn v5, transactions v2): the
        epoch is bumped as the transaction ends and the new identity answered; a retry of a
        completed end (the identity it was asked with, the same outcome) gets it again."""
        done = "CompleteCommit" if commit else "CompleteAbort"
        with self.lock:
            t = self.txns.get(transactional_id)
            if v2 and t is not None and t.state == done and t.last == (pid, epoch):
                return 0, t.producer_id, t.epoch    # a retry: the answer it did not get
            code, t = self._check(transactional_id, pid, epoch)
            if t is None:
                return code, -1, -1
            if t.state == "Ongoing":
                if v2:
                    self._bump(t)
                    t.last = (pid, epoch)
                self._complete(t, commit)
                t.ongoing = (-1, -1)
                self._save(t)
                return 0, t.producer_id, t.epoch
            if not v2 and t.state == done:
                return 0, t.producer_id, t.epoch   # a retry of an end that completed
            if not commit and (t.state == "Empty" or (v2 and t.state in (
                    "CompleteCommit", "CompleteAbort"))):
                if v2:     # an abort with nothing added: v2 still moves to a new epoch
                    self._bump(t)
                    t.last = (pid, epoch)
                    t.state = done
                    if t.next != (-1, -1):
                        self.by_pid.pop(t.producer_id, None)
                        (t.producer_id, t.epoch), t.next = t.next, (-1, -1)
                        self.by_pid[t.producer_id] = t
                    self._save(t)
                return 0, t.producer_id, t.epoch
            return E.INVALID_TXN_STATE, -1, -1

    def _bump(self, t: _Txn) -> None:
        """A new epoch for ``t`` (a new producer id when it would overflow), before its
        markers are written: a batch of the old epoch arriving later is fenced."""
        pid, epoch = self.cluster.producer_ids.init(t.transactional_id)
        self.by_pid.pop(t.producer_id, None)
        if pid != t.producer_id:
            # the markers must carry the producer id the records were written with: keep
            # it for them, the new identity applies once the transaction is complete
            t.next = (pid, epoch)
        else:
            t.epoch = epoch
        self.by_pid[t.producer_id] = t

    # ------------------------------------------------------------------ completion
    def _complete(self, t: _Txn, commit: bool, *, recovering: bool = False) -> None:
        # the decision first: a broker killed while writing the markers finishes them
        t.state = "PrepareCommit" if commit else "PrepareAbort"
        t.token += 1
        self._save(t)
        pid, epoch = t.producer_id, t.epoch
        if t.ongoing[0] >= 0 and t.ongoing[0] != pid:
            # a kept transaction whose id ran out of epochs: its records are of the old id;
            # the last epoch on the markers fences whatever that id still sends
            pid, epoch = t.ongoing[0], MAX_EPOCH
        for topic, index in sorted(t.partitions):
            if recovering and pid not in self.partition(topic, index).open:
                continue    # this marker was written before the broker stopped
            code = write_marker(self.cluster, topic, index, pid, epoch, commit)
            if code and code != E.UNKNOWN_TOPIC_OR_PARTITION:     # (a deleted topic: none due)
                log.warning("kcodec broker: transaction %r: no %s marker in %s-%d: %s",
                            t.transactional_id, "COMMIT" if commit else "ABORT", topic, index,
                            E(code).name)
        if commit:
            for group_id, offsets in t.offsets.items():
                _commit_group_offsets(self.cluster, group_id, offsets)
        t.partitions, t.groups, t.offsets = set(), set(), {}
        t.ongoing = (-1, -1)
        t.state = "CompleteCommit" if commit else "CompleteAbort"
        if t.next != (-1, -1):      # a v2 end past the last epoch: the new producer id now
            self.by_pid.pop(t.producer_id, None)
            (t.producer_id, t.epoch), t.next = t.next, (-1, -1)
            self.by_pid[t.producer_id] = t
        self._save(t)

    # ------------------------------------------------------------------ restart
    def recover(self) -> None:
        """After the logs are open (and before any node serves): rebuild every partition's
        producer state and open transactions from its log, reload the transactional ids,
        finish decided transactions and re-arm the timers of open ones."""
        state = self.cluster.state
        epochs: dict[int, int] = {}
        snap = read_snapshot(self.cluster.data_dir)
        saved = snap.get("partitions", {}) if isinstance(snap.get("partitions"), dict) else {}
        with state.lock:
            parts = [(t.topic_id, p) for t in state.topics.values() for p in t.partitions.values()]
        scanned = from_snapshot = 0
        for topic_id, part in parts:
            with part.lock:
                pt = self.partition(part.topic, part.index)
                entry = saved.get(f"{part.topic}/{part.index}")
                start = None if entry is None else restore_partition(
                    entry, topic_id, part.log, part.producers, pt)
                from_snapshot += start is not None
                scanned += rebuild_partition(part.log, part.producers, pt, epochs, start)
        self.recovered = {"partitions": len(parts), "from_snapshot": from_snapshot,
                          "batches_read": scanned}
        ids = self.cluster.producer_ids
        for pid, epoch in (snap.get("epochs") or {}).items():
            try:
                ids.restore(None, int(pid), int(epoch))
            except (TypeError, ValueError):
                continue
        with self.lock:
            for rec in self.state_log.load().values():
                try:
                    t = _Txn.from_record(rec)
                except (KeyError, TypeError, ValueError, IndexError):
                    continue
                self.txns[t.transactional_id] = t
                self.by_pid[t.producer_id] = t
                ids.restore(t.transactional_id, t.producer_id, t.epoch)
            for pid, epoch in epochs.items():
                ids.restore(None, pid, epoch)
            for t in list(self.txns.values()):
                if t.state in ("PrepareCommit", "PrepareAbort"):
                    self._complete(t, t.state == "PrepareCommit", recovering=True)
                elif t.state == "Ongoing":
                    self._arm(t, t.started_ms + t.timeout_ms - now_ms())

    def close(self) -> None:
        """A clean stop (the nodes are stopped): the state log closed, the producer state of
        every partition written as a snapshot for a quick start."""
        self.state_log.close()
        data_dir = self.cluster.data_dir
        if data_dir is None:
            return
        state = self.cluster.state
        with state.lock:
            parts = [(t.topic_id, p, self.partition(p.topic, p.index))
                     for t in state.topics.values() for p in t.partitions.values()]
        write_snapshot(data_dir, parts, dict(self.cluster.producer_ids.epochs))

    def _expire(self, t: _Txn, token: int) -> None:
        with self.lock:
            if t.token != token or t.state != "Ongoing":
                return
            self._complete(t, commit=False)
            # fence the producer: its next call carries the old epoch
            pid, epoch = self.cluster.producer_ids.init(t.transactional_id)
            self.by_pid.pop(t.producer_id, None)
            t.producer_id, t.epoch = pid, epoch
            self.by_pid[pid] = t
            self._save(t)


def write_marker(cluster: Any, topic: str, index: int, pid: int, epoch: int,
                 commit: bool) -> int:
    """Write a COMMIT or ABORT marker of ``pid`` into one partition: the transaction's
    records stop holding back the last stable offset, an abort is indexed for
    read_committed fetches, waiting fetches are woken. Returns an error code (0: written):
    UNKNOWN_TOPIC_OR_PARTITION, or INVALID_PRODUCER_EPOCH for an epoch older than the
    producer's newest on the partition (a zombie's marker)."""
    part = cluster.state.partition(topic, index)
    if part is None:
        return E.UNKNOWN_TOPIC_OR_PARTITION
    b = RecordBatchBuilder(producer_id=pid, producer_epoch=epoch, is_transactional=True,
                           is_control=True)
    ts = now_ms()
    b.append_control(ControlType.COMMIT if commit else ControlType.ABORT, 0, ts)
    with part.lock:
        known = part.producers.producers.get(pid)
        if known is not None and known.epoch > epoch:
            return E.INVALID_PRODUCER_EPOCH
        try:
            result = part.log.append(b.build(), now_ms=ts, leader_epoch=part.leader_epoch)
        except LogError as exc:     # the disk failed: the marker is not written
            return exc.error_code
        pt = cluster.txns.partition(topic, index)
        first = pt.open.pop(pid, None)
        if not commit and first is not None:
            plog = part.log
            pt.index.append(plog.segments[-1], pid, first, result.base_offset,
                            pt.stable_offset(plog.high_watermark))
    cluster.purgatory.notify((topic, index))
    return 0


def _commit_group_offsets(cluster: Any, group_id: str, offsets: dict) -> None:
    """Write a committed transaction's offsets for the group (members or not; a group that
    had none exists from now on, Empty)."""
    with cluster.groups.lock:
        cluster.groups.keep(group_id)
        cluster.offsets.commit(group_id, [(topic, part, offset, epoch, meta) for
                                          (topic, part), (offset, epoch, meta) in offsets.items()])
