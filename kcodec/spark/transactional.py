"""The exactly-once sink (``kcodec.deliveryGuarantee=exactly_once``): each task writes its
rows in one two-phase-commit transaction (KIP-939) that the driver's commit ends.

    task      transactional id  <prefix>-<Spark partition>; the prefix is
                                kcodec.transactionalIdPrefix, else kcodec-spark-<query id>
                                (streaming: the id the checkpoint keeps across restarts) or
                                kcodec-spark-write-<random> (one df.write)
              init_transactions a retried or speculative attempt of the partition fences the
                                earlier one; a df.write aborts what that one had open, a
                                micro-batch keeps it (keep_prepared_txn) to look at it
              marker check      (streaming) the batch id committed with the partition's last
                                transaction (group <transactional id>, offset = batch id):
                                at or past this batch, it was committed before a driver
                                crash: write nothing. Else a kept transaction holding a
                                marker (OffsetFetch require_stable: UNSTABLE_OFFSET_COMMIT)
                                was prepared -- the marker is its last write -- by an
                                earlier attempt of this batch: write nothing, hand its
                                state to the driver's commit. A kept one without a marker
                                was cut off mid-write: aborted, the rows written again
              write, marker     rows sent; the batch id committed to the group inside the
                                transaction (TxnOffsetCommit), atomic with the rows
              prepare           flushed and held; the commit message carries
                                (transactional id, "<producer id>:<epoch>")
    driver    commit            every prepared transaction committed from its recorded state
                                (``Admin.complete_prepared_transaction``), before Spark writes
                                its commit log; one no longer prepared counts if its marker
                                says this batch, else the commit fails (the batch is replayed)
              abort             the prepared transactions aborted, and the ids of failed
                                tasks terminated

A micro-batch replayed after a driver crash meets, per partition, a transaction that was
committed (the marker: skip), one prepared (its marker pending: committed by the replay's
driver commit, since Spark's commit log says this batch is the next one to commit; an
earlier batch can hold no open transaction, its commit came before this batch began), one
cut off before its marker (aborted, written again) or none (written again): each row
reaches read_committed readers once, and a batch the driver died committing is not
written twice into the log. That needs the replayed batch to put the same rows in the same Spark partition, as
the kcodec and Kafka sources do for the offsets in Spark's offset log.
"""

from __future__ import annotations

import asyncio
import logging
import re
import uuid
from dataclasses import dataclass
from typing import Any

__all__ = ["TaskTxn", "task_txn", "batch_prefix", "committed_batch", "replayed", "markers",
           "commit_all", "abort_all", "admin_config", "ABORT_SWEEP_S", "MARKER_METADATA", "WRITE",
           "COMMITTED", "ABORT_STATE"]

log = logging.getLogger(__name__)

#: the metadata of the batch-id marker a streaming task commits with its transaction
MARKER_METADATA = "kcodec-spark-sink"
_BATCH_ID = "streaming.sql.batchId"        # local properties Spark's micro-batch sets
_QUERY_ID = "sql.streaming.queryId"


@dataclass
class TaskTxn:
    """Who a task writes as: its transactional id, its Spark partition and (streaming) the
    micro-batch id."""
    transactional_id: str
    partition: int
    batch: int | None


def batch_prefix() -> str:
    """The prefix of one ``df.write``'s transactional ids (chosen on the driver)."""
    return f"kcodec-spark-write-{uuid.uuid4().hex[:12]}"


