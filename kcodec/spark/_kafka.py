"""The Kafka side of the ``kcodec`` source, without pyspark: planning offset ranges on the
driver (metadata and ListOffsets) and reading one range as Spark Arrow batches on a worker
(Fetch, ``decode_columns(layout="spark")``, ``to_spark()``).

Offsets are Spark's: a range ``[start, end)`` holds the records with ``start <= offset <
end``; ``end`` is the "next offset" that ListOffsets LATEST answers. Gaps inside a range
(transaction markers, compaction) are normal; data gone before ``start`` (retention) is data
loss and follows ``failOnDataLoss``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Iterator
from typing import Any

from kcodec.spark import reach
from kcodec.spark.options import EARLIEST, LATEST, OffsetSpec, SourceOptions
from kcodec.spark.security import materialize
from kcodec.spark.taskmetrics import TaskStats, report

__all__ = ["KafkaRange", "DataLossError", "plan_ranges", "split_ranges", "read_range",
           "topic_partitions", "list_offsets", "resolve"]

#: where each read task says what it did (kcodec.spark.taskmetrics)
log = logging.getLogger("kcodec.spark.source")


class DataLossError(RuntimeError):
    """Offsets the query needs are gone (retention, a deleted or recreated topic); raised
    when failOnDataLoss is true (the default), as Spark's connector does."""


@dataclasses.dataclass(frozen=True)
class KafkaRange:
    """One input partition: the records of ``topic``/``partition`` with offsets in
    ``[start, end)``. Picklable; holds no client."""

    topic: str
    partition: int
    start: int
    end: int

    @property
    def size(self) -> int:
        return max(self.end - self.start, 0)


def admin_kwargs(opts: SourceOptions) -> dict[str, Any]:
    """The settings an Admin of these source options is made with."""
    from kcodec.client.config import AdminConfig

    names = {f.name for f in dataclasses.fields(AdminConfig)}
    kw = {k: v for k, v in materialize(opts.client).items() if k in names}
    kw.setdefault("client_id", "kcodec-spark")
    return {"bootstrap_servers": opts.bootstrap, **kw}


def topic_partitions(admin: Any, opts: SourceOptions) -> list[tuple[str, int]]:
    """The subscribed topic-partitions, from metadata (subscribe / subscribePattern) or as
    assigned."""
    if opts.assign is not None:
        return list(opts.assign)
    if opts.pattern is not None:
        topics = opts.topics_of(admin.list_topics())
    else:
        topics = list(opts.subscribe or [])
    if not topics:
        return []
    # every topic's metadata (a missing subscribed topic has no partitions, as in Spark)
    wanted = set(topics)
    out: list[tuple[str, int]] = []
    for t in admin.describe_cluster(None).topics:
        if t.name in wanted:
            out.extend((t.name, p.partition) for p in t.partitions)
    return sorted(out)


def list_offsets(admin: Any, tps: list[tuple[str, int]], spec: Any) -> dict[tuple[str, int], int]:
    from kcodec.client import TopicPartition

    if not tps:
        return {}
    got = admin.list_offsets([TopicPartition(t, p) for t, p in tps], spec)
    return {(tp.topic, tp.partition): off for tp, off in got.items()}


def resolve(admin: Any, spec: OffsetSpec, tps: list[tuple[str, int]],
            earliest: dict, latest: dict, *, starting: bool, strategy: str = "error"
            ) -> dict[tuple[str, int], int]:
    """The offset of each partition for ``spec`` (timestamps through ListOffsets by time)."""
    if spec.kind == "earliest":
        return {tp: earliest[tp] for tp in tps}
    if spec.kind == "latest":
        return {tp: latest[tp] for tp in tps}
    if spec.kind == "offsets":
        missing = sorted(set(tps) - set(spec.offsets))
        if missing and starting is not None:
            names = ", ".join(f"{t}[{p}]" for t, p in missing)
            raise ValueError(f"{'startingOffsets' if starting else 'endingOffsets'} gives no "
                             f"offset for {names}: name every partition of the subscription")
        out = {}
        for tp in tps:
            off = spec.offsets[tp]
            out[tp] = earliest[tp] if off == EARLIEST else latest[tp] if off == LATEST else off
        return out
    if spec.kind == "timestamps":
        missing = sorted(set(tps) - set(spec.offsets))
        if missing:
            names = ", ".join(f"{t}[{p}]" for t, p in missing)
            raise ValueError(f"offsets by timestamp: no timestamp for {names}")
        want = {tp: spec.offsets[tp] for tp in tps}
    else:
        want = {tp: spec.timestamp for tp in tps}
    out = {}
    for ts in sorted(set(want.values())):
        group = [tp for tp in tps if want[tp] == ts]
        for tp, off in list_offsets(admin, group, ts).items():
            if off < 0:     # no record at or after the timestamp
                if starting and strategy == "error":
                    raise ValueError(
                        f"no offset of {tp[0]}[{tp[1]}] has a timestamp at or after {ts} (set "
                        "startingOffsetsByTimestampStrategy=latest to start at the end instead)")
                off = latest[tp]
            out[tp] = off
    return out


