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

Transactions v2 (KIP-890), used when the coordinator's ApiVersions finalizes the feature
``transaction.version`` at 2 or more and offers EndTxn v5, Produce v12 and TxnOffsetCommit
v5, as Java's producer decides: a partition joins the transaction with its first Produce
(no AddPartitionsToTxn round trip), the offsets with TxnOffsetCommit (no AddOffsetsToTxn),
and every EndTxn bumps the epoch and answers the new producer id and epoch, which the
following transaction uses -- a zombie's late batch of an ended transaction is then
fenced. Otherwise the first generation: AddPartitionsToTxn (v0-3), AddOffsetsToTxn, EndTxn
v0-4, Produce up to v11 and TxnOffsetCommit up to v4 inside transactions.

Two-phase commit (KIP-939, ``transaction_two_phase_commit_enable``, InitProducerId v6):
transactions do not time out; ``prepare`` flushes and returns the ``PreparedTxnState``
(producer id and epoch) to record in the outside coordinator; after a crash
``init(keep_prepared=True)`` keeps the open transaction and ``complete(state)`` commits it if
the recorded state is the one the coordinator reports, else aborts it.

States: UNINITIALIZED -> READY -> IN_TRANSACTION -> (COMMITTING | ABORTING) -> READY, plus
ABORTABLE_ERROR (only ``abort_transaction`` is allowed; then READY again) and FATAL_ERROR
(only ``close``). Errors are split as in Java: ``ProducerFencedError`` and other
``FatalTransactionError`` end the producer; ``AbortableTransactionError`` means: abort the
transaction and go on. Calling things in the wrong order raises ``TransactionStateError``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from kcodec.client.coordinator import Coordinator
from kcodec.client.errors import (
    AbortableTransactionError,
    BrokerNotAvailableError,
    FatalTransactionError,
    KafkaError,
    KafkaTimeoutError,
    ProducerFencedError,
    TransactionError,
    TransactionStateError,
    error_name,
)
from kcodec.client.net import requests
from kcodec.client.structs import ConsumerGroupMetadata
from kcodec.errors import KcodecError, ProtocolError, UnsupportedVersionError
from kcodec.observe.log import get_logger
from kcodec.protocol import ApiKey, ErrorCode, Request, Response

R = TypeVar("R", bound=Response)

log = get_logger(__name__)

if TYPE_CHECKING:
    from kcodec.client.producer.engine import ProducerEngine

__all__ = ["TransactionManager", "ConsumerGroupMetadata", "TransactionError",
           "TransactionStateError", "AbortableTransactionError", "FatalTransactionError",
           "ProducerFencedError", "PreparedTxnState"]

E = ErrorCode
# the coordinator is gone or elsewhere: find it again
COORDINATOR_MOVED = frozenset(c for c in E if c.coordinator_moved)
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


class PreparedTxnState:
    """The identity (producer id, epoch) a prepared transaction was written under (KIP-939):
    what a two-phase-commit application records in its own store at prepare time and hands
    to ``complete_transaction`` after a restart. ``str()`` is ``"<producer id>:<epoch>"``
    (Java's form), read back by ``PreparedTxnState.parse``; an empty state (-1:-1) means no
    transaction."""

    __slots__ = ("producer_id", "epoch")

    def __init__(self, producer_id: int = -1, epoch: int = -1) -> None:
        self.producer_id, self.epoch = int(producer_id), int(epoch)

    @classmethod
    def parse(cls, text: str) -> PreparedTxnState:
        """The state ``str()`` wrote (``"<producer id>:<epoch>"``; ``""``: no transaction)."""
        if text == "":
            return cls()
        pid, sep, epoch = str(text).partition(":")
        try:
            if not sep:
                raise ValueError
            return cls(int(pid), int(epoch))
        except ValueError:
            raise ValueError(f"a prepared transaction state is '<producer id>:<epoch>', "
                             f"not {text!r}") from None

    def __eq__(self, other: object) -> bool:
        return isinstance(other, PreparedTxnState) and \
            (self.producer_id, self.epoch) == (other.producer_id, other.epoch)

    def __hash__(self) -> int:
        return hash((self.producer_id, self.epoch))

    def __str__(self) -> str:
        return f"{self.producer_id}:{self.epoch}"

    def __repr__(self) -> str:
        return f"PreparedTxnState({self.producer_id}, {self.epoch})"


UNINITIALIZED, READY, IN_TRANSACTION, COMMITTING, ABORTING, ABORTABLE_ERROR, FATAL_ERROR = (
    "UNINITIALIZED", "READY", "IN_TRANSACTION", "COMMITTING", "ABORTING", "ABORTABLE_ERROR",
    "FATAL_ERROR")