def task_txn(prefix: str | None, streaming: bool) -> TaskTxn:
    """The transactional id of the running Spark task (see the module docstring)."""
    from pyspark import TaskContext

    tc = TaskContext.get()
    if tc is None:
        raise RuntimeError("the exactly-once sink writes from Spark tasks only")
    part = tc.partitionId()
    batch = None
    if streaming:
        text = tc.getLocalProperty(_BATCH_ID)
        query = tc.getLocalProperty(_QUERY_ID)
        if text is None or (prefix is None and query is None):
            raise RuntimeError(
                "the exactly-once stream sink needs the micro-batch id and the query id "
                f"Spark gives its tasks ({_BATCH_ID}, {_QUERY_ID}); this Spark gave none: "
                "set kcodec.transactionalIdPrefix and use a micro-batch trigger")
        batch = int(text)
        if prefix is None:
            prefix = f"kcodec-spark-{query}"
    if prefix is None:
        raise RuntimeError("a df.write with exactly_once needs its prefix from the driver")
    return TaskTxn(f"{prefix}-{part}", part, batch)


def committed_batch(admin: Any, transactional_id: str, topics: list[str]) -> int:
    """The newest micro-batch id a transaction of ``transactional_id`` committed (-1: none),
    from the marker offsets of the group of the same name on partition 0 of ``topics``."""
    got = admin.committed_offsets(transactional_id, topics) if topics else {}
    return max((off for tp, off in got.items() if tp.partition == 0), default=-1)


def existing(admin: Any, topics: list[str]) -> list[str]:
    """``topics`` without those that do not exist yet (the sink's first write creates them:
    they hold no marker), from Metadata requests that do not wait for them (the offset
    look-ups would wait a whole API timeout for a topic being created). Another error
    keeps the topic: the look-ups wait it out."""
    from kcodec.client.errors import KafkaError
    from kcodec.protocol import ErrorCode

    def there(ts: list[str]) -> bool:
        try:
            admin.describe_cluster(ts)
        except KafkaError as exc:
            return exc.code != ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        return True
    if there(topics):
        return list(topics)
    return [t for t in topics if there([t])] if len(topics) > 1 else []


#: what ``replayed`` finds besides a prepared state: nothing of the batch, or the batch committed
WRITE, COMMITTED = "write", "committed"
#: a recorded state no transaction has: ``complete_transaction`` with it aborts
ABORT_STATE = ""


def replayed(admin: Any, transactional_id: str, topics: list[str], batch: int,
             kept: Any) -> str:
    """What a streaming task finds of its micro-batch ``batch`` under ``transactional_id``:
    COMMITTED (the marker says this batch or a later one), the state (text) of ``kept``
    (the transaction its ``init_transactions(keep_prepared_txn=True)`` kept, or None) when
    that one holds its marker -- it was prepared, and the driver's commit commits it -- else
    WRITE."""
    topics = existing(admin, topics)
    if not topics:
        return WRITE
    if committed_batch(admin, transactional_id, topics) >= batch:
        return COMMITTED
    if kept is not None and any(tp.partition == 0 for tp in
                                admin.unstable_offsets(transactional_id, topics)):
        return str(kept)
    return WRITE


def markers(topics: list[str], batch: int) -> dict[tuple[str, int], tuple[int, str]]:
    """What a streaming task commits with its transaction: the batch id on partition 0 of
    each topic it wrote."""
    return {(t, 0): (batch, MARKER_METADATA) for t in topics}


async def _commit_all(admin: Any, txns: list[tuple[str, str, list[str]]], batch: int | None
                      ) -> list[str]:
    """Commit each (id, prepared state, topics); the ids that were neither committed now
    nor (by their marker) before."""
    async def one(tid: str, state: str, topics: list[str]) -> str | None:
        if await admin.complete_prepared_transaction(tid, state):
            return None
        if batch is not None:
            got = await admin.committed_offsets(tid, topics)
            if max((o for tp, o in got.items() if tp.partition == 0), default=-1) >= batch:
                return None        # committed already (a commit retried after a crash)
        return tid
    lost = await asyncio.gather(*(one(*t) for t in txns))
    return [t for t in lost if t is not None]


