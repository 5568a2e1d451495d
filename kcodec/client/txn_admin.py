"""Transactions seen and ended from outside their producer (what ``Admin`` offers and
``kafka-transactions.sh`` does): list, describe, and end a transaction its producer left.

    list_transactions      ListTransactions to every broker (each answers the ids it
                           coordinates), joined and sorted
    describe_transactions  DescribeTransactions to each id's coordinator
    force_terminate        InitProducerId without keepPreparedTxn: the coordinator aborts
                           the open (or prepared) transaction and fences its producer with a
                           new epoch (KIP-939's ``forceTerminateTransaction``)
    complete_prepared      InitProducerId v6 with keepPreparedTxn: the open transaction is
                           kept and its producer fenced; committed with EndTxn under the new
                           epoch if the identity it was written under is the one recorded at
                           prepare time, else aborted (what a restarted two-phase-commit
                           producer's ``complete_transaction`` does, without a producer)
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from kcodec.client.coordinator import Coordinator
from kcodec.client.errors import COORDINATOR_CODES, KafkaError
from kcodec.client.net import requests
from kcodec.client.net.cluster import Cluster
from kcodec.client.producer.transactions import PreparedTxnState
from kcodec.errors import UnsupportedVersionError
from kcodec.protocol import (
    ApiKey,
    DescribeTransactionsRequest,
    ListTransactionsRequest,
    Request,
    Response,
)

__all__ = ["TransactionListing", "TransactionDescription", "TWO_PHASE_TIMEOUT_MS",
           "list_transactions", "describe_transactions", "force_terminate",
           "complete_prepared"]

#: the timeout a two-phase-commit transaction reports: it never times out (KIP-939)
TWO_PHASE_TIMEOUT_MS = (1 << 31) - 1
#: the transaction timeout sent with a terminating InitProducerId (Kafka's default)
_TERMINATE_TIMEOUT_MS = 60000


@dataclass
class TransactionListing:
    """One transactional id as ListTransactions answers it."""
    transactional_id: str
    producer_id: int
    state: str                       # Empty, Ongoing, PrepareCommit, CompleteCommit, ...


@dataclass
class TransactionDescription:
    """One transactional id as its coordinator describes it."""
    transactional_id: str
    state: str
    timeout_ms: int
    start_time_ms: int               # -1: no transaction has started
    producer_id: int
    producer_epoch: int
    partitions: list[tuple[str, int]] = field(default_factory=list)
    coordinator: int = -1

    @property
    def two_phase(self) -> bool:
        """A two-phase-commit transaction (it never times out: an outside coordinator
        ends it)."""
        return self.timeout_ms == TWO_PHASE_TIMEOUT_MS


async def list_transactions(cluster: Cluster, states: Iterable[str] = (),
                            producer_ids: Iterable[int] = (), min_duration_ms: int = -1,
                            pattern: str | None = None) -> list[TransactionListing]:
    """Every transactional id the brokers coordinate, filtered by state names, producer ids,
    how long the transaction has run (``min_duration_ms``, ListTransactions v1) and a regular
    expression on the id (``pattern``, v2). An unknown state name raises ``ValueError``."""
    states, producer_ids = list(states), list(producer_ids)
    req = ListTransactionsRequest(state_filters=states, producer_id_filters=producer_ids,
                                  duration_filter=min_duration_ms,
                                  transactional_id_pattern=pattern)
    await cluster.refresh([])
    out: dict[str, TransactionListing] = {}
    for node in sorted(cluster.brokers):
        need = 2 if pattern is not None else 1 if min_duration_ms >= 0 else 0
        conn = await cluster.connection(node)
        have = conn.core.version(ApiKey.LIST_TRANSACTIONS)
        if have < need:
            raise UnsupportedVersionError(
                f"ListTransactions v{need} is needed for "
                f"{'pattern' if need == 2 else 'min_duration_ms'}; broker {node} speaks up "
                f"to v{have}")

        async def go(node: int = node) -> Any:
            body = await cluster.request(node, req)
            if body.error_code:
                raise KafkaError(body.error_code, f"ListTransactions (broker {node})")
            return body
        body = await cluster.call(go, "ListTransactions")
        if body.unknown_state_filters:
            raise ValueError(f"unknown transaction states {body.unknown_state_filters}: "
                             "Empty, Ongoing, PrepareCommit, PrepareAbort, CompleteCommit, "
                             "CompleteAbort, PrepareEpochFence, Dead")
        for s in body.transaction_states:
            out[s.transactional_id] = TransactionListing(s.transactional_id, s.producer_id,
                                                         s.transaction_state)
    return [out[k] for k in sorted(out)]


async def describe_transactions(cluster: Cluster, transactional_ids: Iterable[str]
                                ) -> list[TransactionDescription]:
    """Each id as its coordinator describes it; an id it does not know raises
    ``KafkaError`` (TRANSACTIONAL_ID_NOT_FOUND)."""
    ids = list(transactional_ids)

    async def one(tid: str) -> TransactionDescription:
        coord = Coordinator(cluster, tid, requests.TRANSACTION, own_connection=False)

        async def go() -> Any:
            body = await coord.request(DescribeTransactionsRequest(transactional_ids=[tid]))
            (s,) = body.transaction_states
            if s.error_code in COORDINATOR_CODES:    # per id: Coordinator sees the top level
                coord.forget()
            if s.error_code:
                raise KafkaError(s.error_code, f"describe transaction {tid!r}")
            return s
        s = await cluster.call(go, "DescribeTransactions")
        return TransactionDescription(
            s.transactional_id, s.transaction_state, s.transaction_timeout_ms,
            s.transaction_start_time_ms, s.producer_id, s.producer_epoch,
            [(t.topic, p) for t in s.topics for p in t.partitions], coord.node or -1)
    return list(await asyncio.gather(*(one(t) for t in ids)))


async def _answered(coord: Coordinator, req: Request[Any], what: str) -> Any:
    """``req`` to the coordinator, retried while its error code is retriable."""
    async def go() -> Response:
        body = await coord.request(req)
        if body.error_code:
            raise KafkaError(body.error_code, what)
        return body
    return await coord.cluster.call(go, what)


async def force_terminate(cluster: Cluster, transactional_id: str) -> None:
    """Abort the transaction open (or prepared) under ``transactional_id`` and fence its
    producer; nothing to abort is not an error."""
    coord = Coordinator(cluster, transactional_id, requests.TRANSACTION, own_connection=False)
    await _answered(coord, requests.init_producer_id(transactional_id, _TERMINATE_TIMEOUT_MS),
                    f"terminate transaction {transactional_id!r}")


async def complete_prepared(cluster: Cluster, transactional_id: str,
                            prepared: PreparedTxnState | str, commit: bool = True) -> bool:
    """End the transaction left prepared under ``transactional_id``: committed (``commit``)
    if ``prepared`` (recorded at prepare time) is the identity it was written under, else
    aborted. True if it was committed; False if it was aborted or none was open."""
    if isinstance(prepared, str):
        prepared = PreparedTxnState.parse(prepared)
    coord = Coordinator(cluster, transactional_id, requests.TRANSACTION, own_connection=False)
    conn = await cluster.connection(await coord.find())
    have = conn.core.version(ApiKey.INIT_PRODUCER_ID)
    if have < 6:
        raise UnsupportedVersionError(
            "completing a prepared transaction needs InitProducerId v6 (KIP-939); the "
            f"transaction coordinator speaks up to v{have}")
    what = f"complete prepared transaction {transactional_id!r}"
    body = await _answered(coord, requests.init_producer_id(
        transactional_id, TWO_PHASE_TIMEOUT_MS, two_phase=True, keep_prepared=True), what)
    ongoing = PreparedTxnState(body.ongoing_txn_producer_id, body.ongoing_txn_producer_epoch)
    if ongoing.producer_id < 0:
        return False
    ok = commit and ongoing == prepared
    conn = await cluster.connection(await coord.find())
    core = conn.core
    v2 = core.features.get("transaction.version", 0) >= 2 and \
        core.version(ApiKey.END_TXN) >= 5
    version = min(core.version(ApiKey.END_TXN), 5 if v2 else 4)

    async def end() -> Response:
        r = await coord.request(requests.end_txn(transactional_id, body.producer_id,
                                                 body.producer_epoch, ok), version=version)
        if r.error_code:
            raise KafkaError(r.error_code, what)
        return r
    await cluster.call(end, what)
    return ok