def plan_ranges(opts: SourceOptions) -> list[KafkaRange]:
    """The batch query's offset ranges (one per partition with data), before splitting."""
    from kcodec.client import Admin

    kw = admin_kwargs(opts)
    with reach.named_cause(opts.bootstrap, kw, reach.DRIVER), Admin(**kw) as admin:
        tps = topic_partitions(admin, opts)
        if not tps:
            return []
        earliest = list_offsets(admin, tps, "earliest")
        latest = list_offsets(admin, tps, "latest")
        start = resolve(admin, opts.starting, tps, earliest, latest, starting=True,
                        strategy=opts.timestamp_strategy)
        assert opts.ending is not None
        end = resolve(admin, opts.ending, tps, earliest, latest, starting=False)
    out = []
    for tp in tps:
        s, e = start[tp], end[tp]
        if s < earliest[tp]:
            if opts.fail_on_data_loss:
                raise DataLossError(
                    f"{tp[0]}[{tp[1]}]: offsets {s}..{earliest[tp] - 1} are gone (the earliest "
                    f"offset is {earliest[tp]}); set failOnDataLoss=false to skip them")
            s = earliest[tp]
        if e > latest[tp]:
            raise ValueError(f"endingOffsets: {tp[0]}[{tp[1]}] ends at {latest[tp]}, before "
                             f"the requested {e}")
        if e > s:
            out.append(KafkaRange(tp[0], tp[1], s, e))
    return out