def commit_all(client: dict[str, Any], bootstrap: str, txns: list[tuple[str, str, list[str]]],
               batch: int | None) -> None:
    """The driver's commit: every prepared transaction committed. ``RuntimeError`` naming
    the transactions that were no longer there to commit (aborted: fenced by another
    attempt, or by hand): the write fails, and a micro-batch is then replayed."""
    if not txns:
        return
    from kcodec.client import AsyncAdmin

    async def go() -> list[str]:
        admin = AsyncAdmin(bootstrap_servers=bootstrap, **admin_config(client))
        try:
            return await _commit_all(admin, txns, batch)
        finally:
            await admin.close()
    lost = asyncio.run(go())
    if lost:
        raise RuntimeError(
            f"{len(lost)} of {len(txns)} prepared transactions were aborted before the "
            f"driver's commit ({', '.join(sorted(lost)[:5])}{', ...' if len(lost) > 5 else ''}):"
            " their rows are not written; the others are committed"
            + ("; restarting the query from its checkpoint writes the missing ones"
               if batch is not None else ""))


#: how long the driver's abort keeps looking for open transactions of the write's tasks. When
#: one task fails, Spark fails the job and cancels the others, but a task still writing may
#: go on for a while (a Python worker is killed after ``spark.python.task.killTimeout``, 2 s
#: by default) and prepare its transaction after the abort's first pass: that one stayed
#: open, and a prepared transaction has no timeout to end it.
ABORT_SWEEP_S = 3.0


def abort_all(client: dict[str, Any], bootstrap: str, prepared: list[tuple[str, str]],
              others: list[str], prefix: str | None = None,
              sweep_s: float = ABORT_SWEEP_S) -> None:
    """The driver's abort: the prepared transactions aborted; ``others`` (ids of tasks that
    failed or did not finish) terminated, so no open transaction holds back the readers.
    With ``others`` and the write's ``prefix``, the transactions of ``<prefix>-<n>`` ids
    still open are terminated for ``sweep_s`` seconds more, every 0.25 s: a task cancelled
    mid-write may open or prepare its transaction after the first pass."""
    if not prepared and not others:
        return
    from kcodec.client import AsyncAdmin

    async def go() -> None:
        admin = AsyncAdmin(bootstrap_servers=bootstrap, **admin_config(client))
        try:
            await asyncio.gather(
                *(admin.complete_prepared_transaction(t, s, commit=False) for t, s in prepared),
                *(admin.force_terminate_transaction(t) for t in others))
            if prefix is None or not others:
                return
            pattern = f"{re.escape(prefix)}-[0-9]+"
            end = asyncio.get_running_loop().time() + sweep_s
            while True:
                left = await admin.list_transactions(states=["Ongoing"], pattern=pattern)
                await asyncio.gather(*(admin.force_terminate_transaction(t.transactional_id)
                                       for t in left))
                if left:
                    log.info("kcodec sink: terminated %d transactions of tasks that went on "
                             "after the write failed: %s", len(left),
                             ", ".join(sorted(t.transactional_id for t in left)))
                if asyncio.get_running_loop().time() >= end:
                    return
                await asyncio.sleep(0.25)
        finally:
            await admin.close()
    try:
        asyncio.run(go())
    except Exception as exc:   # the write fails anyway: say what is left open
        log.warning("kcodec sink: aborting the write's transactions failed (%s); "
                    "'kcodec transactions list --state Ongoing' shows what is left open", exc)


def admin_config(client: dict[str, Any]) -> dict[str, Any]:
    """The producer settings that also make sense for an admin client."""
    from kcodec.spark.security import materialize

    kw = materialize(client)
    keep = {"client_id", "request_timeout_ms", "socket_connection_setup_timeout_ms",
            "retry_backoff_ms", "reconnect_backoff_ms", "reconnect_backoff_max_ms",
            "connections_max_idle_ms", "metadata_max_age_ms", "api_timeout_ms"}
    return {k: v for k, v in kw.items()
            if k in keep or k.startswith(("security_", "sasl_", "ssl_"))}
