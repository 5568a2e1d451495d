"""The transactional producer's state machine (exactly-once), as Java's TransactionManager.

    init_transactions   FindCoordinator(TRANSACTION) -> InitProducerId(transactional_id,
                        transaction_timeout_ms): producer id and epoch; an older producer
                        with the same transactional_id is fenced, its open transaction ended
    begin_transaction   local only
    send                each partition joins the transaction (AddPartitionsToTxn) before
                        its first batch goes out; batches carry the transactional flag
    send_offsets_to_transaction   AddOffsetsToTxn(group) to the transaction coordinator,
                        then TxnOffsetCommit to the group coordinator
    commit_transaction  flush; EndTxn(commit)        abort_transaction  EndTxn(abort)

States: UNINITIALIZED -> READY -> IN_TRANSACTION -> (COMMITTING | ABORTING) -> READY, plus
ABORTABLE_ERROR (only ``abort_transaction`` is allowed; then READY again) and FATAL_ERROR
(only ``close``). Errors are split as in Java: ``ProducerFencedError`` and other
``FatalTransactionError`` end the producer; ``AbortableTransactionError`` means: abort the
transaction and go on. Calling things in the wrong order raises ``TransactionStateError``.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any

from kcodec.client.errors import (
    BrokerNotAvailableError,
    KafkaError,
    KafkaTimeoutError,
    error_name,
)
from kcodec.client.structs import ConsumerGroupMetadata
from kcodec.errors import KcodecError, ProtocolError

if TYPE_CHECKING:
    from kcodec.client.producer.engine import ProducerEngine

__all__ = ["TransactionManager", "ConsumerGroupMetadata", "TransactionError",
           "TransactionStateError", "AbortableTransactionError", "FatalTransactionError",
           "ProducerFencedError"]

COORDINATOR_MOVED = {15, 16}               # not available, not coordinator: find it again
RETRY = {14, 51, 7, 3, 6}                  # loading, concurrent transactions, timed out ...
FENCED = {47, 90}                          # INVALID_PRODUCER_EPOCH, PRODUCER_FENCED
FATAL = {53, 48, 35, 87}                   # txn id authorization, invalid txn state,
#                                            unsupported version, invalid record
ABORTABLE = {29, 30, 49, 120, 22, 25, 82}  # topic/group authorization, id mapping,
#                                            TRANSACTION_ABORTABLE, group membership


class TransactionError(KcodecError):
    """Base of the transactional producer's errors; ``code`` is the broker's, if any."""

    code: int | None = None

    def __init__(self, message: str, code: int | None = None) -> None:
        super().__init__(message)
        self.code = code


class TransactionStateError(TransactionError):
    """A call in the wrong state (Java: IllegalStateException), e.g. send outside a
    transaction or commit after an abortable error."""


class AbortableTransactionError(TransactionError):
    """The transaction cannot commit: call ``abort_transaction`` and start a new one."""


class FatalTransactionError(TransactionError):
    """The producer cannot go on: close it (and start a new one if it was fenced)."""


class ProducerFencedError(FatalTransactionError):
    """Another producer with the same transactional_id took over (or the coordinator ended
    this one's transaction after transaction_timeout_ms and bumped the epoch)."""


UNINITIALIZED, READY, IN_TRANSACTION, COMMITTING, ABORTING, ABORTABLE_ERROR, FATAL_ERROR = (
    "UNINITIALIZED", "READY", "IN_TRANSACTION", "COMMITTING", "ABORTING", "ABORTABLE_ERROR",
    "FATAL_ERROR")


class TransactionManager:
    """Transaction state of one producer engine; coroutines run on the engine's loop."""

    def __init__(self, engine: ProducerEngine) -> None:
        self.engine = engine
        self.cluster = engine.cluster
        cfg = engine.config
        self.transactional_id: str = cfg.transactional_id   # type: ignore[assignment]
        self.timeout_ms = cfg.transaction_timeout_ms
        self.state = UNINITIALIZED
        self.error: TransactionError | None = None
        self.coordinator: int | None = None
        self.added: set[tuple[str, int]] = set()
        self.wanted: set[tuple[str, int]] = set()
        self.adding: asyncio.Task | None = None
        self.offsets_added = False
        self.started_at = 0.0
        self.dropped = False

    def __repr__(self) -> str:
        return f"<TransactionManager {self.transactional_id!r} {self.state}>"

    # ------------------------------------------------------------------ state checks
    def _require(self, *states: str, what: str) -> None:
        if self.state == FATAL_ERROR:
            raise self.error or FatalTransactionError("the producer hit a fatal error")
        if self.state not in states:
            if self.state == ABORTABLE_ERROR:
                raise TransactionStateError(
                    f"cannot {what}: the transaction hit an error and must be aborted "
                    f"(cause: {self.error})")
            raise TransactionStateError(f"cannot {what} in state {self.state}")

    def check_send(self) -> None:
        """Called (any thread) before a record is queued."""
        if self.state == ABORTABLE_ERROR:
            raise self.error or AbortableTransactionError("the transaction must be aborted")
        self._require(IN_TRANSACTION, what="send: no transaction is in progress "
                      "(call begin_transaction first)")

    def fail(self, exc: BaseException, code: int | None = None) -> TransactionError:
        """Record an error: fenced and fatal codes end the producer; others abort the txn."""
        if isinstance(exc, TransactionError):
            err = exc
        elif code in FENCED:
            err = ProducerFencedError(
                f"transactional_id {self.transactional_id!r}: the producer was fenced "
                f"({error_name(code)}): a newer producer with this id started, or the "
                f"transaction ran past transaction_timeout_ms ({self.timeout_ms} ms) and "
                "the coordinator aborted it", code)
        elif code in FATAL:
            err = FatalTransactionError(
                f"transactional_id {self.transactional_id!r}: {exc}", code)
        else:
            err = AbortableTransactionError(
                f"transactional_id {self.transactional_id!r}: the transaction must be "
                f"aborted: {exc}", code)
        if isinstance(err, FatalTransactionError):
            self.state, self.error = FATAL_ERROR, err
        elif self.state not in (FATAL_ERROR, UNINITIALIZED):
            if self.state != ABORTING:
                self.state = ABORTABLE_ERROR
            self.error = self.error if isinstance(self.error, FatalTransactionError) else err
        return err

    def on_batch_failed(self, exc: BaseException) -> BaseException:
        """A batch of this transaction could not be written: the error its records get."""
        self.dropped = True      # its sequence numbers are a gap now: abort bumps the epoch
        if self.state in (ABORTING, READY):
            return exc
        return self.fail(exc, getattr(exc, "code", None))

    # ------------------------------------------------------------------ coordinator
    async def _coordinator(self) -> int:
        if self.coordinator is not None and self.coordinator in self.cluster.brokers:
            return self.coordinator

        async def find() -> int:
            r = await self.cluster.send(None, 10, {"key": self.transactional_id, "key_type": 1})
            b = r.body
            if b.error_code:
                if b.error_code in FATAL:
                    raise self.fail(KafkaError(b.error_code, "FindCoordinator"), b.error_code)
                raise KafkaError(b.error_code, f"FindCoordinator {self.transactional_id!r}")
            self.cluster.brokers.setdefault(b.node_id, (b.host, b.port))
            return b.node_id
        self.coordinator = await self.cluster.call(find, "FindCoordinator")
        return self.coordinator

    async def _request(self, api_key: int, body: dict, what: str, codes: Any,
                       deadline: float | None = None) -> Any:
        """A request to the transaction coordinator, retried while the error says so.

        ``codes(response_body) -> int``: the error code to judge the response by.
        """
        if deadline is None:
            deadline = time.monotonic() + self.engine.config.api_timeout_ms / 1000
        backoff = self.engine.config.retry_backoff_ms / 1000
        while True:
            try:
                node = await self._coordinator()
                r = await self.cluster.send(node, api_key, body)
                code = codes(r.body)
            except (BrokerNotAvailableError, KafkaTimeoutError, ProtocolError) as exc:
                self.coordinator = None
                if time.monotonic() + backoff > deadline:
                    raise KafkaTimeoutError(f"{what} did not complete in time: {exc}") from None
                await asyncio.sleep(backoff)
                continue
            if code == 0:
                return r.body
            if code in COORDINATOR_MOVED:
                self.coordinator = None
            elif code not in RETRY:
                raise self.fail(KafkaError(code, what), code)
            if time.monotonic() + backoff > deadline:
                raise KafkaTimeoutError(f"{what}: {error_name(code)} for too long")
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, 1.0)

    # ------------------------------------------------------------------ operations
    async def init(self) -> None:
        if self.state not in (UNINITIALIZED, READY):
            self._require(UNINITIALIZED, what="init_transactions")
        eng = self.engine
        body = await self._request(
            22, {"transactional_id": self.transactional_id,
                 "transaction_timeout_ms": self.timeout_ms},
            "InitProducerId", lambda b: b.error_code)
        eng.accumulator.set_producer(body.producer_id, body.producer_epoch)
        self.state = READY
        self.error = None

    def begin(self) -> None:
        self._require(READY, what="begin_transaction (call init_transactions first, and "
                                  "end the previous transaction)")
        self.state = IN_TRANSACTION
        self.added.clear()
        self.wanted.clear()
        self.offsets_added = False
        self.dropped = False
        self.started_at = time.monotonic()

    def ready(self, topic: str, partition: int) -> bool:
        """May a batch for (topic, partition) be sent? If not, its add is under way."""
        tp = (topic, partition)
        if tp in self.added:
            return True
        if self.state not in (IN_TRANSACTION, COMMITTING):
            return False
        self.wanted.add(tp)
        if self.adding is None or self.adding.done():
            self.adding = self.engine.loop.create_task(self._add_partitions())
        return False

    async def _add_partitions(self) -> None:
        while self.wanted - self.added and self.state in (IN_TRANSACTION, COMMITTING):
            todo = sorted(self.wanted - self.added)
            topics: dict[str, list[int]] = {}
            for t, p in todo:
                topics.setdefault(t, []).append(p)
            eng = self.engine
            req = {"v3_and_below_transactional_id": self.transactional_id,
                   "v3_and_below_producer_id": eng.accumulator.producer_id,
                   "v3_and_below_producer_epoch": eng.accumulator.epoch,
                   "v3_and_below_topics": [{"name": t, "partitions": ps}
                                           for t, ps in topics.items()]}

            def worst(body: Any) -> int:
                codes = [p.partition_error_code for t in body.results_by_topic_v3_and_below
                         for p in t.results_by_partition]
                bad = [c for c in codes if c not in (0, 55)]  # 55: not attempted (others failed)
                return bad[0] if bad else 0
            try:
                await self._request(24, req, "AddPartitionsToTxn", worst)
            except KcodecError as exc:
                self.fail(exc, getattr(exc, "code", None))
                eng.kick()
                return
            self.added.update(todo)
            eng.kick()

    async def send_offsets(self, offsets: dict, group: ConsumerGroupMetadata | str) -> None:
        self._require(IN_TRANSACTION, what="send_offsets_to_transaction")
        if isinstance(group, str):
            group = ConsumerGroupMetadata(group)
        eng = self.engine
        if not self.offsets_added:
            await self._request(25, {"transactional_id": self.transactional_id,
                                     "producer_id": eng.accumulator.producer_id,
                                     "producer_epoch": eng.accumulator.epoch, "group_id": group.group_id},
                                "AddOffsetsToTxn", lambda b: b.error_code)
            self.offsets_added = True
        topics: dict[str, list[dict]] = {}
        for tp, off in offsets.items():
            t, p = tp
            meta = None
            if isinstance(off, tuple):
                off, meta = off
            topics.setdefault(t, []).append({"partition_index": p, "committed_offset": off,
                                             "committed_metadata": meta})
        req = {"transactional_id": self.transactional_id, "group_id": group.group_id,
               "producer_id": eng.accumulator.producer_id, "producer_epoch": eng.accumulator.epoch,
               "generation_id": group.generation_id, "member_id": group.member_id,
               "group_instance_id": group.group_instance_id,
               "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]}
        await self._group_commit(group.group_id, req)

    async def _group_commit(self, group_id: str, req: dict) -> None:
        """TxnOffsetCommit to the group's coordinator (not the transaction's)."""
        deadline = time.monotonic() + self.engine.config.api_timeout_ms / 1000
        backoff = self.engine.config.retry_backoff_ms / 1000
        node: int | None = None
        while True:
            try:
                if node is None:
                    r = await self.cluster.send(None, 10, {"key": group_id, "key_type": 0})
                    code = r.body.error_code
                    if code == 0:
                        self.cluster.brokers.setdefault(r.body.node_id, (r.body.host, r.body.port))
                        node = r.body.node_id
                if node is not None:
                    r = await self.cluster.send(node, 28, req)
                    codes = [p.error_code for t in r.body.topics for p in t.partitions]
                    code = next((c for c in codes if c), 0)
                    if code == 0:
                        return
            except (BrokerNotAvailableError, KafkaTimeoutError, ProtocolError) as exc:
                code, node = -2, None
                if time.monotonic() + backoff > deadline:
                    raise KafkaTimeoutError(f"TxnOffsetCommit did not complete: {exc}") from None
            if code in COORDINATOR_MOVED:
                node = None
            elif code not in RETRY and code != -2:
                raise self.fail(KafkaError(code, f"TxnOffsetCommit for group {group_id!r}"), code)
            if time.monotonic() + backoff > deadline:
                raise KafkaTimeoutError(f"TxnOffsetCommit: {error_name(code)} for too long")
            await asyncio.sleep(backoff)

    async def commit(self) -> None:
        self._require(IN_TRANSACTION, what="commit_transaction")
        self.state = COMMITTING
        await self.engine.flush()
        if self.state == ABORTABLE_ERROR or self.state == FATAL_ERROR:
            raise self.error or AbortableTransactionError("a record of the transaction failed")
        await self._end(True)

    async def abort(self) -> None:
        self._require(IN_TRANSACTION, ABORTABLE_ERROR, COMMITTING, what="abort_transaction")
        self.state = ABORTING
        self.engine.drop_unsent(
            AbortableTransactionError("the transaction was aborted before this record was sent"))
        await self.engine.flush()       # what is in flight completes (or fails) first
        await self._end(False)
        if self.dropped:
            # batches that were never sent took sequence numbers: a new epoch starts the
            # sequences again (KIP-360 epoch bump through InitProducerId)
            await self.init()

    async def _end(self, commit: bool) -> None:
        eng = self.engine
        if self.added or self.offsets_added:
            await self._request(26, {"transactional_id": self.transactional_id,
                                     "producer_id": eng.accumulator.producer_id,
                                     "producer_epoch": eng.accumulator.epoch, "committed": commit},
                                "EndTxn", lambda b: b.error_code)
        self.added.clear()
        self.wanted.clear()
        self.offsets_added = False
        self.state = READY
        self.error = None