def split_ranges(ranges: list[KafkaRange], min_partitions: int | None,
                 max_records: int | None) -> list[KafkaRange]:
    """Split large ranges as Spark does: first to at most ``maxRecordsPerPartition``
    offsets each, then, while there are fewer than ``minPartitions``, each range into
    parts in proportion to its share of all offsets (``minPartitions`` parts in all, where
    the ranges have that many offsets; Spark's rounding can give one or two fewer)."""
    out = list(ranges)
    if max_records:
        tmp = []
        for r in out:
            pieces = -(-r.size // max_records)
            tmp.extend(_cut(r, pieces))
        out = tmp
    if min_partitions and len(out) < min_partitions:
        total = sum(r.size for r in out)
        # each range's share of minPartitions, rounded so the shares add up to it (largest
        # remainders first), at least one each: never fewer tasks than asked for
        ideal = [r.size * min_partitions / total if total else 1.0 for r in out]
        parts = [max(1, int(x)) for x in ideal]
        left = min_partitions - sum(parts)
        for i in sorted(range(len(out)), key=lambda i: int(ideal[i]) - ideal[i]):
            if left <= 0:
                break
            parts[i] += 1
            left -= 1
        tmp = []
        for r, k in zip(out, parts, strict=False):
            tmp.extend(_cut(r, k))
        out = tmp
    return out


def _cut(r: KafkaRange, parts: int) -> list[KafkaRange]:
    if parts <= 1 or r.size <= 1:
        return [r]
    parts = min(parts, r.size)
    out = []
    for i in range(parts):
        s = r.start + r.size * i // parts
        e = r.start + r.size * (i + 1) // parts
        out.append(KafkaRange(r.topic, r.partition, s, e))
    return out


# ---------------------------------------------------------------------------------------------
# reading one range (on a worker)


def read_range(r: KafkaRange, opts: SourceOptions) -> Iterator[Any]:
    """The records of ``r`` as pyarrow RecordBatches in Spark's schema, in offset order.

    A fresh client per call (readers are pickled to the workers without one). Fails with a
    clear error, never partial data silently: a broker that stays unreachable or answers
    nothing new for ``kafkaConsumer.pollTimeoutMs``, data lost to retention (with
    failOnDataLoss), a broker error that is not retriable.

    Pipelined: a thread fetches and decodes the next batch while Spark takes the slices of
    the current one (at most one decoded batch waits, so memory stays bounded). Closing the
    generator early (a ``limit()``) cancels the fetch in flight and closes the client.
    """
    from kcodec.spark.workers import warn_if_pure

    warn_if_pure()
    with reach.named_cause(opts.bootstrap, materialize(opts.client), reach.EXECUTOR):
        reader = _RangeReader(r, opts)
        stats = reader.stats
        pre = _Prefetch(reader)
        done = False
        try:
            while True:
                rb = pre.get()
                if rb is None:
                    break
                stats.records += rb.num_rows
                yield from _slices(rb)
            done = True
        except GeneratorExit:      # closed early (a limit): what it read is still its work
            done = True
            raise
        finally:
            pre.stop()
            if done:               # (a failed task reports nothing: Spark runs it again)
                report(stats, opts.task_metrics, log)


class _Prefetch:
    """Runs a ``_RangeReader`` on its own event loop in a thread, one batch ahead."""

    def __init__(self, reader: Any) -> None:
        import queue
        import threading

        self.reader = reader
        self.q: Any = queue.Queue(maxsize=1)
        self.halt = threading.Event()
        self.loop = asyncio.new_event_loop()
        self.task: Any = None
        self.thread = threading.Thread(target=self._run, name="kcodec-spark-fetch",
                                       daemon=True)
        self.thread.start()

    def _put(self, item: tuple[bool, Any]) -> None:
        import queue

        while not self.halt.is_set():
            try:
                self.q.put(item, timeout=0.05)
                return
            except queue.Full:
                continue

    def _run(self) -> None:
        loop = self.loop
        asyncio.set_event_loop(loop)
        try:
            while not self.halt.is_set():
                self.task = loop.create_task(self.reader.next())
                if self.halt.is_set():
                    self.task.cancel()
                try:
                    rb = loop.run_until_complete(self.task)
                except BaseException as exc:   # noqa: BLE001 - handed to the consumer
                    if not self.halt.is_set():
                        self._put((False, exc))
                    return
                self._put((True, rb))
                if rb is None:
                    return
        finally:
            try:
                loop.run_until_complete(self.reader.close())
            except Exception:   # noqa: BLE001 - closing after an error: the first one counts
                pass
            loop.close()

    def get(self) -> Any:
        import queue

        while True:
            try:
                ok, v = self.q.get(timeout=0.5)
            except queue.Empty:
                if not self.thread.is_alive() and self.q.empty():
                    raise RuntimeError(
                        "kcodec: the fetch thread ended without an answer") from None
                continue
            if not ok:
                raise v
            return v

    def stop(self) -> None:
        self.halt.set()
        task = self.task
        if task is not None and self.thread.is_alive():
            try:
                self.loop.call_soon_threadsafe(task.cancel)
            except RuntimeError:     # the loop closed meanwhile
                pass
        self.thread.join()


# Spark takes a Python source's Arrow batches best in pieces of a few MiB: a fetch decoded
# whole (tens of MiB) makes the JVM wait for all of it before it starts, and allocate it
# at once; slices share the fetch's memory (no copy). Measured on count() of 1M records
# (bench/README.md): 4.2-4.6 s with one batch per fetch, 2.2-2.9 s in 50,000-row slices.
_SLICE_BYTES = 4 << 20
_SLICE_ROWS = (4096, 65536)


def _slices(rb: Any) -> Iterator[Any]:
    n = rb.num_rows
    if not n:
        return
    size = rb.nbytes
    step = _SLICE_ROWS[1] if size <= 0 else n * _SLICE_BYTES // size
    step = min(max(step, _SLICE_ROWS[0]), _SLICE_ROWS[1])
    if n <= step:
        yield rb
        return
    for i in range(0, n, step):
        yield rb.slice(i, step)


_FIRST_FETCH_BYTES = 1 << 20
_CHUNK_BYTES = 1 << 20


def _chunks(blob: Any, size: int) -> list[Any]:
    """``blob`` cut at batch boundaries into pieces of about ``size`` bytes (views, no
    copy). The entries are walked by their headers (kcodec.records.header); one that does
    not fit (a partial last batch, or garbage) ends the cutting there, and the rest goes
    whole to ``decode_columns``, which knows what to make of it."""
    from kcodec.records.header import iter_entries

    view = memoryview(blob)
    n = len(view)
    out = []
    start = 0
    for pos, esize, _magic in iter_entries(view):
        end = pos + esize
        if end - start >= size and end < n:
            out.append(view[start:end])
            start = end
    out.append(view[start:])
    return out


class _RangeReader:
    def __init__(self, r: KafkaRange, opts: SourceOptions) -> None:
        self.r = r
        self.opts = opts
        self.pos = r.start
        self.cluster: Any = None
        self.pending: list[tuple[Any, int]] = []    # fetched pieces not decoded yet
        # larger fetches than a consumer's 1 MiB default: a task reads one range straight
        # through, and fewer, larger Arrow batches cost Spark less
        self.cap = int(opts.client.get("max_partition_fetch_bytes", 8 << 20))
        # the first fetch small, so that Spark has rows to take while the thread fetches and
        # decodes the rest (read_range's pipeline); the next ones at the full size
        self.max_bytes = min(self.cap, _FIRST_FETCH_BYTES)
        self.stats = TaskStats("read", r.topic, r.partition, r.start, r.end)

    def _config(self) -> Any:
        from kcodec.client.config import ConsumerConfig

        names = {f.name for f in dataclasses.fields(ConsumerConfig)}
        kw = {k: v for k, v in materialize(self.opts.client).items() if k in names}
        kw.setdefault("client_id", "kcodec-spark")
        kw.setdefault("fetch_max_wait_ms", 100)
        return ConsumerConfig.from_kwargs(bootstrap_servers=self.opts.bootstrap, **kw)

    async def close(self) -> None:
        if self.cluster is not None:
            await self.cluster.close()

    async def next(self) -> Any:
        """The next batch of the range (maybe empty), or None when the range is done."""
        from kcodec.client.consumer.fetch_range import RETRIABLE
        from kcodec.client.errors import BrokerNotAvailableError, KafkaError, KafkaTimeoutError
        from kcodec.client.net.cluster import Cluster
        from kcodec.protocol import ErrorCode

        r, opts = self.r, self.opts
        if self.pending:
            blob, lo_pos = self.pending.pop(0)
            return self._columns(blob, lo_pos)
        if self.pos >= r.end:
            return None
        if self.cluster is None:
            self.config = self._config()
            self.cluster = Cluster(self.config)
        cfg = self.config
        timeout = opts.poll_timeout_ms / 1000
        deadline = time.monotonic() + timeout
        backoff = cfg.retry_backoff_ms / 1000
        while True:
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"{r.topic}[{r.partition}]: no records for offsets {self.pos}..{r.end - 1} "
                    f"within kafkaConsumer.pollTimeoutMs={opts.poll_timeout_ms}")
            try:
                t0 = time.perf_counter()
                part = await self.cluster.call(lambda: self._fetch(cfg), "Fetch",
                                               deadline=deadline)
                self.stats.request((time.perf_counter() - t0) * 1000)
            except (BrokerNotAvailableError, KafkaTimeoutError) as exc:
                # a broker restarting, or a leader moving: go on trying, as Java's consumer
                # polls on, until the poll timeout passes without progress
                if time.monotonic() + backoff > deadline:
                    raise BrokerNotAvailableError(
                        f"{r.topic}[{r.partition}]: no records for offsets {self.pos}.."
                        f"{r.end - 1} within kafkaConsumer.pollTimeoutMs="
                        f"{opts.poll_timeout_ms}: {exc}", retriable=False) from exc
                self.cluster.invalidate()
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, max(cfg.reconnect_backoff_max_ms / 1000, 0.05))
                continue
            backoff = cfg.retry_backoff_ms / 1000
            code = part.error_code
            if code == ErrorCode.OFFSET_OUT_OF_RANGE:   # gone, or beyond the end
                if await self._lost(part):
                    return None
                continue
            if code in RETRIABLE:
                self.cluster.invalidate()
                await asyncio.sleep(cfg.retry_backoff_ms / 1000)
                continue
            if code:
                raise KafkaError(code, f"fetch {r.topic}[{r.partition}] at {self.pos}")
            data = part.records
            if data:
                self.stats.bytes += len(data)
            if not data:
                hw = part.high_watermark
                if 0 <= hw <= self.pos and hw < r.end:
                    # the partition ends before the range does: truncated, or recreated
                    if await self._lost(part, end=hw):
                        return None
                await asyncio.sleep(0.01)
                continue
            log_start = getattr(part, "log_start_offset", -1)
            rb, nxt = self._decode(part, data)
            if nxt <= self.pos:
                self.pending = []
                # one batch larger than the fetch size: ask for more bytes
                self.max_bytes = min(self.max_bytes * 4, 1 << 30)
                continue
            if log_start > self.pos and rb.num_rows and \
                    rb.column("offset")[0].as_py() > self.pos:
                await self._data_loss(self.pos, log_start)
            self.pos = nxt
            self.max_bytes = max(self.max_bytes, self.cap)
            return rb

    async def _fetch(self, cfg: Any) -> Any:
        from kcodec.client.consumer.fetch_range import fetch_partition

        r = self.r
        return await fetch_partition(self.cluster, r.topic, r.partition, self.pos,
                                     max_bytes=max(cfg.fetch_max_bytes, self.max_bytes),
                                     partition_max_bytes=self.max_bytes,
                                     max_wait_ms=cfg.fetch_max_wait_ms,
                                     read_committed=self.opts.read_committed)

    def _decode(self, part: Any, data: Any) -> tuple[Any, int]:
        from kcodec.client.consumer.fetch_range import visible_range

        r = self.r
        blob, nxt = visible_range(data, self.pos, part.aborted_transactions,
                                  self.opts.read_committed)
        # decoded a piece at a time (whole batches of about _CHUNK_BYTES): the first piece
        # now, the others on the next calls, so Spark takes rows while the rest decodes
        chunks = _chunks(blob, _CHUNK_BYTES)
        self.pending = [(c, self.pos) for c in chunks[1:]]
        rb = self._columns(chunks[0], self.pos)
        return rb, min(nxt, r.end) if nxt >= r.end else nxt

    def _columns(self, blob: Any, lo_pos: int) -> Any:
        import numpy as np

        from kcodec.records import decode_columns

        r = self.r
        cols = decode_columns(blob, validate_crc=self.config.check_crcs, layout="spark")
        rb = cols.to_spark(r.topic, r.partition, include_headers=self.opts.include_headers)
        offs = cols.offset
        lo = int(np.searchsorted(offs, lo_pos)) if len(offs) else 0
        hi = int(np.searchsorted(offs, r.end)) if len(offs) else 0
        if lo or hi < len(offs):
            rb = rb.slice(lo, hi - lo)
        return rb

    async def _lost(self, part: Any, end: int | None = None) -> bool:
        """The fetch offset is out of range: data loss (or the partition shrank). Returns
        True when the range is finished, else moves on to the earliest offset."""
        from kcodec.client import TopicPartition
        from kcodec.client.consumer import EARLIEST as E
        from kcodec.client.consumer import LATEST as L
        from kcodec.client.consumer import list_offsets as lo

        r = self.r
        tp = TopicPartition(r.topic, r.partition)
        earliest = (await lo(self.cluster, [tp], E))[tp]
        latest = (await lo(self.cluster, [tp], L))[tp]
        if self.pos < earliest:
            await self._data_loss(self.pos, earliest)
            self.pos = earliest
            return self.pos >= r.end
        # at or past the end of the log, yet the range goes further
        hw = latest if end is None else end
        await self._data_loss(hw, r.end, gone_at_end=True)
        return True

    async def _data_loss(self, lo: int, hi: int, gone_at_end: bool = False) -> None:
        r = self.r
        what = (f"{r.topic}[{r.partition}]: the log ends at {lo}, before the planned end "
                f"{hi} (truncated or recreated)" if gone_at_end else
                f"{r.topic}[{r.partition}]: offsets {lo}..{hi - 1} are gone (the earliest "
                f"offset is now {hi})")
        if self.opts.fail_on_data_loss:
            raise DataLossError(what + "; set failOnDataLoss=false to skip them")
