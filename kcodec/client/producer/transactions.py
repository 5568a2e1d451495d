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
from kcodec.client.net import requests
from kcodec.client.structs import ConsumerGroupMetadata
from kcodec.errors import KcodecError, ProtocolError
from kcodec.observe.log import get_logger
from kcodec.protocol import ApiKey, ErrorCode

log = get_logger(__name__)

if TYPE_CHECKING:
    from kcodec.client.producer.engine import ProducerEngine

__all__ = ["TransactionManager", "ConsumerGroupMetadata", "TransactionError",
           "TransactionStateError", "AbortableTransactionError", "FatalTransactionError",
           "ProducerFencedError"]

E = ErrorCode
# the coordinator is gone or elsewhere: find it again
COORDINATOR_MOVED = frozenset((E.COORDINATOR_NOT_AVAILABLE, E.NOT_COORDINATOR))
# try the same request again after a backoff
RETRY = frozenset((E.COORDINATOR_LOAD_IN_PROGRESS, E.CONCURRENT_TRANSACTIONS,
                   E.REQUEST_TIMED_OUT, E.UNKNOWN_TOPIC_OR_PARTITION, E.NOT_LEADER_OR_FOLLOWER))
# a newer producer with this transactional id exists
FENCED = frozenset((E.INVALID_PRODUCER_EPOCH, E.PRODUCER_FENCED))
# the producer cannot go on
FATAL = frozenset((E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, E.INVALID_TXN_STATE,
                   E.UNSUPPORTED_VERSION, E.INVALID_RECORD))
# the transaction cannot commit: abort it and go on
ABORTABLE = frozenset((E.TOPIC_AUTHORIZATION_FAILED, E.GROUP_AUTHORIZATION_FAILED,
                       E.INVALID_PRODUCER_ID_MAPPING, E.TRANSACTION_ABORTABLE,
                       E.ILLEGAL_GENERATION, E.UNKNOWN_MEMBER_ID, E.FENCED_INSTANCE_ID))
_NO_ANSWER = -2        # (not a code: the request got no answer)


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
            if self.state != FATAL_ERROR:
                log.warning("%s", err)      # fenced or fatal: the producer cannot go on
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
            try:
                return await self.cluster.find_coordinator(self.transactional_id,
                                                           requests.TRANSACTION)
            except KafkaError as exc:
                if exc.code in FATAL:
                    raise self.fail(KafkaError(exc.code, "FindCoordinator"), exc.code) from None
                raise
        self.coordinator = await self.cluster.call(find, "FindCoordinator")
        return self.coordinator

    async def _request(self, api_key: int, body: Any, what: str, codes: Any,
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
            if code == E.NONE:
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
            ApiKey.INIT_PRODUCER_ID,
            requests.init_producer_id(self.transactional_id, self.timeout_ms),
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
            eng = self.engine
            acc = eng.accumulator
            req = requests.add_partitions_to_txn(self.transactional_id, acc.producer_id,
                                                 acc.epoch, todo)

            def worst(body: Any) -> int:
                codes = [p.partition_error_code for t in body.results_by_topic_v3_and_below
                         for p in t.results_by_partition]
                # OPERATION_NOT_ATTEMPTED: another partition's error stopped this one
                bad = [c for c in codes if c not in (E.NONE, E.OPERATION_NOT_ATTEMPTED)]
                return bad[0] if bad else 0
            try:
                await self._request(ApiKey.ADD_PARTITIONS_TO_TXN, req, "AddPartitionsToTxn",
                                    worst)
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
        acc = self.engine.accumulator
        if not self.offsets_added:
            await self._request(ApiKey.ADD_OFFSETS_TO_TXN, requests.add_offsets_to_txn(
                self.transactional_id, acc.producer_id, acc.epoch, group.group_id),
                "AddOffsetsToTxn", lambda b: b.error_code)
            self.offsets_added = True
        rows = []
        for tp, off in offsets.items():
            t, p = tp
            meta = None
            if isinstance(off, tuple):
                off, meta = off
            rows.append((t, p, off, meta))
        req = requests.txn_offset_commit(
            self.transactional_id, group.group_id, acc.producer_id, acc.epoch,
            group.generation_id, group.member_id, group.group_instance_id, rows)
        await self._group_commit(group.group_id, req)

    async def _group_commit(self, group_id: str, req: Any) -> None:
        """TxnOffsetCommit to the group's coordinator (not the transaction's)."""
        deadline = time.monotonic() + self.engine.config.api_timeout_ms / 1000
        backoff = self.engine.config.retry_backoff_ms / 1000
        node: int | None = None
        while True:
            try:
                if node is None:
                    try:
                        node = await self.cluster.find_coordinator(group_id)
                    except KafkaError as exc:
                        code = exc.code
                if node is not None:
                    r = await self.cluster.send(node, ApiKey.TXN_OFFSET_COMMIT, req)
                    codes = [p.error_code for t in r.body.topics for p in t.partitions]
                    code = next((c for c in codes if c), E.NONE)
                    if code == E.NONE:
                        return
            except (BrokerNotAvailableError, KafkaTimeoutError, ProtocolError) as exc:
                code, node = _NO_ANSWER, None
                if time.monotonic() + backoff > deadline:
                    raise KafkaTimeoutError(f"TxnOffsetCommit did not complete: {exc}") from None
            if code in COORDINATOR_MOVED:
                node = None
            elif code not in RETRY and code != _NO_ANSWER:
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
            await self._request(ApiKey.END_TXN, requests.end_txn(
                self.transactional_id, eng.accumulator.producer_id, eng.accumulator.epoch, commit),
                "EndTxn", lambda b: b.error_code)
        self.added.clear()
        self.wanted.clear()
        self.offsets_added = False
        self.state = READY
        self.error = None