PREPARED = "PREPARED_TRANSACTION"   # KIP-939: only commit, abort or complete from here


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
        self.coordinator = Coordinator(self.cluster, self.transactional_id, requests.TRANSACTION,
                                       own_connection=False)
        self.added: set[tuple[str, int]] = set()
        self.wanted: set[tuple[str, int]] = set()
        self.adding: asyncio.Task | None = None
        self.offsets_added = False
        self.started_at = 0.0
        self.dropped = False
        self.v2 = False                  # transactions v2 with this coordinator (KIP-890)
        self.two_phase = bool(getattr(cfg, "transaction_two_phase_commit_enable", False))
        self.kept = False                # the coordinator keeps an open transaction for us
        self.prepared: PreparedTxnState | None = None

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
        try:
            return await self.coordinator.find()
        except KafkaError as exc:
            if exc.code in FATAL:
                raise self.fail(KafkaError(exc.code, "FindCoordinator"), exc.code) from None
            raise

    async def _learn_generation(self) -> None:
        """Use transactions v2 when the coordinator finalizes transaction.version >= 2 and
        offers what v2 needs (as Java decides); checked at init and after each end."""
        try:
            conn = await self.cluster.connection(await self._coordinator())
            core = conn.core
            versions = core.broker_versions or {}
            self.v2 = (core.features.get("transaction.version", 0) >= 2
                       and versions.get(ApiKey.END_TXN, (0, -1))[1] >= 5
                       and versions.get(ApiKey.PRODUCE, (0, -1))[1] >= 12
                       and versions.get(ApiKey.TXN_OFFSET_COMMIT, (0, -1))[1] >= 5)
        except KcodecError:
            pass          # keep what was known; the next end asks again

    async def _request(self, req: Request[R], what: str, codes: Callable[[R], int],
                       deadline: float | None = None, version: int | None = None) -> R:
        """A request to the transaction coordinator, retried while the error says so.

        ``codes(response_body) -> int``: the error code to judge the response by.
        """
        if deadline is None:
            deadline = time.monotonic() + self.engine.config.api_timeout_ms / 1000
        backoff = self.engine.config.retry_backoff_ms / 1000
        while True:
            try:
                node = await self._coordinator()
                body = await self.cluster.request(node, req, version=version)
                code = codes(body)
            except (BrokerNotAvailableError, KafkaTimeoutError, ProtocolError) as exc:
                self.coordinator.forget()
                if time.monotonic() + backoff > deadline:
                    raise KafkaTimeoutError(f"{what} did not complete in time: {exc}") from None
                await asyncio.sleep(backoff)
                continue
            if code == E.NONE:
                return body
            if code in COORDINATOR_MOVED:
                self.coordinator.forget()
            elif code not in RETRY:
                raise self.fail(KafkaError(code, what), code)
            if time.monotonic() + backoff > deadline:
                raise KafkaTimeoutError(f"{what}: {error_name(code)} for too long")
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, 1.0)

    # ------------------------------------------------------------------ operations
    async def init(self, keep_prepared: bool = False) -> None:
        """InitProducerId: a new epoch for the transactional id (an open transaction of an
        older instance is aborted, or with ``keep_prepared`` kept: then the state is
        PREPARED_TRANSACTION and ``prepared`` its identity)."""
        if self.state not in (UNINITIALIZED, READY):
            self._require(UNINITIALIZED, what="init_transactions")
        eng = self.engine
        if self.two_phase or keep_prepared:
            conn = await self.cluster.connection(await self._coordinator())
            have = conn.core.version(ApiKey.INIT_PRODUCER_ID)
            if have < 6:
                raise UnsupportedVersionError(
                    "two-phase commit (transaction_two_phase_commit_enable, keep_prepared_txn) "
                    "needs InitProducerId v6 (KIP-939); the transaction coordinator speaks up "
                    f"to v{have}: leave both off with this broker")
        body = await self._request(
            requests.init_producer_id(self.transactional_id, self.timeout_ms,
                                      two_phase=self.two_phase, keep_prepared=keep_prepared),
            "InitProducerId", lambda b: b.error_code)
        eng.accumulator.set_producer(body.producer_id, body.producer_epoch)
        await self._learn_generation()
        self.error = None
        ongoing = getattr(body, "ongoing_txn_producer_id", -1)
        if keep_prepared and ongoing is not None and ongoing >= 0:
            self.prepared = PreparedTxnState(ongoing, body.ongoing_txn_producer_epoch)
            self.kept = True
            self.state = PREPARED
        else:
            self.prepared = None
            self.kept = False
            self.state = READY

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
        if self.state not in (IN_TRANSACTION, COMMITTING, PREPARED):
            return False
        if self.v2:       # the Produce itself adds the partition (KIP-890)
            self.added.add(tp)
            return True
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
                await self._request(req, "AddPartitionsToTxn",
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
        if not self.offsets_added and not self.v2:   # v2: TxnOffsetCommit v5 adds the group
            await self._request(requests.add_offsets_to_txn(
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
        group = Coordinator(self.cluster, group_id, own_connection=False)
        while True:
            node: int | None = None
            try:
                try:
                    node = await group.find()
                except KafkaError as exc:
                    code = exc.code
                if node is not None:
                    # the first generation may not use v5 inside a transaction
                    conn = await self.cluster.connection(node)
                    version = min(conn.core.version(ApiKey.TXN_OFFSET_COMMIT),
                                  5 if self.v2 else 4)
                    resp = await self.cluster.request(node, req, version=version)
                    codes = [p.error_code for t in resp.topics for p in t.partitions]
                    code = next((c for c in codes if c), E.NONE)
                    if code == E.NONE:
                        return
            except (BrokerNotAvailableError, KafkaTimeoutError, ProtocolError) as exc:
                code = _NO_ANSWER
                group.forget()
                if time.monotonic() + backoff > deadline:
                    raise KafkaTimeoutError(f"TxnOffsetCommit did not complete: {exc}") from None
            if code in COORDINATOR_MOVED:
                group.forget()
            elif code not in RETRY and code != _NO_ANSWER:
                raise self.fail(KafkaError(code, f"TxnOffsetCommit for group {group_id!r}"), code)
            if time.monotonic() + backoff > deadline:
                raise KafkaTimeoutError(f"TxnOffsetCommit: {error_name(code)} for too long")
            await asyncio.sleep(backoff)

    async def commit(self) -> None:
        self._require(IN_TRANSACTION, PREPARED, what="commit_transaction")
        if self.state == IN_TRANSACTION:
            self.state = COMMITTING
            await self.engine.flush()
            if self.state == ABORTABLE_ERROR or self.state == FATAL_ERROR:
                raise self.error or AbortableTransactionError("a record of the transaction failed")
        else:
            self.state = COMMITTING
        await self._end(True)

    async def abort(self) -> None:
        self._require(IN_TRANSACTION, ABORTABLE_ERROR, COMMITTING, PREPARED,
                      what="abort_transaction")
        self.state = ABORTING
        self.engine.drop_unsent(
            AbortableTransactionError("the transaction was aborted before this record was sent"))
        await self.engine.flush()       # what is in flight completes (or fails) first
        ended = await self._end(False)
        if self.dropped and not ended:
            # batches that were never sent took sequence numbers: a new epoch starts the
            # sequences again (KIP-360 epoch bump through InitProducerId; with transactions
            # v2 the EndTxn did it)
            await self.init()

    async def prepare(self) -> PreparedTxnState:
        """KIP-939 prepare: flush the transaction and hold it (only commit, abort or
        complete follow); the returned state is what the outside coordinator records."""
        if not self.two_phase:
            raise TransactionStateError(
                "prepare_transaction needs transaction_two_phase_commit_enable=True (KIP-939)")
        self._require(IN_TRANSACTION, what="prepare_transaction")
        await self.engine.flush()
        if self.state in (ABORTABLE_ERROR, FATAL_ERROR):
            raise self.error or AbortableTransactionError("a record of the transaction failed")
        acc = self.engine.accumulator
        self.prepared = PreparedTxnState(acc.producer_id, acc.epoch)
        self.state = PREPARED
        return self.prepared

    def prepared_state(self) -> PreparedTxnState | None:
        """The prepared (or kept) transaction's identity; None when none is."""
        return self.prepared if self.state == PREPARED else None

    async def complete(self, recorded: PreparedTxnState | str) -> bool:
        """KIP-939 complete: commit the prepared transaction if ``recorded`` is its state,
        else abort it. True if it was committed. With no prepared transaction (``init``
        with ``keep_prepared`` found none): nothing to do, False."""
        if isinstance(recorded, str):
            recorded = PreparedTxnState.parse(recorded)
        if self.state == READY and self.prepared is None:
            return False
        self._require(PREPARED, what="complete_transaction (prepare_transaction, or "
                                     "init_transactions(keep_prepared_txn=True), first)")
        if recorded == self.prepared:
            await self.commit()
            return True
        await self.abort()
        return False

    async def _end(self, commit: bool) -> bool:
        """EndTxn if the coordinator has anything of this transaction; True if sent."""
        eng = self.engine
        sent = False
        if self.added or self.offsets_added or self.kept or (self.v2 and self.dropped):
            acc = eng.accumulator
            conn = await self.cluster.connection(await self._coordinator())
            version = min(conn.core.version(ApiKey.END_TXN), 5 if self.v2 else 4)
            body = await self._request(requests.end_txn(
                self.transactional_id, acc.producer_id, acc.epoch, commit),
                "EndTxn", lambda b: b.error_code, version=version)
            sent = True
            if version >= 5 and body.producer_id >= 0 and body.producer_epoch >= 0:
                # v2: the coordinator bumped the epoch; the next transaction uses it
                acc.set_producer(body.producer_id, body.producer_epoch)
            else:
                sent = False     # no new epoch: dropped sequences still need one
        self.added.clear()
        self.wanted.clear()
        self.offsets_added = False
        self.kept = False
        self.prepared = None
        self.state = READY
        self.error = None
        await self._learn_generation()
        return sent
